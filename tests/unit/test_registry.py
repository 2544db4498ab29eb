"""The registry on a real sqlite database, targets from real Heat stacks."""

import datetime
from unittest import mock

import fixtures
from heat.common import template_format
from heat.db import api as heat_db
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.tests import utils
from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.engine import endpoint
from heat_health.engine import registry
from heat_health.engine import targets
from heat_health.objects import policy as policy_object
from tests.unit import base

LEAVES = '''
heat_template_version: 2018-08-31
resources:
  '0':
    type: OS::Heat::TestResource
  '1':
    type: OS::Heat::TestResource
'''

TOP = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
  other:
    type: OS::Heat::TestResource
  workers:
    type: OS::Heat::TestResource
  cells:
    type: OS::Heat::TestResource
'''


def _policy(policy_id, stack_id='stack-1', names=('web',), grace=300):
    return policy_object.Policy.create_or_update({
        'id': policy_id, 'stack_id': stack_id, 'resource_name': 'policy',
        'project_id': 'tenant', 'enabled': True,
        'spec': {'targets': list(names),
                 'detection': {'node_update_timeout': grace}}})


class ClaimTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(ClaimTestCase, self).setUp()
        self.setup_health_db()

    def test_two_engines_never_share(self):
        for n in range(10):
            _policy('p%d' % n)
        one = registry.Registry('engine-1', lease_seconds=30)
        two = registry.Registry('engine-2', lease_seconds=30)
        first = {p.id for p in one.claim()}
        self.assertEqual(10, len(first))
        self.assertEqual([], two.claim())
        # Renewal keeps them with engine-1.
        self.assertEqual(first, {p.id for p in one.claim()})
        self.assertEqual([], two.claim())

    def test_expired_lease_is_taken_over(self):
        _policy('p1')
        one = registry.Registry('engine-1', lease_seconds=30)
        two = registry.Registry('engine-2', lease_seconds=30)
        self.assertEqual(['p1'], [p.id for p in one.claim()])
        later = timeutils.utcnow() + datetime.timedelta(seconds=31)
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            taken = two.claim()
        self.assertEqual(['engine-2'], [p.engine_id for p in taken])
        # engine-1 comes back: the policy stays with engine-2.
        self.assertEqual([], one.claim())

    def test_release_hands_over_at_once(self):
        _policy('p1')
        one = registry.Registry('engine-1', lease_seconds=30)
        two = registry.Registry('engine-2', lease_seconds=30)
        one.claim()
        self.assertEqual(1, one.release())
        self.assertEqual(['p1'], [p.id for p in two.claim()])

    def test_dead_holder_is_freed_live_one_kept(self):
        for n in range(3):
            _policy('p%d' % n)
        registry.Registry('engine-dead', lease_seconds=300).claim()
        restarted = registry.Registry('engine-new', lease_seconds=300)
        alive = self.patchobject(registry.service_utils, 'engine_alive',
                                 return_value=True)
        self.assertEqual(0, restarted.free_dead_owners())
        self.assertEqual([], restarted.claim())
        alive.return_value = False
        self.assertEqual(3, restarted.free_dead_owners())
        alive.assert_called_with(mock.ANY, 'engine-dead')
        self.assertEqual(['p0', 'p1', 'p2'],
                         sorted(p.id for p in restarted.claim()))

    def test_claim_one(self):
        _policy('p1')
        _policy('p2')
        one = registry.Registry('engine-1', lease_seconds=30)
        self.assertEqual(['p2'], [p.id for p in one.claim(policy_id='p2')])
        self.assertIsNone(policy_object.Policy.get('p1').engine_id)

    def test_delete_removes_targets(self):
        _policy('p1')
        db_api.target_sync('p1', {'s1': {'stack_id': 'x', 'path': 'web',
                                         'resource_name': 'web',
                                         'addresses': []}}, 10)
        self.assertTrue(policy_object.Policy.delete('p1'))
        self.assertEqual({'p1': []}, db_api.target_get_all(['p1']))


class TargetResolutionTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(TargetResolutionTestCase, self).setUp()
        self.setup_health_db()
        # TestResource stands in for OS::Nova::Server (no Nova here).
        self.useFixture(fixtures.MockPatchObject(
            targets, 'SERVER_TYPES', frozenset(['OS::Heat::TestResource'])))
        self.ctx = utils.dummy_context()
        self._stacks = []
        # A group's nested stack, built as Heat builds it: owned by the
        # parent stack, its id the group resource's physical id.
        self.stack = self._create(TOP)
        self._nest(self.stack, 'workers', LEAVES)
        cells = self._nest(self.stack, 'cells', LEAVES.replace(
            'OS::Heat::TestResource', 'OS::Heat::None'))
        for cell in ('0', '1'):
            self._nest(cells, cell, LEAVES)
        self.registry = registry.Registry('engine-1', lease_seconds=30)

    def _create(self, tmpl, owner=None):
        stack = heat_stack.Stack(
            self.ctx, 'nested-%d' % len(self._stacks) if owner else 'top',
            template.Template(template_format.parse(tmpl)),
            owner_id=owner and owner.id)
        stack.store()
        stack.create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        # The legacy test engine leaves the stored status behind.
        heat_db.stack_update(self.ctx, stack.id, {'status': 'COMPLETE'})
        self._stacks.append(stack)
        return stack

    def _nest(self, parent, name, tmpl):
        nested = self._create(tmpl, owner=parent)
        parent[name].resource_id_set(nested.id)
        return nested

    def test_servers_at_any_depth(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers', 'cells'])
        found = self.registry.refresh_targets(policy)
        self.assertEqual(
            ['cells/0/0', 'cells/0/1', 'cells/1/0', 'cells/1/1', 'web',
             'workers/0', 'workers/1'], sorted(t.path for t in found))
        web = [t for t in found if t.path == 'web'][0]
        self.assertEqual(self.stack['web'].resource_id, web.server_id)
        self.assertEqual(self.stack.id, web.stack_id)
        self.assertEqual('INIT', web.state)
        self.assertFalse(self.registry.stack_in_progress(policy))
        self.assertEqual([], self.registry.missing_targets(policy))

    def test_keeps_state_and_follows_removal(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers'])
        self.registry.refresh_targets(policy)
        with db_api._facade.writer.using(db_api._Session()) as session:
            session.query(db_api.models.Target).filter_by(
                path='web').update({'state': 'HEALTHY'})
        policy = _policy('p1', self.stack.id, ['web'])
        found = self.registry.refresh_targets(policy)
        self.assertEqual([('web', 'HEALTHY')],
                         [(t.path, t.state) for t in found])

    def test_in_progress_and_missing(self):
        policy = _policy('p1', self.stack.id, ['web', 'gone'])
        self.registry.refresh_targets(policy)
        self.assertEqual(['gone'], self.registry.missing_targets(policy))
        heat_db.stack_update(self.ctx, self.stack.id,
                             {'status': 'IN_PROGRESS'})
        self.registry.refresh_targets(policy)
        self.assertTrue(self.registry.stack_in_progress(policy))

    def test_many_policies_in_one_batch(self):
        policies = [_policy('p%d' % n, self.stack.id, ['workers'])
                    for n in range(5)]
        result = self.registry.refresh_all(policies)
        self.assertEqual({'p%d' % n: 2 for n in range(5)},
                         {k: len(v) for k, v in result.items()})


class RegistrationDeadlineTestCase(TargetResolutionTestCase):
    """register_policy as heat-engine calls it, with its deadline."""

    def setUp(self):
        super(RegistrationDeadlineTestCase, self).setUp()
        self.endpoint = endpoint.HealthEndpoint('engine-1', self.registry)

    def _request(self, deadline, policy_id='p1'):
        return {'id': policy_id, 'stack_id': self.stack.id,
                'resource_name': 'policy', 'enabled': True,
                'spec': {'targets': ['web']},
                'deadline': deadline.isoformat()}

    def test_registration_in_time_is_confirmed(self):
        answer = self.endpoint.register_policy(
            self.ctx, self._request(timeutils.utcnow() +
                                    datetime.timedelta(seconds=10)))
        self.assertEqual('engine-1', answer['engine_id'])
        self.assertEqual(['web'], answer['targets'])
        self.assertIsNotNone(policy_object.Policy.get('p1'))

    def test_registration_past_its_deadline_stores_nothing(self):
        answer = self.endpoint.register_policy(
            self.ctx, self._request(timeutils.utcnow() -
                                    datetime.timedelta(seconds=1)))
        self.assertEqual({'policy_id': 'p1', 'expired': True}, answer)
        self.assertIsNone(policy_object.Policy.get('p1'))

    def _deadline_passes_during_resolution(self):
        """A deadline that passes while the targets are being resolved."""
        deadline = timeutils.utcnow() + datetime.timedelta(seconds=5)
        resolve = self.registry.refresh_targets

        def slow_resolution(policy):
            found = resolve(policy)
            self.useFixture(fixtures.MockPatchObject(
                timeutils, 'utcnow',
                return_value=deadline + datetime.timedelta(seconds=1)))
            return found
        self.useFixture(fixtures.MockPatchObject(
            self.registry, 'refresh_targets', side_effect=slow_resolution))
        return deadline

    def test_new_policy_stored_as_the_deadline_passed_is_removed(self):
        deadline = self._deadline_passes_during_resolution()
        answer = self.endpoint.register_policy(self.ctx,
                                               self._request(deadline))
        self.assertTrue(answer['expired'])
        self.assertIsNone(policy_object.Policy.get('p1'))
        self.assertEqual([], self.registry.claim())

    def test_update_stored_as_the_deadline_passed_is_kept(self):
        _policy('p1', self.stack.id, ['web'])
        deadline = self._deadline_passes_during_resolution()
        answer = self.endpoint.register_policy(self.ctx,
                                               self._request(deadline))
        self.assertNotIn('expired', answer)
        self.assertIsNotNone(policy_object.Policy.get('p1'))
