"""Sphinx configuration of heat-health's documentation."""

project = 'heat-health'
copyright = 'heat-health developers'

extensions = [
    'oslo_config.sphinxext',
    'oslo_policy.sphinxext',
]
try:
    import openstackdocstheme  # noqa: F401
except ImportError:
    html_theme = 'alabaster'
else:
    extensions.append('openstackdocstheme')
    html_theme = 'openstackdocs'
    openstackdocs_repo_name = 'x/heat-health'
    openstackdocs_use_storyboard = False
    openstackdocs_auto_name = False

master_doc = 'index'
exclude_patterns = []
