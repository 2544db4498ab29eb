"""Workflow and webhook rungs: params, signatures, exactly-once, follow."""

import datetime
import http.server
import json
import threading
import types
import unittest
from unittest import mock

from keystoneauth1 import exceptions as ks_exc
from mistralclient.api import base as mistral_base
from oslo_config import cfg

from heat_health.common import config  # noqa: F401
from heat_health.engine.monitor import states
from heat_health.engine.recovery import loop
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import planner
from heat_health.policy import rung_params
from heat_health.policy import spec as policy_spec
from heat_health.policy import webhook_signature
from tests.unit import test_recovery_loop as loop_tests

NOW = datetime.datetime(2026, 11, 29, 12, 0, 0)


class FakeExecutions(object):
    """Mistral's executions as its client shows them."""

    def __init__(self):
        self.created = []
        self.found = {}
        self.cancelled = []
        self.refuse = None
        # (made, error): the start's answer is this error, after the
        # execution was made or not.
        self.lost = None
        self.unlisted = None

    def create(self, workflow, workflow_input=None, description=''):
        if self.refuse:
            raise mistral_base.APIException(404, self.refuse)
        if self.lost and not self.lost[0]:
            raise self.lost[1]
        execution = types.SimpleNamespace(
            id='x-%d' % (len(self.created) + 1), state='RUNNING',
            description=description, input=workflow_input,
            workflow_name=workflow, state_info=None)
        self.created.append(execution)
        self.found[execution.id] = execution
        if self.lost:
            raise self.lost[1]
        return execution

    def get(self, execution_id):
        return self.found[execution_id]

    def list(self, description=None):
        if self.unlisted:
            raise self.unlisted
        return [e for e in self.found.values()
                if e.description == description]

    def update(self, execution_id, state):
        self.cancelled.append(execution_id)
        self.found[execution_id].state = state


class Replacer(loop_tests.FakeReplacer):
    def __init__(self):
        super(Replacer, self).__init__()
        self.mistral = types.SimpleNamespace(executions=FakeExecutions())

    def mistral_client(self, stack_id):
        return self.mistral


def _policy(*actions):
    return types.SimpleNamespace(
        id='policy-1', stack_id='root', generation=1, busy=(),
        frozen=lambda: None, spec=policy_spec.PolicySpec.parse({
            'targets': ['g'], 'recovery': {'actions': list(actions)}}))


WORKFLOW = {'name': 'reattach', 'type': 'MISTRAL_WORKFLOW',
            'params': {'server': '{{ server.id }}', 'ip': '{{ server.ip }}',
                       'note': '{{ resource.path }} failed: {{ reason }}',
                       'all': '{{ server.addresses }}'}}


def _target(state=states.UNHEALTHY, reason='Nova: SHUTOFF', recovery=None,
            **fields):
    return types.SimpleNamespace(
        id=7, server_id='srv-1', stack_id='nested', resource_name='0',
        path='g/0', state=state, reason=reason,
        recovery=recovery or fields or None, attempts=0,
        first_attempt_at=None, next_attempt_at=None,
        since=NOW, grace_until=None, verdicts={}, place=('nested', '0'))


class ParamsTest(unittest.TestCase):

    def test_expansion_keeps_a_whole_value_and_fills_text(self):
        known = rung_params.values('srv-1', 'web-0', ['fd00::5', '10.0.0.5'],
                                   'st', 'g/0', '0', 'down')
        self.assertEqual({
            'server': 'srv-1', 'ip': '10.0.0.5', 'note': 'g/0 failed: down',
            'all': ['fd00::5', '10.0.0.5'], 'n': 3,
            'nested': [{'id': 'srv-1'}], 'senlin': 'srv-1',
            'joined': 'at fd00::5,10.0.0.5'},
            rung_params.expand(dict(WORKFLOW['params'], n=3,
                                    nested=[{'id': '{{server.id}}'}],
                                    senlin='{{ node.physicalid }}',
                                    joined='at {{ server.addresses }}'),
                               known))

    def test_unknown_variables_are_named(self):
        self.assertEqual(['server.uuid', 'x'], rung_params.unknown(
            {'a': '{{ server.uuid }}', '{{ x }}': ['{{ server.id }}']}))


