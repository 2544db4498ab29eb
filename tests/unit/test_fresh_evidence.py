"""Every action rests on fresh evidence and nobody's intent.

Each test drives the real tracker, recovery loop, drainer and replacer
through the simulation world, and asserts what the stack's owner would
notice: a healthy server rebooted after a pause, a member left drained
after a switch to OBSERVE, a server its user stopped started again, a
detection mode that cannot see holding a healed server until the next
rung.
"""

import copy

from tests.simulation import poll_url_double
from tests.unit import test_acting_regressions as acting

_watching = acting._watching
_fails = acting._fails
_nova = acting._nova
_row = acting._row
_timeline = acting._timeline
HOUR = 600


def _recovery_mode(w, mode):
    """The template's recovery mode changed, and the policy registered."""
    found = w.policies[0]
    found.spec.setdefault('recovery', {})['mode'] = mode
    w.db.real['policy_create_or_update']({
        'id': found.id, 'spec': copy.deepcopy(found.spec),
        'enabled': found.spec.get('enabled', True)})
    w.note('%s recovery mode: %s' % (found.id, mode))


def test_a_decision_paused_while_its_server_heals_is_abandoned(make_world):
    """Paused while its drain waits, healed by hand, resumed ten minutes on.

    The stored REBOOT HARD is not sent to a server that runs again: the
    attempt is abandoned with a timeline row saying why, its member gets
    its weight back, and its attempt is not counted.
    """
    w = make_world(servers=3, pool=True, weight=5)
    _watching(w)
    address = w.server(0).addresses[0]
    w.break_server(0, 'VANISHED')
    w.advance(2)
    w.engines[0].tick()
    assert w.state(0) == 'UNHEALTHY'
    w.octavia.hold('lb-p0', 30)
    acting._recovery_pass(w.engines[0])
    assert (w.state(0), _row(w, 0).recovery['stage']) == (
        'RECOVERING', 'intent')
    w.pause(reason='maintenance')
    w.heal_server(0)
    w.run(HOUR)
    assert (w.state(0), _nova(w)) == ('RECOVERING', [])
    w.unpause()
    w.run(60)
    assert _nova(w) == []
    assert w.state(0) == 'HEALTHY'
    abandoned = [r for r in _timeline(w, 'HEALTHY')
                 if r.startswith('recovery abandoned before REBOOT HARD')]
    assert abandoned, _timeline(w, 'HEALTHY')
    assert w.weights()[address] == 5
    assert _row(w, 0).attempts == 0


def test_switching_to_observe_mid_recreate_gives_the_member_back(make_world):
    """A RECREATE drained its member; the policy now only observes.

    Its attempt is abandoned (nothing of it under way in Nova or Heat):
    the member gets its weight back at once, nothing is marked, and the
    server is shown UNHEALTHY as observed, not left RECOVERING.
    """
    w = make_world(servers=3, pool=True, weight=5, policy={'recovery': {
        'actions': [{'name': 'RECREATE'}]}})
    _watching(w)
    address = w.server(0).addresses[0]
    _fails(w, 0, 'ERROR')
    w.octavia.slow_next(40)
    acting._recovery_pass(w.engines[0])
    assert w.weights()[address] == 0
    assert w.state(0) == 'RECOVERING'
    _recovery_mode(w, 'OBSERVE')
    w.run(60)
    assert w.state(0) == 'UNHEALTHY', _row(w, 0).state_reason
    assert w.weights()[address] == 5
    assert w.heat.marks == []
    assert w.heat.updates == []
    assert 'recovery abandoned: the policy only observes' in _timeline(
        w, 'UNHEALTHY')


def test_a_server_its_user_paused_is_suppressed_not_unpaused(make_world):
    """The user paused the server through Nova: no UNPAUSE.

    It is SUPPRESSED, with who asked and when, until the user unpauses
    it; then it is watched again, and a later fault behind Nova's back
    is healed.
    """
    w = make_world(servers=3, pool=False)
    _watching(w)
    w.break_server(0, 'PAUSED')
    w.run(60)
    assert _nova(w, 0) == []
    row = _row(w, 0)
    assert row.state == 'SUPPRESSED'
    assert row.state_reason.startswith('paused by user demo at ')
    w.heal_server(0)
    w.run_until(lambda: w.state(0) == 'HEALTHY', 60)
    w.break_server(0, 'SHUTOFF')
    w.run_until(lambda: w.state(0) == 'HEALTHY' and _nova(w, 0), 120)
    assert _nova(w, 0) == [('start', None)]


def test_a_lost_guest_its_user_asked_to_stop_is_left_alone(make_world):
    """Nova could not stop it (its guest is gone) and shows it ACTIVE.

    The user still meant it not to run: no REBOOT HARD, no RECREATE.
    """
    w = make_world(servers=3, pool=False)
    _watching(w)
    w.break_server(0, 'VANISHED')
    w.user_nova('stop', 0)
    w.run(60)
    assert _nova(w, 0) == []
    assert _row(w, 0).state == 'SUPPRESSED'
    assert _row(w, 0).state_reason.startswith('stopped by user demo at ')


def test_a_stop_nova_made_itself_is_still_healed(make_world):
    """The guest shut down; Nova's power sync stopped it, with no user."""
    w = make_world(servers=3, pool=False)
    _watching(w)
    _fails(w, 0, 'SHUTOFF')
    w.run_until(lambda: w.state(0) == 'HEALTHY', 120)
    assert _nova(w, 0) == [('start', None)]


def test_a_user_pause_is_healed_where_the_policy_says_so(make_world):
    """respect_user_actions: false heals whatever paused the server."""
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'respect_user_actions': False}})
    _watching(w)
    w.break_server(0, 'PAUSED')
    w.run_until(lambda: w.state(0) == 'HEALTHY' and _nova(w, 0), 120)
    assert _nova(w, 0) == [('unpause', None)]


def test_a_poll_url_the_engine_may_not_fetch_holds_no_verification(
        make_world):
    """Nova's status and a poll URL on an address the rules refuse.

    The server is powered off behind Nova's back: one START heals it and
    it is HEALTHY once Nova shows it running; the blind poll URL does not
    keep it VERIFYING until its deadline, and no next rung is tried.
    """
    w = make_world(servers=3, pool=False, policy={'detection': {
        'interval': 5, 'node_update_timeout': 20,
        'detection_modes': [
            {'type': 'NODE_STATUS_POLLING', 'options': {}},
            {'type': 'NODE_STATUS_POLL_URL',
             'options': {'poll_url': poll_url_double.URL}}]}})
    for index in range(3):
        w.urls.refuse(w.policies[0].id, w.server_id(index))
    _watching(w)
    _fails(w, 0, 'SHUTOFF')
    w.run_until(lambda: w.state(0) == 'HEALTHY', 60)
    w.run(60)
    assert _nova(w, 0) == [('start', None)]
    assert not [r for r in _timeline(w, 'UNHEALTHY')
                if r.startswith('escalated')]
