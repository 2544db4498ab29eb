"""Defects the seeded explorer found, each replayed as a short script.

Each test is the smallest world that showed the defect, and failed until
the acting core was fixed. The seed and steps in a test's docstring are
those of the explorer and the acting core of the time (the explorer has
changed its schedule since, so they no longer replay the same run).
"""

from heat_health.objects import policy as policy_object
from tests.simulation import explore
from tests.simulation import octavia_double

GRACE = 20


def _unhealthy(w, engine, index=0, how='SHUTOFF'):
    engine.tick()
    w.advance(GRACE + 1)
    w.break_server(index, how)
    w.advance(2)
    engine.tick()
    assert w.state(index) == 'UNHEALTHY'


def test_no_nova_action_once_the_policy_is_disabled(make_world):
    """A step decided before the maintenance switch went off still acts.

    The step re-reads the operator's pause and the stack's state before
    acting (``RecoveryLoop._not_now``), not the policy's ``enabled``: a
    recovery pass planned on memory from before the switch (or a step
    queued before it) sends its Nova action while the policy is disabled.
    Explorer: seed 10, 163 steps (``policy-0 enabled: False`` at step 159,
    ``engine-0 pass -> ['Start srv-0004']`` at 160 without a tick between,
    the Start run at 163 marks the resource CHECK_FAILED); seeds 68, 86,
    129, 220, 449 likewise send a START or a REBOOT.
    """
    w = make_world(engines=1, servers=3, pool=False)
    engine = w.engines[0]
    _unhealthy(w, engine)
    engine.recovery_pass()
    assert engine.steps == ['Start %s' % w.server_id(0)]
    w.set_enabled(False)
    engine.run_step(0)
    assert w.accepted() == []


def test_no_mark_once_the_policy_is_disabled(make_world):
    """The same for RECREATE: its marking waits for the policy's switch."""
    w = make_world(engines=1, servers=3, pool=False,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}]}})
    engine = w.engines[0]
    _unhealthy(w, engine, how='ERROR')
    w.set_enabled(False)
    engine.recovery_pass()      # on memory from before the switch
    engine.run_steps()
    assert [m for m in w.heat.marks if m.source == 'recovery'] == []
    assert [u for u in w.heat.updates if u.kind == 'recovery'] == []


def test_memory_follows_a_reset_stored_in_the_same_second(make_world):
    """A user's reset is not followed when its time equals memory's.

    ``WatchedTarget.follow`` takes a re-read row only when its
    ``state_since`` is later than the one in memory; a reset stored at the
    same time as the engine's own last write of the target (the same
    instant of the virtual clock here; the same second on MySQL, whose
    DATETIME columns keep no fractions) is never followed: memory keeps
    UNHEALTHY (or a recovery under way) while the row says NO_DATA, until
    the engine happens to write the target again. Explorer: seed 66, 102
    steps (the engine stores srv-0001 UNHEALTHY at 74.0 s, ``user marks
    nested-p0/0 healthy`` at 74.0 s); seeds 91, 224, 291, 304, 499, 538,
    560, 602, 655 likewise, some with a recovery in memory.
    """
    w = make_world(engines=1, servers=2, pool=False,
                   policy={'recovery': {'mode': 'OBSERVE'}})
    engine = w.engines[0]
    _unhealthy(w, engine, how='GONE')
    w.mark_healthy(0)               # the same instant as the UNHEALTHY
    assert w.state(0) == 'NO_DATA'
    w.advance(10)                   # the targets are read again
    engine.tick()
    target = [t for t in engine.tracker.targets_of(w.policies[0].id)
              if t.place == w.places()[0]][0]
    assert (target.state, w.state(0)) in (('NO_DATA', 'NO_DATA'),
                                          ('UNHEALTHY', 'UNHEALTHY'))


