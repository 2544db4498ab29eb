"""Nova-format notifications of server changes, published on the real bus.

Versioned notifications (topic versioned_notifications) carry Nova's
payload objects (InstanceActionPayload and friends, as nova_object
dicts); the legacy format (topic notifications) carries the flat
compute.instance.* payload.  Both go to the exchange "nova" through
oslo.messaging's messagingv2 driver, as Nova sends them.

Payloads are built when the change happens, under the store lock, and
published by one background thread so that a slow or absent broker never
slows the APIs down.
"""

import contextlib
import logging
import queue
import threading

from oslo_context import context as oslo_context
import oslo_messaging

from tests.fakecloud import state

LOG = logging.getLogger(__name__)

VERSIONED_TOPIC = 'versioned_notifications'
LEGACY_TOPIC = 'notifications'

# Versions of Nova's payload objects in 2026.2 (they only grow fields).
_VERSIONS = {
    'InstanceActionPayload': '1.9',
    'InstanceCreatePayload': '1.12',
    'InstanceActionRebuildPayload': '1.10',
    'InstanceUpdatePayload': '2.1',
}


def _object(name, version, data):
    return {'nova_object.name': name, 'nova_object.namespace': 'nova',
            'nova_object.version': version, 'nova_object.data': data}


class Event(object):
    """One state change to publish: who did it, what, in which state."""

    def __init__(self, context, event_type, priority, versioned, legacy):
        self.context = context
        self.event_type = event_type
        self.priority = priority
        self.versioned = versioned
        self.legacy = legacy


class PayloadBuilder(object):
    """Nova's payloads for a server, as it is at the moment of the call."""

    def __init__(self, store):
        self.store = store

    def _ip_addresses(self, server):
        found = []
        for port in self.store.ports_of(server.id):
            network = self.store.networks.get(port['network_id'], {})
            for fixed in port['fixed_ips']:
                found.append(_object('IpPayload', '1.0', {
                    'label': network.get('name'),
                    'mac': port['mac_address'],
                    'meta': {},
                    'port_uuid': port['id'],
                    'version': 6 if ':' in fixed['ip_address'] else 4,
                    'address': fixed['ip_address'],
                    'device_name': 'tap%s' % port['id'][:11]}))
        return found

    @staticmethod
    def _flavor(server):
        flavor = server.flavor
        return _object('FlavorPayload', '1.4', {
            'flavorid': flavor['id'], 'name': flavor['name'],
            'memory_mb': flavor['ram'], 'vcpus': flavor['vcpus'],
            'root_gb': flavor['disk'], 'ephemeral_gb': flavor['ephemeral'],
            'swap': flavor['swap'], 'rxtx_factor': flavor['rxtx_factor'],
            'vcpu_weight': 0, 'disabled': flavor['disabled'],
            'is_public': flavor['is_public'],
            'extra_specs': dict(flavor['extra_specs']), 'projects': None,
            'description': flavor['description']})

    def instance(self, server, context):
        """The fields of Nova's InstancePayload."""
        deleted = server.deleted
        return {
            'uuid': server.id,
            'user_id': server.user_id,
            'tenant_id': server.project_id,
            'reservation_id': server.reservation_id,
            'display_name': server.name,
            'display_description': server.description,
            'host_name': state.hostname(server.name),
            'host': server.host,
            'node': server.host,
            'os_type': None,
            'architecture': 'x86_64',
            'availability_zone': server.availability_zone,
            'image_uuid': server.image_id,
            'key_name': server.key_name,
            'kernel_id': '',
            'ramdisk_id': '',
            'created_at': state.isotime(server.created_at),
            'launched_at': state.isotime(server.launched_at),
            'terminated_at': state.isotime(server.terminated_at),
            'deleted_at': state.isotime(server.deleted_at),
            'updated_at': state.isotime(server.updated_at),
            'state': server.vm_state,
            'power_state': state.POWER_STATE_NAMES[server.power_state],
            'task_state': server.task_state,
            'progress': 0,
            'ip_addresses': [] if deleted else self._ip_addresses(server),
            'block_devices': [],
            'flavor': self._flavor(server),
            'metadata': dict(server.metadata),
            'locked': False,
            'locked_reason': None,
            'auto_disk_config': 'MANUAL',
            'request_id': context.get('request_id'),
            'action_initiator_user': context.get('user_id'),
            'action_initiator_project': context.get('project_id'),
            'shares': [],
        }

    def versioned(self, server, context, kind, fault=None,
                  state_update=None):
        data = self.instance(server, context)
        if kind == 'InstanceUpdatePayload':
            old_state, old_task = state_update
            data.update({
                'state_update': _object('InstanceStateUpdatePayload', '1.0', {
                    'old_state': old_state, 'state': server.vm_state,
                    'old_task_state': old_task,
                    'new_task_state': server.task_state}),
                'audit_period': _object('AuditPeriodPayload', '1.0', {
                    'audit_period_beginning': state.isotime(
                        server.created_at),
                    'audit_period_ending': state.isotime(server.updated_at)}),
                'old_display_name': None,
                'tags': list(server.tags)})
        else:
            data['fault'] = None if fault is None else _object(
                'ExceptionPayload', '1.1', {
                    'exception': fault['exception'],
                    'exception_message': fault['message'],
                    'function_name': fault['function'],
                    'module_name': 'nova.compute.manager',
                    'traceback': fault['message']})
        if kind == 'InstanceCreatePayload':
            data.update({'keypairs': [], 'tags': list(server.tags),
                         'trusted_image_certificates': None,
                         'instance_name': server.instance_name})
        if kind == 'InstanceActionRebuildPayload':
            data['trusted_image_certificates'] = None
        return _object(kind, _VERSIONS[kind], data)

    def legacy(self, server, context, state_update=None):
        """Nova's flat compute.instance.* payload."""
        flavor = server.flavor
        fixed_ips = []
        if not server.deleted:
            for ip in self._ip_addresses(server):
                ip = ip['nova_object.data']
                fixed_ips.append({
                    'address': ip['address'], 'floating_ips': [],
                    'label': ip['label'], 'meta': {}, 'type': 'fixed',
                    'version': ip['version'], 'vif_mac': ip['mac']})
        payload = {
            'tenant_id': server.project_id,
            'user_id': server.user_id,
            'instance_id': server.id,
            'display_name': server.name,
            'reservation_id': server.reservation_id,
            'hostname': state.hostname(server.name),
            'instance_type': flavor['name'],
            'instance_type_id': flavor['id'],
            'instance_flavor_id': flavor['id'],
            'memory_mb': flavor['ram'],
            'disk_gb': flavor['disk'] + flavor['ephemeral'],
            'root_gb': flavor['disk'],
            'ephemeral_gb': flavor['ephemeral'],
            'vcpus': flavor['vcpus'],
            'host': server.host,
            'node': server.host,
            'availability_zone': server.availability_zone,
            'cell_name': '',
            'created_at': state.isotime_us(server.created_at),
            'launched_at': state.isotime_us(server.launched_at) or '',
            'terminated_at': state.isotime_us(server.terminated_at) or '',
            'deleted_at': state.isotime_us(server.deleted_at) or '',
            'state': server.vm_state,
            'state_description': server.task_state or '',
            'power_state': server.power_state,
            'progress': '',
            'image_ref_url': server.image_id,
            'image_meta': {'base_image_ref': server.image_id},
            'metadata': dict(server.metadata),
            'architecture': 'x86_64',
            'os_type': None,
            'kernel_id': '',
            'ramdisk_id': '',
            'access_ip_v4': None,
            'access_ip_v6': None,
            'fixed_ips': fixed_ips,
            'locked': False,
        }
        if state_update is not None:
            payload.update({
                'old_state': state_update[0],
                'old_task_state': state_update[1],
                'new_task_state': server.task_state})
        return payload


