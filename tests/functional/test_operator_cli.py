"""The operators' commands, through the real ``openstack`` CLI.

``openstack stack health show|event list|pause|resume`` as the demo user
on a stack healed by a policy, on real Nova (a guest shuts off behind its
back), with a second engine sharing the policies where the local
deployment is; what a reader, another project and a typo get, on any
deployment.
"""

import json
import signal
import subprocess
import time

import pytest

from tests.functional import cloud
from tests.functional import engines
from tests.functional import healing as h
from tests.functional import server_faults as faults

EVENTS_ONLY = [{'type': 'LIFECYCLE_EVENTS'}]


@pytest.fixture(scope='module')
def second_engine(demo, tmp_path_factory):
    """A second engine: the policies are shared."""
    with engines.peer(demo, tmp_path_factory, 'operator-peer') as engine:
        yield engine


def _health(user, *args):
    return user.json('stack', 'health', *args)


def _healed(demo, admin, stack, path):
    """Shut the guest at ``path`` off and wait until it is healed."""
    server_id = h.targets(demo, stack)[path]['server_id']
    faults.break_server(admin, server_id, 'power_off')
    demo.wait_for(lambda: h.all_healthy(demo, stack, 2) if h.started(
        h.events(demo, stack), server_id) else None,
        '%s healed' % path, timeout=90)
    return server_id


@pytest.mark.real_nova
@pytest.mark.usefixtures('second_engine')
def test_show_and_event_list_tell_the_incident(demo, admin, stacks):
    stack, _ = h.heal_stack(stacks, demo, 'cli-show', count=2,
                            modes=EVENTS_ONLY)
    server_id = _healed(demo, admin, stack, 'workers/0')

    shown = _health(demo, 'show', stack['stack_name'])
    assert (shown['stack'], shown['stack_id']) == (stack['stack_name'],
                                                   stack['id'])
    policy, = shown['policies']
    assert policy['resource_name'] == 'health'
    assert policy['engine_id'] and policy['paused'] is None
    assert policy['counts'] == {'HEALTHY': 2}
    servers = {s['path']: s for s in shown['servers']}
    assert set(servers) == {'workers/0', 'workers/1'}
    assert servers['workers/0']['server_id'] == server_id
    assert servers['workers/0']['last_observation']['source'] == \
        'LIFECYCLE_EVENTS'
    table = demo.run('stack', 'health', 'show', stack['id']).stdout
    assert 'workers/0' in table and server_id in table

    events = _health(demo, 'event', 'list', stack['stack_name'])
    mine = [(e['From'], e['Event']) for e in events
            if e['Server'] == 'workers/0']
    # Oldest first: detected, acted on, verified, healthy again.
    assert mine[-4:] == [('HEALTHY', 'UNHEALTHY'),
                         ('UNHEALTHY', 'RECOVERING'),
                         ('RECOVERING', 'VERIFYING'),
                         ('VERIFYING', 'HEALTHY')], mine
    recovering = [e for e in events if e['Event'] == 'RECOVERING']
    assert recovering[-1]['Reason'].startswith('START'), recovering
    assert [e['Time'] for e in events] == sorted(e['Time'] for e in events)
    newest = _health(demo, 'event', 'list', '--limit', '1',
                     stack['stack_name'])
    assert newest == events[-1:]


@pytest.mark.real_nova
@pytest.mark.usefixtures('second_engine')
def test_follow_prints_a_step_as_it_happens(demo, admin, stacks):
    stack, targets = h.heal_stack(stacks, demo, 'cli-follow', count=2,
                                  modes=EVENTS_ONLY)
    follow = subprocess.Popen(
        [cloud.OPENSTACK, 'stack', 'health', 'event', 'list', '--follow',
         '--interval', '1', '-f', 'json', stack['stack_name']],
        env=demo.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True)
    try:
        time.sleep(5)   # the command is up and has printed the past
        server_id = targets['workers/1']['server_id']
        faults.break_server(admin, server_id, 'power_off')
        deadline = time.time() + 60
        seen = []
        while time.time() < deadline:
            line = follow.stdout.readline()
            assert line, 'the follow ended: %s' % follow.stderr.read()
            seen.append(json.loads(line))
            if (seen[-1]['Server'], seen[-1]['Event']) == ('workers/1',
                                                           'UNHEALTHY'):
                break
        else:
            pytest.fail('no UNHEALTHY step printed within 60 s: %s' % seen)
        assert follow.poll() is None, 'the follow stopped by itself'
    finally:
        follow.send_signal(signal.SIGINT)
        try:
            follow.wait(timeout=15)
        except subprocess.TimeoutExpired:
            follow.kill()
            raise
    assert follow.returncode == 0
    assert 'Traceback' not in follow.stderr.read()


