"""A Nova virt driver whose guests fail the way real guests do.

Nova's own fake driver keeps guests in memory and does what it is told.
This one, for the local deployment's nova-compute services, adds what a
hypervisor does behind Nova's back: a guest shuts down or crashes by itself,
QEMU pauses it on an I/O error, it is suspended, it vanishes; an operation
fails or never returns. Each fault changes the guest's power state and
emits the lifecycle event libvirt would, so Nova's own handling runs
(``_sync_instance_power_state``) and the API shows what real Nova shows.

Inside a running guest an application answers its health URL (the control
API's ``/<uuid>/health``): ``ok`` while the guest runs. The application
fault ``hang`` makes it stop answering while Nova and the hypervisor see
nothing wrong; what cures a real hung application cures it here: the guest
rebooted, rebuilt or powered off (by Nova or by a fault), or ``reset``.
Pausing and suspending keep the guest's memory, and the hang with it.

Guests are kept in ``state_path``, so a nova-compute killed and started
again finds its guests (as libvirt's domains outlive it) and Nova's own
restart handling (``_init_instance``) runs against them. The node's uuid
is derived from its name and written as Nova's ``compute_id``, so a
restart is not refused as a lost identity.
"""

import json
import os
import threading
import time
import uuid

from nova.compute import power_state
from nova import conf as nova_conf
from nova import exception
from nova.virt import event as virtevent
from nova.virt import fake
from nova.virt import node as virt_node
from oslo_log import log as logging

from tests.fault_driver import control

LOG = logging.getLogger(__name__)
CONF = nova_conf.CONF

GUESTS_FILE = 'fault_driver_guests.json'
NODE_NAMESPACE = uuid.UUID('5b0c6a52-3f43-4c4e-9c55-2b1c1f3c8e07')

# fault -> (power state the guest is left in, lifecycle event emitted).
# None as power state: the guest is gone from the hypervisor.
GUEST_FAULTS = {
    'power_off': (power_state.SHUTDOWN, virtevent.EVENT_LIFECYCLE_STOPPED),
    'crash': (power_state.CRASHED, virtevent.EVENT_LIFECYCLE_STOPPED),
    'pause': (power_state.PAUSED, virtevent.EVENT_LIFECYCLE_PAUSED),
    'suspend': (power_state.SUSPENDED, virtevent.EVENT_LIFECYCLE_SUSPENDED),
    'lose': (None, virtevent.EVENT_LIFECYCLE_STOPPED),
}
# Faults of the application in the guest: Nova and the hypervisor see
# nothing.
APPLICATION_FAULTS = ('hang',)
# Driver operations a fault can make fail or hang, the next time each runs.
OPERATIONS = ('spawn', 'reboot', 'power_on', 'power_off', 'pause',
              'unpause', 'suspend', 'resume', 'destroy')


class OperationFailed(exception.NovaException):
    msg_fmt = 'Injected failure of %(operation)s on %(uuid)s'


