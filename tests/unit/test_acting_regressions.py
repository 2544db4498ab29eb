"""Regressions of the acting core, each replayed in the simulation world.

One test per defect once found in the acting core: each drives the real
tracker, recovery loop, drainer and replacer through the world step by
step, and asserts what the stack's owner would notice: a Nova action sent
twice, a member left at weight 0, a healthy server replaced or rebooted,
a brake that never ends, a timeline that tells what did not happen.
"""


from oslo_config import cfg

from heat_health.policy import observation as obs
from tests.simulation import database
from tests.simulation import faults
from tests.simulation import heat_double
from tests.simulation import nova_double
from tests.simulation import world as world_mod

# The world's node_update_timeout: the grace after a create or update,
# and the time an action is given to heal before the next rung.
GRACE = VERIFY = 20
NO_JITTER = {'backoff_jitter': 0}


# Driving the world


def _watching(w):
    """Every engine ticks (the first claims the policy); grace over."""
    for engine in w.engines:
        engine.tick()
    w.advance(GRACE + 1)


def _fails(w, index, how='SHUTOFF', engine=0):
    """The server breaks; the engine's next tick stores UNHEALTHY."""
    w.break_server(index, how)
    w.advance(2)
    w.engines[engine].tick()
    assert w.state(index) == 'UNHEALTHY'


def _failed_with_back_off(make_world, seconds):
    """A world whose first server failed; back-off of ``seconds``."""
    w = make_world(servers=3, pool=False, policy={'recovery': dict(
        NO_JITTER, backoff_initial=seconds)})
    _watching(w)
    _fails(w, 0)
    return w


def _recovery_pass(engine):
    """One pass of the engine's recovery loop, its steps carried out."""
    engine.recovery_pass()
    engine.run_steps()


def _stops_again(w, index):
    """START did not heal it: the guest shuts down again once started."""
    w.advance(4)
    w.break_server(index, 'SHUTOFF')


def _given_up(w, index, max_attempts=1):
    """The server stops, locked: Nova refuses every action; given up."""
    w.lock_server(index)
    w.break_server(index, 'SHUTOFF')
    w.run_until(lambda: w.state(index) == 'GAVE_UP')
    assert _row(w, index).attempts == max_attempts


def _taken_over(w, engine=1):
    """The owner's lease runs out; the other engine takes the policy."""
    w.advance(w.lease_seconds + 1)
    w.engines[engine].tick()
    assert w.owner()[0] == w.engines[engine].id


def _slow_drain(w, meanwhile):
    """Octavia is slow with recovery's first weight change.

    ``meanwhile()`` happens while the request is on its way.
    """
    apply = w.octavia.apply
    pending = [meanwhile]

    def slow(pool_id, members, actor, *args, **kwargs):
        if actor == 'recovery' and pending:
            pending.pop()()
        return apply(pool_id, members, actor, *args, **kwargs)
    w.octavia.apply = slow


def _seen(w, index, verdict, reason, source=obs.LIFECYCLE_EVENTS,
          engine=0):
    """A detector's verdict on the server reaches the engine's tracker.

    A Nova notification (by default) or the server's health URL.
    """
    w.engines[engine].tracker.observe(obs.Observation(
        w.server_id(index), verdict, reason, source, w.clock.now()))


# What a user sees


def _nova(w, index=None):
    """[(action, detail)] Nova accepted from recovery (of one server)."""
    server_id = None if index is None else w.server_id(index)
    return [(a.action, a.detail) for a in w.accepted()
            if server_id in (None, a.server_id)]


def _row(w, index):
    """The stored target of the index-th place (the report's line)."""
    place = w.places()[index]
    return [t for t in w.targets()
            if (t.stack_id, t.resource_name) == place][0]


def _braked(w):
    """Why the policy is braked, as stored and reported, or None."""
    return w.db.real['policy_get'](w.policies[0].id).braked


def _timeline(w, new_state):
    """Reasons of the policy's timeline rows of that kind, oldest first."""
    rows = w.db.real['event_get_recent']([w.policies[0].id], limit=500)
    return [r.reason for r in reversed(rows) if r.new_state == new_state]


