"""The simulation world runs the real acting core end to end."""

from novaclient import exceptions as nova_exc
import pytest

from heat_health.db import api as db_api
from heat_health.engine.pools import lb_drain
from heat_health.engine.recovery import nova_actions
from heat_health.engine import report
from tests.simulation import faults
from tests.simulation import heat_double
from tests.simulation import invariants
from tests.simulation import nova_double

GRACE = 20


def test_a_powered_off_server_is_drained_started_once_and_restored(
        make_world):
    w = make_world(engines=1, servers=3, pool=True, weight=5)
    engine = w.engines[0]
    assert engine.tick()
    w.advance(GRACE + 1)
    address = w.server(0).addresses[0]
    w.break_server(0, 'SHUTOFF')
    w.advance(2)
    engine.tick()
    assert w.state(0) == 'UNHEALTHY'
    engine.recovery_pass()
    assert engine.steps == ['Start %s' % w.server_id(0)]
    engine.run_step(0)
    assert w.weights()[address] == 0
    assert w.state(0) == 'VERIFYING'
    # Held at 0 for whoever sends the pool's members, until given back.
    pool_id = w.heat.lb_specs(w._policy(0).stack_id)[0]['pool_id']
    assert db_api.drain_states([pool_id]) == {
        pool_id: {address: (db_api.HELD, 5)}}
    w.run_until(lambda: w.state(0) == 'HEALTHY' and
                w.weights()[address] == 5)
    assert db_api.drain_states([pool_id]) == {
        pool_id: {address: (db_api.RESTORED, 5)}}
    starts = [(a.server_id, a.action) for a in w.accepted()]
    assert starts == [(w.server_id(0), 'start')]
    assert w.server(0).status == 'ACTIVE'
    assert engine.errors == []


def test_recreate_replaces_the_server_through_heat(make_world):
    w = make_world(engines=1, servers=2, pool=True,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}]}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    old = w.server_id(1)
    w.break_server(1, 'ERROR')
    w.run_until(lambda: w.server_id(1) != old and
                w.state(1) == 'HEALTHY' and w.heat.replacements)
    assert [(m.physical_id, m.source) for m in w.heat.marks] == [
        (old, 'recovery')]
    assert [(u.kind, u.superseded) for u in w.heat.updates] == [
        ('recovery', False)]
    assert [(r.old, r.outcome) for r in w.heat.replacements] == [
        (old, 'replaced')]
    assert w.nova.find(old).deleted
    new_address = w.server(1).addresses[0]
    assert w.weights()[new_address] == 1
    assert len(w.weights()) == 2
    assert w.accepted() == []
    assert engine.errors == []


def test_a_second_engine_takes_over_a_killed_engines_recovery(make_world):
    w = make_world(engines=2, servers=3, pool=False)
    first, second = w.engines
    first.tick()
    second.tick()
    assert w.owner() == ('engine-0', 1)
    assert second.owned == {}
    w.advance(GRACE + 1)
    w.break_server(2, 'SHUTOFF')
    w.advance(2)
    first.tick()
    first.recovery_pass()
    # Nova accepts the START, then the engine dies before storing it.
    w.crash_at('nova', 'start', phase=faults.AFTER)
    first.run_step(0)
    assert not first.alive
    assert w.state(2) == 'RECOVERING'
    second.tick()
    assert second.owned == {}
    w.advance(w.lease_seconds + 1)
    second.tick()
    assert w.owner() == ('engine-1', 2)
    w.run_until(lambda: w.state(2) == 'HEALTHY')
    assert [a.action for a in w.accepted()] == ['start']
    first.restart()
    first.tick()
    assert first.owned == {}


def test_a_failed_write_changes_nothing_and_is_decided_again(make_world):
    w = make_world(engines=1, servers=1, pool=False)
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    w.break_server(0, 'SHUTOFF')
    w.advance(2)
    # The poll's decision and the retry of settle() in the same tick.
    w.fail_writes(2, calls=['target_transition'])
    engine.tick()
    assert w.state(0) == 'HEALTHY'
    assert set(engine.states().values()) == {'HEALTHY'}
    engine.tick()
    assert w.state(0) == 'UNHEALTHY'


