"""Each detection mode alone, through Heat and heat-health-engine."""

import json
import os
import pathlib
import signal

import pytest

from tests.functional import cloud
from tests.functional import engines
from tests.functional import healing as h

# fakecloud's faults; the local deployment's engine stopped, killed, added.
pytestmark = pytest.mark.fakecloud

EVENTS = [{'type': 'LIFECYCLE_EVENTS'}]
POLL_URL = [{'type': 'NODE_STATUS_POLL_URL', 'options': {
    'poll_url': h.FAKECLOUD_HEALTH_URL,
    'poll_url_healthy_response': '^ok', 'poll_url_retry_limit': 1,
    'poll_url_retry_interval': 1, 'poll_url_timeout': 1}}]


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


def test_notifications_alone_see_power_off_pause_shutdown(admin, demo,
                                                          stacks):
    name, servers = _watched(demo, stacks, EVENTS, 3)
    # Nova sends instance.update with the new vm_state before the .end
    # notification; whichever comes first decides.
    faults = dict(zip(sorted(servers), [
        ('power_off', ('instance.power_off.end', 'vm_state stopped')),
        ('pause', ('instance.pause.end', 'vm_state paused')),
        ('shutdown', ('instance.shutdown.end', 'vm_state stopped'))]))
    for path, (fault, _seen) in faults.items():
        assert admin.inject_fault(servers[path], fault).status_code == 200
    for path, (fault, seen) in faults.items():
        member = _wait_member(demo, name, path, 'UNHEALTHY', timeout=30)
        assert member['source'] == 'LIFECYCLE_EVENTS', member
        assert member['reason'].startswith('Nova notification'), member
        assert any(s in member['reason'] for s in seen), member


def test_poll_url_alone_sees_a_hang_nova_cannot(admin, demo, demo_nova,
                                                stacks):
    name, servers = _watched(demo, stacks, POLL_URL, 1)
    server_id = servers['workers/0']
    assert admin.inject_fault(server_id, 'hang').status_code == 200
    member = _wait_member(demo, name, 'workers/0', 'UNHEALTHY')
    assert member['source'] == 'NODE_STATUS_POLL_URL', member
    assert demo_nova.servers.get(server_id).status == 'ACTIVE'
    admin.inject_fault(server_id, 'reset')
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


def test_listener_workers_killed_are_replaced_and_events_still_seen(
        admin, demo, stacks):
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
    assert admin.inject_fault(servers['workers/0'],
                              'power_off').status_code == 200
    member = _wait_member(demo, name, 'workers/0', 'UNHEALTHY', timeout=30)
    assert member['source'] == 'LIFECYCLE_EVENTS', member


def test_polling_backstop_sees_failures_with_the_listener_off(
        admin, demo, stacks, tmp_path):
    """Both modes, but the engine listens to no notification topic."""
    engines.localcloud('stop', 'heat-health-engine')
    try:
        with engines.own_engine(demo, tmp_path, '[heat_health]\n'
                                'nova_versioned_topic =\n'
                                'nova_legacy_topic =\n') as log:
            name, servers = _watched(
                demo, stacks, EVENTS + [{'type': 'NODE_STATUS_POLLING'}], 2)
            assert 'LIFECYCLE_EVENTS sees nothing' in log.read_text()
            faults = {'workers/0': ('vanish', ('DELETED', "Not in Nova")),
                      'workers/1': ('crash_to_error', ('ERROR',))}
            for path, (fault, _reasons) in faults.items():
                assert admin.inject_fault(servers[path],
                                          fault).status_code == 200
            for path, (fault, reasons) in faults.items():
                member = _wait_member(demo, name, path, 'UNHEALTHY',
                                      timeout=30)
                assert member['source'] == 'NODE_STATUS_POLLING', member
                assert any(r in member['reason'] for r in reasons), member
    finally:
        engines.localcloud('up')