def test_memory_follows_a_reset_back_to_what_the_engine_read(make_world):
    """A second reset in the second of the engine's write goes unseen.

    The monitor loads the stored rows into the tracker only when their
    states and times differ from those of the previous load. A user resets
    the target (NO_DATA at T), the engine loads that and stores UNHEALTHY
    again at T, the user resets it once more (NO_DATA at T): the rows now
    read exactly as at the previous load, nothing is loaded, and memory
    keeps UNHEALTHY while the row says NO_DATA for good. Explorer: seed
    146, 142 steps (``user marks nested-p0/2 healthy`` at steps 122 and
    124, both at 110.0 s, ``engine-0 tick`` at 123 between them).
    """
    w = make_world(engines=1, servers=2, pool=False,
                   policy={'recovery': {'mode': 'OBSERVE'}})
    engine = w.engines[0]
    _unhealthy(w, engine)
    w.advance(10)                   # Nova is polled at the next tick
    w.mark_healthy(0)
    engine.tick()                   # loads NO_DATA, stores UNHEALTHY
    assert w.state(0) == 'UNHEALTHY'
    w.mark_healthy(0)               # the rows read as at that load
    w.advance(10)
    engine.tick()
    target = [t for t in engine.tracker.targets_of(w.policies[0].id)
              if t.place == w.places()[0]][0]
    assert (target.state, w.state(0)) in (('NO_DATA', 'NO_DATA'),
                                          ('UNHEALTHY', 'UNHEALTHY'))


def test_no_mark_after_fencing_once_the_policy_is_paused(make_world):
    """A RECREATE whose fencing completes marks and updates while paused.

    ``RecoveryLoop._advance`` re-reads the pause (and the stack's state,
    and should the switch) only for the ``intent`` and ``fenced`` stages;
    a step carrying on a ``fencing`` stage that finds the server stopped
    stores ``fenced`` and goes straight on to mark the resource
    CHECK_FAILED and ask heat-engine for the update, whatever was stored
    since the pass decided it. Explorer (with the switch defect above
    patched out locally): seed 42, 267 steps (``policy-0 enabled: False``
    at step 264, ``engine-1 pass -> ['Advance srv-0002']`` at 266 on the
    stage ``fencing``, the Advance at 267 marks and updates).
    """
    w = make_world(engines=1, servers=3, pool=False,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}],
                                        'fencing': ['COMPUTE']}})
    engine = w.engines[0]
    _unhealthy(w, engine, how='ERROR')
    engine.recovery_pass()
    engine.run_steps()          # fencing stored, STOP sent
    assert [a.action for a in w.accepted()] == ['stop']
    w.advance(1)
    engine.tick()
    engine.recovery_pass()
    assert engine.steps == ['Advance %s' % w.server_id(0)]
    w.pause()
    w.advance(5)                # the server is stopped now
    engine.run_steps()
    assert [m for m in w.heat.marks if m.source == 'recovery'] == []
    assert [u for u in w.heat.updates if u.kind == 'recovery'] == []


def test_no_give_up_mark_once_the_policy_is_paused(make_world):
    """A give-up decided before a pause marks CHECK_FAILED during it.

    ``RecoveryLoop._give_up`` re-reads nothing stored: a GiveUp planned
    on memory from before the operator's pause (or queued before it)
    stores GAVE_UP and marks the resource CHECK_FAILED, which the next
    stack update by anyone turns into a replacement. Explorer (with the
    switch defect patched out locally): seed 364, 251 steps (``policy-0
    paused`` at step 248, ``engine-0 pass -> ['GiveUp srv-0002']`` at
    250, the GiveUp at 251 marks the resource).
    """
    w = make_world(engines=1, servers=3, pool=False,
                   policy={'recovery': {'actions': [{'name': 'START'}],
                                        'max_attempts': 1}})
    engine = w.engines[0]
    _unhealthy(w, engine, how='ERROR')
    engine.recovery_pass()
    engine.run_steps()          # START refused: the attempt failed
    assert w.state(0) == 'UNHEALTHY'
    w.advance(1)
    engine.tick()
    engine.recovery_pass()
    assert engine.steps == ['GiveUp %s' % w.server_id(0)]
    w.pause()
    engine.run_steps()
    assert [m for m in w.heat.marks if m.source == 'recovery'] == []


