"""Each detection mode alone, through Heat and heat-health-engine.

On real Nova: each fault happens behind Nova's back (or through its API as
an admin's action), and each mode sees what real Nova shows of it.
"""

import json
import os
import pathlib
import signal

import pytest

from tests.functional import cloud
from tests.functional import engines
from tests.functional import healing as h
from tests.functional import server_faults as faults

pytestmark = pytest.mark.real_nova

EVENTS = [{'type': 'LIFECYCLE_EVENTS'}]
POLL_URL = [{'type': 'NODE_STATUS_POLL_URL', 'options': {
    'poll_url': h.FAKECLOUD_HEALTH_URL,
    'poll_url_healthy_response': '^ok', 'poll_url_retry_limit': 1,
    'poll_url_retry_interval': 1, 'poll_url_timeout': 1}}]


@pytest.fixture
def second_engine(demo, tmp_path_factory):
    """Two engines share the policies while a mode alone detects.

    Not for the tests that stop or kill the deployment's engine: a second
    one would see for it.
    """
    with engines.peer(demo, tmp_path_factory, 'modes-peer') as engine:
        yield engine


def _members(demo, stack_name):
    attributes = demo.resource(stack_name, 'health')['attributes']
    return {m['path']: m for m in attributes['members']}


def _wait_member(demo, stack_name, path, state, timeout=60):
    return demo.wait_for(
        lambda: (lambda m: m if m and m['state'] == state else None)(
            _members(demo, stack_name).get(path)),
        '%s to be %s' % (path, state), timeout=timeout)


def _watched(demo, stacks, modes, count):
    name = stacks('modes', 'health_modes.yaml', 'count=%d' % count,
                  'modes=%s' % json.dumps(modes))['stack_name']
    paths = ['workers/%d' % i for i in range(count)]
    for path in paths:
        _wait_member(demo, name, path, 'HEALTHY')
    members = _members(demo, name)
    return name, {path: members[path]['server_id'] for path in paths}


@pytest.mark.usefixtures('second_engine')
def test_notifications_alone_see_power_off_pause_shutdown(admin, demo,
                                                          stacks):
    name, servers = _watched(demo, stacks, EVENTS, 3)
    # Nova's power sync saves the guest's power state (instance.update,
    # still ACTIVE); a guest that shut off or crashed it then stops, with
    # instance.update of the new vm_state and the .end notification.
    # Whichever comes first decides. One the hypervisor paused stays
    # ACTIVE.
    broken = dict(zip(sorted(servers), [
        ('power_off', ('ACTIVE but power state SHUTDOWN',
                       'instance.power_off.end', 'vm_state stopped')),
        ('pause', ('ACTIVE but power state PAUSED',)),
        # libvirt keeps no domain crashed: Nova sees it shut down. Nova
        # ignores the STOPPED event of a guest whose power state reads
        # CRASHED: only its periodic power sync (every 10 s here) tells.
        ('crash', ('ACTIVE but power state CRASHED',
                   'ACTIVE but power state SHUTDOWN',
                   'instance.power_off.end', 'vm_state stopped'))]))
    for path, (fault, _seen) in broken.items():
        faults.break_server(admin, servers[path], fault)
    for path, (fault, seen) in broken.items():
        # Three of Nova's power syncs, and the stop the last one sends.
        member = _wait_member(demo, name, path, 'UNHEALTHY',
                              timeout=60 if fault == 'crash' else 30)
        assert member['source'] == 'LIFECYCLE_EVENTS', member
        assert any(s in member['reason'] for s in seen), member['reason']


# The application's hang and its health URL are the fault driver's.
@pytest.mark.guest_operation_faults
@pytest.mark.usefixtures('second_engine')
def test_poll_url_alone_sees_a_hang_nova_cannot(admin, demo, demo_nova,
                                                stacks):
    name, servers = _watched(demo, stacks, POLL_URL, 1)
    server_id = servers['workers/0']
    faults.break_server(admin, server_id, 'hang')
    member = _wait_member(demo, name, 'workers/0', 'UNHEALTHY')
    assert member['source'] == 'NODE_STATUS_POLL_URL', member
    assert demo_nova.servers.get(server_id).status == 'ACTIVE'
    faults.break_server(admin, server_id, 'reset')
    _wait_member(demo, name, 'workers/0', 'HEALTHY')
    cloud.wait_server_status(demo_nova, server_id, 'ACTIVE')


def _listener_workers():
    """Pids of the running engine's notification listener workers."""
    engine = engines.deployment_engine_pid()
    found = []
    for stat in pathlib.Path('/proc').glob('[0-9]*/cmdline'):
        try:
            argv = stat.read_bytes().split(b'\0')
            parent = int((stat.parent / 'stat').read_text()
                         .rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if (b'heat_health.engine.monitor.listener_workers' in argv and
                _descends(parent, engine)):
            found.append(int(stat.parent.name))
    return sorted(found)


def _descends(pid, ancestor):
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(pathlib.Path('/proc/%d/stat' % pid).read_text()
                      .rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def _needs_local_deployment():
    if not h.local_deployment():
        pytest.skip("stops or kills the local deployment's engine "
                    "processes (tools/localcloud)")


def test_listener_workers_killed_are_replaced_and_events_still_seen(
        admin, demo, stacks):
    _needs_local_deployment()
    name, servers = _watched(demo, stacks, EVENTS, 1)
    before = _listener_workers()
    assert len(before) == 2, before
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    after = demo.wait_for(
        lambda: (lambda p: p if len(p) == 2 and not set(p) & set(before)
                 else None)(_listener_workers()),
        'two new listener workers', timeout=30, interval=0.5)
    assert len(after) == 2
    faults.break_server(admin, servers['workers/0'], 'power_off')
    member = _wait_member(demo, name, 'workers/0', 'UNHEALTHY', timeout=30)
    assert member['source'] == 'LIFECYCLE_EVENTS', member


@pytest.mark.guest_operation_faults
def test_polling_backstop_sees_failures_with_the_listener_off(
        admin, demo, stacks, tmp_path):
    """Both modes, but the engine listens to no notification topic."""
    _needs_local_deployment()
    engines.localcloud('stop', 'heat-health-engine')
    try:
        with engines.own_engine(demo, tmp_path, '[heat_health]\n'
                                'nova_versioned_topic =\n'
                                'nova_legacy_topic =\n') as log:
            name, servers = _watched(
                demo, stacks, EVENTS + [{'type': 'NODE_STATUS_POLLING'}], 2)
            assert 'LIFECYCLE_EVENTS sees nothing' in log.read_text()
            # Deleted by an admin; ERROR after a suspend that failed.
            broken = {'workers/0': ('delete', ('DELETED', "Not in Nova")),
                      'workers/1': ('error', ('ERROR',))}
            for path, (fault, _reasons) in broken.items():
                faults.break_server(admin, servers[path], fault)
            for path, (fault, reasons) in broken.items():
                member = _wait_member(demo, name, path, 'UNHEALTHY',
                                      timeout=30)
                assert member['source'] == 'NODE_STATUS_POLLING', member
                assert any(r in member['reason'] for r in reasons), member
    finally:
        engines.localcloud('up')
