"""Nova notifications per second heat-health's listeners drain.

On the real RabbitMQ of the local deployment: declares a pool of its own
on topic ``versioned_notifications`` of an exchange of its own (on Nova's,
``nova``, every other pool would get a copy of the backlog, and the
deployment's engine would drain it at the same time), pre-publishes N
notifications per engine of Nova's versioned shape (95% about instances
nobody watches, 5% about 10,000 watched ones), then starts the listeners
of one or of several engines on that pool, each as ``[heat_health]
notification_workers`` configures it (in this process for 0, else in
that many worker processes reading the deployment's heat.conf), and
samples their count of handled notifications. Prints the sustained rate
(from 10% to 90% drained, so process start-up is left out: the backlog
grows with the engines, as their workers take that much longer to start)
and the CPU (this process and the workers) per notification. Publishing
first keeps the publisher's speed out of the figure.

Each engine is the engine's own notification path: its listener hands
every observation to its Router, which keeps the news of the servers the
engine owns and forwards the rest to their owner with an RPC cast to that
engine's own server (on a topic of the benchmark's, served in this
process), where the Router takes it in. The watched servers are dealt to
the engines in turn, so with three engines two thirds of the news is
forwarded. The deployment-wide index of owners is the benchmark's, not
rows in the database: the deployment's engine would take such policies
over. Needs ``tools/localcloud up``.

    python bench/listener_throughput.py [--count 50000] [--engines 1,3]
        [--workers 0,2]
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
from unittest import mock
import uuid

import kombu
from oslo_config import cfg
import oslo_messaging

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from heat.common import messaging  # noqa: E402

from heat_health.db import api as db_api  # noqa: E402
from heat_health.engine import endpoint  # noqa: E402
from heat_health.engine.monitor import lifecycle_events  # noqa: E402
from heat_health.engine.monitor import listener_workers  # noqa: E402
from heat_health.engine.monitor import routing  # noqa: E402
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


def publish(url, ids, rnd, exchange='nova'):
    """Publish as oslo.messaging's messagingv2 driver does.

    Straight through kombu, so that the publisher is quick.
    """
    with kombu.Connection(url.replace('rabbit://', 'amqp://', 1)) as conn:
        exchange = kombu.Exchange(exchange, type='topic', durable=False)
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

    On ``pool``, with this process's exchange and topics (cfg.CONF).
    Returns it with a callable giving its count of handled notifications.
    """
    if not workers:
        listener = lifecycle_events.LifecycleListener(
            observe, watched.__contains__, transport=transport(url),
            pool=pool)
        return listener, lambda: listener.handled
    extra = scratch / ('workers-%s.conf' % pool)
    group = cfg.CONF.heat_health
    extra.write_text('[heat_health]\nnotification_pool = %s\n'
                     'nova_legacy_topic = %s\n'
                     'nova_notification_exchange = %s\n' % (
                         pool, group.nova_legacy_topic,
                         group.nova_notification_exchange))
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


class Counter(object):
    """A benchmark engine's tracker: counts the news of its own servers."""

    def __init__(self, servers):
        self._servers = frozenset(servers)
        self._lock = threading.Lock()
        self.observed = 0

    def is_watched(self, server_id):
        return server_id in self._servers

    def servers(self, modes=None):
        return set(self._servers)

    def observe(self, observation):
        with self._lock:
            self.observed += 1


class Engine(object):
    """One engine's news path: its Router and its own RPC server."""

    def __init__(self, engine_id, owned):
        self.engine_id = engine_id
        self.tracker = Counter(owned)
        self.router = routing.Router(engine_id, self.tracker,
                                     routing.Forwarder())
        self._server = messaging.get_rpc_server(
            routing.engine_target(engine_id),
            endpoint.HealthEndpoint(engine_id, router=self.router))

    def start(self):
        self.router.refresh()
        self._server.start()

    def stop(self):
        self._server.stop()
        self._server.wait()


def owner_index(index):
    """Stands in for db_api.owner_index, over the benchmark's index."""
    def read(server_ids=None):
        wanted = index if server_ids is None else (
            s for s in server_ids if s in index)
        return {s: set(index[s]) for s in wanted}
    return read