class SignatureTest(unittest.TestCase):

    def test_each_policy_has_its_own_key_and_bodies_verify(self):
        one = webhook_signature.policy_secret('policy-1')
        self.assertNotEqual(one, webhook_signature.policy_secret('policy-2'))
        self.assertEqual(one, webhook_signature.policy_secret('policy-1'))
        body = b'{"a": 1}'
        header = webhook_signature.signature(one, body)
        self.assertTrue(header.startswith('sha256='))
        self.assertTrue(webhook_signature.verify(one, body, header))
        self.assertFalse(webhook_signature.verify(one, body + b' ', header))
        self.assertFalse(webhook_signature.verify(
            webhook_signature.policy_secret('policy-2'), body, header))


class PlannerTest(unittest.TestCase):

    def _plan(self, target):
        policy = _policy(WORKFLOW)
        return planner.plan(policy, [target], NOW).steps

    def test_a_running_execution_is_followed_until_it_ends(self):
        deadline = (NOW + datetime.timedelta(seconds=60)).isoformat()
        running = _target(states.VERIFYING, action='MISTRAL_WORKFLOW',
                          stage='issued', execution='x-1',
                          execution_state='RUNNING', deadline=deadline)
        self.assertEqual([planner.Follow(running)], self._plan(running))
        ended = _target(states.VERIFYING, action='MISTRAL_WORKFLOW',
                        stage='issued', execution='x-1',
                        execution_state='SUCCESS', deadline=deadline)
        self.assertEqual([], self._plan(ended))
        nova = _target(states.VERIFYING, action='REBOOT', stage='issued',
                       deadline=deadline)
        self.assertEqual([], self._plan(nova))

    def test_escalation_names_a_workflow_rung(self):
        passed = (NOW - datetime.timedelta(seconds=1)).isoformat()
        target = _target(states.VERIFYING, action='MISTRAL_WORKFLOW',
                         params={'workflow': 'reattach', 'input': {}},
                         stage='issued', execution='x-1', step=1,
                         execution_state='RUNNING', deadline=passed,
                         verify_seconds=60)
        [step] = self._plan(target)
        self.assertIsInstance(step, planner.Escalate)
        self.assertEqual('not healthy 60s after workflow reattach',
                         step.reason)


class Receiver(http.server.BaseHTTPRequestHandler):
    status = 204
    got = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        Receiver.got.append((self.path, dict(self.headers), body))
        self.send_response(Receiver.status)
        self.send_header('Content-Length', '0')
        self.end_headers()

    def log_message(self, *args):
        pass