def healed_then_updated(w, index, server_id):
    """Healed by itself, then a user's update: the server is kept."""
    w.heal_server(index)
    w.run_until(lambda: w.state(index) == 'HEALTHY')
    w.run(5)
    w.user_update()
    w.run(heat_double.UPDATE_SECONDS + 5)
    assert w.heat.replacements == []
    assert w.server_id(index) == server_id


# The regressions


def test_a_member_drained_by_attempt_one_gets_its_weight_back_after_two(
        make_world):
    """START drains the member and does not heal; REBOOT does: weight back.

    The second attempt finds the member at weight 0 and still gives back
    the weight the first one took away.
    """
    w = make_world(servers=3, pool=True, weight=5)
    _watching(w)
    address = w.server(0).addresses[0]
    _fails(w, 0)
    _recovery_pass(w.engines[0])
    assert w.weights()[address] == 0
    _stops_again(w, 0)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert _nova(w) == [('start', None), ('reboot', 'HARD')]
    w.run(10)
    assert w.weights()[address] == 5


def test_a_reboot_during_a_takeover_is_sent_once_and_the_weight_comes_back(
        make_world):
    """The owner stalls while draining and loses the policy: one REBOOT.

    The new owner carries the stored attempt on without rebooting again,
    and gives the member its weight back: the drain was recorded before
    the weight changed.
    """
    w = make_world(engines=2, servers=3, pool=True, weight=5)
    first, second = w.engines
    _watching(w)
    address = w.server(0).addresses[0]
    _fails(w, 0, 'ERROR')
    first.recovery_pass()
    _slow_drain(w, lambda: _taken_over(w))
    first.run_steps()
    _recovery_pass(second)
    assert _nova(w) == [('reboot', 'HARD')]
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    w.run(10)
    assert _nova(w) == [('reboot', 'HARD')]
    assert w.weights()[address] == 5


def test_a_lost_write_after_a_rebuild_neither_rebuilds_again_nor_escalates(
        make_world):
    """The VERIFYING write fails: the next pass verifies, never re-sends.

    A second REBUILD while the first runs would be refused (409), taken
    for a failure and escalated to RECREATE.
    """
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'actions': [{'name': 'REBUILD'}, {'name': 'RECREATE'}]}})
    engine = w.engines[0]
    _watching(w)
    server_id = w.server_id(0)
    _fails(w, 0, 'ERROR')
    engine.recovery_pass()
    # RECOVERING is stored, Nova accepts the REBUILD, VERIFYING is lost.
    w.db.faults.add('target_transition', database.db_error, skip=1)
    engine.run_steps()
    assert _nova(w) == [('rebuild', heat_double.IMAGE)]
    assert w.state(0) == 'RECOVERING'
    _recovery_pass(engine)
    assert _nova(w) == [('rebuild', heat_double.IMAGE)]
    assert w.state(0) == 'VERIFYING', _row(w, 0).state_reason
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert w.server_id(0) == server_id
    assert w.heat.replacements == []


def test_a_server_stuck_in_a_task_is_not_replaced_unless_recreate_allowed(
        make_world):
    """actions: [REBOOT]: a server stuck in a task is never replaced."""
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'actions': [{'name': 'REBOOT'}]}})
    _watching(w)
    server_id = w.server_id(0)
    w.break_server(0, 'STUCK', task='image_uploading')
    w.run_until(lambda: _row(w, 0).attempts)
    w.run(60)
    assert w.heat.marks == []
    assert w.heat.updates == []
    assert w.server_id(0) == server_id


