"""Nova as heat-health sees it: servers, their states and the actions.

What it keeps is what real Nova 34 shows (reference/nova-behaviour.md):
vm_state, task_state and the hypervisor's power state, from which the API's
status is derived; actions are refused (409) while a task is set (except a
hard reboot from some tasks, and a delete), on a locked server, or from a
vm_state Nova does not allow them from; an accepted action sets its task
and settles after some virtual time. Faults happen behind Nova's back and
look as they do on a real cloud: a guest that shuts down is stopped by
Nova's power sync (SHUTOFF), one paused by the hypervisor stays ACTIVE with
power state 3, a vanished guest stays ACTIVE with power state 0.

``client(actor)`` gives a python-novaclient lookalike (``servers.get``,
``reboot``, ``rebuild``, ``start``, ``stop``, ``unpause``, ``resume``,
``delete``, ``force_delete``, ``get_console_output``;
``instance_action.list``) raising
novaclient's exceptions, so the real NovaActions adapter sorts the
answers; ``listing()`` gives what the status poller's NovaAdapter would.
Every accepted action is recorded, with the actor that asked for it.

Nova's instance actions (``instance_action.list``) say who asked: every
request through the API (recovery's and Heat's, made with the stack
owner's trust, and any other user's) is one with the owner's user and
project and a request id of its own; the engine's admin client acts as
its own service user; a stop Nova's power sync makes after a guest shut
down has no user and no project; other faults behind Nova's back record
none.

Compute hosts (admin only, as Nova shows them): two, ``compute1`` and
``compute2``; a new server is placed on the UP host after the last one
used (none UP: Nova's scheduler finds no valid host, the server is
ERROR). A host's nova-compute may stop reporting (``host_stops``:
host_status UNKNOWN, its guests running on or lost with the host; Nova
shows it UP until its service_down_time has passed): the API still
accepts actions on its servers, their tasks are set and nothing
progresses; once Nova shows the host down, a delete is done at once by
the API (a local delete) and new servers go elsewhere.
When it starts again (``host_back``) its ``_init_instance`` runs before
it reports (reference/nova-behaviour.md section 3): interrupted reboots
are retried and end ACTIVE and running, a reboot asked for while it was
down runs once it is back, powering-off/on, pausing, unpausing,
suspending and resuming are completed, building and rebuilding end in
ERROR, a delete is completed; lost guests are not running then (power
state SHUTDOWN, which the power sync stops, or NOSTATE, which it leaves
ACTIVE). A host forced down (``host_forced_down``: host_status DOWN, its
guests dead) runs nothing it is asked, deletes are local, new servers go
elsewhere; forced up again (``host_forced_up``) it restarts as a host
whose guests were lost. Nova's own retries are not recorded as accepted
actions: they are no one's request.
"""

import collections
import datetime

from keystoneauth1 import exceptions as ks_exc
from novaclient import exceptions as nova_exc

from heat_health.common import nova_adapter
from tests.simulation import faults as faults_mod

# Power states by Nova's integers.
NOSTATE, RUNNING, PAUSED, SHUTDOWN, CRASHED, SUSPENDED = 0, 1, 3, 4, 6, 7

# Task states from which Nova accepts a hard reboot (ALLOW_REBOOT).
_HARD_REBOOT_TASKS = frozenset([
    None, 'rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard',
    'pausing', 'unpausing', 'suspending', 'resuming'])

# The API's status for a vm_state, and the tasks that show otherwise.
_STATUS = {'active': 'ACTIVE', 'stopped': 'SHUTOFF', 'paused': 'PAUSED',
           'suspended': 'SUSPENDED', 'error': 'ERROR', 'building': 'BUILD',
           'deleted': 'DELETED', 'soft-delete': 'SOFT_DELETED',
           'rescued': 'RESCUE'}
_TASK_STATUS = {'rebooting': 'REBOOT', 'reboot_pending': 'REBOOT',
                'reboot_started': 'REBOOT', 'rebooting_hard': 'HARD_REBOOT',
                'reboot_pending_hard': 'HARD_REBOOT',
                'reboot_started_hard': 'HARD_REBOOT',
                'rebuilding': 'REBUILD', 'rebuild_spawning': 'REBUILD'}

