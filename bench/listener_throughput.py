"""Nova notifications per second heat-health's listener drains.

On the real RabbitMQ of the local deployment: declares a pool of its own
on exchange ``nova``, topic ``versioned_notifications``, pre-publishes N
notifications of Nova's versioned shape (95% about instances nobody
watches, 5% about 10,000 watched ones), then starts the LifecycleListener
on that pool and times the drain from start to the last one handled.
Publishing first keeps the publisher's speed out of the figure.  Needs
``tools/localcloud up``.

    python bench/listener_throughput.py [--count 50000] [--watched 10000]
"""

import argparse
import datetime
import json
import pathlib
import random
import sys
import threading
import time
import uuid

import kombu
from oslo_config import cfg
import oslo_messaging

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from heat_health.engine.monitor import lifecycle_events  # noqa: E402
from tests.functional.notifications import delete_queue  # noqa: E402
from tests.functional.notifications import transport_url  # noqa: E402

EVENT_TYPES = ['instance.power_off.end', 'instance.update',
               'instance.power_on.end', 'instance.pause.end']


def transport(url):
    return oslo_messaging.get_notification_transport(cfg.ConfigOpts(),
                                                     url=url)


def payload(server_id, vm_state):
    """Nova's InstanceActionPayload, with its usual fields."""
    def obj(name, data):
        return {'nova_object.name': name, 'nova_object.namespace': 'nova',
                'nova_object.version': '1.9', 'nova_object.data': data}
    return obj('InstanceActionPayload', {
        'uuid': server_id, 'user_id': uuid.uuid4().hex,
        'tenant_id': uuid.uuid4().hex, 'reservation_id': 'r-1a2b3c4d',
        'display_name': 'web-%s' % server_id[:6], 'display_description': '',
        'host_name': 'web', 'host': 'compute-1', 'node': 'compute-1',
        'os_type': None, 'architecture': 'x86_64',
        'availability_zone': 'nova', 'image_uuid': str(uuid.uuid4()),
        'key_name': None, 'kernel_id': '', 'ramdisk_id': '',
        'created_at': '2026-11-22T10:00:00Z',
        'launched_at': '2026-11-22T10:00:05Z', 'terminated_at': None,
        'deleted_at': None, 'updated_at': '2026-11-22T12:00:00Z',
        'state': vm_state, 'power_state': 'shutdown', 'task_state': None,
        'progress': 0,
        'ip_addresses': [obj('IpPayload', {
            'label': 'private', 'mac': 'fa:16:3e:00:00:01', 'meta': {},
            'port_uuid': str(uuid.uuid4()), 'version': 4,
            'address': '10.0.0.17', 'device_name': 'tap0'})],
        'block_devices': [],
        'flavor': obj('FlavorPayload', {
            'flavorid': '1', 'name': 'm1.tiny', 'memory_mb': 512,
            'vcpus': 1, 'root_gb': 1, 'ephemeral_gb': 0, 'swap': 0,
            'rxtx_factor': 1.0, 'vcpu_weight': 0, 'disabled': False,
            'is_public': True, 'extra_specs': {}, 'projects': None,
            'description': None}),
        'metadata': {}, 'locked': False, 'locked_reason': None,
        'auto_disk_config': 'MANUAL', 'request_id': None,
        'action_initiator_user': None, 'action_initiator_project': None,
        'shares': [], 'fault': None})


def publish(url, ids, rnd):
    """Publish as oslo.messaging's messagingv2 driver does.

    Straight through kombu, so that the publisher is quick.
    """
    with kombu.Connection(url.replace('rabbit://', 'amqp://', 1)) as conn:
        exchange = kombu.Exchange('nova', type='topic', durable=False)
        producer = conn.Producer(exchange=exchange, serializer='json')
        for server_id in ids:
            message = {
                'message_id': str(uuid.uuid4()),
                'publisher_id': 'nova-compute:bench',
                'event_type': rnd.choice(EVENT_TYPES), 'priority': 'INFO',
                'payload': payload(server_id, 'stopped'),
                'timestamp': str(datetime.datetime.utcnow())}
            producer.publish(
                {'oslo.version': '2.0', 'oslo.message': json.dumps(message)},
                routing_key='versioned_notifications.info')
    return len(ids)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--count', type=int, default=50000)
    parser.add_argument('--watched', type=int, default=10000)
    parser.add_argument('--watched-share', type=float, default=0.05)
    args = parser.parse_args()

    url = transport_url()
    watched = {str(uuid.uuid4()) for _ in range(args.watched)}
    watched_list = sorted(watched)
    rnd = random.Random(1)
    ids = [rnd.choice(watched_list) if rnd.random() < args.watched_share
           else str(uuid.uuid4()) for _ in range(args.count)]
    pool = 'heat-health-bench-%s' % uuid.uuid4().hex[:8]

    cfg.CONF([], project='heat')
    cfg.CONF.set_override('nova_legacy_topic', '', group='heat_health')

    handled = [0]
    observed = [0]
    lock = threading.Lock()
    done = threading.Event()

    def is_watched(server_id):
        with lock:
            handled[0] += 1
            if handled[0] >= args.count:
                done.set()
        return server_id in watched

    def observe(observation):
        with lock:
            observed[0] += 1

    # Declare the pool's queue, then leave it to fill up.
    listener = lifecycle_events.LifecycleListener(
        observe, is_watched, transport=transport(url), pool=pool)
    listener.start()
    listener.stop()
    tport = transport(url)

    started = time.monotonic()
    sent = publish(url, ids, rnd)
    publish_s = time.monotonic() - started
    print('published %d notifications in %.1fs (%.0f/s)'
          % (sent, publish_s, sent / publish_s))
    time.sleep(1)

    listener = lifecycle_events.LifecycleListener(
        observe, is_watched, transport=tport, pool=pool)
    cpu = time.process_time()
    started = time.monotonic()
    listener.start()
    finished = done.wait(600)
    drain_s = time.monotonic() - started
    cpu = time.process_time() - cpu
    listener.stop()
    tport.cleanup()
    delete_queue(url, pool)
    expected = sum(1 for i in ids if i in watched)
    print('pool %s: handled %d of %d (%d about watched servers, %d '
          'observations) in %.2fs' % (pool, handled[0], args.count,
                                      expected, observed[0], drain_s))
    print('throughput: %.0f notifications/s (target >= 5000/s)%s; '
          'listener CPU %.2fs' % (handled[0] / drain_s,
                                  '' if finished else ' [timed out]', cpu))


if __name__ == '__main__':
    main()
