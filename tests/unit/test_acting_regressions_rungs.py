"""Regressions of rungs outside Nova and of fencing, in the simulation.

As ``test_acting_regressions``: each drives the real tracker, recovery
loop and replacer through the world and asserts what the stack's owner
would notice.
"""

from mistralclient.api import base as mistral_base

from tests.unit import test_acting_regressions as acting

HANG = {'name': 'wf-hang', 'type': 'MISTRAL_WORKFLOW'}
HARD = {'name': 'REBOOT', 'params': {'type': 'HARD'}}
# The policy's default seconds for a fencing stop to show.
NODE_DELETE_TIMEOUT = 20


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


def _mistral_silent(w, times):
    """Mistral answers nothing the next ``times`` reads or cancels."""
    for call in ('list', 'get', 'update'):
        w.mistral.faults.add(call, mistral_base.APIException(
            503, 'Service Unavailable'), times)


def test_an_unanswered_start_mistral_cannot_look_up_holds_the_next_rung(
        make_world):
    """The start's answer is lost and Mistral cannot be asked for a while.

    At the deadline the attempt escalated and a HARD reboot followed
    while the unfound execution still ran. Now the next rung waits until
    Mistral says the execution is over, cancelled first.
    """
    w = make_world(servers=2, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, actions=[HANG, HARD])})
    acting._watching(w)
    w.mistral.lose_answers()
    _mistral_silent(w, 1000)
    acting._fails(w, 0)
    acting._recovery_pass(w.engines[0])
    [started] = w.mistral.started
    w.run(3 * acting.VERIFY)
    assert acting._nova(w, 0) == []
    assert w.state(0) == 'VERIFYING'
    assert 'may still be running' in acting._row(w, 0).state_reason
    w.mistral.faults.clear()
    w.run_until(lambda: acting._nova(w, 0))
    assert w.mistral.executions[started.execution_id].state == 'CANCELLED'
    assert acting._nova(w, 0) == [('reboot', 'HARD')]


def test_a_workflow_a_user_s_reset_left_running_is_cancelled_first(
        make_world):
    """The user says the server is healthy while its workflow runs.

    The reset forgot the execution: when the server failed again, a new
    attempt started a second one beside it. The execution is kept
    through the reset and cancelled before the next attempt acts.
    """
    w = make_world(servers=2, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, actions=[HANG, HARD])})
    acting._watching(w)
    acting._fails(w, 0)
    acting._recovery_pass(w.engines[0])
    [first] = w.mistral.started
    w.mark_healthy(0)
    w.advance(2)
    w.break_server(0, 'SHUTOFF')
    w.run_until(lambda: len(w.mistral.started) > 1 or acting._nova(w, 0))
    assert w.mistral.executions[first.execution_id].state == 'CANCELLED'
    running = [x for x in w.mistral.executions.values()
               if x.state == 'RUNNING']
    assert len(running) <= 1, running


def _recreating(make_world, **recovery):
    """A world whose servers are recreated, fenced by a stop first.

    Paused and suspended through Nova's API, as the world breaks them: a
    policy that heals whatever stopped its servers.
    """
    w = make_world(servers=2, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, actions=[{'name': 'RECREATE'}],
        fencing=['COMPUTE'], max_attempts=2, respect_user_actions=False,
        **recovery)})
    acting._watching(w)
    return w


def _replaced_or_given_up(w, index, old):
    w.run_until(lambda: w.heat.replacements or
                w.state(index) == 'GAVE_UP', seconds=300)


def test_a_lost_guest_is_fenced_as_it_is_and_replaced(make_world):
    """ACTIVE, power NOSTATE: Nova accepts the STOP and reverts it.

    The server never showed stopped: each attempt waited
    node_delete_timeout and the target ended GAVE_UP. A guest Nova does
    not find on its host cannot write: it is fenced, and replaced.
    """
    w = _recreating(make_world)
    old = w.server_id(0)
    w.break_server(0, 'VANISHED')
    _replaced_or_given_up(w, 0, old)
    assert w.state(0) != 'GAVE_UP'
    assert w.server_id(0) != old
    assert [(r.old, r.outcome) for r in w.heat.replacements] == [
        (old, 'replaced')]
    assert 'fenced: server %s is not running (power state NOSTATE)' % old \
        in acting._timeline(w, 'RECOVERING')
    w.run_until(lambda: w.state(0) == 'HEALTHY')


