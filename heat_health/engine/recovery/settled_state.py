"""Which state a server is really in, and the cheapest action that heals it.

Pure functions, no I/O, so the planner can be tested without Nova.

A server whose operation was interrupted (nova-compute died, a message was
lost) keeps its task_state for ever and its vm_state says what it was
*before* the operation. ``settled`` reads the power state the hypervisor
reports to say which vm_state the server has really settled in: the table
of Nova's controlled operations (reboot, stop, start, pause, unpause,
suspend, resume) for the combinations it lists, and the power state alone
otherwise, which is safe because that is what the guest is actually doing.

``action_for`` maps a vm_state to the cheapest recovery action; a stuck
task limits the choice, because Nova's API refuses (409) every action on a
server with a task_state except a hard reboot from some of them and a
delete (hence RECREATE). ``stuck_action`` combines both, and
``default_ladder`` is what a policy that names no actions tries, in order.

An ACTIVE server without a task whose guest is not running (paused or lost
behind Nova's back) is not interrupted either, but Nova refuses to start or
unpause an ACTIVE server and a soft reboot needs a running guest: only a
hard reboot, which re-creates the guest, heals it (``guest_down``).

Names follow Nova's API (``OS-EXT-STS:vm_state``, ``task_state`` and the
integer ``power_state``); the seed's power names ACTIVE (for RUNNING) and
ERROR (for CRASHED), Nova's server statuses (SHUTOFF, RESCUE...) and the
power names of versioned notifications are accepted as well.
"""

from heat_health.common import power_states

# Recovery actions, as a health policy names them.
ACTIONS = (REBOOT, REBUILD, START, UNPAUSE, RESUME, RECREATE, EVACUATE) = (
    'REBOOT', 'REBUILD', 'START', 'UNPAUSE', 'RESUME', 'RECREATE',
    'EVACUATE')
REBOOT_TYPES = (SOFT, HARD) = ('SOFT', 'HARD')

# vm_states, spelt as Nova stores them (soft delete is 'soft-delete').
VM_STATES = (ACTIVE, BUILDING, PAUSED, SUSPENDED, STOPPED, RESCUED, RESIZED,
             SOFT_DELETED, DELETED, ERROR, SHELVED, SHELVED_OFFLOADED,
             MISSING) = (
    'active', 'building', 'paused', 'suspended', 'stopped', 'rescued',
    'resized', 'soft-delete', 'deleted', 'error', 'shelved',
    'shelved_offloaded', 'missing')
# MISSING is ours: Nova no longer knows the server (404).
GONE = frozenset([SOFT_DELETED, DELETED, MISSING])

# Power states, by the integer of Nova's API.
POWER_STATES = (NOSTATE, RUNNING, POWER_PAUSED, SHUTDOWN, CRASHED,
                POWER_SUSPENDED) = (
    'NOSTATE', 'RUNNING', 'PAUSED', 'SHUTDOWN', 'CRASHED', 'SUSPENDED')
_POWER_BY_CODE = {0: NOSTATE, 1: RUNNING, 3: POWER_PAUSED, 4: SHUTDOWN,
                  6: CRASHED, 7: POWER_SUSPENDED}
_POWER_ALIASES = {
    'ACTIVE': RUNNING,   # the seed's name for a running guest
    'ERROR': CRASHED,    # the seed's name for a failed guest
    'PENDING': NOSTATE,  # versioned notifications' name for 0
}

# Other spellings of vm_states: Nova's server statuses and variants.
_VM_ALIASES = {
    'shutoff': STOPPED,
    'rescue': RESCUED,
    'verify_resize': RESIZED,
    'build': BUILDING,
    'soft_deleted': SOFT_DELETED,
    'soft-deleted': SOFT_DELETED,
}

# Task states of an interrupted operation whose table row applies.
_TASK_ALIASES = {
    'reboot_pending': 'rebooting',
    'reboot_started': 'rebooting',
    'reboot_pending_hard': 'rebooting_hard',
    'reboot_started_hard': 'rebooting_hard',
}

# Task states from which Nova accepts a hard reboot (its ALLOW_REBOOT list;
# the *_pending_hard and *_started_hard ones are not in it) and the
# vm_states it accepts one from (ALLOW_HARD_REBOOT: not rescued).
HARD_REBOOT_TASKS = frozenset([
    'rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard',
    'pausing', 'unpausing', 'suspending', 'resuming'])
