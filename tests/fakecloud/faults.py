"""Fault injection, and the admin API under /fakecloud that drives it.

Server faults change a server the way a hypervisor, a guest or another
client would, behind Heat's back, with the notifications Nova would send;
API faults make the compute API slow or failing, or hold server actions
before they are accepted.  Every fault is admin only.  With a duration, a
server fault undoes itself (as reset would) and an API fault expires.
Every fault applied goes on the timeline (GET /fakecloud/timeline), which
tests read for the order of events.
"""

import collections
import time

from tests.fakecloud import compute_base
from tests.fakecloud import http
from tests.fakecloud import state

SERVER_FAULTS = ('power_off', 'pause', 'suspend', 'shutdown',
                 'crash_to_error', 'vanish', 'hang', 'broken', 'stuck_task',
                 'slow_api', 'slow_actions', 'api_errors',
                 'fail_next_action', 'reset')
API_FAULTS = ('slow_api', 'slow_actions', 'api_errors', 'reset')
# Faults that hold requests for their 'delay'.
_SLOW = ('slow_api', 'slow_actions')
_TIMED = ('power_off', 'pause', 'suspend', 'shutdown', 'crash_to_error',
          'hang', 'stuck_task')
DEFAULT_SLOW_DELAY = 2.0
# Most servers one bulk creation makes.
BULK_MAX = 100000

# Nova's task states stuck_task accepts, each with the vm_state a server
# has when the operation that sets it starts (the default vm_state).  Left
# out: those of vm_states fakecloud does not model (resized, rescued,
# shelved).
STUCK_TASKS = dict(
    [(t, 'building') for t in ('scheduling', 'block_device_mapping',
                               'networking', 'spawning')] +
    [(t, 'active') for t in (
        'rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard',
        'reboot_pending_hard', 'reboot_started_hard', 'pausing',
        'suspending', 'powering-off', 'rebuilding',
        'rebuild_block_device_mapping', 'rebuild_spawning',
        'image_snapshot', 'image_snapshot_pending', 'image_pending_upload',
        'image_uploading', 'image_backup', 'updating_password',
        'resize_prep', 'resize_migrating', 'resize_migrated',
        'resize_finish', 'migrating', 'rescuing', 'shelving',
        'shelving_image_pending_upload', 'shelving_image_uploading',
        'deleting', 'soft-deleting')] +
    [('unpausing', 'paused'), ('resuming', 'suspended'),
     ('powering-on', 'stopped'), ('restoring', 'soft-delete')])
# The power state of each vm_state stuck_task accepts (error: unchanged).
STUCK_POWER = {'active': state.RUNNING, 'building': state.NOSTATE,
               'stopped': state.SHUTDOWN, 'paused': state.PAUSED,
               'suspended': state.SUSPENDED, 'soft-delete': state.SHUTDOWN,
               'error': None}
_POWER_BY_NAME = {name: code for code, name in
                  state.POWER_STATE_NAMES.items()}

# Changes that come from the hypervisor or the guest carry no user, as
# Nova's periodic power state sync sends them with an admin context.
SYSTEM_CONTEXT = {'user_id': None, 'project_id': None, 'tenant': None,
                  'user': None, 'roles': [], 'is_admin': True,
                  'request_id': None}


def _error(status, message):
    return http.ApiError(status, {'error': {'code': status,
                                            'message': message}})