def _row(w, index):
    return [t for t in w.targets() if t.server_id == w.server_id(index)][0]


@pytest.mark.parametrize('how,reason', [
    ('GUEST_PAUSED', 'Nova status ACTIVE but power state PAUSED (guest '
     'paused by the hypervisor)'),
    ('VANISHED', 'Nova status ACTIVE but power state NOSTATE (guest not '
     'found on the hypervisor)')])
def test_an_active_server_whose_guest_does_not_run_is_hard_rebooted(
        make_world, how, reason):
    w = make_world(engines=1, servers=2, pool=False)
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    # Nova keeps it ACTIVE: only its power state tells.
    w.break_server(0, how)
    assert w.server(0).status == 'ACTIVE'
    w.advance(2)
    engine.tick()
    assert (w.state(0), _row(w, 0).state_reason) == ('UNHEALTHY', reason)
    engine.recovery_pass()
    engine.run_steps()
    # Nova refuses a start or an unpause of an ACTIVE server, and a soft
    # reboot needs a running guest: a hard reboot, then a new server.
    started = [p['reason'] for _t, p in engine.notifier.sent
               if p['new_state'] == 'RECOVERING']
    assert started == ['REBOOT HARD started (attempt 1 of 5, step 1 of 2): '
                       + reason]
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    assert [(a.action, a.detail) for a in w.accepted()] == [
        ('reboot', 'HARD')]
    assert w.nova.refused == []
    assert w.server(0).power_state == nova_double.RUNNING
    assert engine.errors == []