# Virtual seconds an accepted action takes.
# Actions that take a server back to active: (the vm_state Nova accepts
# them in, the task they run as).
_TO_ACTIVE = {'start': ('stopped', 'powering-on'),
              'unpause': ('paused', 'unpausing'),
              'resume': ('suspended', 'resuming')}
DURATIONS = {'reboot': 4, 'start': 3, 'stop': 3, 'unpause': 1, 'resume': 2,
             'rebuild': 8, 'delete': 2, 'force_delete': 1, 'build': 5,
             'suspend': 2}
# Nova's power sync after a lifecycle event (SHUTOFF) and the periodic one
# (a crashed guest).
SYNC_SECONDS = 1
PERIODIC_SYNC_SECONDS = 8

# How a guest can break behind Nova's back (and a few states reached
# through Nova's API by someone else, to exercise every action).
BREAKS = ('SHUTOFF', 'CRASHED', 'GUEST_PAUSED', 'VANISHED', 'PAUSED',
          'SUSPENDED', 'ERROR', 'STUCK', 'GONE')

# Compute hosts and their states (Nova's host_status).
HOSTS = ('compute1', 'compute2')
UP, DOWN, UNKNOWN = 'UP', 'DOWN', 'UNKNOWN'
# Tasks of a reboot: retried (or cleared) by nova-compute at its start.
_REBOOT_TASKS = frozenset([
    'rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard',
    'reboot_pending_hard', 'reboot_started_hard'])
# What nova-compute's start leaves of a task it finds (_init_instance):
# {field: value}, the task cleared.
_AT_START = {
    'spawning': {'vm_state': 'error', 'power_state': NOSTATE},
    'rebuilding': {'vm_state': 'error'},
    'rebuild_spawning': {'vm_state': 'error'},
    'powering-off': {'vm_state': 'stopped', 'power_state': SHUTDOWN},
    'powering-on': {'vm_state': 'active', 'power_state': RUNNING},
    'pausing': {'vm_state': 'paused', 'power_state': PAUSED},
    'unpausing': {'vm_state': 'active', 'power_state': RUNNING},
    'suspending': {'vm_state': 'suspended', 'power_state': SUSPENDED},
    'resuming': {'vm_state': 'active', 'power_state': RUNNING},
    'deleting': {'deleted': True, 'vm_state': 'deleted',
                 'power_state': NOSTATE},
}

# Who asks Nova: the stack owner (whose trust recovery and Heat use: Heat's
# trusts impersonate, so Nova records the owner), and heat-health-engine's
# own user for its admin client.
OWNER = ('user-1', 'project-1')
ENGINE_USER = ('heat-health', 'service')
# The power sync acts with an admin context: no user, no project.
NOVA_ITSELF = (None, None)

Accepted = collections.namedtuple('Accepted', ['at', 'server_id', 'action',
                                               'detail', 'actor', 'stack_id',
                                               'host', 'host_state',
                                               'host_since'],
                                  defaults=(None, None, None, None))
"""``stack_id``: the root stack whose owner's client asked (recovery);
``host``, ``host_state`` and ``host_since``: the server's compute host,
its state as Nova showed it when it took the request and since when it
showed it."""


class NotReporting(Exception):
    """A change behind Nova's back on a host whose compute does not report.

    Nova would not see it: the world does not make it.
    """


class Host(object):
    """A compute host: its state (UP, DOWN, UNKNOWN) and since when.

    ``shown_at``: when Nova starts to show the state. A nova-compute that
    dies reports nothing, and Nova counts its service down only once its
    last report is ``service_down_time`` old: until then it shows UP.
    """

    __slots__ = ('name', 'state', 'since', 'guests_lost', 'shown_at')

    def __init__(self, name, now):
        self.name = name
        self.state = UP
        self.since = now
        self.guests_lost = False
        self.shown_at = now

    def shown(self, now):
        """(state, since) as Nova's services API shows them at ``now``."""
        if now < self.shown_at:
            return UP, None
        return self.state, self.shown_at


