"""Recovery: faults healed, or wisely not.

On real Nova (the tests marked ``real_nova``) each fault happens behind
Nova's back, or through its API as an admin's action, and the tests expect
what real Nova then shows: a guest that shut off or was suspended is
stopped by Nova's power sync and started again, one the hypervisor paused
stays ACTIVE and is rebooted hard. Those marked ``fakecloud`` need what
only fakecloud's simulated Nova does; each says what.
"""

import json
import time

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import server_faults as faults

POLLING = [{'type': 'NODE_STATUS_POLLING'}]
POWER_STATE = 'OS-EXT-STS:power_state'
TASK_STATE = 'OS-EXT-STS:task_state'
RUNNING = 1
# Nova actions Heat asks for to give a replaced server's ports to the new.
PORT_MOVES = ('detach_interface', 'attach_interface')


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    """Recovery runs with two engines: policies are shared between them."""
    with engines.peer(demo, tmp_path_factory, 'recovery-peer') as engine:
        yield engine


def _running(nova, server_id):
    server = nova.servers.get(server_id).to_dict()
    assert (server['status'], server[POWER_STATE], server[TASK_STATE]) == (
        'ACTIVE', RUNNING, None), server


@pytest.mark.real_nova
def test_stopped_paused_suspended_get_the_cheapest_action(demo, admin,
                                                          stacks, admin_nova):
    """Each guest is brought back where it is, by what Nova allows.

    Nova stops a guest that shut off or was suspended behind its back:
    START. It leaves ACTIVE a guest the hypervisor paused, and refuses to
    unpause an ACTIVE server: a hard reboot.
    """
    stack, targets = h.heal_stack(stacks, demo, 'heal-states')
    servers = [t['server_id'] for t in sorted(targets.values(),
                                              key=lambda t: t['path'])]
    broken = dict(zip(servers, ['pause', 'power_off', 'suspend']))
    for done, (server_id, fault) in enumerate(broken.items(), 1):
        # One after the other: three at once in a group of three would be
        # a mass failure, which brakes.
        faults.break_server(admin, server_id, fault)
        healed = demo.wait_for(
            lambda: h.all_healthy(demo, stack, 3) if len(
                h.started(h.events(demo, stack))) >= done else None,
            'the %s server healed' % fault, timeout=90)
    # The same servers: nothing was recreated.
    assert sorted(t['server_id'] for t in healed.values()) == sorted(servers)
    started = {e['server_id']: e['reason'] for e in h.started(
        h.events(demo, stack))}
    assert started[servers[0]].startswith('REBOOT HARD'), started
    assert started[servers[1]].startswith('START'), started
    assert started[servers[2]].startswith('START'), started
    # One action asked of Nova for each, and each running again.
    assert [faults.requested(admin, s) for s in servers] == [
        ['reboot'], ['start'], ['start']]
    for server_id in servers:
        _running(admin_nova, server_id)
    recovered = [e for e in h.events(demo, stack)
                 if e['old_state'] == 'VERIFYING' and
                 e['new_state'] == 'HEALTHY']
    assert {e['server_id'] for e in recovered} == set(servers)


@pytest.mark.real_nova
@pytest.mark.guest_operation_faults
def test_error_is_recreated_with_a_new_id(demo, admin, stacks):
    stack, targets = h.heal_stack(stacks, demo, 'heal-error', count=2,
                                  recovery=h.RECREATE_ONLY)
    victim = targets['workers/0']['server_id']
    # A suspend that fails in the hypervisor: Nova sets ERROR.
    faults.break_server(admin, victim, 'error')
    healed = h.wait_replaced(demo, stack, 'workers/0', victim, 2,
                             timeout=120)
    assert healed['workers/1']['server_id'] == targets['workers/1'][
        'server_id']
    # The new server may serve before Heat ends the update of the group's
    # stack (only it is updated: the root is left as it was).
    group = h.holder(demo, stack, 'workers/0')
    demo.wait_for(lambda: h.stack_status(demo, group) != 'UPDATE_IN_PROGRESS',
                  'the update by recovery ended', timeout=60)
    assert h.stack_status(demo, group) == 'UPDATE_COMPLETE'
    assert h.stack_status(demo, stack) == 'CREATE_COMPLETE'
    # Exactly one replacement was made.
    replaced = [e for e in h.events(demo, stack)
                if e['reason'] and 'replaced by' in e['reason']]
    assert len(replaced) == 1, replaced


