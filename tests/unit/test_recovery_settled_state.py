"""The state Nova settles a server in after an interrupted operation, and
the recovery actions each state calls for."""

import pytest

from heat_health.engine.recovery import settled_state as ss

# The table of Nova's controlled operations, row by row as written there:
# (crashed task state, crashed vm_state, actual power state, recovered).
SEED_ROWS = [
    ('rebooting', 'active', 'ACTIVE', 'active'),
    ('rebooting', 'active', 'SHUTDOWN', 'stopped'),
    ('rebooting', 'stopped', 'ACTIVE', 'active'),
    ('rebooting', 'stopped', 'SHUTDOWN', 'stopped'),
    ('rebooting_hard', 'active', 'ACTIVE', 'active'),
    ('rebooting_hard', 'active', 'SHUTDOWN', 'stopped'),
    ('rebooting_hard', 'stopped', 'ACTIVE', 'active'),
    ('rebooting_hard', 'stopped', 'SHUTDOWN', 'stopped'),
    ('powering-off', 'active', 'ACTIVE', 'active'),
    ('powering-off', 'active', 'SHUTDOWN', 'stopped'),
    ('powering-off', 'rescued', 'ACTIVE', 'rescued'),
    ('powering-off', 'rescued', 'SHUTDOWN', 'stopped'),
    ('powering-off', 'error', 'SHUTDOWN', 'stopped'),
    ('powering-off', 'error', 'ERROR', 'error'),
    ('stopping', 'active', 'ACTIVE', 'active'),
    ('stopping', 'active', 'SHUTDOWN', 'stopped'),
    ('stopping', 'rescued', 'ACTIVE', 'rescued'),
    ('stopping', 'rescued', 'SHUTDOWN', 'stopped'),
    ('stopping', 'error', 'SHUTDOWN', 'stopped'),
    ('stopping', 'error', 'ERROR', 'error'),
    ('powering-on', 'stopped', 'SHUTDOWN', 'stopped'),
    ('powering-on', 'stopped', 'ACTIVE', 'active'),
    ('starting', 'stopped', 'SHUTDOWN', 'stopped'),
    ('starting', 'stopped', 'ACTIVE', 'active'),
    ('pausing', 'active', 'ACTIVE', 'active'),
    ('pausing', 'active', 'PAUSED', 'paused'),
    ('pausing', 'rescued', 'ACTIVE', 'rescued'),
    ('pausing', 'rescued', 'PAUSED', 'paused'),
    ('unpausing', 'paused', 'PAUSED', 'paused'),
    ('unpausing', 'paused', 'ACTIVE', 'active'),
    ('suspending', 'active', 'ACTIVE', 'active'),
    ('suspending', 'active', 'SUSPENDED', 'suspended'),
    ('suspending', 'rescued', 'ACTIVE', 'rescued'),
    ('suspending', 'rescued', 'SUSPENDED', 'suspended'),
    ('resuming', 'suspended', 'SUSPENDED', 'suspended'),
    ('resuming', 'suspended', 'ACTIVE', 'active'),
]

# The integer Nova's API gives for the seed's power names.
CODES = {'ACTIVE': 1, 'PAUSED': 3, 'SHUTDOWN': 4, 'ERROR': 6,
         'SUSPENDED': 7}

SOFT = ('REBOOT', {'type': 'SOFT'})
HARD = ('REBOOT', {'type': 'HARD'})
START = ('START', {})
UNPAUSE = ('UNPAUSE', {})
RESUME = ('RESUME', {})
RECREATE = ('RECREATE', {})


@pytest.mark.parametrize('task,vm,power,recovered', SEED_ROWS)
def test_seed_row(task, vm, power, recovered):
    assert ss.settled(task, vm, power) == recovered
    assert ss.settled(task, vm, CODES[power]) == recovered


def test_every_table_entry_is_a_seed_row():
    rows = {(t, v, ss.power_name(p)): r for t, v, p, r in SEED_ROWS}
    assert rows == ss.SETTLED


@pytest.mark.parametrize('task,vm,power,recovered', [
    r for r in SEED_ROWS if r[0] in ('rebooting', 'rebooting_hard')])
def test_reboot_phases_settle_as_their_reboot(task, vm, power, recovered):
    for phase in ('_pending', '_started'):
        name = task.replace('rebooting', 'reboot' + phase)
        assert ss.settled(name, vm, CODES[power]) == recovered


@pytest.mark.parametrize('value,name', [
    (0, 'NOSTATE'), (1, 'RUNNING'), (3, 'PAUSED'), (4, 'SHUTDOWN'),
    (6, 'CRASHED'), (7, 'SUSPENDED'), ('1', 'RUNNING'),
    ('running', 'RUNNING'), ('Shutdown', 'SHUTDOWN'), ('ACTIVE', 'RUNNING'),
    ('ERROR', 'CRASHED'), ('pending', 'NOSTATE'), (None, 'NOSTATE'),
    (2, 'NOSTATE'), ('bogus', 'NOSTATE')])
