"""Options of the ``[heat_health]`` group in heat.conf.

heat-health runs inside a Heat deployment and reads Heat's own configuration
file, so everything it adds lives in one group of its own.
"""

from oslo_config import cfg

GROUP = 'heat_health'

heat_health_opts = [
    cfg.StrOpt('topic',
               default='heat-health',
               help='RPC topic served by heat-health-engine on the message '
                    'bus Heat uses (same transport and exchange).'),
    cfg.IntOpt('rpc_response_timeout',
               default=60, min=1,
               help='Seconds the API waits for heat-health-engine to answer '
                    'a mark_unhealthy call before answering 503.'),
    cfg.IntOpt('max_nested_depth',
               default=5, min=0,
               help='How many levels of nested stacks below the addressed '
                    'stack are searched when a resource is named by the '
                    'physical id of a member of a nested stack '
                    '(0 searches only the addressed stack).'),
]


def register_opts(conf=cfg.CONF):
    conf.register_opts(heat_health_opts, group=GROUP)


def list_opts():
    """Entry point for oslo-config-generator."""
    return [(GROUP, heat_health_opts)]


register_opts()
