"""OS::Heat::LoadBalancer: an Octavia pool that holds the servers of targets.

The resource creates (or reuses) a load balancer, a listener, a pool and a
health monitor, then makes the pool's members the servers of its targets
with one full-state batch member update (``heat_health.common.lb_members``):
N servers cost one Octavia change and one wait, not N of each. Property
names are those of Senlin's load-balancing policy so its specs port over;
times are in seconds, as Octavia counts them.

Every Octavia call is made from ``check_*_complete``: a 409 or a PENDING_*
status only means "not yet" and the next poll tries again, until
``lb_status_timeout`` has passed in one step.
"""

import collections
import re
import types

from heat.common import exception
from heat.common.i18n import _
from heat.engine import attributes
from heat.engine import constraints
from heat.engine import properties
from heat.engine import resource
from heat.engine import support
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from heat_health.common import departures
from heat_health.common import lb_members
from heat_health.policy import targets as target_resolution
from heat_health.resources import targeting

LOG = logging.getLogger(__name__)

# Servers per Neutron port listing: keeps the query string short.
PORT_QUERY_SIZE = 100


def target_servers(ctxt, stack_id, names):
    """{server_id: path} of the servers the named resources of a stack hold.

    Groups are followed to any depth, as for a health policy, by reading
    Heat's database once.
    """
    query = types.SimpleNamespace(
        id=stack_id, stack_id=stack_id,
        parsed=types.SimpleNamespace(targets=list(names)))
    resolution = target_resolution.Resolver().resolve(ctxt, [query])
    return {place['server_id']: place['path']
            for place in resolution[stack_id].places.values()}


def fixed_addresses(neutron, server_ids):
    """{server_id: [fixed IP, ...]}, listing ports for many servers at once."""
    ids = sorted(server_ids)
    found = collections.defaultdict(list)
    for start in range(0, len(ids), PORT_QUERY_SIZE):
        ports = neutron.list_ports(
            device_id=ids[start:start + PORT_QUERY_SIZE])['ports']
        for port in ports:
            found[port['device_id']].extend(
                ip['ip_address'] for ip in port.get('fixed_ips') or [])
    return found


class _Plan(object):
    """The steps of one create, update or delete, advanced at each poll.

    A step is (name, argument); ``state`` holds what the current step has
    done so far (whether its Octavia call was accepted, what it computed).
    """

    def __init__(self, steps):
        self.steps = collections.deque(steps)
        self.state = None


