"""The heat-health RPC topic end to end over oslo.messaging's fake driver."""

from heat.common import exception
from heat.tests import utils

from heat_health.engine import service
from heat_health.objects import marking as marking_object
from heat_health.rpc import client as rpc_client
from tests.unit import base


class RecordingHeatEngine(object):
    def __init__(self):
        self.calls = []
        self.error = None

    def resource_mark_unhealthy(self, ctxt, *args):
        self.calls.append((ctxt.project_id,) + args)
        if self.error:
            raise self.error


class TestHealthRPC(base.HeatHealthTestCase):

    def setUp(self):
        super(TestHealthRPC, self).setUp()
        self.setup_health_db()
        self.heat = RecordingHeatEngine()
        self.patchobject(service.endpoint.heat_rpc, 'EngineClient',
                         return_value=self.heat)
        self.patchobject(service.endpoint.resource_locator, 'locate',
                         side_effect=self._locate)
        self.srv = service.HealthEngineService('host-1', 'heat-health')
        self.srv.start()
        self.addCleanup(self.srv.stop)
        self.client = rpc_client.HealthClient()
        self.ctx = utils.dummy_context(tenant_id='tenant-1')
        self.identity = {'tenant': 'tenant-1', 'stack_name': 'web',
                         'stack_id': 'stack-1', 'path': ''}

    @staticmethod
    def _locate(ctxt, identity, ref, depth):
        if ref == 'missing':
            raise exception.ResourceNotFound(resource_name=ref,
                                             stack_name='web')
        return service.endpoint.resource_locator.Target(
            identity, ref, 'server', 'phys-1')

    def test_call_reaches_heat_with_the_callers_context(self):
        result = self.client.mark_unhealthy(self.ctx, self.identity, 'phys-1',
                                            True, 'probe failed')
        self.assertEqual([('tenant-1', self.identity, 'phys-1', True,
                           'probe failed')], self.heat.calls)
        marking = marking_object.Marking.obj_from_primitive(result)
        self.assertEqual(('server', 'phys-1', 'probe failed'),
                         (marking.resource_name,
                          marking.physical_resource_id, marking.reason))

    def test_heat_errors_come_back_as_themselves(self):
        self.heat.error = exception.ActionInProgress(stack_name='web',
                                                     action='UPDATE')
        self.assertRaises(exception.ActionInProgress,
                          self.client.mark_unhealthy, self.ctx,
                          self.identity, 'server', True, '')
        self.assertRaises(exception.ResourceNotFound,
                          self.client.mark_unhealthy, self.ctx,
                          self.identity, 'missing', True, '')
        self.assertEqual([], marking_object.Marking.get_all_by_stack(
            'stack-1'))