class RungsTest(unittest.TestCase):

    def setUp(self):
        loop_tests._store_enabled(self)
        self.replacer = Replacer()
        self.tracker = loop_tests.FakeTracker()
        self.server = nova_actions.ServerStatus(
            'srv-1', 'SHUTOFF', 'stopped', None, 4, 'img', 'now', 'web-0',
            ('10.0.0.5',))
        nova = mock.Mock()
        nova.status.return_value = self.server
        # Stopped by nobody: Nova's own power sync.
        nova.instance_actions.return_value = []
        self.recovery = loop.RecoveryLoop(
            'engine', self.tracker, self.replacer,
            actions=lambda stack_id: nova, conf=cfg.CONF,
            clock=lambda: NOW)
        self.recovery._not_now = lambda policy, before_mark=False: None
        self.addCleanup(self.recovery.stop)

    def _start(self, policy, target, step=0):
        self.recovery._start(policy, target, planner.Start(
            target, step, 1, target.reason))

    def test_a_workflow_starts_once_with_expanded_params(self):
        policy = _policy({'name': 'REBOOT'}, WORKFLOW)
        target = _target()
        self._start(policy, target, step=1)
        [execution] = self.replacer.mistral.executions.created
        self.assertEqual('reattach', execution.workflow_name)
        self.assertEqual({'server': 'srv-1', 'ip': '10.0.0.5',
                          'note': 'g/0 failed: Nova: SHUTOFF',
                          'all': ['10.0.0.5']}, execution.input)
        self.assertEqual(states.VERIFYING, target.state)
        self.assertEqual('x-1', target.recovery['execution'])
        self.assertEqual('RUNNING', target.recovery['execution_state'])
        self.assertIn('workflow reattach started: execution x-1 RUNNING',
                      self.tracker.steps[-1][2])
        # The stored stage says it was sent: a takeover follows the same
        # execution, found by its description, and starts none.
        target.state = states.RECOVERING
        target.recovery = dict(target.recovery, stage='issuing')
        del target.recovery['execution']
        self.recovery._advance(policy, target, None)
        self.assertEqual(1, len(self.replacer.mistral.executions.created))
        self.assertEqual('x-1', target.recovery['execution'])
        self.assertIn('not sent again: execution x-1',
                      self.tracker.steps[-1][2])

    def test_the_reason_sent_is_what_was_detected(self):
        policy = _policy({'name': 'REBOOT'}, WORKFLOW)
        target = _target(reason='escalated: not healthy 15s after REBOOT',
                         recovery={'stage': 'escalate', 'next_step': 1,
                                   'detected': 'Nova: SHUTOFF'})
        self._start(policy, target, step=1)
        [execution] = self.replacer.mistral.executions.created
        self.assertEqual('g/0 failed: Nova: SHUTOFF',
                         execution.input['note'])
        self.assertEqual('Nova: SHUTOFF', target.recovery['detected'])

    def test_an_execution_in_error_escalates_at_once(self):
        policy = _policy({'name': 'REBOOT'}, WORKFLOW, {'name': 'RECREATE'})
        target = _target()
        self._start(policy, target, step=1)
        self.replacer.mistral.executions.found['x-1'].state = 'ERROR'
        self.replacer.mistral.executions.found['x-1'].state_info = 'boom'
        self.recovery._follow(policy, target, planner.Follow(target))
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertEqual(2, target.recovery['next_step'])
        self.assertEqual('escalate', target.recovery['stage'])
        self.assertIn('execution x-1 ended in ERROR: boom',
                      self.tracker.steps[-1][2])

    def test_success_is_stored_and_the_detectors_decide(self):
        policy = _policy(WORKFLOW)
        target = _target()
        self._start(policy, target)
        self.replacer.mistral.executions.found['x-1'].state = 'SUCCESS'
        self.recovery._follow(policy, target, planner.Follow(target))
        self.assertEqual(states.VERIFYING, target.state)
        self.assertEqual('SUCCESS', target.recovery['execution_state'])
        # Not read again before FOLLOW_SECONDS.
        steps = len(self.tracker.steps)
        self.recovery._follow(policy, target, planner.Follow(target))
        self.assertEqual(steps, len(self.tracker.steps))

    def test_a_running_execution_is_cancelled_at_the_deadline(self):
        policy = _policy(WORKFLOW, {'name': 'RECREATE'})
        target = _target()
        self._start(policy, target)
        self.recovery._still_acting = lambda *args: None
        self.recovery._escalate(policy, target, planner.Escalate(
            target, 1, 'not healthy 300s after workflow reattach'))
        self.assertEqual(['x-1'], self.replacer.mistral.executions.cancelled)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertIn('(execution x-1 cancelled), next RECREATE',
                      self.tracker.steps[-1][2])

    def test_a_workflow_mistral_refuses_escalates(self):
        policy = _policy(WORKFLOW, {'name': 'RECREATE'})
        self.replacer.mistral.executions.refuse = 'Workflow not found'
        target = _target()
        self._start(policy, target)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertEqual(1, target.recovery['next_step'])
        self.assertIn('Mistral did not start workflow reattach: Workflow '
                      'not found (HTTP 404)', self.tracker.steps[-1][2])

    def test_a_start_without_an_answer_follows_what_mistral_made(self):
        for error in (ks_exc.ConnectTimeout('Request to mistral timed out'),
                      ks_exc.ConnectFailure('Connection reset by peer'),
                      mistral_base.APIException(502, 'Bad Gateway')):
            self.replacer.mistral.executions = FakeExecutions()
            self.replacer.mistral.executions.lost = (True, error)
            target = _target()
            self._start(_policy(WORKFLOW, {'name': 'RECREATE'}), target)
            self.assertEqual(states.VERIFYING, target.state)
            self.assertEqual('x-1', target.recovery['execution'])
            self.assertIn('started, its answer lost',
                          self.tracker.steps[-1][2])

    def test_a_start_without_an_answer_and_no_execution_fails(self):
        self.replacer.mistral.executions.lost = (
            False, ks_exc.ConnectTimeout('Request to mistral timed out'))
        target = _target()
        self._start(_policy(WORKFLOW, {'name': 'RECREATE'}), target)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertEqual(1, target.recovery['next_step'])
        self.assertIn('timed out; Mistral has no execution of it',
                      self.tracker.steps[-1][2])

    def test_an_unanswered_start_not_looked_up_is_cancelled_at_the_end(self):
        """Mistral cannot be asked: the detectors verify.

        Before the next rung the execution is looked up again, cancelled.
        """
        executions = self.replacer.mistral.executions
        executions.lost = (True, mistral_base.APIException(503, 'down'))
        executions.unlisted = mistral_base.APIException(503, 'down')
        policy = _policy(WORKFLOW, {'name': 'RECREATE'})
        target = _target()
        self._start(policy, target)
        self.assertEqual(states.VERIFYING, target.state)
        self.assertNotIn('execution', target.recovery)
        self.assertIn('may have started', self.tracker.steps[-1][2])
        executions.unlisted = None
        self.recovery._still_acting = lambda *args: None
        self.recovery._escalate(policy, target, planner.Escalate(
            target, 1, 'not healthy 300s after workflow reattach'))
        self.assertEqual(['x-1'], executions.cancelled)
        self.assertIn('(execution x-1 cancelled), next RECREATE',
                      self.tracker.steps[-1][2])

    def _receiver(self, status):
        Receiver.status = status
        Receiver.got = []
        server = http.server.HTTPServer(('127.0.0.1', 0), Receiver)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        cfg.CONF.set_override('poll_url_allowed_hosts', ['127.0.0.1'],
                              group='heat_health')
        cfg.CONF.set_override('poll_url_allowed_networks',
                              ['127.0.0.1:%d' % server.server_port],
                              group='heat_health')
        self.addCleanup(cfg.CONF.clear_override, 'poll_url_allowed_hosts',
                        group='heat_health')
        self.addCleanup(cfg.CONF.clear_override, 'poll_url_allowed_networks',
                        group='heat_health')
        return 'http://127.0.0.1:%d/heal' % server.server_port

    def test_a_webhook_posts_a_signed_body_once(self):
        url = self._receiver(202)
        policy = _policy({'type': 'WEBHOOK', 'url': url,
                          'params': {'who': '{{ server.name }}'}})
        target = _target()
        self._start(policy, target)
        [(path, headers, body)] = Receiver.got
        self.assertEqual('/heal', path)
        self.assertTrue(webhook_signature.verify(
            webhook_signature.policy_secret('policy-1'), body,
            headers[webhook_signature.HEADER]))
        sent = json.loads(body)
        self.assertEqual({'who': 'web-0'}, sent['params'])
        self.assertEqual('srv-1', sent['server']['id'])
        self.assertEqual('7-1-%s' % NOW.isoformat(), sent['delivery'])
        self.assertEqual(states.VERIFYING, target.state)
        self.assertIn('answered HTTP 202: verifying',
                      self.tracker.steps[-1][2])

    def test_a_webhook_that_does_not_answer_2xx_escalates(self):
        url = self._receiver(500)
        policy = _policy({'type': 'WEBHOOK', 'url': url},
                         {'name': 'RECREATE'})
        target = _target()
        self._start(policy, target)
        self.assertEqual(1, len(Receiver.got))
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertIn('answered HTTP 500', self.tracker.steps[-1][2])

    def test_a_webhook_outside_the_network_rules_is_not_posted(self):
        self._receiver(204)
        policy = _policy({'type': 'WEBHOOK',
                          'url': 'http://169.254.169.254/latest'},
                         {'name': 'RECREATE'})
        target = _target()
        self._start(policy, target)
        self.assertEqual([], Receiver.got)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertIn('refused by the network rules of poll URLs',
                      self.tracker.steps[-1][2])


class StoredPolicyTest(unittest.TestCase):

    def test_a_stored_policy_parses_its_outside_rungs(self):
        spec = policy_spec.PolicySpec.parse({'recovery': {'actions': [
            {'name': 'REBOOT', 'params': {'type': 'HARD'}}, WORKFLOW,
            {'type': 'WEBHOOK', 'url': 'http://h/x', 'params': {'a': 1}}]}})
        self.assertEqual((
            ('REBOOT', {'type': 'HARD'}),
            ('MISTRAL_WORKFLOW', {'workflow': 'reattach',
                                  'input': WORKFLOW['params']}),
            ('WEBHOOK', {'url': 'http://h/x', 'input': {'a': 1}})),
            spec.recovery.actions)
        self.assertEqual('SERVER', spec.recovery.replace)