HARD_REBOOT_VM_STATES = frozenset([ACTIVE, STOPPED, PAUSED, SUSPENDED, ERROR])


def _table():
    """(task_state, crashed vm_state, power state) -> recovered vm_state."""
    reboot = [(ACTIVE, RUNNING, ACTIVE), (ACTIVE, SHUTDOWN, STOPPED),
              (STOPPED, RUNNING, ACTIVE), (STOPPED, SHUTDOWN, STOPPED)]
    stop = [(ACTIVE, RUNNING, ACTIVE), (ACTIVE, SHUTDOWN, STOPPED),
            (RESCUED, RUNNING, RESCUED), (RESCUED, SHUTDOWN, STOPPED),
            (ERROR, SHUTDOWN, STOPPED), (ERROR, CRASHED, ERROR)]
    start = [(STOPPED, SHUTDOWN, STOPPED), (STOPPED, RUNNING, ACTIVE)]
    pause = [(ACTIVE, RUNNING, ACTIVE), (ACTIVE, POWER_PAUSED, PAUSED),
             (RESCUED, RUNNING, RESCUED), (RESCUED, POWER_PAUSED, PAUSED)]
    unpause = [(PAUSED, POWER_PAUSED, PAUSED), (PAUSED, RUNNING, ACTIVE)]
    suspend = [(ACTIVE, RUNNING, ACTIVE),
               (ACTIVE, POWER_SUSPENDED, SUSPENDED),
               (RESCUED, RUNNING, RESCUED),
               (RESCUED, POWER_SUSPENDED, SUSPENDED)]
    resume = [(SUSPENDED, POWER_SUSPENDED, SUSPENDED),
              (SUSPENDED, RUNNING, ACTIVE)]
    rows = {'rebooting': reboot, 'rebooting_hard': reboot,
            'powering-off': stop, 'stopping': stop,
            'powering-on': start, 'starting': start,
            'pausing': pause, 'unpausing': unpause,
            'suspending': suspend, 'resuming': resume}
    return {(task, vm, power): settled_vm
            for task, combos in rows.items()
            for vm, power, settled_vm in combos}


SETTLED = _table()

# Where the power state alone puts a server (combinations off the table).
_BY_POWER = {RUNNING: ACTIVE, SHUTDOWN: STOPPED, CRASHED: STOPPED,
             POWER_PAUSED: PAUSED, POWER_SUSPENDED: SUSPENDED}

# The cheapest action from each settled vm_state, without a task.
_CHEAPEST = {
    ACTIVE: (REBOOT, {'type': SOFT}),
    STOPPED: (START, {}),
    PAUSED: (UNPAUSE, {}),
    SUSPENDED: (RESUME, {}),
    ERROR: (REBOOT, {'type': HARD}),
}
# Everything else (rescued, resized, shelved, building, gone, unknown)
# can only be recreated with these actions: Nova refuses a reboot,
# start or rebuild from those states.


def power_name(power_state):
    """The power state's name (RUNNING...), from Nova's integer or a name.

    Anything unknown (None, an integer Nova no longer uses) is NOSTATE:
    it says nothing about the guest.
    """
    if power_state is None or isinstance(power_state, bool):
        return NOSTATE
    if isinstance(power_state, int):
        return _POWER_BY_CODE.get(power_state, NOSTATE)
    name = str(power_state).strip().upper()
    if name.isdigit():
        return _POWER_BY_CODE.get(int(name), NOSTATE)
    if name in POWER_STATES:
        return name
    return _POWER_ALIASES.get(name, NOSTATE)


def vm_state_name(vm_state):
    """Nova's spelling of a vm_state; None (no server) is MISSING."""
    if vm_state is None:
        return MISSING
    name = str(vm_state).strip().lower()
    if not name:
        return MISSING
    return _VM_ALIASES.get(name, name)


def _task(task_state):
    if task_state is None:
        return None
    return str(task_state).strip().lower() or None