class Notifier(object):
    """Builds events under the store lock; publishes them in the back."""

    def __init__(self, conf, store):
        self.format = conf.notification_format
        self.builder = PayloadBuilder(store)
        self.published = 0
        self.failed = 0
        self._queue = queue.Queue()
        # Servers whose news is lost on the way (see Faults.inject).
        self._muted = set()
        transport = oslo_messaging.get_notification_transport(conf)
        conf.set_default('driver', ['messagingv2'],
                         group='oslo_messaging_notifications')
        self._versioned = oslo_messaging.Notifier(
            transport, publisher_id='nova-compute:%s' % conf.compute_host,
            topics=[VERSIONED_TOPIC], retry=3)
        self._legacy = oslo_messaging.Notifier(
            transport, publisher_id='compute.%s' % conf.compute_host,
            topics=[LEGACY_TOPIC], retry=3)
        threading.Thread(target=self._publish_forever, name='notifier',
                         daemon=True).start()

    @property
    def pending(self):
        return self._queue.qsize()

    @contextlib.contextmanager
    def muted(self, server_id):
        """Nothing is sent about this server meanwhile (under the lock)."""
        self._muted.add(server_id)
        try:
            yield
        finally:
            self._muted.discard(server_id)

    def emit(self, server, context, event_type, kind='InstanceActionPayload',
             fault=None, state_update=None):
        """Queue event_type (e.g. instance.power_off.end) for server."""
        if server.id in self._muted:
            return
        priority = 'ERROR' if event_type.endswith('.error') else 'INFO'
        versioned = legacy = None
        if self.format in ('versioned', 'both'):
            versioned = self.builder.versioned(server, context, kind, fault,
                                               state_update)
        if self.format in ('unversioned', 'both'):
            legacy = self.builder.legacy(server, context, state_update)
        self._queue.put(Event(context, event_type, priority, versioned,
                              legacy))

    @staticmethod
    def _context(values):
        # oslo.messaging drops plain dicts: it sends a context's redacted
        # copy, as Nova's RequestContext gives it.
        return oslo_context.RequestContext(
            user_id=values.get('user_id'), project_id=values.get('project_id'),
            roles=values.get('roles'), is_admin=values.get('is_admin'),
            request_id=values.get('request_id'), overwrite=False)

    def _publish_forever(self):
        while True:
            event = self._queue.get()
            for notifier, payload, event_type in (
                    (self._versioned, event.versioned, event.event_type),
                    (self._legacy, event.legacy,
                     'compute.' + event.event_type)):
                if payload is None:
                    continue
                try:
                    send = (notifier.error if event.priority == 'ERROR'
                            else notifier.info)
                    send(self._context(event.context), event_type, payload)
                    self.published += 1
                except Exception:
                    self.failed += 1
                    LOG.exception('publishing %s failed', event_type)
