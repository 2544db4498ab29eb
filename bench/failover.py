"""Failover of heat-health-engines while faults keep coming.

Three engines share --policies policies watching --servers-per-policy
servers each with LIFECYCLE_EVENTS alone: the deployment's engine and two
of the benchmark's own (three of its own when the deployment's is not
running), which read the deployment's heat.conf, each in a process group
of its own, as tests/functional/engines.py runs them. The servers are
booted on fakecloud through the Nova API in bulk (``max_count``). Each
policy's stack is written into Heat's database as heat-engine leaves a
created stack (a stack row, its template, one OS::Nova::Server resource row
per server, CREATE_COMPLETE; nothing for heat-engine to do), because
creating hundreds of stacks through the API takes far too long here; its
policy row is written unowned, as a registration nobody confirmed leaves
it. So the engines do all the rest as for any stack: the ring splits the
policies, each owner resolves its targets from Heat's database, stores
them and watches them, and every engine's listener workers consume Nova's
notifications from the one pool and forward news of servers owned by
another engine.

power_off faults go through fakecloud's fault API at --rate per second,
each to a server not faulted before, from --before seconds before the kill
to --after seconds after it. The kill is ``kill -9`` of the process group
of the benchmark engine owning most policies, once every target has been
seen HEALTHY. Prints the seconds from the kill until every policy is
owned by a live engine again (target <= 20 s) and the faults whose target
was not recorded UNHEALTHY in the heat_health_target rows within --bound
seconds (lost, target 0), by phase, and how much news forwarded to the
killed engine was left in its queue.
Servers, rows, engines and their queues are removed at the end, also on
Ctrl-C. Needs ``tools/localcloud up``.

    python bench/failover.py [--policies 300] [--servers-per-policy 10]
        [--rate 4] [--before 20] [--after 60] [--bound 60]
"""

import argparse
import concurrent.futures
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from heat.common import context as heat_context  # noqa: E402
from heat.db import api as heat_db  # noqa: E402
from heat.db import models as heat_models  # noqa: E402
from novaclient import client as nova_client  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

import fakecloud_scale  # noqa: E402
from heat_health.db import models  # noqa: E402
from heat_health.db import session as db_session  # noqa: E402
from heat_health.engine import heat_locks  # noqa: E402
import listener_throughput as throughput  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import engines  # noqa: E402
from tests.functional import notifications  # noqa: E402

PREFIX = 'failover'
# The project the stacks and policies are written under: no user's.
TENANT = 'heat-health-bench-failover'
BOOT_BATCH = 100


class OwnEngine(engines.Engine):
    """A benchmark engine that can also be stopped as an operator does."""

    def stop(self, timeout=30):
        """SIGTERM: it releases its policies to the others at once."""
        process = self._process
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        self.kill()


# fakecloud servers

def boot(nova, run, count):
    """``count`` ACTIVE servers in batches of Nova's multiple create."""
    flavor = nova.flavors.find(name='m1.tiny').id
    image = nova.glance.find_image('cirros').id
    network = nova.neutron.find_network('private').id
    prefix = '%s-%s-' % (PREFIX, run)
    batches = [min(BOOT_BATCH, count - start)
               for start in range(0, count, BOOT_BATCH)]

    def create(numbered):
        number, size = numbered
        nova.servers.create('%s%03d' % (prefix, number), image, flavor,
                            nics=[{'net-id': network}], min_count=size,
                            max_count=size)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(create, enumerate(batches)))
    deadline = time.monotonic() + 300
    while True:
        servers = nova.servers.list(search_opts={'name': '^' + prefix},
                                    limit=-1)
        active = sorted(s.id for s in servers if s.status == 'ACTIVE')
        if len(active) >= count or time.monotonic() > deadline:
            return active, [s.id for s in servers]
        time.sleep(2)


