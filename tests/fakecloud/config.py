"""fakecloud's options, read from one file with oslo.config.

The same file carries [keystone_authtoken] for keystonemiddleware and the
oslo.messaging options ([DEFAULT] transport_url,
[oslo_messaging_notifications] driver), so a deployment writes one file.
"""

from oslo_config import cfg
import oslo_messaging

# fakecloud is test infrastructure: it never listens beyond the loopback.
BIND_HOST = '127.0.0.1'

OPTS = [
    cfg.PortOpt('api_port', default=8774,
                help='Port of the compute, image and network APIs.'),
    cfg.PortOpt('health_port', default=8775,
                help='Port of the per-server health endpoints.'),
    cfg.StrOpt('public_url',
               help='Base URL written into links; default '
                    'http://127.0.0.1:<api_port>.'),
    cfg.StrOpt('auth_strategy', default='keystone',
               choices=['keystone', 'noauth'],
               help='keystone: validate tokens with keystonemiddleware; '
                    'noauth: trust X-Project-Id, X-User-Id and X-Roles '
                    'headers (development only).'),
    cfg.FloatOpt('task_delay', default=1.0, min=0,
                 help='Seconds a server spends in the intermediate states '
                      'of an operation (BUILD, REBOOT, deleting, ...).'),
    cfg.IntOpt('max_limit', default=1000, min=1,
               help='Most items in one list answer, as Nova\'s '
                    '[api] max_limit.'),
    cfg.StrOpt('compute_host', default='fakecloud-compute',
               help='Host name the servers run on.'),
    cfg.StrOpt('notification_format', default='versioned',
               choices=['versioned', 'unversioned', 'both'],
               help='As Nova\'s [notifications] notification_format.'),
    cfg.StrOpt('notify_on_state_change', default='vm_state',
               choices=['none', 'vm_state', 'vm_and_task_state'],
               help='When to send instance.update, as Nova\'s option of '
                    'that name.'),
    cfg.IntOpt('reclaim_instance_interval', default=0, min=0,
               help='Seconds a deleted server stays SOFT_DELETED before '
                    'it is reclaimed; 0 deletes at once (Nova\'s default).'),
    cfg.FloatOpt('hang_cap', default=300, min=0,
                 help='Most seconds a hung server\'s health endpoint holds '
                      'a request before it closes the connection.'),
    cfg.StrOpt('fault_driver_file',
               help='JSON file {compute host: URL of its fault driver\'s '
                    'control API} of the real Nova the deployment may run '
                    '(read at each check): the health endpoint of a server '
                    'fakecloud does not hold asks the computes.'),
    cfg.IntOpt('deleted_servers_kept', default=100000, min=0,
               help='Deleted servers remembered for changes-since.'),
    cfg.IntOpt('timeline_kept', default=100000, min=1,
               help='Newest entries of GET /fakecloud/timeline kept.'),
    cfg.BoolOpt('debug', default=False, help='Log at DEBUG.'),
]


def load(argv):
    """Return a ConfigOpts parsed from the command line arguments."""
    # Nova publishes on the exchange "nova": set before the options exist.
    oslo_messaging.set_transport_defaults('nova')
    conf = cfg.ConfigOpts()
    conf.register_opts(OPTS)
    conf(argv, project='fakecloud', prog='fakecloud',
         default_config_files=[])
    if not conf.public_url:
        conf.set_override('public_url', 'http://%s:%d' % (BIND_HOST,
                                                          conf.api_port))
    return conf
