"""fakecloud's os-instance-actions, as python-novaclient and heat-health's
Nova adapter read them: who asked Nova for what, and nothing for what
happened behind Nova's back except the stop its power sync makes. Also
the console log and Nova's fault that recovery keeps as evidence."""

import datetime
import socket
import threading
import time

import fixtures
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
import requests
import testtools

from heat_health.engine.recovery import nova_actions
from tests.fakecloud import __main__ as fakecloud_main
from tests.fakecloud import config
from tests.fakecloud import state

DELAY = 0.05


def _free_port():
    with socket.socket() as sock:
        sock.bind((config.BIND_HOST, 0))
        return sock.getsockname()[1]


class FakecloudInstanceActionsTest(testtools.TestCase):

    def setUp(self):
        super(FakecloudInstanceActionsTest, self).setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        conf_file = '%s/fakecloud.conf' % tmp
        with open(conf_file, 'w') as conf:
            conf.write('[DEFAULT]\nauth_strategy = noauth\n'
                       'api_port = %d\nhealth_port = %d\ntask_delay = %s\n'
                       '[oslo_messaging_notifications]\ndriver = noop\n' % (
                           _free_port(), _free_port(), DELAY))
        conf = config.load(['--config-file', conf_file])
        api, health = fakecloud_main.build(conf)
        for server in (api, health):
            thread = threading.Thread(target=server.serve_forever,
                                      daemon=True)
            thread.start()
            self.addCleanup(server.server_close)
            self.addCleanup(server.shutdown)
        self.url = conf.public_url
        # fakecloud's noauth acts for user demo of project demo.
        self.nova = nova_client.Client(
            '2.96', session=ks_session.Session(auth=noauth.NoAuth()),
            endpoint_override='%s/compute/v2.1' % conf.public_url)
        self.actions = nova_actions.NovaActions(self.nova)

    def _wait_status(self, server_id, status, timeout=5):
        deadline = time.time() + timeout
        while self.nova.servers.get(server_id).status != status:
            if time.time() > deadline:
                self.fail('server %s never %s' % (server_id, status))
            time.sleep(DELAY / 2)

    def _server(self):
        server = self.nova.servers.create(
            'vm', state.fixed_id('image', 'cirros'), '1',
            nics=[{'net-id': state.fixed_id('network', 'private')}])
        self._wait_status(server.id, 'ACTIVE')
        return server.id

    def _fault(self, server_id, name):
        answer = requests.post(
            '%s/fakecloud/servers/%s/fault' % (self.url, server_id),
            json={'fault': name}, headers={'X-Roles': 'admin'}, timeout=5)
        self.assertEqual(200, answer.status_code, answer.text)

    def test_each_request_of_the_user_is_an_action(self):
        server_id = self._server()
        stopped = self.nova.servers.stop(server_id)
        self._wait_status(server_id, 'SHUTOFF')
        self.nova.servers.start(server_id)
        self._wait_status(server_id, 'ACTIVE')
        self.nova.servers.pause(server_id)
        self._wait_status(server_id, 'PAUSED')
        self.nova.servers.unpause(server_id)
        self._wait_status(server_id, 'ACTIVE')
        self.nova.servers.reboot(server_id, 'HARD')
        found = self.actions.instance_actions(server_id)
        self.assertEqual(['reboot', 'unpause', 'pause', 'start', 'stop',
                          'create'], [a.action for a in found])
        self.assertEqual({('demo', 'demo', None)},
                         {(a.user_id, a.project_id, a.message)
                          for a in found})
        stop = found[4]
        self.assertEqual(stopped.request_ids, [stop.request_id])
        self.assertIsNone(stop.start_time.tzinfo)
        self.assertLess(abs((datetime.datetime.utcnow() -
                             stop.start_time).total_seconds()), 60)
        shown = self.nova.instance_action.get(server_id, stop.request_id)
        self.assertEqual(('stop', 'demo', server_id),
                         (shown.action, shown.user_id, shown.instance_uuid))

    def test_faults_behind_nova_s_back_are_no_one_s_action(self):
        server_id = self._server()
        self._fault(server_id, 'pause')
        self._fault(server_id, 'reset')
        self._fault(server_id, 'hang')
        self.assertEqual(['create'], [
            a.action for a in self.actions.instance_actions(server_id)])

    def test_the_power_sync_stop_has_no_user(self):
        server_id = self._server()
        self._fault(server_id, 'power_off')
        newest = self.actions.instance_actions(server_id)[0]
        self.assertEqual(('stop', None, None), (
            newest.action, newest.user_id, newest.project_id))
        self.assertTrue(newest.request_id.startswith('req-'))

    def test_a_failed_action_says_error(self):
        server_id = self._server()
        self._fault(server_id, 'fail_next_action')
        self.nova.servers.reboot(server_id, 'SOFT')
        self._wait_status(server_id, 'ERROR')
        newest = self.actions.instance_actions(server_id)[0]
        self.assertEqual(('reboot', 'Error'), (newest.action,
                                               newest.message))

    def test_delete_is_an_action_and_unknown_ones_are_404(self):
        server_id = self._server()
        with testtools.ExpectedException(nova_exc.NotFound):
            self.nova.instance_action.get(server_id, 'req-unknown')
        self.nova.servers.delete(server_id)
        self.assertEqual('delete',
                         self.actions.instance_actions(server_id)[0].action)
        with testtools.ExpectedException(nova_actions.ServerGone):
            self.actions.instance_actions('no-such-server')

    def test_console_and_fault_of_a_crashed_server(self):
        server_id = self._server()
        self._fault(server_id, 'crash_to_error')
        tail = self.actions.console_tail(server_id, 2)
        self.assertEqual(['vm login:', 'fakecloud fault: crash_to_error'],
                         tail.splitlines())
        self.assertEqual(3, len(self.actions.console_tail(
            server_id, 100).splitlines()))
        fault = self.actions.status(server_id).fault
        self.assertEqual(500, fault['code'])
        self.assertIn('crash_to_error', fault['message'])
        self.assertTrue(fault['created'])
        # Reading the console is no action of anyone's.
        self.assertEqual(['create'], [
            a.action for a in self.actions.instance_actions(server_id)])
