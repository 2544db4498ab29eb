"""A tenant's template never reaches another project's servers or policies.

The attacker knows a victim's server UUID and writes a template that names
it: through ``external_id`` on a resource whose type a ``resource_registry``
glob or per-resource entry turns into ``OS::Heat::None`` (Heat then takes
the id unchecked). Heat's own code creates the stacks in its database here,
and the engine's real target resolution, load balancer reading and tracker
run on them; only Octavia's member listing is a double.
"""

import datetime

import fixtures
from heat.common import exception
from heat.common import template_format
from heat.engine import environment
from heat.engine import resource
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.tests import utils
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from heat_health.common import lb_members
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.monitor import lb_status
from heat_health.engine.monitor import tracker as tracker_mod
from heat_health.engine.ownership import registry as registry_mod
from heat_health.objects import policy as policy_object
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec
from heat_health.policy import targets
from heat_health.resources import health_policy
from heat_health.resources import lb_departure
from heat_health.resources import load_balancer
from tests.unit import base

VICTIM_SERVER = '7a1d0e52-0c39-4a57-9d55-4d3c1e0f6a01'
ATTACKER_SERVER = '0b9e6a3c-5f1d-4e8b-8a5e-2f4c6d8e0a02'

ATTACK = '''
heat_template_version: 2018-08-31
resources:
  globbed:
    type: OS::Nova::Server
    external_id: %(victim)s
  named:
    type: OS::Nova::Server
  renamed:
    type: OS::Nova::Server
  plain:
    type: OS::Heat::TestResource
    external_id: %(victim)s
  own:
    type: My::Box
  group:
    type: OS::Heat::TestResource
''' % {'victim': VICTIM_SERVER}

# A glob over the server type, a per-resource entry, and a chain of
# aliases that Heat follows to a real (stand-in) server type.
ATTACK_ENV = {'resource_registry': {
    'OS::Nova::Serve*': 'OS::Heat::None',
    'My::Box': 'My::Machine',
    'My::Machine': 'OS::Heat::TestResource',
    'resources': {'named': {'OS::Nova::Server': 'OS::Heat::None'}}}}

# A group's member stack at depth one: one member adopted by external_id.
NESTED = '''
heat_template_version: 2018-08-31
resources:
  '0':
    type: OS::Heat::TestResource
  '1':
    type: OS::Heat::TestResource
    external_id: %(victim)s
''' % {'victim': VICTIM_SERVER}


def _policy(policy_id, stack_id, names, project='attacker', modes=None):
    spec = {'targets': list(names),
            'detection': {'node_update_timeout': 0, 'interval': 5}}
    if modes:
        spec['detection']['detection_modes'] = [{'type': m} for m in modes]
    return policy_object.Policy.create_or_update({
        'id': policy_id, 'stack_id': stack_id, 'resource_name': 'policy',
        'project_id': project, 'enabled': True, 'spec': spec})