class Server(object):
    __slots__ = ('id', 'name', 'image', 'addresses', 'vm_state',
                 'task_state', 'power_state', 'locked', 'updated', 'deleted',
                 'settle_at', 'settled', 'host', 'queued', 'fault',
                 'console')

    def __init__(self, server_id, name, image, addresses, now, host=None):
        self.id = server_id
        self.name = name
        self.image = image
        self.addresses = list(addresses)
        self.vm_state = 'building'
        self.task_state = 'spawning'
        self.power_state = NOSTATE
        self.locked = False
        self.updated = now
        self.deleted = False
        self.settle_at = None    # when the task under way ends
        self.settled = None      # {field: value} it ends with
        self.host = host         # its compute host (None: not placed)
        self.queued = False      # its task was asked for while the host
        #                          did not run anything
        self.fault = None        # Nova's fault, shown while in ERROR
        self.console = ['boot: %s (%s) up' % (name, server_id)]

    @property
    def status(self):
        if self.deleted:
            return 'DELETED'
        return (_TASK_STATUS.get(self.task_state) or
                _STATUS.get(self.vm_state, 'UNKNOWN'))

    def to_dict(self):
        return {'id': self.id, 'name': self.name, 'status': self.status,
                'OS-EXT-STS:vm_state': self.vm_state,
                'OS-EXT-STS:task_state': self.task_state,
                'OS-EXT-STS:power_state': self.power_state,
                'image': {'id': self.image} if self.image else '',
                'locked': self.locked,
                'addresses': {'net': [{'addr': a} for a in self.addresses]},
                'OS-EXT-SRV-ATTR:host': self.host,
                'updated': self.updated.strftime('%Y-%m-%dT%H:%M:%SZ'),
                'fault': self.fault if self.vm_state == 'error' else None}


def _conflict(server, action, why=None):
    return nova_exc.Conflict(409, why or (
        "Cannot '%s' instance %s while it is in vm_state %s, task_state %s"
        % (action, server.id, server.vm_state, server.task_state)))


def error(kind='error'):
    """An exception as a failing Nova API raises it (for Faults.add).

    ``error`` 500, ``unavailable`` 503, ``timeout`` (no answer).
    """
    if kind == 'timeout':
        return ks_exc.ConnectTimeout('Request to nova timed out')
    code = {'error': 500, 'unavailable': 503}[kind]
    return nova_exc.ClientException(code, 'injected Nova failure',
                                    request_id='req-injected')