class LoadBalancer(targeting.TargetsMixin, resource.Resource):
    """An Octavia load balancer whose pool follows servers of this stack.

    ``targets`` names servers or groups (ResourceGroup, AutoScalingGroup,
    InstanceGroup) of the same stack. Each server becomes a member with its
    address on the pool's subnet; a member keeps the weight, admin state and
    backup flag the pool gives it, so a drained member stays drained when
    others change. An existing load balancer, pool or health monitor can be
    reused by id and is never deleted; the members of a reused pool become
    the targets' servers too, and only those this resource recorded are
    removed from it at delete.
    """

    support_status = support.SupportStatus(version='27.0.0')

    default_client_name = 'octavia'

    PROPERTIES = (
        POOL, VIP, HEALTH_MONITOR, LB_STATUS_TIMEOUT, LOADBALANCER,
        AVAILABILITY_ZONE, FLAVOR_ID, TARGETS,
    ) = (
        'pool', 'vip', 'health_monitor', 'lb_status_timeout', 'loadbalancer',
        'availability_zone', 'flavor_id', 'targets',
    )

    _POOL_KEYS = (
        POOL_PROTOCOL, POOL_PROTOCOL_PORT, POOL_SUBNET, POOL_LB_METHOD,
        POOL_ADMIN_STATE_UP, POOL_SESSION_PERSISTENCE, POOL_ID,
    ) = (
        'protocol', 'protocol_port', 'subnet', 'lb_method',
        'admin_state_up', 'session_persistence', 'id',
    )

    _SESSION_KEYS = (SESSION_TYPE, SESSION_COOKIE_NAME) = (
        'type', 'cookie_name')

    _VIP_KEYS = (
        VIP_SUBNET, VIP_NETWORK, VIP_ADDRESS, VIP_CONNECTION_LIMIT,
        VIP_PROTOCOL, VIP_PROTOCOL_PORT, VIP_ADMIN_STATE_UP,
    ) = (
        'subnet', 'network', 'address', 'connection_limit',
        'protocol', 'protocol_port', 'admin_state_up',
    )

    _HM_KEYS = (
        HM_TYPE, HM_DELAY, HM_TIMEOUT, HM_MAX_RETRIES, HM_HTTP_METHOD,
        HM_URL_PATH, HM_EXPECTED_CODES, HM_ADMIN_STATE_UP, HM_ID,
    ) = (
        'type', 'delay', 'timeout', 'max_retries', 'http_method',
        'url_path', 'expected_codes', 'admin_state_up', 'id',
    )

    HM_HTTP_KEYS = (HM_HTTP_METHOD, HM_URL_PATH, HM_EXPECTED_CODES)
    # What healthmonitor_set can change; a new type needs a new monitor.
    HM_SETTABLE = (HM_DELAY, HM_TIMEOUT, HM_MAX_RETRIES, HM_HTTP_METHOD,
                   HM_URL_PATH, HM_EXPECTED_CODES, HM_ADMIN_STATE_UP)

    POOL_PROTOCOLS = ('HTTP', 'HTTPS', 'TCP', 'UDP', 'PROXY', 'PROXYV2')
    VIP_PROTOCOLS = ('HTTP', 'HTTPS', 'TCP', 'UDP')
    # Pool protocols Octavia accepts behind a listener of each protocol.
    LISTENER_POOL_PROTOCOLS = {
        'HTTP': ('HTTP', 'PROXY', 'PROXYV2'),
        'HTTPS': ('HTTPS', 'PROXY', 'PROXYV2', 'TCP'),
        'TCP': ('HTTP', 'HTTPS', 'PROXY', 'PROXYV2', 'TCP'),
        'UDP': ('UDP',),
    }
    LB_METHODS = ('ROUND_ROBIN', 'LEAST_CONNECTIONS', 'SOURCE_IP')
    SESSION_TYPES = (SOURCE_IP, HTTP_COOKIE, APP_COOKIE) = (
        'SOURCE_IP', 'HTTP_COOKIE', 'APP_COOKIE')
    HM_TYPES = ('PING', 'TCP', 'HTTP', 'HTTPS', 'UDP-CONNECT')
    HTTP_HM_TYPES = ('HTTP', 'HTTPS')
    UDP_HM_TYPES = ('UDP-CONNECT', 'TCP', 'HTTP')
    HTTP_METHODS = ('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'TRACE',
                    'OPTIONS', 'CONNECT', 'PATCH')
    EXPECTED_CODES_RE = re.compile(r'^(\d{3}(\s*,\s*\d{3})*|\d{3}-\d{3})$')

    ATTRIBUTES = (
        VIP_ADDRESS_ATTR, LOADBALANCER_ID_ATTR, POOL_ID_ATTR, MEMBERS_ATTR,
    ) = (
        'vip_address', 'loadbalancer_id', 'pool_id', 'members',
    )

    MEMBER = 'member'
    MEMBERS_STEP = 'members'

    # Resource data: each Octavia object as {"id", "created"}, the members
    # as {server_id: {"member_id", "address"}}, and when the current step
    # began waiting, as {"step", "since"}.
    DATA_KEYS = (
        LB_DATA, LISTENER_DATA, POOL_DATA, HM_DATA, MEMBERS_DATA, WAIT_DATA,
    ) = (
        'loadbalancer', 'listener', 'pool', 'health_monitor',
        lb_members.DATA_MEMBERS, 'wait',
    )

    properties_schema = {
        POOL: properties.Schema(
            properties.Schema.MAP,
            _('The pool holding the targets\' servers. Only protocol_port '
              'changes in place; any other change replaces the resource.'),
            required=True,
            update_allowed=True,
            schema={
                POOL_PROTOCOL: properties.Schema(
                    properties.Schema.STRING,
                    _('Protocol between the load balancer and the '
                      'servers.'),
                    default='HTTP',
                    constraints=[constraints.AllowedValues(POOL_PROTOCOLS)],
                ),
                POOL_PROTOCOL_PORT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Port the servers listen on.'),
                    default=80,
                    constraints=[constraints.Range(1, 65535)],
                ),
                POOL_SUBNET: properties.Schema(
                    properties.Schema.STRING,
                    _('Name or ID of the subnet the members are reached '
                      'on: each server\'s address on it is its member '
                      'address.'),
                    required=True,
                    constraints=[constraints.CustomConstraint(
                        'neutron.subnet')],
                ),
                POOL_LB_METHOD: properties.Schema(
                    properties.Schema.STRING,
                    _('Load-balancing algorithm.'),
                    default='ROUND_ROBIN',
                    constraints=[constraints.AllowedValues(LB_METHODS)],
                ),
                POOL_ADMIN_STATE_UP: properties.Schema(
                    properties.Schema.BOOLEAN,
                    _('Administrative state of the pool.'),
                    default=True,
                ),
                POOL_SESSION_PERSISTENCE: properties.Schema(
                    properties.Schema.MAP,
                    _('Session persistence of the pool.'),
                    schema={
                        SESSION_TYPE: properties.Schema(
                            properties.Schema.STRING,
                            _('How sessions are recognised.'),
                            required=True,
                            constraints=[constraints.AllowedValues(
                                SESSION_TYPES)],
                        ),
                        SESSION_COOKIE_NAME: properties.Schema(
                            properties.Schema.STRING,
                            _('Name of the application\'s cookie; only '
                              'with APP_COOKIE.'),
                        ),
                    },
                ),
                POOL_ID: properties.Schema(
                    properties.Schema.STRING,
                    _('Name or ID of an existing pool of the existing '
                      'load balancer to use instead of creating one; it is '
                      'never deleted. Its protocol and method stay as '
                      'they are; its members become the targets\' servers '
                      '(members it did not add are kept as they are).'),
                    constraints=[constraints.CustomConstraint(
                        'octavia.pool')],
                ),
            },
        ),
        VIP: properties.Schema(
            properties.Schema.MAP,
            _('The virtual IP clients connect to, and its listener.'),
            default={},
            schema={
                VIP_SUBNET: properties.Schema(
                    properties.Schema.STRING,
                    _('Name or ID of the subnet of the VIP address; this or '
                      'network is required unless loadbalancer is given.'),
                    constraints=[constraints.CustomConstraint(
                        'neutron.subnet')],
                ),
                VIP_NETWORK: properties.Schema(
                    properties.Schema.STRING,
                    _('Name or ID of the network of the VIP address.'),
                    constraints=[constraints.CustomConstraint(
                        'neutron.network')],
                ),
                VIP_ADDRESS: properties.Schema(
                    properties.Schema.STRING,
                    _('IP address of the VIP; Octavia picks one when '
                      'omitted.'),
                    constraints=[constraints.CustomConstraint('ip_addr')],
                ),
                VIP_CONNECTION_LIMIT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Most concurrent connections of the listener; -1 '
                      'means no limit.'),
                    default=-1,
                    constraints=[constraints.Range(min=-1)],
                ),
                VIP_PROTOCOL: properties.Schema(
                    properties.Schema.STRING,
                    _('Protocol of the listener.'),
                    default='HTTP',
                    constraints=[constraints.AllowedValues(VIP_PROTOCOLS)],
                ),
                VIP_PROTOCOL_PORT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Port of the listener.'),
                    default=80,
                    constraints=[constraints.Range(1, 65535)],
                ),
                VIP_ADMIN_STATE_UP: properties.Schema(
                    properties.Schema.BOOLEAN,
                    _('Administrative state of the load balancer and the '
                      'listener.'),
                    default=True,
                ),
            },
        ),
        HEALTH_MONITOR: properties.Schema(
            properties.Schema.MAP,
            _('Health monitor of the pool; none when omitted.'),
            update_allowed=True,
            schema={
                HM_TYPE: properties.Schema(
                    properties.Schema.STRING,
                    _('How members are probed; required unless id is '
                      'given.'),
                    constraints=[constraints.AllowedValues(HM_TYPES)],
                ),
                HM_DELAY: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds between two probes of a member.'),
                    default=10,
                    constraints=[constraints.Range(min=1)],
                ),
                HM_TIMEOUT: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Seconds a probe may take.'),
                    default=5,
                    constraints=[constraints.Range(min=1)],
                ),
                HM_MAX_RETRIES: properties.Schema(
                    properties.Schema.INTEGER,
                    _('Successive failed probes before a member is taken '
                      'out (and successful ones before it is back).'),
                    default=3,
                    constraints=[constraints.Range(1, 10)],
                ),
                HM_HTTP_METHOD: properties.Schema(
                    properties.Schema.STRING,
                    _('HTTP method of the probe (HTTP and HTTPS types); '
                      'Octavia\'s default is GET.'),
                    constraints=[constraints.AllowedValues(HTTP_METHODS)],
                ),
                HM_URL_PATH: properties.Schema(
                    properties.Schema.STRING,
                    _('Path probed (HTTP and HTTPS types); Octavia\'s '
                      'default is /.'),
                ),
                HM_EXPECTED_CODES: properties.Schema(
                    properties.Schema.STRING,
                    _('HTTP codes of a healthy member (HTTP and HTTPS '
                      'types): 200, 200,202 or 200-204; Octavia\'s default '
                      'is 200.'),
                ),
                HM_ADMIN_STATE_UP: properties.Schema(
                    properties.Schema.BOOLEAN,
                    _('Administrative state of the health monitor.'),
                    default=True,
                ),
                HM_ID: properties.Schema(
                    properties.Schema.STRING,
                    _('ID of the existing health monitor of the existing '
                      'pool, to record instead of creating one; it is '
                      'never deleted.'),
                ),
            },
        ),
        LB_STATUS_TIMEOUT: properties.Schema(
            properties.Schema.INTEGER,
            _('Seconds one step (a create, a member update, a delete) may '
              'wait for the load balancer to be ready before the action '
              'fails.'),
            default=300,
            update_allowed=True,
            constraints=[constraints.Range(1, lb_members.MAX_STATUS_TIMEOUT)],
        ),
        LOADBALANCER: properties.Schema(
            properties.Schema.STRING,
            _('Name or ID of an existing load balancer to use instead of '
              'creating one; it is never deleted.'),
            constraints=[constraints.CustomConstraint(
                'octavia.loadbalancer')],
        ),
        AVAILABILITY_ZONE: properties.Schema(
            properties.Schema.STRING,
            _('Octavia availability zone of the load balancer created.'),
            constraints=[constraints.CustomConstraint(
                'octavia.availabilityzone')],
        ),
        FLAVOR_ID: properties.Schema(
            properties.Schema.STRING,
            _('Name or ID of the Octavia flavor of the load balancer '
              'created.'),
            constraints=[constraints.CustomConstraint('octavia.flavor')],
        ),
        TARGETS: properties.Schema(
            properties.Schema.LIST,
            _('Names of resources of this stack whose servers are the '
              'members: OS::Nova::Server resources, or groups '
              '(OS::Heat::ResourceGroup, OS::Heat::AutoScalingGroup, '
              'OS::Heat::InstanceGroup) whose member servers are.'),
            required=True,
            update_allowed=True,
            schema=properties.Schema(properties.Schema.STRING),
            constraints=[constraints.Length(min=1)],
        ),
    }

    attributes_schema = {
        VIP_ADDRESS_ATTR: attributes.Schema(
            _('The VIP address of the load balancer.'),
            type=attributes.Schema.STRING,
        ),
        LOADBALANCER_ID_ATTR: attributes.Schema(
            _('ID of the load balancer.'),
            type=attributes.Schema.STRING,
        ),
        POOL_ID_ATTR: attributes.Schema(
            _('ID of the pool.'),
            type=attributes.Schema.STRING,
        ),
        MEMBERS_ATTR: attributes.Schema(
            _('Members of the pool by server ID: member_id and address.'),
            type=attributes.Schema.MAP,
            cache_mode=attributes.Schema.CACHE_NONE,
        ),
    }

    # Validation

    def _validate_pool(self):
        pool = self.properties[self.POOL]
        if pool[self.POOL_ID] and not self.properties[self.LOADBALANCER]:
            self._invalid(_('pool.id names an existing pool, which lives on '
                            'an existing load balancer: name that one in '
                            'loadbalancer'), self.POOL, self.POOL_ID)
        persistence = pool[self.POOL_SESSION_PERSISTENCE]
        if persistence:
            path = (self.POOL, self.POOL_SESSION_PERSISTENCE)
            kind = persistence[self.SESSION_TYPE]
            cookie = persistence.get(self.SESSION_COOKIE_NAME)
            if kind == self.APP_COOKIE and not cookie:
                self._invalid(_('pool.session_persistence.cookie_name is '
                                'required with type APP_COOKIE'), *path)
            if kind != self.APP_COOKIE and cookie:
                self._invalid(_('pool.session_persistence.cookie_name '
                                'applies only to type APP_COOKIE, not %s') %
                              kind, *path)
            if pool[self.POOL_PROTOCOL] == 'UDP' and kind != self.SOURCE_IP:
                self._invalid(_('UDP pools only support session persistence '
                                'of type SOURCE_IP, not %s') % kind, *path)
        if pool[self.POOL_ID]:
            return
        listener = self.properties[self.VIP][self.VIP_PROTOCOL]
        allowed = self.LISTENER_POOL_PROTOCOLS[listener]
        if pool[self.POOL_PROTOCOL] not in allowed:
            self._invalid(_('pool.protocol %(pool)s cannot serve a '
                            'vip.protocol %(vip)s listener; use one of '
                            '%(allowed)s') %
                          {'pool': pool[self.POOL_PROTOCOL], 'vip': listener,
                           'allowed': ', '.join(allowed)},
                          self.POOL, self.POOL_PROTOCOL)

    def _validate_vip(self):
        vip = self.properties[self.VIP]
        if self.properties[self.LOADBALANCER]:
            for key in (self.VIP_SUBNET, self.VIP_NETWORK, self.VIP_ADDRESS):
                if vip.get(key):
                    self._invalid(_('vip.%s places the VIP of a load '
                                    'balancer this resource creates; it '
                                    'cannot be given with loadbalancer') %
                                  key, self.VIP, key)
            for key in (self.AVAILABILITY_ZONE, self.FLAVOR_ID):
                if self.properties[key]:
                    self._invalid(_('%s applies to a load balancer this '
                                    'resource creates; it cannot be given '
                                    'with loadbalancer') % key, key)
        elif not (vip.get(self.VIP_SUBNET) or vip.get(self.VIP_NETWORK)):
            self._invalid(_('vip.subnet or vip.network is required unless '
                            'loadbalancer names an existing load balancer'),
                          self.VIP)

    def _validate_health_monitor(self):
        monitor = self.properties[self.HEALTH_MONITOR]
        if not monitor:
            return
        if monitor[self.HM_ID]:
            if not self.properties[self.POOL][self.POOL_ID]:
                self._invalid(_('health_monitor.id names an existing '
                                'monitor, which belongs to an existing pool: '
                                'name that one in pool.id'),
                              self.HEALTH_MONITOR, self.HM_ID)
            given = [key for key in (self.HM_TYPE,) + self.HM_HTTP_KEYS
                     if monitor.get(key) is not None]
            if given:
                self._invalid(_('health_monitor.id reuses an existing '
                                'monitor as it is: %s cannot be given with '
                                'it') % ', '.join(given),
                              self.HEALTH_MONITOR, given[0])
            return
        kind = monitor[self.HM_TYPE]
        if kind is None:
            self._invalid(_('health_monitor.type is required unless '
                            'health_monitor.id names an existing monitor'),
                          self.HEALTH_MONITOR, self.HM_TYPE)
        if kind not in self.HTTP_HM_TYPES:
            for key in self.HM_HTTP_KEYS:
                if monitor.get(key) is not None:
                    self._invalid(_('health_monitor.%(key)s applies only to '
                                    'HTTP and HTTPS monitors, not %(type)s')
                                  % {'key': key, 'type': kind},
                                  self.HEALTH_MONITOR, key)
        path = monitor.get(self.HM_URL_PATH)
        if path is not None and not path.startswith('/'):
            self._invalid(_('health_monitor.url_path must start with /'),
                          self.HEALTH_MONITOR, self.HM_URL_PATH)
        codes = monitor.get(self.HM_EXPECTED_CODES)
        if codes is not None and not self.EXPECTED_CODES_RE.match(codes):
            self._invalid(_('health_monitor.expected_codes must be a code '
                            '(200), a list (200,202) or a range (200-204), '
                            'not "%s"') % codes,
                          self.HEALTH_MONITOR, self.HM_EXPECTED_CODES)
        pool = self.properties[self.POOL]
        if pool[self.POOL_ID]:
            return
        if pool[self.POOL_PROTOCOL] == 'UDP':
            if kind not in self.UDP_HM_TYPES:
                self._invalid(_('a UDP pool takes a health monitor of type '
                                '%(allowed)s, not %(type)s') %
                              {'allowed': ', '.join(self.UDP_HM_TYPES),
                               'type': kind},
                              self.HEALTH_MONITOR, self.HM_TYPE)
        elif kind == 'UDP-CONNECT':
            self._invalid(_('health_monitor.type UDP-CONNECT needs '
                            'pool.protocol UDP, not %s') %
                          pool[self.POOL_PROTOCOL],
                          self.HEALTH_MONITOR, self.HM_TYPE)

    def validate(self):
        super(LoadBalancer, self).validate()
        self._validate_targets()
        self._validate_pool()
        self._validate_vip()
        self._validate_health_monitor()

    # Resource data

    def _ref(self, kind):
        value = self.data().get(kind)
        return jsonutils.loads(value) if value else None

    def _object_id(self, kind):
        ref = self._ref(kind)
        return ref and ref['id']

    def _remember(self, kind, object_id, created):
        self.data_set(kind, jsonutils.dumps({'id': object_id,
                                             'created': created}))
        if kind == self.LB_DATA:
            self.resource_id_set(object_id)

    def _forget(self, kind, object_id):
        if kind == self.MEMBER:
            members = self._members()
            kept = {server_id: member
                    for server_id, member in members.items()
                    if member.get('member_id') != object_id}
            self._store_members(kept)
            return
        gone = {self.LB_DATA: (self.LB_DATA, self.LISTENER_DATA,
                               self.POOL_DATA, self.HM_DATA,
                               self.MEMBERS_DATA),
                self.POOL_DATA: (self.POOL_DATA, self.HM_DATA,
                                 self.MEMBERS_DATA)}.get(kind, (kind,))
        for key in gone:
            self.data_delete(key)

    def _members(self):
        value = self.data().get(self.MEMBERS_DATA)
        return jsonutils.loads(value) if value else {}

    def _store_members(self, members):
        if members != self._members():
            self.data_set(self.MEMBERS_DATA,
                          jsonutils.dumps(members, sort_keys=True))

    # Waiting

    def _advance(self, plan):
        """Run the plan's steps in order; True once all of them are done."""
        while plan.steps:
            name, argument = plan.steps[0]
            if plan.state is None:
                plan.state = {'step': name}
                self._start_wait(plan.state)
            if not getattr(self, '_step_' + name)(plan.state, argument):
                return False
            plan.steps.popleft()
            plan.state = None
        return True

    def _start_wait(self, state):
        """Start the lb_status_timeout clock of a step, in resource data."""
        self.data_set(self.WAIT_DATA, jsonutils.dumps(
            {'step': state['step'],
             'since': timeutils.utcnow_ts(microsecond=True)}))

    def _not_yet(self, state, detail):
        """False, for the next poll; fail once the step waited too long."""
        wait = jsonutils.loads(self.data().get(self.WAIT_DATA) or '{}')
        since = wait.get('since', timeutils.utcnow_ts(microsecond=True))
        waited = timeutils.utcnow_ts(microsecond=True) - since
        timeout = self.properties[self.LB_STATUS_TIMEOUT]
        if waited > timeout:
            raise exception.Error(
                _('step "%(step)s" of load balancer %(lb)s gave up after '
                  '%(waited)d s (lb_status_timeout is %(timeout)d s): '
                  'Octavia is still busy: %(detail)s') %
                {'step': state['step'], 'lb': self.resource_id,
                 'waited': waited, 'timeout': timeout, 'detail': detail})
        return False

    def _call(self, state, call, *args, **kwargs):
        """Make one Octavia change; False while Octavia refuses it as busy.

        The result is kept in ``state['result']``.
        """
        try:
            state['result'] = call(*args, **kwargs)
        except Exception as ex:
            if not self.client_plugin().is_conflict(ex):
                raise
            state['conflict'] = str(ex)
            return False
        return True

    def _refused(self, state):
        """Octavia answered 409: wait, unless the load balancer is in ERROR.

        Octavia refuses changes to a load balancer in ERROR with the same
        409 as to a busy one; only its status tells them apart.
        """
        if self.resource_id is None or self._settled(state):
            return self._not_yet(state, state['conflict'])
        return False

    def _settled(self, state, deleting=False):
        """True once the load balancer took the last change (ACTIVE).

        While deleting, a load balancer gone or in ERROR is settled too:
        Octavia accepts deletes in ERROR.
        """
        try:
            lb = self.client().load_balancer_show(self.resource_id)
        except Exception as ex:
            if deleting and self.client_plugin().is_not_found(ex):
                return True
            raise
        status = lb.get('provisioning_status')
        if status in lb_members.PENDING:
            return self._not_yet(state, status)
        if status == 'ERROR' and not deleting:
            raise exception.ResourceInError(
                resource_status=status,
                status_reason=_('load balancer %s is in provisioning status '
                                'ERROR') % self.resource_id)
        return True

    # Create

    def _loadbalancer_body(self):
        vip = self.properties[self.VIP]
        neutron = self.client_plugin('neutron')
        body = {'name': self.physical_resource_name(),
                'admin_state_up': vip[self.VIP_ADMIN_STATE_UP]}
        if vip[self.VIP_SUBNET]:
            body['vip_subnet_id'] = neutron.find_resourceid_by_name_or_id(
                'subnet', vip[self.VIP_SUBNET])
        if vip[self.VIP_NETWORK]:
            body['vip_network_id'] = neutron.find_resourceid_by_name_or_id(
                'network', vip[self.VIP_NETWORK])
        if vip[self.VIP_ADDRESS]:
            body['vip_address'] = vip[self.VIP_ADDRESS]
        if self.properties[self.AVAILABILITY_ZONE]:
            body['availability_zone'] = self.properties[
                self.AVAILABILITY_ZONE]
        if self.properties[self.FLAVOR_ID]:
            body['flavor_id'] = self.client_plugin().get_flavor(
                self.properties[self.FLAVOR_ID])
        return body

    def _listener_body(self):
        vip = self.properties[self.VIP]
        return {'name': self.physical_resource_name(),
                'loadbalancer_id': self.resource_id,
                'protocol': vip[self.VIP_PROTOCOL],
                'protocol_port': vip[self.VIP_PROTOCOL_PORT],
                'connection_limit': vip[self.VIP_CONNECTION_LIMIT],
                'admin_state_up': vip[self.VIP_ADMIN_STATE_UP]}

    def _pool_body(self):
        pool = self.properties[self.POOL]
        body = {'name': self.physical_resource_name(),
                'listener_id': self._object_id(self.LISTENER_DATA),
                'protocol': pool[self.POOL_PROTOCOL],
                'lb_algorithm': pool[self.POOL_LB_METHOD],
                'admin_state_up': pool[self.POOL_ADMIN_STATE_UP]}
        persistence = pool[self.POOL_SESSION_PERSISTENCE]
        if persistence:
            body['session_persistence'] = {
                key: value for key, value in persistence.items()
                if value is not None}
        return body

    def _health_monitor_body(self):
        monitor = self.properties[self.HEALTH_MONITOR]
        body = {key: monitor[key] for key in self._HM_KEYS
                if key != self.HM_ID and monitor.get(key) is not None}
        body.update(name=self.physical_resource_name(),
                    pool_id=self._object_id(self.POOL_DATA))
        return body

    def _create_object(self, state, kind, create):
        """Create one Octavia object once, then wait until it is in place."""
        if not state.get('called'):
            if not self._call(state, create):
                return self._refused(state)
            self._remember(kind, state['result']['id'], created=True)
            state['called'] = True
        return self._settled(state)

    def _step_loadbalancer(self, state, _argument):
        existing = self.properties[self.LOADBALANCER]
        if existing and not state.get('called'):
            self._remember(self.LB_DATA,
                           self.client_plugin().get_loadbalancer(existing),
                           created=False)
            state['called'] = True
        return self._create_object(
            state, self.LB_DATA, lambda: self.client().load_balancer_create(
                json={'loadbalancer': self._loadbalancer_body()}
            )['loadbalancer'])

    def _step_listener(self, state, _argument):
        return self._create_object(
            state, self.LISTENER_DATA, lambda: self.client().listener_create(
                json={'listener': self._listener_body()})['listener'])

    def _step_pool(self, state, _argument):
        existing = self.properties[self.POOL][self.POOL_ID]
        if existing and not state.get('called'):
            self._remember(self.POOL_DATA,
                           self.client_plugin().get_pool(existing),
                           created=False)
            state['called'] = True
        return self._create_object(
            state, self.POOL_DATA, lambda: self.client().pool_create(
                json={'pool': self._pool_body()})['pool'])

    def _step_health_monitor(self, state, _argument):
        existing = self.properties[self.HEALTH_MONITOR][self.HM_ID]
        if existing:
            self._remember(self.HM_DATA, existing, created=False)
            return True
        return self._create_object(
            state, self.HM_DATA, lambda: self.client().health_monitor_create(
                json={'healthmonitor': self._health_monitor_body()}
            )['healthmonitor'])

    def handle_create(self):
        steps = [self.LB_DATA]
        if not self.properties[self.POOL][self.POOL_ID]:
            steps.append(self.LISTENER_DATA)
        steps.append(self.POOL_DATA)
        if self.properties[self.HEALTH_MONITOR]:
            steps.append(self.HM_DATA)
        steps.append(self.MEMBERS_STEP)
        return _Plan((step, None) for step in steps)

    def check_create_complete(self, plan):
        return self._advance(plan)

    # Members

    def _pool_subnet_id(self):
        return self.client_plugin('neutron').find_resourceid_by_name_or_id(
            'subnet', self.properties[self.POOL][self.POOL_SUBNET])

    def desired_members(self, subnet_id=None):
        """{address: {server_id, name}}: the members the targets make.

        The one place where targets become members: each server of the
        targets (at any group depth) with its address on the pool's subnet,
        named after its path in the stack. A server without such an address
        is an error, never a member silently left out; a server whose
        departure Heat is deleting is no member.
        """
        servers = target_servers(self.context, self.stack.id,
                                 self.properties[self.TARGETS])
        for server_id in departures.departing(self.context) & set(servers):
            del servers[server_id]
        if not servers:
            return {}
        subnet_id = subnet_id or self._pool_subnet_id()
        neutron = self.client('neutron')
        cidr = self._subnet_cidr(subnet_id)
        fixed = fixed_addresses(neutron, servers)
        desired, missing = {}, []
        for server_id, path in sorted(servers.items()):
            address = lb_members.address_on(cidr, fixed.get(server_id, []))
            if address is None:
                missing.append('%s (%s)' % (path, server_id))
            else:
                desired[address] = {'server_id': server_id, 'name': path}
        if missing:
            raise exception.Error(
                _('servers without an address on the pool subnet %(subnet)s '
                  '(%(cidr)s): %(servers)s') %
                {'subnet': subnet_id, 'cidr': cidr,
                 'servers': ', '.join(missing)})
        return desired

    def _subnet_cidr(self, subnet_id):
        """The subnet's CIDR, asked of Neutron once per resource object."""
        cidrs = self.__dict__.setdefault('_cidrs', {})
        if subnet_id not in cidrs:
            cidrs[subnet_id] = self.client('neutron').show_subnet(
                subnet_id)['subnet']['cidr']
        return cidrs[subnet_id]

    def _record_members(self, current, desired):
        """Members with their servers' places: a replaced one is known."""
        self._store_members(lb_members.member_map(
            current, {w['server_id']: address
                      for address, w in desired.items()},
            self.properties[self.POOL][self.POOL_PROTOCOL_PORT],
            paths={w['server_id']: w['name'] for w in desired.values()}))

    def _batch_applied(self, state, pool):
        try:
            ready = pool.ready(self.resource_id)
        except lb_members.MembersFailed as ex:
            raise exception.Error(
                _('Octavia did not apply the members of pool %(pool)s: '
                  '%(error)s') % {'pool': pool.pool_id, 'error': ex})
        if not ready:
            return self._not_yet(state, _('member update in progress'))
        self._record_members(pool.list(), state['desired'])
        self._store_spec(pool.pool_id, state)
        return True

    def _store_spec(self, pool_id, state):
        """What heat-health-engine needs to make the pool follow."""
        spec = {'pool_id': pool_id, 'loadbalancer_id': self.resource_id,
                'protocol_port': self.properties[self.POOL][
                    self.POOL_PROTOCOL_PORT],
                'subnet_id': state['subnet_id'],
                'subnet_cidr': self._subnet_cidr(state['subnet_id']),
                'targets': list(self.properties[self.TARGETS]),
                'lb_status_timeout': self.properties[self.LB_STATUS_TIMEOUT]}
        self.data_set(lb_members.DATA_SPEC, jsonutils.dumps(spec,
                                                            sort_keys=True))

    def _step_members(self, state, _argument):
        """Make the pool's members the targets' servers: one batch.

        Octavia is never sent an empty list: when no server is left, the
        last members are deleted one at a time instead.
        """
        pool = lb_members.PoolMembers(self.client(),
                                      self._object_id(self.POOL_DATA))
        if state.get('called') == 'batch':
            return self._batch_applied(state, pool)
        if state.get('called') == 'delete':
            if not self._settled(state):
                return False
            # Each deletion is a change of its own, with its own timeout.
            del state['called']
            self._start_wait(state)
        if 'desired' not in state:
            state['subnet_id'] = self._pool_subnet_id()
            state['desired'] = self.desired_members(state['subnet_id'])
        current = pool.list()
        desired = state['desired']
        members = lb_members.plan(
            current, self._members(),
            {w['server_id']: address for address, w in desired.items()},
            self.properties[self.POOL][self.POOL_PROTOCOL_PORT],
            state['subnet_id'],
            names={w['server_id']: w['name'] for w in desired.values()})
        if members is None:
            self._record_members(current, desired)
            self._store_spec(pool.pool_id, state)
            return True
        if members:
            try:
                pool.replace(members)
            except lb_members.Busy as ex:
                # Only a busy 409 waits: another one (a duplicate member)
                # would be refused again.
                state['conflict'] = str(ex)
                return self._refused(state)
            state['called'] = 'batch'
            return self._batch_applied(state, pool)
        return self._delete_one_member(state, pool, current[0]['id'])

    def _delete_one_member(self, state, pool, member_id):
        try:
            if not self._call(state, self.client().member_delete,
                              pool.pool_id, member_id):
                return self._refused(state)
        except Exception as ex:
            if not self.client_plugin().is_not_found(ex):
                raise
        state['called'] = 'delete'
        return False

    # Update

    def _needs_update(self, after, before, after_props, before_props,
                      prev_resource, check_init_complete=True):
        """Update at every stack update, even with unchanged properties.

        A group's scaling changes the servers without changing this
        resource's definition; the update that scaled it must still bring
        the pool along. When the members are already right, the update
        reads Octavia and Neutron and changes nothing.
        """
        super(LoadBalancer, self)._needs_update(
            after, before, after_props, before_props, prev_resource,
            check_init_complete)
        return True

    def needs_replace_with_prop_diff(self, changed_properties_set,
                                     after_props, before_props):
        """Only pool.protocol_port changes in place: it moves the members."""
        if self.POOL not in changed_properties_set:
            return False
        before = dict(before_props[self.POOL])
        after = dict(after_props[self.POOL])
        before.pop(self.POOL_PROTOCOL_PORT)
        after.pop(self.POOL_PROTOCOL_PORT)
        return before != after

    def _health_monitor_steps(self, before, after):
        ref = self._ref(self.HM_DATA)
        owned = bool(ref and ref['created'])
        if (before and after and owned and not after[self.HM_ID] and
                before[self.HM_TYPE] == after[self.HM_TYPE]):
            changes = {key: after[key] for key in self.HM_SETTABLE
                       if after[key] != before[key]}
            return [('set_health_monitor', changes)] if changes else []
        steps = []
        if owned:
            steps.append(('drop', (self.HM_DATA, ref['id'])))
        elif ref:
            self.data_delete(self.HM_DATA)
        if after:
            steps.append((self.HM_DATA, None))
        return steps

    def _step_set_health_monitor(self, state, changes):
        if not state.get('called'):
            if not self._call(state, self.client().health_monitor_set,
                              self._object_id(self.HM_DATA),
                              json={'healthmonitor': changes}):
                return self._refused(state)
            state['called'] = True
        return self._settled(state)

    def handle_update(self, json_snippet, tmpl_diff, prop_diff):
        before = self.properties[self.HEALTH_MONITOR]
        self.properties = json_snippet.properties(self.properties_schema,
                                                  self.context)
        steps = []
        if self.HEALTH_MONITOR in prop_diff:
            steps.extend(self._health_monitor_steps(
                before, self.properties[self.HEALTH_MONITOR]))
        steps.append((self.MEMBERS_STEP, None))
        return _Plan(steps)

    def check_update_complete(self, plan):
        return self._advance(plan)

    # Delete

    def _delete_call(self, kind, object_id):
        client = self.client()
        if kind == self.LB_DATA:
            return client.load_balancer_delete(object_id, cascade=True)
        if kind == self.MEMBER:
            return client.member_delete(self._object_id(self.POOL_DATA),
                                        object_id)
        return {self.LISTENER_DATA: client.listener_delete,
                self.POOL_DATA: client.pool_delete,
                self.HM_DATA: client.health_monitor_delete}[kind](object_id)

    def _load_balancer_gone(self, state):
        try:
            lb = self.client().load_balancer_show(self.resource_id)
        except Exception as ex:
            if self.client_plugin().is_not_found(ex):
                return True
            raise
        status = lb.get('provisioning_status')
        if status == 'DELETED':
            return True
        return self._not_yet(state, status)

    def _step_drop(self, state, target):
        """Delete one object (404: already gone), then wait for Octavia."""
        kind, object_id = target
        if not state.get('called'):
            try:
                if not self._call(state, self._delete_call, kind, object_id):
                    return self._not_yet(state, state['conflict'])
            except Exception as ex:
                if not self.client_plugin().is_not_found(ex):
                    raise
            state['called'] = True
        if kind == self.LB_DATA:
            done = self._load_balancer_gone(state)
        else:
            done = self._settled(state, deleting=True)
        if done:
            self._forget(kind, object_id)
        return done

    def _delete_steps(self):
        """What this resource created, children first; reused: members."""
        refs = {kind: self._ref(kind) for kind in (
            self.LB_DATA, self.LISTENER_DATA, self.POOL_DATA, self.HM_DATA)}

        def created(kind):
            return bool(refs[kind] and refs[kind]['created'])

        if created(self.LB_DATA):
            # Octavia's cascade deletes listener, pool, monitor, members.
            return [(self.LB_DATA, refs[self.LB_DATA]['id'])]
        drops = []
        if created(self.POOL_DATA):
            drops.append((self.POOL_DATA, refs[self.POOL_DATA]['id']))
        elif refs[self.POOL_DATA]:
            if created(self.HM_DATA):
                drops.append((self.HM_DATA, refs[self.HM_DATA]['id']))
            drops.extend((self.MEMBER, member['member_id'])
                         for _server, member in sorted(
                             self._members().items())
                         if member.get('member_id'))
        if created(self.LISTENER_DATA):
            drops.append((self.LISTENER_DATA,
                          refs[self.LISTENER_DATA]['id']))
        return drops

    def handle_delete(self):
        if self.resource_id is None:
            return _Plan([])
        return _Plan(('drop', target) for target in self._delete_steps())

    def check_delete_complete(self, plan):
        return self._advance(plan)

    # Attributes

    def _show_resource(self):
        return self.client().load_balancer_show(self.resource_id)

    def _resolve_attribute(self, name):
        if self.resource_id is None:
            return None
        if name == self.VIP_ADDRESS_ATTR:
            return self._show_resource().get('vip_address')
        if name == self.LOADBALANCER_ID_ATTR:
            return self.resource_id
        if name == self.POOL_ID_ATTR:
            return self._object_id(self.POOL_DATA)
        if name == self.MEMBERS_ATTR:
            return self._members()


def resource_mapping():
    return {'OS::Heat::LoadBalancer': LoadBalancer}
