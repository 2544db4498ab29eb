"""The simulation world replaces group members whole (``replace: MEMBER``).

Template members (a stack each, holding the server): a RECREATE marks the
member, Heat's double replaces it with a new stack, server and address;
the target follows its server into the new stack, the pool's member is
swapped, and every step keeps the invariants.
"""

from tests.simulation import faults
from tests.simulation import invariants

GRACE = 20
MEMBER_RECREATE = {'recovery': {'actions': [{'name': 'RECREATE'}],
                                'replace': 'MEMBER', 'max_concurrent': 3}}


def _world(make_world, engines=2, servers=3, gap=False):
    w = make_world(engines=engines, servers=servers, pool=True,
                   nested='members', policy=MEMBER_RECREATE)
    w.heat.member_gap = gap
    for engine in w.engines:
        engine.tick()
    w.advance(GRACE + 1)
    return w


def _checked_run(w, checker, done, seconds=120):
    """``run`` a second at a time, each step judged, until ``done()``."""
    for _second in range(seconds):
        if done():
            return
        for engine in w.engines:
            for op, act in (('tick', engine.tick),
                            ('pass', engine.recovery_pass),
                            ('run', engine.run_steps)):
                if not engine.alive:
                    continue
                step = invariants.Step(op, engine, op)
                checker.before(step)
                act()
                assert checker.after(step) == []
        w.clock.advance(1)
    assert done(), w.trace[-10:]


def _state(w, index):
    """The stored state of the index-th place's target.

    None before the target has followed its server there.
    """
    place = w.places()[index]
    found = [t.state for t in w.targets()
             if (t.stack_id, t.resource_name) == place]
    return found[0] if found else None


def _replaced(w, index, old, count=3):
    """Once the update replaced ``old`` and every target is HEALTHY."""
    return lambda: (old in [r.old for r in w.heat.replacements] and
                    len(w.places()) == count and
                    w.server_id(index) != old and
                    all(_state(w, i) == 'HEALTHY' for i in range(count)))


def test_a_member_is_replaced_whole_and_its_target_follows(make_world):
    w = _world(make_world)
    checker = invariants.Checker(w)
    try:
        old = w.server_id(1)
        old_place = w.places()[1]
        old_address = w.server(1).addresses[0]
        others = [w.server_id(i) for i in (0, 2)]
        target_id = [t.id for t in w.targets()
                     if (t.stack_id, t.resource_name) == old_place][0]
        w.break_server(1, 'ERROR')
        _checked_run(w, checker, _replaced(w, 1, old))
    finally:
        checker.close()
    # The member marked, not its server; replaced once, whole.
    assert [(m.resource_name, m.server_id, m.source)
            for m in w.heat.marks] == [('1', old, 'recovery')]
    [replacement] = w.heat.replacements
    assert (replacement.old, replacement.outcome, replacement.marked[:2]) \
        == (old, 'replaced', (w.heat.stacks['stack-p0'].resources[
            'group'].physical_id, '1'))
    assert old_place[0] not in w.heat.stacks
    # The same target, in the new member's stack, with its history.
    new_place = w.places()[1]
    assert new_place[0] != old_place[0]
    row = [t for t in w.targets() if t.id == target_id][0]
    assert ((row.stack_id, row.resource_name), row.server_id) == (
        new_place, w.server_id(1))
    assert row.attempts == 1
    reasons = [e.reason for e in w.db.real['event_get_recent'](
        [w.policies[0].id], 100) if e.path == row.path]
    assert 'server %s replaced by %s (RECREATE): verifying' % (
        old, row.server_id) in reasons
    # A new address in the pool, the old one gone; the others untouched.
    new_address = w.server(1).addresses[0]
    assert new_address != old_address
    assert old_address not in w.weights()
    assert w.weights()[new_address] == 1
    assert len(w.weights()) == 3
    assert [w.server_id(i) for i in (0, 2)] == others
    assert all(e.errors == [] for e in w.engines)


def test_a_gap_while_the_member_is_replaced_keeps_the_target(make_world):
    # Legacy Heat: the place holds no server until the new member's does.
    w = _world(make_world, engines=1, gap=True)
    checker = invariants.Checker(w)
    try:
        old = w.server_id(0)
        ids = sorted(t.id for t in w.targets())
        w.break_server(0, 'ERROR')
        _checked_run(w, checker, lambda: len(w.places()) == 2)
        # No server shown at the place: its target stays, recovering.
        assert sorted(t.id for t in w.targets()) == ids
        _checked_run(w, checker, _replaced(w, 0, old))
    finally:
        checker.close()
    assert sorted(t.id for t in w.targets()) == ids
    assert [r.old for r in w.heat.replacements] == [old]


def test_the_engine_taking_over_marks_the_member_recorded(make_world):
    w = _world(make_world)
    first, second = w.engines
    w.assign(0, 0)
    old = w.server_id(2)
    w.break_server(2, 'ERROR')
    w.advance(2)
    # The first engine records the member, then dies as it marks it.
    w.crash_at('heat', 'mark_failed')
    w.run_until(lambda: not first.alive)
    row = [t for t in w.targets() if t.server_id == old][0]
    assert row.recovery['member']['name'] == '2'
    assert w.heat.marks == []
    w.assign(0, 1)
    checker = invariants.Checker(w)
    try:
        _checked_run(w, checker, _replaced(w, 2, old), seconds=180)
    finally:
        checker.close()
    assert [(m.resource_name, m.server_id) for m in w.heat.marks] == [
        ('2', old)]
    assert [r.old for r in w.heat.replacements] == [old]
    assert [u.kind for u in w.heat.updates] == ['recovery']


def test_a_member_marked_by_a_server_that_heals_is_cleared(make_world):
    # The update that was to replace it is refused; the server heals by
    # itself meanwhile: recovery's mark of the member is cleared, not left
    # for the next update to replace a healthy member.
    w = _world(make_world, engines=1)
    old = w.server_id(0)
    w.break_server(0, 'ERROR')
    w.heat.faults.add('update_target', RuntimeError, count=1000,
                      phase=faults.BEFORE)
    w.run_until(lambda: w.heat.marks and _state(w, 0) == 'UNHEALTHY')
    group_id, name = w.heat.marks[0].stack_id, w.heat.marks[0].resource_name
    assert w.heat.stacks[group_id].resources[name].state == (
        'CHECK', 'FAILED')
    w.heal_server(0)
    w.run_until(lambda: _state(w, 0) == 'HEALTHY' and w.heat.stacks[
        group_id].resources[name].state == ('CHECK', 'COMPLETE'))
    w.heat.faults.clear()
    assert w.server_id(0) == old
    assert [(m.resource_name, m.server_id) for m in w.heat.unmarks] == [
        (name, old)]
    assert w.heat.replacements == []