@pytest.mark.real_nova
@pytest.mark.usefixtures('second_engine')
def test_pause_holds_healing_and_resume_heals(demo, admin, stacks,
                                              demo_nova):
    stack, targets = h.heal_stack(stacks, demo, 'cli-pause', count=2,
                                  modes=EVENTS_ONLY)
    name = stack['stack_name']
    paused = _health(demo, 'pause', name, '--reason', 'kernel upgrade')
    assert [(p['Policy'], p['Paused'], p['By'], p['Reason'])
            for p in paused] == [('health', True, demo.username,
                                  'kernel upgrade')]
    shown = _health(demo, 'show', name)
    assert shown['policies'][0]['paused']['by'] == demo.username

    server_id = targets['workers/0']['server_id']
    faults.break_server(admin, server_id, 'power_off')
    demo.wait_for(lambda: h.targets(demo, stack)['workers/0']['state'] ==
                  'UNHEALTHY', 'the shut off guest detected while paused',
                  timeout=30)
    held = demo.wait_for(
        lambda: [e for e in _health(demo, 'event', 'list', name)
                 if e['Event'] == 'SUPPRESSED'],
        'the recovery held', timeout=30)
    assert 'healing paused by %s: kernel upgrade' % demo.username in (
        held[-1]['Reason'])
    # The hold is a recovery pass's decision; three more passes (one a
    # second) would have started the server had the pause not held.
    time.sleep(3)
    assert not h.started(h.events(demo, stack), server_id)
    # Nova stopped it on its own; nobody asked for anything.
    cloud.wait_server_status(demo_nova, server_id, 'SHUTOFF')
    assert not faults.requested(admin, server_id)

    resumed = _health(demo, 'resume', name)
    assert [(p['Policy'], p['Paused']) for p in resumed] == [
        ('health', False)]
    demo.wait_for(lambda: h.all_healthy(demo, stack, 2),
                  'healed after the resume', timeout=60)
    assert demo_nova.servers.get(server_id).status == 'ACTIVE'
    assert faults.requested(admin, server_id) == ['start']
    steps = [e['Event'] for e in _health(demo, 'event', 'list', name)]
    assert steps.index('PAUSED') < steps.index('SUPPRESSED') < \
        steps.index('RESUMED') < steps.index('RECOVERING'), steps


def test_who_may_do_what(demo, reader, alt_demo, stacks):
    stack, _ = h.heal_stack(stacks, demo, 'cli-rights', count=1,
                            modes=EVENTS_ONLY)
    name = stack['stack_name']
    assert _health(reader, 'show', name)['policies']
    errors = []

    def fails(user, *args):
        errors.append(user.fails('stack', 'health', *args))
        return errors[-1]

    error = fails(reader, 'pause', name)
    assert 'health:pause' in error and '403' in error, error
    assert _health(demo, 'show', name)['policies'][0]['paused'] is None
    # Another project: its id and its name mean nothing there, as in Heat.
    error = fails(alt_demo, 'show', stack['id'])
    assert 'could not be found' in error and '404' in error, error
    assert '404' in fails(alt_demo, 'pause', stack['id'])
    assert '404' in fails(alt_demo, 'show', name)
    error = fails(demo, 'show', 'no-such-stack')
    assert 'could not be found' in error and '404' in error, error
    error = fails(demo, 'pause', name, '--policy', 'nope')
    assert 'nope' in error and '404' in error, error
    assert not [e for e in errors if 'Traceback' in e], errors