def test_a_brake_stored_by_a_write_that_raised_is_released(make_world):
    """A brake whose write raised after committing is never released.

    ``Timeline.brake`` believes the brake it stored only once the write
    returned; when the commit's answer is lost (the row holds the brake,
    the call raised), it keeps believing the brake read at the last claim
    (none), so once the cause clears it finds nothing to release: the
    stored brake stays until the policy is read again (a restart, a
    takeover). Explorer: seed 333, 171 steps of 300 (``next 1 db writes
    fail after committing`` at step 147, ``engine-2 pass`` at 148 stores
    "observers cannot see" and raises; the Nova listings answer again, and
    the owner's passes up to step 171 leave the brake stored).
    """
    w = make_world(engines=1, servers=3, pool=False)
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    w.nova.list_faults.add('*', RuntimeError('Nova is away'), 1)
    engine.tick()                   # the poll fails: blind
    w.fail_writes(1, calls=['policy_set_braked'], committed=True)
    engine.recovery_pass()
    assert w.db.real['policy_get'](w.policies[0].id).braked
    w.advance(6)
    engine.tick()                   # the poll answers again
    assert not engine.poller.failure
    engine.recovery_pass()
    assert w.db.real['policy_get'](w.policies[0].id).braked is None


def test_another_policys_own_verdict_never_acts_on_a_server(make_world):
    """One policy's poll URL verdict made another project's policy act.

    The tracker applied an observation keyed by server id to every target
    of the server: a policy whose own poll URL of a server never answers
    (an attacker's template watching a victim's server) turned the
    victim's target UNHEALTHY while Nova said ACTIVE, and the victim's
    own policy rebooted its server with the victim's trust. Explorer (the
    tracker's scope check taken out): seed 5, step 1 (``target 4
    (srv-0001) of policy-shared took policy-0's own verdict``), and with
    that check of the checker silenced, seed 8, 47 steps (``recovery
    action reboot srv-0001 for policy-0, whose own evidence never said
    the server failed (UNHEALTHY taken from: policy-shared)``).
    """
    w = make_world(engines=1, servers=2, pool=False, shared=True,
                   policy={'recovery': {'actions': [
                       {'name': 'REBOOT', 'params': {'type': 'HARD'}}]}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    engine.tick()
    w.silence_url(0, policy=1)      # policy-shared's own URL of srv-0001
    w.run(60)
    victim = w.policies[0]
    assert w.server(0).status == 'ACTIVE'
    assert [t.state for t in w.targets(0)] == ['HEALTHY', 'HEALTHY']
    assert w.state(0, policy=1) in ('UNHEALTHY', 'RECOVERING', 'VERIFYING',
                                    'GAVE_UP')
    assert [a.stack_id for a in w.accepted()
            if a.server_id == w.server_id(0)] != []
    assert victim.stack_id not in {a.stack_id for a in w.accepted()}
    # A late verdict of policy-shared's own check, on any engine.
    w.urls.silence(w.policies[1].id, w.server_id(0), False)
    engine.tracker.observe(w.urls.check(w.policies[1].id, w.server_id(1))
                           ._replace(verdict='UNHEALTHY'))
    w.run(30)
    assert w.state(1) == 'HEALTHY'
    assert victim.stack_id not in {a.stack_id for a in w.accepted()}


def test_memory_follows_a_reset_made_while_the_policy_was_off(make_world):
    """A reset is not followed when the same load unfreezes the policy.

    ``Tracker.load`` asks a re-read row whether memory differs only when
    ``WatchedTarget.follow`` dropped nothing; a policy switched back on
    drops its verdicts, so a user's reset stored in the same second as
    the engine's UNHEALTHY is never read: memory keeps UNHEALTHY (and
    may escalate a recovery on it) while the row says NO_DATA. Explorer:
    seed 45640, 145 steps (memory UNHEALTHY escalating START, the row
    HEALTHY); seed 41484, 99 steps, a second START in one attempt.
    """
    w = make_world(engines=1, servers=2, pool=False,
                   policy={'recovery': {'mode': 'OBSERVE'}})
    engine = w.engines[0]
    _unhealthy(w, engine, how='GONE')
    w.set_enabled(False)
    engine.tick()                   # loads the policy switched off
    w.mark_healthy(0)               # the same instant as the UNHEALTHY
    w.set_enabled(True)
    w.advance(10)
    engine.tick()                   # switched on and reset, in one load
    target = [t for t in engine.tracker.targets_of(w.policies[0].id)
              if t.place == w.places()[0]][0]
    assert (target.state, w.state(0)) in (('NO_DATA', 'NO_DATA'),
                                          ('UNHEALTHY', 'UNHEALTHY'))


def _memory(engine, w, index=0):
    return [t for t in engine.tracker.targets_of(w.policies[0].id)
            if t.place == w.places()[index]][0]


def test_rows_are_read_again_when_a_policy_comes_back(make_world):
    """An engine that takes a policy back acts on rows read before.

    The monitor read a policy's targets every few seconds; an engine that
    held the policy all along by its own claims (the ring moved it away
    and back between two of its ticks) took it back under a new
    generation, made its targets afresh from the rows of its last read,
    and believed a recovery the other owner had finished. Explorer: seed
    45640, 145 steps (engine-1 stores srv-0002 HEALTHY at 125 s, engine-0
    takes the policy back in the same second with UNHEALTHY escalating
    START in memory).
    """
    w = make_world(engines=2, servers=2, pool=False,
                   policy={'recovery': {'mode': 'OBSERVE'}})
    first, second = w.engines
    w.assign(0, 0)
    _unhealthy(w, first)
    w.advance(6)
    first.tick()                    # reads the rows: UNHEALTHY
    assert _memory(first, w).state == 'UNHEALTHY'
    w.assign(0, 1)
    first.tick()                    # offers it
    w.heal_server(0)
    second.tick()                   # takes it, sees the server healed
    assert w.owner()[0] == second.id
    assert w.state(0) == 'HEALTHY'
    w.assign(0, 0)
    second.tick()                   # offers it back
    first.tick()                    # held all along by its own claims
    assert w.owner()[0] == first.id
    assert (_memory(first, w).state, w.state(0)) == ('HEALTHY', 'HEALTHY')


def test_a_new_owner_does_not_judge_a_server_nova_is_working_on(make_world):
    """A takeover's lookup judged a server in a task by its status.

    The poll gives no verdict while Nova has a task on a server, the
    lookup of newly watched servers did: an engine taking a policy over
    saw a server its first owner had just asked to start (SHUTOFF,
    powering-on) as SHUTOFF, and started it again. Explorer: seed 41484,
    99 steps (engine-1 starts srv-0002 at 122 s, the user resets the
    target, engine-0 takes the policy over and starts it again).
    """
    w = make_world(engines=2, servers=2, pool=False,
                   policy={'recovery': {'actions': [{'name': 'START'}]}})
    first, second = w.engines
    w.assign(0, 0)
    _unhealthy(w, first)
    first.recovery_pass()
    assert first.run_steps() == ['Start %s' % w.server_id(0)]
    assert w.server(0).task_state == 'powering-on'
    w.mark_healthy(0)
    w.assign(0, 1)
    first.tick()
    second.tick()
    assert w.owner()[0] == second.id
    second.recovery_pass()
    second.run_steps()
    assert [a.action for a in w.accepted() + w.nova.refused
            if a.actor == 'recovery'] == ['start']
    assert w.state(0) != 'UNHEALTHY'


def test_a_replaced_servers_drained_member_never_regains_weight(make_world):
    """The restore gave weight back to the old server's member.

    A RECREATE drains the old server's member; once the new server is
    healthy the restore step gave the drained weight back to every member
    still in the pool, and a pool follower that had not yet removed the
    old server's member made it serve again (seen on the local deployment
    in 2 of 23 RECREATEs: the old, powered-off server had weight 1 for
    1.6 s). Here the follower lags until the restore has run.
    """
    w = make_world(engines=1, servers=2, pool=True, weight=5,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}]}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    old = w.server_id(1)
    address = w.server(1).addresses[0]
    w.heat.follow_lags = True
    w.break_server(1, 'ERROR')
    w.run_until(lambda: w.server_id(1) != old and
                w.state(1) == 'HEALTHY' and w.heat.lagging)
    w.run(3)                        # the restore's passes
    assert w.weights()[address] == 0
    assert w.heat.follow_now() == 1
    assert address not in w.weights()
    assert engine.errors == []


