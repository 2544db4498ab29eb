"""The ``openstack stack health`` commands, on a fake health client."""

import argparse
import datetime
import io
import json
import os
import signal
from unittest import mock

import fixtures
from heatclient import exc as heat_exc
from osc_lib import exceptions
from osc_lib.test import base
import testtools

from heat_health.osc import plugin
from heat_health.osc.v1 import health

STACK = 'web'

SERVER_0 = {
    'server_id': 's-0', 'server_name': 'web-0', 'resource_name': '0',
    'path': 'workers/0', 'state': 'HEALTHY', 'reason': 'Nova status ACTIVE',
    'since': '2026-11-23T21:00:00', 'grace_until': None, 'recovery': None,
    'attempts': 0, 'next_attempt_at': None,
    'last_observation': {'verdict': 'HEALTHY', 'reason': 'Nova status ACTIVE',
                         'source': 'NODE_STATUS_POLLING',
                         'time': '2026-11-23T22:00:05'}}
SERVER_1 = {
    'server_id': 's-1', 'server_name': 'web-1', 'resource_name': '1',
    'path': 'workers/1', 'state': 'UNHEALTHY', 'reason': 'Server stopped',
    'since': '2026-11-23T22:00:01', 'grace_until': None, 'recovery': None,
    'attempts': 0, 'next_attempt_at': None, 'last_observation': None}


def _policy(name='health', targets=(SERVER_0, SERVER_1), **changes):
    policy = {
        'id': 'p-' + name, 'resource_name': name, 'enabled': True,
        'suspended': False, 'engine_id': 'engine-a', 'generation': 3,
        'handoff_to': None, 'lease_expires_at': '2026-11-23T22:01:00',
        'detection_modes': ['LIFECYCLE_EVENTS', 'NODE_STATUS_POLLING'],
        'recovery_conditional': 'ANY_FAILED', 'interval': 5,
        'node_update_timeout': 30, 'recovery_mode': 'AUTO', 'braked': None,
        'braked_since': None,
        'paused': {'by': 'demo', 'at': '2026-11-23T22:00:00',
                   'reason': 'maintenance'},
        'counts': {'HEALTHY': 1, 'UNHEALTHY': 1}, 'targets': list(targets)}
    policy.update(changes)
    return policy


def _event(event_id, new_state, path='workers/1', server_id='s-1',
           old_state='HEALTHY'):
    return {'id': event_id, 'time': '2026-11-23T22:00:%02d' % event_id,
            'policy_id': 'p-health', 'policy': 'health',
            'server_id': server_id, 'path': path, 'old_state': old_state,
            'new_state': new_state, 'reason': 'reason %d' % event_id,
            'source': 'LIFECYCLE_EVENTS'}


class CommandTestCase(base.TestCommand):

    def setUp(self):
        super(CommandTestCase, self).setUp()
        self.app.stdout = io.StringIO()
        self.client = mock.Mock(spec=plugin.HealthClient)
        self.app.client_manager.health = self.client

    def run_command(self, command_class, args):
        cmd = command_class(self.app, None)
        parsed_args = cmd.get_parser('openstack').parse_args(args)
        return cmd.run(parsed_args), self.app.stdout.getvalue()