@pytest.mark.real_nova
def test_vanished_server_is_recreated(demo, admin, stacks):
    # An admin's delete is an intent the policy is told to override.
    stack, targets = h.heal_stack(stacks, demo, 'heal-vanish', count=2,
                                  recovery={'respect_user_actions': False})
    victim = targets['workers/1']['server_id']
    # Deleted behind Heat's back, by an admin.
    faults.break_server(admin, victim, 'delete')
    healed = h.wait_replaced(demo, stack, 'workers/1', victim, 2,
                             timeout=120)
    assert healed['workers/0']['server_id'] == targets['workers/0'][
        'server_id']


@pytest.mark.real_nova
def test_observe_never_acts(demo, admin, stacks, demo_nova):
    stack, targets = h.heal_stack(stacks, demo, 'heal-observe', count=2,
                                  recovery={'mode': 'OBSERVE'})
    victim = targets['workers/0']['server_id']
    faults.break_server(admin, victim, 'power_off')
    demo.wait_for(lambda: h.targets(demo, stack)['workers/0']['state'] ==
                  'UNHEALTHY', 'the stopped server UNHEALTHY', timeout=30)
    # Three ticks of the recovery loop and a status poll later: nothing.
    time.sleep(6)
    assert h.targets(demo, stack)['workers/0']['state'] == 'UNHEALTHY'
    assert demo_nova.servers.get(victim).status == 'SHUTOFF'
    assert not h.started(h.events(demo, stack))
    # Nova stopped it on its own; nobody asked for anything.
    assert [(a.name, a.requested) for a in faults.actions(
        admin, victim) if a.name != 'create'] == [('stop', False)]
    policy = h.policy(demo, stack)
    assert (policy['recovery_mode'], policy['braked']) == ('OBSERVE', None)


@pytest.mark.real_nova
def test_mass_failure_brakes_then_heals_what_is_left(demo, admin, stacks,
                                                     demo_nova):
    stack, targets = h.heal_stack(stacks, demo, 'heal-brake', count=4,
                                  recovery={'max_concurrent': 4})
    servers = [targets['workers/%d' % n]['server_id'] for n in range(4)]
    for server_id in servers[:3]:
        faults.break_server(admin, server_id, 'power_off')
    policy = demo.wait_for(
        lambda: (lambda p: p if p['braked'] else None)(h.policy(demo, stack)),
        'the policy to brake', timeout=30)
    assert '3 of 4' in policy['braked']
    time.sleep(5)
    assert not h.started(h.events(demo, stack)), h.events(demo, stack)
    assert [demo_nova.servers.get(s).status for s in servers[:3]] == [
        'SHUTOFF'] * 3
    # An operator starts two (as if the platform came back): the brake
    # lets go and the third is healed.
    for server_id in servers[:2]:
        faults.break_server(admin, server_id, 'reset')
    demo.wait_for(lambda: h.all_healthy(demo, stack, 4),
                  'every server HEALTHY again', timeout=90)
    started = h.started(h.events(demo, stack))
    assert [e['server_id'] for e in started] == [servers[2]], started
    assert h.policy(demo, stack)['braked'] is None


@pytest.mark.real_nova
def test_recovery_steps_in_heats_event_list(demo, admin, stacks):
    stack, targets = h.heal_stack(stacks, demo, 'heal-events', count=1)
    victim = targets['workers/0']['server_id']
    faults.break_server(admin, victim, 'pause')
    demo.wait_for(lambda: h.all_healthy(demo, stack, 1) and h.started(
        h.events(demo, stack)), 'the server healed', timeout=90)
    events = demo.events(stack['stack_name'], nested_depth=2)
    reasons = [e.get('resource_status_reason') or '' for e in events
               if e.get('resource_name') == '0']
    assert any('REBOOT HARD' in r for r in reasons), events


