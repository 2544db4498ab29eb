"""OS::Heat::LoadBalancer: validation, and its lifecycle against a fake
Octavia that keeps state the way Octavia does (a change leaves the load
balancer PENDING_* for a poll, 409 "immutable" while it is, a batch member
update resets left-out fields) and a fake Neutron."""

import copy
import uuid

from heat.common import exception
from heat.common import template_format
from heat.engine.clients.os import neutron as neutron_plugin
from heat.engine.clients.os import octavia as octavia_plugin
from heat.engine import resource
from heat.engine.resources.openstack.nova import server
from heat.engine import scheduler
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.tests import utils
from octaviaclient.api.v2 import octavia as octavia_api
from oslo_serialization import jsonutils

from heat_health.common import lb_members
from heat_health.policy import targets
from heat_health import resources
from heat_health.resources import load_balancer
from heat_health.resources import load_balancer_octavia
from tests.unit import base

VALIDATION_TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.small
  other:
    type: OS::Heat::TestResource
  lb:
    type: OS::Heat::LoadBalancer
    properties:
      targets: [web]
      pool:
        subnet: private
      vip:
        subnet: public
'''

LIFECYCLE_TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
  lb:
    type: OS::Heat::LoadBalancer
    properties:
      targets: [web]
      pool:
        subnet: private
        protocol_port: 8080
      vip:
        subnet: public
        connection_limit: 100
      health_monitor:
        type: HTTP
        url_path: /health
'''

# The real target resolution, kept before the tests replace it.
RESOLVE = targets.Resolver.resolve
IMMUTABLE = 'Load Balancer %s is immutable and cannot be updated.'


def _not_found():
    return octavia_api.OctaviaClientException(code=404, message='Not Found')