class TestShowHealth(CommandTestCase):

    def test_table_has_a_line_per_policy_and_per_server(self):
        self.client.report.return_value = {
            'stack_id': '5d6f', 'stack_name': 'web', 'policies': [_policy()]}
        _, out = self.run_command(health.ShowHealth, ['web', '-f', 'table'])

        self.client.report.assert_called_once_with(STACK)
        self.assertIn(
            'health: paused by demo at 2026-11-23T22:00:00: maintenance; '
            'detection LIFECYCLE_EVENTS, NODE_STATUS_POLLING; recovery AUTO; '
            'engine engine-a; HEALTHY 1, UNHEALTHY 1', out)
        self.assertIn(
            'workers/0 web-0 (s-0): HEALTHY since 2026-11-23T21:00:00 '
            '(Nova status ACTIVE); last seen HEALTHY by NODE_STATUS_POLLING '
            'at 2026-11-23T22:00:05', out)
        self.assertIn('workers/1 web-1 (s-1): UNHEALTHY since '
                      '2026-11-23T22:00:01 (Server stopped) ', out)

    def test_json_gives_the_structured_report(self):
        self.client.report.return_value = {
            'stack_id': '5d6f', 'stack_name': 'web', 'policies': [_policy()]}
        _, out = self.run_command(health.ShowHealth, ['web', '-f', 'json'])

        shown = json.loads(out)
        self.assertEqual('web', shown['stack'])
        self.assertEqual('5d6f', shown['stack_id'])
        expected_policy = _policy()
        del expected_policy['targets']
        self.assertEqual([expected_policy], shown['policies'])
        self.assertEqual([dict(SERVER_0, policy='health'),
                          dict(SERVER_1, policy='health')], shown['servers'])

    def test_braked_policy_and_servers_of_several_policies(self):
        braked = _policy(paused=None, braked='3 recoveries in 10 minutes',
                         braked_since='2026-11-23T22:10:00')
        other = _policy(name='db', targets=[SERVER_0], paused=None,
                        counts={'HEALTHY': 1})
        policies = health.PoliciesColumn([braked, other]).human_readable()
        servers = health.ServersColumn([braked, other]).human_readable()

        self.assertEqual(
            ['health: braked since 2026-11-23T22:10:00: 3 recoveries in 10 '
             'minutes; detection LIFECYCLE_EVENTS, NODE_STATUS_POLLING; '
             'recovery AUTO; engine engine-a; HEALTHY 1, UNHEALTHY 1',
             'db: active; detection LIFECYCLE_EVENTS, NODE_STATUS_POLLING; '
             'recovery AUTO; engine engine-a; HEALTHY 1'],
            policies.splitlines())
        self.assertEqual(['health: workers/0', 'health: workers/1',
                          'db: workers/0'],
                         [' '.join(line.split()[:2])
                          for line in servers.splitlines()])

    def test_a_policy_not_watched_fully_says_why_and_since_when(self):
        failing = _policy(paused=None, error=(
            'resource group/0 is not watched: its physical id x (37 '
            'characters) is not a Nova server id'),
            error_since='2026-11-23T22:10:00')
        line = health.PoliciesColumn([failing]).human_readable()
        self.assertTrue(line.startswith(
            'health: not watched fully since 2026-11-23T22:10:00: resource '
            'group/0 is not watched: its physical id x (37 characters) is '
            'not a Nova server id; detection '), line)

    def test_a_server_line_leaves_out_what_no_longer_applies(self):
        now = datetime.datetime(2026, 11, 23, 22, 0, 10,
                                tzinfo=datetime.timezone.utc)
        server = dict(SERVER_1, server_name=None, attempts=2,
                      grace_until='2026-11-23T22:00:05+00:00',
                      next_attempt_at='2026-11-23T22:00:40+00:00')
        line = health._server_line(server, now)
        self.assertTrue(line.startswith('workers/1 (s-1): UNHEALTHY'), line)
        self.assertNotIn('grace', line)
        self.assertIn('recovery attempt 2, next not before '
                      '2026-11-23T22:00:40+00:00', line)
        later = health._server_line(
            dict(server, state='HEALTHY', grace_until='2026-11-23T22:00:30'),
            now)
        self.assertIn('grace until 2026-11-23T22:00:30', later)
        self.assertNotIn('attempt', later)

    def test_a_server_line_names_its_workflow_execution(self):
        server = dict(SERVER_1, state='VERIFYING', attempts=1, recovery={
            'action': 'MISTRAL_WORKFLOW', 'execution': 'x-1',
            'execution_state': 'RUNNING',
            'params': {'workflow': 'reattach', 'input': {}}})
        self.assertIn('; workflow reattach execution x-1 RUNNING',
                      health._server_line(server))

    def test_no_policy(self):
        self.client.report.return_value = {'stack_id': '5d6f',
                                           'policies': []}
        _, out = self.run_command(health.ShowHealth, ['web', '-f', 'yaml'])
        self.assertIn('policies: []', out)