def test_a_users_update_after_ours_holds_the_next_fence(make_world):
    """A user's update that superseded ours passed for ours.

    A RECREATE's drain and fence may go on while a stack update of ours
    runs. The loop took any update of the stack as ours for a while after
    asking for one, so when a user updated the stack just after (it
    supersedes ours in convergence), a second failure's fence stopped its
    server under the user's update. Explorer: seed 3646, 126 steps
    (engine-0 asks an update at 152 s, the user updates the stack at
    156 s, engine-0 stops srv-0004 at 157 s).
    """
    w = make_world(engines=1, servers=3, pool=False,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}],
                                        'fencing': ['COMPUTE'],
                                        'max_concurrent': 3}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    w.break_server(0, 'ERROR')
    w.run_until(lambda: [u for u in w.heat.updates if u.kind == 'recovery'])
    w.user_update(seconds=15)
    second = w.server_id(1)
    w.break_server(1, 'ERROR')
    w.run(10)
    assert w.heat.stack_status(w.policies[0].stack_id) == (
        'UPDATE', 'IN_PROGRESS')
    assert [a for a in w.accepted() + w.nova.refused
            if a.server_id == second] == []
    w.run_until(lambda: w.server_id(1) != second and
                w.state(1) == 'HEALTHY')
    assert engine.errors == []


