"""Cost of NODE_STATUS_POLLING: Nova requests and engine CPU per poll cycle.

Boots (once; reruns reuse them) --servers servers in --projects projects on
fakecloud with bench/fakecloud_scale.py's helpers, registers --policies
policies covering them directly in heat-health's tables (owned by a
benchmark engine id that answers the engines' liveness probe, so no running
heat-health-engine takes them over), then
runs the status poller and the tracker in this process for --cycles cycles,
--interval seconds apart, as heat-health-engine does. A few servers are
stopped halfway, to show the failures found at that cost. Prints Nova
requests (all pages counted) and CPU seconds (time.process_time) per cycle.
Targets: at most 2 requests and 0.2 CPU seconds per cycle. Needs
``tools/localcloud up``; the policies are removed at the end.

    python bench/poll_cost.py [--servers 10000] [--projects 100]
        [--policies 100] [--cycles 30] [--interval 2]
"""

import argparse
import concurrent.futures
import datetime
import pathlib
import statistics
import sys
import threading
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from heat.common import config as heat_config  # noqa: E402,F401
from heat.common import messaging  # noqa: E402
from novaclient import client as nova_client  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

import fakecloud_scale  # noqa: E402
from heat_health.common import nova_adapter  # noqa: E402
from heat_health.db import models  # noqa: E402
from heat_health.db import session as db_session  # noqa: E402
from heat_health.engine import heat_locks  # noqa: E402
from heat_health.engine.monitor import nova_status  # noqa: E402
from heat_health.engine.monitor import tracker as tracker_mod  # noqa: E402
from heat_health.engine.ownership import partition  # noqa: E402
from heat_health.policy import observation as obs  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402

BENCH_ENGINE = 'bench-poll-cost'
HEAT_CONF = localcloud.STATE_DIR / 'etc' / 'heat.conf'


class CountingNotifier(object):
    def __init__(self):
        self.sent = 0

    def info(self, ctxt, event_type, payload):
        self.sent += 1


def boot_servers(admin, servers, projects):
    nova = nova_client.Client(fakecloud_scale.NOVA_VERSION,
                              session=admin.session)
    flavor = nova.flavors.find(name='m1.tiny').id
    image = nova.glance.find_image('cirros').id
    network = nova.neutron.find_network('private').id
    found = fakecloud_scale.ensure_projects(admin, projects)
    per_project = servers // projects
    sessions = [fakecloud_scale.project_session(admin.creds, p.id)
                for p in found]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        booted = sum(pool.map(lambda s: fakecloud_scale.boot(
            s, per_project, flavor, image, network), sessions))
    return nova, booted


def active_servers(adapter, count, timeout=120):
    """Ids of ``count`` ACTIVE servers, once just-booted ones are ACTIVE."""
    deadline = time.monotonic() + timeout
    while True:
        active = sorted(s for s, v in adapter.list_all().items()
                        if v.status == 'ACTIVE')
        if len(active) >= count or time.monotonic() > deadline:
            return active[:count]
        time.sleep(2)


def register(server_ids, policies, interval,
             modes=(obs.NODE_STATUS_POLLING,)):
    """Policies (and their targets) owned by the benchmark's engine id."""
    lease = timeutils.utcnow() + datetime.timedelta(days=1)
    spec = {'detection': {
        'interval': interval, 'node_update_timeout': 0,
        'recovery_conditional': 'ANY_FAILED',
        'detection_modes': [{'type': mode, 'options': {}}
                            for mode in modes]}}
    ids = ['%s-%s' % (BENCH_ENGINE, uuid.uuid4().hex[:8])
           for _ in range(policies)]
    per_policy = -(-len(server_ids) // policies)
    with db_session.facade.writer.using(db_session.Session()) as session:
        for n, policy_id in enumerate(ids):
            session.add(models.Policy(
                id=policy_id, stack_id=policy_id, resource_name='health',
                project_id='bench', spec=spec, enabled=True,
                engine_id=BENCH_ENGINE, lease_expires_at=lease))
        session.flush()
        for n, policy_id in enumerate(ids):
            for server_id in server_ids[n * per_policy:(n + 1) * per_policy]:
                session.add(models.Target(
                    policy_id=policy_id, server_id=server_id,
                    stack_id=policy_id, resource_name=server_id,
                    path='group/%s' % server_id, state='HEALTHY'))
    return ids


class Holder(object):
    """The benchmark as the holder of its policies, seen by the engines.

    It answers Heat's engine liveness probe under its engine id and, with a
    coordination backend, stays in the engines' group (a heartbeat thread),
    so a running heat-health-engine never takes its policies over.
    """

    def __init__(self, engine_id=BENCH_ENGINE):
        self._liveness = messaging.get_rpc_server(
            heat_locks.liveness_target(engine_id),
            heat_locks.LivenessEndpoint())
        self._partition = partition.Partition(engine_id)
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)

    def _heartbeat(self):
        while not self._stop.wait(1.0):
            self._partition.refresh()

    def __enter__(self):
        self._liveness.start()
        self._partition.start()
        self._partition.refresh()
        self._beat.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._beat.join()
        self._partition.stop()
        self._liveness.stop()