@pytest.mark.real_nova
def test_owner_and_trust_unchanged_after_a_recreate(demo, admin, stacks):
    if not h.local_deployment():
        pytest.skip('reads the local deployment\'s Heat database')
    stack, targets = h.heal_stack(stacks, demo, 'heal-owner', count=1,
                                  recovery=h.RECREATE_ONLY)
    before = demo.json('stack', 'show', stack['stack_name'])
    owner = h.stack_owner(stack['id'])
    assert owner['trust_id'], owner
    victim = targets['workers/0']['server_id']
    faults.break_server(admin, victim, 'crash')
    h.wait_replaced(demo, stack, 'workers/0', victim, 1,
                    timeout=150)
    after = demo.json('stack', 'show', stack['stack_name'])
    assert after['stack_owner'] == before['stack_owner']
    assert after['stack_user_project_id'] == before['stack_user_project_id']
    assert h.stack_owner(stack['id']) == owner


@pytest.mark.real_nova
@pytest.mark.guest_operation_faults
def test_explicit_ladder_escalates_from_reboot_to_recreate(demo, admin,
                                                           stacks):
    ladder = {'actions': [{'name': 'REBOOT', 'params': {'type': 'SOFT'}},
                          {'name': 'RECREATE'}],
              'backoff_initial': 1, 'backoff_max': 2}
    stack, targets = h.heal_stack(stacks, demo, 'heal-ladder', count=2,
                                  modes=h.POLL_URL, recovery=ladder,
                                  verify_timeout=15)
    victim = targets['workers/0']['server_id']
    # The application hangs and the reboot fails in the hypervisor: a
    # reboot does not help, a new server does.
    faults.break_server(admin, victim, 'broken')
    healed = h.wait_replaced(demo, stack, 'workers/0', victim, 2,
                             timeout=150)
    assert healed['workers/1']['server_id'] == targets['workers/1'][
        'server_id']
    # Heat deletes the replaced server once the new one is in place: the
    # new one may be verified HEALTHY before that.
    demo.wait_for(lambda: 'delete' in faults.requested(admin, victim),
                  'Heat deleting the replaced server', timeout=60)
    # The reboot, then Heat's deletion of the replaced server (once it
    # has moved the server's ports to the new one).
    assert [a for a in faults.requested(admin, victim)
            if a not in PORT_MOVES] == ['reboot', 'delete']
    started = [e['reason'].split(' ')[0] for e in reversed(
        h.started(h.events(demo, stack)))]
    assert started == ['REBOOT', 'RECREATE'], started
    assert any(e['reason'].startswith('escalated') for e in
               h.events(demo, stack)), h.events(demo, stack)


@pytest.mark.real_nova
@pytest.mark.guest_operation_faults
def test_stuck_task_gets_the_action_of_the_state_nova_settles_in(
        demo, admin, stacks, admin_nova):
    stack, targets = h.heal_stack(stacks, demo, 'heal-stuck', count=2)
    victim = targets['workers/0']['server_id']
    # The hypervisor never ends a pause an admin asked for: the guest
    # still runs (seed 003: pausing, active, RUNNING settles active), its
    # application answers; Nova refuses everything but a hard reboot
    # while the task is stuck. Status polling sees the task outlast
    # node_update_timeout.
    faults.break_server(admin, victim, 'stuck', operation='pause')
    healed = demo.wait_for(lambda: h.all_healthy(demo, stack, 2) if h.started(
        h.events(demo, stack)) else None, 'the stuck server healed',
        timeout=120)
    assert healed['workers/0']['server_id'] == victim
    [started] = h.started(h.events(demo, stack))
    assert started['reason'].startswith('REBOOT HARD'), started
    _running(admin_nova, victim)
    assert faults.requested(admin, victim) == ['pause', 'reboot']


def _starts(admin, server_id):
    """When Nova accepted each start asked of the server, oldest first."""
    return [a.time for a in faults.actions(admin, server_id)
            if a.requested and a.name == 'start']