class NovaDouble(object):
    """The compute service of the world."""

    def __init__(self, clock):
        self._clock = clock
        self.servers = {}          # id -> Server (deleted ones kept)
        self.accepted = []         # [Accepted]
        self.refused = []          # [Accepted] of the actions refused (409)
        self.faults = faults_mod.Faults()        # the clients' calls
        self.list_faults = faults_mod.Faults()   # the admin listings
        self.host_faults = faults_mod.Faults()   # the compute hosts' one
        self.caller = None         # root stack of the client calling now
        # Server id -> its instance actions, oldest first.
        self.instance_actions = collections.defaultdict(list)
        self._requests = 0
        self.admin = False         # whether that client is an admin's
        self._count = 0
        self.hosts = collections.OrderedDict(
            (name, Host(name, clock())) for name in HOSTS)
        self._last_host = None     # where the last server was placed

    # Time

    def _reporting(self, server):
        """Whether the server's compute runs what it is asked."""
        return server.host is None or self.hosts[server.host].state == UP

    def _shown_up(self, server):
        """Whether Nova's API takes the server's compute for up."""
        return server.host is None or self.hosts[server.host].shown(
            self._clock())[0] == UP

    def _settle(self, server):
        if server.settle_at is not None and server.settle_at <= \
                self._clock() and self._reporting(server):
            for field, value in server.settled.items():
                setattr(server, field, value)
            server.updated = server.settle_at
            server.settle_at = server.settled = None

    def _busy(self, server, task, seconds, **then):
        now = self._clock()
        self._no_sync(server)
        server.task_state = task
        server.updated = now
        server.settle_at = now + _seconds(seconds)
        server.settled = dict(then, task_state=None)
        server.queued = not self._reporting(server)

    def _set(self, server, **values):
        """A change that ends whatever was under way."""
        self._no_sync(server)
        for field, value in values.items():
            setattr(server, field, value)
        server.updated = self._clock()
        server.settle_at = server.settled = None
        server.queued = False

    def _no_sync(self, server):
        """A power sync still to come finds nothing to do: none recorded.

        Its stop is dated when it will happen; a user's stop (or any
        change) first leaves the server as the sync would, or otherwise.
        """
        now = self._clock()
        self.instance_actions[server.id] = [
            a for a in self.instance_actions[server.id]
            if (a['user_id'], a['project_id']) != NOVA_ITSELF or
            a['start_time'] <= now]

    def find(self, server_id):
        """The server, settled to now; None if Nova never had it."""
        server = self.servers.get(server_id)
        if server is not None:
            self._settle(server)
        return server

    def _live(self, server_id):
        server = self.find(server_id)
        if server is None or server.deleted:
            raise nova_exc.NotFound(404, 'Instance %s could not be found.'
                                    % server_id)
        return server

    # Made by Heat (not recovery actions)

    def create(self, name, image, addresses, build_seconds=None):
        """A new server, BUILD until it boots."""
        self._count += 1
        server_id = 'srv-%04d' % self._count
        host = self._schedule()
        server = Server(server_id, name, image, addresses, self._clock(),
                        host)
        self.servers[server_id] = server
        if host is None:
            # No valid host: ERROR at once, never placed.
            self._set(server, vm_state='error', task_state=None)
            return server_id
        self._busy(server, 'spawning', DURATIONS['build'] if
                   build_seconds is None else build_seconds,
                   vm_state='active', power_state=RUNNING)
        return server_id

    def _schedule(self, avoid=None):
        """The UP host after the one used last (alternating), or None."""
        names = list(self.hosts)
        start = (names.index(self._last_host) + 1 if self._last_host
                 else 0)
        for name in names[start:] + names[:start]:
            if name != avoid and self.hosts[name].shown(
                    self._clock())[0] == UP:
                self._last_host = name
                return name
        return None

    def delete_now(self, server_id):
        """Heat's delete of a replaced server (settles at once)."""
        server = self.find(server_id)
        if server is not None and not server.deleted:
            self._set(server, deleted=True, vm_state='deleted',
                      task_state=None, power_state=NOSTATE)
            self.accepted.append(self._record(server_id, 'delete', None,
                                              'heat'))
            self._act(server_id, 'delete', OWNER)

    def suspend_now(self, server_id):
        """Heat's suspend (at once; its host runs it once it is back)."""
        server = self.find(server_id)
        if server is not None and not server.deleted:
            self._now_or_queued(server, 'suspending', vm_state='suspended',
                                power_state=SUSPENDED)
            self.accepted.append(self._record(server_id, 'suspend', None,
                                              'heat'))
            self._act(server_id, 'suspend', OWNER)

    def resume_now(self, server_id):
        server = self.find(server_id)
        if server is not None and server.vm_state == 'suspended':
            self._now_or_queued(server, 'resuming', vm_state='active',
                                power_state=RUNNING)
            self.accepted.append(self._record(server_id, 'resume', None,
                                              'heat'))
            self._act(server_id, 'resume', OWNER)

    def _now_or_queued(self, server, task, **then):
        if self._reporting(server):
            self._set(server, task_state=None, **then)
        else:
            self._busy(server, task, 0, **then)

    # Faults behind Nova's back

    def break_server(self, server_id, how, task='rebooting', power=None):
        """The guest breaks; Nova shows it as a real Nova would.

        SHUTOFF (guest shut down; Nova's power sync stops it), CRASHED
        (stopped by the periodic sync), GUEST_PAUSED (ACTIVE, power 3),
        VANISHED (ACTIVE, power 0), PAUSED / SUSPENDED (paused or
        suspended through Nova's API by someone), ERROR, STUCK (``task``
        for ever: nova-compute died mid-operation) and GONE (deleted).
        """
        server = self._live(server_id)
        if how != 'GONE' and not self._reporting(server):
            # Not seen by Nova until its compute reports; a deletion is.
            raise NotReporting('%s is on %s, whose nova-compute does not '
                               'report' % (server_id, server.host))
        now = self._clock()
        server.console.append('guest: %s' % how)
        if how == 'SHUTOFF':
            self._set(server, power_state=SHUTDOWN)
            server.task_state = 'powering-off'
            server.settle_at = now + _seconds(SYNC_SECONDS)
            server.settled = {'vm_state': 'stopped', 'task_state': None}
            self._act(server.id, 'stop', NOVA_ITSELF, server.settle_at)
        elif how == 'CRASHED':
            self._set(server, power_state=CRASHED)
            server.settle_at = now + _seconds(PERIODIC_SYNC_SECONDS)
            server.settled = {'vm_state': 'stopped', 'power_state': SHUTDOWN}
            self._act(server.id, 'stop', NOVA_ITSELF, server.settle_at)
        elif how == 'GUEST_PAUSED':
            self._set(server, power_state=PAUSED)
        elif how == 'VANISHED':
            self._set(server, power_state=NOSTATE)
        elif how == 'PAUSED':
            self._set(server, vm_state='paused', task_state=None,
                      power_state=PAUSED)
            self._act(server.id, 'pause', OWNER)
        elif how == 'SUSPENDED':
            self._set(server, vm_state='suspended', task_state=None,
                      power_state=SUSPENDED)
            self._act(server.id, 'suspend', OWNER)
        elif how == 'ERROR':
            self._set(server, vm_state='error', task_state=None,
                      power_state=SHUTDOWN if power is None else power)
            server.fault = {'message': 'guest crashed', 'code': 500,
                            'created': now.strftime('%Y-%m-%dT%H:%M:%SZ')}
        elif how == 'STUCK':
            self._set(server, task_state=task,
                      power_state=server.power_state if power is None
                      else power)
        elif how == 'GONE':
            self._set(server, deleted=True, vm_state='deleted',
                      task_state=None, power_state=NOSTATE)
        else:
            raise ValueError('%s is not one of %s' % (how, BREAKS))

    def heal(self, server_id):
        """The fault clears by itself: the guest runs, no task."""
        server = self._live(server_id)
        if not self._reporting(server):
            raise NotReporting('%s is on %s, whose nova-compute does not '
                               'report' % (server_id, server.host))
        self._set(server, vm_state='active', task_state=None,
                  power_state=RUNNING)

    # Compute hosts

    def _host(self, name, *states):
        host = self.hosts[name]
        if host.state not in states:
            raise ValueError('host %s is %s, not %s' % (
                name, host.state, ' or '.join(states)))
        return host

    def _on(self, name):
        """The servers on the host that Nova has not deleted, by id."""
        return [s for _i, s in sorted(self.servers.items())
                if s.host == name and not s.deleted]

    def _stop_reporting(self, host, state, guests_lost, unnoticed=0):
        for server in self._on(host.name):
            # What it finished before it stopped.
            self._settle(server)
        host.state, host.since = state, self._clock()
        host.shown_at = host.since + _seconds(unnoticed)
        host.guests_lost = host.guests_lost or guests_lost

    def host_stops(self, name, guests_lost=False, unnoticed=0):
        """nova-compute stops reporting: host_status UNKNOWN.

        ``guests_lost``: the machine went down with it (its guests are
        gone when it is back), else only nova-compute stopped.
        ``unnoticed``: seconds Nova still shows it UP (what was left of
        its service_down_time since the last report).
        """
        self._stop_reporting(self._host(name, UP), UNKNOWN, guests_lost,
                             unnoticed)

    def host_back(self, name):
        """nova-compute starts again: its start-up handling, then UP."""
        self._start_compute(self._host(name, UNKNOWN))

    def host_forced_down(self, name):
        """``compute service set --down``: DOWN, its guests dead."""
        self._stop_reporting(self._host(name, UP, UNKNOWN), DOWN, True)

    def host_forced_up(self, name):
        """Forced up again, its nova-compute started on a fresh machine."""
        self._start_compute(self._host(name, DOWN))

    def _start_compute(self, host):
        """nova-compute's ``_init_instance`` for each of its servers."""
        lost = 0
        for server in self._on(host.name):
            running = server.vm_state in ('active', 'paused')
            if host.guests_lost and running:
                # The driver finds the guest shut off, or finds none.
                server.power_state = SHUTDOWN if lost % 2 == 0 else NOSTATE
                server.updated = self._clock()
                lost += 1
            self._init_instance(server)
            if (host.guests_lost and running and not server.task_state and
                    server.settle_at is None and
                    server.vm_state in ('active', 'paused') and
                    server.power_state == SHUTDOWN):
                # Nova's power sync stops a server whose guest is off.
                server.settle_at = self._clock() + _seconds(
                    PERIODIC_SYNC_SECONDS)
                server.settled = {'vm_state': 'stopped'}
                self._act(server.id, 'stop', NOVA_ITSELF, server.settle_at)
        host.state, host.since, host.guests_lost = UP, self._clock(), False
        host.shown_at = host.since

    def _init_instance(self, server):
        task = server.task_state
        if task is None:
            return
        if task in _REBOOT_TASKS:
            if server.queued and task in ('rebooting', 'rebooting_hard'):
                # Asked for while the host was down: the request waits in
                # the compute's queue and runs once it is back.
                self._busy(server, task, DURATIONS['reboot'],
                           vm_state='active', power_state=RUNNING)
                server.queued = False
            else:
                # Retried (or the task cleared, the guest running).
                self._set(server, vm_state='active', task_state=None,
                          power_state=RUNNING)
            return
        self._set(server, task_state=None, **_AT_START.get(task, {}))

    def lock(self, server_id, locked=True):
        self._live(server_id).locked = locked

    # The API, as a stack owner's novaclient reaches it

    def client(self, actor='recovery', stack_id=None, admin=False):
        """A client; ``stack_id``: the stack whose owner's trust it has.

        ``admin``: an admin's (heat-health-engine's own user), acting for
        that stack's recovery.
        """
        return _Client(self, actor, stack_id, admin)

    def _call(self, actor, call, server_id, *args):
        # Faults are the engines' (a crash is kill -9 of one): a user's
        # own calls never meet them.
        faults = self.faults if actor != 'user' else faults_mod.Faults()
        faults.check(faults_mod.BEFORE, call, server_id)
        try:
            result = getattr(self, '_api_' + call)(actor, server_id, *args)
        except nova_exc.Conflict:
            if call != 'get':
                # Sent all the same: an action asked for twice shows here.
                self.refused.append(self._record(
                    server_id, call, args[0] if args else None, actor,
                    self.caller))
            raise
        faults.check(faults_mod.AFTER, call, server_id)
        return result

    def _record(self, server_id, action, detail, actor, stack_id=None):
        """An Accepted with the server's host as Nova shows it now."""
        server = self.servers.get(server_id)
        host = self.hosts.get(server.host) if server is not None else None
        shown, since = host.shown(self._clock()) if host else (None, None)
        return Accepted(self._clock(), server_id, action, detail, actor,
                        stack_id, host and host.name, shown, since)

    def _accept(self, actor, server, action, detail=None):
        self.accepted.append(self._record(server.id, action, detail, actor,
                                          self.caller))
        self._act(server.id, action, ENGINE_USER if self.admin else OWNER)

    def _act(self, server_id, action, who, at=None):
        """One instance action, seen from ``at`` (now by default)."""
        self._requests += 1
        user_id, project_id = who
        self.instance_actions[server_id].append({
            'action': action, 'instance_uuid': server_id,
            'request_id': 'req-%06d' % self._requests, 'user_id': user_id,
            'project_id': project_id, 'start_time': at or self._clock(),
            'message': None})

    def _api_instance_actions(self, actor, server_id):
        """Those begun by now, newest first, as os-instance-actions."""
        self._live(server_id)
        now = self._clock()
        return [_Resource(dict(a, start_time=a['start_time'].strftime(
            '%Y-%m-%dT%H:%M:%S.%f')))
            for a in reversed(self.instance_actions[server_id])
            if a['start_time'] <= now]

    def _api_console_output(self, actor, server_id, length=None):
        """The last ``length`` lines of the console log (all: None)."""
        lines = self._live(server_id).console
        return '\n'.join(lines[-length:] if length else lines)

    def _api_get(self, actor, server_id):
        return _Resource(self._live(server_id).to_dict())

    def _check(self, server, action, vm_states, tasks=(None,)):
        if server.locked:
            raise _conflict(server, action, 'Instance %s is locked' %
                            server.id)
        if server.task_state not in tasks or server.vm_state not in \
                vm_states:
            raise _conflict(server, action)

    def _api_reboot(self, actor, server_id, kind='SOFT'):
        server = self._live(server_id)
        if kind == 'HARD':
            self._check(server, 'reboot', ('active', 'stopped', 'paused',
                                           'suspended', 'error'),
                        _HARD_REBOOT_TASKS)
        else:
            self._check(server, 'reboot', ('active',))
        self._accept(actor, server, 'reboot', kind)
        self._busy(server, 'rebooting_hard' if kind == 'HARD' else
                   'rebooting', DURATIONS['reboot'], vm_state='active',
                   power_state=RUNNING)

    def _api_rebuild(self, actor, server_id, image):
        server = self._live(server_id)
        self._check(server, 'rebuild', ('active', 'stopped', 'error'))
        if not server.image:
            raise _conflict(server, 'rebuild', 'Server %s boots from a '
                            'volume: no image to rebuild with' % server.id)
        self._accept(actor, server, 'rebuild', image)
        stopped = server.vm_state == 'stopped'
        self._busy(server, 'rebuilding', DURATIONS['rebuild'],
                   vm_state='stopped' if stopped else 'active',
                   power_state=SHUTDOWN if stopped else RUNNING)

    def _back_to_active(self, actor, server_id, action):
        """START, UNPAUSE or RESUME: from its one vm_state to active."""
        vm_state, task = _TO_ACTIVE[action]
        server = self._live(server_id)
        self._check(server, action, (vm_state,))
        self._accept(actor, server, action)
        self._busy(server, task, DURATIONS[action], vm_state='active',
                   power_state=RUNNING)

    def _api_start(self, actor, server_id):
        self._back_to_active(actor, server_id, 'start')

    def _api_unpause(self, actor, server_id):
        self._back_to_active(actor, server_id, 'unpause')

    def _api_resume(self, actor, server_id):
        self._back_to_active(actor, server_id, 'resume')

    def _api_stop(self, actor, server_id):
        server = self._live(server_id)
        self._check(server, 'stop', ('active', 'error', 'rescued'))
        self._accept(actor, server, 'stop')
        if server.power_state == NOSTATE:
            # The driver cannot find the guest: the task is reverted.
            self._busy(server, 'powering-off', DURATIONS['stop'])
        else:
            self._busy(server, 'powering-off', DURATIONS['stop'],
                       vm_state='stopped', power_state=SHUTDOWN)

    def _api_delete(self, actor, server_id):
        server = self._live(server_id)
        if server.locked:
            raise _conflict(server, 'delete', 'Instance %s is locked' %
                            server.id)
        self._accept(actor, server, 'delete')
        if not self._shown_up(server):
            # Its compute is down: the API deletes it itself.
            self._set(server, deleted=True, vm_state='deleted',
                      task_state=None, power_state=NOSTATE)
            return
        self._busy(server, 'deleting', DURATIONS['delete'], deleted=True,
                   vm_state='deleted', power_state=NOSTATE)

    def _api_evacuate(self, actor, server_id):
        """Rebuilt on another host, same id and ports (admin only).

        Nova evacuates only from a compute it takes for down (else 400),
        a server active, stopped or in error with no task; the scheduler
        picks an UP host, and with none the conductor sets the server
        ERROR where it is.
        """
        if not self.admin:
            raise nova_exc.Forbidden(403, 'Policy does not allow '
                                     'os_compute_api:os-evacuate')
        server = self._live(server_id)
        if self._shown_up(server):
            raise nova_exc.BadRequest(400, 'Compute service of %s is still '
                                      'in use.' % server.host)
        self._check(server, 'evacuate', ('active', 'stopped', 'error'))
        self._accept(actor, server, 'evacuate')
        source, server.host = server.host, None
        server.host = self._schedule(avoid=source)
        if server.host is None:
            server.host = source
            self._set(server, vm_state='error', task_state=None)
            return
        self._busy(server, 'rebuilding', DURATIONS['rebuild'],
                   vm_state='active', power_state=RUNNING)

    def _api_force_delete(self, actor, server_id):
        server = self._live(server_id)
        self._check(server, 'forceDelete', ('soft-delete',),
                    (None, 'deleting'))
        self._accept(actor, server, 'force_delete')
        self._set(server, deleted=True, vm_state='deleted', task_state=None,
                  power_state=NOSTATE)

    # The admin listings of the status poller

    def listing(self):
        """A NovaAdapter lookalike over this Nova (its own faults)."""
        return _Listing(self)

    def _list_faults(self, call, faults=None):
        """The listing's injected fault, as NovaAdapter raises it."""
        try:
            (faults or self.list_faults).check(faults_mod.BEFORE, call)
        except faults_mod.Crash:
            raise
        except Exception as e:
            raise nova_adapter.NovaUnavailable('%s: %s' % (
                type(e).__name__, e))

    def _listed(self, call, keep):
        self._list_faults(call)
        found = {}
        for server in sorted(self.servers.values(), key=lambda s: s.id):
            self._settle(server)
            if keep(server):
                found[server.id] = _listed(server)
        return found