class FaultDriver(fake.FakeDriver):
    """FakeDriver with faults, a stable node identity and kept guests."""

    def __init__(self, virtapi, read_only=False):
        super(FaultDriver, self).__init__(virtapi, read_only)
        self._lock = threading.RLock()
        # uuid -> {operation: 'fail' | seconds to hang}
        self._next = {}
        # Guests whose application hangs (kept on disk with them).
        self._hung = set()
        self._load_guests()
        self._control = None

    # Identity and host

    @staticmethod
    def node_uuid(nodename):
        return str(uuid.uuid5(NODE_NAMESPACE, nodename))

    def init_host(self, host):
        super(FaultDriver, self).init_host(host)
        if virt_node.read_local_node_uuid() is None:
            virt_node.write_local_node_uuid(self.node_uuid(host))
        port = int(os.environ.get('FAULT_DRIVER_PORT') or 0)
        if port:
            self._control = control.serve(self, port)

    def get_available_resource(self, nodename):
        found = super(FaultDriver, self).get_available_resource(nodename)
        if found:
            found['uuid'] = self.node_uuid(nodename)
        return found

    def get_nodenames_by_uuid(self, refresh=False):
        return {self.node_uuid(n): n for n in self.get_available_nodes()}

    def get_host_uptime(self):
        return time.strftime(' %H:%M:%S up 1 day,  1 user,  load average: '
                             '0.00, 0.00, 0.00')

    # Guests kept on disk

    def _guests_path(self):
        return os.path.join(CONF.state_path, GUESTS_FILE)

    def _load_guests(self):
        try:
            with open(self._guests_path()) as f:
                kept = json.load(f)
        except (OSError, ValueError):
            return
        for guest_uuid, guest in kept.items():
            self.instances[guest_uuid] = fake.FakeInstance(
                guest['name'], guest['state'], guest_uuid)
            if guest.get('hung'):
                self._hung.add(guest_uuid)

    def _save(self):
        path = self._guests_path()
        with self._lock:
            kept = {u: {'name': i.name, 'state': i.state,
                        'hung': u in self._hung}
                    for u, i in self.instances.items()}
            with open(path + '.new', 'w') as f:
                json.dump(kept, f)
            os.replace(path + '.new', path)

    def _set_state(self, instance, state):
        if instance.uuid not in self.instances:
            raise exception.InstanceNotFound(instance_id=instance.uuid)
        self.instances[instance.uuid].state = state
        self._save()

    # Faults asked for through the control API

    def guest(self, guest_uuid):
        """What the hypervisor holds of a guest, for the control API."""
        with self._lock:
            found = self.instances.get(guest_uuid)
            return {'uuid': guest_uuid, 'host': self._host,
                    'power_state': None if found is None else found.state,
                    'hung': guest_uuid in self._hung,
                    'next': dict(self._next.get(guest_uuid, {}))}

    def health(self, guest_uuid):
        """What the guest's application answers its health check.

        (status, text), or None while it hangs: the check gets no answer.
        404 for a guest this host does not hold (a lost one included), 503
        while the guest does not run.
        """
        with self._lock:
            found = self.instances.get(guest_uuid)
            if found is None:
                return 404, 'no guest %s on this host\n' % guest_uuid
            if found.state != power_state.RUNNING:
                return 503, 'guest is %s\n' % power_state.STATE_MAP.get(
                    found.state, found.state)
            if guest_uuid in self._hung:
                return None
            return 200, 'ok\n'

    def _cure(self, guest_uuid):
        """The application starts afresh: the guest stopped or rebooted."""
        with self._lock:
            if guest_uuid in self._hung:
                self._hung.discard(guest_uuid)
                LOG.info('Application of guest %s no longer hangs',
                         guest_uuid)

    def inject(self, guest_uuid, fault, operation=None, seconds=None):
        """Make the fault happen now (or arm it for the next operation).

        Returns what the hypervisor holds of the guest; a fault that
        happens now adds ``faulted_at``, when it did (this host's clock):
        Nova handles the lifecycle event before the answer is sent.
        """
        if fault in ('fail_next', 'hang_next'):
            if operation not in OPERATIONS:
                raise ValueError('operation must be one of %s' %
                                 ', '.join(OPERATIONS))
            with self._lock:
                self._next.setdefault(guest_uuid, {})[operation] = (
                    'fail' if fault == 'fail_next' else float(seconds or 3600))
            return self.guest(guest_uuid)
        if fault == 'reset':
            with self._lock:
                self._next.pop(guest_uuid, None)
                self._cure(guest_uuid)
                self._save()
            return self.guest(guest_uuid)
        if fault in APPLICATION_FAULTS:
            with self._lock:
                if guest_uuid not in self.instances:
                    raise KeyError(guest_uuid)
                self._hung.add(guest_uuid)
                faulted_at = time.time()
                self._save()
            LOG.info('Fault %(fault)s: the application of guest %(uuid)s '
                     'no longer answers', {'fault': fault,
                                           'uuid': guest_uuid})
            return dict(self.guest(guest_uuid), faulted_at=faulted_at)
        if fault not in GUEST_FAULTS:
            raise ValueError('fault must be one of %s' % ', '.join(
                sorted(GUEST_FAULTS) + list(APPLICATION_FAULTS) +
                ['fail_next', 'hang_next', 'reset']))
        state, transition = GUEST_FAULTS[fault]
        with self._lock:
            if guest_uuid not in self.instances:
                raise KeyError(guest_uuid)
            if state is None:
                del self.instances[guest_uuid]
            else:
                self.instances[guest_uuid].state = state
            faulted_at = time.time()
            if state in (None, power_state.SHUTDOWN, power_state.CRASHED):
                # Paused or suspended, the guest keeps its memory.
                self._cure(guest_uuid)
            self._save()
        LOG.info('Fault %(fault)s: guest %(uuid)s now in power state '
                 '%(state)s', {'fault': fault, 'uuid': guest_uuid,
                               'state': state})
        self.emit_event(virtevent.LifecycleEvent(guest_uuid, transition))
        return dict(self.guest(guest_uuid), faulted_at=faulted_at)

    def _armed(self, operation, instance):
        with self._lock:
            armed = self._next.get(instance.uuid, {}).pop(operation, None)
        if armed is None:
            return
        if armed == 'fail':
            LOG.info('Failing %(op)s of %(uuid)s as asked',
                     {'op': operation, 'uuid': instance.uuid})
            raise OperationFailed(operation=operation, uuid=instance.uuid)
        LOG.info('Holding %(op)s of %(uuid)s for %(s)s s as asked',
                 {'op': operation, 'uuid': instance.uuid, 's': armed})
        time.sleep(armed)

    # Operations: the fake driver's, kept on disk, with faults armed

    def spawn(self, context, instance, *args, **kwargs):
        self._armed('spawn', instance)
        self._cure(instance.uuid)
        super(FaultDriver, self).spawn(context, instance, *args, **kwargs)
        self._save()

    def reboot(self, context, instance, *args, **kwargs):
        self._armed('reboot', instance)
        self._cure(instance.uuid)
        super(FaultDriver, self).reboot(context, instance, *args, **kwargs)
        self._save()

    def power_on(self, context, instance, *args, **kwargs):
        self._armed('power_on', instance)
        self._cure(instance.uuid)
        super(FaultDriver, self).power_on(context, instance, *args, **kwargs)
        self._save()

    def power_off(self, instance, *args, **kwargs):
        self._armed('power_off', instance)
        self._cure(instance.uuid)
        super(FaultDriver, self).power_off(instance, *args, **kwargs)
        self._save()

    def pause(self, instance):
        self._armed('pause', instance)
        self._set_state(instance, power_state.PAUSED)

    def unpause(self, instance):
        self._armed('unpause', instance)
        self._set_state(instance, power_state.RUNNING)

    def suspend(self, context, instance):
        self._armed('suspend', instance)
        self._set_state(instance, power_state.SUSPENDED)

    def resume(self, context, instance, *args, **kwargs):
        self._armed('resume', instance)
        self._set_state(instance, power_state.RUNNING)

    def destroy(self, context, instance, *args, **kwargs):
        self._armed('destroy', instance)
        self._cure(instance.uuid)
        super(FaultDriver, self).destroy(context, instance, *args, **kwargs)
        self._save()