def test_power_names(value, name):
    assert ss.power_name(value) == name


@pytest.mark.parametrize('task,vm,power,recovered', [
    # Off the table: the power state decides.
    ('rebooting', 'error', 1, 'active'),
    ('rebooting', 'paused', 4, 'stopped'),
    ('powering-on', 'stopped', 6, 'stopped'),
    ('powering-on', 'stopped', 3, 'paused'),
    ('unpausing', 'paused', 7, 'suspended'),
    ('resuming', 'suspended', 4, 'stopped'),
    ('deleting', 'active', 4, 'stopped'),
    ('image_snapshot', 'active', 1, 'active'),
    # Nothing known of the guest: the vm_state stands.
    ('rebooting', 'active', 0, 'active'),
    ('pausing', 'rescued', None, 'rescued'),
    # A deleted server is not revived by its power state.
    ('deleting', 'soft-delete', 1, 'soft-delete'),
    ('deleting', 'deleted', 1, 'deleted'),
    ('rebooting', None, 1, 'missing'),
])
def test_off_the_table(task, vm, power, recovered):
    assert ss.settled(task, vm, power) == recovered


def test_without_a_task_the_vm_state_stands():
    assert ss.settled(None, 'active', 4) == 'active'
    assert ss.settled('', 'stopped', 1) == 'stopped'


@pytest.mark.parametrize('vm,action', [
    ('active', SOFT), ('stopped', START), ('paused', UNPAUSE),
    ('suspended', RESUME), ('error', HARD),
    # Nova refuses a reboot, start or rebuild of these: only a new server.
    ('rescued', RECREATE), ('resized', RECREATE), ('building', RECREATE),
    ('shelved', RECREATE), ('shelved_offloaded', RECREATE),
    ('soft-delete', RECREATE), ('deleted', RECREATE), ('missing', RECREATE),
    (None, RECREATE), ('something-new', RECREATE),
])
def test_action_for_every_vm_state(vm, action):
    assert ss.action_for(vm) == action


def test_every_vm_state_has_an_action():
    for vm in ss.VM_STATES:
        name, params = ss.action_for(vm)
        assert name in ss.ACTIONS
        assert isinstance(params, dict)


@pytest.mark.parametrize('alias,action', [
    ('SHUTOFF', START), ('ACTIVE', SOFT), ('PAUSED', UNPAUSE),
    ('RESCUE', RECREATE), ('SOFT_DELETED', RECREATE),
    ('soft-deleted', RECREATE), ('ERROR', HARD)])
def test_action_for_nova_statuses(alias, action):
    assert ss.action_for(alias) == action


def test_active_and_healthy_needs_nothing():
    assert ss.action_for('active', healthy=True) is None
    assert ss.action_for('active', 'rebooting', healthy=True) is None
    assert ss.action_for('stopped', healthy=True) == START


@pytest.mark.parametrize('power', [0, 3, 4, 6, 7, 'paused', 'pending'])
def test_an_active_server_whose_guest_is_not_running_is_hard_rebooted(power):
    # Nova refuses to start or unpause an ACTIVE server and a soft reboot
    # needs a running guest: a hard reboot re-creates it.
    assert ss.action_for('active', power_state=power) == HARD
    assert ss.stuck_action(None, 'active', power) == ('active', HARD)
    assert ss.default_ladder('active', None, power) == [HARD, RECREATE]
    # Its guest running, or nothing known of it: a soft reboot first.
    for running in (1, 'running', None):
        assert ss.default_ladder('active', None, running) == [
            SOFT, HARD, RECREATE]
    # Other states go as before, whatever their power state.
    assert ss.default_ladder('stopped', None, power)[0] == START
    assert ss.default_ladder('paused', None, power)[0] == UNPAUSE
    assert ss.default_ladder('active', 'powering-on', power) == [RECREATE]


def test_actions_are_fresh_dicts():
    ss.action_for('active')[1]['type'] = 'HARD'
    assert ss.action_for('active') == SOFT


@pytest.mark.parametrize('task', [
    'rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard',
    'pausing', 'unpausing', 'suspending', 'resuming'])
@pytest.mark.parametrize('vm', ['active', 'stopped', 'paused', 'suspended',
                                'error'])
def test_stuck_hard_reboot_accepted(task, vm):
    assert ss.action_for(vm, task) == HARD