def test_a_server_verifying_while_the_policy_is_disabled_is_not_escalated():
    """Disabled right after START, for however long: no next rung.

    The server, ACTIVE meanwhile, is HEALTHY once the policy is enabled
    again, whenever Nova's next full listing comes.
    """
    for disabled_for in range(VERIFY + 10, VERIFY + 60, 10):
        with world_mod.World(servers=3, pool=False) as w:
            _watching(w)
            _fails(w, 0)
            _recovery_pass(w.engines[0])
            assert w.state(0) == 'VERIFYING'
            w.set_enabled(False)
            w.run(disabled_for)
            assert w.state(0) == 'VERIFYING'
            assert w.server(0).status == 'ACTIVE'
            w.set_enabled(True)
            w.run_until(lambda: w.state(0) != 'VERIFYING', 60)
            assert (w.state(0), _nova(w)) == (
                'HEALTHY', [('start', None)]), (
                    disabled_for, _row(w, 0).state_reason)


def test_a_server_healed_after_give_up_is_not_replaced_by_the_next_update(
        make_world):
    """Given up, then healed by itself: no CHECK_FAILED is left.

    The user's next stack update leaves the healthy server alone.
    """
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'max_attempts': 1}})
    _watching(w)
    server_id = w.server_id(0)
    _given_up(w, 0)
    assert w.heat.marks == []
    w.lock_server(0, False)
    healed_then_updated(w, 0, server_id)


def test_max_concurrent_counts_a_start_still_under_way(make_world):
    """max_concurrent: 2: a server backing off waits while two recover.

    One START is done, the other still under way (its target UNHEALTHY
    until stored) when the third server's back-off ends: it waits.
    """
    w = make_world(servers=6, pool=False, policy={'recovery': dict(
        NO_JITTER, max_concurrent=2, backoff_initial=10)})
    engine = w.engines[0]
    _watching(w)
    # The third server's first START is refused: it backs off 10 s.
    w.lock_server(2)
    _fails(w, 2)
    _recovery_pass(engine)
    assert (w.state(2), _nova(w)) == ('UNHEALTHY', [])
    w.lock_server(2, False)
    w.advance(5)
    for index in (0, 1):
        w.break_server(index, 'SHUTOFF')
    w.advance(2)
    engine.tick()
    engine.recovery_pass()
    assert len(engine.steps) == 2
    engine.run_step(0)
    w.advance(4)
    engine.tick()
    _recovery_pass(engine)
    assert len(_nova(w)) == 2


def test_a_server_marked_healthy_by_its_user_gets_its_attempts_again(
        make_world):
    """Given up, fixed and marked healthy: its next failure is recovered.

    A notification that it runs again arrives before the engine re-reads
    its rows: the reset is not half-lost, no give-up at once.
    """
    w = make_world(servers=3, pool=False, policy={
        'detection': {'detection_modes': [
            {'type': obs.NODE_STATUS_POLLING},
            {'type': obs.LIFECYCLE_EVENTS}]},
        'recovery': dict(NO_JITTER, max_attempts=2)})
    _watching(w)
    server_id = w.server_id(0)
    _given_up(w, 0, max_attempts=2)
    w.lock_server(0, False)
    w.heal_server(0)
    w.mark_healthy(0)
    _seen(w, 0, obs.HEALTHY, 'compute.instance.power_on.end')
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    marks = len(w.heat.marks)
    w.break_server(0, 'SHUTOFF')
    w.run_until(lambda: w.state(0) not in ('HEALTHY', 'UNHEALTHY'))
    assert (w.state(0), _nova(w)) in [('RECOVERING', [('start', None)]),
                                      ('VERIFYING', [('start', None)])]
    assert len(w.heat.marks) == marks
    assert w.server_id(0) == server_id


def test_a_brake_stored_before_a_restart_is_released_once_its_cause_clears(
        make_world):
    """Three of four servers down: braked; the restarted engine releases."""
    w = make_world(servers=4, pool=False)
    engine = w.engines[0]
    _watching(w)
    for index in range(3):
        w.break_server(index, 'SHUTOFF')
    w.advance(2)
    engine.tick()
    engine.recovery_pass()
    assert _braked(w).startswith('3 of 4 targets are failing')
    engine.kill()
    engine.restart()
    for index in range(3):
        w.heal_server(index)
    w.run_until(lambda: all(w.state(i) == 'HEALTHY' for i in range(4)))
    w.run(5)
    assert _nova(w) == []
    assert _braked(w) is None


