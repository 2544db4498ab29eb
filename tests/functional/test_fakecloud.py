"""fakecloud as Heat, the CLI and heat-health's detectors will see it."""

import time

from novaclient import exceptions as nova_exc
import pytest
import requests

from tests.functional import cloud
from tests.functional import notifications

# fakecloud itself.
pytestmark = pytest.mark.fakecloud


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


def test_slow_actions_carries_out_an_action_its_caller_gave_up_on(
        admin, demo, demo_nova, server):
    resp = admin.inject_fault(server.id, 'slow_actions', delay=3,
                              duration=30)
    assert resp.status_code == 200, resp.text
    # Only actions are held: reads answer at once.
    start = time.monotonic()
    demo_nova.servers.get(server.id)
    assert time.monotonic() - start < 1
    last = timeline(admin)[-1]['seq']
    url = '%s/servers/%s/action' % (demo.endpoint('compute'), server.id)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(url, json={'reboot': {'type': 'SOFT'}}, timeout=0.5,
                      headers={'X-Auth-Token': demo.session.get_token()})
    assert admin.fakecloud_server(server.id)['held_requests'] == 1
    assert not [e for e in timeline(admin, server_id=server.id,
                                    since_seq=last)
                if e['event'] == 'action:reboot']
    # The caller is gone; the reboot is accepted all the same, late.
    demo.wait_for(lambda: [e for e in timeline(admin, server_id=server.id,
                                               since_seq=last)
                           if e['event'] == 'active'],
                  'the reboot done', timeout=10, interval=0.2)
    events = [e['event'] for e in timeline(admin, server_id=server.id,
                                           since_seq=last)]
    assert events == ['action:reboot', 'active'], events
    assert admin.fakecloud_server(server.id)['held_requests'] == 0


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


# A server stuck in a task (nova-compute died in the middle of it)

def wait_for_update(nova_events, server_id, timeout=30, **state_update):
    """The payload of the instance.update with these state_update fields.

    NovaNotifications.wait_for tells updates apart by vm_state only, and a
    stuck task often leaves the vm_state as it was.
    """
    collector = nova_events._collector
    deadline = time.time() + timeout
    with collector.changed:
        while True:
            for event_type, payload in collector.events:
                data = payload.get('nova_object.data', {})
                update = data.get('state_update', {}).get(
                    'nova_object.data', {})
                if (event_type == 'instance.update' and
                        data.get('uuid') == server_id and
                        all(update.get(k, '-') == v
                            for k, v in state_update.items())):
                    return data
            left = deadline - time.time()
            assert left > 0, 'no instance.update with %s' % state_update
            collector.changed.wait(left)


def task_state(nova, server_id):
    return getattr(nova.servers.get(server_id), 'OS-EXT-STS:task_state')


@pytest.mark.parametrize('task,status,vm_state,power_state', [
    ('rebooting', 'REBOOT', 'active', 1),
    ('rebooting_hard', 'HARD_REBOOT', 'active', 1),
    ('pausing', 'ACTIVE', 'active', 1),
    ('powering-on', 'SHUTOFF', 'stopped', 4),
    ('unpausing', 'PAUSED', 'paused', 3),
])
def test_stuck_task_shows_the_task_and_notifies(admin, demo_nova,
                                                nova_events, server, task,
                                                status, vm_state,
                                                power_state):
    resp = admin.inject_fault(server.id, 'stuck_task', task_state=task)
    assert resp.status_code == 200, resp.text
    assert resp.json()['server']['stuck']
    shown = demo_nova.servers.get(server.id)
    assert shown.status == status
    assert getattr(shown, 'OS-EXT-STS:task_state') == task
    assert getattr(shown, 'OS-EXT-STS:vm_state') == vm_state
    assert getattr(shown, 'OS-EXT-STS:power_state') == power_state
    payload = wait_for_update(nova_events, server.id, new_task_state=task)
    assert (payload['state'], payload['task_state']) == (vm_state, task)
    # Nothing moves it on: nova-compute is not there to.
    time.sleep(1.5)
    assert task_state(demo_nova, server.id) == task
    health = requests.get(resp.json()['server']['health_url'], timeout=5)
    assert health.status_code == 503


def test_stuck_task_takes_vm_and_power_state(admin, demo_nova, server):
    resp = admin.inject_fault(server.id, 'stuck_task', task_state='pausing',
                              power_state='paused')
    assert resp.status_code == 200, resp.text
    shown = demo_nova.servers.get(server.id)
    assert (shown.status, getattr(shown, 'OS-EXT-STS:power_state')) == (
        'ACTIVE', 3)
    resp = admin.inject_fault(server.id, 'stuck_task',
                              task_state='rebooting_hard', vm_state='stopped')
    assert resp.status_code == 200, resp.text
    assert demo_nova.servers.get(server.id).status == 'SHUTOFF'
    for bad in ({}, {'task_state': 'dozing'},
                {'task_state': 'pausing', 'vm_state': 'napping'},
                {'task_state': 'pausing', 'power_state': 2}):
        assert admin.inject_fault(server.id, 'stuck_task',
                                  **bad).status_code == 400, bad


