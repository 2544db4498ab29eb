"""The heat-health RPC topic end to end over oslo.messaging's fake driver."""

import contextlib

from heat.common import exception
from heat.common import service_utils
from heat.tests import utils
from oslo_config import cfg

from heat_health.engine import marking
from heat_health.engine import service
from heat_health.objects import marking as marking_object
from heat_health.rpc import client as rpc_client
from tests.unit import base


class FakeStack(object):
    id = 'stack-1'
    name = 'web'


class FakeResource(object):
    name = 'server'
    resource_id = 'phys-1'


class TestHealthRPC(base.HeatHealthTestCase):

    def setUp(self):
        super(TestHealthRPC, self).setUp()
        self.setup_health_db()
        self.calls = []
        self.lock_error = None
        self.patchobject(service.resources, 'initialise')
        # Notifications on the test transport reach this process only.
        cfg.CONF.set_override('notification_workers', 0, 'heat_health')
        self.patchobject(service.endpoint.resource_locator, 'find_resource',
                         side_effect=self._find)
        self.patchobject(marking.heat_locks, 'locked',
                         side_effect=self._locked)
        self.patchobject(marking, 'set_health',
                         side_effect=self._set_health)
        self.srv = service.HealthEngineService('host-1', 'heat-health')
        self.srv.start()
        self.addCleanup(self.srv.stop)
        self.client = rpc_client.HealthClient()
        self.ctx = utils.dummy_context(tenant_id='tenant-1')
        self.identity = {'tenant': 'tenant-1', 'stack_name': 'web',
                         'stack_id': 'stack-1', 'path': ''}

    @staticmethod
    def _find(ctxt, identity, ref, depth):
        if ref == 'missing':
            raise exception.ResourceNotFound(resource_name=ref,
                                             stack_name='web')
        return FakeStack(), FakeResource()

    @contextlib.contextmanager
    def _locked(self, ctxt, rsrc, engine_id):
        if self.lock_error:
            raise self.lock_error
        self.calls.append(('lock', engine_id))
        yield

    def _set_health(self, rsrc, mark, reason):
        self.calls.append(('set', rsrc.name, mark, reason))

    def test_call_runs_under_the_engines_lock(self):
        result = self.client.mark_unhealthy(self.ctx, self.identity, 'phys-1',
                                            True, 'probe failed')
        self.assertEqual([('lock', self.srv.engine_id),
                          ('set', 'server', True, 'probe failed')],
                         self.calls)
        marking = marking_object.Marking.obj_from_primitive(result)
        self.assertEqual(('server', 'phys-1', 'probe failed'),
                         (marking.resource_name,
                          marking.physical_resource_id, marking.reason))

    def test_heat_errors_come_back_as_themselves(self):
        self.lock_error = exception.ActionInProgress(stack_name='web',
                                                     action='UPDATE')
        self.assertRaises(exception.ActionInProgress,
                          self.client.mark_unhealthy, self.ctx,
                          self.identity, 'server', True, '')
        self.assertRaises(exception.ResourceNotFound,
                          self.client.mark_unhealthy, self.ctx,
                          self.identity, 'missing', True, '')
        self.assertEqual([], marking_object.Marking.get_all_by_stack(
            'stack-1'))

    def test_engine_answers_heats_liveness_probe(self):
        self.assertTrue(service_utils.engine_alive(self.ctx,
                                                   self.srv.engine_id))