def _listed(server):
    """The server as an admin listing shows it to the status poller.

    With its power state and host where the acting core lists them (the
    world also runs older versions of it).
    """
    listed = nova_adapter.Server(server.status, list(server.addresses),
                                 server.name, server.task_state,
                                 server.updated)
    if 'power_state' in listed._fields:
        listed = listed._replace(power_state=server.power_state)
    if 'host' in listed._fields:
        listed = listed._replace(host=server.host)
    return listed


def _seconds(value):
    return datetime.timedelta(seconds=value)


class _Resource(object):
    """What novaclient's managers return, as far as it is read."""

    def __init__(self, info):
        self._info = info
        self.id = info.get('id')
        self.status = info.get('status')

    def to_dict(self):
        return dict(self._info)


class _Manager(object):
    """Calls of one client, with the stack and rights it acts with."""

    def __init__(self, nova, actor, stack_id=None, admin=False):
        self._nova = nova
        self._actor = actor
        self._stack_id = stack_id
        self._admin = admin

    def _do(self, call, server, *args):
        server_id = getattr(server, 'id', server)
        self._nova.caller, self._nova.admin = self._stack_id, self._admin
        try:
            return self._nova._call(self._actor, call, server_id, *args)
        finally:
            self._nova.caller, self._nova.admin = None, False


