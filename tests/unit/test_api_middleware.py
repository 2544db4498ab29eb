"""The paste filter inside Heat's faultwrap, with Heat's real policy rules."""

import json
from unittest import mock

from heat.api.middleware import fault
from heat.common import context
from heat.common import exception
from oslo_config import cfg
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


class _FilterTestCase(base.HeatHealthTestCase):
    """The filter in front of a fake Heat, its engine calls faked."""

    def setUp(self):
        super(_FilterTestCase, self).setUp()
        # No policy file: Heat's registered default rules apply.
        self.mock_find_file.return_value = None
        self.heat = HeatApp()
        self.filter = middleware.HealthMiddleware(self.heat)
        self.rpc = FakeHealthRPC()
        self.filter._rpc = self.rpc
        self.app = fault.FaultWrapper(self.filter)


class TestHealthMiddleware(_FilterTestCase):

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


class TestMarkUnhealthyContract(_FilterTestCase):
    """Long reasons, hostile bodies and an unrecorded marking, as answered."""

    def _body_limit(self, limit):
        cfg.CONF.set_override('max_json_body_size', limit)
        self.addCleanup(cfg.CONF.clear_override, 'max_json_body_size')

    def _request(self, body):
        return self._raw_request(json.dumps(body).encode())

    def _raw_request(self, body, content_length=None):
        req = webob.Request.blank(PATH, method='PATCH')
        req.body = body
        req.content_type = 'application/json'
        if content_length is not None:
            req.content_length = content_length
        req.context = context.RequestContext(
            project_id='p1', user_id='u1', roles=['member', 'reader'])
        return req.get_response(self.app)

    def _error(self, resp, code=400):
        self.assertEqual(code, resp.status_int, resp.body)
        self.assertEqual([], self.rpc.calls)
        return json.loads(resp.body)['error']

    def test_reason_longer_than_255_characters_is_passed_whole(self):
        reason = 'probe failed ' + 'x' * 287
        resp = self._request(body={'mark_unhealthy': True,
                                   'resource_status_reason': reason})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertIsNone(json.loads(resp.body))
        self.assertEqual((True, reason), self.rpc.calls[0][2:])

    def test_marking_made_but_not_recorded_is_200_null(self):
        # The engine answers None when it changed the state but could not
        # write its record.
        self.filter._rpc = mock.Mock()
        self.filter._rpc.mark_unhealthy.return_value = None
        resp = self._request(body={'mark_unhealthy': True})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual('application/json', resp.content_type)
        self.assertEqual(b'null', resp.body)
        self.assertEqual(1, self.filter._rpc.mark_unhealthy.call_count)

    def test_deeply_nested_arrays_are_400(self):
        error = self._error(self._raw_request(
            b'[' * 100000 + b']' * 100000))
        self.assertEqual('HTTPBadRequest', error['type'])
        self.assertIn('nests JSON arrays or objects too deeply',
                      error['message'])

    def test_deeply_nested_objects_are_400(self):
        error = self._error(self._raw_request(
            b'{"mark_unhealthy": true, "resource_status_reason": ' +
            b'{"a": ' * 100000 + b'1' + b'}' * 100000 + b'}'))
        self.assertIn('too deeply', error['message'])

    def test_unpaired_surrogate_in_reason_is_400(self):
        error = self._error(self._raw_request(
            b'{"mark_unhealthy": true, '
            b'"resource_status_reason": "\\udc00 broken"}'))
        self.assertIn('not valid Unicode text', error['message'])

    def test_body_over_max_json_body_size_is_400_as_in_heat(self):
        self._body_limit(200)
        body = json.dumps({'mark_unhealthy': True,
                           'resource_status_reason': 'x' * 300}).encode()
        error = self._error(self._raw_request(body))
        self.assertEqual('RequestLimitExceeded', error['type'])
        self.assertIn('%d bytes long' % len(body), error['message'])

    def test_announced_size_is_refused_before_reading(self):
        self._body_limit(200)
        error = self._error(self._raw_request(b'{"mark_unhealthy": true}',
                                              content_length=10 ** 9))
        self.assertEqual('RequestLimitExceeded', error['type'])
        self.assertIn('1000000000 bytes long', error['message'])

    def test_health_report_reads_no_body(self):
        self.filter._rpc = mock.Mock()
        self.filter._rpc.health_report.return_value = {'policies': []}
        req = webob.Request.blank('/v1/p1/stacks/web/5d6f/health',
                                  method='GET')
        req.body = b'[' * 100000 + b']' * 100000
        req.context = context.RequestContext(
            project_id='p1', user_id='u1', roles=['member', 'reader'])
        resp = req.get_response(self.app)
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual({'health': {'policies': []}}, json.loads(resp.body))