def delete_servers(nova, run):
    """Delete every server of this run (also those still booting)."""
    servers = nova.servers.list(
        search_opts={'name': '^%s-%s-' % (PREFIX, run)}, limit=-1)

    def delete(server_id):
        try:
            nova.servers.delete(server_id)
        except Exception as e:
            return '%s: %s' % (server_id, e)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        failed = [f for f in pool.map(delete, [s.id for s in servers]) if f]
    for failure in failed[:5]:
        print('could not delete server %s' % failure)


# Heat's rows and heat-health's

def write_stacks(run, server_ids, per_stack):
    """One CREATE_COMPLETE stack per ``per_stack`` servers; their ids."""
    names = ['server%d' % n for n in range(per_stack)]
    template = {'heat_template_version': '2018-08-31', 'resources': {
        name: {'type': 'OS::Nova::Server',
               'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}
        for name in names}}
    now = timeutils.utcnow()
    ctxt = heat_context.get_admin_context()
    stack_ids = []
    with heat_db.context_manager.writer.using(ctxt):
        session = ctxt.session
        raw = heat_models.RawTemplate(template=template, files={},
                                      environment={})
        session.add(raw)
        session.flush()
        for n in range(len(server_ids) // per_stack):
            stack_id = str(uuid.uuid4())
            stack_ids.append(stack_id)
            session.add(heat_models.Stack(
                id=stack_id, name='%s-%s-%03d' % (PREFIX, run, n),
                raw_template_id=raw.id, username='bench', tenant=TENANT,
                action='CREATE', status='COMPLETE',
                status_reason='Stack CREATE completed successfully',
                disable_rollback=True, nested_depth=0, convergence=True,
                created_at=now))
        session.flush()
        for n, stack_id in enumerate(stack_ids):
            for name, server_id in zip(
                    names, server_ids[n * per_stack:(n + 1) * per_stack]):
                session.add(heat_models.Resource(
                    name=name, physical_resource_id=server_id,
                    stack_id=stack_id, root_stack_id=stack_id,
                    action='CREATE', status='COMPLETE',
                    status_reason='state changed', created_at=now,
                    current_template_id=raw.id))
    return stack_ids


def delete_stacks(run, prefix=PREFIX, tenant=TENANT):
    """Remove the rows of this run's stacks (and their templates).

    ``tenant`` None: the stacks of any project named after the run.
    """
    ctxt = heat_context.get_admin_context()
    R, S, T = heat_models.Resource, heat_models.Stack, heat_models.RawTemplate
    with heat_db.context_manager.writer.using(ctxt):
        session = ctxt.session
        query = session.query(S.id, S.raw_template_id).filter(
            S.name.like('%s-%s-%%' % (prefix, run)))
        if tenant is not None:
            query = query.filter(S.tenant == tenant)
        stacks = query.all()
        if not stacks:
            return
        stack_ids = [row[0] for row in stacks]
        for start in range(0, len(stack_ids), 500):
            session.query(R).filter(R.stack_id.in_(
                stack_ids[start:start + 500])).delete(
                    synchronize_session=False)
        session.query(S).filter(S.id.in_(stack_ids)).delete(
            synchronize_session=False)
        session.query(T).filter(T.id.in_(sorted(
            {row[1] for row in stacks}))).delete(synchronize_session=False)


def write_policies(run, stack_ids, per_stack):
    """One unowned LIFECYCLE_EVENTS policy per stack; their ids."""
    spec = {'targets': ['server%d' % n for n in range(per_stack)],
            'detection': {'interval': 60, 'node_update_timeout': 0,
                          'recovery_conditional': 'ANY_FAILED',
                          'detection_modes': [{'type': 'LIFECYCLE_EVENTS',
                                               'options': {}}]},
            'recovery': {'mode': 'OBSERVE'}, 'enabled': True}
    ids = []
    with db_session.facade.writer.using(db_session.Session()) as session:
        for n, stack_id in enumerate(stack_ids):
            policy_id = '%s-%s-%03d' % (PREFIX, run, n)
            ids.append(policy_id)
            session.add(models.Policy(
                id=policy_id, stack_id=stack_id, resource_name='health',
                project_id=TENANT, spec=spec, enabled=True))
    return ids


def delete_policies(run):
    """Remove this run's policies with their targets and events."""
    P = models.Policy
    with db_session.facade.writer.using(db_session.Session()) as session:
        policy_ids = [row[0] for row in session.query(P.id).filter(
            P.id.like('%s-%s-%%' % (PREFIX, run)))]
        if not policy_ids:
            return
        for model in (models.Event, models.Target):
            session.query(model).filter(model.policy_id.in_(
                policy_ids)).delete(synchronize_session=False)
        session.query(P).filter(P.id.in_(policy_ids)).delete(
            synchronize_session=False)


def owners(policy_ids):
    """{policy id: engine id holding a live lease, or None}."""
    now = timeutils.utcnow()
    P = models.Policy
    with db_session.facade.reader.using(db_session.Session()) as session:
        return {pid: (engine if expires and expires >= now else None)
                for pid, engine, expires in session.query(
                    P.id, P.engine_id, P.lease_expires_at).filter(
                        P.id.in_(policy_ids))}


def targets(policy_ids):
    """{server id: (policy id, state)} of the policies' target rows."""
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        return {server: (policy, state) for server, policy, state in
                session.query(T.server_id, T.policy_id, T.state).filter(
                    T.policy_id.in_(policy_ids))}


def unhealthy(policy_ids):
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        return {row[0] for row in session.query(T.server_id).filter(
            T.policy_id.in_(policy_ids), T.state == 'UNHEALTHY')}


# The run

class Fault(object):
    __slots__ = ('server_id', 'at', 'owner', 'detected')

    def __init__(self, server_id, at, owner):
        self.server_id = server_id
        self.at = at
        self.owner = owner
        self.detected = None


class Watch(object):
    """Polls the rows: who owns each policy, which targets are UNHEALTHY."""

    def __init__(self, policy_ids, interval=0.25):
        self.policy_ids = policy_ids
        self.interval = interval
        self.owner_of = owners(policy_ids)
        self.faults = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.all_live_at = None   # monotonic time, once wanted
        self._dead = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def expect_owners(self, dead):
        """Note when every policy has a live lease of another engine."""
        with self.lock:
            self._dead = dead
            self.all_live_at = None

    def add(self, fault):
        with self.lock:
            self.faults.append(fault)

    def pending(self):
        with self.lock:
            return [f for f in self.faults if f.detected is None]

    def _run(self):
        while not self.stop.wait(self.interval):
            try:
                self._poll()
            except Exception as e:
                print('reading the rows failed: %s' % e)

    def _poll(self):
        now = time.monotonic()
        found = owners(self.policy_ids)
        with self.lock:
            self.owner_of = found
            if (self._dead is not None and self.all_live_at is None and
                    all(o not in (None, self._dead)
                        for o in found.values())):
                self.all_live_at = now
            waiting = {f.server_id: f for f in self.faults
                       if f.detected is None}
        if waiting:
            for server_id in unhealthy(self.policy_ids) & set(waiting):
                waiting[server_id].detected = now

    def close(self):
        self.stop.set()
        self._thread.join()


def inject(admin, watch, servers, policy_of, rate, until, stop):
    """power_off at ``rate`` per second until ``until`` (monotonic)."""
    period = 1.0 / rate
    next_at = time.monotonic()
    for server_id in servers:
        if stop.is_set() or time.monotonic() >= until:
            return
        next_at += period
        fault = Fault(server_id, time.monotonic(),
                      watch.owner_of.get(policy_of[server_id]))
        response = admin.inject_fault(server_id, 'power_off')
        if response.status_code != 200:
            print('fault on %s answered %d' % (server_id,
                                               response.status_code))
        else:
            watch.add(fault)
        stop.wait(max(0.0, next_at - time.monotonic()))


def summary(faults, bound):
    seen = [f.detected - f.at for f in faults
            if f.detected is not None and f.detected - f.at <= bound]
    lost = len(faults) - len(seen)
    if not seen:
        return '%d faults, %d lost' % (len(faults), lost)
    return ('%d faults, %d lost; recorded UNHEALTHY after p50 %.1f s, '
            'max %.1f s' % (len(faults), lost, statistics.median(seen),
                            max(seen)))


def settle(policy_ids, expected, timeout=300):
    """Wait until the engines own every policy and see every target.

    A new target is NO_DATA until its owner has looked its server up in
    Nova: HEALTHY means its engine has taken it in.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned = owners(policy_ids)
        states = [state for _p, state in targets(policy_ids).values()]
        if (all(owned.values()) and
                states.count('HEALTHY') >= expected):
            # The watched sets reach the listener workers at the next
            # ticks of every engine.
            time.sleep(3)
            return owned
        time.sleep(1)
    raise RuntimeError('the engines did not own all %d policies with their '
                       '%d targets HEALTHY within %ds'
                       % (len(policy_ids), expected, timeout))


def counts(owned):
    tally = {}
    for engine in owned.values():
        tally[engine] = tally.get(engine, 0) + 1
    return ', '.join('%s %d' % (e, n) for e, n in sorted(
        tally.items(), key=lambda item: -item[1]))


def run(args, admin, nova, made, workdir):
    run_id = made['run']
    try:
        os.kill(engines.deployment_engine_pid(), 0)
        own_count = 2
    except (OSError, ValueError):
        print('the deployment\'s heat-health-engine is not running: three '
              'engines of the benchmark\'s own')
        own_count = 3
    for n in range(1, own_count + 1):
        engine = OwnEngine(workdir, '%s-engine-%d' % (PREFIX, n))
        made['engines'].append(engine)
        engine.start(admin)
    own = {e.engine_id: e for e in made['engines']}
    made['engine_ids'] = list(own)

    total = args.policies * args.servers_per_policy
    start = time.monotonic()
    active, booted = boot(nova, run_id, total)
    if len(active) < total:
        raise RuntimeError('only %d of %d servers became ACTIVE'
                           % (len(active), total))
    stack_ids = write_stacks(run_id, active, args.servers_per_policy)
    made['policies'] = write_policies(run_id, stack_ids,
                                      args.servers_per_policy)
    owned = settle(made['policies'], total)
    stored = targets(made['policies'])
    print('setup: %d servers booted, %d policies over %d targets, owners: '
          '%s; %.0f s'
          % (len(booted), len(owned), len(stored), counts(owned),
             time.monotonic() - start))

    policy_of = {server: policy for server, (policy, _s) in stored.items()}
    victims = list(policy_of)
    random.Random(run_id).shuffle(victims)
    watch = Watch(made['policies'])
    made['watch'] = watch
    stop = made['stop']
    begin = time.monotonic()
    kill_at = begin + args.before
    injector = threading.Thread(target=inject, args=(
        admin, watch, victims, policy_of, args.rate,
        kill_at + args.after, stop))
    made['injector'] = injector
    injector.start()

    stop.wait(max(0.0, kill_at - time.monotonic()))
    owned = owners(made['policies'])
    # (An engine's id is read from its log: once.)
    victim_id = max(own, key=lambda e: sum(
        1 for o in owned.values() if o == e))
    victim = own[victim_id]
    orphans = {p for p, o in owned.items() if o == victim_id}
    watch.expect_owners(victim_id)
    killed = time.monotonic()
    victim.kill()
    while (watch.all_live_at is None and not stop.is_set() and
           time.monotonic() < killed + 120):
        time.sleep(0.1)
    taken = watch.all_live_at
    injector.join()
    # Every fault gets its bound to be recorded.
    deadline = time.monotonic() + args.bound
    while watch.pending() and time.monotonic() < deadline:
        time.sleep(0.5)
    watch.close()
    after = owners(made['policies'])
    queue = 'heat-health.%s' % victim_id
    try:
        stranded = throughput.queued(notifications.transport_url(), queue)
    except Exception:
        stranded = None

    faults = list(watch.faults)
    end = taken if taken is not None else float('inf')
    phases = [('before the kill', [f for f in faults if f.at < killed]),
              ('kill to takeover', [f for f in faults
                                    if killed <= f.at < end]),
              ('after takeover', [f for f in faults if f.at >= end])]
    print('killed (kill -9) engine %s owning %d of %d policies, %.0f s '
          'into %.1f faults/s' % (victim_id, len(orphans), len(owned),
                                  killed - begin, args.rate))
    if taken is None:
        print('every policy owned by a live engine again: NOT within 120 s'
              ' (target <= 20 s)')
    else:
        print('every policy owned by a live engine again %.1f s after the '
              'kill (target <= 20 s); owners now: %s'
              % (taken - killed, counts(after)))
    lost = sum(1 for f in faults
               if f.detected is None or f.detected - f.at > args.bound)
    print('faults injected: %d, lost (not UNHEALTHY within %d s): %d '
          '(target 0)' % (len(faults), args.bound, lost))
    for name, group in phases:
        mine = [f for f in group if policy_of[f.server_id] in orphans]
        print('  %-17s %s; on the killed engine\'s servers: %s'
              % (name + ':', summary(group, args.bound),
                 summary(mine, args.bound)))
    if stranded:
        print('  %d forwarded observations were left in the killed '
              'engine\'s queue' % stranded)
    for f in faults:
        if f.detected is None or f.detected - f.at > args.bound:
            print('  lost: %s (owned by %s at the fault, %.1f s after the '
                  'kill)' % (f.server_id, f.owner, f.at - killed))


def cleanup(made, nova):
    made['stop'].set()
    if made.get('injector') is not None:
        made['injector'].join()
    if made.get('watch') is not None:
        made['watch'].close()
    for engine in made['engines']:
        engine.stop()
    delete_policies(made['run'])
    delete_stacks(made['run'])
    delete_servers(nova, made['run'])
    url = notifications.transport_url()
    for engine_id in made['engine_ids']:
        for queue in ('%s.%s' % (cfg.CONF.heat_health.topic, engine_id),
                      '%s.%s' % (heat_locks.liveness_target(engine_id).topic,
                                 engine_id)):
            try:
                notifications.delete_queue(url, queue)
            except Exception as e:
                print('could not delete queue %s: %s' % (queue, e))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--policies', type=int, default=300)
    parser.add_argument('--servers-per-policy', type=int, default=10)
    parser.add_argument('--rate', type=float, default=4.0,
                        help='power_off faults per second')
    parser.add_argument('--before', type=float, default=20.0,
                        help='seconds of faults before the kill')
    parser.add_argument('--after', type=float, default=60.0,
                        help='seconds of faults after the kill')
    parser.add_argument('--bound', type=int, default=60,
                        help='seconds a fault has to be recorded UNHEALTHY')
    parser.add_argument('--logs', default=None,
                        help='directory kept for the benchmark engines\' '
                             'logs (default: a temporary one, removed)')
    args = parser.parse_args()

    cfg.CONF(['--config-file', str(engines.HEAT_CONF)], project='heat')
    admin = localcloud.Cloud('admin')
    nova = nova_client.Client(fakecloud_scale.NOVA_VERSION,
                              session=admin.session)
    workdir = args.logs or tempfile.mkdtemp(prefix='heat-health-failover-')
    os.makedirs(workdir, exist_ok=True)
    made = {'run': uuid.uuid4().hex[:8], 'engines': [], 'engine_ids': [],
            'policies': [], 'stop': threading.Event()}

    def interrupted(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupted)
    try:
        run(args, admin, nova, made, workdir)
    except KeyboardInterrupt:
        print('interrupted: cleaning up')
    finally:
        # Not interrupted again while removing what was made.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if len(made['engine_ids']) < len(made['engines']):
            made['engine_ids'] = [e.engine_id for e in made['engines']
                                  if e.engine_id]
        cleanup(made, nova)
        if args.logs is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == '__main__':
    main()