@pytest.mark.parametrize('task,vm', [
    # Tasks outside Nova's ALLOW_REBOOT list.
    ('reboot_pending_hard', 'active'), ('reboot_started_hard', 'stopped'),
    ('powering-off', 'active'), ('powering-on', 'stopped'),
    ('spawning', 'building'), ('deleting', 'active'),
    ('image_snapshot', 'active'), ('rebuilding', 'active'),
    # vm_states Nova does not hard reboot from.
    ('rebooting', 'rescued'), ('pausing', 'rescued'),
    ('rebooting', 'resized'), ('rebooting', 'soft-delete'),
    ('rebooting', None)])
def test_stuck_otherwise_recreate(task, vm):
    assert ss.action_for(vm, task) == RECREATE


@pytest.mark.parametrize('task,vm,power,recovered,action', [
    # Settled active or stopped: a soft reboot or a start is refused
    # while the task is set; a hard reboot is accepted from a reboot.
    ('rebooting', 'active', 1, 'active', HARD),
    ('rebooting', 'active', 4, 'stopped', HARD),
    ('reboot_started', 'stopped', 1, 'active', HARD),
    ('rebooting_hard', 'stopped', 4, 'stopped', HARD),
    # Nova does not take a hard reboot over its own pending one.
    ('reboot_pending_hard', 'active', 4, 'stopped', RECREATE),
    ('pausing', 'active', 3, 'paused', HARD),
    ('unpausing', 'paused', 1, 'active', HARD),
    ('suspending', 'active', 7, 'suspended', HARD),
    ('resuming', 'suspended', 7, 'suspended', HARD),
    # Rescued servers: no reboot from there.
    ('pausing', 'rescued', 1, 'rescued', RECREATE),
    ('suspending', 'rescued', 7, 'suspended', RECREATE),
    # powering-off and powering-on are not in ALLOW_REBOOT.
    ('powering-off', 'active', 4, 'stopped', RECREATE),
    ('powering-off', 'error', 6, 'error', RECREATE),
    ('stopping', 'rescued', 1, 'rescued', RECREATE),
    ('powering-on', 'stopped', 1, 'active', RECREATE),
    ('starting', 'stopped', 4, 'stopped', RECREATE),
    # Off the table.
    ('deleting', 'active', 1, 'active', RECREATE),
    ('deleting', 'soft-delete', 4, 'soft-delete', RECREATE),
])
def test_stuck_action(task, vm, power, recovered, action):
    assert ss.stuck_action(task, vm, power) == (recovered, action)


@pytest.mark.parametrize('task,vm,power,recovered', SEED_ROWS)
def test_stuck_action_of_every_seed_row(task, vm, power, recovered):
    settled_vm, (name, params) = ss.stuck_action(task, vm, CODES[power])
    assert settled_vm == recovered
    if ss.hard_reboot_accepted(task, vm):
        assert (name, params) == HARD
    else:
        assert (name, params) == RECREATE


def test_stuck_action_without_a_task():
    assert ss.stuck_action(None, 'stopped', 4) == ('stopped', START)
    assert ss.stuck_action(None, 'active', 1) == ('active', SOFT)


@pytest.mark.parametrize('vm,ladder', [
    ('active', [SOFT, HARD, RECREATE]),
    ('stopped', [START, HARD, RECREATE]),
    ('paused', [UNPAUSE, HARD, RECREATE]),
    ('suspended', [RESUME, HARD, RECREATE]),
    ('error', [HARD, RECREATE]),
    ('rescued', [RECREATE]),
    ('resized', [RECREATE]),
    ('shelved_offloaded', [RECREATE]),
    ('soft-delete', [RECREATE]),
    ('deleted', [RECREATE]),
    (None, [RECREATE]),
])
def test_default_ladder(vm, ladder):
    assert ss.default_ladder(vm) == ladder


@pytest.mark.parametrize('task,vm,power,ladder', [
    ('rebooting', 'active', 4, [HARD, RECREATE]),
    ('unpausing', 'paused', 1, [HARD, RECREATE]),
    ('powering-on', 'stopped', 1, [RECREATE]),
    ('pausing', 'rescued', 1, [RECREATE]),
])
def test_default_ladder_when_stuck(task, vm, power, ladder):
    assert ss.default_ladder(vm, task, power) == ladder


def test_ladders_have_no_duplicates_and_end_in_recreate():
    tasks = [None, 'rebooting', 'reboot_pending_hard', 'powering-off',
             'pausing', 'resuming', 'deleting']
    for vm in ss.VM_STATES:
        for task in tasks:
            for power in (0, 1, 3, 4, 6, 7):
                ladder = ss.default_ladder(vm, task, power)
                assert ladder[-1] == RECREATE
                names = [(n, tuple(sorted(p.items()))) for n, p in ladder]
                assert len(names) == len(set(names))