def test_a_drain_put_off_is_not_sent_with_a_later_one(make_world):
    """A drain the busy load balancer put off rode a later batch.

    The drainer kept the change pending in memory: the server healed
    meanwhile (in the explorer, while its policy was paused 900 s), and
    the next server's drain sent it with its own, taking the healthy
    server's member to weight 0 before its stale decision was looked at
    again. Explorer: seed 754, 96 steps (``drain of member 10.0.0.2 ...
    last seen failing 903s before``).
    """
    w = make_world(engines=1, servers=6, pool=True,
                   policy={'recovery': {'max_concurrent': 2}})
    engine = w.engines[0]
    spec = w.heat.lb_specs(w.policies[0].stack_id)[0]
    _unhealthy(w, engine)
    before = w.weights()
    w.octavia.hold(spec['loadbalancer_id'], 60)
    engine.recovery_pass()
    engine.run_steps()
    assert w.weights() == before
    w.heal_server(0)
    w.advance(61)
    w.break_server(1, 'SHUTOFF')
    w.advance(2)
    engine.tick()
    engine.recovery_pass()
    engine.run_step(engine.steps.index('Start %s' % w.server_id(1)))
    drained = {a for a, weight in w.weights().items() if weight == 0}
    assert drained == set(w.server(1).addresses), w.weights()


def test_no_action_on_evidence_from_before_another_policys(make_world):
    """A poll URL verdict outlived the other policy's reboot that healed.

    Two policies decided on the same failed server; the other policy's
    hard reboot healed it, and this one's stored decision, carried out
    later with no new verdict, still took its poll URL failure from
    before that reboot for fresh (within the evidence bound) and rebooted
    the healed server again. Explorer: seed 1970 (``Nova action reboot
    HARD by policy-0 on srv-0006 (ACTIVE, power 1 now): last seen failing
    23s before``).
    """
    w = make_world(engines=1, servers=2, pool=False, shared=True,
                   policy={'recovery': {'actions': [
                       {'name': 'REBOOT', 'params': {'type': 'HARD'}}]}})
    engine = w.engines[0]
    _unhealthy(w, engine)
    engine.recovery_pass()
    assert engine.steps == ['Start %s' % w.server_id(0)] * 2
    engine.run_step(1)              # policy-shared's
    assert len(w.accepted()) == 1
    w.advance(GRACE)                # its reboot over, no verdict since
    assert w.server(0).status == 'ACTIVE'
    engine.run_step(0)              # policy-0's, decided before it
    assert len(w.accepted()) == 1


def test_no_update_beside_the_mark_of_a_server_healed(make_world):
    """Another server's stack update replaced a healed server marked.

    A RECREATE abandoned after its mark (the server healthy again) leaves
    its CHECK_FAILED for the next pass's Unmark; the update asked for
    another server of the stack in the same pass replaced the healthy
    server too (heat-engine replaces every resource marked). Explorer:
    seed 2424 (``stack update replacing nested-p0/0 by policy-0 on
    srv-0001 (ACTIVE, power 1 now): last seen failing 38s before``).
    """
    w = make_world(engines=1, servers=3, pool=False,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}]}})
    engine = w.engines[0]
    _unhealthy(w, engine)
    engine.recovery_pass()
    engine.run_steps()
    healed = [(m.stack_id, m.resource_name) for m in w.heat.marks]
    assert len(healed) == 1
    w.heal_server(0)
    w.advance(5)
    engine.tick()
    engine.recovery_pass()
    engine.run_steps()              # abandoned: its mark to be cleared
    assert w.state(0) == 'HEALTHY'
    w.break_server(1, 'SHUTOFF')
    w.advance(7)
    engine.tick()
    engine.recovery_pass()
    engine.run_step(engine.steps.index('Start %s' % w.server_id(1)))
    engine.recovery_pass()
    replace = 'ReplaceMarked %s' % w.server_id(1)
    if replace in engine.steps:
        engine.run_step(engine.steps.index(replace))
    w.run(60)
    updates = [u for u in w.heat.updates if u.kind == 'recovery']
    assert updates
    assert not [u for u in updates if healed[0] in u.marked]