def test_servers_given_up_on_days_ago_do_not_brake_a_new_recovery(
        make_world):
    """Two of five given up two days ago; a third fails: it is started."""
    w = make_world(servers=5, pool=False, policy={'recovery': {
        'max_attempts': 1}})
    _watching(w)
    for index in (0, 1):
        _given_up(w, index)
    w.advance(2 * 24 * 3600)
    _fails(w, 2)
    w.run(5)
    assert _braked(w) is None
    assert _nova(w, 2) == [('start', None)]


def test_a_recreate_whose_update_timed_out_never_replaces_the_new_server(
        make_world):
    """heat-engine's answer is lost, the update runs: one replacement.

    The recovery loop's next passes come before the registry's next sync:
    the resource holds the new server, which is neither marked nor
    replaced.
    """
    w = make_world(servers=3, pool=False, policy={'recovery': dict(
        NO_JITTER, actions=[{'name': 'RECREATE'}])})
    engine = w.engines[0]
    _watching(w)
    old = w.server_id(0)
    _fails(w, 0, 'ERROR')
    w.heat.faults.add('update_target', heat_double.timeout,
                      phase=faults.AFTER)
    _recovery_pass(engine)
    for _second in range(heat_double.UPDATE_SECONDS + 5):
        w.advance(1)
        _recovery_pass(engine)
    new = w.server_id(0)
    assert [m.physical_id for m in w.heat.marks] == [old]
    assert [(r.old, r.new) for r in w.heat.replacements] == [(old, new)]
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert w.server_id(0) == new
    assert len(w.heat.replacements) == 1


def test_a_reboot_nova_refuses_on_an_active_server_fails_at_once(
        make_world):
    """The application fails on a locked server: REBOOT refused, said so.

    The attempt fails at once: the next rung follows after its back-off,
    not after verifying an action never taken.
    """
    w = make_world(servers=3, pool=False, policy={'detection': {
        'detection_modes': [{'type': obs.NODE_STATUS_POLLING},
                            {'type': obs.NODE_STATUS_POLL_URL}]}})
    _watching(w)
    w.lock_server(0)
    _seen(w, 0, obs.UNHEALTHY, 'health URL answered 503',
          obs.NODE_STATUS_POLL_URL)
    assert w.state(0) == 'UNHEALTHY'
    _recovery_pass(w.engines[0])
    assert _nova(w) == []
    assert w.state(0) == 'UNHEALTHY'
    assert 'REBOOT SOFT refused by Nova' in _row(w, 0).state_reason
    assert 'is locked' in _row(w, 0).state_reason


def test_back_off_spaces_the_next_attempt_after_the_last_one_ended(
        make_world):
    """After a START that did not heal, the REBOOT waits its back-off."""
    w = _failed_with_back_off(make_world, 10)
    _recovery_pass(w.engines[0])
    _stops_again(w, 0)
    w.run_until(lambda: len(w.accepted()) == 2)
    start, reboot = w.accepted()
    assert (start.action, reboot.action) == ('start', 'reboot')
    # VERIFY seconds to see that START failed, then 10 of back-off.
    assert (reboot.at - start.at).total_seconds() >= VERIFY + 10


def test_a_restore_by_an_engine_that_lost_the_policy_is_not_recorded(
        make_world):
    """The timeline says once that the member got its weight back.

    The old owner's write matched no row: it does not announce it; the
    new owner, finding it not done, restores and says so.
    """
    w = make_world(engines=2, servers=3, pool=True, weight=5)
    first = w.engines[0]
    _watching(w)
    address = w.server(0).addresses[0]
    _fails(w, 0)
    _recovery_pass(first)
    for _second in range(VERIFY):
        w.advance(1)
        first.tick()
        if w.state(0) == 'HEALTHY':
            break
    first.recovery_pass()
    assert first.steps == ['Restore %s' % w.server_id(0)]
    _taken_over(w)
    first.run_steps()
    w.run(10)
    assert w.weights()[address] == 5
    assert len(_timeline(w, 'RESTORED')) == 1, _timeline(w, 'RESTORED')


