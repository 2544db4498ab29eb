"""GET .../health: the paste filter's rule and the engine's report."""

import datetime
import json

from heat.api.middleware import fault
from heat.common import context
from heat.common import exception
from heat.tests import utils
import oslo_messaging
from oslo_utils import timeutils
import webob

from heat_health.api import middleware
from heat_health.common import policies
from heat_health.db import api as db_api
from heat_health.db import models
from tests.unit import base
from tests.unit import test_engine_endpoint

PATH = '/v1/p1/stacks/web/5d6f/health'


class FakeReportRPC(object):
    def __init__(self):
        self.calls = []
        self.error = None

    def health_report(self, ctxt, identity):
        self.calls.append(identity)
        if self.error:
            raise self.error
        return {'stack_id': identity['stack_id'], 'policies': [],
                'events': []}


class TestReportRoute(base.HeatHealthTestCase):

    def setUp(self):
        super(TestReportRoute, self).setUp()
        self.mock_find_file.return_value = None
        self.rpc = FakeReportRPC()
        self.filter = middleware.HealthMiddleware(None)
        self.filter._rpc = self.rpc
        self.app = fault.FaultWrapper(self.filter)

    def _get(self, path=PATH, roles=('reader',), project='p1'):
        req = webob.Request.blank(path, method='GET')
        req.context = context.RequestContext(
            project_id=project, user_id='u1', roles=list(roles))
        return req.get_response(self.app)

    def test_reader_of_the_project_gets_the_report(self):
        resp = self._get()
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual('5d6f', json.loads(resp.body)['health']['stack_id'])
        self.assertEqual(('p1', 'web', '5d6f'),
                         (self.rpc.calls[0]['tenant'],
                          self.rpc.calls[0]['stack_name'],
                          self.rpc.calls[0]['stack_id']))

    def test_other_project_is_403(self):
        resp = self._get(project='p2')
        self.assertEqual(403, resp.status_int)
        self.assertEqual([], self.rpc.calls)

    def test_without_reader_role_is_403(self):
        resp = self._get(roles=('heat_stack_user',))
        self.assertEqual(403, resp.status_int)
        self.assertIn('health:show', json.loads(resp.body)['error']['message'])
        self.assertEqual([], self.rpc.calls)

    def test_unknown_stack_is_404(self):
        self.rpc.error = exception.EntityNotFound(entity='Stack', name='web')
        self.assertEqual(404, self._get().status_int)

    def test_engine_silent_is_503(self):
        self.rpc.error = oslo_messaging.MessagingTimeout()
        self.assertEqual(503, self._get().status_int)

    def test_rule_is_documented(self):
        rule, = policies.list_rules()
        self.assertEqual('health:show', rule.name)
        self.assertEqual('role:reader and project_id:%(project_id)s',
                         rule.check_str)
        self.assertEqual(['project'], rule.scope_types)


class TestEngineReport(test_engine_endpoint.StackTestCase):

    def _report(self, stack, ctx=None):
        try:
            return self.endpoint.health_report(ctx or self.ctx,
                                               dict(stack.identifier()))
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]

    def test_policies_targets_and_events(self):
        with db_api._facade.writer.using(db_api._Session()) as session:
            session.add(models.Policy(
                id='pol-1', stack_id=self.top.id, resource_name='health',
                project_id='tenant-1', enabled=True, engine_id='e-1',
                lease_expires_at=(timeutils.utcnow() +
                                  datetime.timedelta(minutes=5)),
                generation=3,
                spec={'detection': {'interval': 5,
                                    'recovery_conditional': 'ANY_FAILED',
                                    'detection_modes': [
                                        {'type': 'NODE_STATUS_POLLING'}]}}))
            session.flush()
            session.add(models.Target(
                policy_id='pol-1', server_id='srv-1', stack_id=self.top.id,
                resource_name='web', path='web', state='HEALTHY'))
        # Stored as the owning engine's tracker stores a change.
        done = db_api.target_transition('e-1', [{
            'target': {'id': 1, 'state': 'UNHEALTHY',
                       'state_reason': 'Nova status SHUTOFF',
                       'state_since': timeutils.utcnow(),
                       'observation': 'UNHEALTHY',
                       'observation_reason': 'Nova status SHUTOFF',
                       'observation_source': 'NODE_STATUS_POLLING',
                       'observed_at': timeutils.utcnow()},
            'old_state': 'HEALTHY', 'server_id': 'srv-1', 'generation': 3,
            'event': {'policy_id': 'pol-1', 'server_id': 'srv-1',
                      'old_state': 'HEALTHY', 'new_state': 'UNHEALTHY',
                      'reason': 'Nova status SHUTOFF',
                      'source': 'NODE_STATUS_POLLING',
                      'created_at': timeutils.utcnow()}}])
        self.assertEqual({1}, done)
        report = self._report(self.top)
        json.dumps(report)
        policy, = report['policies']
        self.assertEqual(('pol-1', 'health', True, False, 'e-1', 3),
                         (policy['id'], policy['resource_name'],
                          policy['enabled'], policy['suspended'],
                          policy['engine_id'], policy['generation']))
        self.assertEqual({'UNHEALTHY': 1}, policy['counts'])
        target, = policy['targets']
        self.assertEqual(('srv-1', 'web', 'UNHEALTHY', 'Nova status SHUTOFF'),
                         (target['server_id'], target['path'],
                          target['state'], target['reason']))
        self.assertEqual('NODE_STATUS_POLLING',
                         target['last_observation']['source'])
        event, = report['events']
        self.assertEqual(('HEALTHY', 'UNHEALTHY'),
                         (event['old_state'], event['new_state']))

    def test_stack_without_policies(self):
        self.assertEqual([], self._report(self.top)['policies'])

    def test_unknown_stack_and_other_project(self):
        identity = dict(self.top.identifier())
        identity['stack_name'] = 'nope'
        self.assertRaises(exception.EntityNotFound, self._call, identity)
        # Heat does not show another project's stack at all.
        other = utils.dummy_context(tenant_id='tenant-2')
        self.assertRaises(exception.EntityNotFound, self._call,
                          dict(self.top.identifier()), other)

    def _call(self, identity, ctx=None):
        try:
            return self.endpoint.health_report(ctx or self.ctx, identity)
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]