def test_a_policy_registered_again_stores_its_brake_again():
    """The owner remembered its brake by the policy's id and generation.

    A policy deleted and registered again under the same id starts its
    generations again: the owner took the new row's empty brake for the
    one it had stored under the same generation before, and five failing
    servers of five were neither braked nor healed. Replayed by its seed:
    the two engines' claims that give the same generation again are the
    explorer's.
    """
    result = explore.explore(3026, 190)
    assert result.violation is None, '\n'.join(result.trace[-15:])


def test_a_policy_deleted_gives_back_every_drained_member(make_world):
    """A deleted policy's second drained member stayed at weight 0.

    Its undoing gave back one row's members at a time, each waiting for
    the load balancer to take them; the first update kept it busy
    longer than that wait, the second row's restore found it busy, and
    the policy went with its rows, the only record of that weight.
    Explorer: seed 1937, 172 steps (``the next change by recovery keeps
    its load balancer busy for 15s`` at step 139, ``policy-0 deleted``
    at 147, ``member 10.0.0.4 ... still not at weight 7``).
    """
    w = make_world(engines=1, servers=3, pool=True, weight=7,
                   policy={'recovery': {'max_concurrent': 2}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    for index in (0, 1):
        w.break_server(index, 'SHUTOFF')
    w.advance(2)
    engine.tick()
    engine.recovery_pass()
    engine.run_steps()
    addresses = w.server(0).addresses + w.server(1).addresses
    assert {a: w.weights()[a] for a in addresses} == dict.fromkeys(
        addresses, 0)
    w.octavia.slow_next(15)
    w.delete_policy()
    assert w.weights() == dict.fromkeys(w.weights(), 7)


def test_a_policy_deleted_while_octavia_fails_gives_back_later(make_world):
    """A member stayed at weight 0 for good after its policy's delete.

    Octavia answered the delete's one undoing with a 503; the policy went
    with its rows, the only record of that weight. Now the row is kept
    with its policy, disabled and flagged deleted, and the owner gives
    the weight back at a later pass, then deletes both. Explorer: seed
    3226, 175 steps (``octavia load_balancer_show fails: 503`` at step
    146, ``policy-0 deleted`` at 151, ``member 10.0.0.3 ... still not at
    weight 8``).
    """
    w = make_world(engines=1, servers=2, pool=True, weight=8)
    engine = w.engines[0]
    _unhealthy(w, engine)
    engine.recovery_pass()
    engine.run_steps()
    address = w.server(0).addresses[0]
    assert w.weights()[address] == 0
    w.octavia.faults.add('load_balancer_show', octavia_double.error(503),
                         count=10)
    w.delete_policy()
    assert w.weights()[address] == 0
    kept = policy_object.Policy.get(w.policies[0].id)
    assert kept is not None and kept.deleted and not kept.enabled
    w.octavia.faults.clear()
    w.advance(10)
    engine.tick()
    assert w.weights()[address] == 8
    assert policy_object.Policy.get(w.policies[0].id) is None


def _check_failed(w):
    """(stack id, name) of every resource CHECK_FAILED in Heat now."""
    return sorted((stack.id, rsrc.name) for stack in w.heat.stacks.values()
                  for rsrc in stack.resources.values()
                  if rsrc.state == ('CHECK', 'FAILED'))


def test_a_users_reset_clears_the_member_recovery_marked(make_world):
    """A user's mark healthy left recovery's mark on the group member.

    With ``replace: MEMBER`` RECREATE marks the member; the user's mark
    healthy clears the server's resource and resets the target (NO_DATA),
    and recovery's record of its mark waited for the server to be seen
    healthy: a server that stayed unseen kept its member CHECK_FAILED for
    the next stack update to replace. Explorer: seed 1257, 182 steps
    (``user resets nested-p0-0/server`` at step 144, ``resource
    nested-p0/0 (nested-p0-0) still CHECK_FAILED 6s after recovery
    stopped intending to replace it: target 1 NO_DATA``).
    """
    w = make_world(engines=1, servers=3, pool=False, nested='members',
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}],
                                        'replace': 'MEMBER'}})
    engine = w.engines[0]
    server_id = w.server_id(0)
    _unhealthy(w, engine, how='ERROR')
    engine.recovery_pass()
    engine.run_steps()
    member = [t.recovery['member'] for t in w.targets()
              if t.server_id == server_id][0]
    assert _check_failed(w) == [(member['stack_id'], member['name'])]
    w.user_clears_mark(0)
    w.user_resets_target(0)
    engine.tick()
    assert w.state(0) == 'NO_DATA'
    engine.recovery_pass()
    assert engine.steps == ['Unmark %s' % server_id]
    engine.run_steps()
    assert _check_failed(w) == []