def test_a_server_that_heals_then_fails_again_waits_its_back_off(
        make_world):
    """Healed by a START, stopped again: the next START waits 10 s."""
    w = _failed_with_back_off(make_world, 10)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    healed = _row(w, 0).state_since
    w.advance(1)
    w.break_server(0, 'SHUTOFF')
    w.run_until(lambda: len(w.accepted()) == 2)
    first, second = w.accepted()
    assert (first.action, second.action) == ('start', 'start')
    assert (second.at - healed).total_seconds() >= 10


def test_a_server_someone_started_is_not_rebooted_on_a_stale_verdict(
        make_world):
    """Stopped, found UNHEALTHY; an operator starts it before news comes.

    Nova shows it ACTIVE and running when recovery is about to act on a
    verdict only Nova gave: no action, the detectors look again, and the
    server is HEALTHY. It was rebooted (the ladder's rung for an ACTIVE
    server), seen on real Nova after a brake let go.
    """
    w = make_world(servers=3, pool=False)
    _watching(w)
    _fails(w, 0)
    w.nova.client('user').servers.start(w.server_id(0))
    w.advance(nova_double.DURATIONS['start'] + 1)
    _recovery_pass(w.engines[0])
    assert _nova(w) == []
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    w.run(VERIFY)
    assert _nova(w) == []
    assert w.state(0) == 'HEALTHY'


# Compute hosts that stop reporting or are forced down


def _hard_rebooting(make_world):
    """A world whose first server's guest vanished: REBOOT HARD sent."""
    w = make_world(servers=3, pool=False)
    _watching(w)
    _fails(w, 0, 'VANISHED')
    _recovery_pass(w.engines[0])
    assert (w.state(0), _nova(w)) == ('VERIFYING', [('reboot', 'HARD')])
    return w, w.host_of(0)


def _healed_by_nova_once_back(w, host):
    """Still verifying; the host back, Nova's retry heals it, no more."""
    assert (w.state(0), w.server(0).status) == ('VERIFYING', 'HARD_REBOOT')
    w.host_back(host)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    w.run(VERIFY)
    assert _nova(w) == [('reboot', 'HARD')]
    assert w.state(0) == 'HEALTHY'


def test_a_reboot_whose_host_stops_mid_way_is_sent_once_and_verified_later(
        make_world):
    """The host of a rebooting server stops reporting past the deadline.

    The verification waits for the host instead of escalating: once its
    nova-compute is back, Nova's own restart handling finishes the reboot
    and the server is HEALTHY. A next rung sent meanwhile would be a
    second action on an operation Nova still holds.
    """
    w, host = _hard_rebooting(make_world)
    w.advance(1)
    w.host_stops(host)
    w.run(2 * VERIFY)
    _healed_by_nova_once_back(w, host)
    waits = [r for r in _timeline(w, 'VERIFYING')
             if r.startswith('verification waits: nova-compute on host %s '
                             'is not reporting' % host)]
    assert waits, _timeline(w, 'VERIFYING')


