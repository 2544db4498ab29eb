"""The checker judges each effect of recovery by the world's ground truth.

Each test scripts a world in which an effect rests on no fresh evidence
(or on none at all), and asserts that the checker names it, so that the
seeded explorer can find such effects too.
"""

from heat_health.policy import spec as policy_spec
from tests.simulation import invariants
from tests.simulation import truth
from tests.simulation import world as world_mod
from tests.unit.test_simulation_findings import _unhealthy
from tests.unit.test_simulation_findings import GRACE


def _step(checker, engine, op, do):
    step = invariants.Step(op, engine, op)
    checker.before(step)
    do()
    return checker.after(step)


def test_the_bound_is_two_intervals_and_ten_seconds_by_default():
    assert truth.evidence_seconds({'detection': {'interval': 5}}) == 20


def test_a_poll_url_adds_its_longest_check_as_the_readme_says():
    """The checker holds the product to its documented bound, no other."""
    spec = {'detection': {'interval': 5,
                          'detection_modes': [world_mod.URL_MODE]}}
    bound = truth.evidence_seconds(spec)
    assert bound > 20
    assert bound == policy_spec.PolicySpec.parse(spec).evidence_seconds


def test_an_action_on_a_server_healed_while_paused_is_found(make_world):
    """A stored intent carried out after a pause, on a healed server."""
    w = make_world(engines=1, servers=3, pool=False, policy={
        'recovery': {'actions': [{'name': 'REBOOT',
                                  'params': {'type': 'HARD'}}]}})
    checker = invariants.Checker(w)
    try:
        engine = w.engines[0]
        _unhealthy(w, engine, how='GUEST_PAUSED')
        _step(checker, engine, 'pass', engine.recovery_pass)
        assert engine.steps
        w.pause()
        w.heal_server(0)
        w.advance(600)
        w.unpause()
        checker.after(invariants.Step('advance'))
        found = _step(checker, engine, 'run', engine.run_steps)
        stale = [f for f in found if 'Nova action reboot' in f]
        if not w.accepted():
            # The acting core re-read the evidence and did nothing.
            assert stale == []
        else:
            assert stale and 'last seen failing 600s before' in stale[0], \
                found
    finally:
        checker.close()


def test_a_start_of_a_server_its_user_stopped_is_found(make_world):
    """A user's deliberate stop through Nova's API, reversed."""
    w = make_world(engines=1, servers=3, pool=False)
    checker = invariants.Checker(w)
    try:
        engine = w.engines[0]
        engine.tick()
        w.advance(GRACE + 1)
        checker.after(invariants.Step('advance'))
        w.user_nova('stop', 0)
        w.advance(4)
        checker.after(invariants.Step('user_stop'))
        found = []
        for _second in range(30):
            found += _step(checker, engine, 'tick', engine.tick)
            found += _step(checker, engine, 'pass', engine.recovery_pass)
            found += _step(checker, engine, 'run', engine.run_steps)
            w.advance(1)
        started = [a for a in w.accepted() if a.action == 'start']
        reversed_ = [f for f in found if 'which its user stopped' in f]
        assert bool(started) == bool(reversed_), found
    finally:
        checker.close()


def test_evidence_from_before_a_treatment_does_not_justify_the_next(
        make_world):
    """An effect right after a treatment that healed needs new evidence."""
    w = make_world(engines=1, servers=2, pool=False)
    checker = invariants.Checker(w)
    try:
        found = truth.Truth(w, checker._places, checker._spec)
        try:
            server_id = w.server_id(0)
            w.break_server(0, 'SHUTOFF')
            w.advance(2)
            found.sample()
            assert found.unjustified('policy-0', server_id, 'x') is None
            w.nova.client('recovery', w.policies[0].stack_id) \
                .servers.start(server_id)
            w.advance(5)
            found.sample()
            assert 'not seen failing since its last treatment' in \
                found.unjustified('policy-0', server_id, 'reboot')
        finally:
            found.close()
    finally:
        checker.close()