def test_stuck_task_refuses_actions_but_a_hard_reboot(admin, demo_nova,
                                                      nova_events, server):
    assert admin.inject_fault(server.id, 'stuck_task',
                              task_state='pausing').status_code == 200
    for action in (demo_nova.servers.reboot, demo_nova.servers.stop,
                   demo_nova.servers.pause):
        with pytest.raises(nova_exc.Conflict) as error:
            action(server.id)
        assert 'task_state pausing' in str(error.value), action
    # pausing is in Nova's ALLOW_REBOOT: a hard reboot gets it out.
    demo_nova.servers.reboot(server.id, reboot_type='HARD')
    nova_events.wait_for(server.id, 'instance.reboot.end')
    cloud.wait_server_status(demo_nova, server.id, 'ACTIVE')
    assert task_state(demo_nova, server.id) is None

    assert admin.inject_fault(server.id, 'stuck_task',
                              task_state='powering-on').status_code == 200
    for action in (demo_nova.servers.start, demo_nova.servers.reboot,
                   lambda s: demo_nova.servers.reboot(s, reboot_type='HARD')):
        with pytest.raises(nova_exc.Conflict) as error:
            action(server.id)
        assert 'task_state powering-on' in str(error.value), action


def test_reset_clears_a_stuck_task(admin, demo_nova, nova_events, server):
    resp = admin.inject_fault(server.id, 'stuck_task',
                              task_state='powering-on')
    health_url = resp.json()['server']['health_url']
    assert requests.get(health_url, timeout=5).status_code == 503
    resp = admin.inject_fault(server.id, 'reset')
    assert resp.status_code == 200, resp.text
    assert not resp.json()['server']['stuck']
    shown = demo_nova.servers.get(server.id)
    assert (shown.status, getattr(shown, 'OS-EXT-STS:task_state')) == (
        'ACTIVE', None)
    assert requests.get(health_url, timeout=5).text.strip() == 'ok'
    # As Nova's reset-state: one instance.update clears the task.
    wait_for_update(nova_events, server.id, old_state='stopped',
                    old_task_state='powering-on', state='active',
                    new_task_state=None)


def test_a_stuck_delete_can_be_deleted_again(admin, demo_nova, nova_events,
                                             server):
    assert admin.inject_fault(server.id, 'stuck_task',
                              task_state='deleting').status_code == 200
    demo_nova.servers.delete(server.id)
    nova_events.wait_for(server.id, 'instance.delete.end')
    with pytest.raises(nova_exc.NotFound):
        demo_nova.servers.get(server.id)


# The timeline

def timeline(user, **params):
    resp = user.session.get(user.fakecloud_url('/timeline'), params=params,
                            raise_exc=False)
    assert resp.status_code == 200, resp.text
    return resp.json()['timeline']


def test_timeline_orders_a_servers_life(admin, demo, demo_nova, nova_events,
                                        server):
    demo_nova.servers.stop(server.id)
    cloud.wait_server_status(demo_nova, server.id, 'SHUTOFF')
    demo_nova.servers.start(server.id)
    cloud.wait_server_status(demo_nova, server.id, 'ACTIVE')
    assert admin.inject_fault(server.id, 'stuck_task',
                              task_state='rebooting').status_code == 200
    demo_nova.servers.delete(server.id)
    nova_events.wait_for(server.id, 'instance.delete.end')

    entries = timeline(admin, server_id=server.id)
    assert [e['event'] for e in entries] == [
        'created', 'active', 'action:os-stop', 'stopped', 'action:os-start',
        'active', 'fault:stuck_task', 'action:delete', 'deleted'], entries
    seqs = [e['seq'] for e in entries]
    assert seqs == sorted(set(seqs))
    times = [e['time'] for e in entries]
    assert times == sorted(times)
    assert entries[6]['parameters']['task_state'] == 'rebooting'
    assert {e['server_id'] for e in entries} == {server.id}
    assert {e['name'] for e in entries} == {server.name}

    since = timeline(admin, server_id=server.id, since_seq=seqs[5])
    assert [e['seq'] for e in since] == seqs[6:]
    resp = demo.session.get(demo.fakecloud_url('/timeline'), raise_exc=False)
    assert resp.status_code == 403


def test_timeline_records_reboots_and_api_faults(admin, demo_nova, server):
    last = timeline(admin)[-1]['seq']
    demo_nova.servers.reboot(server.id, reboot_type='HARD')
    cloud.wait_server_status(demo_nova, server.id, 'ACTIVE')
    assert admin.inject_api_fault('slow_api', duration=1,
                                  delay=0.1).status_code == 200
    entries = timeline(admin, since_seq=last)
    mine = [(e['event'], e.get('type')) for e in entries
            if e['server_id'] == server.id]
    assert mine == [('action:reboot', 'HARD'), ('active', None)], entries
    api_wide = [e for e in entries if e['server_id'] is None]
    assert [e['event'] for e in api_wide] == ['fault:slow_api']
    assert api_wide[0]['parameters'] == {'duration': 1, 'delay': 0.1}