def test_a_soft_reboot_a_policy_names_is_hard_for_a_paused_guest(
        make_world):
    w = make_world(engines=1, servers=1, pool=False, policy={
        'recovery': {'actions': [{'name': 'REBOOT',
                                  'params': {'type': 'SOFT'}},
                                 {'name': 'RECREATE'}]}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    w.break_server(0, 'GUEST_PAUSED')
    w.run_until(lambda: w.state(0) == 'HEALTHY' and w.accepted())
    assert [(a.action, a.detail) for a in w.accepted()] == [
        ('reboot', 'HARD')]
    assert w.heat.marks == []


def test_an_action_nova_refuses_on_a_paused_guest_fails_at_once(
        make_world):
    # The policy allows no reboot: its UNPAUSE is sent, and Nova refuses
    # it as the server is ACTIVE, which is no sign that it healed.
    w = make_world(engines=1, servers=1, pool=False, policy={
        'recovery': {'actions': [{'name': 'UNPAUSE'},
                                 {'name': 'RECREATE'}]}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    w.break_server(0, 'GUEST_PAUSED')
    w.advance(2)
    engine.tick()
    engine.recovery_pass()
    engine.run_steps()
    assert [a.action for a in w.nova.refused] == ['unpause']
    row = _row(w, 0)
    assert row.state == 'UNHEALTHY'
    assert row.state_reason.startswith('recovery failed: UNPAUSE refused '
                                       'by Nova')


def test_nova_double_refuses_as_nova_does(make_world):
    w = make_world(engines=1, servers=1, pool=False)
    actions = nova_actions.NovaActions(w.nova.client())
    server_id = w.server_id(0)
    with pytest.raises(nova_actions.ActionRefused):
        actions.run(server_id, 'START')          # not stopped
    actions.run(server_id, 'REBOOT', {'type': 'SOFT'})
    assert actions.status(server_id).task_state == 'rebooting'
    with pytest.raises(nova_actions.ActionRefused):
        actions.run(server_id, 'REBOOT', {'type': 'SOFT'})
    w.advance(10)
    assert actions.status(server_id).status == 'ACTIVE'
    w.lock_server(0)
    with pytest.raises(nova_actions.ActionRefused):
        actions.run(server_id, 'REBOOT', {'type': 'HARD'})
    w.nova.faults.add('get', nova_exc.ClientException(500))
    with pytest.raises(nova_actions.NovaActionFailed):
        actions.status(server_id)
    w.break_server(0, 'GONE')
    with pytest.raises(nova_actions.ServerGone):
        actions.status(server_id)
    assert [a.action for a in w.accepted()] == ['reboot']


def test_nova_double_tells_who_asked_for_each_action(make_world):
    """A user's and recovery's requests have a user; the power sync not."""
    w = make_world(engines=1, servers=1, pool=False)
    actions = nova_actions.NovaActions(w.nova.client())
    server_id = w.server_id(0)
    w.break_server(0, 'PAUSED')
    actions.run(server_id, 'UNPAUSE')
    w.advance(5)
    w.break_server(0, 'SHUTOFF')
    assert [a.action for a in actions.instance_actions(server_id)] == [
        'unpause', 'pause']
    w.advance(nova_double.SYNC_SECONDS)
    found = actions.instance_actions(server_id)
    assert [(a.action, a.user_id, a.project_id) for a in found] == [
        ('stop', None, None), ('unpause', 'user-1', 'project-1'),
        ('pause', 'user-1', 'project-1')]
    assert len({a.request_id for a in found}) == 3
    assert found[0].start_time == w.clock()
    w.nova.faults.add('instance_actions', nova_exc.ClientException(500))
    with pytest.raises(nova_actions.NovaActionFailed):
        actions.instance_actions(server_id)
    w.break_server(0, 'GONE')
    with pytest.raises(nova_actions.ServerGone):
        actions.instance_actions(server_id)


def _checked(w, checker, action):
    """``action()`` as one step of the world; the invariants it broke."""
    step = invariants.Step('scripted')
    checker.before(step)
    action()
    return checker.after(step)


def _checked_until(w, checker, done, seconds=120):
    """A second of the world at a time, checked, until ``done()``."""
    found = []
    for _second in range(seconds):
        if done():
            return found
        found += _checked(w, checker, lambda: w.run(1))
    raise AssertionError('not done within %d s: %s' % (seconds, found))


@pytest.mark.parametrize('forget_back_off', [False, True])
def test_the_checker_tells_an_attempt_started_inside_its_back_off(
        make_world, forget_back_off):
    """Healed, then stopped again: attempt 2 waits 10 s from the heal."""
    w = make_world(engines=1, servers=3, pool=False, policy={
        'recovery': {'backoff_initial': 10, 'backoff_jitter': 0}})
    checker = invariants.Checker(w)
    engine = w.engines[0]
    found = _checked(w, checker, engine.tick)
    found += _checked(w, checker, lambda: w.advance(GRACE + 1))
    w.break_server(0, 'SHUTOFF')
    found += _checked_until(w, checker, lambda: len(w.accepted()) == 1 and
                            w.state(0) == 'HEALTHY')
    if forget_back_off:
        # What the tracker did once: a heal left no back-off behind.
        [target] = [t for t in engine.tracker.targets_of(w.policies[0].id)
                    if t.server_id == w.server_id(0)]
        target.next_attempt_at = None
        w.db.real['target_store_columns'](
            engine.id, target.id, target.server_id,
            target.policy.generation, {'next_attempt_at': None})
    w.break_server(0, 'SHUTOFF')
    found += _checked_until(w, checker, lambda: len(w.accepted()) == 2)
    checker.close()
    if forget_back_off:
        assert len(found) == 1 and 'its back-off is 10.0 s' in found[0]
    else:
        assert found == []


def _draining(w, engine):
    """srv-0001 UNHEALTHY, its load balancer held busy: the drain waits."""
    engine.tick()
    w.advance(GRACE + 1)
    w.break_server(0, 'SHUTOFF')
    w.advance(2)
    engine.tick()
    assert w.state(0) == 'UNHEALTHY'
    w.octavia.hold('lb-p0', 60)
    engine.recovery_pass()
    engine.run_steps()
    row = [t for t in w.targets() if t.server_id == w.server_id(0)][0]
    assert row.state == 'RECOVERING' and row.recovery['drain_started']
    assert w.accepted() == []
    return row.recovery['drain_started']


def test_a_drain_is_carried_over_passes_then_given_up(make_world):
    """A pass waits a few seconds; a busy load balancer is given up.

    lb_status_timeout (10 s) after the drain's first try, the action goes
    ahead undrained; the weight the member never lost needs no restore.
    """
    w = make_world(engines=1, servers=2, pool=True, weight=4)
    engine = w.engines[0]
    started = _draining(w, engine)
    address = w.server(0).addresses[0]
    w.advance(1)
    engine.tick()
    engine.recovery_pass()
    engine.run_steps()              # 3 s more, still busy
    assert w.accepted() == []
    w.run_until(lambda: w.accepted() != [], seconds=15)
    row = [t for t in w.targets() if t.server_id == w.server_id(0)][0]
    assert row.recovery['drain_started'] == started
    assert (w.accepted()[0].at - w.clock.start).total_seconds() >= \
        GRACE + 3 + 10
    assert w.weights()[address] == 4
    assert [a.action for a in w.accepted()] == ['start']


def test_a_drain_is_carried_on_by_the_engine_that_takes_over(make_world):
    """Killed mid-drain: the next owner counts from the stored start.

    The load balancer frees up, the member is drained, the server started
    once and the weight given back.
    """
    w = make_world(engines=2, servers=2, pool=True, weight=3)
    first, second = w.engines
    w.assign(0, 0)
    started = _draining(w, first)
    first.kill()
    w.octavia.release()
    w.advance(w.lease_seconds + 1)
    w.assign(0, 1)
    address = w.server(0).addresses[0]
    w.run_until(lambda: w.accepted() != [], seconds=10)
    row = [t for t in w.targets() if t.server_id == w.server_id(0)][0]
    assert row.recovery['drain_started'] == started
    assert [b.weights[address] for b in w.octavia.batches
            if b.actor == 'recovery'] == [0]
    w.run_until(lambda: w.state(0) == 'HEALTHY' and
                w.weights()[address] == 3)
    assert [a.action for a in w.accepted()] == ['start']


def _recreating_world(make_world, engines=1, servers=10, nested=True):
    w = make_world(engines=engines, servers=servers, pool=True,
                   nested=nested,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}],
                                        'max_concurrent': servers}})
    for engine in w.engines:
        engine.tick()
    w.advance(GRACE + 1)
    return w


