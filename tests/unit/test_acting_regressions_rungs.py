"""Regressions of rungs outside Nova and of fencing, in the simulation.

As ``test_acting_regressions``: each drives the real tracker, recovery
loop and replacer through the world and asserts what the stack's owner
would notice.
"""

from tests.unit import test_acting_regressions as acting

HANG = {'name': 'wf-hang', 'type': 'MISTRAL_WORKFLOW'}
HARD = {'name': 'REBOOT', 'params': {'type': 'HARD'}}


def test_a_workflow_start_whose_answer_is_lost_is_followed_not_doubled(
        make_world):
    """Mistral creates the execution, its answer times out.

    The start was taken for a failure: the attempt escalated and a HARD
    reboot followed at once while the workflow still ran, never followed
    nor cancelled. Now the execution is found by its description and
    followed; the next rung comes only at the deadline, after it is
    cancelled.
    """
    w = make_world(servers=2, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, actions=[HANG, HARD])})
    acting._watching(w)
    w.mistral.lose_answers()
    acting._fails(w, 0)
    acting._recovery_pass(w.engines[0])
    [started] = w.mistral.started
    w.run(acting.VERIFY - 1)
    assert acting._nova(w, 0) == []
    assert w.state(0) == 'VERIFYING'
    assert acting._row(w, 0).recovery['execution'] == started.execution_id
    w.run_until(lambda: acting._nova(w, 0))
    assert w.mistral.executions[started.execution_id].state == 'CANCELLED'
    assert acting._nova(w, 0) == [('reboot', 'HARD')]
    assert len(w.mistral.started) == 1
    assert w.engines[0].errors == []