def test_a_suspended_server_is_fenced_without_a_stop(make_world):
    """Nova refuses to stop a suspended server (409).

    The refusal was swallowed, the server waited for and given up on.
    Its guest does not run: it is fenced at once and replaced.
    """
    w = _recreating(make_world)
    old = w.server_id(0)
    w.break_server(0, 'SUSPENDED')
    _replaced_or_given_up(w, 0, old)
    assert w.server_id(0) != old
    assert 'fenced: server %s is suspended' % old in acting._timeline(
        w, 'RECOVERING')


def test_a_paused_server_nova_will_not_stop_is_deleted_when_allowed(
        make_world):
    """A paused guest may run on: it is not fenced.

    With node_force_recreate it is deleted at once, not after
    node_delete_timeout, and replaced.
    """
    w = _recreating(make_world, node_force_recreate=True)
    old = w.server_id(0)
    w.break_server(0, 'PAUSED')
    # The policy's node_delete_timeout (20 s) is not waited.
    w.run_until(lambda: w.heat.replacements, seconds=NODE_DELETE_TIMEOUT)
    assert w.server_id(0) != old
    fencing = [r for r in acting._timeline(w, 'RECOVERING')
               if r.startswith('fencing')]
    assert fencing[-1].startswith('fencing: Nova refused to stop server '
                                  '%s (PAUSED)' % old)
    assert fencing[-1].endswith('deleting it')
    assert [a.action for a in w.accepted() if a.server_id == old] == [
        'delete']


def test_a_paused_server_is_not_taken_for_fenced(make_world):
    """Without node_force_recreate the RECREATE fails at once.

    It says why, and the paused server is never replaced unfenced.
    """
    w = _recreating(make_world)
    old = w.server_id(0)
    w.break_server(0, 'PAUSED')
    w.run(acting.GRACE)
    failed = acting._timeline(w, 'UNHEALTHY')
    assert any('Nova refused to stop server %s (PAUSED)' % old in r and
               r.endswith('; not fenced') for r in failed), failed
    _replaced_or_given_up(w, 0, old)
    assert w.server_id(0) == old
    assert w.heat.replacements == []


def _evidence(w):
    """The detail of each evidence row of the policy's timeline."""
    rows = w.db.real['event_get_recent']([w.policies[0].id], limit=500)
    return [(r.server_id, r.reason, r.detail) for r in reversed(rows)
            if r.new_state == 'EVIDENCE']


def test_a_recreated_server_s_crash_evidence_is_kept(make_world):
    """Heat deletes the replaced server with its console and fault.

    Nothing of them was kept: the operator lost what would tell why it
    failed. They are read before it is fenced and kept with the
    incident.
    """
    w = _recreating(make_world)
    old = w.server_id(0)
    w.break_server(0, 'ERROR')
    w.run_until(lambda: w.heat.replacements, seconds=120)
    [(server_id, reason, detail)] = _evidence(w)
    assert server_id == old
    assert reason.startswith('crash evidence of server %s kept before '
                             'RECREATE' % old)
    assert detail['console'].endswith('guest: ERROR')
    assert detail['fault']['message'] == 'guest crashed'
    assert [a['action'] for a in detail['instance_actions']] == []
    assert detail['poll_url'] is None
    # Read before the server was stopped.
    order = [r.reason for r in reversed(w.db.real['event_get_recent'](
        [w.policies[0].id], limit=500))]
    assert order.index(reason) < order.index(
        'fencing: stopping server %s' % old)


def test_crash_evidence_is_kept_when_recovery_gives_up(make_world):
    """A server recovery gives up on keeps its evidence too."""
    w = make_world(servers=2, pool=False, policy={'recovery': dict(
        acting.NO_JITTER, actions=[{'name': 'START'}], max_attempts=1)})
    acting._watching(w)
    acting._given_up(w, 0)
    [(server_id, reason, detail)] = _evidence(w)
    assert server_id == w.server_id(0)
    assert 'kept at GAVE_UP' in reason
    assert detail['console'].endswith('guest: SHUTOFF')
    assert detail['instance_actions'][0]['action'] == 'stop'
    assert detail['instance_actions'][0]['user_id'] is None