class TestShowHealthEvent(CommandTestCase):

    EVIDENCE = {'server_id': 's-1', 'console': 'boot\nkernel panic',
                'fault': {'message': 'disk full', 'code': 500,
                          'created': '2026-11-23T22:00:00Z'},
                'instance_actions': [{'action': 'stop', 'user_id': None}],
                'poll_url': None}

    def test_shows_the_crash_evidence(self):
        self.client.events.return_value = [
            dict(_event(7, 'EVIDENCE'), detail=self.EVIDENCE),
            _event(8, 'RECOVERING')]
        _, out = self.run_command(health.ShowHealthEvent, ['web', '7'])
        self.client.events.assert_called_once_with(STACK, marker=6)
        self.assertIn('kernel panic', out)
        self.assertIn('"disk full"', out)
        self.assertIn('{"action": "stop", "user_id": null}', out)
        self.app.stdout = io.StringIO()
        _, out = self.run_command(health.ShowHealthEvent,
                                  ['web', '7', '-f', 'json'])
        shown = json.loads(out)
        self.assertEqual(self.EVIDENCE, shown['detail'])
        self.assertEqual('EVIDENCE', shown['new_state'])

    def test_an_event_not_found(self):
        self.client.events.return_value = [_event(8, 'RECOVERING')]
        self.assertRaises(exceptions.CommandError, self.run_command,
                          health.ShowHealthEvent, ['web', '7'])


class TestListHealthEvents(CommandTestCase):

    def test_columns_and_rows_oldest_first(self):
        self.client.events.return_value = [
            _event(1, 'UNHEALTHY'),
            _event(2, 'PAUSED', path=None, server_id=None, old_state=None),
            _event(3, 'GAVE_UP', path=None, server_id='s-9')]
        cmd = health.ListHealthEvents(self.app, None)
        parsed_args = cmd.get_parser('openstack').parse_args(
            ['web', '--since', '2026-11-23T00:00:00', '--limit', '3'])
        columns, rows = cmd.take_action(parsed_args)

        self.client.events.assert_called_once_with(
            STACK, since='2026-11-23T00:00:00', limit=3)
        self.assertEqual(('Time', 'Policy', 'Server', 'Event', 'From',
                          'Reason', 'Source'), columns)
        self.assertEqual(
            [('2026-11-23T22:00:01', 'health', 'workers/1', 'UNHEALTHY',
              'HEALTHY', 'reason 1', 'LIFECYCLE_EVENTS'),
             ('2026-11-23T22:00:02', 'health', '-', 'PAUSED', '-',
              'reason 2', 'LIFECYCLE_EVENTS'),
             ('2026-11-23T22:00:03', 'health', 's-9', 'GAVE_UP', 'HEALTHY',
              'reason 3', 'LIFECYCLE_EVENTS')],
            list(rows))

    def test_json_without_follow_is_one_list(self):
        self.client.events.return_value = [_event(1, 'UNHEALTHY')]
        _, out = self.run_command(health.ListHealthEvents,
                                  ['web', '-f', 'json'])
        self.assertEqual('UNHEALTHY', json.loads(out)[0]['Event'])


