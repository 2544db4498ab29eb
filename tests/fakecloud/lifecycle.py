"""How servers move between Nova's states, and what each move announces.

Every operation sets the task state at once, then steps on through the
scheduler (a fraction of task_delay apart) to its end state, sending the
versioned notifications Nova's compute manager sends for it.  Each new
operation on a server supersedes the pending steps of the previous one.
Settling ACTIVE or SHUTOFF and being deleted go on the store's timeline.
Callers hold the store lock; scheduled steps take it themselves.
"""

import time

from tests.fakecloud import network
from tests.fakecloud import state

_KEEP = object()

# Actions whose next run fails when a test armed fail_next_action, with the
# name Nova's compute manager gives the failing function.
_FAILING = {'reboot': 'reboot_instance', 'rebuild': 'rebuild_instance',
            'power_on': 'start_instance'}

# (vm_state, task_state) a server settles in, as the timeline names it.
_SETTLED = {('active', None): 'active', ('stopped', None): 'stopped'}


class Lifecycle(object):

    def __init__(self, store, scheduler, notifier, conf):
        self.store = store
        self.scheduler = scheduler
        self.notifier = notifier
        self.delay = conf.task_delay
        self.reclaim_interval = conf.reclaim_instance_interval
        self.update_on = conf.notify_on_state_change

    # Building blocks
    # ---------------

    def set_state(self, server, context, vm_state=_KEEP, task_state=_KEEP,
                  power_state=_KEEP, notify=True):
        old = (server.vm_state, server.task_state)
        if vm_state is not _KEEP:
            server.vm_state = vm_state
        if task_state is not _KEEP:
            server.task_state = task_state
        if power_state is not _KEEP:
            server.power_state = power_state
        server.touch()
        now = (server.vm_state, server.task_state)
        if now != old and now in _SETTLED:
            self.store.record(server, _SETTLED[now])
        vm_changed = old[0] != server.vm_state
        task_changed = old[1] != server.task_state
        if notify and ((self.update_on == 'vm_state' and vm_changed) or
                       (self.update_on == 'vm_and_task_state' and
                        (vm_changed or task_changed))):
            self.notifier.emit(server, context, 'instance.update',
                               kind='InstanceUpdatePayload',
                               state_update=old)

    def emit(self, server, context, event_type, **kwargs):
        self.notifier.emit(server, context, event_type, **kwargs)

    def saved(self, server, context, old):
        """instance.update as Nova sends it for any save of the instance.

        With notify_on_state_change set Nova announces every save, with
        the old states only when they changed as the option asks (else the
        current ones twice).  set_state sends only the changes; this is for
        the saves a stuck task is about: setting it and resetting it.
        """
        if self.update_on == 'none':
            return
        now = (server.vm_state, server.task_state)
        changed = old[0] != now[0] or (
            self.update_on == 'vm_and_task_state' and old != now)
        self.emit(server, context, 'instance.update',
                  kind='InstanceUpdatePayload',
                  state_update=old if changed else now)

    def begin(self, server):
        """Start a new operation: earlier pending steps will not run.

        A stuck task is over too: the new operation takes the server on.
        """
        server.operation += 1
        server.stuck = False
        return server.operation

    def later(self, server, fraction, step, *args):
        """Run step(*args) after fraction of task_delay.

        Unless the server has started another operation or is gone by then.
        """
        self.scheduler.call_later(self.delay * fraction, self._step, server,
                                  server.operation, step, args)

    def _step(self, server, operation, step, args):
        with self.store.lock:
            if server.operation == operation and not server.deleted:
                step(*args)

    def _fails(self, server, action):
        if action in _FAILING and server.fail_next_action:
            server.fail_next_action = False
            return True
        return False

    def _error(self, server, context, action, message):
        """End action in ERROR, with a fault and instance.<action>.error."""
        fault = {'exception': 'InstanceFault', 'message': message,
                 'function': _FAILING[action]}
        server.fault = {'code': 500, 'message': message,
                        'created': state.isotime(time.time())}
        if server.actions:
            # Nova marks the action whose event failed.
            server.actions[-1]['message'] = 'Error'
        self.set_state(server, context, vm_state='error', task_state=None)
        self.emit(server, context, 'instance.%s.error' % action, fault=fault)

    # Operations
    # ----------

    def boot(self, server, context):
        self.begin(server)
        self.later(server, 1 / 3.0, self._boot_networking, server, context)

    def _boot_networking(self, server, context):
        self.set_state(server, context, task_state='networking')
        self.emit(server, context, 'instance.create.start',
                  kind='InstanceCreatePayload')
        self.later(server, 1 / 3.0, self._boot_spawning, server, context)

    def _boot_spawning(self, server, context):
        self.set_state(server, context, task_state='spawning')
        self.later(server, 1 / 3.0, self._boot_done, server, context)

    def _boot_done(self, server, context):
        server.launched_at = time.time()
        network.set_ports_status(self.store, server, 'ACTIVE')
        self.set_state(server, context, vm_state='active', task_state=None,
                       power_state=state.RUNNING)
        self.emit(server, context, 'instance.create.end',
                  kind='InstanceCreatePayload')

    def reboot(self, server, context, hard):
        self.begin(server)
        suffix = '_hard' if hard else ''
        self.set_state(server, context, task_state='rebooting' + suffix)
        self.emit(server, context, 'instance.reboot.start')
        self.later(server, 0.5, self._reboot_started, server, context, hard)

    def _reboot_started(self, server, context, hard):
        suffix = '_hard' if hard else ''
        self.set_state(server, context, task_state='reboot_started' + suffix,
                       power_state=state.SHUTDOWN if hard else _KEEP)
        self.later(server, 0.5, self._reboot_done, server, context)

    def _reboot_done(self, server, context):
        if self._fails(server, 'reboot'):
            self._error(server, context, 'reboot',
                        'Reboot failed (fakecloud fault fail_next_action)')
            return
        self.running(server, context)
        self.emit(server, context, 'instance.reboot.end')

    def running(self, server, context, notify=True):
        """The guest (re)started: running, healthy, no fault."""
        server.hung = False
        server.fault = None
        network.set_ports_status(self.store, server, 'ACTIVE')
        self.set_state(server, context, vm_state='active', task_state=None,
                       power_state=state.RUNNING, notify=notify)

    def rebuild(self, server, context, image_id):
        self.begin(server)
        stays_stopped = server.vm_state == 'stopped'
        server.image_id = image_id
        self.set_state(server, context, task_state='rebuilding')
        self.emit(server, context, 'instance.rebuild.start',
                  kind='InstanceActionRebuildPayload')
        self.later(server, 1 / 3.0, self._rebuild_step, server, context,
                   'rebuild_block_device_mapping', stays_stopped)

    def _rebuild_step(self, server, context, task_state, stays_stopped):
        self.set_state(server, context, task_state=task_state)
        if task_state == 'rebuild_block_device_mapping':
            self.later(server, 1 / 3.0, self._rebuild_step, server, context,
                       'rebuild_spawning', stays_stopped)
        else:
            self.later(server, 1 / 3.0, self._rebuild_done, server, context,
                       stays_stopped)

    def _rebuild_done(self, server, context, stays_stopped):
        if self._fails(server, 'rebuild'):
            self._error(server, context, 'rebuild',
                        'Rebuild failed (fakecloud fault fail_next_action)')
            return
        if stays_stopped:
            # Nova stops a server rebuilt while stopped again: ACTIVE with
            # task powering-off, then stopped; it never settles ACTIVE.
            server.hung = False
            server.fault = None
            self.set_state(server, context, vm_state='active',
                           task_state='powering-off',
                           power_state=state.RUNNING)
            self.stopped(server, context)
        else:
            self.running(server, context)
        self.emit(server, context, 'instance.rebuild.end',
                  kind='InstanceActionRebuildPayload')

    def _simple(self, server, context, action, task_state, done):
        """An action with a start and an end notification."""
        self.begin(server)
        self.set_state(server, context, task_state=task_state)
        self.emit(server, context, 'instance.%s.start' % action)
        self.later(server, 1.0, self._simple_done, server, context, action,
                   done)

    def _simple_done(self, server, context, action, done):
        if self._fails(server, action):
            self._error(server, context, action,
                        '%s failed (fakecloud fault fail_next_action)' %
                        action)
            return
        done(server, context)
        self.emit(server, context, 'instance.%s.end' % action)

    def instant(self, server, context, action, task_state, done):
        """An action that happens at once, not through the API.

        The hypervisor or another client changed the server.
        """
        self.begin(server)
        self.set_state(server, context, task_state=task_state)
        self.emit(server, context, 'instance.%s.start' % action)
        done(server, context)
        self.emit(server, context, 'instance.%s.end' % action)

    def stick(self, server, context, task_state, vm_state, power_state):
        """Leave server in task_state for good.

        As when nova-compute died in the middle of the operation: nothing
        moves it on, and only the API's save of the task was announced.
        """
        self.begin(server)
        old = (server.vm_state, server.task_state)
        if power_state == state.RUNNING:
            network.set_ports_status(self.store, server, 'ACTIVE')
        elif power_state == state.SHUTDOWN:
            network.set_ports_status(self.store, server, 'DOWN')
        self.set_state(server, context, vm_state=vm_state,
                       task_state=task_state, power_state=power_state,
                       notify=False)
        server.stuck = True
        self.saved(server, context, old)

    def reset_state(self, server, context):
        """As an admin's nova reset-state --active: ACTIVE at once.

        The way out of a stuck task short of a hard reboot; the one save
        is announced by one instance.update.
        """
        self.begin(server)
        old = (server.vm_state, server.task_state)
        self.running(server, context, notify=False)
        self.saved(server, context, old)

    def stop(self, server, context):
        self._simple(server, context, 'power_off', 'powering-off',
                     self.stopped)

    def stopped(self, server, context):
        network.set_ports_status(self.store, server, 'DOWN')
        self.set_state(server, context, vm_state='stopped', task_state=None,
                       power_state=state.SHUTDOWN)

    def start(self, server, context):
        self._simple(server, context, 'power_on', 'powering-on',
                     self.running)

    def pause(self, server, context):
        self._simple(server, context, 'pause', 'pausing', self.paused)

    def paused(self, server, context):
        self.set_state(server, context, vm_state='paused', task_state=None,
                       power_state=state.PAUSED)

    def unpause(self, server, context):
        self._simple(server, context, 'unpause', 'unpausing', self.resumed)

    def resumed(self, server, context):
        """Unpaused or resumed: the guest goes on where it was.

        Still hung if it was.
        """
        self.set_state(server, context, vm_state='active', task_state=None,
                       power_state=state.RUNNING)

    def suspend(self, server, context):
        self._simple(server, context, 'suspend', 'suspending',
                     self.suspended)

    def suspended(self, server, context):
        self.set_state(server, context, vm_state='suspended', task_state=None,
                       power_state=state.SUSPENDED)

    def resume(self, server, context):
        self._simple(server, context, 'resume', 'resuming', self.resumed)

    def restore(self, server, context):
        self._simple(server, context, 'restore', 'restoring', self.running)

    def delete(self, server, context):
        """DELETE /servers/{id}: soft delete if configured, else delete."""
        if self.reclaim_interval and server.vm_state != 'soft-delete':
            self.begin(server)
            self.set_state(server, context, task_state='soft-deleting')
            self.emit(server, context, 'instance.soft_delete.start')
            self.later(server, 1.0, self._soft_deleted, server, context)
        else:
            self.hard_delete(server, context)

    def _soft_deleted(self, server, context):
        network.set_ports_status(self.store, server, 'DOWN')
        self.set_state(server, context, vm_state='soft-delete',
                       task_state=None, power_state=state.SHUTDOWN)
        self.store.record(server, 'deleted', soft=True)
        self.emit(server, context, 'instance.soft_delete.end')
        self.scheduler.call_later(self.reclaim_interval, self._step, server,
                                  server.operation, self.hard_delete,
                                  (server, context))

    def hard_delete(self, server, context, delay=1.0):
        self.begin(server)
        self.set_state(server, context, task_state='deleting')
        self.emit(server, context, 'instance.delete.start')
        if delay:
            self.later(server, delay / 2, self._shutdown_for_delete, server,
                       context, delay / 2)
        else:
            self._shutdown_for_delete(server, context, 0)

    def _shutdown_for_delete(self, server, context, delay):
        self.emit(server, context, 'instance.shutdown.start')
        server.power_state = state.SHUTDOWN
        self.emit(server, context, 'instance.shutdown.end')
        if delay:
            self.later(server, delay, self.gone, server, context)
        else:
            self.gone(server, context)

    def gone(self, server, context):
        """The end of a delete: ports go or are unbound, server forgotten."""
        for port in self.store.ports_of(server.id):
            if port['id'] in server.owned_ports:
                network.delete_port(self.store, port)
            else:
                network.unbind_port(self.store, port)
        server.owned_ports.clear()
        if self.store.volumes is not None:
            self.store.volumes.server_gone(server)
        now = time.time()
        server.terminated_at = server.deleted_at = now
        server.hung = False
        # Nova destroys the record rather than saving it: no instance.update.
        self.set_state(server, context, vm_state='deleted', task_state=None,
                       power_state=state.NOSTATE, notify=False)
        self.store.forget_server(server)
        self.store.record(server, 'deleted', soft=False)
        self.emit(server, context, 'instance.delete.end')
