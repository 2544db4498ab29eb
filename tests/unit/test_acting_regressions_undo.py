"""Regressions of the acting core: what recovery left, and its bounds.

As ``test_acting_regressions``: each drives the real tracker, recovery
loop, drainer and replacer through the simulation world and asserts what
the stack's owner would notice.
"""

from tests.simulation import heat_double
from tests.unit import test_acting_regressions as acting

# Deadlines a verification waits for a silent host (HOST_WAIT_DEADLINES).
HOST_WAIT_DEADLINES = 10
RECREATE_ONLY = {'recovery': dict(acting.NO_JITTER,
                                  actions=[{'name': 'RECREATE'}])}


def test_a_users_reset_racing_recoverys_mark_leaves_no_check_failed(
        make_world):
    """The user's clear, recovery's mark, then the user's reset.

    The user fixed the server and marked it healthy; recovery's RECREATE
    marked it between the two writes of that reset. Once the server is
    seen healthy the mark is cleared: the user's next update keeps it.
    """
    w = make_world(servers=3, pool=False, policy=RECREATE_ONLY)
    engine = w.engines[0]
    acting._watching(w)
    server_id = w.server_id(0)
    acting._fails(w, 0)
    engine.recovery_pass()
    w.user_clears_mark(0)
    engine.run_steps()
    assert [m.physical_id for m in w.heat.marks
            if m.source == 'recovery'] == [server_id]
    w.user_resets_target(0)
    acting.healed_then_updated(w, 0, server_id)


def _drained_while_starting(w):
    """The first server fails: its member drained, START under way."""
    acting._watching(w)
    address = w.server(0).addresses[0]
    acting._fails(w, 0)
    acting._recovery_pass(w.engines[0])
    assert acting._nova(w, 0) == [('start', None)]
    assert w.weights()[address] == 0
    return address


def test_a_policy_deleted_while_a_member_is_drained_gives_its_weight_back(
        make_world):
    """The policy goes mid-recovery: the drained member serves again."""
    w = make_world(servers=3)
    address = _drained_while_starting(w)
    w.delete_policy()
    w.run(30)
    assert w.weights() == dict.fromkeys(w.weights(), 1)
    assert w.weights()[address] == 1


def test_a_server_no_longer_a_target_while_drained_gets_its_weight_back(
        make_world):
    """The policy's targets change mid-recovery: the member serves again.

    Its target row goes once the weight is back.
    """
    w = make_world(servers=3, nested=False)
    address = _drained_while_starting(w)
    w.set_targets(['server-1', 'server-2'])
    w.run(30)
    assert w.weights()[address] == 1
    assert [t.resource_name for t in w.targets()] == ['server-1',
                                                      'server-2']


def test_a_given_up_server_is_not_replaced_by_a_siblings_recreate(
        make_world):
    """Given up; then a sibling's host is forced down: RECREATE of it.

    The stack update that replaces the sibling leaves the given-up
    server alone: nothing more is done to it until it is healthy again.
    """
    w = make_world(servers=3, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, max_attempts=1,
        actions=[{'name': 'START'}, {'name': 'RECREATE'}])})
    acting._watching(w)
    given_up = w.server_id(0)
    acting._given_up(w, 0)
    sibling = [i for i in (1, 2) if w.host_of(i) != w.host_of(0)][0]
    old = w.server_id(sibling)
    w.host_forced_down(w.host_of(sibling))
    w.run_until(lambda: w.server_id(sibling) != old, seconds=180)
    w.run(heat_double.UPDATE_SECONDS + 5)
    assert [r.old for r in w.heat.replacements] == [old]
    assert w.server_id(0) == given_up
    assert w.state(0) == 'GAVE_UP'