@pytest.mark.real_nova
def test_a_server_that_keeps_failing_backs_off_then_is_given_up(
        demo, admin, stacks):
    recovery = {'actions': [{'name': 'START'}], 'max_attempts': 3,
                'backoff_initial': 6, 'backoff_max': 30, 'backoff_jitter': 0,
                'healthy_reset': 600}
    stack, targets = h.heal_stack(stacks, demo, 'heal-flap', count=2,
                                  recovery=recovery)
    victim = targets['workers/0']['server_id']
    issued = []
    for attempt in range(3):
        faults.break_server(admin, victim, 'power_off')
        demo.wait_for(lambda: len(_starts(admin, victim)) > attempt,
                      'start number %d' % (attempt + 1), timeout=60)
        issued.append(_starts(admin, victim)[-1])
        demo.wait_for(lambda: h.targets(demo, stack)['workers/0'][
            'state'] == 'HEALTHY', 'healthy again', timeout=30)
    faults.break_server(admin, victim, 'power_off')
    target = demo.wait_for(
        lambda: (lambda t: t if t['state'] == 'GAVE_UP' else None)(
            h.targets(demo, stack)['workers/0']), 'GAVE_UP', timeout=60)
    assert 'gave up after 3 attempts' in target['reason'], target
    # The server fails again at once each time; the starts are spaced by
    # the back-off: at least 6 s, then at least 12 s (Nova's whole seconds
    # of gaps that long are as long).
    gaps = [b - a for a, b in zip(issued, issued[1:])]
    assert gaps[0] >= 6 and gaps[1] >= 12, gaps
    assert [e for e in h.events(demo, stack) if e['new_state'] ==
            'SUPPRESSED' and 'backing off' in e['reason']]
    time.sleep(3)
    assert len(_starts(admin, victim)) == 3
    resource = demo.resource(stack['stack_name'], 'workers')
    member = demo.json('stack', 'resource', 'show',
                       resource['physical_resource_id'], '0')
    # Given up is said in the events, not by a mark that the next stack
    # update would act on.
    assert member['resource_status'] != 'CHECK_FAILED', member
    demo.wait_for(lambda: [
        e for e in demo.events(stack['stack_name'], nested_depth=2)
        if 'gave up' in (e.get('resource_status_reason') or '')],
        'the stack event saying it gave up', timeout=15)
    # An operator starts the server, the user says it is fine: the
    # given-up target starts again.
    faults.break_server(admin, victim, 'reset')
    reply = demo.patch_resource(stack, victim, {'mark_unhealthy': False})
    assert reply.status_code == 200, reply.text
    demo.wait_for(lambda: h.targets(demo, stack)['workers/0']['state'] in (
        'NO_DATA', 'HEALTHY'), 'the target reset', timeout=30)


# Nova's API made to fail for a while: only fakecloud's does on demand.
@pytest.mark.fakecloud
def test_nova_errors_mean_no_action(demo, admin, stacks):
    stack, targets = h.heal_stack(stacks, demo, 'heal-blind', count=2)
    victim = targets['workers/0']['server_id']
    since = h.timeline(admin)[-1]['seq']
    assert admin.inject_api_fault('api_errors', duration=20).status_code \
        == 200
    assert admin.inject_fault(victim, 'power_off').status_code == 200
    demo.wait_for(lambda: h.targets(demo, stack)['workers/0']['state'] ==
                  'UNHEALTHY', 'the notification seen', timeout=30)
    policy = demo.wait_for(
        lambda: (lambda p: p if p['braked'] else None)(h.policy(demo, stack)),
        'the brake', timeout=30)
    assert 'Nova' in policy['braked'], policy
    actions = [e for e in h.timeline(admin) if e['seq'] > since and
               e['event'].startswith('action:')]
    assert actions == []
    # Nova answers again: the brake lets go and the server is started.
    demo.wait_for(lambda: h.all_healthy(demo, stack, 2), 'healed after the '
                  'errors ended', timeout=120)
    actions = [e['event'] for e in h.timeline(admin) if e['seq'] > since and
               e['event'].startswith('action:')]
    assert actions == ['action:os-start'], actions


