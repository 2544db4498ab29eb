"""OS::Heat::LoadBalancerDeparture holds its server's deletion until the
server is no member of any pool an OS::Heat::LoadBalancer keeps."""

from unittest import mock

from heat.common import template_format
from heat.engine import resource
from heat.engine import scheduler
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.objects import event as event_object
from heat.tests import utils
from oslo_serialization import jsonutils

from heat_health.common import departures
from heat_health.common import lb_members
from heat_health.resources import lb_departure
from tests.unit import base

TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  lb:
    type: OS::Heat::TestResource
  server:
    # Stands for the group member's server, server-1 once created.
    type: OS::Heat::TestResource
  departure:
    type: OS::Heat::LoadBalancerDeparture
    properties:
      server: server-1
      timeout: 30
'''


class DepartureTest(base.HeatHealthTestCase):

    def setUp(self):
        super(DepartureTest, self).setUp()
        resource._register_class('OS::Heat::LoadBalancerDeparture',
                                 lb_departure.LoadBalancerDeparture)
        self.stub_ServerConstraint_validate()
        self.ctx = utils.dummy_context()
        self.stack = heat_stack.Stack(self.ctx, 'test', template.Template(
            template_format.parse(TEMPLATE)))
        self.stack.store()
        self.stack.create()
        self.assertEqual((self.stack.CREATE, self.stack.COMPLETE),
                         self.stack.state, self.stack.status_reason)
        self.stack['server'].resource_id_set('server-1')
        self.departure = self.stack['departure']

    def _members(self, *server_ids):
        self.stack['lb'].data_set(lb_members.DATA_MEMBERS, jsonutils.dumps(
            {s: {'member_id': 'm-' + s, 'address': '10.0.0.5'}
             for s in server_ids}))

    def _start_delete(self):
        runner = scheduler.TaskRunner(self.departure.delete)
        runner.start()
        return runner

    def _finishes(self, runner, steps=3):
        """Whether the deletion ends within a few polls."""
        for _ in range(steps):
            if runner.done() or runner.step():
                return True
        return False

    def test_names_its_server(self):
        self.assertEqual('server-1', self.departure.resource_id)
        self.assertEqual(frozenset(), departures.departing(self.ctx))

    def test_deleted_at_once_when_no_pool_holds_the_server(self):
        self._members('server-2')
        self.assertTrue(self._finishes(self._start_delete()))
        self.assertEqual((self.departure.DELETE, self.departure.COMPLETE),
                         self.departure.state)

    def test_waits_until_the_member_left_the_pool(self):
        self._members('server-1', 'server-2')
        runner = self._start_delete()
        self.assertFalse(self._finishes(runner, steps=5))
        # heat-health-engine sees the server departing and leaves it out.
        self.assertEqual(frozenset(['server-1']),
                         departures.departing(self.ctx))
        self.assertEqual(['lb'], departures.pools_holding(self.ctx,
                                                          'server-1'))
        self._members('server-2')
        self.assertTrue(self._finishes(runner, steps=1))
        self.assertEqual((self.departure.DELETE, self.departure.COMPLETE),
                         self.departure.state)

    def test_a_departure_never_takes_another_stacks_server_out(self):
        # Another project's stack names server-1 (not one of its own).
        other = heat_stack.Stack(
            utils.dummy_context(tenant_id='attacker'), 'other',
            template.Template(template_format.parse(TEMPLATE)))
        other.store()
        other.create()
        self._members('server-1')
        other['lb'].data_set(lb_members.DATA_MEMBERS, jsonutils.dumps(
            {'server-1': {'member_id': 'm', 'address': '10.0.0.5'}}))
        runner = scheduler.TaskRunner(other['departure'].delete)
        runner.start()
        runner.step()
        self.assertEqual(frozenset(), departures.departing(self.ctx))

    def test_after_the_timeout_the_server_goes_anyway_with_an_event(self):
        self._members('server-1')
        now = [1000.0]
        with mock.patch.object(lb_departure.timeutils, 'utcnow_ts',
                               side_effect=lambda **kw: now[0]):
            runner = self._start_delete()
            self.assertFalse(self._finishes(runner, steps=5))
            now[0] += 31
            self.assertTrue(self._finishes(runner, steps=1))
        self.assertEqual((self.departure.DELETE, self.departure.COMPLETE),
                         self.departure.state)
        reasons = [e.resource_status_reason for e in
                   event_object.Event.get_all_by_stack(self.ctx,
                                                       self.stack.id)]
        self.assertTrue(any('still a member of lb after 30 s' in (r or '')
                            for r in reasons), reasons)
