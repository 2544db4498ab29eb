"""Nova actions through a real novaclient Client and keystoneauth session,
whose HTTP is answered by a fake Nova mounted as the requests transport:
the exact requests Nova gets, and how its answers become our errors."""

import datetime
import json
from urllib import parse

from keystoneauth1.identity import v3
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from novaclient import client as nova_client
import pytest
import requests
from requests import adapters
from requests import structures

from heat_health.common import nova_adapter
from heat_health.engine.recovery import nova_actions

NOVA = 'http://nova.test/v2.1'
SERVER = '5d1c9a52-5f8b-4a57-8e1c-3b8f1d0c2a11'
IMAGE = '0f3c7d1e-9a0b-4b2c-8d7e-6f5a4b3c2d10'
SERVER_PATH = '/v2.1/servers/%s' % SERVER
ACTION_PATH = SERVER_PATH + '/action'


def _server(vm_state='active', task_state=None, power_state=1,
            status='ACTIVE', image=None):
    return {'server': {
        'id': SERVER, 'name': 'web-0', 'status': status,
        'OS-EXT-STS:vm_state': vm_state,
        'OS-EXT-STS:task_state': task_state,
        'OS-EXT-STS:power_state': power_state,
        'image': {'id': IMAGE, 'links': []} if image is None else image,
        'addresses': {'private': [{'addr': '10.0.0.5', 'version': 4},
                                  {'addr': 'fd00::5', 'version': 6}],
                      'public': [{'addr': '172.24.4.9', 'version': 4}]},
        'updated': '2026-11-22T12:00:00Z'}}


def _fault(kind, code, message):
    return {kind: {'code': code, 'message': message}}


class FakeNova(adapters.BaseAdapter):
    """Answers (method, path) from ``answers``; records every request."""

    def __init__(self):
        super(FakeNova, self).__init__()
        self.answers = {('GET', SERVER_PATH): (200, _server())}
        self.requests = []

    def send(self, request, **kwargs):
        url = parse.urlsplit(request.url)
        body = json.loads(request.body) if request.body else None
        self.requests.append((request.method, url.path, body,
                              dict(request.headers)))
        answer = self.answers.get((request.method, url.path))
        if answer is None:
            answer = (404, _fault('itemNotFound', 404, 'no such route'))
        if isinstance(answer, Exception):
            raise answer
        status, data = answer
        response = requests.Response()
        response.status_code = status
        response.reason = 'fake'
        response.url = request.url
        response.request = request
        response.headers = structures.CaseInsensitiveDict(
            {'x-openstack-request-id': 'req-fake-1',
             'x-compute-request-id': 'req-fake-1'})
        if data is not None:
            response.headers['Content-Type'] = 'application/json'
            response._content = json.dumps(data).encode('utf-8')
        else:
            response._content = b''
        response.encoding = 'utf-8'
        return response

    def close(self):
        pass

    def sent(self):
        """(method, path, body) of the requests to Nova."""
        return [(m, p, b) for m, p, b, _h in self.requests
                if p.startswith('/v2.1/')]


def _client(fake, auth=None, version='2.1'):
    http = requests.Session()
    http.mount('http://', fake)
    auth = auth or token_endpoint.Token(NOVA, 'a-token')
    session = ks_session.Session(auth=auth, session=http)
    return nova_client.Client(version, session=session)


def _admin_actions(fake):
    """NovaActions on heat-health-engine's own (admin) client."""
    return nova_actions.NovaActions(_client(
        fake, version=nova_adapter.NOVA_API_VERSION))


@pytest.fixture
def fake():
    return FakeNova()


@pytest.fixture
def actions(fake):
    return nova_actions.NovaActions(_client(fake))


