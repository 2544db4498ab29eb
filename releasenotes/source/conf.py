"""Sphinx configuration of heat-health's release notes (reno)."""

project = 'heat-health Release Notes'
copyright = 'heat-health developers'

extensions = ['reno.sphinxext']
try:
    import openstackdocstheme  # noqa: F401
except ImportError:
    html_theme = 'alabaster'
else:
    extensions.append('openstackdocstheme')
    html_theme = 'openstackdocs'
    openstackdocs_repo_name = 'x/heat-health'
    openstackdocs_auto_name = False

master_doc = 'index'