class TestFollowHealthEvents(CommandTestCase):

    def setUp(self):
        super(TestFollowHealthEvents, self).setUp()
        self.sleep = self.useFixture(
            fixtures.MockPatchObject(health.time, 'sleep')).mock

    def test_prints_rows_of_later_polls_until_interrupted(self):
        self.client.events.side_effect = [[_event(1, 'UNHEALTHY')], [],
                                          [_event(2, 'RECOVERING')]]
        written_before_sleep = []

        def sleep(seconds):
            written_before_sleep.append(self.app.stdout.getvalue())
            if len(written_before_sleep) == 3:
                raise KeyboardInterrupt()
        self.sleep.side_effect = sleep

        rc, out = self.run_command(health.ListHealthEvents,
                                   ['web', '--follow', '--interval', '0.5'])

        self.assertEqual(0, rc)
        self.assertEqual(
            ['2026-11-23T22:00:01\thealth\tworkers/1\tUNHEALTHY\treason 1',
             '2026-11-23T22:00:02\thealth\tworkers/1\tRECOVERING\treason 2'],
            out.splitlines())
        # The later row was out before the next poll, not at the end.
        self.assertIn('RECOVERING', written_before_sleep[2])
        self.assertNotIn('RECOVERING', written_before_sleep[1])
        self.sleep.assert_called_with(0.5)
        self.assertEqual(
            [mock.call(STACK, since=None, limit=None),
             mock.call(STACK, marker=1), mock.call(STACK, marker=1)],
            self.client.events.call_args_list)

    def test_json_is_an_object_per_line(self):
        self.client.events.side_effect = [[], [_event(4, 'UNHEALTHY')]]
        self.sleep.side_effect = [None, KeyboardInterrupt()]

        _, out = self.run_command(health.ListHealthEvents,
                                  ['web', '--follow', '-f', 'json',
                                   '--since', '2026-11-23T00:00:00'])

        lines = out.splitlines()
        self.assertEqual(1, len(lines))
        self.assertEqual(
            {'Time': '2026-11-23T22:00:04', 'Policy': 'health',
             'Server': 'workers/1', 'Event': 'UNHEALTHY', 'From': 'HEALTHY',
             'Reason': 'reason 4', 'Source': 'LIFECYCLE_EVENTS'},
            json.loads(lines[0]))
        # Nothing seen yet: the poll still asks from --since.
        self.assertEqual(mock.call(STACK, since='2026-11-23T00:00:00'),
                         self.client.events.call_args_list[1])

    def test_sigterm_stops_quietly(self):
        outside = mock.Mock()
        original = signal.signal(signal.SIGTERM, outside)
        self.addCleanup(signal.signal, signal.SIGTERM, original)
        self.client.events.return_value = []
        self.sleep.side_effect = lambda seconds: os.kill(os.getpid(),
                                                         signal.SIGTERM)

        rc, _ = self.run_command(health.ListHealthEvents, ['web', '--follow'])

        self.assertEqual(0, rc)
        outside.assert_not_called()
        self.assertIs(outside, signal.getsignal(signal.SIGTERM))

    def test_sigint_stops_it_where_the_shell_ignored_sigint(self):
        """Started in the background by a shell: Ctrl-C still ends it."""
        original = signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.addCleanup(signal.signal, signal.SIGINT, original)
        self.client.events.return_value = []
        interrupts = []

        def ctrl_c(seconds):
            assert not interrupts, 'the follow went on after Ctrl-C'
            interrupts.append(seconds)
            os.kill(os.getpid(), signal.SIGINT)
        self.sleep.side_effect = ctrl_c

        rc, _ = self.run_command(health.ListHealthEvents, ['web', '--follow'])

        self.assertEqual(0, rc)
        self.assertIs(signal.SIG_IGN, signal.getsignal(signal.SIGINT))


class TestPauseResume(CommandTestCase):

    def test_pause_passes_policy_and_reason(self):
        self.client.pause.return_value = [_policy()]
        _, out = self.run_command(
            health.PauseHealth, ['web', '--policy', 'health', '--reason',
                                 'maintenance', '-f', 'json'])

        self.client.pause.assert_called_once_with(STACK, policy='health',
                                                  reason='maintenance')
        self.assertEqual([{'Policy': 'health', 'Paused': True, 'By': 'demo',
                           'At': '2026-11-23T22:00:00',
                           'Reason': 'maintenance'}], json.loads(out))

    def test_resume_every_policy(self):
        self.client.resume.return_value = [_policy(paused=None),
                                           _policy(name='db', paused=None)]
        cmd = health.ResumeHealth(self.app, None)
        columns, rows = cmd.take_action(
            cmd.get_parser('openstack').parse_args(['web']))

        self.client.resume.assert_called_once_with(STACK, policy=None)
        self.assertEqual(('Policy', 'Paused', 'By', 'At', 'Reason'), columns)
        self.assertEqual([('health', False, '', '', ''),
                          ('db', False, '', '', '')], list(rows))

    def test_resume_has_no_reason_option(self):
        cmd = health.ResumeHealth(self.app, None)
        self.assertRaises(base.ParserException, self.check_parser, cmd,
                          ['web', '--reason', 'x'], [])


def _heat_error(error_class, message):
    return error_class(json.dumps({'error': {'message': message}}))


def _response(body):
    response = mock.Mock()
    response.json.return_value = body
    return response


