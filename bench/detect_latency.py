"""Time from Nova's instance.power_off.end to the target recorded UNHEALTHY.

Boots (once; reruns reuse them) --servers servers in --projects projects on
fakecloud and registers --policies policies watching them with
LIFECYCLE_EVENTS, owned by the benchmark's engine id (poll_cost's helpers).
Then runs in this process what heat-health-engine runs for that mode: its
notification listener as ``[heat_health] notification_workers`` configures
it (on a listener pool of its own) and the tracker, which asks Heat's
database whether a stack action works on the target before it records a
failure, then commits the target and event rows and announces the change.
For --events watched servers, one at a time: power_off through fakecloud's
fault API (fakecloud publishes instance.update and instance.power_off.end
on the real RabbitMQ, as Nova does), timed from the request to the
tracker's state-change notification for that server, which is sent once
the rows are committed. Optionally over a background of notifications
about unwatched servers. Prints p50/p99 (target p99 <= 200 ms); the servers
are started again and the policies removed at the end. Needs
``tools/localcloud up``.

    python bench/detect_latency.py [--events 200] [--background 1000]
"""

import argparse
import pathlib
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from heat.common import context  # noqa: E402
from heat.common import messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402
import oslo_messaging  # noqa: E402

from heat_health.common import nova_adapter  # noqa: E402
from heat_health.engine.monitor import tracker as tracker_mod  # noqa: E402
from heat_health.objects import policy as policy_object  # noqa: E402
from heat_health.policy import observation as obs  # noqa: E402
from heat_health.policy import targets as target_resolution  # noqa: E402
import listener_throughput as throughput  # noqa: E402
import poll_cost  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import notifications  # noqa: E402


class Recorded(object):
    """The tracker's notifier: when each server was recorded UNHEALTHY."""

    def __init__(self):
        self.at = {}
        self.changed = threading.Condition()

    def info(self, ctxt, event_type, payload):
        now = time.monotonic()
        if payload['new_state'] == 'UNHEALTHY':
            with self.changed:
                self.at.setdefault(payload['server_id'], now)
                self.changed.notify_all()

    def wait(self, server_id, timeout):
        with self.changed:
            if self.changed.wait_for(lambda: server_id in self.at, timeout):
                return self.at[server_id]
        return None


def resolution_from_heat(policy_ids):
    """As the engine asks before recording a failure: from Heat's database.

    The engine re-resolves the policy's targets (at most once per policy
    and monitor tick); this does it for every failure, the worst case.
    """
    resolver = target_resolution.Resolver()
    by_id = {p: policy_object.Policy.get(p) for p in policy_ids}

    def fresh_resolution(policy_id):
        return resolver.resolve(context.get_admin_context(),
                                [by_id[policy_id]])[policy_id]
    return fresh_resolution


def background(url, rate, stop):
    """Notifications about unwatched servers, about rate per second."""
    tport = throughput.transport(url)
    notifier = oslo_messaging.Notifier(
        tport, publisher_id='nova-compute:other', driver='messagingv2',
        topics=['versioned_notifications'])
    while not stop.is_set():
        started = time.monotonic()
        for _ in range(max(1, rate // 10)):
            notifier.info({}, 'instance.power_off.end',
                          throughput.payload(str(uuid.uuid4()), 'stopped'))
        time.sleep(max(0, 0.1 - (time.monotonic() - started)))
    tport.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--events', type=int, default=200)
    parser.add_argument('--servers', type=int, default=10000)
    parser.add_argument('--projects', type=int, default=100)
    parser.add_argument('--policies', type=int, default=100)
    parser.add_argument('--background', type=int, default=0,
                        help='unwatched notifications per second')
    args = parser.parse_args()

    cfg.CONF(['--config-file', str(poll_cost.HEAT_CONF)], project='heat')
    messaging.setup()
    holder = poll_cost.Holder().__enter__()
    admin = localcloud.Cloud('admin')
    nova, _booted = poll_cost.boot_servers(admin, args.servers,
                                           args.projects)
    servers = poll_cost.active_servers(nova_adapter.NovaAdapter(),
                                       args.servers)
    victims = random.Random(2).sample(servers, args.events)
    url = notifications.transport_url()
    pool = 'heat-health-bench-%s' % uuid.uuid4().hex[:8]
    recorded = Recorded()
    policy_ids = poll_cost.register(servers, args.policies, 60,
                                    modes=(obs.LIFECYCLE_EVENTS,))
    stop = threading.Event()
    noise = None
    latencies = []
    lost = 0
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tracker = tracker_mod.Tracker(
                poll_cost.BENCH_ENGINE, 'bench', notifier=recorded,
                fresh_resolution=resolution_from_heat(policy_ids))
            watched = poll_cost.load(tracker, policy_ids)
            workers = cfg.CONF.heat_health.notification_workers
            events, _handled = throughput.listeners(
                workers, tracker.observe,
                tracker.servers(obs.LIFECYCLE_EVENTS), pool, url,
                pathlib.Path(scratch))
            events.start()
            time.sleep(3)
            if args.background:
                noise = threading.Thread(target=background,
                                         args=(url, args.background, stop))
                noise.start()
            for server_id in victims:
                sent = time.monotonic()
                assert admin.inject_fault(server_id,
                                          'power_off').status_code == 200
                at = recorded.wait(server_id, timeout=5)
                if at is None:
                    lost += 1
                else:
                    latencies.append(at - sent)
                time.sleep(random.uniform(0, 0.05))
            stop.set()
            if noise is not None:
                noise.join()
            events.stop()
    finally:
        stop.set()
        poll_cost.unregister(policy_ids)
        notifications.delete_queue(url, pool)
        holder.__exit__(None, None, None)
        for server_id in victims:
            try:
                nova.servers.start(server_id)
            except Exception as e:
                print('could not start %s again: %s' % (server_id, e))

    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * len(ms))) - 1)]
    print('%d events, %d watched servers in %d policies, listener workers '
          '%d, background %d/s unwatched, %d lost'
          % (args.events, watched, len(policy_ids), workers,
             args.background, lost))
    print('power_off -> recorded UNHEALTHY: p50 %.1f ms, p99 %.1f ms, '
          'max %.1f ms (target p99 <= 200 ms)'
          % (statistics.median(ms), p99, ms[-1]))


if __name__ == '__main__':
    main()
