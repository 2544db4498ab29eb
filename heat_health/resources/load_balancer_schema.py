"""OS::Heat::LoadBalancer's properties, attributes and their validation.

Property names are those of Senlin's load-balancing policy so its specs
port over; times are in seconds, as Octavia counts them.
"""

import re

from heat.common.i18n import _
from heat.engine import attributes
from heat.engine import constraints
from heat.engine import properties

from heat_health.common import lb_members


class LoadBalancerSchema(object):
    """The schema of OS::Heat::LoadBalancer, and what validation adds to it."""

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