class FakeOctavia(object):
    """One project's load balancers, as python-octaviaclient returns them.

    Every accepted change leaves the load balancer PENDING_* for
    ``pending`` polls of ``load_balancer_show``; ``refuse`` lists the names
    of calls to answer 409 "immutable" once each.
    """

    def __init__(self):
        self.lbs = {}
        self.members = {}  # pool id -> members
        self.pool_lb = {}  # pool id -> load balancer id
        self.calls = []
        self.batches = []
        self.pending = 1
        self.refuse = []
        self.gone = set()
        self.stuck = False
        self.on_show = None
        self._ids = 0

    def _new_id(self, kind):
        self._ids += 1
        return '%s-%d' % (kind, self._ids)

    def _change(self, name, lb_id, status='PENDING_UPDATE'):
        if name in self.refuse:
            self.refuse.remove(name)
            raise octavia_api.OctaviaClientException(
                code=409, message=IMMUTABLE % lb_id)
        lb = self.lbs[lb_id]
        deleting = status == 'PENDING_DELETE' or name.endswith('_delete')
        if (lb['provisioning_status'] in lb_members.PENDING or
                lb['provisioning_status'] == 'ERROR' and not deleting):
            raise octavia_api.OctaviaClientException(
                code=409, message=IMMUTABLE % lb_id)
        lb['provisioning_status'] = status
        lb['polls'] = self.pending

    def add_lb(self, lb_id, status='ACTIVE'):
        self.lbs[lb_id] = {'id': lb_id, 'provisioning_status': status,
                           'vip_address': '192.0.2.10', 'polls': 0}

    def add_pool(self, pool_id, lb_id, members=()):
        self.pool_lb[pool_id] = lb_id
        self.members[pool_id] = [dict(m) for m in members]

    # Load balancers

    def load_balancer_create(self, json):
        self.calls.append(('load_balancer_create', json['loadbalancer']))
        if 'load_balancer_create' in self.refuse:
            self.refuse.remove('load_balancer_create')
            raise octavia_api.OctaviaClientException(
                code=409, message='Quota or VIP conflict')
        lb_id = self._new_id('lb')
        self.add_lb(lb_id, 'PENDING_CREATE')
        self.lbs[lb_id]['polls'] = self.pending
        return {'loadbalancer': {'id': lb_id}}

    def load_balancer_show(self, lb_id):
        if self.on_show:
            self.on_show()
        if lb_id not in self.lbs:
            raise _not_found()
        lb = self.lbs[lb_id]
        if lb['polls'] > 0 and not self.stuck:
            lb['polls'] -= 1
        elif lb['provisioning_status'] == 'PENDING_DELETE':
            del self.lbs[lb_id]
            raise _not_found()
        elif lb['provisioning_status'] in lb_members.PENDING:
            if not self.stuck:
                lb['provisioning_status'] = 'ACTIVE'
        return {k: v for k, v in lb.items() if k != 'polls'}

    def load_balancer_delete(self, lb_id, **params):
        self.calls.append(('load_balancer_delete', lb_id, params))
        if lb_id not in self.lbs:
            raise _not_found()
        self._change('load_balancer_delete', lb_id, 'PENDING_DELETE')

    # Children

    def listener_create(self, json):
        body = json['listener']
        self.calls.append(('listener_create', body))
        self._change('listener_create', body['loadbalancer_id'])
        return {'listener': {'id': self._new_id('listener')}}

    def pool_create(self, json):
        body = json['pool']
        self.calls.append(('pool_create', body))
        lb_id = self._lb_of_listener()
        self._change('pool_create', lb_id)
        pool_id = self._new_id('pool')
        self.add_pool(pool_id, lb_id)
        return {'pool': {'id': pool_id}}

    def _lb_of_listener(self):
        return next(iter(self.lbs))

    def health_monitor_create(self, json):
        body = json['healthmonitor']
        self.calls.append(('health_monitor_create', body))
        self._change('health_monitor_create', self.pool_lb[body['pool_id']])
        return {'healthmonitor': {'id': self._new_id('hm')}}

    def health_monitor_set(self, hm_id, json):
        self.calls.append(('health_monitor_set', hm_id, json))
        self._change('health_monitor_set', next(iter(self.lbs)))

    def _delete(self, name, object_id):
        self.calls.append((name, object_id))
        if object_id in self.gone:
            raise _not_found()
        self._change(name, next(iter(self.lbs)))

    def listener_delete(self, listener_id):
        self._delete('listener_delete', listener_id)

    def pool_delete(self, pool_id):
        self._delete('pool_delete', pool_id)

    def health_monitor_delete(self, hm_id):
        self._delete('health_monitor_delete', hm_id)

    # Members

    def member_list(self, pool_id):
        return {'members': copy.deepcopy(self.members[pool_id])}

    def member_delete(self, pool_id, member_id):
        self.calls.append(('member_delete', pool_id, member_id))
        if member_id in self.gone:
            raise _not_found()
        self._change('member_delete', self.pool_lb[pool_id])
        self.members[pool_id] = [m for m in self.members[pool_id]
                                 if m['id'] != member_id]

    def _create(self, url, method=None, json=None, **kwargs):
        """The batch member update: PUT .../pools/{id}/members."""
        assert method == 'PUT' and url.endswith('/members'), url
        pool_id = url.split('/')[-2]
        self.calls.append(('batch', pool_id))
        self._change('batch', self.pool_lb[pool_id])
        self.batches.append(copy.deepcopy(json['members']))
        old = {(m['address'], m['protocol_port']): m
               for m in self.members[pool_id]}
        members = []
        for wanted in json['members']:
            before = old.get((wanted['address'], wanted['protocol_port']), {})
            member = {'id': before.get('id', self._new_id('member')),
                      'weight': 1, 'admin_state_up': True, 'backup': False,
                      'provisioning_status': 'ACTIVE'}
            member.update(wanted)
            members.append(member)
        self.members[pool_id] = members

    def changes(self):
        return [call[0] for call in self.calls]


class FakeNeutron(object):
    """Ports of servers: one port each, on the private subnet."""

    def __init__(self):
        self.addresses = {}  # server id -> [fixed IPs]
        self.any_address = None  # the address of servers not listed
        self.port_listings = 0

    def list_ports(self, device_id):
        self.port_listings += 1
        addresses = {server_id: self.addresses.get(
            server_id, [self.any_address] if self.any_address else None)
            for server_id in device_id}
        return {'ports': [
            {'device_id': server_id,
             'fixed_ips': [{'ip_address': ip} for ip in ips]}
            for server_id, ips in sorted(addresses.items()) if ips]}

    def show_subnet(self, subnet_id):
        return {'subnet': {'id': subnet_id, 'cidr': '10.0.0.0/24'}}


class FakeServer(resource.Resource):
    """A server that is only a physical id in Heat's database."""

    properties_schema = {}

    def handle_create(self):
        self.resource_id_set(str(uuid.uuid4()))


def _find_id(resource_type, name_or_id, cmd_resource=None):
    return '%s-id' % name_or_id


class LoadBalancerBase(base.HeatHealthTestCase):

    def setUp(self):
        super(LoadBalancerBase, self).setUp()
        resource._register_class('OS::Heat::LoadBalancer',
                                 load_balancer.LoadBalancer)
        self.ctx = utils.dummy_context()
        self.stub_SubnetConstraint_validate()
        self.stub_NetworkConstraint_validate()
        for constraint in (octavia_plugin.LoadbalancerConstraint,
                           octavia_plugin.PoolConstraint,
                           octavia_plugin.FlavorConstraint,
                           octavia_plugin.AvailabilityZoneConstraint):
            self.patchobject(constraint, 'validate', return_value=True)


