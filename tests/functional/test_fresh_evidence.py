"""Every action rests on fresh evidence and nobody's intent.

Two engines run, as in a deployment. A decision held back by an operator's
pause is not carried out once its server has healed; a server its user
stopped through Nova is left stopped, and watched again once the user
starts it; a poll URL the engine may not fetch has no vote, and is shown
as blind. The same user stop and blind poll URL run on real Nova too.
"""

import contextlib
import os
import signal

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import load_balancing as lb
from tests.functional import server_faults as faults

EVENTS_AND_STATUS = [{'type': 'LIFECYCLE_EVENTS'},
                     {'type': 'NODE_STATUS_POLLING'}]
# A poll URL on each server's own address: the local deployment lets the
# engine fetch only its fakecloud's health port, so every check of it is
# refused (as on a tenant network the control plane cannot reach).
UNREACHABLE_URL = {'type': 'NODE_STATUS_POLL_URL', 'options': {
    'poll_url': 'http://{ip}:80/health', 'poll_url_retry_limit': 0,
    'poll_url_timeout': 1}}
SOFT_REBOOT = {'name': 'REBOOT', 'params': {'type': 'SOFT'}}


@pytest.fixture
def peer(demo, tmp_path):
    """The second engine: either may own the policy."""
    engine = engines.Engine(tmp_path, 'evidence-peer').start(demo)
    yield engine
    engine.kill()


@contextlib.contextmanager
def _octavia_frozen():
    """Octavia's worker stopped: every change stays PENDING_UPDATE."""
    if not h.local_deployment():
        pytest.skip("stops the local deployment's octavia-worker")
    worker = engines.deployment_pid('octavia-worker')
    os.killpg(worker, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(worker, signal.SIGCONT)


def _target(demo, stack, path):
    return h.targets(demo, stack)[path]


def _stage(demo, stack, path):
    return (_target(demo, stack, path).get('recovery') or {}).get('stage')


def _rows(admin, demo, stack, server_id, state):
    """Reasons of the timeline's rows of the server into ``state``."""
    return [e['reason'] for e in h.events(demo, stack)
            if e['server_id'] == server_id and e['new_state'] == state]


@pytest.mark.fakecloud
def test_a_paused_decision_is_abandoned_once_its_server_healed(
        demo, admin, admin_nova, stacks, peer):
    octavia = lb.octavia(demo)
    stack, targets = h.heal_stack(
        stacks, demo, 'evidence-paused', count=2, template='lb_heal.yaml',
        modes=h.POLL_URL, recovery={'actions': [SOFT_REBOOT]})
    name = stack['stack_name']
    _lb_id, pool_id = lb.lb_ids(demo, name)
    demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                     pool_id, 2), 'two members')
    path = sorted(targets)[0]
    victim = targets[path]['server_id']
    with _octavia_frozen():
        faults.break_server(admin, victim, 'hang')
        # Decided, and waiting for its drain: the load balancer is busy.
        demo.wait_for(lambda: _stage(demo, stack, path) == 'intent',
                      'the REBOOT decided, its drain waiting', timeout=60,
                      interval=0.2)
        demo.run('stack', 'health', 'pause', name, '--reason',
                 'maintenance')
        faults.break_server(admin, victim, 'reset')
    # Held by the pause, its decision stored.
    assert (_target(demo, stack, path)['state'],
            _stage(demo, stack, path)) == ('RECOVERING', 'intent')
    demo.run('stack', 'health', 'resume', name)
    healthy = demo.wait_for(
        lambda: (lambda t: t if t['state'] == 'HEALTHY' else None)(
            _target(demo, stack, path)),
        'the server HEALTHY again', timeout=90)
    assert healthy['server_id'] == victim
    assert 'reboot' not in [a.name for a in faults.actions(admin, victim)]
    abandoned = [r for r in _rows(admin, demo, stack, victim, 'HEALTHY')
                 if r.startswith('recovery abandoned before REBOOT SOFT')]
    assert abandoned, h.events(demo, stack)
    weights = h.last_seen(lambda: lb.weights(octavia, pool_id),
                          lambda w: set(w.values()) == {1})
    assert set(weights.values()) == {1}, weights


def _power_off_healed(demo, admin, stack, path, victim):
    """The guest powered off behind Nova's back; the same server healed."""
    faults.break_server(admin, victim, 'power_off')
    healed = demo.wait_for(
        lambda: h.all_healthy(demo, stack, 2) if h.started(
            h.events(demo, stack), victim) else None,
        'the power-off healed', timeout=120)
    assert healed[path]['server_id'] == victim


