"""fakecloud as Heat, the CLI and heat-health's detectors will see it."""

import time

from novaclient import exceptions as nova_exc
import pytest
import requests

from tests.functional import cloud
from tests.functional import notifications


@pytest.fixture(scope='module')
def nova_events():
    listener = notifications.NovaNotifications()
    listener.start()
    yield listener
    listener.stop()


def test_stack_of_servers_and_a_group(demo, stacks):
    stack = stacks('servers', 'servers.yaml')
    name = stack['stack_name']
    servers = [s for s in demo.json('server', 'list')
               if s['Name'].startswith(name)]
    assert len(servers) == 4, servers
    assert {s['Status'] for s in servers} == {'ACTIVE'}
    assert all(str(s['Networks']).count('10.0.') == 1 for s in servers), (
        servers)
    outputs = demo.json('stack', 'output', 'show', name, 'web_ip')
    assert outputs['output_value'].startswith('10.0.')

    demo.run('stack', 'delete', '--yes', '--wait', name)
    assert not [s for s in demo.json('server', 'list')
                if s['Name'].startswith(name)]


@pytest.mark.parametrize('fault,status,event_type,vm_state', [
    ('power_off', 'SHUTOFF', 'instance.power_off.end', 'stopped'),
    ('shutdown', 'SHUTOFF', 'instance.shutdown.end', 'stopped'),
    ('pause', 'PAUSED', 'instance.pause.end', 'paused'),
    ('suspend', 'SUSPENDED', 'instance.suspend.end', 'suspended'),
    ('crash_to_error', 'ERROR', 'instance.update', 'error'),
])
def test_fault_changes_status_and_notifies(admin, demo_nova, nova_events,
                                           server, fault, status,
                                           event_type, vm_state):
    resp = admin.inject_fault(server.id, fault)
    assert resp.status_code == 200, resp.text
    cloud.wait_server_status(demo_nova, server.id, status)
    payload = nova_events.wait_for(server.id, event_type, state=vm_state)
    assert payload['tenant_id'] == server.tenant_id

    assert admin.inject_fault(server.id, 'reset').status_code == 200
    cloud.wait_server_status(demo_nova, server.id, 'ACTIVE')


def test_vanish_is_a_delete_behind_heats_back(admin, admin_nova, demo_nova,
                                              nova_events, server):
    since = time.strftime('%Y-%m-%dT%H:%M:%SZ',
                          time.gmtime(time.time() - 2))
    assert admin.inject_fault(server.id, 'vanish').status_code == 200
    nova_events.wait_for(server.id, 'instance.delete.end')
    with pytest.raises(nova_exc.NotFound):
        demo_nova.servers.get(server.id)
    changed = admin_nova.servers.list(search_opts={
        'all_tenants': True, 'changes-since': since})
    assert [s.status for s in changed if s.id == server.id] == ['DELETED']


def test_hang_keeps_api_active_but_health_url_silent(admin, demo_nova,
                                                     server):
    health_url = admin.inject_fault(server.id, 'reset').json()['server'][
        'health_url']
    assert requests.get(health_url, timeout=5).text.strip() == 'ok'
    assert admin.inject_fault(server.id, 'hang').status_code == 200
    assert demo_nova.servers.get(server.id).status == 'ACTIVE'
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(health_url, timeout=2)
    admin.inject_fault(server.id, 'reset')
    assert requests.get(health_url, timeout=5).status_code == 200


def test_api_errors_then_recovery(admin, demo_nova, server):
    resp = admin.inject_api_fault('api_errors', duration=3)
    assert resp.status_code == 200, resp.text
    with pytest.raises(nova_exc.ClientException) as error:
        demo_nova.servers.get(server.id)
    assert error.value.code == 500
    time.sleep(3.5)
    assert demo_nova.servers.get(server.id).status == 'ACTIVE'


def test_slow_api_delays_answers(admin, demo_nova, server):
    resp = admin.inject_api_fault('slow_api', duration=5, delay=1.5)
    assert resp.status_code == 200, resp.text
    start = time.monotonic()
    demo_nova.servers.get(server.id)
    assert time.monotonic() - start >= 1.4
    admin.inject_api_fault('reset')


def test_faults_are_admin_only(demo, server):
    assert demo.inject_fault(server.id, 'power_off').status_code == 403


def test_projects_see_only_their_servers(admin, admin_nova, demo_nova,
                                         server):
    own = admin_nova.servers.create(
        'admin-only', admin_nova.glance.find_image('cirros'),
        admin_nova.flavors.find(name='m1.tiny'),
        nics=[{'net-id': admin_nova.neutron.find_network('private').id}])
    try:
        assert own.id not in [s.id for s in demo_nova.servers.list()]
        with pytest.raises(nova_exc.NotFound):
            demo_nova.servers.get(own.id)
        every = [s.id for s in admin_nova.servers.list(
            limit=-1, search_opts={'all_tenants': True})]
        assert {own.id, server.id} <= set(every)
        assert server.id not in [s.id for s in admin_nova.servers.list()]
    finally:
        admin_nova.servers.delete(own.id)
