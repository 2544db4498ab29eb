"""Nova's power states: what the hypervisor says a guest is doing.

Nova leaves a server ACTIVE when the hypervisor pauses its guest (QEMU does
on a full disk) or loses it, and for a while when the guest shuts down or
crashes, until its power sync stops the server: only the power state shows
these. The admin API gives it as an integer (``OS-EXT-STS:power_state``),
versioned notifications as a name ('pending' for NOSTATE); legacy
notifications do not carry it.
"""

POWER_STATES = (NOSTATE, RUNNING, PAUSED, SHUTDOWN, CRASHED, SUSPENDED) = (
    'NOSTATE', 'RUNNING', 'PAUSED', 'SHUTDOWN', 'CRASHED', 'SUSPENDED')

_BY_CODE = {0: NOSTATE, 1: RUNNING, 3: PAUSED, 4: SHUTDOWN, 6: CRASHED,
            7: SUSPENDED}
_BY_NAME = dict({name.lower(): name for name in POWER_STATES},
                pending=NOSTATE)

# What a power state other than RUNNING means for a server Nova shows
# ACTIVE, in a user's words.
_WHY = {
    NOSTATE: 'guest not found on the hypervisor',
    PAUSED: 'guest paused by the hypervisor',
    SHUTDOWN: 'guest shut down behind Nova\'s back',
    CRASHED: 'guest crashed',
    SUSPENDED: 'guest suspended behind Nova\'s back',
}


def name(power_state):
    """NOSTATE, RUNNING... from Nova's integer or a notification's name.

    None when not given (an API or notification without it) or not one
    Nova uses: nothing is then known of the guest.
    """
    if power_state is None or isinstance(power_state, bool):
        return None
    if isinstance(power_state, int):
        return _BY_CODE.get(power_state)
    text = str(power_state).strip().lower()
    if text.isdigit():
        return _BY_CODE.get(int(text))
    return _BY_NAME.get(text)


def not_running(power_state):
    """The power state's name if it is known and not RUNNING, else None."""
    found = name(power_state)
    return None if found in (None, RUNNING) else found


def active_but_down(power_state):
    """Why a server Nova shows ACTIVE, with no task, is failing, or None.

    None when its guest runs, or nothing is known of it.
    """
    found = not_running(power_state)
    if found is None:
        return None
    return 'Nova status ACTIVE but power state %s (%s)' % (found,
                                                           _WHY[found])