@pytest.mark.real_nova
def test_no_action_while_the_user_updates_the_stack(demo, admin, stacks):
    stack, targets = h.heal_stack(stacks, demo, 'heal-busy', count=2)
    victim = targets['workers/0']['server_id']
    # The user's own update, which takes 30 s.
    demo.run('stack', 'update', '--existing', stack['stack_name'],
             '--parameter', 'setting=two', '--parameter', 'update_wait=30')
    assert h.stack_status(demo, stack) == 'UPDATE_IN_PROGRESS'
    faults.break_server(admin, victim, 'power_off')
    demo.wait_for(lambda: [e for e in h.events(demo, stack)
                           if e['new_state'] == 'SUPPRESSED' and
                           'UPDATE_IN_PROGRESS' in e['reason']],
                  'the failure held', timeout=30, interval=0.5)
    while h.stack_status(demo, stack) == 'UPDATE_IN_PROGRESS':
        # Nova's own stop of the guest that shut off is no one's request.
        assert not faults.requested(admin, victim)
        time.sleep(0.2)
    done = time.time()
    assert h.stack_status(demo, stack) == 'UPDATE_COMPLETE'
    demo.wait_for(lambda: h.all_healthy(demo, stack, 2), 'healed after the '
                  'update', timeout=60)
    [started] = [a for a in faults.actions(admin, victim)
                 if a.requested and a.name != 'create']
    assert started.name == 'start'
    # Nova keeps whole seconds of when it accepted it.
    assert started.time > done - 1.5, (started, done)


# The application's hang and its health URL are the fault driver's.
@pytest.mark.real_nova
@pytest.mark.guest_operation_faults
def test_fencing_stops_the_old_server_before_the_new_one_exists(
        demo, admin, stacks):
    recovery = dict(h.RECREATE_ONLY, fencing=['COMPUTE'])
    stack, targets = h.heal_stack(stacks, demo, 'heal-fence', count=1,
                                  modes=h.POLL_URL, recovery=recovery)
    victim = targets['workers/0']['server_id']
    faults.break_server(admin, victim, 'hang')
    healed = h.wait_replaced(demo, stack, 'workers/0', victim, 1,
                             timeout=150)
    new = healed['workers/0']['server_id']
    stop = [a for a in faults.actions(admin, victim)
            if a.requested and a.name != 'create'][0]
    [create] = [a for a in faults.actions(admin, new) if a.name == 'create']
    # Stopped, and done stopping, before the new server was asked for
    # (Nova keeps whole seconds: the same second is not later).
    assert stop.name == 'stop', stop
    assert stop.finished is not None, stop
    assert stop.time <= stop.finished <= create.time, (stop, create)


@pytest.mark.real_nova
def test_autoscaling_group_keeps_its_size(demo, admin, stacks):
    stack = stacks('heal-asg', 'heal_asg.yaml',
                   'recovery=%s' % json.dumps(dict(
                       h.RECREATE_ONLY, respect_user_actions=False)))
    targets = demo.wait_for(lambda: h.all_healthy(demo, stack, 1),
                            'the member HEALTHY')
    [victim] = [t['server_id'] for t in targets.values()]
    faults.break_server(admin, victim, 'delete')
    healed = h.wait_member_recreated(demo, stack, victim, timeout=150)
    assert len(healed) == 1


@pytest.mark.real_nova
@pytest.mark.guest_operation_faults
def test_a_task_nova_never_ends_is_seen_by_status_polling(demo, admin,
                                                          stacks):
    stack, targets = h.heal_stack(
        stacks, demo, 'heal-stuck-poll', count=2, modes=POLLING,
        verify_timeout=15)
    victim = targets['workers/1']['server_id']
    # The hypervisor never ends a suspend an admin asked for.
    faults.break_server(admin, victim, 'stuck', operation='suspend')
    # Stuck once the task outlasts node_update_timeout (30 s at least);
    # the guest still runs, so suspending settles active: a soft reboot
    # is refused while the task is stuck, a hard reboot is not.
    demo.wait_for(
        lambda: h.targets(demo, stack)['workers/1']['state'] != 'HEALTHY',
        'the stuck server failed', timeout=90)
    # Read from the timeline: recovery may have started since.
    detected = [e for e in h.events(demo, stack)
                if e['server_id'] == victim and
                e['new_state'] == 'UNHEALTHY']
    assert detected and 'suspending stuck' in detected[-1]['reason'], (
        detected)
    healed = demo.wait_for(lambda: h.all_healthy(demo, stack, 2) if
                           h.started(h.events(demo, stack)) else None,
                           'the stuck server healed', timeout=60)
    assert healed['workers/1']['server_id'] == victim
    [started] = h.started(h.events(demo, stack))
    assert started['reason'].startswith('REBOOT HARD'), started