def _lose_three_and_heal(w):
    """Servers 0-2 go ERROR; their old ids, once all three are replaced."""
    olds = [w.server_id(i) for i in range(3)]
    for index in range(3):
        w.break_server(index, 'ERROR')
    w.run_until(lambda: all(w.state(i) == 'HEALTHY' and
                            w.server_id(i) != olds[i] for i in range(3)) and
                len(w.heat.replacements) == 3)
    return olds


def test_servers_lost_together_are_replaced_by_one_update(make_world):
    w = _recreating_world(make_world)
    olds = _lose_three_and_heal(w)
    updates = [u for u in w.heat.updates if u.kind == 'recovery']
    assert len(updates) == 1, updates
    assert sorted(p[1] for p in updates[0].marked) == ['0', '1', '2']
    assert sorted(r.old for r in w.heat.replacements) == sorted(olds)
    assert w.engines[0].errors == []


def test_members_of_a_stack_each_are_replaced_side_by_side(make_world):
    # Template members: each server's own stack is updated, all at once,
    # none waiting for another's update; the root is never updated.
    w = _recreating_world(make_world, engines=2, nested='members')
    olds = _lose_three_and_heal(w)
    updates = [u for u in w.heat.updates if u.kind == 'recovery']
    assert len({u.stack_id for u in updates}) == 3, updates
    assert w.policies[0].stack_id not in {u.stack_id for u in updates}
    assert all(len(u.marked) == 1 for u in updates), updates
    # Asked for within the same seconds, not one after another's end.
    assert (max(u.at for u in updates) -
            min(u.at for u in updates)).total_seconds() < \
        heat_double.UPDATE_SECONDS
    assert sorted(r.old for r in w.heat.replacements) == sorted(olds)
    assert all(e.errors == [] for e in w.engines)