class AttackersTemplateTestCase(base.HeatHealthTestCase):
    """Targets are what Heat created as servers, never an external id."""

    def setUp(self):
        super(AttackersTemplateTestCase, self).setUp()
        self.setup_health_db()
        # TestResource stands in for a server Heat creates (no Nova here);
        # OS::Nova::Server stays one too, so the glob and the per-resource
        # entry are what keep those resources out.
        self.useFixture(fixtures.MockPatchObject(
            targets, 'SERVER_TYPES',
            frozenset(['OS::Nova::Server', 'OS::Heat::TestResource'])))
        self.ctx = utils.dummy_context(tenant_id='attacker')
        self.stack = self._create('attack', ATTACK, ATTACK_ENV)
        nested = self._create('attack-group', NESTED, owner=self.stack)
        self.stack['group'].resource_id_set(nested.id)
        self.nested = nested

    def _create(self, name, tmpl, env=None, owner=None):
        stack = heat_stack.Stack(
            self.ctx, name, template.Template(
                template_format.parse(tmpl),
                env=environment.Environment(env or {})),
            owner_id=owner and owner.id)
        stack.validate()
        stack.store()
        stack.create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        return stack

    def test_heat_created_the_attack_as_written(self):
        # What makes the attack: Heat took the victim's id unchecked.
        self.assertEqual(VICTIM_SERVER, self.stack['globbed'].resource_id)
        self.assertEqual(VICTIM_SERVER, self.stack['plain'].resource_id)
        self.assertEqual(VICTIM_SERVER, self.nested['1'].resource_id)
        self.assertEqual('OS::Nova::Server', self.stack['named'].type())

    def test_no_target_but_what_heat_created_as_a_server(self):
        registry = registry_mod.Registry('engine-1', lease_seconds=30)
        policy = _policy('attack-policy', self.stack.id,
                         ['globbed', 'named', 'renamed', 'plain', 'own',
                          'group'])
        found = registry.refresh_targets(policy)
        self.assertEqual(
            {'own': self.stack['own'].resource_id,
             'group/0': self.nested['0'].resource_id},
            {t.path: t.server_id for t in found})
        self.assertNotIn(VICTIM_SERVER, {t.server_id for t in found})
        resolution = registry.resolve_now(policy)
        self.assertEqual([('globbed', targets.EXTERNAL_REASON),
                          ('group/1', targets.EXTERNAL_REASON),
                          ('plain', targets.EXTERNAL_REASON)],
                         sorted(resolution.unwatched))
        # The attacker's own report says which resources are not watched.
        error = registry.error(policy.id) or ''
        for path in ('globbed', 'group/1', 'plain'):
            self.assertIn('resource %s is not watched: %s' % (
                path, targets.EXTERNAL_REASON), error)

    def test_types_are_what_heat_instantiates(self):
        types = targets._resource_types(
            template_format.parse(ATTACK), ATTACK_ENV)
        self.assertEqual('OS::Heat::None', types['named'])
        self.assertEqual('OS::Heat::None', types['renamed'])
        self.assertEqual('OS::Heat::TestResource', types['own'])
        self.assertIs(targets._EXTERNAL, types['globbed'])

    def test_an_unreadable_environment_watches_nothing_of_its_stack(self):
        self.assertEqual({}, targets._parse(
            1, template_format.parse(ATTACK),
            {'resource_registry': {'My::Box': 42}}))


POOL = 'pool-shared'
ADDRESS = '10.0.0.5'