class Faults(object):

    def __init__(self, store, lifecycle, scheduler, notifier, conf):
        self.store = store
        self.lifecycle = lifecycle
        self.scheduler = scheduler
        self.notifier = notifier
        self.health_url = 'http://%s:%d/%%s/health' % ('127.0.0.1',
                                                       conf.health_port)
        # API-wide faults: name -> {'until': monotonic time, 'delay': s}
        self.api_faults = {}
        # Server id -> requests about it that a slow fault holds now.
        self.held = collections.Counter()
        router = self.router = http.Router()
        router.add('GET', '/fault', self.show_api_faults)
        router.add('POST', '/fault', self.inject_api_fault)
        router.add('GET', '/servers/{server_id}', self.show_server)
        router.add('POST', '/servers/{server_id}/fault', self.inject)
        router.add('POST', '/servers', self.create_servers)
        router.add('GET', '/stats', self.stats)
        router.add('GET', '/timeline', self.timeline)

    # Applying API faults

    @staticmethod
    def _live(faults):
        now = time.monotonic()
        for name, fault in list(faults.items()):
            if fault['until'] is not None and fault['until'] <= now:
                del faults[name]
        return faults

    def before(self, server_id=None, compute_api=True, action=False):
        """Delay or fail a request as the API faults in force say.

        action: the request is a server action (POST .../action), which
        slow_actions holds too.
        """
        slow = _SLOW if action else ('slow_api',)
        with self.store.lock:
            faults = [self._live(self.api_faults)]
            server = self.store.servers.get(server_id) if server_id else None
            if server is not None:
                faults.append(self._live(server.api_faults))
            delay = max([f[name]['delay'] for f in faults for name in slow
                         if name in f] or [0])
            failing = any('api_errors' in f for f in faults)
            if delay and server is not None:
                self.held[server.id] += 1
        if delay:
            try:
                # Whether or not the caller still waits: what it asked is
                # done all the same, as Nova's API does.
                time.sleep(delay)
            finally:
                if server is not None:
                    with self.store.lock:
                        self.held[server.id] -= 1
                        if not self.held[server.id]:
                            del self.held[server.id]
        if failing and compute_api:
            raise compute_base.NovaError(
                500, 'Unexpected API Error. Please report this at '
                     'http://bugs.launchpad.net/nova/ and attach the Nova '
                     'API log if possible. (fakecloud fault api_errors)')

    # Admin API

    def dispatch(self, req, ctx, path):
        handler, kwargs = self.router.match(req.method, path)
        if handler is None:
            raise _error(404, 'no such fakecloud resource: %s' % path)
        if not ctx.is_admin:
            raise _error(403, 'fakecloud faults need the admin role')
        with self.store.lock:
            return handler(req, ctx, **kwargs)

    @staticmethod
    def _body(req, allowed):
        body = http.json_body(req, lambda m: _error(400, m))
        name = body.get('fault')
        if name not in allowed:
            raise _error(400, 'fault must be one of %s' % ', '.join(allowed))
        duration = body.get('duration')
        delay = body.get('delay', DEFAULT_SLOW_DELAY)
        for key, value in (('duration', duration), ('delay', delay)):
            if value is not None and (not isinstance(value, (int, float)) or
                                      value < 0):
                raise _error(400, '%s must be a number of seconds' % key)
        return name, duration, delay, body

    @staticmethod
    def _parameters(name, duration, delay):
        """What the timeline says a fault was given."""
        parameters = {}
        if duration is not None:
            parameters['duration'] = duration
        if name in _SLOW:
            parameters['delay'] = delay
        return parameters

    @staticmethod
    def _stuck_task(server, body):
        """stuck_task's task_state, vm_state and power_state, or 400."""
        task_state = body.get('task_state')
        if not isinstance(task_state, str) or task_state not in STUCK_TASKS:
            raise _error(400, 'task_state must be one of %s' %
                         ', '.join(sorted(STUCK_TASKS)))
        vm_state = body.get('vm_state', STUCK_TASKS[task_state])
        if not isinstance(vm_state, str) or vm_state not in STUCK_POWER:
            raise _error(400, 'vm_state must be one of %s' %
                         ', '.join(sorted(STUCK_POWER)))
        power = body.get('power_state')
        if isinstance(power, str):
            power = _POWER_BY_NAME.get(power.lower(), power)
        if power is None:
            power = STUCK_POWER[vm_state]
            if power is None:
                power = server.power_state
        elif (not isinstance(power, int) or isinstance(power, bool) or
                power not in state.POWER_STATE_NAMES):
            raise _error(400, 'power_state must be one of %s or their '
                         'names' % ', '.join(
                             str(c) for c in sorted(state.POWER_STATE_NAMES)))
        return {'task_state': task_state, 'vm_state': vm_state,
                'power_state': power}

    @staticmethod
    def _set_api_fault(faults, name, duration, delay):
        if name == 'reset':
            faults.clear()
        else:
            faults[name] = {'until': (
                None if duration is None else time.monotonic() + duration)}
            if name in _SLOW:
                faults[name]['delay'] = delay

    def _describe_api_faults(self, faults):
        now = time.monotonic()
        described = {}
        for name, fault in self._live(faults).items():
            until = fault['until']
            described[name] = {'remaining': None if until is None
                               else round(until - now, 3)}
            if 'delay' in fault:
                described[name]['delay'] = fault['delay']
        return described

    def show_api_faults(self, req, ctx):
        return http.Reply(200, {'api_faults': self._describe_api_faults(
            self.api_faults)})

    def inject_api_fault(self, req, ctx):
        name, duration, delay, _ = self._body(req, API_FAULTS)
        self.store.record(None, 'fault:' + name,
                          parameters=self._parameters(name, duration, delay))
        self._set_api_fault(self.api_faults, name, duration, delay)
        return self.show_api_faults(req, ctx)

    def _find(self, server_id):
        server = self.store.find_server(server_id, deleted=True)
        if server is None:
            raise _error(404, 'no server %s' % server_id)
        return server

    def describe(self, server):
        return {
            'id': server.id, 'name': server.name,
            'project_id': server.project_id, 'user_id': server.user_id,
            'status': server.status, 'vm_state': server.vm_state,
            'task_state': server.task_state,
            'power_state': server.power_state,
            'host': server.host, 'instance_name': server.instance_name,
            'deleted': server.deleted, 'hung': server.hung,
            'broken': server.broken,
            'stuck': server.stuck,
            'fail_next_action': server.fail_next_action,
            'api_faults': self._describe_api_faults(server.api_faults),
            'held_requests': self.held[server.id],
            'fault': server.fault,
            'created_at': state.isotime_us(server.created_at),
            'updated_at': state.isotime_us(server.updated_at),
            'ports': [{'id': p['id'], 'mac_address': p['mac_address'],
                       'fixed_ips': p['fixed_ips'], 'status': p['status']}
                      for p in self.store.ports_of(server.id)],
            'health_url': self.health_url % server.id,
        }

    def create_servers(self, req, ctx):
        """POST /servers {count, project_id, name_prefix}: a fleet at once.

        ``count`` servers ACTIVE and running from the start, in
        ``project_id`` (any id: no Keystone project is needed), with no
        port and no notification, as if booted long ago: for benchmarks
        of fleets too large to boot through the API. Answers their ids.
        """
        body = http.json_body(req, lambda m: _error(400, m))
        count = body.get('count')
        if not isinstance(count, int) or not 1 <= count <= BULK_MAX:
            raise _error(400, 'count must be an integer from 1 to %d'
                         % BULK_MAX)
        project_id = body.get('project_id') or ctx.project_id
        prefix = body.get('name_prefix') or 'bulk'
        if not isinstance(project_id, str) or not isinstance(prefix, str):
            raise _error(400, 'project_id and name_prefix are strings')
        flavor = self.store.flavors['1']
        image_id = state.fixed_id('image', 'cirros')
        ids = []
        for index in range(count):
            server = self.store.new_server(
                project_id, ctx.user_id, '%s-%d' % (prefix, index + 1),
                flavor, image_id)
            server.vm_state = 'active'
            server.task_state = None
            server.power_state = state.RUNNING
            server.launched_at = server.created_at
            server.touch()
            ids.append(server.id)
        self.store.record(None, 'bulk_created', count=count,
                          project_id=project_id)
        return http.Reply(201, {'servers': ids})

    def show_server(self, req, ctx, server_id):
        return http.Reply(200, {'server': self.describe(
            self._find(server_id))})

    def inject(self, req, ctx, server_id):
        server = self._find(server_id)
        name, duration, delay, body = self._body(req, SERVER_FAULTS)
        if server.deleted:
            raise _error(409, 'server %s is deleted' % server_id)
        parameters = self._parameters(name, duration, delay)
        stuck = None
        if name == 'stuck_task':
            stuck = self._stuck_task(server, body)
            parameters.update(stuck)
        notify = body.get('notify', True)
        if not isinstance(notify, bool):
            raise _error(400, 'notify must be true or false')
        if not notify:
            # Its notifications are lost on the way, as a broker that
            # drops them would lose them: only Nova's API tells.
            parameters['notify'] = False
        # Before the fault acts: what it causes comes later in the timeline.
        self.store.record(server, 'fault:' + name, parameters=parameters)
        server.console.append('fakecloud fault: %s' % name)
        if name in API_FAULTS and name != 'reset':
            self._set_api_fault(server.api_faults, name, duration, delay)
        elif notify:
            self.apply(server, name, stuck)
        else:
            with self.notifier.muted(server.id):
                self.apply(server, name, stuck)
            if duration is not None and name in _TIMED:
                self.scheduler.call_later(duration, self._expire, server,
                                          server.fault_generation)
        return http.Reply(200, {'server': self.describe(server)})

    def _expire(self, server, generation):
        with self.store.lock:
            if (server.fault_generation == generation and
                    not server.deleted):
                self.store.record(server, 'fault:reset', parameters={},
                                  expired=True)
                self.apply(server, 'reset')

    def apply(self, server, name, stuck=None):
        """Make server suffer fault name, now.

        stuck: stuck_task's states, as _stuck_task reads them.
        """
        server.fault_generation += 1
        life = self.lifecycle
        ctx = SYSTEM_CONTEXT
        if name == 'power_off':
            # The guest shut down; Nova's power sync stops the server.
            server.act('stop', ctx)
            life.instant(server, ctx, 'power_off', 'powering-off',
                         life.stopped)
        elif name == 'shutdown':
            server.act('stop', ctx)
            life.begin(server)
            life.emit(server, ctx, 'instance.shutdown.start')
            life.stopped(server, ctx)
            life.emit(server, ctx, 'instance.shutdown.end')
        elif name == 'pause':
            life.instant(server, ctx, 'pause', 'pausing', life.paused)
        elif name == 'suspend':
            life.instant(server, ctx, 'suspend', 'suspending',
                         life.suspended)
        elif name == 'crash_to_error':
            life.begin(server)
            server.fault = {'code': 500, 'created': state.isotime(
                time.time()), 'message': 'Instance crashed (fakecloud '
                                         'fault crash_to_error)'}
            life.set_state(server, ctx, vm_state='error', task_state=None,
                           power_state=state.CRASHED)
        elif name == 'vanish':
            life.hard_delete(server, ctx, delay=0)
        elif name == 'hang':
            server.hung = True
        elif name == 'broken':
            server.broken = True
        elif name == 'stuck_task':
            life.stick(server, ctx, **stuck)
        elif name == 'fail_next_action':
            server.fail_next_action = True
        elif name == 'reset':
            self._reset(server, ctx)

    def _reset(self, server, ctx):
        """Back to ACTIVE and healthy, the way each state recovers."""
        life = self.lifecycle
        server.hung = False
        server.broken = False
        server.fail_next_action = False
        server.api_faults.clear()
        vm_state = server.vm_state
        if server.stuck:
            # Nothing would finish the task: an admin resets the state.
            life.reset_state(server, ctx)
        elif vm_state == 'stopped':
            life.instant(server, ctx, 'power_on', 'powering-on',
                         life.running)
        elif vm_state == 'paused':
            life.instant(server, ctx, 'unpause', 'unpausing', life.resumed)
        elif vm_state == 'suspended':
            life.instant(server, ctx, 'resume', 'resuming', life.resumed)
        elif vm_state == 'soft-delete':
            life.instant(server, ctx, 'restore', 'restoring', life.running)
        elif vm_state == 'building':
            life.begin(server)
            server.launched_at = time.time()
            life.running(server, ctx)
            life.emit(server, ctx, 'instance.create.end',
                      kind='InstanceCreatePayload')
        elif vm_state != 'active' or server.task_state is not None:
            life.begin(server)
            life.running(server, ctx)

    def timeline(self, req, ctx):
        """GET /timeline[?server_id=ID][&since_seq=N]: events in order."""
        try:
            since_seq = int(req.GET.get('since_seq', 0))
        except ValueError:
            raise _error(400, 'since_seq must be an integer')
        entries, last_seq = self.store.timeline_since(
            since_seq, req.GET.get('server_id') or None)
        return http.Reply(200, {'timeline': entries, 'last_seq': last_seq})

    def stats(self, req, ctx):
        store = self.store
        return http.Reply(200, {'stats': {
            'servers': len(store.servers),
            'deleted_servers_kept': len(store.deleted_servers),
            'projects': len(store.servers_by_project),
            'ports': len(store.ports),
            'notifications_published': self.notifier.published,
            'notifications_failed': self.notifier.failed,
            'notifications_pending': self.notifier.pending}})
