"""mark_unhealthy in heat-health-engine, on real Heat stacks and locks."""

from heat.common import exception
from heat.common import messaging
from heat.common import template_format
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.objects import event as event_object
from heat.objects import resource as resource_object
from heat.objects import stack as stack_object
from heat.objects import stack_lock as stack_lock_object
from heat.tests import utils
from oslo_config import cfg
from oslo_db import exception as db_exception
import oslo_messaging

from heat_health.db import api as db_api
from heat_health.engine import endpoint
from heat_health.engine import heat_locks
from heat_health.objects import marking as marking_object
from tests.unit import base

TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
    properties:
      value: web
'''


class StackTestCase(base.HeatHealthTestCase):
    """A stored, created stack and the endpoint of one heat-health-engine."""

    def setUp(self):
        super(StackTestCase, self).setUp()
        self.setup_health_db()
        self.ctx = utils.dummy_context(user='alice', user_id='alice-id',
                                       tenant_id='tenant-1')
        self.endpoint = endpoint.HealthEndpoint('health-engine-1')
        self.top = self._create_stack('top')

    def _create_stack(self, name, owner=None):
        tmpl = template.Template(template_format.parse(TEMPLATE))
        stack = heat_stack.Stack(self.ctx, name, tmpl,
                                 owner_id=owner and owner.id)
        stack.store()
        stack.create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state)
        return stack

    def _mark(self, resource, mark=True, reason='', stack=None):
        identity = dict((stack or self.top).identifier())
        try:
            return self.endpoint.mark_unhealthy(self.ctx, identity, resource,
                                                mark, reason)
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]

    def _state(self, stack, name='web'):
        rsrc = heat_stack.Stack.load(self.ctx, stack_id=stack.id)[name]
        return rsrc.action, rsrc.status, rsrc.status_reason


class TestMarkUnhealthyEndpoint(StackTestCase):

    def test_mark_by_name_with_reason_is_recorded(self):
        result = self._mark('web', reason='probe failed')
        self.assertEqual(('CHECK', 'FAILED', 'probe failed'),
                         self._state(self.top))
        marking = marking_object.Marking.obj_from_primitive(result)
        self.assertEqual(self.top['web'].resource_id,
                         marking.physical_resource_id)
        self.assertEqual(('web', 'alice-id', 'tenant-1', 'api', True),
                         (marking.resource_name, marking.user_id,
                          marking.project_id, marking.source,
                          marking.mark_unhealthy))
        stored = marking_object.Marking.get_all_by_stack(self.top.id)
        self.assertEqual([marking.id], [m.id for m in stored])

    def test_default_reason_names_the_user(self):
        self._mark('web')
        self.assertEqual(
            ('CHECK', 'FAILED', 'Marked unhealthy explicitly by user alice'),
            self._state(self.top))

    def test_reset_only_clears_check_failed(self):
        self._mark('web', mark=False)
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(self.top)[:2])
        self._mark('web', reason='bad')
        self._mark('web', mark=False, reason='fixed by hand')
        self.assertEqual(('CHECK', 'COMPLETE', 'fixed by hand'),
                         self._state(self.top))

    def test_physical_id_of_a_nested_member(self):
        group = self._create_stack('top-group-abc', owner=self.top)
        member_stack = self._create_stack('top-group-abc-0-xyz', owner=group)
        physical_id = member_stack['web'].resource_id
        result = self._mark(physical_id, reason='app is wedged')
        self.assertEqual(('CHECK', 'FAILED', 'app is wedged'),
                         self._state(member_stack))
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(self.top)[:2])
        marking = marking_object.Marking.obj_from_primitive(result)
        self.assertEqual((self.top.id, member_stack.id, 'web'),
                         (marking.stack_id, marking.owner_stack_id,
                          marking.resource_name))

    def test_nested_search_depth_is_limited(self):
        group = self._create_stack('top-group-abc', owner=self.top)
        member_stack = self._create_stack('top-group-abc-0-xyz', owner=group)
        cfg.CONF.set_override('max_nested_depth', 1, group='heat_health')
        self.assertRaises(exception.ResourceNotFound, self._mark,
                          member_stack['web'].resource_id)

    def test_physical_id_in_two_nested_stacks_is_ambiguous(self):
        first = self._create_stack('top-a', owner=self.top)
        second = self._create_stack('top-b', owner=self.top)
        rsrc = heat_stack.Stack.load(self.ctx, stack_id=second.id)['web']
        rsrc.resource_id_set(first['web'].resource_id)
        self.assertRaises(exception.PhysicalResourceIDAmbiguity, self._mark,
                          first['web'].resource_id)

    def test_physical_id_outside_the_stack_is_not_found(self):
        other = self._create_stack('other')
        self.assertRaises(exception.ResourceNotFound, self._mark,
                          other['web'].resource_id)
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(other)[:2])

    def test_unknown_resource_and_stack(self):
        self.assertRaises(exception.ResourceNotFound, self._mark, 'nope')
        identity = dict(self.top.identifier())
        identity['stack_name'] = 'renamed'
        self.assertRaises(exception.EntityNotFound,
                          self.endpoint.mark_unhealthy.__wrapped__,
                          self.endpoint, self.ctx, identity, 'web', True, '')
        self.assertEqual([], marking_object.Marking.get_all_by_stack(
            self.top.id))

    def test_other_project_cannot_mark(self):
        self.ctx = utils.dummy_context(tenant_id='tenant-2')
        self.assertRaises(exception.EntityNotFound, self._mark, 'web')

    def test_non_boolean_is_invalid(self):
        self.assertRaises(exception.Invalid, self._mark, 'web', 'yes')


class TestMarkUnhealthyLocks(StackTestCase):
    """Heat's locks: held by a live engine means 409; ours are released."""

    def _live_engine(self, engine_id):
        server = messaging.get_rpc_server(
            heat_locks.liveness_target(engine_id),
            heat_locks.LivenessEndpoint())
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)

    def test_legacy_stack_lock_of_a_live_engine(self):
        self._live_engine('heat-engine-2')
        stack_lock_object.StackLock.create(self.ctx, self.top.id,
                                           'heat-engine-2')
        self.assertRaises(exception.ActionInProgress, self._mark, 'web')
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(self.top)[:2])

    def test_legacy_stack_lock_is_released(self):
        self._mark('web')
        self.assertIsNone(stack_lock_object.StackLock.get_engine_id(
            self.ctx, self.top.id))

    def test_convergence_resource_lock(self):
        stack_object.Stack.update_by_id(self.ctx, self.top.id,
                                        {'convergence': True})
        web = self.top['web']
        resource_object.Resource.update_by_id(self.ctx, web.id,
                                              {'engine_id': 'worker-9'})
        self.assertRaises(exception.ActionInProgress, self._mark, 'web')
        resource_object.Resource.update_by_id(self.ctx, web.id,
                                              {'engine_id': None})
        self._mark('web', reason='now free')
        self.assertEqual(('CHECK', 'FAILED', 'now free'),
                         self._state(self.top))
        self.assertIsNone(resource_object.Resource.get_obj(
            self.ctx, web.id).engine_id)


class TestMarkUnhealthyReasonAndRecord(StackTestCase):
    """A long reason is kept as Heat keeps it; a lost record loses nothing."""

    def _events(self, stack, name='web'):
        return [(e.resource_action, e.resource_status,
                 e.resource_status_reason)
                for e in event_object.Event.get_all_by_stack(self.ctx,
                                                             stack.id)
                if e.resource_name == name]

    def test_long_reason_is_kept_whole_in_the_resource_and_record(self):
        reason = 'probe failed: ' + 'x' * 286
        result = self._mark('web', reason=reason)
        self.assertEqual(('CHECK', 'FAILED', reason), self._state(self.top))
        # Heat's event keeps the first 255 characters, as Heat does.
        self.assertIn(('CHECK', 'FAILED', reason[:255]),
                      self._events(self.top))
        marking = marking_object.Marking.obj_from_primitive(result)
        self.assertEqual(reason, marking.reason)
        self.assertEqual([reason], [m.reason for m in
                                    marking_object.Marking.get_all_by_stack(
                                        self.top.id)])

    def test_reason_as_long_as_a_text_column_holds_is_kept_whole(self):
        # 'é' is two bytes in UTF-8, the last one a single byte.
        reason = 'é' * 32767 + 'x'
        result = self._mark('web', reason=reason)
        self.assertEqual(reason, self._state(self.top)[2])
        recorded = marking_object.Marking.obj_from_primitive(result).reason
        self.assertEqual(reason, recorded)

    def test_longer_reason_is_refused_before_anything_changes(self):
        error = self.assertRaises(exception.Invalid, self._mark, 'web',
                                  reason='é' * 32768)
        self.assertIn('65536 bytes long in UTF-8, more than the 65535',
                      str(error))
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(self.top)[:2])
        self.assertEqual([], marking_object.Marking.get_all_by_stack(
            self.top.id))

    def test_a_failed_record_still_answers_the_marking(self):
        self.patchobject(db_api, 'marking_create',
                         side_effect=db_exception.DBConnectionError(
                             'database went away'))
        self.assertIsNone(self._mark('web', reason='probe failed'))
        self.assertEqual(('CHECK', 'FAILED', 'probe failed'),
                         self._state(self.top))
        self.assertIsNone(stack_lock_object.StackLock.get_engine_id(
            self.ctx, self.top.id))
        log = self.LOG.output
        self.assertIn('was made but not recorded', log)
        self.assertIn('database went away', log)
        for part in ("'resource_name': 'web'", "'reason': 'probe failed'",
                     "'mark_unhealthy': True", "'user_id': 'alice-id'",
                     "'source': 'api'", self.top.id,
                     self.top['web'].resource_id):
            self.assertIn(part, log)

    def test_a_failed_record_of_a_reset_still_answers(self):
        self._mark('web', reason='bad')
        self.patchobject(marking_object.Marking, 'create',
                         side_effect=RuntimeError('no table'))
        self.assertIsNone(self._mark('web', mark=False, reason='fixed'))
        self.assertEqual(('CHECK', 'COMPLETE', 'fixed'),
                         self._state(self.top))
