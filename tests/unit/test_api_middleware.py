"""The paste filter inside Heat's faultwrap, with Heat's real policy rules."""

import json

from heat.api.middleware import fault
from heat.common import context
from heat.common import exception
import oslo_messaging
import webob

from heat_health.api import middleware
from tests.unit import base

PATH = '/v1/p1/stacks/web/5d6f/resources/my%20server'


class FakeHealthRPC(object):
    def __init__(self, error=None):
        self.calls = []
        self.error = error

    def mark_unhealthy(self, ctxt, identity, resource, mark, reason):
        self.calls.append((identity, resource, mark, reason))
        if self.error:
            raise self.error


class HeatApp(object):
    """Stands for the rest of Heat's pipeline; records what reached it."""

    def __init__(self):
        self.seen = []

    @webob.dec.wsgify
    def __call__(self, req):
        self.seen.append((req.method, req.path_info))
        return webob.Response(body=b'{"heat": true}',
                              content_type='application/json')


class TestHealthMiddleware(base.HeatHealthTestCase):

    def setUp(self):
        super(TestHealthMiddleware, self).setUp()
        # No policy file: Heat's registered default rules apply.
        self.mock_find_file.return_value = None
        self.heat = HeatApp()
        self.filter = middleware.HealthMiddleware(self.heat)
        self.rpc = FakeHealthRPC()
        self.filter._rpc = self.rpc
        self.app = fault.FaultWrapper(self.filter)

    def _request(self, method='PATCH', path=PATH, body=None,
                 roles=('member', 'reader'), project='p1', is_admin=False):
        req = webob.Request.blank(path, method=method)
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = 'application/json'
        req.context = context.RequestContext(
            project_id=project, user_id='u1', roles=list(roles),
            is_admin=is_admin)
        return req.get_response(self.app)

    def test_mark_answers_like_heat(self):
        resp = self._request(body={'mark_unhealthy': True,
                                   'resource_status_reason': 'probe failed'})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual('application/json', resp.content_type)
        self.assertIsNone(json.loads(resp.body))
        identity, resource, mark, reason = self.rpc.calls[0]
        self.assertEqual('my server', resource)
        self.assertEqual(('p1', 'web', '5d6f'),
                         (identity['tenant'], identity['stack_name'],
                          identity['stack_id']))
        self.assertEqual((True, 'probe failed'), (mark, reason))
        self.assertEqual([], self.heat.seen)

    def test_path_without_version_prefix(self):
        resp = self._request(path=PATH[len('/v1'):],
                             body={'mark_unhealthy': False})
        self.assertEqual(200, resp.status_int)
        self.assertEqual(False, self.rpc.calls[0][2])

    def test_other_requests_pass_through(self):
        for method, path in [('GET', PATH), ('DELETE', PATH),
                             ('PATCH', '/v1/p1/stacks/web/5d6f'),
                             ('PATCH', PATH + '/signal')]:
            resp = self._request(method=method, path=path)
            self.assertEqual(b'{"heat": true}', resp.body)
        self.assertEqual(4, len(self.heat.seen))
        self.assertEqual([], self.rpc.calls)

    def test_bad_body_is_a_heat_style_400(self):
        resp = self._request(body={'mark_unhealthy': 'maybe'})
        self.assertEqual(400, resp.status_int)
        error = json.loads(resp.body)
        self.assertEqual('HTTPBadRequest', error['error']['type'])
        self.assertIn('acceptable values are: true, false',
                      error['error']['message'])
        self.assertEqual([], self.rpc.calls)

    def test_reader_is_denied_by_heat_policy(self):
        resp = self._request(body={'mark_unhealthy': True},
                             roles=('reader',))
        self.assertEqual(403, resp.status_int)
        self.assertEqual([], self.rpc.calls)

    def test_other_project_in_path_is_denied(self):
        resp = self._request(body={'mark_unhealthy': True}, project='p2')
        self.assertEqual(403, resp.status_int)
        self.assertEqual([], self.rpc.calls)

    def test_policy_checked_before_body(self):
        resp = self._request(body={'nonsense': 1}, roles=('reader',))
        self.assertEqual(403, resp.status_int)

    def test_engine_errors_keep_heat_codes(self):
        for error, code in [
                (exception.ResourceNotFound(resource_name='x',
                                            stack_name='web'), 404),
                (exception.EntityNotFound(entity='Stack', name='web'), 404),
                (exception.ActionInProgress(stack_name='web',
                                            action='UPDATE'), 409),
                (exception.PhysicalResourceIDAmbiguity(phys_id='x'), 400)]:
            self.rpc.error = error
            resp = self._request(body={'mark_unhealthy': True})
            self.assertEqual(code, resp.status_int)
            self.assertEqual(error.message,
                             json.loads(resp.body)['error']['message'])

    def test_engine_not_answering_is_503(self):
        self.rpc.error = oslo_messaging.MessagingTimeout()
        resp = self._request(body={'mark_unhealthy': True})
        self.assertEqual(503, resp.status_int)
        self.assertIn('did not answer',
                      json.loads(resp.body)['error']['message'])