def test_a_reboot_whose_host_dies_unnoticed_is_not_escalated(make_world):
    """nova-compute dies mid-reboot; Nova shows it UP past the deadline.

    Nova counts a compute down only once its last report is
    service_down_time old. The hard reboot's task is still there at the
    deadline: the verification waits for it (up to the stuck deadline),
    by then Nova shows the host not reporting, and once it is back its
    restart handling finishes the reboot. Escalating at the deadline was
    a next rung over an operation Nova still held.
    """
    w, host = _hard_rebooting(make_world)
    # The reboot hangs in the hypervisor; then nova-compute dies.
    w.nova.break_server(w.server_id(0), 'STUCK', task='rebooting_hard')
    w.advance(VERIFY // 2)
    w.host_stops(host, unnoticed=VERIFY)
    w.run(2 * VERIFY)
    _healed_by_nova_once_back(w, host)
    waits = _timeline(w, 'VERIFYING')
    assert [r for r in waits if r.startswith(
        'verification waits: Nova is carrying out task rebooting_hard')], \
        waits
    assert not [r for r in _timeline(w, 'UNHEALTHY')
                if r.startswith('escalated')], _timeline(w, 'UNHEALTHY')


def test_a_hard_reboot_stuck_in_its_task_escalates_at_the_stuck_deadline(
        make_world):
    """A task that outlasts the stuck deadline is stuck: the next rung."""
    w, _host = _hard_rebooting(make_world)
    issued = w.clock.now()
    # The reboot never ends in the hypervisor.
    w.nova.break_server(w.server_id(0), 'STUCK', task='rebooting_hard')
    w.run_until(lambda: [r for r in _timeline(w, 'UNHEALTHY')
                         if r.startswith('escalated')])
    waited = (w.clock.now() - issued).total_seconds()
    # The stuck deadline is 30 s; the verification's deadlines come
    # every VERIFY seconds.
    assert 30 <= waited <= 30 + VERIFY + 2, waited


def test_a_failed_server_whose_host_stops_reporting_is_not_acted_on(
        make_world):
    """UNHEALTHY, then its host goes silent: nothing until it is back.

    Nova would queue the action for a nova-compute that may be restarting
    and will settle the server's state itself. Once the host reports
    again, the server (still stopped) is started, once.
    """
    w = make_world(servers=3, pool=False)
    _watching(w)
    host = w.host_of(0)
    _fails(w, 0)
    w.host_stops(host)
    # Past the second the engine believes its last listing of the hosts.
    w.advance(2)
    w.run(3 * VERIFY)
    assert _nova(w) == []
    assert w.state(0) == 'UNHEALTHY'
    assert ('not now: nova-compute on host %s is not reporting' % host) in [
        r.split(' (')[0] for r in _timeline(w, 'SUPPRESSED')], _timeline(
            w, 'SUPPRESSED')
    w.host_back(host)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert _nova(w) == [('start', None)]


def test_a_server_on_a_host_forced_down_is_recreated_without_a_stop(
        make_world):
    """Its host is fenced: replaced through Heat, no STOP sent.

    Fencing is on, yet no STOP is sent (the host is fenced, and a STOP
    there would never run); Heat makes one new server on the host that
    is up and Nova deletes the old one at once (its compute is down);
    the group keeps its size.
    """
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'fencing': ['COMPUTE']}})
    _watching(w)
    old = w.server_id(1)
    host = w.host_of(1)
    assert [w.host_of(i) for i in (0, 2)] != [host] * 2
    w.host_forced_down(host)
    w.run_until(lambda: w.server_id(1) != old and w.state(1) == 'HEALTHY',
                seconds=180)
    w.run(VERIFY)
    # Nothing but the old server's delete, which Nova does at once.
    assert [a for a, _detail in _nova(w) if a != 'delete'] == []
    assert [(r.old, r.outcome) for r in w.heat.replacements] == [
        (old, 'replaced')]
    assert len(w.places()) == 3
    assert [w.server(i).status for i in range(3)] == ['ACTIVE'] * 3
    assert w.host_of(1) != host
    assert w.nova.find(old).deleted
    assert [w.state(i) for i in range(3)] == ['HEALTHY'] * 3


def test_a_server_on_a_host_forced_down_is_evacuated_once(make_world):
    """EVACUATE in the ladder: Nova rebuilds it elsewhere, same server.

    Asked once, as heat-health-engine's own (admin) user; the server
    keeps its id and addresses, the load balancer's member with them, and
    Heat replaces nothing.
    """
    w = make_world(servers=3, pool=True, weight=5, policy={'recovery': {
        'actions': [{'name': 'EVACUATE'}, {'name': 'RECREATE'}]}})
    _watching(w)
    server_id, host = w.server_id(1), w.host_of(1)
    address = w.server(1).addresses[0]
    w.host_forced_down(host)
    w.run_until(lambda: w.state(1) == 'HEALTHY' and w.host_of(1) != host,
                seconds=180)
    w.run(VERIFY)
    assert _nova(w) == [('evacuate', None)]
    assert [a.stack_id for a in w.accepted()] == [w.policies[0].stack_id]
    assert w.server_id(1) == server_id
    assert w.heat.replacements == []
    assert w.weights()[address] == 5
    assert [w.state(i) for i in range(3)] == ['HEALTHY'] * 3