class TestPauseAndTimeline(_FilterTestCase):
    """POST .../health/pause|resume and GET .../health/events."""

    HEALTH = '/v1/p1/stacks/web/5d6f/health'

    def setUp(self):
        super(TestPauseAndTimeline, self).setUp()
        self.filter._rpc = mock.Mock()
        self.filter._rpc.set_paused.return_value = {'policies': []}
        self.filter._rpc.health_events.return_value = {'events': []}

    def _request(self, method, suffix, body=None, roles=('member', 'reader'),
                 query=''):
        req = webob.Request.blank(self.HEALTH + suffix + query, method=method)
        if body is not None:
            req.body = (body if isinstance(body, bytes)
                        else json.dumps(body).encode())
        req.context = context.RequestContext(
            project_id='p1', user_id='u1', roles=list(roles))
        return req.get_response(self.app)

    def _message(self, resp, code):
        self.assertEqual(code, resp.status_int, resp.body)
        return json.loads(resp.body)['error']['message']

    def test_pause_passes_policy_and_reason(self):
        resp = self._request('POST', '/pause', {'policy': 'health',
                                                'reason': 'kernel upgrade'})
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual({'policies': []}, json.loads(resp.body))
        args, kwargs = self.filter._rpc.set_paused.call_args
        self.assertEqual(True, args[2])
        self.assertEqual({'policy': 'health', 'reason': 'kernel upgrade'},
                         kwargs)

    def test_resume_without_body_means_every_policy(self):
        resp = self._request('POST', '/resume')
        self.assertEqual(200, resp.status_int, resp.body)
        args, kwargs = self.filter._rpc.set_paused.call_args
        self.assertEqual((False, {'policy': None, 'reason': None}),
                         (args[2], kwargs))

    def test_bad_pause_bodies_are_400(self):
        for suffix, body, words in [
                ('/pause', b'[1]', 'must be a JSON object'),
                ('/pause', b'{', 'not valid JSON'),
                ('/pause', {'policy': 7}, '"policy" must be a non-empty'),
                ('/pause', {'reason': 'x' * 256}, 'more than 255'),
                ('/pause', {'why': 'x'}, 'Invalid keys: why'),
                ('/resume', {'reason': 'x'}, 'Invalid keys: reason')]:
            self.assertIn(words, self._message(
                self._request('POST', suffix, body), 400))
        self.filter._rpc.set_paused.assert_not_called()

    def test_reader_may_read_the_timeline_but_not_pause(self):
        for suffix in ('/pause', '/resume'):
            self.assertIn('health:pause', self._message(
                self._request('POST', suffix, roles=('reader',)), 403))
        self.filter._rpc.set_paused.assert_not_called()
        resp = self._request('GET', '/events', roles=('reader',))
        self.assertEqual(200, resp.status_int, resp.body)

    def test_timeline_query_is_checked_and_passed(self):
        resp = self._request('GET', '/events',
                             query='?marker=12&since=2026-11-23T10:00:00Z'
                                   '&limit=5')
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual({'marker': 12, 'since': '2026-11-23T10:00:00',
                          'limit': 5},
                         self.filter._rpc.health_events.call_args[1])
        for query, words in [('?marker=x', '"marker" must be an integer'),
                             ('?marker=-1', 'from 0 to'),
                             ('?limit=0', 'from 1 to 1000'),
                             ('?since=yesterday', 'ISO 8601')]:
            self.assertIn(words, self._message(
                self._request('GET', '/events', query=query), 400))

    def test_stack_named_alone_is_passed_for_the_engine_to_find(self):
        self.filter._rpc.health_report.return_value = {'policies': []}
        for method, suffix, call in [('GET', '', 'health_report'),
                                     ('GET', '/events', 'health_events'),
                                     ('POST', '/pause', 'set_paused')]:
            req = webob.Request.blank('/v1/p1/stacks/web/health' + suffix,
                                      method=method)
            req.context = context.RequestContext(
                project_id='p1', user_id='u1', roles=['member', 'reader'])
            resp = req.get_response(self.app)
            self.assertEqual(200, resp.status_int, resp.body)
            self.assertEqual('web', getattr(self.filter._rpc, call)
                             .call_args[0][1])