class LoadBalancerValidationTest(LoadBalancerBase):

    def _stack(self, **props):
        tmpl = template_format.parse(VALIDATION_TEMPLATE)
        lb = tmpl['resources']['lb']['properties']
        for key, value in props.items():
            if value is None:
                lb.pop(key, None)
            else:
                lb[key] = value
        return heat_stack.Stack(self.ctx, 'test', template.Template(tmpl))

    def _invalid(self, **props):
        stack = self._stack(**props)
        err = self.assertRaises(exception.StackValidationFailed,
                                stack['lb'].validate)
        return str(err)

    def test_registered(self):
        self.assertIs(load_balancer.LoadBalancer,
                      resources.resource_mapping()['OS::Heat::LoadBalancer'])

    def test_valid_with_defaults(self):
        stack = self._stack()
        lb = stack['lb']
        self.assertIsNone(lb.validate())
        pool = lb.properties['pool']
        self.assertEqual(('HTTP', 80, 'ROUND_ROBIN', True),
                         (pool['protocol'], pool['protocol_port'],
                          pool['lb_method'], pool['admin_state_up']))
        vip = lb.properties['vip']
        self.assertEqual(('HTTP', 80, -1), (vip['protocol'],
                                            vip['protocol_port'],
                                            vip['connection_limit']))
        self.assertEqual(300, lb.properties['lb_status_timeout'])

    def test_valid_full(self):
        stack = self._stack(
            pool={'subnet': 'private', 'protocol': 'HTTPS',
                  'protocol_port': 443, 'lb_method': 'SOURCE_IP',
                  'session_persistence': {'type': 'APP_COOKIE',
                                          'cookie_name': 'sid'}},
            vip={'network': 'public', 'address': '192.0.2.10',
                 'protocol': 'TCP', 'protocol_port': 443},
            health_monitor={'type': 'HTTPS', 'url_path': '/health',
                            'expected_codes': '200-204',
                            'http_method': 'HEAD'},
            availability_zone='az1', flavor_id='small')
        self.assertIsNone(stack['lb'].validate())

    def test_port_range(self):
        msg = self._invalid(pool={'subnet': 'private',
                                  'protocol_port': 70000})
        self.assertIn('pool.protocol_port', msg)
        self.assertIn('65535', msg)

    def test_pool_subnet_required(self):
        msg = self._invalid(pool={'protocol_port': 8080})
        self.assertIn('subnet', msg)

    def test_vip_needs_subnet_or_network(self):
        msg = self._invalid(vip={'protocol_port': 80})
        self.assertIn('vip.subnet or vip.network is required unless '
                      'loadbalancer names an existing load balancer', msg)
        self.assertIn('resources.lb.properties.vip', msg)

    def test_existing_lb_needs_no_vip(self):
        stack = self._stack(loadbalancer='lb-1', vip=None)
        self.assertIsNone(stack['lb'].validate())

    def test_vip_subnet_with_existing_lb(self):
        msg = self._invalid(loadbalancer='lb-1')
        self.assertIn('vip.subnet places the VIP of a load balancer this '
                      'resource creates; it cannot be given with '
                      'loadbalancer', msg)
        self.assertIn('properties.vip.subnet', msg)

    def test_flavor_with_existing_lb(self):
        msg = self._invalid(loadbalancer='lb-1', vip=None, flavor_id='big')
        self.assertIn('flavor_id applies to a load balancer this resource '
                      'creates', msg)

    def test_pool_id_needs_loadbalancer(self):
        msg = self._invalid(pool={'subnet': 'private', 'id': 'pool-1'})
        self.assertIn('pool.id names an existing pool', msg)
        self.assertIn('properties.pool.id', msg)

    def test_pool_protocol_behind_listener(self):
        msg = self._invalid(pool={'subnet': 'private', 'protocol': 'UDP'})
        self.assertIn('pool.protocol UDP cannot serve a vip.protocol HTTP '
                      'listener; use one of HTTP, PROXY, PROXYV2', msg)

    def test_app_cookie_needs_name(self):
        msg = self._invalid(pool={'subnet': 'private',
                                  'session_persistence': {
                                      'type': 'APP_COOKIE'}})
        self.assertIn('pool.session_persistence.cookie_name is required '
                      'with type APP_COOKIE', msg)

    def test_cookie_name_only_for_app_cookie(self):
        msg = self._invalid(pool={'subnet': 'private',
                                  'session_persistence': {
                                      'type': 'SOURCE_IP',
                                      'cookie_name': 'sid'}})
        self.assertIn('applies only to type APP_COOKIE, not SOURCE_IP', msg)

    def test_udp_pool_session_persistence(self):
        msg = self._invalid(
            vip={'subnet': 'public', 'protocol': 'UDP'},
            pool={'subnet': 'private', 'protocol': 'UDP',
                  'session_persistence': {'type': 'HTTP_COOKIE'}})
        self.assertIn('UDP pools only support session persistence of type '
                      'SOURCE_IP, not HTTP_COOKIE', msg)

    def test_monitor_type_required(self):
        msg = self._invalid(health_monitor={'delay': 5})
        self.assertIn('health_monitor.type is required', msg)
        self.assertIn('properties.health_monitor.type', msg)

    def test_monitor_http_fields_on_tcp(self):
        msg = self._invalid(health_monitor={'type': 'TCP',
                                            'url_path': '/health'})
        self.assertIn('health_monitor.url_path applies only to HTTP and '
                      'HTTPS monitors, not TCP', msg)
        self.assertIn('properties.health_monitor.url_path', msg)

    def test_monitor_url_path(self):
        msg = self._invalid(health_monitor={'type': 'HTTP',
                                            'url_path': 'health'})
        self.assertIn('health_monitor.url_path must start with /', msg)

    def test_monitor_expected_codes(self):
        msg = self._invalid(health_monitor={'type': 'HTTP',
                                            'expected_codes': '2xx'})
        self.assertIn('health_monitor.expected_codes must be a code', msg)

    def test_monitor_udp_connect_needs_udp_pool(self):
        msg = self._invalid(health_monitor={'type': 'UDP-CONNECT'})
        self.assertIn('UDP-CONNECT needs pool.protocol UDP, not HTTP', msg)

    def test_udp_pool_refuses_ping(self):
        msg = self._invalid(
            vip={'subnet': 'public', 'protocol': 'UDP'},
            pool={'subnet': 'private', 'protocol': 'UDP'},
            health_monitor={'type': 'PING'})
        self.assertIn('a UDP pool takes a health monitor of type '
                      'UDP-CONNECT, TCP, HTTP, not PING', msg)

    def test_monitor_id_needs_pool_id(self):
        msg = self._invalid(health_monitor={'id': 'hm-1'})
        self.assertIn('health_monitor.id names an existing monitor', msg)

    def test_monitor_id_with_type(self):
        msg = self._invalid(loadbalancer='lb-1', vip=None,
                            pool={'subnet': 'private', 'id': 'pool-1'},
                            health_monitor={'id': 'hm-1', 'type': 'TCP'})
        self.assertIn('health_monitor.id reuses an existing monitor as it '
                      'is: type cannot be given with it', msg)

    def test_reuse_everything(self):
        stack = self._stack(loadbalancer='lb-1', vip=None,
                            pool={'subnet': 'private', 'id': 'pool-1'},
                            health_monitor={'id': 'hm-1'})
        self.assertIsNone(stack['lb'].validate())

    def test_target_not_in_stack(self):
        msg = self._invalid(targets=['nothere'])
        self.assertIn('target "nothere" is not a resource of this stack',
                      msg)
        self.assertIn('properties.targets[0]', msg)

    def test_target_wrong_type(self):
        msg = self._invalid(targets=['other'])
        self.assertIn('target "other" is a OS::Heat::TestResource', msg)

    def test_target_twice(self):
        msg = self._invalid(targets=['web', 'web'])
        self.assertIn('target "web" is listed twice', msg)

    def test_no_targets(self):
        msg = self._invalid(targets=[])
        self.assertIn('targets', msg)

    def test_depends_on_targets(self):
        stack = self._stack()
        self.assertIn(stack['lb'],
                      list(stack.dependencies.required_by(stack['web'])))

    def test_only_protocol_port_changes_the_pool_in_place(self):
        lb = self._stack()['lb']
        before = {'pool': dict(lb.properties['pool'])}
        port = {'pool': dict(before['pool'], protocol_port=8080)}
        method = {'pool': dict(before['pool'], lb_method='SOURCE_IP')}
        self.assertFalse(lb.needs_replace_with_prop_diff(
            {'pool'}, port, before))
        self.assertTrue(lb.needs_replace_with_prop_diff(
            {'pool'}, method, before))
        self.assertFalse(lb.needs_replace_with_prop_diff(
            {'targets'}, method, before))