def test_evacuate_is_passed_over_for_a_server_whose_host_is_up(make_world):
    """Nova evacuates only from a host that is down: the next rung."""
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'actions': [{'name': 'EVACUATE'}, {'name': 'START'}]}})
    _watching(w)
    _fails(w, 0)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert _nova(w) == [('start', None)]


def test_an_evacuation_nova_refuses_escalates_to_recreate(make_world):
    """A paused server is not Nova's to evacuate (409): RECREATE next."""
    w = make_world(servers=3, pool=False, policy={'recovery': {
        'actions': [{'name': 'EVACUATE'}, {'name': 'RECREATE'}]}})
    _watching(w)
    old, host = w.server_id(1), w.host_of(1)
    w.break_server(1, 'PAUSED')
    w.host_forced_down(host)
    w.run_until(lambda: w.server_id(1) != old and w.state(1) == 'HEALTHY',
                seconds=180)
    assert [a.action for a in w.nova.refused] == ['evacuate']
    # RECREATE: the old server deleted (its host is down), a new one.
    assert _nova(w) == [('delete', None)]
    assert w.nova.find(old).deleted


def test_an_attempt_whose_host_stops_while_it_drains_waits_for_the_host(
        make_world):
    """Decided while its host reported, its drain carried over passes.

    The load balancer is busy, so the START waits for the drain; the
    server's host stops reporting meanwhile. The START then waits for the
    host too, the drain with it: sent on, it would be queued for a
    nova-compute that settles the server itself once back. Back, the
    server (still stopped) is drained, started once and given its weight
    back. Explorer: seed 890 of 200 steps, the first runs with compute
    hosts (``engine-0 runs Start srv-0010`` at 79 s, the load balancer
    busy; ``host compute2 stops reporting`` at 82 s; ``runs Advance
    srv-0010`` at 86 s sends the START).
    """
    w = make_world(servers=3, pool=True, weight=5)
    _watching(w)
    host = w.host_of(0)
    address = w.server(0).addresses[0]
    _fails(w, 0)
    w.octavia.hold('lb-p0', 8)
    _recovery_pass(w.engines[0])
    assert (w.state(0), _nova(w)) == ('RECOVERING', [])
    w.host_stops(host)
    w.advance(2)
    w.run(2 * VERIFY)
    assert (w.state(0), _nova(w)) == ('RECOVERING', [])
    assert w.weights()[address] == 5
    w.host_back(host)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    w.run(10)
    assert _nova(w) == [('start', None)]
    assert w.weights()[address] == 5


def test_no_action_on_the_last_word_of_hosts_nova_no_longer_gives(
        make_world):
    """The host stops, and Nova does not answer the next listing of hosts.

    Recovery does not believe the last listing that said UP once it is
    older than it would otherwise keep one: whether the host reports is
    not known, and the START waits. Explorer (compute hosts listed 20
    times as often as by ``bench/simulate.py``): seed 10284, 153 steps
    (``host compute2 stops reporting`` at 123 s, ``nova listings fail 2
    times`` at 125 s, the listing of compute hosts among them, no poll
    since; the RECREATE that starts at 127 s sends its fencing STOP).
    """
    w = make_world(servers=3, pool=False)
    _watching(w)
    host = w.host_of(0)
    _fails(w, 0)
    w.host_stops(host)
    w.nova.host_faults.add('*', nova_double.error(), 5)
    w.advance(2)
    _recovery_pass(w.engines[0])
    assert (w.state(0), _nova(w)) == ('UNHEALTHY', [])
    assert _timeline(w, 'SUPPRESSED')[-1].startswith(
        'not now: nova-compute on host %s is not reporting' % host)
    w.nova.host_faults.clear()
    w.host_back(host)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert _nova(w) == [('start', None)]


