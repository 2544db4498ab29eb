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
    return [(GROUP, heat_health_opts),
            (COORDINATION_GROUP, coordination_opts)]


register_opts()


# Detectors: Nova notifications (LIFECYCLE_EVENTS) and poll URL checks
# (NODE_STATUS_POLL_URL).  Kept in a list of their own, added to the group.
detector_opts = [
    cfg.StrOpt('nova_notification_exchange',
               default='nova',
               help='Exchange Nova publishes its notifications on.'),
    cfg.StrOpt('nova_versioned_topic',
               default='versioned_notifications',
               help='Topic of Nova\'s versioned notifications '
                    '(instance.*). Empty: do not listen to them.'),
    cfg.StrOpt('nova_legacy_topic',
               default='notifications',
               help='Topic of Nova\'s legacy notifications '
                    '(compute.instance.*). Empty: do not listen to them.'),
    cfg.StrOpt('notification_pool',
               default='heat-health-engine',
               help='Listener pool of heat-health-engine on Nova\'s '
                    'notification topics. All engines share it, so each '
                    'notification is handled once, and other consumers of '
                    'the same topics (with pools of their own) still get '
                    'every notification.'),
    cfg.IntOpt('notification_workers',
               default=2, min=0,
               help='Processes of each engine that listen to Nova\'s '
                    'notifications, all in the engine\'s pool: one drains '
                    'a few thousand notifications a second, nearly all of '
                    'that in the messaging library. 0 listens in the '
                    'engine process itself.'),
    cfg.IntOpt('notification_batch_size',
               default=100, min=1,
               help='Most Nova notifications handed to the listener at '
                    'once; batches cost less per notification.'),
    cfg.FloatOpt('notification_batch_timeout',
                 default=0.05, min=0.001,
                 help='Seconds the listener waits to fill a batch of Nova '
                      'notifications: the most a lone notification is '
                      'delayed.'),
    cfg.IntOpt('poll_url_max_workers',
               default=16, min=1,
               help='Most poll URL checks running at the same time in one '
                    'engine.'),
    cfg.IntOpt('poll_url_max_workers_per_project',
               default=0, min=0,
               help='Most poll URL checks of one project running at the '
                    'same time in one engine; its further checks wait '
                    'for one of its own to end, so one project\'s hung '
                    'servers never hold every worker. 0: a quarter of '
                    'poll_url_max_workers (at least 1).'),
    cfg.ListOpt('poll_url_allowed_hosts',
                default=[],
                help='Hosts (names or IP addresses) a poll URL may name '
                     'besides the target server\'s own addresses, e.g. '
                     '127.0.0.1 where servers\' health endpoints are '
                     'served locally. Any other host is refused: the '
                     'engine does not probe arbitrary hosts. A name is '
                     'resolved by the engine, and every address it '
                     'resolves to must be allowed by '
                     'poll_url_allowed_networks. Hosts must be written as '
                     'names or dotted-decimal or bracketed IPv6 '
                     'addresses in poll URLs.'),
    cfg.ListOpt('poll_url_allowed_networks',
                default=[],
                help='Where poll URL checks may connect: networks or '
                     'addresses, each with an optional port '
                     '(10.0.0.0/16, fd00::/64, 10.0.0.0/16:8080, '
                     '127.0.0.1:8775, [::1]:8775). Set it to the ranges '
                     'of the tenant networks. Empty (the default): no '
                     'poll URL is fetched at all, as the engine cannot '
                     'tell a tenant\'s address from its own control '
                     'plane\'s. The host must also be an address of the '
                     'server or in poll_url_allowed_hosts. Loopback, '
                     'link-local (metadata) and IPv6 forms that carry '
                     'an IPv4 address elsewhere are reached only through '
                     'an entry within that range (127.0.0.1:8775, never '
                     'through 0.0.0.0/0); unspecified, multicast, '
                     'broadcast and reserved addresses never.'),
    cfg.IntOpt('webhook_timeout',
               default=10, min=1, max=120,
               help='Seconds a WEBHOOK recovery rung\'s receiver has to '
                    'answer its POST with a 2xx status; otherwise the '
                    'next rung is tried. Its URL follows the same rules '
                    'as poll URLs (poll_url_allowed_hosts and '
                    'poll_url_allowed_networks).'),
]

