"""fakecloud's Cinder volumes and Nova's attachments, as Heat's clients see
them: python-cinderclient and python-novaclient against a fakecloud in this
process (noauth, on the loopback).
"""

import socket
import threading
import time

from cinderclient import client as cinder_client
from cinderclient import exceptions as cinder_exc
import fixtures
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
import testtools

from tests.fakecloud import __main__ as fakecloud_main
from tests.fakecloud import config
from tests.fakecloud import state

DELAY = 0.05


def _free_port():
    with socket.socket() as sock:
        sock.bind((config.BIND_HOST, 0))
        return sock.getsockname()[1]


class FakecloudVolumesTest(testtools.TestCase):

    def setUp(self):
        super(FakecloudVolumesTest, self).setUp()
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
        session = ks_session.Session(auth=noauth.NoAuth())
        # fakecloud's noauth acts for project demo.
        self.cinder = cinder_client.Client(
            '3', session=session,
            endpoint_override='%s/volume/v3/demo' % conf.public_url)
        version = cinder_client.api_versions.get_highest_version(self.cinder)
        self.assertEqual('3.70', version.get_string())
        self.cinder = cinder_client.Client(
            version.get_string(), session=session,
            endpoint_override='%s/volume/v3/demo' % conf.public_url)
        self.nova = nova_client.Client(
            '2.96', session=session,
            endpoint_override='%s/compute/v2.1' % conf.public_url)

    def _wait(self, read, done, what, timeout=5):
        deadline = time.time() + timeout
        while True:
            found = read()
            if done(found):
                return found
            if time.time() > deadline:
                self.fail('%s: last seen %r' % (what, found))
            time.sleep(DELAY / 2)

    def _server(self):
        server = self.nova.servers.create(
            'vm', state.fixed_id('image', 'cirros'), '1',
            nics=[{'net-id': state.fixed_id('network', 'private')}])
        return self._wait(lambda: self.nova.servers.get(server.id),
                          lambda s: s.status == 'ACTIVE', 'server ACTIVE')

    def _status(self, volume_id, status):
        return self._wait(lambda: self.cinder.volumes.get(volume_id),
                          lambda v: v.status == status,
                          'volume %s' % status)

    def test_create_attach_detach_delete(self):
        server = self._server()
        volume = self.cinder.volumes.create(1, name='data')
        self.assertEqual('creating', volume.status)
        self._status(volume.id, 'available')
        attached = self.nova.volumes.create_server_volume(server.id,
                                                          volume.id)
        # Heat keeps the attachment's id: the volume's, as Nova answers.
        self.assertEqual((volume.id, '/dev/vdb'),
                         (attached.id, attached.device))
        self.assertIn(self.cinder.volumes.get(volume.id).status,
                      ('attaching', 'in-use'))
        shown = self._status(volume.id, 'in-use')
        self.assertEqual([(server.id, '/dev/vdb')],
                         [(a['server_id'], a['device'])
                          for a in shown.attachments])
        self.assertEqual(
            [volume.id], [v['id'] for v in getattr(
                self.nova.servers.get(server.id),
                'os-extended-volumes:volumes_attached')])
        self.assertEqual(volume.id, self.nova.volumes.get_server_volume(
            server.id, volume.id).volumeId)
        # In use: not deleted.
        self.assertRaises(cinder_exc.BadRequest, self.cinder.volumes.delete,
                          volume.id)
        self.nova.volumes.delete_server_volume(server.id, volume.id)
        self._status(volume.id, 'available')
        self.assertRaises(nova_exc.NotFound,
                          self.nova.volumes.get_server_volume, server.id,
                          volume.id)
        self.cinder.volumes.delete(volume.id)
        self._wait(lambda: [v.id for v in self.cinder.volumes.list()],
                   lambda ids: volume.id not in ids, 'volume gone')
        self.assertRaises(cinder_exc.NotFound, self.cinder.volumes.get,
                          volume.id)

    def test_a_deleted_server_lets_go_of_its_volumes(self):
        server = self._server()
        volume = self.cinder.volumes.create(1)
        self._status(volume.id, 'available')
        self.nova.volumes.create_server_volume(server.id, volume.id)
        self._status(volume.id, 'in-use')
        self.nova.servers.delete(server.id)
        self._status(volume.id, 'available')
        self.assertEqual([], self.cinder.volumes.get(volume.id).attachments)

    def test_a_volume_not_available_is_not_attached(self):
        server = self._server()
        volume = self.cinder.volumes.create(1)
        self.assertRaises(nova_exc.BadRequest,
                          self.nova.volumes.create_server_volume,
                          server.id, volume.id)
        self.assertRaises(nova_exc.NotFound,
                          self.nova.volumes.create_server_volume,
                          server.id, 'no-such-volume')

    def test_another_projects_url_is_refused(self):
        volume = self.cinder.volumes.create(1)
        other = cinder_client.Client(
            '3', session=ks_session.Session(auth=noauth.NoAuth()),
            endpoint_override=self.cinder.client.endpoint_override.replace(
                '/demo', '/other'))
        self.assertRaises(cinder_exc.ClientException, other.volumes.get,
                          volume.id)
