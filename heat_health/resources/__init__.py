"""Resource types of heat-health, loaded by heat-engine via plugin_dirs.

heat-engine imports the one-line shim from ``etc/heat-health``, which
re-exports ``resource_mapping`` from here. Each resource module of this
package declares its own ``resource_mapping()``; this merges them.
"""

import importlib
import pkgutil


def resource_mapping():
    mapping = {}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module('%s.%s' % (__name__,
                                                    module_info.name))
        mapping.update(getattr(module, 'resource_mapping', dict)())
    return mapping