def test_status(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (200, _server(
        'stopped', 'powering-on', 4, 'SHUTOFF'))
    assert actions.status(SERVER) == nova_actions.ServerStatus(
        SERVER, 'SHUTOFF', 'stopped', 'powering-on', 4, IMAGE,
        '2026-11-22T12:00:00Z', 'web-0',
        ('10.0.0.5', 'fd00::5', '172.24.4.9'))
    method, path, body, headers = fake.requests[0]
    assert (method, path, body) == ('GET', SERVER_PATH, None)
    assert headers['X-Auth-Token'] == 'a-token'


def test_status_of_a_server_booted_from_a_volume(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (200, _server(image=''))
    assert actions.status(SERVER).image_id is None


def test_status_of_a_gone_server(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (404, _fault(
        'itemNotFound', 404, 'Instance %s could not be found.' % SERVER))
    with pytest.raises(nova_actions.ServerGone) as e:
        actions.status(SERVER)
    assert 'could not be found' in str(e.value)


@pytest.mark.parametrize('name,params,body', [
    ('START', None, {'os-start': None}),
    ('UNPAUSE', None, {'unpause': None}),
    ('RESUME', {}, {'resume': None}),
    ('STOP', None, {'os-stop': None}),
    ('REBOOT', None, {'reboot': {'type': 'SOFT'}}),
    ('REBOOT', {'type': 'SOFT'}, {'reboot': {'type': 'SOFT'}}),
    ('REBOOT', {'type': 'HARD'}, {'reboot': {'type': 'HARD'}}),
    ('reboot', {'type': 'hard'}, {'reboot': {'type': 'HARD'}}),
    ('start', {}, {'os-start': None}),
])
def test_action_bodies(fake, actions, name, params, body):
    fake.answers[('POST', ACTION_PATH)] = (202, None)
    assert actions.run(SERVER, name, params) is None
    assert fake.sent() == [('POST', ACTION_PATH, body)]


def test_rebuild_with_the_image_the_server_has(fake, actions):
    fake.answers[('POST', ACTION_PATH)] = (202, _server(
        'active', 'rebuilding', 1, 'REBUILD'))
    assert actions.run(SERVER, 'REBUILD') is None
    assert fake.sent() == [
        ('GET', SERVER_PATH, None),
        ('POST', ACTION_PATH, {'rebuild': {'imageRef': IMAGE}})]


def test_no_rebuild_without_an_image(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (200, _server(image=''))
    with pytest.raises(nova_actions.ActionRefused) as e:
        actions.run(SERVER, 'REBUILD')
    assert 'volume' in str(e.value)
    assert [m for m, _p, _b in fake.sent()] == ['GET']


@pytest.mark.parametrize('name,params', [
    ('RECREATE', None), ('MIGRATE', None), ('REBOOT', {'type': 'WARM'})])
def test_unknown_actions_are_not_sent(fake, actions, name, params):
    with pytest.raises(ValueError):
        actions.run(SERVER, name, params)
    assert fake.sent() == []


def test_evacuate_leaves_the_host_to_nova_s_scheduler(fake):
    """As heat-health-engine's own client (the adapter's microversion)."""
    actions = _admin_actions(fake)
    fake.answers[('POST', ACTION_PATH)] = (200, {})
    assert actions.run(SERVER, 'EVACUATE') is None
    assert fake.sent() == [('POST', ACTION_PATH, {'evacuate': {}})]


@pytest.mark.parametrize('name,code,kind,reason,admin', [
    ('START', 409, 'conflictingRequest',
     "Cannot 'start' instance %s while it is in vm_state active" % SERVER,
     False),
    # Nova evacuates only from a compute it takes for down.
    ('EVACUATE', 400, 'badRequest',
     'Compute service of compute1 is still in use.', True)])
def test_refused(fake, actions, name, code, kind, reason, admin):
    if admin:
        actions = _admin_actions(fake)
    fake.answers[('POST', ACTION_PATH)] = (code, _fault(kind, code, reason))
    with pytest.raises(nova_actions.ActionRefused) as e:
        actions.run(SERVER, name)
    assert reason in str(e.value)
    assert 'HTTP %d' % code in str(e.value)
    assert 'req-fake-1' in str(e.value)


def test_action_on_a_gone_server(fake, actions):
    fake.answers[('POST', ACTION_PATH)] = (404, _fault(
        'itemNotFound', 404, 'Instance %s could not be found.' % SERVER))
    with pytest.raises(nova_actions.ServerGone):
        actions.run(SERVER, 'REBOOT', {'type': 'HARD'})


@pytest.mark.parametrize('status,kind,message', [
    (500, 'computeFault', 'Unexpected API Error.'),
    (503, 'serviceUnavailable', 'The server is not available.'),
    (400, 'badRequest', 'Invalid input for field/attribute reboot.'),
    (403, 'forbidden', 'Policy does not allow os-stop to be performed.'),
])
def test_http_failures(fake, actions, status, kind, message):
    fake.answers[('POST', ACTION_PATH)] = (status, _fault(
        kind, status, message))
    with pytest.raises(nova_actions.NovaActionFailed) as e:
        actions.run(SERVER, 'STOP')
    assert message in str(e.value)
    assert 'HTTP %d' % status in str(e.value)


@pytest.mark.parametrize('error,name', [
    (requests.ConnectionError('connection refused'), 'ConnectFailure'),
    (requests.Timeout('read timed out'), 'ConnectTimeout'),
    (requests.exceptions.SSLError('bad certificate'), 'SSLError'),
])
def test_transport_failures(fake, actions, error, name):
    fake.answers[('POST', ACTION_PATH)] = error
    with pytest.raises(nova_actions.NovaActionFailed) as e:
        actions.run(SERVER, 'START')
    assert name in str(e.value)
    fake.answers[('GET', SERVER_PATH)] = error
    with pytest.raises(nova_actions.NovaActionFailed):
        actions.status(SERVER)


def test_keystone_refuses_the_credentials(fake):
    fake.answers[('POST', '/v3/auth/tokens')] = (401, {'error': {
        'code': 401, 'title': 'Unauthorized',
        'message': 'The request you have made requires authentication.'}})
    auth = v3.Password(auth_url='http://keystone.test/v3', username='u',
                       password='p', user_domain_id='default',
                       project_id='p1')
    actions = nova_actions.NovaActions(_client(fake, auth))
    with pytest.raises(nova_actions.NovaActionFailed) as e:
        actions.run(SERVER, 'START')
    assert 'Unauthorized' in str(e.value)
    assert fake.sent() == []


def test_no_compute_endpoint(fake):
    actions = nova_actions.NovaActions(
        _client(fake, token_endpoint.Token(None, 'a-token')))
    with pytest.raises(nova_actions.NovaActionFailed) as e:
        actions.status(SERVER)
    assert 'EndpointNotFound' in str(e.value)


def test_force_delete_deletes(fake, actions):
    fake.answers[('DELETE', SERVER_PATH)] = (204, None)
    assert actions.force_delete(SERVER) is None
    assert fake.sent() == [('GET', SERVER_PATH, None),
                           ('DELETE', SERVER_PATH, None)]


def test_force_delete_whatever_the_task(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (200, _server(
        'active', 'powering-off', 1))
    fake.answers[('DELETE', SERVER_PATH)] = (204, None)
    actions.force_delete(SERVER)
    assert fake.sent()[-1] == ('DELETE', SERVER_PATH, None)


def test_force_delete_of_a_soft_deleted_server(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (200, _server(
        'soft-delete', None, 4, 'SOFT_DELETED'))
    fake.answers[('POST', ACTION_PATH)] = (202, None)
    actions.force_delete(SERVER)
    assert fake.sent() == [('GET', SERVER_PATH, None),
                           ('POST', ACTION_PATH, {'forceDelete': None})]


def test_force_delete_of_a_gone_server(fake, actions):
    fake.answers[('GET', SERVER_PATH)] = (404, _fault(
        'itemNotFound', 404, 'Instance could not be found.'))
    with pytest.raises(nova_actions.ServerGone):
        actions.force_delete(SERVER)
    fake.answers[('GET', SERVER_PATH)] = (200, _server())
    fake.answers[('DELETE', SERVER_PATH)] = (404, _fault(
        'itemNotFound', 404, 'Instance could not be found.'))
    with pytest.raises(nova_actions.ServerGone):
        actions.force_delete(SERVER)


def test_force_delete_refused(fake, actions):
    fake.answers[('DELETE', SERVER_PATH)] = (409, _fault(
        'conflictingRequest', 409, 'Instance %s is locked' % SERVER))
    with pytest.raises(nova_actions.ActionRefused) as e:
        actions.force_delete(SERVER)
    assert 'is locked' in str(e.value)


ACTIONS_PATH = SERVER_PATH + '/os-instance-actions'


def _instance_action(action, request_id, start_time, user_id='u-1',
                     project_id='p-1', message=None):
    return {'action': action, 'instance_uuid': SERVER,
            'request_id': request_id, 'user_id': user_id,
            'project_id': project_id, 'start_time': start_time,
            'message': message}


def test_instance_actions_newest_first(fake, actions):
    fake.answers[('GET', ACTIONS_PATH)] = (200, {'instanceActions': [
        _instance_action('start', 'req-2', '2026-11-22T12:05:00.000000'),
        # Nova's power sync stopping a guest that shut down by itself.
        _instance_action('stop', 'req-3', '2026-11-22T12:10:00.000000',
                         user_id=None, project_id=None),
        _instance_action('create', 'req-1', '2026-11-22T12:00:00.000000',
                         message='Error')]})
    found = actions.instance_actions(SERVER)
    assert found == [
        nova_actions.InstanceAction(
            'stop', None, None, 'req-3',
            datetime.datetime(2026, 11, 22, 12, 10), None),
        nova_actions.InstanceAction(
            'start', 'u-1', 'p-1', 'req-2',
            datetime.datetime(2026, 11, 22, 12, 5), None),
        nova_actions.InstanceAction(
            'create', 'u-1', 'p-1', 'req-1',
            datetime.datetime(2026, 11, 22, 12, 0), 'Error')]
    assert fake.sent() == [('GET', ACTIONS_PATH, None)]


def test_instance_actions_in_utc_and_limited(fake, actions):
    fake.answers[('GET', ACTIONS_PATH)] = (200, {'instanceActions': [
        _instance_action('reboot', 'req-%d' % n,
                         '2026-11-22T14:0%d:00+02:00' % n)
        for n in range(5)]})
    found = actions.instance_actions(SERVER, limit=2)
    assert [(a.request_id, a.start_time) for a in found] == [
        ('req-4', datetime.datetime(2026, 11, 22, 12, 4)),
        ('req-3', datetime.datetime(2026, 11, 22, 12, 3))]


@pytest.mark.parametrize('status,kind,error', [
    (404, 'itemNotFound', nova_actions.ServerGone),
    (409, 'conflictingRequest', nova_actions.NovaActionFailed),
    (403, 'forbidden', nova_actions.NovaActionFailed),
    (500, 'computeFault', nova_actions.NovaActionFailed),
])
def test_instance_actions_errors(fake, actions, status, kind, error):
    fake.answers[('GET', ACTIONS_PATH)] = (status, _fault(
        kind, status, 'no actions here'))
    with pytest.raises(error) as e:
        actions.instance_actions(SERVER)
    assert 'no actions here' in str(e.value)


def test_instance_actions_unreachable(fake, actions):
    fake.answers[('GET', ACTIONS_PATH)] = requests.Timeout('read timed out')
    with pytest.raises(nova_actions.NovaActionFailed):
        actions.instance_actions(SERVER)


def test_status_with_nova_s_fault(fake, actions):
    answer = _server('error', None, 6, 'ERROR')
    answer['server']['fault'] = {'code': 500, 'message': 'disk full',
                                 'created': '2026-11-22T12:00:01Z',
                                 'details': 'Traceback...'}
    fake.answers[('GET', SERVER_PATH)] = (200, answer)
    assert actions.status(SERVER).fault == {
        'code': 500, 'message': 'disk full',
        'created': '2026-11-22T12:00:01Z'}


def test_console_tail(fake, actions):
    fake.answers[('POST', ACTION_PATH)] = (200, {'output': 'a\nb\n'})
    assert actions.console_tail(SERVER, 2) == 'a\nb\n'
    assert fake.sent() == [
        ('POST', ACTION_PATH, {'os-getConsoleOutput': {'length': 2}})]


@pytest.mark.parametrize('status,kind,error', [
    (409, 'conflictingRequest', nova_actions.ActionRefused),
    (404, 'itemNotFound', nova_actions.ServerGone),
    (501, 'notImplemented', nova_actions.NovaActionFailed),
])
def test_console_not_given(fake, actions, status, kind, error):
    fake.answers[('POST', ACTION_PATH)] = (status, _fault(
        kind, status, 'no console here'))
    with pytest.raises(error):
        actions.console_tail(SERVER, 10)
