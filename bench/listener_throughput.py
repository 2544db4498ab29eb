"""Nova notifications per second heat-health's listener drains.

On the real RabbitMQ of the local deployment: declares a pool of its own
on exchange ``nova``, topic ``versioned_notifications``, pre-publishes N
notifications of Nova's versioned shape (95% about instances nobody
watches, 5% about 10,000 watched ones), then starts the engine's listener
on that pool as ``[heat_health] notification_workers`` configures it (in
the engine process for 0, else in that many worker processes reading the
deployment's heat.conf) and samples its count of handled notifications.
Prints the sustained rate (from 10% to 90% drained, so process start-up is
left out) and the CPU (this process and the workers) per notification.
Publishing first keeps the publisher's speed out of the figure.  Needs
``tools/localcloud up``.

    python bench/listener_throughput.py [--count 50000] [--workers 0,2]
"""

import argparse
import datetime
import json
import pathlib
import random
import resource
import sys
import tempfile
import threading
import time
import uuid

import kombu
from oslo_config import cfg
import oslo_messaging

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from heat_health.engine.monitor import lifecycle_events  # noqa: E402
from heat_health.engine.monitor import listener_workers  # noqa: E402
from tests.functional import cloud  # noqa: E402
from tests.functional.notifications import delete_queue  # noqa: E402
from tests.functional.notifications import transport_url  # noqa: E402

HEAT_CONF = cloud.STATE_DIR / 'etc' / 'heat.conf'

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


def queued(url, queue):
    """Messages waiting in ``queue`` (a broker policy may cap it)."""
    with kombu.Connection(url.replace('rabbit://', 'amqp://', 1)) as conn:
        return conn.default_channel.queue_declare(
            queue, passive=True).message_count


def listeners(workers, observe, watched, pool, url, scratch):
    """The engine's listener, in ``workers`` processes (0: this one).

    On ``pool``, with this process's topics (cfg.CONF). Returns it with a
    callable giving its count of handled notifications.
    """
    if not workers:
        listener = lifecycle_events.LifecycleListener(
            observe, watched.__contains__, transport=transport(url),
            pool=pool)
        return listener, lambda: listener.handled
    extra = scratch / ('workers-%s.conf' % pool)
    extra.write_text('[heat_health]\nnotification_pool = %s\n'
                     'nova_legacy_topic = %s\n' % (
                         pool, cfg.CONF.heat_health.nova_legacy_topic))
    listener = listener_workers.ListenerWorkers(
        observe, workers, args=['--config-file', str(HEAT_CONF),
                                '--config-file', str(extra)])
    listener.watch(watched)
    return listener, lambda: listener.handled


def sustained(samples, total):
    """Notifications/s between 10% and 90% of ``total`` handled."""
    low = next(s for s in samples if s[1] >= 0.1 * total)
    high = next(s for s in samples if s[1] >= 0.9 * total)
    return (high[1] - low[1]) / max(high[0] - low[0], 1e-6)


def run(workers, args, url, scratch):
    watched = {str(uuid.uuid4()) for _ in range(args.watched)}
    watched_list = sorted(watched)
    rnd = random.Random(1)
    ids = [rnd.choice(watched_list) if rnd.random() < args.watched_share
           else str(uuid.uuid4()) for _ in range(args.count)]
    pool = 'heat-health-bench-%s' % uuid.uuid4().hex[:8]
    observed = [0]
    lock = threading.Lock()

    def observe(observation):
        with lock:
            observed[0] += 1

    # Declare the pool's queue, then leave it to fill up.
    listener, _count = listeners(0, observe, watched, pool, url, scratch)
    listener.start()
    listener.stop()
    sent = publish(url, ids, rnd)
    time.sleep(1)
    goal = queued(url, pool)
    if goal < sent:
        print('only %d of %d are queued: a broker policy caps queue %s'
              % (goal, sent, pool))

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time()
    listener, handled = listeners(workers, observe, watched, pool, url,
                                  scratch)
    started = time.monotonic()
    listener.start()
    samples = [(0.0, 0)]
    while samples[-1][1] < goal and samples[-1][0] < 600:
        time.sleep(0.01)
        samples.append((time.monotonic() - started, handled()))
    listener.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (time.process_time() - cpu + after.ru_utime - children.ru_utime +
           after.ru_stime - children.ru_stime)
    delete_queue(url, pool)
    expected = sum(1 for i in ids if i in watched)
    print('workers %d: handled %d of %d in %.2fs (%d about watched servers, '
          '%d observations); sustained %.0f notifications/s (target >= '
          '5000/s)%s; CPU %.1f us per notification' % (
              workers, samples[-1][1], goal, samples[-1][0], expected,
              observed[0], sustained(samples, goal),
              '' if samples[-1][1] >= goal else ' [timed out]',
              cpu / goal * 1e6))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--count', type=int, default=50000)
    parser.add_argument('--watched', type=int, default=10000)
    parser.add_argument('--watched-share', type=float, default=0.05)
    parser.add_argument('--workers', default=None,
                        help='comma-separated values of [heat_health] '
                             'notification_workers to measure (default: '
                             '0 and the option\'s default)')
    args = parser.parse_args()

    cfg.CONF([], project='heat')
    cfg.CONF.set_override('nova_legacy_topic', '', group='heat_health')
    default = cfg.CONF.heat_health.notification_workers
    counts = ([int(n) for n in args.workers.split(',')] if args.workers
              else sorted({0, default}))
    url = transport_url()
    with tempfile.TemporaryDirectory() as scratch:
        for workers in counts:
            run(workers, args, url, pathlib.Path(scratch))


if __name__ == '__main__':
    main()