heat_health_opts.extend(detector_opts)
cfg.CONF.register_opts(detector_opts, group=GROUP)


# Health policy registry (OS::Heat::HealthPolicy registration and leases).

registry_opts = [
    cfg.IntOpt('register_timeout',
               default=10, min=1,
               help='Seconds heat-engine waits for a heat-health-engine to '
                    'confirm the registration of an OS::Heat::HealthPolicy; '
                    'without a confirmation the resource action fails.'),
    cfg.IntOpt('lease_seconds',
               default=30, min=3,
               help='How long a heat-health-engine owns a policy without '
                    'renewing its lease. An engine that dies is replaced '
                    'as owner by another within twice this time.'),
]

# One group, one list: register_opts() and list_opts() cover these too.
heat_health_opts.extend(registry_opts)
cfg.CONF.register_opts(registry_opts, group=GROUP)


# Status polling (NODE_STATUS_POLLING), the monitor loop and the Nova
# credentials they use.

monitor_opts = [
    cfg.IntOpt('max_concurrent_recoveries',
               default=10, min=1,
               help='Most recoveries one heat-health-engine carries out at '
                    'the same time, all policies together (each policy '
                    'has its own max_concurrent too).'),
    cfg.IntOpt('max_concurrent_recoveries_per_project',
               default=5, min=1,
               help='Most recoveries one heat-health-engine carries out at '
                    'the same time for the policies of one project, so '
                    'that one project never takes all of '
                    'max_concurrent_recoveries (the lower of the two '
                    'applies).'),
    cfg.FloatOpt('replacement_gather_seconds',
                 default=0.5, min=0.0, max=30.0,
                 help='Seconds a RECREATE whose resource is marked '
                      'CHECK_FAILED waits for the other RECREATEs of the '
                      'same stack still fencing or marking, so that they '
                      'are all replaced by one stack update. A failure '
                      'found while that update runs joins the next one as '
                      'soon as it ends.'),
    cfg.StrOpt('replacement_update_stack',
               default='own', choices=[
                   ('own', "the stack that holds the server's resource "
                    '(a group\'s nested stack, a member template\'s '
                    'stack): only it is updated, so the replacement '
                    'starts at once and its cost does not grow with the '
                    'rest of the stack; the root keeps attribute values '
                    'it cached (outputs naming the group\'s servers) '
                    'until its next update, as after a scaling signal'),
                   ('root', 'the root stack: every nested stack of the '
                    'tree is updated too, so attributes are fresh, at a '
                    'cost that grows with the size of the tree')],
               help='Which stack heat-engine is asked to update to replace '
                    'the servers a RECREATE marked CHECK_FAILED. An '
                    'AutoScalingGroup without a desired capacity always '
                    'has its own nested stack updated, so that it keeps '
                    'its size.'),
    cfg.FloatOpt('monitor_tick',
                 default=1.0, min=0.1,
                 help='Seconds between two passes of the monitor loop: '
                      'claim policies, run the detectors that are due, '
                      'end graces. Policy intervals are checked at this '
                      'granularity.'),
    cfg.IntOpt('takeover_batch',
               default=300, min=1,
               help='Most policies one heat-health-engine takes over in one '
                    'pass of the monitor loop (those nobody watches first, '
                    'then those the hash ring moves to it from a live '
                    'engine, which watches them until then); the others at '
                    'the next passes. Each server taken over is looked up '
                    'in Nova and its state stored: in batches, every pass '
                    'stays short and the engine keeps its place in the '
                    'coordination group. Set it to at least 1.5 times the '
                    'policies of one engine divided by the engines left '
                    'after one fails: a dead engine\'s policies are then '
                    'taken in one pass, however unevenly the ring shares '
                    'them.'),
    cfg.BoolOpt('log_poll_costs',
                default=False,
                help='Log one line per status poll cycle with what the '
                     'engine spent since the previous one: Nova requests, '
                     'CPU seconds (monitor loop and whole process), '
                     'database statements and rows written, resident '
                     'memory, poll URL checks started and how late they '
                     'started. For sizing a deployment; off by default.'),
    cfg.IntOpt('node_status_resync_cycles',
               default=10, min=1,
               help='Every this many status polls a full listing of all '
                    'servers starts, to catch what the changes-since '
                    'queries missed. It is fetched one page per poll, so a '
                    'poll costs at most two Nova requests; a full listing '
                    'is also made when the engine starts.'),
    cfg.IntOpt('node_power_state_grace',
               default=3, min=0,
               help='Seconds a server Nova shows ACTIVE, with no task, may '
                    'report a power state other than RUNNING before '
                    'NODE_STATUS_POLLING finds it unhealthy. Nova leaves '
                    'such a server ACTIVE for good when the hypervisor '
                    'paused its guest (QEMU does on a full disk) or lost '
                    'it, and only its power state tells; the grace keeps a '
                    'mismatch of a moment, while Nova syncs the power state '
                    'with the hypervisor, from being acted on. It need not '
                    'be shorter than the time Nova takes to stop a guest '
                    'that shut down or crashed: the server is unhealthy as '
                    'SHUTOFF then anyway. 0 judges at once.'),
    cfg.IntOpt('node_host_return_grace',
               default=90, min=0,
               help='Seconds after a compute host reports again (its '
                    'nova-compute restarted, or back from not reporting) '
                    'during which the power state Nova shows for its '
                    'servers is not believed. Nova keeps what it last '
                    'saved until its first power sync after the restart, '
                    'which starts up to periodic_fuzzy_delay (60 s by '
                    'default) later: a guest its restart handling left '
                    'running may still read PAUSED or SHUTDOWN, and '
                    'acting on it would reboot a running guest. Statuses '
                    'and tasks are believed at once. 0 believes the power '
                    'state at once too.'),
    cfg.StrOpt('nova_auth_section',
               default='keystone_authtoken',
               help='Section of heat.conf holding the keystoneauth '
                    'credentials heat-health-engine lists servers with. '
                    'They must be allowed to list all projects\' servers '
                    '(all_tenants), as Heat\'s service user usually is.'),
    cfg.StrOpt('nova_endpoint_type',
               default='public',
               help='Interface of the compute endpoint in the catalog '
                    '(region: region_name_for_services).'),
    cfg.IntOpt('nova_request_timeout',
               default=10, min=1,
               help='Seconds one Nova request may take. A poll that fails '
                    'or times out makes every watched server UNKNOWN for '
                    'that poll, never UNHEALTHY.'),
]

heat_health_opts.extend(monitor_opts)
cfg.CONF.register_opts(monitor_opts, group=GROUP)


# Several engines: membership and partitioning through tooz.

COORDINATION_GROUP = 'coordination'

coordination_opts = [
    cfg.StrOpt('backend_url',
               secret=True,
               help='tooz URL of the coordination backend the '
                    'heat-health-engines of a deployment share, e.g. '
                    'redis://127.0.0.1:6379?membership_timeout=10, '
                    'etcd3+http://..., zookeeper://... Engines join one '
                    'group and split the policies with a consistent hash '
                    'ring; an engine that stops sending heartbeats (dead, '
                    'or its monitor loop hung) leaves the group after the '
                    'backend\'s membership timeout and its policies move to '
                    'the others. Unset: a single engine owns every policy, '
                    'others take over when its leases expire.'),
]

cfg.CONF.register_opts(coordination_opts, group=COORDINATION_GROUP)