def host_busy():
    """(busy, total) jiffies of all CPUs so far, or None off Linux."""
    try:
        with open('/proc/stat') as stat:
            fields = [int(f) for f in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def run(count, workers, args, url, scratch):
    """Drain a backlog with ``count`` engines of ``workers`` workers."""
    watched = {str(uuid.uuid4()) for _ in range(args.watched)}
    watched_list = sorted(watched)
    rnd = random.Random(1)
    ids = [rnd.choice(watched_list) if rnd.random() < args.watched_share
           else str(uuid.uuid4()) for _ in range(args.count * count)]
    run_id = uuid.uuid4().hex[:8]
    pool = 'heat-health-bench-%s' % run_id
    engine_ids = ['bench-listener-%s-%d' % (run_id, n) for n in range(count)]
    index = {server: {engine_ids[n % count]}
             for n, server in enumerate(watched_list)}
    lookup = mock.patch.object(db_api, 'owner_index', owner_index(index))
    lookup.start()
    fleet = [Engine(e, [s for s, o in index.items() if e in o])
             for e in engine_ids]
    try:
        for engine in fleet:
            engine.start()
        result = drain(fleet, workers, url, scratch, pool, ids, rnd)
    finally:
        for engine in fleet:
            engine.stop()
        lookup.stop()
        for queue in [pool, cfg.CONF.heat_health.topic] + [
                '%s.%s' % (cfg.CONF.heat_health.topic, e)
                for e in engine_ids]:
            delete_queue(url, queue)
    handled, goal, elapsed, rate, cpu, busy = result
    expected = sum(1 for i in ids if i in watched)
    observed = sum(e.tracker.observed for e in fleet)
    forwarded = sum(e.router.forwarded for e in fleet)
    print('%d engine%s, workers %d: handled %d of %d in %.2fs (%d about '
          'watched servers, %d observations, %d of them forwarded to '
          'their owner); sustained %.0f notifications/s (target >= '
          '5000/s)%s; CPU %.1f us per notification%s' % (
              count, '' if count == 1 else 's', workers, handled, goal,
              elapsed, expected, observed, forwarded, rate,
              '' if handled >= goal else ' [timed out]', cpu / goal * 1e6,
              '' if busy is None else '; host CPUs %.0f%% busy' % busy))
    return rate


def drain(fleet, workers, url, scratch, pool, ids, rnd):
    # Declare the pool's queue, then leave it to fill up.
    listener, _count = listeners(0, lambda o: None, set(), pool, url,
                                 scratch)
    listener.start()
    listener.stop()
    sent = publish(url, ids, rnd,
                   cfg.CONF.heat_health.nova_notification_exchange)
    time.sleep(1)
    goal = queued(url, pool)
    if goal < sent:
        print('only %d of %d are queued: a broker policy caps queue %s'
              % (goal, sent, pool))

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time()
    busy = host_busy()
    running = [listeners(workers, engine.router.route,
                         engine.router.watched(), pool, url, scratch)
               for engine in fleet]
    started = time.monotonic()
    for listener, _handled in running:
        listener.start()
    samples = [(0.0, 0)]
    while samples[-1][1] < goal and samples[-1][0] < 600:
        time.sleep(0.01)
        samples.append((time.monotonic() - started,
                        sum(handled() for _l, handled in running)))
    after_busy = host_busy()
    for listener, _handled in running:
        listener.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The news forwarded in flight reaches its owner.
    deadline = time.monotonic() + 30
    while (sum(e.tracker.observed for e in fleet) <
           sum(e.router.forwarded for e in fleet) and
           time.monotonic() < deadline):
        time.sleep(0.1)
    cpu = (time.process_time() - cpu + after.ru_utime - children.ru_utime +
           after.ru_stime - children.ru_stime)
    share = None
    if busy is not None and after_busy is not None:
        share = (100.0 * (after_busy[0] - busy[0]) /
                 max(after_busy[1] - busy[1], 1))
    return (samples[-1][1], goal, samples[-1][0], sustained(samples, goal),
            cpu, share)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--count', type=int, default=50000,
                        help='notifications published per engine')
    parser.add_argument('--watched', type=int, default=10000)
    parser.add_argument('--watched-share', type=float, default=0.05)
    parser.add_argument('--engines', default='1,3',
                        help='comma-separated numbers of engines to '
                             'measure (default: 1 and 3)')
    parser.add_argument('--workers', default=None,
                        help='comma-separated values of [heat_health] '
                             'notification_workers to measure (default: '
                             '0 and the option\'s default with one engine, '
                             'the option\'s default with several)')
    args = parser.parse_args()

    cfg.CONF([], project='heat')
    cfg.CONF.set_override('nova_legacy_topic', '', group='heat_health')
    default = cfg.CONF.heat_health.notification_workers
    url = transport_url()
    # Notifications and the engines' RPC on an exchange and a topic of the
    # benchmark's own: the deployment's engines see none of them.
    own = 'heat-health-bench-%s' % uuid.uuid4().hex[:8]
    cfg.CONF.set_override('nova_notification_exchange', own,
                          group='heat_health')
    cfg.CONF.set_override('topic', own, group='heat_health')
    messaging.setup(url)
    runs = []
    for count in [int(n) for n in args.engines.split(',')]:
        counts = ([int(n) for n in args.workers.split(',')] if args.workers
                  else sorted({0, default}) if count == 1 else [default])
        runs += [(count, workers) for workers in counts]
    rates = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for count, workers in runs:
                rates[count, workers] = run(count, workers, args, url,
                                            pathlib.Path(scratch))
    finally:
        with kombu.Connection(url.replace('rabbit://', 'amqp://', 1)) as conn:
            conn.default_channel.exchange_delete(own)
    for (count, workers), rate in sorted(rates.items()):
        single = rates.get((1, workers))
        if count > 1 and single:
            print('%d engines, workers %d: %.2f times the rate of one '
                  '(target >= 1)' % (count, workers, rate / single))
    messaging.cleanup()


if __name__ == '__main__':
    main()