def _user_stop_is_respected(demo, admin, stacks, prefix):
    stack, targets = h.heal_stack(stacks, demo, prefix, count=2,
                                  modes=EVENTS_AND_STATUS)
    path = 'workers/0'
    victim = targets[path]['server_id']
    demo.run('server', 'stop', victim)
    suppressed = demo.wait_for(
        lambda: (lambda t: t if t['state'] == 'SUPPRESSED' else None)(
            _target(demo, stack, path)),
        'the stop seen as the user\'s', timeout=90)
    assert suppressed['reason'].startswith('stopped by user demo at '), (
        suppressed)
    shown = demo.run('stack', 'health', 'show', stack['id']).stdout
    assert 'SUPPRESSED' in shown and 'stopped by user demo' in shown, shown
    # Left stopped: no START, however long.
    h.last_seen(lambda: _target(demo, stack, path)['state'],
                lambda state: state != 'SUPPRESSED', timeout=20)
    assert _target(demo, stack, path)['state'] == 'SUPPRESSED'
    assert not h.started(h.events(demo, stack), victim)
    demo.run('server', 'start', victim)
    demo.wait_for(lambda: _target(demo, stack, path)['state'] == 'HEALTHY',
                  'watched again once started', timeout=90)
    # A power-off behind Nova's back is healed as ever.
    _power_off_healed(demo, admin, stack, path, victim)
    started = h.started(h.events(demo, stack), victim)
    assert len(started) == 1 and started[0]['reason'].startswith(
        'START'), started


@pytest.mark.fakecloud
def test_a_server_its_user_stopped_is_left_stopped(demo, admin, stacks,
                                                   peer):
    _user_stop_is_respected(demo, admin, stacks, 'evidence-stop')


@pytest.mark.real_nova
def test_a_server_its_user_stopped_is_left_stopped_on_real_nova(
        demo, admin, stacks, peer):
    _user_stop_is_respected(demo, admin, stacks, 'evidence-stop-real')


def _blind_url_has_no_vote(demo, admin, stacks, prefix):
    stack, _targets = h.heal_stack(
        stacks, demo, prefix, count=2,
        modes=EVENTS_AND_STATUS + [UNREACHABLE_URL])
    policy = demo.wait_for(
        lambda: (lambda p: p if p.get('blind_modes') else None)(
            h.policy(demo, stack)), 'the blind poll URL reported')
    blind = policy['blind_modes']['NODE_STATUS_POLL_URL']
    assert blind['count'] == 2, blind
    assert 'poll_url_allowed_networks' in blind['reason'], blind
    shown = demo.run('stack', 'health', 'show', stack['id']).stdout
    assert 'NODE_STATUS_POLL_URL blind for 2 servers' in shown, shown
    path = 'workers/0'
    victim = h.targets(demo, stack)[path]['server_id']
    _power_off_healed(demo, admin, stack, path, victim)
    # Stays so: no next rung after the verification.
    h.last_seen(lambda: h.started(h.events(demo, stack), victim),
                lambda started: len(started) > 1, timeout=20)
    started = h.started(h.events(demo, stack), victim)
    assert [e['reason'].split()[0] for e in started] == ['START'], started
    assert not [r for r in _rows(admin, demo, stack, victim, 'UNHEALTHY')
                if r.startswith('escalated')]


@pytest.mark.fakecloud
def test_a_poll_url_the_engine_may_not_fetch_has_no_vote(demo, admin,
                                                         stacks, peer):
    _blind_url_has_no_vote(demo, admin, stacks, 'evidence-blind')


@pytest.mark.real_nova
def test_a_poll_url_the_engine_may_not_fetch_has_no_vote_on_real_nova(
        demo, admin, stacks, peer):
    _blind_url_has_no_vote(demo, admin, stacks, 'evidence-blind-real')


@pytest.mark.fakecloud
def test_a_recreated_servers_console_and_fault_stay_with_the_incident(
        demo, admin, stacks, peer):
    stack, targets = h.heal_stack(stacks, demo, 'evidence-crash', count=2,
                                  recovery=h.RECREATE_ONLY)
    path = 'workers/0'
    victim = targets[path]['server_id']
    faults.break_server(admin, victim, 'error')
    h.wait_replaced(demo, stack, path, victim, 2)
    kept = [e for e in h.events(demo, stack)
            if e['server_id'] == victim and e['new_state'] == 'EVIDENCE']
    assert kept, h.events(demo, stack)
    assert 'before RECREATE' in kept[0]['reason'], kept[0]
    shown = demo.json('stack', 'health', 'event', 'show', stack['id'],
                      str(kept[0]['id']))
    detail = shown['detail']
    # What the server left, read before it was replaced.
    assert 'fakecloud fault: crash_to_error' in detail['console'], detail
    assert 'crash_to_error' in detail['fault']['message'], detail
    assert detail['fault']['code'] == 500, detail
    assert [a['action'] for a in detail['instance_actions']][-1] == (
        'create'), detail