def test_a_failure_during_our_update_joins_the_next_at_once(make_world):
    w = _recreating_world(make_world)
    engine = w.engines[0]
    first = w.server_id(0)
    w.break_server(0, 'ERROR')
    w.run_until(lambda: [u for u in w.heat.updates if u.kind == 'recovery'])
    second = w.server_id(1)
    w.break_server(1, 'ERROR')
    w.run_until(lambda: w.server_id(1) != second)
    updates = [u for u in w.heat.updates if u.kind == 'recovery']
    assert [sorted(p[1] for p in u.marked) for u in updates] == [['0'],
                                                                 ['1']]
    # Drained and fenced while the first ran, marked and replaced once it
    # ended: within the passes its load balancer's change takes.
    ended = [r.at for r in w.heat.replacements if r.old == first][0]
    assert 0 < (updates[1].at - ended).total_seconds() <= 4
    assert engine.errors == []


def test_an_engine_killed_between_marks_and_update_updates_once(
        make_world):
    w = _recreating_world(make_world, engines=2)
    first, second = w.engines
    w.assign(0, 0)
    olds = [w.server_id(i) for i in range(3)]
    for index in range(3):
        w.break_server(index, 'ERROR')
    w.advance(2)
    first.tick()
    first.recovery_pass()
    first.run_steps()               # the last drain sends all three
    first.recovery_pass()
    first.run_steps()               # each marked, the update not asked
    assert [t.recovery['stage'] for t in w.targets()[:3]] == ['marked'] * 3
    first.kill()
    w.assign(0, 1)
    w.run_until(lambda: all(w.state(i) == 'HEALTHY' and
                            w.server_id(i) != olds[i] for i in range(3)) and
                len(w.heat.replacements) == 3)
    updates = [u for u in w.heat.updates if u.kind == 'recovery']
    assert len(updates) == 1, updates
    assert sorted(r.old for r in w.heat.replacements) == sorted(olds)


def test_every_timeline_row_of_a_recreate_names_its_place(make_world):
    w = _recreating_world(make_world, servers=3)
    old = w.server_id(1)
    w.break_server(1, 'ERROR')
    w.run_until(lambda: w.server_id(1) != old and w.state(1) == 'HEALTHY')
    events = report.timeline(w.policies[0].stack_id)['events']
    about_old = [e for e in events if e['server_id'] == old]
    assert {e['new_state'] for e in about_old} >= {'UNHEALTHY', 'RECOVERING'}
    new = w.server_id(1)
    assert {e['path'] for e in events
            if e['server_id'] in (old, new)} == {w.targets()[1].path}
    assert None not in {e['path'] for e in events if e['server_id']}


def test_servers_lost_together_are_drained_in_one_batch(make_world):
    """Recoveries started together: one batch sets all three to 0."""
    w = _recreating_world(make_world, engines=2)
    addresses = [w.server(i).addresses[0] for i in range(3)]
    _lose_three_and_heal(w)
    batches = w.octavia.batches
    drained_by = {a: min(i for i, b in enumerate(batches)
                         if b.weights.get(a) == 0) for a in addresses}
    assert len(set(drained_by.values())) == 1, batches
    assert all(e.errors == [] for e in w.engines)


def test_servers_lost_together_have_their_pool_read_once(make_world,
                                                         monkeypatch):
    """The weights to give back are read in one list of the pool."""
    w = _recreating_world(make_world, engines=2)
    reads = []
    members = lb_drain.Drainer.members

    def counted(drainer, *args, **kwargs):
        before = w.octavia.reads
        try:
            return members(drainer, *args, **kwargs)
        finally:
            reads.append(w.octavia.reads - before)

    monkeypatch.setattr(lb_drain.Drainer, 'members', counted)
    _lose_three_and_heal(w)
    assert len(reads) == 3 and sum(reads) == 1, reads
