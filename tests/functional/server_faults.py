"""Break a server, and read what Nova accepted for it, on either Nova.

The local deployment runs fakecloud's simulated Nova or real Nova
(``nova_backend``). A test says what happens to a server and reads which
actions Nova accepted for it through this module, whichever Nova it runs
on; what Nova then shows of the server may differ, and a test marked for
one Nova expects what that one shows.

Faults (``break_server``), and how each is made:

============  ===========================  ================================
fault         fakecloud                    real Nova
============  ===========================  ================================
power_off     ``power_off``                the guest shuts off behind Nova's
                                           back; Nova's power sync stops the
                                           server (SHUTOFF)
crash         (none)                       the guest crashes; Nova stops the
                                           server
pause         ``pause`` (PAUSED)           the hypervisor pauses the guest;
                                           Nova leaves it ACTIVE (power 3)
suspend       ``suspend`` (SUSPENDED)      the guest is suspended behind
                                           Nova's back; Nova stops the server
lose          (none)                       the guest is gone from the
                                           hypervisor; ACTIVE, power 0
hang          ``hang``                     the application stops answering
                                           its health URL; a reboot cures it
broken        ``broken``                   ``hang``, and the next reboot
                                           fails in the hypervisor, so it
                                           does not cure it
delete        ``vanish``                   an admin deletes the server
                                           through Nova's API
error         ``crash_to_error``           the next suspend fails in the
                                           hypervisor and an admin asks
                                           for one: Nova sets ERROR
stuck         ``stuck_task``               the operation hangs in the
                                           hypervisor and an admin asks for
                                           it: its task never ends
reset         ``reset``                    the guest's faults cleared, and
                                           the server put right through
                                           Nova's API as an operator would
============  ===========================  ================================

``stuck`` takes the ``operation``: pause, unpause, suspend or resume (for
unpause and resume, the server must be paused or suspended first). On
real Nova ``broken``, ``error`` and ``stuck`` need operation faults (the
fault driver: mark the test ``guest_operation_faults``).

``actions`` reads what Nova accepted, oldest first: fakecloud's timeline,
or real Nova's instance actions (``os-instance-actions``), which keep
whole seconds only.
"""

import calendar
import collections
import datetime

# Nova's API microversion that lists the actions of a deleted server too.
ACTIONS_VERSION = '2.21'
# Seconds an admin's request through Nova's API may take to show.
SETTLE_TIMEOUT = 60
# Seconds an operation made to hang in the hypervisor hangs.
STUCK_SECONDS = 3600
STUCK_OPERATIONS = {'pause': 'pausing', 'unpause': 'unpausing',
                    'suspend': 'suspending', 'resume': 'resuming'}
FAKECLOUD_FAULTS = {'power_off': 'power_off', 'pause': 'pause',
                    'suspend': 'suspend', 'hang': 'hang',
                    'broken': 'broken', 'delete': 'vanish',
                    'error': 'crash_to_error', 'stuck': 'stuck_task',
                    'reset': 'reset'}
FAULTS = ('power_off', 'crash', 'pause', 'suspend', 'lose', 'hang',
          'broken', 'delete', 'error', 'stuck', 'reset')
# fakecloud's timeline events of a server settling after an action.
_SETTLED = ('active', 'stopped', 'deleted')
# fakecloud's action names that Nova's instance actions spell otherwise.
_FAKECLOUD_NAMES = {'os-start': 'start', 'os-stop': 'stop'}
RUNNING = 1
# Nova's status -> the action that puts a server right from it.
_PUT_RIGHT = {'SHUTOFF': {'os-start': None}, 'PAUSED': {'unpause': None},
              'SUSPENDED': {'resume': None}}

Action = collections.namedtuple('Action', ['name', 'time', 'requested',
                                           'finished'])
Action.__doc__ = """An action Nova accepted for a server.

``name`` as Nova's instance actions name it (create, start, stop, reboot,
delete...); ``time`` when it was accepted and ``finished`` when its work
ended (None: not yet, or not known), as seconds since the epoch;
``requested`` whether a user asked for it through Nova's API (False: Nova's
own, as its power sync's stop).
"""


class FaultNotSupported(Exception):
    """This Nova has no such fault."""


def real_nova(admin):
    """Whether the admin's compute API is real Nova's, not fakecloud's."""
    return admin.fakecloud_root() is None


def break_server(admin, server_id, fault, operation=None):
    """Make the fault happen to the server, as the table above says.

    :param admin: the admin user (a ``cloud.Cloud``).
    :param operation: the operation of ``stuck``.
    """
    if fault not in FAULTS:
        raise ValueError('fault must be one of %s' % ', '.join(FAULTS))
    if fault == 'stuck' and operation not in STUCK_OPERATIONS:
        raise ValueError('stuck needs an operation of %s'
                         % ', '.join(STUCK_OPERATIONS))
    if real_nova(admin):
        _real(admin, server_id, fault, operation)
    else:
        _fakecloud(admin, server_id, fault, operation)


def _fakecloud(admin, server_id, fault, operation):
    if fault not in FAKECLOUD_FAULTS:
        raise FaultNotSupported('fakecloud has no fault %s' % fault)
    extra = {}
    if fault == 'stuck':
        extra['task_state'] = STUCK_OPERATIONS[operation]
    resp = admin.inject_fault(server_id, FAKECLOUD_FAULTS[fault], **extra)
    assert resp.status_code == 200, resp.text