def test_each_incident_has_a_webhook_delivery_of_its_own(make_world):
    """Healed by a webhook, healthy long enough, failed again: new id.

    Its attempts start again at 1: a receiver that drops deliveries it
    has seen would drop the second incident.
    """
    w = make_world(servers=3, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, healthy_reset=60, actions=[
            {'type': 'WEBHOOK', 'url': 'http://hooks.example/heal'}])})
    acting._watching(w)
    for _incident in range(2):
        w.break_server(0, 'SHUTOFF')
        w.run_until(lambda: w.state(0) != 'HEALTHY')
        w.run_until(lambda: w.state(0) == 'HEALTHY' and
                    acting._row(w, 0).attempts == 0, seconds=180)
    deliveries = [p.delivery for p in w.hooks.posted]
    assert len(deliveries) == 2 and None not in deliveries
    assert deliveries[0] != deliveries[1]


def test_a_reboot_whose_host_comes_back_is_verified_afresh(make_world):
    """The host of a rebooting server stops, then reports again.

    Nova's restart handling finished the reboot before the host reported;
    the recovery loop's pass comes before the detectors' next look. The
    deadline that passed while the host was silent does not escalate a
    server nobody has seen since: its verification starts afresh, and
    it is HEALTHY with no next rung.
    """
    w, host = acting._hard_rebooting(make_world)
    w.nova.break_server(w.server_id(0), 'STUCK', task='rebooting_hard')
    w.advance(1)
    w.host_stops(host)
    w.run(2 * acting.VERIFY)
    w.advance(acting.VERIFY)
    w.host_back(host)
    acting._recovery_pass(w.engines[0])
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert not [r for r in acting._timeline(w, 'UNHEALTHY')
                if r.startswith('escalated')], acting._timeline(
                    w, 'UNHEALTHY')
    assert acting._nova(w) == [('reboot', 'HARD')]


def test_a_verification_waits_for_a_silent_host_within_a_bound(make_world):
    """The host never reports again: the attempt ends, said once.

    The wait is said in the timeline once, not at every deadline; after
    HOST_WAIT_DEADLINES deadlines the attempt ends with its reason, and
    nothing more is sent while the host stays silent.
    """
    w, host = acting._hard_rebooting(make_world)
    w.advance(1)
    w.host_stops(host)
    w.run((HOST_WAIT_DEADLINES + 2) * acting.VERIFY)
    waits = [r for r in acting._timeline(w, 'VERIFYING')
             if r.startswith('verification waits')]
    assert len(waits) == 1, waits
    ended = [r for r in acting._timeline(w, 'UNHEALTHY')
             if 'did not report within' in r]
    assert ended and ended[0].startswith(
        'recovery failed: nova-compute on host %s did not report within '
        '%ss' % (host, HOST_WAIT_DEADLINES * acting.VERIFY)), ended
    assert acting._row(w, 0).state == 'UNHEALTHY'
    assert acting._nova(w) == [('reboot', 'HARD')]


def test_observe_gives_back_the_weight_of_a_verification_that_fails(
        make_world):
    """OBSERVE switched on while a START is verified and does not heal.

    The attempt's deadline ends it as in HEAL (no next rung is started),
    and what it drained is given back: the member does not stay at
    weight 0 for as long as the policy observes.
    """
    w = make_world(servers=3)
    address = _drained_while_starting(w)
    w.set_mode('OBSERVE')
    acting._stops_again(w, 0)
    w.run(60)
    assert w.weights()[address] == 1
    assert acting._nova(w, 0) == [('start', None)]


def test_a_users_reset_gives_a_drained_member_its_weight_back(make_world):
    """Marked healthy while recovery holds its member at weight 0.

    The user's word ends the recovery: its member serves again at once,
    not only once a detector has seen the server healthy.
    """
    w = make_world(servers=3)
    engine = w.engines[0]
    address = _drained_while_starting(w)
    w.mark_healthy(0)
    engine.tick()
    for _pass in range(3):
        acting._recovery_pass(engine)
    assert acting._row(w, 0).state == 'NO_DATA'
    assert w.weights()[address] == 1