class VerdictsStayWithTheirPolicyTestCase(base.HeatHealthTestCase):
    """The attacker's own pool and checks never judge the victim's target.

    Even where both policies watch one server (say the attacker's target
    resolution had been fooled), the attacker's load balancer, naming the
    victim's pool, and its poll URL only change the attacker's target.
    """

    def setUp(self):
        super(VerdictsStayWithTheirPolicyTestCase, self).setUp()
        self.setup_health_db()
        self.now = timeutils.utcnow()
        self.victim = self._stack('victim', 'victim')
        self.attacker = self._stack('attacker', 'attacker')
        modes = (obs.NODE_STATUS_POLLING, obs.NODE_STATUS_POLL_URL,
                 obs.LB_STATUS_POLLING)
        self.policies = {
            name: self._policy(name, stack, modes)
            for name, stack in (('victim', self.victim),
                                ('attacker', self.attacker))}
        self.tracker = tracker_mod.Tracker(
            'engine-1', 'host-1', notifier=_Notifier(),
            clock=lambda: self.now)
        with db_session.facade.reader.using(db_session.Session()) as session:
            rows = session.query(models.Policy).all()
            found = session.query(models.Target).all()
            for row in rows + found:
                session.expunge(row)
        by_policy = {}
        for row in found:
            by_policy.setdefault(row.policy_id, []).append(row)
        self.tracker.load(rows, by_policy, {r.id: r.generation for r in rows})

    def _stack(self, project, name):
        ctx = utils.dummy_context(tenant_id=project)
        stack = heat_stack.Stack(ctx, name, template.Template(
            template_format.parse('''
heat_template_version: 2018-08-31
resources:
  lb:
    type: OS::Heat::TestResource
''')))
        stack.store()
        stack.create()
        # Both load balancers record the same pool and a member at the
        # same address for the server.
        stack['lb'].data_set(lb_members.DATA_SPEC, jsonutils.dumps(
            {'pool_id': POOL, 'loadbalancer_id': 'lb-1',
             'protocol_port': 80}))
        stack['lb'].data_set(lb_members.DATA_MEMBERS, jsonutils.dumps(
            {VICTIM_SERVER: {'member_id': 'm-1', 'address': ADDRESS}}))
        return stack

    def _policy(self, name, stack, modes):
        policy = _policy(name, stack.id, ['web'], project=name, modes=modes)
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Policy).filter_by(id=name).update(
                {'engine_id': 'engine-1', 'generation': 1,
                 'lease_expires_at': self.now + datetime.timedelta(days=1)})
            session.add(models.Target(
                policy_id=name, server_id=VICTIM_SERVER, stack_id=stack.id,
                resource_name='web', path='web', state='HEALTHY',
                state_since=self.now))
        return policy

    def _states(self):
        with db_session.facade.reader.using(db_session.Session()) as session:
            return {t.policy_id: t.state
                    for t in session.query(models.Target)}

    def _read_pools(self, status, readers):
        policies = [_View(self.policies[name]) for name in readers]
        pools = lb_status.pools(utils.dummy_context(is_admin=True), policies,
                                {p.id: {VICTIM_SERVER} for p in policies})
        poller = lb_status.MemberStatusPoller(
            lambda pool_id: [{'id': 'm-1', 'address': ADDRESS,
                              'protocol_port': 80,
                              'operating_status': status,
                              'admin_state_up': True}],
            self.tracker.observe_all, utcnow=lambda: self.now)
        poller.poll(pools)
        return pools

    def test_attackers_pool_reading_never_reaches_the_victim(self):
        pools = self._read_pools('ERROR', ['attacker', 'victim'])
        # One reading of the shared pool, judged by each reader.
        self.assertEqual([POOL], [p.pool_id for p in pools])
        self.assertEqual({'attacker': 'UNHEALTHY', 'victim': 'UNHEALTHY'},
                         self._states())
        self.now += datetime.timedelta(seconds=5)
        self._read_pools('ONLINE', ['attacker'])
        self.assertEqual({'attacker': 'HEALTHY', 'victim': 'UNHEALTHY'},
                         self._states())

    def test_attackers_poll_url_verdict_never_reaches_the_victim(self):
        self.tracker.observe(obs.Observation(
            VICTIM_SERVER, obs.UNHEALTHY, 'poll URL answered 500',
            obs.NODE_STATUS_POLL_URL, self.now, 'attacker'))
        self.assertEqual({'attacker': 'UNHEALTHY', 'victim': 'HEALTHY'},
                         self._states())

    def test_a_nova_fact_still_reaches_both(self):
        self.tracker.observe(obs.Observation(
            VICTIM_SERVER, obs.UNHEALTHY, 'Nova status SHUTOFF',
            obs.NODE_STATUS_POLLING, self.now))
        self.assertEqual({'attacker': 'UNHEALTHY', 'victim': 'UNHEALTHY'},
                         self._states())


class _View(object):
    """What lb_status.pools reads of a policy."""

    def __init__(self, policy):
        self.id = policy.id
        self.stack_id = policy.stack_id
        self.parsed = policy_spec.PolicySpec.parse(policy.spec)


class _Notifier(object):
    def info(self, ctxt, event_type, payload):
        pass


TAKE_OVER = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
  policy:
    type: OS::Heat::HealthPolicy
    external_id: %(victim_policy)s
    properties:
      targets: [web]
  departure:
    type: OS::Heat::LoadBalancerDeparture
    external_id: %(victim_server)s
    properties:
      server: %(own_server)s