def _real(admin, server_id, fault, operation):
    if fault in ('power_off', 'crash', 'pause', 'suspend', 'lose', 'hang'):
        admin.guest_fault(server_id, fault)
    elif fault == 'broken':
        admin.guest_fault(server_id, 'fail_next', operation='reboot')
        admin.guest_fault(server_id, 'hang')
    elif fault == 'delete':
        resp = admin.session.delete(_server_url(admin, server_id),
                                    raise_exc=False)
        assert resp.status_code == 204, resp.text
    elif fault == 'error':
        admin.guest_fault(server_id, 'fail_next', operation='suspend')
        _act(admin, server_id, {'suspend': None})
        _wait(admin, server_id, lambda s: s['status'] == 'ERROR', 'ERROR')
    elif fault == 'stuck':
        admin.guest_fault(server_id, 'hang_next', operation=operation,
                          seconds=STUCK_SECONDS)
        _act(admin, server_id, {operation: None})
        task = STUCK_OPERATIONS[operation]
        _wait(admin, server_id,
              lambda s: s['OS-EXT-STS:task_state'] == task, task)
    else:
        _put_right(admin, server_id)


def _put_right(admin, server_id):
    """The guest's faults cleared, and the server running again."""
    admin.guest_fault(server_id, 'reset')
    server = _server(admin, server_id)
    if server['OS-EXT-STS:task_state']:
        return
    if server['status'] in _PUT_RIGHT:
        _act(admin, server_id, _PUT_RIGHT[server['status']])
    elif (server['status'] in ('ACTIVE', 'ERROR') and
            server['OS-EXT-STS:power_state'] != RUNNING):
        _act(admin, server_id, {'reboot': {'type': 'HARD'}})
    else:
        return
    _wait(admin, server_id, lambda s: (
        s['status'], s['OS-EXT-STS:power_state'],
        s['OS-EXT-STS:task_state']) == ('ACTIVE', RUNNING, None),
        'ACTIVE and running')


def _server_url(admin, server_id):
    return '%s/servers/%s' % (admin.endpoint('compute'), server_id)


def _server(admin, server_id):
    return admin.session.get(_server_url(admin, server_id)).json()['server']


def _act(admin, server_id, body):
    resp = admin.session.post(_server_url(admin, server_id) + '/action',
                              json=body, raise_exc=False)
    assert resp.status_code == 202, '%s: %s %s' % (body, resp.status_code,
                                                   resp.text)


def _wait(admin, server_id, done, what):
    admin.wait_for(lambda: done(_server(admin, server_id)),
                   'server %s %s' % (server_id, what),
                   timeout=SETTLE_TIMEOUT, interval=0.2)


def actions(admin, server_id):
    """The actions Nova accepted for the server, oldest first (Actions)."""
    if real_nova(admin):
        return _real_actions(admin, server_id)
    return _fakecloud_actions(admin, server_id)


def requested(admin, server_id):
    """The names of the actions users asked Nova for, oldest first.

    Not the server's creation: what was asked of it since.
    """
    return [a.name for a in actions(admin, server_id)
            if a.requested and a.name != 'create']


def _fakecloud_actions(admin, server_id):
    url = admin.fakecloud_url('/timeline?server_id=%s' % server_id)
    timeline = admin.session.get(url).json()['timeline']
    found = []
    for n, entry in enumerate(timeline):
        if entry['event'] == 'created':
            name = 'create'
        elif entry['event'].startswith('action:'):
            name = entry['event'][len('action:'):]
            name = _FAKECLOUD_NAMES.get(name, name)
        else:
            continue
        settled = [e['time'] for e in timeline[n + 1:]
                   if e['event'] in _SETTLED]
        finished = entry['time'] if name == 'create' else (
            settled[0] if settled else None)
        # fakecloud's own changes are faults, not actions: each was asked.
        found.append(Action(name, entry['time'], True, finished))
    return found


def _epoch(text):
    """Seconds since the epoch of one of Nova's times (UTC, no zone)."""
    if text is None:
        return None
    when = datetime.datetime.strptime(text.split('.')[0].rstrip('Z'),
                                      '%Y-%m-%dT%H:%M:%S')
    return float(calendar.timegm(when.timetuple()))


def _real_actions(admin, server_id):
    headers = {'X-OpenStack-Nova-API-Version': ACTIONS_VERSION}
    url = _server_url(admin, server_id) + '/os-instance-actions'
    listed = admin.session.get(url, headers=headers).json()[
        'instanceActions']
    found = []
    # Newest first, as Nova lists them (by time, then as recorded).
    for action in reversed(listed):
        events = admin.session.get(
            '%s/%s' % (url, action['request_id']), headers=headers).json()[
                'instanceAction'].get('events') or []
        ends = [_epoch(e.get('finish_time')) for e in events]
        finished = max(ends) if ends and None not in ends else None
        found.append(Action(action['action'], _epoch(action['start_time']),
                            action['user_id'] is not None, finished))
    return found


def wait_actions(admin, server_id, done, what, timeout=60):
    """The server's actions once ``done`` of them, or AssertionError."""
    return admin.wait_for(
        lambda: (lambda found: found if done(found) else None)(
            actions(admin, server_id)), what, timeout=timeout)