class TestHealthClient(testtools.TestCase):

    def setUp(self):
        super(TestHealthClient, self).setUp()
        self.heat = mock.Mock()
        self.client = plugin.HealthClient(self.heat)

    def test_unknown_or_foreign_stack_is_the_servers_answer(self):
        self.heat.http_client.get.side_effect = _heat_error(
            heat_exc.HTTPNotFound, 'The Stack (nope) could not be found.')
        error = self.assertRaises(exceptions.CommandError,
                                  self.client.report, 'nope')
        self.assertEqual('The Stack (nope) could not be found. (HTTP 404)',
                         str(error))
        self.heat.http_client.get.assert_called_once_with(
            '/stacks/nope/health')

    def test_a_name_is_quoted_into_one_path_segment(self):
        self.heat.http_client.get.return_value = _response(
            {'health': {'policies': []}})
        self.client.report('a b/c')
        self.heat.http_client.get.assert_called_once_with(
            '/stacks/a%20b%2Fc/health')

    def test_events_sends_only_the_given_query(self):
        self.heat.http_client.get.return_value = _response(
            {'events': [_event(8, 'HEALTHY')]})
        events = self.client.events(STACK, marker=7)

        self.assertEqual([_event(8, 'HEALTHY')], events)
        self.heat.http_client.get.assert_called_once_with(
            '/stacks/web/health/events', params={'marker': 7})

    def test_pause_and_resume_bodies(self):
        self.heat.http_client.post.return_value = _response(
            {'policies': [_policy()]})
        self.assertEqual([_policy()],
                         self.client.pause(STACK, reason='maintenance'))
        self.client.resume(STACK, policy='health')
        self.client.resume(STACK)

        self.assertEqual(
            [mock.call('/stacks/web/health/pause',
                       data={'reason': 'maintenance'}),
             mock.call('/stacks/web/health/resume',
                       data={'policy': 'health'}),
             mock.call('/stacks/web/health/resume', data={})],
            self.heat.http_client.post.call_args_list)

    def test_report_unwraps_health(self):
        self.heat.http_client.get.return_value = _response(
            {'health': {'stack_id': '5d6f', 'policies': []}})
        self.assertEqual({'stack_id': '5d6f', 'policies': []},
                         self.client.report(STACK))
        self.heat.http_client.get.assert_called_once_with(
            '/stacks/web/health')

    def test_http_errors_carry_the_servers_message(self):
        self.heat.http_client.post.side_effect = _heat_error(
            heat_exc.HTTPForbidden, 'health:pause is disallowed by policy')
        error = self.assertRaises(exceptions.CommandError,
                                  self.client.pause, STACK)
        self.assertEqual('health:pause is disallowed by policy (HTTP 403)',
                         str(error))

        self.heat.http_client.post.side_effect = _heat_error(
            heat_exc.HTTPNotFound, 'The Health policy (x) could not be found.')
        error = self.assertRaises(exceptions.CommandError,
                                  self.client.resume, STACK, policy='x')
        self.assertEqual('The Health policy (x) could not be found. '
                         '(HTTP 404)', str(error))


class TestPlugin(testtools.TestCase):

    def test_client_rides_on_the_orchestration_client(self):
        instance = mock.Mock(_api_version={'health': '1'})
        client = plugin.make_client(instance)

        self.assertIsInstance(client, plugin.HealthClient)
        instance.orchestration.http_client.get.return_value = _response(
            {'health': {'policies': []}})
        client.report('web')
        instance.orchestration.http_client.get.assert_called_once_with(
            '/stacks/web/health')

    def test_api_version_option(self):
        self.useFixture(fixtures.EnvironmentVariable('OS_HEALTH_API_VERSION'))
        parser = plugin.build_option_parser(argparse.ArgumentParser())
        # OSC reads the version back by API_VERSION_OPTION.
        self.assertEqual('1', getattr(parser.parse_args([]),
                                      plugin.API_VERSION_OPTION))
        self.assertEqual('1', getattr(
            parser.parse_args(['--os-health-api-version', '1']),
            plugin.API_VERSION_OPTION))

    def test_unknown_api_version(self):
        instance = mock.Mock(_api_version={'health': '2'})
        self.assertRaises(exceptions.UnsupportedVersion,
                          plugin.make_client, instance)