class LoadBalancerLifecycleTest(LoadBalancerBase):
    """Whole stacks against FakeOctavia and FakeNeutron."""

    def setUp(self):
        super(LoadBalancerLifecycleTest, self).setUp()
        # OS::Heat::TestResource stands in for the servers' resource.
        self.patchobject(load_balancer.LoadBalancer, '_validate_targets')
        self.octavia = FakeOctavia()
        self.neutron = FakeNeutron()
        self.patchobject(
            load_balancer.LoadBalancer, 'client',
            side_effect=lambda name=None: (
                self.neutron if name == 'neutron' else self.octavia))
        self.patchobject(neutron_plugin.NeutronClientPlugin,
                         'find_resourceid_by_name_or_id',
                         side_effect=_find_id)
        for finder in ('get_loadbalancer', 'get_pool', 'get_flavor'):
            self.patchobject(octavia_plugin.OctaviaClientPlugin, finder,
                             side_effect=lambda value: value)
        self.servers = {}
        self.resolve = self.patchobject(targets.Resolver, 'resolve',
                                        side_effect=self._resolve)

    def _resolve(self, ctxt, policies):
        return {policy.id: targets.Resolution(
            places={(policy.stack_id, path): {
                'server_id': server_id, 'path': path, 'addresses': []}
                for server_id, path in self.servers.items()},
            busy=frozenset(), suspended=False, missing=[], fingerprint=())
            for policy in policies}

    def _server(self, server_id, address, path=None):
        self.servers[server_id] = path or 'web/%s' % server_id
        self.neutron.addresses[server_id] = ['2001:db8::5', address]

    def _template(self, **props):
        tmpl = template_format.parse(LIFECYCLE_TEMPLATE)
        lb = tmpl['resources']['lb']['properties']
        for key, value in props.items():
            if value is None:
                lb.pop(key, None)
            else:
                lb[key] = value
        return tmpl

    def _create(self, **props):
        stack = heat_stack.Stack(self.ctx, 'test', template.Template(
            self._template(**props)))
        stack.store()
        stack.create()
        return stack

    def _update(self, stack, **props):
        updated = heat_stack.Stack(self.ctx, 'test', template.Template(
            self._template(**props)))
        stack.update(updated)
        self.assertEqual((stack.UPDATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        return stack

    def _data(self, stack, key):
        return jsonutils.loads(stack['lb'].data()[key])

    def _calls(self, name):
        return [call for call in self.octavia.calls if call[0] == name]

    def test_create_sequence(self):
        self._server('s1', '10.0.0.11')
        self._server('s2', '10.0.0.12')
        stack = self._create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(['load_balancer_create', 'listener_create',
                          'pool_create', 'health_monitor_create', 'batch'],
                         self.octavia.changes())
        lb_body = self.octavia.calls[0][1]
        self.assertEqual('public-id', lb_body['vip_subnet_id'])
        self.assertTrue(lb_body['admin_state_up'])
        lb_id = stack['lb'].resource_id
        self.assertEqual('lb-1', lb_id)
        listener = self.octavia.calls[1][1]
        self.assertEqual({'loadbalancer_id': lb_id, 'protocol': 'HTTP',
                          'protocol_port': 80, 'connection_limit': 100,
                          'admin_state_up': True},
                         {k: listener[k] for k in listener if k != 'name'})
        pool = self.octavia.calls[2][1]
        self.assertEqual(('listener-2', 'HTTP', 'ROUND_ROBIN'),
                         (pool['listener_id'], pool['protocol'],
                          pool['lb_algorithm']))
        monitor = self.octavia.calls[3][1]
        self.assertEqual({'pool_id': 'pool-3', 'type': 'HTTP', 'delay': 10,
                          'timeout': 5, 'max_retries': 3,
                          'url_path': '/health', 'admin_state_up': True},
                         {k: monitor[k] for k in monitor if k != 'name'})
        # One batch, every member with its full state.
        self.assertEqual([[
            {'address': '10.0.0.11', 'protocol_port': 8080, 'weight': 1,
             'admin_state_up': True, 'backup': False, 'name': 'web/s1',
             'subnet_id': 'private-id'},
            {'address': '10.0.0.12', 'protocol_port': 8080, 'weight': 1,
             'admin_state_up': True, 'backup': False, 'name': 'web/s2',
             'subnet_id': 'private-id'}]], self.octavia.batches)
        # Neutron is asked once for all the servers' ports.
        self.assertEqual(1, self.neutron.port_listings)

    def test_resource_data_and_attributes(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        lb = stack['lb']
        self.assertEqual({'id': 'lb-1', 'created': True},
                         self._data(stack, 'loadbalancer'))
        self.assertEqual({'id': 'listener-2', 'created': True},
                         self._data(stack, 'listener'))
        self.assertEqual({'id': 'pool-3', 'created': True},
                         self._data(stack, 'pool'))
        self.assertEqual({'id': 'hm-4', 'created': True},
                         self._data(stack, 'health_monitor'))
        # With its place: the follower knows a replaced server's member.
        members = {'s1': {'member_id': 'member-5', 'address': '10.0.0.11',
                          'path': 'web/s1'}}
        self.assertEqual(members, self._data(stack, lb_members.DATA_MEMBERS))
        # What heat-health-engine reads to make the pool follow the group.
        spec = lb_members.read_data(lb.data())
        self.assertEqual(('pool-3', 'lb-1', ['web']),
                         (spec['pool_id'], spec['loadbalancer_id'],
                          spec['targets']))
        self.assertEqual(members, spec['members'])
        self.assertTrue(spec['subnet_cidr'])
        self.assertEqual('192.0.2.10', lb.FnGetAtt('vip_address'))
        self.assertEqual('lb-1', lb.FnGetAtt('loadbalancer_id'))
        self.assertEqual('pool-3', lb.FnGetAtt('pool_id'))
        self.assertEqual(members, lb.FnGetAtt('members'))
        self.assertEqual('lb-1', lb.FnGetRefId())
        self.assertEqual('lb-1', lb.FnGetAtt('show')['id'])

    def test_no_servers_no_batch(self):
        stack = self._create(health_monitor=None)
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(['load_balancer_create', 'listener_create',
                          'pool_create'], self.octavia.changes())
        self.assertEqual({}, stack['lb'].FnGetAtt('members'))

    def test_conflicts_are_retried(self):
        self._server('s1', '10.0.0.11')
        self.octavia.refuse = ['load_balancer_create', 'listener_create',
                               'batch', 'batch']
        stack = self._create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(2, len(self._calls('load_balancer_create')))
        self.assertEqual(2, len(self._calls('listener_create')))
        self.assertEqual(3, len(self._calls('batch')))
        # Refused batches changed nothing: one was applied.
        self.assertEqual(1, len(self.octavia.batches))
        self.assertEqual(1, len(self._calls('pool_create')))

    def test_busy_batch_is_retried_in_check(self):
        """A 409 "immutable" on the batch is lb_members.Busy: not yet."""
        self._server('s1', '10.0.0.11')
        stack = self._create(health_monitor=None)
        lb = stack['lb']
        self._server('s2', '10.0.0.12')
        self.octavia.refuse = ['batch']
        self.octavia.pending = 0
        plan = load_balancer._Plan([('members', None)])
        self.assertFalse(lb.check_update_complete(plan))
        self.assertEqual(1, len(self.octavia.batches))
        self.assertTrue(lb.check_update_complete(plan))
        self.assertEqual(2, len(self.octavia.batches))

    def test_other_conflict_on_batch_is_final(self):
        """Only a 409 "immutable" waits; a duplicate would not go away."""
        self._server('s1', '10.0.0.11')
        stack = self._create(health_monitor=None)
        self._server('s2', '10.0.0.12')

        def duplicate(*args, **kwargs):
            raise octavia_api.OctaviaClientException(
                code=409, message='Duplicate member 10.0.0.12 80')
        self.octavia._create = duplicate
        plan = load_balancer._Plan([('members', None)])
        err = self.assertRaises(octavia_api.OctaviaClientException,
                                stack['lb'].check_update_complete, plan)
        self.assertEqual(409, err.code)

    def test_timeout_gives_a_clear_error(self):
        now = [1000.0]
        self.patchobject(load_balancer_octavia.timeutils, 'utcnow_ts',
                         side_effect=lambda microsecond=False: now[0])

        def forty_seconds_later():
            now[0] += 40

        self.octavia.stuck = True
        self.octavia.on_show = forty_seconds_later
        self._server('s1', '10.0.0.11')
        stack = self._create(lb_status_timeout=100)
        self.assertEqual((stack.CREATE, stack.FAILED), stack.state)
        self.assertIn('step "loadbalancer" of load balancer lb-1 gave up '
                      'after 120 s (lb_status_timeout is 100 s): Octavia is '
                      'still busy: PENDING_CREATE', stack.status_reason)
        self.assertEqual(['load_balancer_create'], self.octavia.changes())

    def test_load_balancer_in_error(self):
        self._server('s1', '10.0.0.11')
        stack = self._create(health_monitor=None)
        lb = stack['lb']
        self.octavia.lbs['lb-1']['provisioning_status'] = 'ERROR'
        plan = load_balancer._Plan([('listener', None)])
        err = self.assertRaises(exception.ResourceInError,
                                lb.check_create_complete, plan)
        self.assertIn('load balancer lb-1 is in provisioning status ERROR',
                      str(err))

    def test_members_in_error_fail_clearly(self):
        self._server('s1', '10.0.0.11')
        stack = self._create(health_monitor=None)
        lb = stack['lb']
        self._server('s2', '10.0.0.12')
        self.octavia.pending = 0
        original = self.octavia._create

        def failing(*args, **kwargs):
            original(*args, **kwargs)
            for member in self.octavia.members['pool-3']:
                member['provisioning_status'] = 'ERROR'
        self.octavia._create = failing
        plan = load_balancer._Plan([('members', None)])
        err = self.assertRaises(exception.Error, lb.check_update_complete,
                                plan)
        self.assertIn('Octavia did not apply the members of pool pool-3: '
                      'members in ERROR after the update: 10.0.0.11, '
                      '10.0.0.12', str(err))

    def test_server_without_address_on_pool_subnet(self):
        self._server('s1', '172.16.0.4')
        stack = self._create(health_monitor=None)
        self.assertEqual((stack.CREATE, stack.FAILED), stack.state)
        self.assertIn('servers without an address on the pool subnet '
                      'private-id (10.0.0.0/24): web/s1 (s1)',
                      stack.status_reason)
        self.assertEqual([], self.octavia.batches)

    def test_delete_cascades_what_it_created(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.calls = []
        stack.delete()
        self.assertEqual((stack.DELETE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual([('load_balancer_delete', 'lb-1',
                           {'cascade': True})], self.octavia.calls)
        self.assertNotIn('lb-1', self.octavia.lbs)

    def test_delete_tolerates_not_found(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        del self.octavia.lbs['lb-1']
        stack.delete()
        self.assertEqual((stack.DELETE, stack.COMPLETE), stack.state,
                         stack.status_reason)

    def test_delete_retries_conflict(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.refuse = ['load_balancer_delete']
        stack.delete()
        self.assertEqual((stack.DELETE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(2, len(self._calls('load_balancer_delete')))

    def _reuse(self, **props):
        self.octavia.add_lb('lb-old')
        self.octavia.add_pool('pool-old', 'lb-old', members=[
            {'id': 'm-other', 'address': '10.0.0.99', 'protocol_port': 8080,
             'weight': 1, 'admin_state_up': True, 'backup': False,
             'provisioning_status': 'ACTIVE'}])
        props.setdefault('health_monitor', None)
        return self._create(
            loadbalancer='lb-old', vip=None,
            pool={'subnet': 'private', 'protocol_port': 8080,
                  'id': 'pool-old'}, **props)

    def test_reused_load_balancer_and_pool(self):
        self._server('s1', '10.0.0.11')
        self._server('s2', '10.0.0.12')
        stack = self._reuse()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(['batch'], self.octavia.changes())
        self.assertEqual('lb-old', stack['lb'].resource_id)
        self.assertEqual({'id': 'pool-old', 'created': False},
                         self._data(stack, 'pool'))
        self.octavia.calls = []
        stack.delete()
        self.assertEqual((stack.DELETE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        # Only the members it added go, one by one; nothing else.
        self.assertEqual([('member_delete', 'pool-old', 'member-1'),
                          ('member_delete', 'pool-old', 'member-2')],
                         self.octavia.calls)
        self.assertIn('lb-old', self.octavia.lbs)
        # The member someone else added stays, untouched.
        self.assertEqual(['m-other'], [
            m['id'] for m in self.octavia.members['pool-old']])

    def test_reused_pool_member_already_gone(self):
        self._server('s1', '10.0.0.11')
        stack = self._reuse(health_monitor={'type': 'TCP'})
        self.assertEqual(['health_monitor_create', 'batch'],
                         self.octavia.changes())
        members = self._data(stack, lb_members.DATA_MEMBERS)
        member_id = members['s1']['member_id']
        self.octavia.gone.add(member_id)
        self.octavia.calls = []
        stack.delete()
        self.assertEqual((stack.DELETE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(['health_monitor_delete', 'member_delete'],
                         self.octavia.changes())

    def test_update_targets_one_full_batch(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self._server('s2', '10.0.0.12')
        self._server('s3', '10.0.0.13')
        self.octavia.calls = []
        self._update(stack, targets=['web'], lb_status_timeout=200)
        self.assertEqual(['batch'], self.octavia.changes())
        self.assertEqual(['10.0.0.11', '10.0.0.12', '10.0.0.13'],
                         [m['address'] for m in self.octavia.batches[-1]])
        self.assertEqual(
            {'s1', 's2', 's3'},
            set(self._data(stack, lb_members.DATA_MEMBERS)))

    def test_unchanged_update_follows_the_servers(self):
        """A stack update that scaled a group brings the pool along."""
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.calls = []
        self._update(stack)
        self.assertEqual([], self.octavia.changes())
        self._server('s2', '10.0.0.12')
        self._update(stack)
        self.assertEqual(['batch'], self.octavia.changes())

    def test_weight_set_elsewhere_is_kept(self):
        self._server('s1', '10.0.0.11')
        self._server('s2', '10.0.0.12')
        stack = self._create()
        for member in self.octavia.members['pool-3']:
            if member['address'] == '10.0.0.11':
                member.update(weight=5, admin_state_up=False, backup=True)
        self._server('s3', '10.0.0.13')
        self._update(stack)
        batch = {m['address']: m for m in self.octavia.batches[-1]}
        self.assertEqual((5, False, True),
                         (batch['10.0.0.11']['weight'],
                          batch['10.0.0.11']['admin_state_up'],
                          batch['10.0.0.11']['backup']))
        self.assertEqual((1, True, False),
                         (batch['10.0.0.13']['weight'],
                          batch['10.0.0.13']['admin_state_up'],
                          batch['10.0.0.13']['backup']))
        self.assertEqual(5, {m['address']: m for m in self.octavia.members[
            'pool-3']}['10.0.0.11']['weight'])

    def test_last_members_are_deleted_one_by_one(self):
        self._server('s1', '10.0.0.11')
        self._server('s2', '10.0.0.12')
        stack = self._create()
        self.servers.clear()
        self.octavia.calls = []
        self._update(stack)
        self.assertEqual(['member_delete', 'member_delete'],
                         self.octavia.changes())
        self.assertEqual(1, len(self.octavia.batches))
        self.assertNotIn([], self.octavia.batches)
        self.assertEqual([], self.octavia.members['pool-3'])
        self.assertEqual({}, stack['lb'].FnGetAtt('members'))

    def test_protocol_port_changes_in_place(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.calls = []
        self._update(stack, pool={'subnet': 'private', 'protocol_port': 81})
        self.assertEqual(['batch'], self.octavia.changes())
        self.assertEqual([81], [m['protocol_port']
                                for m in self.octavia.batches[-1]])
        self.assertEqual('lb-1', stack['lb'].resource_id)

    def test_health_monitor_change_is_set(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.calls = []
        self._update(stack, health_monitor={'type': 'HTTP', 'delay': 20,
                                            'url_path': '/health'})
        self.assertEqual([('health_monitor_set', 'hm-4',
                           {'healthmonitor': {'delay': 20}})],
                         self.octavia.calls)

    def test_health_monitor_type_change_recreates_it(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.calls = []
        self._update(stack, health_monitor={'type': 'TCP'})
        self.assertEqual(['health_monitor_delete', 'health_monitor_create'],
                         self.octavia.changes())
        self.assertEqual('hm-4', self.octavia.calls[0][1])
        self.assertEqual({'id': 'hm-6', 'created': True},
                         self._data(stack, 'health_monitor'))

    def test_health_monitor_removed(self):
        self._server('s1', '10.0.0.11')
        stack = self._create()
        self.octavia.calls = []
        self._update(stack, health_monitor=None)
        self.assertEqual([('health_monitor_delete', 'hm-4')],
                         self.octavia.calls)
        self.assertNotIn('health_monitor', stack['lb'].data())

    def test_run_alone_with_task_runner(self):
        """Create then delete outside a stack action, as a unit."""
        self._server('s1', '10.0.0.11')
        stack = heat_stack.Stack(self.ctx, 'test', template.Template(
            self._template(health_monitor=None)))
        stack.store()
        lb = stack['lb']
        lb.store()
        scheduler.TaskRunner(lb.create)()
        self.assertEqual((lb.CREATE, lb.COMPLETE), lb.state)
        scheduler.TaskRunner(lb.delete)()
        self.assertEqual((lb.DELETE, lb.COMPLETE), lb.state)
        self.assertEqual(['load_balancer_create', 'listener_create',
                          'pool_create', 'batch', 'load_balancer_delete'],
                         self.octavia.changes())

    def test_targets_read_from_heat_database(self):
        """The real Resolver finds the servers through Heat's tables."""
        resource._register_class('OS::Nova::Server', FakeServer)
        self.addCleanup(resource._register_class, 'OS::Nova::Server',
                        server.Server)
        self.resolve.side_effect = (
            lambda ctxt, policies: RESOLVE(targets.Resolver(), ctxt,
                                           policies))
        self.neutron.any_address = '10.0.0.50'
        tmpl = self._template(health_monitor=None)
        tmpl['resources']['web'] = {'type': 'OS::Nova::Server'}
        stack = heat_stack.Stack(self.ctx, 'test', template.Template(tmpl))
        stack.store()
        stack.create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        server_id = stack['web'].resource_id
        self.assertEqual({server_id: {'member_id': 'member-4',
                                      'address': '10.0.0.50',
                                      'path': 'web'}},
                         stack['lb'].FnGetAtt('members'))
        self.assertEqual(['web'], [m['name']
                                   for m in self.octavia.batches[-1]])