def load(tracker, policy_ids):
    with db_session.facade.reader.using(db_session.Session()) as session:
        policies = session.query(models.Policy).filter(
            models.Policy.id.in_(policy_ids)).all()
        targets = session.query(models.Target).filter(
            models.Target.policy_id.in_(policy_ids)).all()
        for row in policies + targets:
            session.expunge(row)
    by_policy = {}
    for target in targets:
        by_policy.setdefault(target.policy_id, []).append(target)
    tracker.load(policies, by_policy, {p.id: p.generation for p in policies})
    return len(targets)


def unregister(policy_ids):
    with db_session.facade.writer.using(db_session.Session()) as session:
        for model in (models.Event, models.Target):
            session.query(model).filter(model.policy_id.in_(
                policy_ids)).delete(synchronize_session=False)
        session.query(models.Policy).filter(models.Policy.id.in_(
            policy_ids)).delete(synchronize_session=False)


def cycle(poller, tracker, adapter):
    before, cpu = adapter.requests, time.process_time()
    poller.poll()
    tracker.settle()
    tracker.flush()
    return adapter.requests - before, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--servers', type=int, default=10000)
    parser.add_argument('--projects', type=int, default=100)
    parser.add_argument('--policies', type=int, default=100)
    parser.add_argument('--cycles', type=int, default=30)
    parser.add_argument('--interval', type=float, default=2.0)
    parser.add_argument('--failures', type=int, default=5)
    args = parser.parse_args()

    cfg.CONF(['--config-file', str(HEAT_CONF)], project='heat')
    # Hold the policies as an engine would, or a running
    # heat-health-engine takes them over.
    messaging.setup()
    holder = Holder().__enter__()
    admin = localcloud.Cloud('admin')
    start = time.perf_counter()
    nova, booted = boot_servers(admin, args.servers, args.projects)
    adapter = nova_adapter.NovaAdapter()
    servers = active_servers(adapter, args.servers)
    print('setup: %d ACTIVE servers watched (%d booted now), %.1f s'
          % (len(servers), booted, time.perf_counter() - start))

    notifier = CountingNotifier()
    tracker = tracker_mod.Tracker(BENCH_ENGINE, 'bench', notifier=notifier)
    policy_ids = register(servers, args.policies, args.interval)
    try:
        print('registered %d policies, %d targets'
              % (len(policy_ids), load(tracker, policy_ids)))
        poller = nova_status.StatusPoller(
            adapter, tracker.observe,
            lambda: tracker.servers(obs.NODE_STATUS_POLLING),
            cfg.CONF.heat_health.node_status_resync_cycles)
        requests, cpu = cycle(poller, tracker, adapter)
        print('first cycle (full listing at start): %d requests, %.3f CPU s'
              % (requests, cpu))
        victims = servers[::max(len(servers) // max(args.failures, 1), 1)]
        victims = victims[:args.failures]
        per_cycle = []
        for n in range(args.cycles):
            if n == args.cycles // 2:
                for server_id in victims:
                    nova.servers.stop(server_id)
            time.sleep(args.interval)
            per_cycle.append(cycle(poller, tracker, adapter))
        time.sleep(2 * cfg.CONF.heat_health.monitor_tick)
        per_cycle.append(cycle(poller, tracker, adapter))
        with db_session.facade.reader.using(db_session.Session()) as session:
            unhealthy = {t.server_id for t in session.query(
                models.Target).filter(models.Target.policy_id.in_(
                    policy_ids), models.Target.state == 'UNHEALTHY')}
        reqs = [r for r, _c in per_cycle]
        cpus = [c for _r, c in per_cycle]
        print('%d cycles, %d servers, %d policies' % (
            len(per_cycle), len(servers), len(policy_ids)))
        print('Nova requests per cycle: max %d, mean %.2f   (target <= 2)'
              % (max(reqs), statistics.mean(reqs)))
        print('CPU s per cycle: max %.3f, mean %.3f, p50 %.3f   '
              '(target <= 0.2)' % (max(cpus), statistics.mean(cpus),
                                   statistics.median(cpus)))
        print('stopped %d servers halfway: %d of them UNHEALTHY; %d other '
              'servers UNHEALTHY (deleted meanwhile by others); %d '
              'notifications' % (len(victims), len(unhealthy & set(victims)),
                                 len(unhealthy - set(victims)),
                                 notifier.sent))
        for server_id in victims:
            nova.servers.start(server_id)
    finally:
        unregister(policy_ids)
        holder.__exit__(None, None, None)


if __name__ == '__main__':
    main()