def settled(task_state, vm_state, power_state):
    """The vm_state a server with this interrupted task has settled in.

    Off the table the power state decides (RUNNING active, SHUTDOWN or
    CRASHED stopped, PAUSED paused, SUSPENDED suspended); without one
    (NOSTATE) the vm_state stands. Two exceptions: no task means nothing
    was interrupted, so Nova's vm_state stands (its own power sync stops a
    guest that shut down; one paused or lost stays ACTIVE, see
    ``guest_down``), and a deleted server is not revived by a power state.
    """
    task = _task(task_state)
    vm = vm_state_name(vm_state)
    if task is None or vm in GONE:
        return vm
    power = power_name(power_state)
    key = (_TASK_ALIASES.get(task, task), vm, power)
    if key in SETTLED:
        return SETTLED[key]
    return _BY_POWER.get(power, vm)


def hard_reboot_accepted(task_state, vm_state):
    """Whether Nova's API accepts a hard reboot of a server in this state."""
    task = _task(task_state)
    return ((task is None or task in HARD_REBOOT_TASKS) and
            vm_state_name(vm_state) in HARD_REBOOT_VM_STATES)


def guest_down(vm_state, task_state, power_state):
    """Whether the server is ACTIVE, with no task, but its guest not running.

    Only a power state Nova reports (its integer, or a notification's
    name) counts: None, when not shown, says nothing of the guest.
    """
    return (vm_state_name(vm_state) == ACTIVE and _task(task_state) is None
            and power_states.not_running(power_state) is not None)


def _action(name, params):
    return (name, dict(params))


def action_for(vm_state, task_state=None, healthy=False, power_state=None):
    """The cheapest action that brings a server in this state to ACTIVE.

    :param vm_state: the server's vm_state (None: Nova has no server).
    :param task_state: set when the server is stuck in a task: Nova then
        accepts only a hard reboot (from some tasks and vm_states) or a
        delete, so the answer is REBOOT HARD or RECREATE.
    :param healthy: the detectors see the server well; an ACTIVE one then
        needs nothing (None). An ACTIVE server that is not healthy (its
        health URL fails) gets a soft reboot.
    :param power_state: Nova's; an ACTIVE server whose guest is not
        running gets a hard reboot (see ``guest_down``).
    :returns: (name, params), or None.
    """
    vm = vm_state_name(vm_state)
    if healthy and vm == ACTIVE:
        return None
    if _task(task_state) is not None:
        if hard_reboot_accepted(task_state, vm):
            return _action(REBOOT, {'type': HARD})
        return _action(RECREATE, {})
    if guest_down(vm, None, power_state):
        return _action(REBOOT, {'type': HARD})
    name, params = _CHEAPEST.get(vm, (RECREATE, {}))
    return _action(name, params)


def stuck_action(task_state, vm_state, power_state):
    """(settled vm_state, (name, params)) for a server stuck in a task.

    The action is what the settled state calls for if Nova accepts it
    while the task is still set; otherwise a hard reboot when Nova accepts
    one (judged on the vm_state it has recorded, as Nova does), else
    RECREATE.
    """
    settled_vm = settled(task_state, vm_state, power_state)
    action = action_for(settled_vm, power_state=power_state)
    if _task(task_state) is None or action[0] == RECREATE:
        return settled_vm, action
    # Any other action is refused while the task is set.
    if hard_reboot_accepted(task_state, vm_state):
        return settled_vm, _action(REBOOT, {'type': HARD})
    return settled_vm, _action(RECREATE, {})


def default_ladder(vm_state, task_state=None, power_state=None):
    """The actions tried in order when a policy names none.

    The cheapest fitting action first; then a hard reboot (it also starts,
    unpauses and resumes a server, and is what is left once a soft reboot
    or a start did not help); RECREATE last. No action twice.

    The power state matters for a stuck server (see ``settled``) and for
    an ACTIVE one whose guest is not running (see ``guest_down``).
    """
    if _task(task_state) is not None:
        first = stuck_action(task_state, vm_state, power_state)[1]
    else:
        first = action_for(vm_state, power_state=power_state)
    ladder = [first]
    if first[0] in (START, UNPAUSE, RESUME, REBOOT) and first != (
            REBOOT, {'type': HARD}):
        ladder.append(_action(REBOOT, {'type': HARD}))
    if first[0] != RECREATE:
        ladder.append(_action(RECREATE, {}))
    return ladder