# Writes that raised after their commit


def test_a_recovering_write_that_raised_after_its_commit_counts_for_the_limit(
        make_world):
    """max_concurrent_recoveries 1: RECOVERING stored, its write raised.

    The engine does not take the target for UNHEALTHY still: it reads the
    row again, and a second server whose back-off ends waits.
    """
    cfg.CONF.set_override('max_concurrent_recoveries', 1,
                          group='heat_health')
    try:
        w = make_world(servers=3, pool=False, policy={'recovery': dict(
            NO_JITTER, max_concurrent=2, backoff_initial=10)})
    finally:
        cfg.CONF.clear_override('max_concurrent_recoveries',
                                group='heat_health')
    engine = w.engines[0]
    _watching(w)
    # The second server's START is refused: it backs off 10 s.
    w.lock_server(1)
    _fails(w, 1)
    _recovery_pass(engine)
    assert (w.state(1), _nova(w)) == ('UNHEALTHY', [])
    w.lock_server(1, False)
    w.advance(5)
    _fails(w, 0)
    engine.recovery_pass()
    assert engine.steps == ['Start %s' % w.server_id(0)]
    w.fail_writes(1, committed=True)
    engine.run_steps()
    assert w.state(0) == 'RECOVERING'
    # The back-off ends before the engine's next tick re-reads its rows.
    w.advance(10)
    _recovery_pass(engine)
    assert w.state(1) == 'UNHEALTHY'
    assert [t.state for t in w.targets()].count('RECOVERING') <= 1
    assert _nova(w, 1) == []


def test_a_restore_flag_stored_by_a_write_that_raised_is_believed(
        make_world):
    """The restore's first write commits, then raises; the server fails.

    Memory reads the row again before anything else is written of it:
    the state stored next does not leave memory without the flag.
    """
    w = make_world(servers=3, pool=True, weight=5)
    engine = w.engines[0]
    _watching(w)
    address = w.server(0).addresses[0]
    _fails(w, 0)
    _recovery_pass(engine)
    for _second in range(VERIFY):
        w.advance(1)
        engine.tick()
        if w.state(0) == 'HEALTHY':
            break
    engine.recovery_pass()
    assert engine.steps == ['Restore %s' % w.server_id(0)]
    w.fail_writes(1, committed=True)
    engine.run_steps()
    assert _row(w, 0).recovery.get('restoring')
    # Seen by the status poller, before the engine's next tick re-reads
    # its rows.
    w.break_server(0, 'SHUTOFF')
    w.advance(1)
    _seen(w, 0, obs.UNHEALTHY, 'Nova status SHUTOFF',
          source=obs.NODE_STATUS_POLLING)
    assert w.state(0) != 'HEALTHY'
    memory = [t for t in engine.tracker.targets_of(w.policies[0].id)
              if t.server_id == w.server_id(0)][0]
    assert memory.recovery == _row(w, 0).recovery
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    w.run(10)
    assert w.weights()[address] == 5


def test_a_guest_nova_is_still_stopping_gets_a_start_not_a_recreate(
        make_world):
    """Nova's power sync stops a guest that shut down; recovery waits.

    The notification of the shut down guest comes before Nova's stop has
    ended (task powering-off): taken for a stuck task, the attempt picked
    what Nova accepts over a task, a RECREATE, for a server START heals.
    """
    w = make_world(servers=2, pool=False, policy={'recovery': NO_JITTER})
    _watching(w)
    w.break_server(0, 'SHUTOFF')
    assert w.server(0).task_state == 'powering-off'
    _seen(w, 0, obs.UNHEALTHY, 'power state shutdown',
          source=obs.NODE_STATUS_POLLING)
    assert w.state(0) == 'UNHEALTHY'
    _recovery_pass(w.engines[0])
    assert _nova(w, 0) == []
    first = w.server_id(0)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert [a for a, _d in _nova(w, 0)] == ['start']
    assert w.server_id(0) == first