'''


class NoTakeOverTestCase(base.HeatHealthTestCase):
    """A stack never takes over a policy or a departure by its id."""

    def setUp(self):
        super(NoTakeOverTestCase, self).setUp()
        for name, cls in (
                ('OS::Heat::HealthPolicy', health_policy.HealthPolicy),
                ('OS::Heat::LoadBalancerDeparture',
                 lb_departure.LoadBalancerDeparture),
                ('OS::Heat::LoadBalancer', load_balancer.LoadBalancer)):
            resource._register_class(name, cls)
        self.stub_ServerConstraint_validate()
        self.ctx = utils.dummy_context(tenant_id='attacker')

    def _stack(self, only, external=True, **kwargs):
        tmpl = template_format.parse(TAKE_OVER % {
            'victim_policy': 'victim-policy-id',
            'victim_server': VICTIM_SERVER,
            'own_server': ATTACKER_SERVER})
        resources = tmpl['resources']
        for name in list(resources):
            if name not in (only, 'web'):
                del resources[name]
            elif not external:
                resources[name].pop('external_id', None)
        # Targets: TestResource stands in for a server.
        self.patchobject(health_policy.HealthPolicy, '_validate_targets')
        return heat_stack.Stack(self.ctx, 'take-over-' + only,
                                template.Template(tmpl), **kwargs)

    def _refused(self, stack):
        return str(self.assertRaises(exception.StackValidationFailed,
                                     stack.validate))

    def test_health_policy_with_external_id_is_refused(self):
        msg = self._refused(self._stack('policy'))
        self.assertIn('resources.policy.external_id', msg)
        self.assertIn('OS::Heat::HealthPolicy cannot be created from '
                      'external_id', msg)

    def test_departure_with_external_id_is_refused(self):
        msg = self._refused(self._stack('departure'))
        self.assertIn('resources.departure.external_id', msg)
        self.assertIn('OS::Heat::LoadBalancerDeparture cannot be created '
                      'from external_id', msg)

    def test_external_id_is_refused_even_unvalidated(self):
        stack = self._stack('departure')
        stack.store()
        stack.create()
        self.assertEqual((stack.CREATE, stack.FAILED), stack.state)
        self.assertIn('cannot be adopted or created from external_id',
                      stack.status_reason)
        self.assertNotEqual(VICTIM_SERVER, stack['departure'].resource_id)

    def test_adopted_policy_and_departure_are_refused(self):
        adopt = {'resources': {
            'web': {'resource_id': ATTACKER_SERVER},
            'policy': {'resource_id': 'victim-policy-id'},
            'departure': {'resource_id': VICTIM_SERVER}}}
        for name, kind in (('policy', 'OS::Heat::HealthPolicy'),
                           ('departure',
                            'OS::Heat::LoadBalancerDeparture')):
            stack = self._stack(name, external=False,
                                adopt_stack_data=adopt)
            msg = self._refused(stack)
            self.assertIn('%s cannot be adopted' % kind, msg)
            stack.store()
            stack.adopt()
            self.assertEqual((stack.ADOPT, stack.FAILED), stack.state)
            self.assertIn('cannot be adopted', stack.status_reason)

    def test_without_external_id_they_are_valid(self):
        for name in ('policy', 'departure'):
            self.assertIsNone(self._stack(name, external=False).validate())

    def test_a_target_created_from_external_id_is_refused(self):
        tmpl = template_format.parse(TAKE_OVER % {
            'victim_policy': 'x', 'victim_server': VICTIM_SERVER,
            'own_server': ATTACKER_SERVER})
        del tmpl['resources']['departure']
        del tmpl['resources']['policy']['external_id']
        tmpl['resources']['web'] = {'type': 'OS::Nova::Server',
                                    'external_id': VICTIM_SERVER}
        stack = heat_stack.Stack(self.ctx, 'target', template.Template(tmpl))
        err = self.assertRaises(exception.StackValidationFailed,
                                stack['policy'].validate)
        self.assertIn('target "web" is created from external_id', str(err))
        self.assertIn('resources.policy.properties.targets[0]', str(err))