def test_no_update_for_a_mark_a_user_cleared(make_world):
    """Recovery asked for a stack update after a user cleared its mark.

    The user's mark healthy clears CHECK_FAILED, then resets the target;
    a ReplaceMarked between the two asked for an update that replaced
    nothing. The attempt now fails instead, and the user's reset follows.
    Explorer: seed 4203, 84 steps (``user resets nested-p0/1: mark
    cleared, rows not yet`` at step 78, ``engine-0 runs ReplaceMarked
    srv-0002`` at 84: ``stack update by recovery of nested-p0 replaces
    nothing``).
    """
    w = make_world(engines=1, servers=3, pool=False,
                   policy={'recovery': {'actions': [{'name': 'RECREATE'}]}})
    engine = w.engines[0]
    server_id = w.server_id(0)
    _unhealthy(w, engine, how='ERROR')
    engine.recovery_pass()
    engine.run_steps()
    assert _check_failed(w) == [w.places()[0]]
    w.user_clears_mark(0)
    engine.recovery_pass()
    assert engine.steps == ['ReplaceMarked %s' % server_id]
    engine.run_steps()
    assert [u for u in w.heat.updates if u.kind == 'recovery'] == []
    assert w.state(0) == 'UNHEALTHY'
    w.user_resets_target(0)
    assert w.state(0) == 'NO_DATA'
    assert _check_failed(w) == []


def test_a_refused_delete_of_a_server_on_a_host_down_is_not_sent_again(
        make_world):
    """A server on a host forced down is fenced by a delete, refused.

    Nova refuses to delete a locked server (409). Its fence was already
    a delete, yet with node_force_recreate the refusal was taken for a
    stop Nova would not do, and the same delete was sent again at once:
    two Nova actions in one attempt, both refused. Now the RECREATE
    fails at the first refusal, saying why. Explorer: seed 4245, 169
    steps (``server srv-0001 locked`` at step 120, ``host compute1
    forced down`` at 135, ``engine-2 runs Start srv-0001`` at 169).
    """
    w = make_world(engines=1, servers=2, pool=False, policy={'recovery': {
        'actions': [{'name': 'RECREATE'}], 'node_force_recreate': True}})
    engine = w.engines[0]
    engine.tick()
    w.advance(GRACE + 1)
    old = w.server_id(0)
    w.lock_server(0)
    w.host_forced_down(w.host_of(0))
    w.advance(2)
    engine.tick()
    engine.recovery_pass()
    engine.run_steps()
    assert [a.action for a in w.nova.refused
            if a.actor == 'recovery' and a.server_id == old] == ['delete']
    assert w.state(0) == 'UNHEALTHY'
    rows = w.db.real['event_get_recent']([w.policies[0].id], limit=50)
    assert any('Nova refused to delete server %s' % old in r.reason and
               r.reason.endswith('; not fenced') for r in rows)


def test_a_policy_kept_deleted_then_registered_again_drops_its_brake():
    """A policy kept deleted for its leftovers, then registered again.

    It came back live with the brake it had stored before its delete,
    and kept its row's creation, so its owner took it for the same policy
    and never stored the brake its servers now called for (none).
    Replayed by its seed: the delete that Octavia's failure turns into a
    kept policy, and the switch that registers it again, are the
    explorer's.
    """
    result = explore.explore(4900, 160)
    assert result.violation is None, '\n'.join(result.trace[-15:])