class _Servers(_Manager):
    def get(self, server):
        return self._do('get', server)

    def reboot(self, server, reboot_type='SOFT'):
        return self._do('reboot', server, reboot_type)

    def rebuild(self, server, image, **kwargs):
        return self._do('rebuild', server, getattr(image, 'id', image))

    def start(self, server):
        return self._do('start', server)

    def stop(self, server):
        return self._do('stop', server)

    def unpause(self, server):
        return self._do('unpause', server)

    def resume(self, server):
        return self._do('resume', server)

    def delete(self, server):
        return self._do('delete', server)

    def force_delete(self, server):
        return self._do('force_delete', server)

    def evacuate(self, server):
        return self._do('evacuate', server)

    def get_console_output(self, server, length=None):
        return self._do('console_output', server, length)


class _InstanceActions(_Manager):
    def list(self, server):
        return self._do('instance_actions', server)


class _Client(object):
    """A python-novaclient Client, as far as NovaActions uses one."""

    def __init__(self, nova, actor, stack_id=None, admin=False):
        self.servers = _Servers(nova, actor, stack_id, admin)
        self.instance_action = _InstanceActions(nova, actor, stack_id,
                                                admin)


class _Listing(object):
    """NovaAdapter's interface (list_changed, list_all, ...)."""

    def __init__(self, nova):
        self._nova = nova
        self.requests = 0

    def list_changed(self, since):
        self.requests += 1
        return self._nova._listed('list_changed',
                                  lambda s: s.updated >= since)

    def list_all(self):
        self.requests += 1
        return self._nova._listed('list_all', lambda s: not s.deleted)

    def list_by_ids(self, server_ids, projects=None):
        self.requests += 1
        wanted = set(server_ids)
        return self._nova._listed(
            'list_by_ids', lambda s: s.id in wanted and not s.deleted)

    def list_page(self, marker=None):
        self.requests += 1
        return nova_adapter.Page(self._nova._listed(
            'list_page', lambda s: not s.deleted and
            (marker is None or s.id > marker)), None)

    def list_compute_hosts(self):
        """{host: state} of every nova-compute (os-services).

        Its faults are the double's ``host_faults``: a rule for every
        listing (``list_faults``) leaves it alone.
        """
        self.requests += 1
        self._nova._list_faults('list_compute_hosts',
                                self._nova.host_faults)
        now = self._nova._clock()
        return {name: host.shown(now)[0]
                for name, host in self._nova.hosts.items()}
