"""Time from Nova's instance.power_off.end to heat-health's observation.

On the real RabbitMQ of the local deployment: 10,000 watched server ids,
the LifecycleListener on a pool of its own, and a publisher sending
instance.power_off.end as fakecloud does (oslo.messaging, messagingv2,
exchange ``nova``) for one watched server at a time, optionally over a
background of notifications about unwatched servers.  Measures publish to
``observe`` receiving the UNHEALTHY observation (the tracker's recording
is not included) and prints p50/p99.  Needs ``tools/localcloud up``.

    python bench/detect_latency.py [--events 200] [--background 1000]
"""

import argparse
import pathlib
import random
import statistics
import sys
import threading
import time
import uuid

from oslo_config import cfg
import oslo_messaging

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from heat_health.engine.monitor import lifecycle_events  # noqa: E402
from heat_health.engine.monitor import observation as obs  # noqa: E402
import listener_throughput as throughput  # noqa: E402
from tests.functional import notifications  # noqa: E402


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
    parser.add_argument('--watched', type=int, default=10000)
    parser.add_argument('--background', type=int, default=0,
                        help='unwatched notifications per second')
    args = parser.parse_args()

    url = notifications.transport_url()
    cfg.CONF([], project='heat')
    # Publish where Nova does: its control_exchange is "nova".
    oslo_messaging.set_transport_defaults('nova')
    watched = {str(uuid.uuid4()) for _ in range(args.watched)}
    victims = random.Random(2).sample(sorted(watched), args.events)
    pool = 'heat-health-bench-%s' % uuid.uuid4().hex[:8]

    sent_at = {}
    latencies = []
    arrived = threading.Condition()

    def observe(observation):
        now = time.monotonic()
        with arrived:
            if (observation.verdict == obs.UNHEALTHY and
                    observation.server_id in sent_at):
                latencies.append(now - sent_at.pop(observation.server_id))
                arrived.notify_all()

    tport = throughput.transport(url)
    listener = lifecycle_events.LifecycleListener(
        observe, watched.__contains__, transport=tport, pool=pool)
    listener.start()
    stop = threading.Event()
    noise = None
    if args.background:
        noise = threading.Thread(target=background,
                                 args=(url, args.background, stop))
        noise.start()
    notifier = oslo_messaging.Notifier(
        tport, publisher_id='nova-compute:fakecloud-compute',
        driver='messagingv2', topics=['versioned_notifications'])
    time.sleep(1)
    lost = 0
    try:
        for server_id in victims:
            body = throughput.payload(server_id, 'stopped')
            with arrived:
                sent_at[server_id] = time.monotonic()
            notifier.info({}, 'instance.power_off.end', body)
            with arrived:
                if not arrived.wait_for(lambda: server_id not in sent_at,
                                        timeout=5):
                    sent_at.pop(server_id, None)
                    lost += 1
            time.sleep(random.uniform(0, 0.05))
    finally:
        stop.set()
        if noise is not None:
            noise.join()
        listener.stop()
        tport.cleanup()
        notifications.delete_queue(url, pool)

    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * len(ms))) - 1)]
    print('%d events, %d watched servers, background %d/s unwatched, '
          '%d lost' % (args.events, args.watched, args.background, lost))
    print('publish -> observe UNHEALTHY: p50 %.1f ms, p99 %.1f ms, '
          'max %.1f ms (target p99 <= 200 ms)'
          % (statistics.median(ms), p99, ms[-1]))


if __name__ == '__main__':
    main()
