"""Fleet scale: three heat-health-engines watching N servers in P projects.

For each size of --sizes, fakecloud holds the servers (made in bulk through
its admin API, ACTIVE from the start, --per-project in each project; kept
and reused by later sizes and runs), and each project has one stack written
into Heat's database as heat-engine leaves a created stack (as
bench/failover.py writes them: creating a thousand stacks through the API
takes far too long here) with an unowned health policy row watching its
servers by LIFECYCLE_EVENTS and NODE_STATUS_POLLING, and every tenth
policy by NODE_STATUS_POLL_URL too (fakecloud's health endpoint of each
server). Three heat-health-engines of the benchmark's own (the
deployment's is stopped meanwhile) share the policies through the
coordination group, and log what each poll cycle costs
(``[heat_health] log_poll_costs``).

Phases, each a number of poll intervals long:

- **quiet**: no notification, no fault: what watching costs when nothing
  changes (database rows written should be 0);
- **load**: a background of Nova notifications (--notifications per
  second, 95% about servers nobody watches) and faults at --fault-rate per
  second, each on a server not faulted before, of three kinds that only
  one detection mode sees first: ``power_off`` with its notifications
  (LIFECYCLE_EVENTS), ``power_off`` whose notifications are lost
  (NODE_STATUS_POLLING) and a hung guest on a server checked by URL
  (NODE_STATUS_POLL_URL); a fault is detected when the events API's table
  shows its server leave HEALTHY, and is reset then;
- **failover**: ``kill -9`` of the engine owning most policies while the
  load goes on: the seconds until every policy is owned by a live engine
  again, and the faults not detected within --bound seconds (lost).

Healing is shown on --healing-stacks real stacks made through Heat's API
(three servers each, recovery HEAL): their faults must each get exactly
one recovery action. The fleet's policies only observe (OBSERVE): healing
100,000 fakecloud servers would swamp this machine.

Prints, per engine and size: Nova requests and server listings per poll
cycle, CPU seconds per cycle (monitor loop and whole engine process, and
the engine's listener workers), resident memory (engine, and with its
workers), database statements and rows written per cycle (quiet and under
load), poll URL checks per second and how late they started against
their interval; detection latency p50/p99 per mode; failover; and at the
end the curve of each figure against the fleet size. Everything but the
fakecloud servers is removed at the end, also on Ctrl-C. Needs
``tools/localcloud up`` (fakecloud's Nova).

    python bench/scale.py [--sizes 1000,10000,30000,100000]
        [--per-project 100] [--interval 30] [--quiet-cycles 3]
        [--load-cycles 4] [--notifications 100] [--fault-rate 1]
        [--healing-stacks 2] [--bound 60] [--logs DIR]
"""

import argparse
import collections
import hashlib
import itertools
import json
import os
import pathlib
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import kombu

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

from heat.common import context as heat_context  # noqa: E402
from heat.db import api as heat_db  # noqa: E402
from heat.db import models as heat_models  # noqa: E402
from novaclient import client as nova_client  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

import failover  # noqa: E402
import fakecloud_scale  # noqa: E402
from heat_health.db import models  # noqa: E402
from heat_health.db import session as db_session  # noqa: E402
import listener_throughput as throughput  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import engines  # noqa: E402
from tests.functional import notifications  # noqa: E402

PREFIX = 'scale'
ENGINES = 3
HEAL_TEMPLATE = REPO / 'bench' / 'scale_heal.yaml'
# Detection modes, by the fault each one sees first.
KINDS = (('LIFECYCLE_EVENTS', 'power_off', True),
         ('NODE_STATUS_POLLING', 'power_off', False),
         ('NODE_STATUS_POLL_URL', 'hang', True))
LEFT_HEALTHY = ('SUSPECT', 'UNHEALTHY')


def project_id(number):
    """A Keystone-like project id for the benchmark's project ``number``."""
    return hashlib.md5(('%s-project-%04d' % (PREFIX, number)).encode()
                       ).hexdigest()


def pct(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float('nan')
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


# The fleet: fakecloud's servers, kept between runs

def fleet(admin, nova, projects, per_project):
    """{project number: [server ids in name order]}, made where missing."""
    found = collections.defaultdict(list)
    pattern = re.compile(r'^%s-p(\d{4})-r(\d+)-(\d+)$' % PREFIX)
    for server in nova.servers.list(
            detailed=False, limit=-1,
            search_opts={'all_tenants': 1, 'name': '^%s-p' % PREFIX}):
        match = pattern.match(server.name)
        if match:
            found[int(match.group(1))].append(
                (int(match.group(2)), int(match.group(3)), server.id))
    made = 0
    for number in range(projects):
        have = sorted(found.get(number, ()))
        if len(have) >= per_project:
            found[number] = have
            continue
        resp = admin.session.post(
            admin.fakecloud_url('/servers'), raise_exc=False,
            json={'count': per_project, 'project_id': project_id(number),
                  'name_prefix': '%s-p%04d-r%d' % (PREFIX, number,
                                                   len(have))})
        assert resp.status_code == 201, resp.text
        found[number] = [(len(have), i + 1, server_id) for i, server_id in
                         enumerate(resp.json()['servers'])]
        made += per_project
    return {n: [s for _r, _i, s in sorted(found[n])][:per_project]
            for n in range(projects)}, made


# Heat's rows and heat-health's

def write_stacks(run, servers):
    """One CREATE_COMPLETE stack per project, in one transaction each 100.

    Returns {project number: stack id}.
    """
    per_stack = len(next(iter(servers.values())))
    names = ['server%d' % n for n in range(per_stack)]
    template = {'heat_template_version': '2018-08-31', 'resources': {
        name: {'type': 'OS::Nova::Server',
               'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}
        for name in names}}
    now = timeutils.utcnow()
    ctxt = heat_context.get_admin_context()
    with heat_db.context_manager.writer.using(ctxt):
        raw = heat_models.RawTemplate(template=template, files={},
                                      environment={})
        ctxt.session.add(raw)
        ctxt.session.flush()
        raw_id = raw.id
    stacks = {n: str(uuid.uuid4()) for n in servers}
    numbers = sorted(servers)
    for start in range(0, len(numbers), 100):
        batch = numbers[start:start + 100]
        ctxt = heat_context.get_admin_context()
        with heat_db.context_manager.writer.using(ctxt):
            ctxt.session.bulk_insert_mappings(heat_models.Stack, [dict(
                id=stacks[n], name='%s-%s-%04d' % (PREFIX, run, n),
                raw_template_id=raw_id, username='bench',
                tenant=project_id(n), action='CREATE', status='COMPLETE',
                status_reason='Stack CREATE completed successfully',
                disable_rollback=True, nested_depth=0, convergence=True,
                created_at=now) for n in batch])
            ctxt.session.bulk_insert_mappings(heat_models.Resource, [
                dict(name=name, physical_resource_id=server_id,
                     stack_id=stacks[n], root_stack_id=stacks[n],
                     action='CREATE', status='COMPLETE',
                     status_reason='state changed', created_at=now,
                     current_template_id=raw_id, uuid=str(uuid.uuid4()))
                for n in batch
                for name, server_id in zip(names, servers[n])])
    return stacks


def delete_stacks(run):
    """Remove the rows of this run's stacks (and their template)."""
    failover.delete_stacks(run, prefix=PREFIX, tenant=None)


def spec(per_stack, interval, url):
    modes = [{'type': 'LIFECYCLE_EVENTS', 'options': {}},
             {'type': 'NODE_STATUS_POLLING', 'options': {}}]
    if url:
        modes.append({'type': 'NODE_STATUS_POLL_URL', 'options': {
            'poll_url': url, 'poll_url_retry_limit': 0,
            'poll_url_timeout': 2}})
    return {'targets': ['server%d' % n for n in range(per_stack)],
            'detection': {'interval': interval, 'node_update_timeout': 0,
                          'recovery_conditional': 'ANY_FAILED',
                          'detection_modes': modes},
            'recovery': {'mode': 'OBSERVE'}, 'enabled': True}


def write_policies(run, stacks, per_stack, interval, url):
    """One unowned policy per stack, every tenth checking URLs too.

    Returns {policy id: project number}.
    """
    ids = {}
    rows = []
    for n, stack_id in sorted(stacks.items()):
        policy_id = '%s-%s-%04d' % (PREFIX, run, n)
        ids[policy_id] = n
        rows.append(dict(id=policy_id, stack_id=stack_id,
                         resource_name='health', project_id=project_id(n),
                         spec=spec(per_stack, interval,
                                   url if n % 10 == 0 else None),
                         enabled=True))
    with db_session.facade.writer.using(db_session.Session()) as session:
        for start in range(0, len(rows), 200):
            session.bulk_insert_mappings(models.Policy,
                                         rows[start:start + 200])
    return ids


def delete_policies(run):
    P = models.Policy
    with db_session.facade.writer.using(db_session.Session()) as session:
        ids = [row[0] for row in session.query(P.id).filter(
            P.id.like('%s-%s-%%' % (PREFIX, run)))]
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            for model in (models.Event, models.Target):
                session.query(model).filter(model.policy_id.in_(
                    part)).delete(synchronize_session=False)
            session.query(P).filter(P.id.in_(part)).delete(
                synchronize_session=False)


def target_states(policy_ids):
    """Counter of the states of the policies' targets."""
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        return collections.Counter(state for (state,) in session.query(
            T.state).filter(T.policy_id.in_(list(policy_ids))))


def not_healthy(policy_ids):
    """Server ids of the policies' targets with a verdict but not HEALTHY."""
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        return [s for (s,) in session.query(T.server_id).filter(
            T.policy_id.in_(list(policy_ids)),
            T.state.notin_(['HEALTHY', 'NO_DATA']))]


def settle(admin, policy_ids, expected, stop, timeout):
    """Seconds until every policy is owned and its targets are HEALTHY.

    Servers a run left faulted (an interrupted one) are reset once seen.
    """
    start = time.monotonic()
    reset = set()
    while time.monotonic() - start < timeout and not stop.is_set():
        owned = failover.owners(list(policy_ids))
        states = target_states(policy_ids)
        if all(owned.values()) and states['HEALTHY'] >= expected:
            return time.monotonic() - start, owned
        for server_id in set(not_healthy(policy_ids)) - reset:
            admin.inject_fault(server_id, 'reset')
            reset.add(server_id)
        time.sleep(2)
    raise RuntimeError('the engines did not watch all %d targets of %d '
                       'policies HEALTHY within %d s: %s'
                       % (expected, len(policy_ids), timeout,
                          dict(target_states(policy_ids))))


# What the benchmark watches: the events, in order

class Events(object):
    """Reads new heat_health_event rows every 0.2 s (by id: cheap)."""

    def __init__(self, stop):
        self._stop = stop
        self._lock = threading.Lock()
        self._last = self._max_id()
        self.left_healthy = {}   # server id -> (monotonic time, source)
        self.issued = collections.Counter()  # server id -> actions issued
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _max_id():
        E = models.Event
        with db_session.facade.reader.using(db_session.Session()) as s:
            return s.query(E.id).order_by(E.id.desc()).limit(1).scalar() or 0

    def _run(self):
        E = models.Event
        while not self._stop.wait(0.2):
            try:
                with db_session.facade.reader.using(
                        db_session.Session()) as session:
                    rows = session.query(
                        E.id, E.server_id, E.new_state, E.reason,
                        E.source).filter(E.id > self._last).order_by(
                            E.id).limit(5000).all()
            except Exception as e:
                print('reading the events failed: %s' % e)
                continue
            now = time.monotonic()
            with self._lock:
                for row in rows:
                    self._last = row.id
                    if (row.new_state in LEFT_HEALTHY and
                            row.server_id not in self.left_healthy):
                        self.left_healthy[row.server_id] = (now, row.source)
                    if (row.new_state == 'VERIFYING' and
                            'issued' in (row.reason or '')):
                        self.issued[row.server_id] += 1

    def seen(self, server_id):
        with self._lock:
            return self.left_healthy.get(server_id)

    def forget(self, server_id):
        with self._lock:
            self.left_healthy.pop(server_id, None)


class Fault(object):
    __slots__ = ('server_id', 'mode', 'at', 'detected', 'source', 'policy')

    def __init__(self, server_id, mode, at, policy):
        self.server_id = server_id
        self.mode = mode
        self.at = at
        self.policy = policy
        self.detected = None
        self.source = None


class Paced(object):
    """A background thread's work, started and paused by the phases."""

    def __init__(self):
        self._running = threading.Event()

    def start(self):
        self._running.set()

    def pause(self):
        self._running.clear()


class Injector(Paced):
    """Faults at a steady rate, each reset once detected (or too late)."""

    def __init__(self, admin, events, victims, url_victims, policy_of,
                 rate, bound, stop):
        self._admin = admin
        self._events = events
        self._victims = {'LIFECYCLE_EVENTS': iter(victims[0::2]),
                         'NODE_STATUS_POLLING': iter(victims[1::2]),
                         'NODE_STATUS_POLL_URL': iter(url_victims)}
        self._policy_of = policy_of
        self._period = 1.0 / rate
        self._bound = bound
        self._stop = stop
        super(Injector, self).__init__()
        self.faults = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _inject(self, kinds):
        mode, fault, notify = next(kinds)
        server_id = next(self._victims[mode], None)
        if server_id is None:
            return
        self._events.forget(server_id)
        at = time.monotonic()
        resp = self._admin.inject_fault(server_id, fault, notify=notify)
        if resp.status_code != 200:
            print('fault %s on %s answered %d' % (fault, server_id,
                                                  resp.status_code))
            return
        self.faults.append(Fault(server_id, mode, at,
                                 self._policy_of.get(server_id)))

    def _run(self):
        kinds = itertools.cycle(KINDS)
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._settle_faults()
            if not self._running.wait(0.2):
                next_at = time.monotonic()
                continue
            if time.monotonic() >= next_at:
                next_at += self._period
                try:
                    self._inject(kinds)
                except Exception as e:
                    print('injecting a fault failed: %s' % e)
            self._stop.wait(min(0.1, max(0.0, next_at - time.monotonic())))

    def _settle_faults(self):
        now = time.monotonic()
        for fault in self.faults:
            if fault.detected is not None or fault.source == 'lost':
                continue
            seen = self._events.seen(fault.server_id)
            if seen is not None and seen[0] >= fault.at:
                fault.detected, fault.source = seen[0] - fault.at, seen[1]
            elif now - fault.at > self._bound:
                fault.source = 'lost'
            else:
                continue
            self._admin.inject_fault(fault.server_id, 'reset')

    def close(self):
        self._running.clear()
        self._thread.join(timeout=10)


class Notifications(Paced):
    """Nova notifications at a steady rate, mostly of unwatched servers."""

    def __init__(self, url, watched, rate, stop):
        self._url = url.replace('rabbit://', 'amqp://', 1)
        self._watched = list(watched)
        self._period = 1.0 / rate if rate else None
        self._stop = stop
        super(Notifications, self).__init__()
        self.sent = 0
        if self._period:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def _message(self, rnd):
        if rnd.random() < 0.05:
            server_id = rnd.choice(self._watched)
            payload = throughput.payload(server_id, 'active')
            payload['nova_object.data']['power_state'] = 'running'
            event_type = 'instance.update'
        else:
            payload = throughput.payload(str(uuid.uuid4()), 'stopped')
            event_type = rnd.choice(throughput.EVENT_TYPES)
        message = {'message_id': str(uuid.uuid4()),
                   'publisher_id': 'nova-compute:bench',
                   'event_type': event_type, 'priority': 'INFO',
                   'payload': payload,
                   'timestamp': str(timeutils.utcnow())}
        return {'oslo.version': '2.0',
                'oslo.message': json.dumps(message)}

    def _run(self):
        rnd = random.Random(7)
        with kombu.Connection(self._url) as conn:
            exchange = kombu.Exchange(
                cfg.CONF.heat_health.nova_notification_exchange,
                type='topic', durable=False)
            producer = conn.Producer(exchange=exchange, serializer='json')
            next_at = time.monotonic()
            while not self._stop.is_set():
                if not self._running.wait(0.2):
                    next_at = time.monotonic()
                    continue
                producer.publish(self._message(rnd), routing_key='%s.info'
                                 % cfg.CONF.heat_health.nova_versioned_topic)
                self.sent += 1
                next_at += self._period
                self._stop.wait(max(0.0, next_at - time.monotonic()))


# The engines and what they log

COSTS = re.compile(
    r'Poll costs: (?P<time>[\d.]+) s since the last poll, (?P<watched>\d+) '
    r'servers watched, (?P<news>\d+) news; (?P<requests>\d+) Nova requests '
    r'\((?P<lists>\d+) server lists\); CPU (?P<monitor_cpu>[\d.]+) s '
    r'monitor, (?P<cpu>[\d.]+) s process; (?P<statements>\d+) database '
    r'statements, (?P<rows>\d+) rows written \((?P<target_rows>\d+) of '
    r'targets\); RSS (?P<rss>[\d.]+) MB; poll '
    r'URL checks (?P<url_started>\d+) started, (?P<url_skipped>\d+) skipped '
    r'\(previous still running\), late p99 (?P<url_late_p99>[\d.]+) s, max '
    r'(?P<url_late_max>[\d.]+) s(?:; full garbage collections '
    r'(?P<gc_full>\d+), (?P<gc_seconds>[\d.]+) s)?(?:; monitor CPU s by step: '
    r'(?P<steps>[^\n]*))?')


def _steps(text):
    """{step: CPU s} from a cost line's steps ('claim 0.050, ...')."""
    found = {}
    for part in (text or '').split(', '):
        if part:
            name, seconds = part.rsplit(' ', 1)
            found[name] = float(seconds)
    return found


class Engine(failover.OwnEngine):

    def offset(self):
        return self.log.stat().st_size if self.log.exists() else 0

    def costs(self, start, end):
        """The cost lines its log has between two offsets."""
        with open(self.log, 'rb') as f:
            f.seek(start)
            text = f.read(max(end - start, 0)).decode(errors='replace')
        return [dict({k: float(v) for k, v in m.groupdict().items()
                      if k != 'steps' and v is not None},
                     steps=_steps(m.group('steps')))
                for m in COSTS.finditer(text)]

    @property
    def pgid(self):
        return self._process.pid if self._process else None


def group_usage(pgid):
    """(CPU seconds, RSS MB) of every process of a process group."""
    cpu = rss = 0.0
    tick = os.sysconf('SC_CLK_TCK')
    page = os.sysconf('SC_PAGE_SIZE')
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) != pgid:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / tick
        rss += int(fields[21]) * page / 2.0 ** 20
    return cpu, rss


def service_pid(pgid):
    """The engine's service process (the master's child), or None."""
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                command = f.read()
        except OSError:
            continue
        if int(fields[1]) == pgid and b'worker' in command:
            return int(pid)
    return None


class Profiles(object):
    """Samples the engines' service processes with py-spy, if installed.

    Prints where each engine's CPU went, by heat-health function
    (samples of the thread holding the interpreter in which it is on the
    stack).
    """

    def __init__(self, workdir, enabled):
        self._workdir = pathlib.Path(workdir)
        self._spy = shutil.which('py-spy') or str(
            pathlib.Path(sys.executable).parent / 'py-spy')
        self.enabled = enabled and os.path.exists(self._spy)
        self._running = []

    def start(self, phase, engines_, seconds):
        if not self.enabled:
            return
        for engine in engines_:
            pid = service_pid(engine.pgid)
            if pid is None:
                continue
            out = self._workdir / ('profile-%s-%s.txt' % (
                phase, engine.engine_id[:8]))
            self._running.append((engine, out, subprocess.Popen(
                [self._spy, 'record', '-p', str(pid), '-d', str(int(seconds)),
                 '-r', '20', '-f', 'raw', '-o', str(out), '--nonblocking',
                 '--gil'],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))

    def report(self, phase, top=12):
        running, self._running = self._running, []
        for engine, out, process in running:
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
            if not out.exists():
                continue
            total, funcs = 0, collections.Counter()
            for line in out.read_text().splitlines():
                stack, _, count = line.rpartition(' ')
                if not count.isdigit():
                    continue
                total += int(count)
                for frame in set(stack.split(';')):
                    if 'heat_health/' in frame:
                        funcs[frame.split(' (')[0]] += int(count)
            print('  profile, %s, engine %s (%d samples at 20/s of the '
                  'thread running Python; share of samples with the '
                  'function on the stack):' % (phase, engine.engine_id[:8],
                                               total))
            for name, count in funcs.most_common(top):
                share = 100.0 * count / max(total, 1)
                print('    %5.1f%%  %s' % (share, name))


def engine_config(url_base):
    host, port = url_base.split('//', 1)[1].split('/', 1)[0].split(':')
    return ('debug = false\n[heat_health]\nlog_poll_costs = true\n'
            'poll_url_allowed_hosts = %s\n'
            'poll_url_allowed_networks = %s:%s\n' % (host, host, port))


# One size

def summarize_engine(engine, quiet, load, usage, seconds):
    q = engine.costs(*quiet)
    busy = engine.costs(*load)
    rows = {}
    for key in ('requests', 'lists', 'monitor_cpu', 'cpu', 'statements',
                'rows', 'target_rows'):
        rows[key] = (max([c[key] for c in busy] or [0]),
                     statistics.mean([c[key] for c in busy] or [0]))
        rows['quiet_' + key] = max([c[key] for c in q] or [0])
    started = sum(c['url_started'] for c in busy)
    span = sum(c['time'] for c in busy) or 1.0
    rows['url_per_s'] = started / span
    rows['url_skipped'] = sum(c['url_skipped'] for c in busy)
    rows['url_late_max'] = max([c['url_late_max'] for c in busy] or [0])
    rows['url_late_p99'] = max([c['url_late_p99'] for c in busy] or [0])
    rows['rss'] = max([c['rss'] for c in q + busy] or [0])
    rows['watched'] = max([c['watched'] for c in q + busy] or [0])
    rows['cycles'] = len(busy)
    rows['gc_full'] = sum(c.get('gc_full', 0) for c in q + busy)
    rows['gc_seconds'] = max([c.get('gc_seconds', 0) for c in q + busy] or
                             [0])
    steps = {}
    for cost in busy:
        for name, seconds in cost['steps'].items():
            steps[name] = steps.get(name, 0.0) + seconds / len(busy)
    rows['steps'] = steps
    cpu, group_rss = usage
    rows['group_cpu_per_cycle'] = cpu
    rows['group_rss'] = group_rss
    return rows


def run_size(args, admin, nova, size, made, workdir, curve):
    projects = size // args.per_project
    print('\n=== %d servers in %d projects, %d engines ===' % (
        size, projects, ENGINES))
    stop = made['stop']
    run = uuid.uuid4().hex[:6]
    made['runs'].append(run)
    start = time.monotonic()
    servers, booted = fleet(admin, nova, projects, args.per_project)
    print('fleet: %d servers (%d made now) in %.0f s' % (
        sum(map(len, servers.values())), booted, time.monotonic() - start))
    some = next(iter(servers.values()))[0]
    health = admin.fakecloud_server(some)['health_url']
    url = health.replace(some, '{id}')
    started_engines = []
    for n in range(ENGINES):
        engine = Engine(workdir, '%s-%s-engine-%d' % (PREFIX, run, n + 1),
                        engine_config(health))
        made['engines'].append(engine)
        started_engines.append(engine.start(admin))
    own = {e.engine_id: e for e in started_engines}
    made['engine_ids'].extend(own)

    start = time.monotonic()
    stacks = write_stacks(run, servers)
    policies = write_policies(run, stacks, args.per_project, args.interval,
                              url)
    print('rows: %d stacks and policies written in %.1f s' % (
        len(stacks), time.monotonic() - start))
    took, owned = settle(admin, policies, size, stop,
                         args.settle_timeout)
    print('every target watched HEALTHY %.0f s after the rows were written;'
          ' owners: %s' % (took, failover.counts(owned)))

    policy_of = {}
    for policy_id, n in policies.items():
        for server_id in servers[n]:
            policy_of[server_id] = policy_id
    url_servers = [s for p, n in policies.items() if n % 10 == 0
                   for s in servers[n]]
    plain = [s for s in policy_of if s not in set(url_servers)]
    rnd = random.Random(size)
    rnd.shuffle(plain)
    rnd.shuffle(url_servers)
    events = Events(stop)
    injector = Injector(admin, events, plain, url_servers, policy_of,
                        args.fault_rate, args.bound, stop)
    background = Notifications(notifications.transport_url(), policy_of,
                               args.notifications, stop)
    made['threads'].extend([injector, background])
    heal = healing(args, admin, made, stop)

    interval = args.interval
    # The first cycle after a takeover stores its servers' first
    # observations: the quiet phase starts once that is over, or once the
    # safety re-reads of what the takeover read together have gone round
    # once (--steady), their rate then being what it stays.
    stop.wait(max(interval, args.steady))
    profiles = Profiles(workdir, args.profile)
    q0 = {e: e.offset() for e in started_engines}
    u0 = {e: group_usage(e.pgid) for e in started_engines}
    profiles.start('quiet', started_engines, args.quiet_cycles * interval)
    stop.wait(args.quiet_cycles * interval + 1)
    profiles.report('quiet')
    q1 = {e: e.offset() for e in started_engines}
    background.start()
    injector.start()
    if heal is not None:
        heal.start()
    profiles.start('load', started_engines, args.load_cycles * interval)
    stop.wait(args.load_cycles * interval + 1)
    profiles.report('load')
    l1 = {e: e.offset() for e in started_engines}
    u1 = {e: group_usage(e.pgid) for e in started_engines}
    cycles = args.quiet_cycles + args.load_cycles

    print('per engine (poll cycle every %d s; quiet: %d cycles, load: %d '
          'cycles, %d notifications/s, %.1f faults/s):' % (
              interval, args.quiet_cycles, args.load_cycles,
              args.notifications, args.fault_rate))
    print('  %-34s %7s %9s %11s %9s %13s %11s %8s %9s %12s' % (
        'engine', 'watched', 'Nova req', 'CPU monitor', 'CPU proc',
        'DB stmts', 'rows written', 'RSS MB', 'URL/s', 'URL late s'))
    summary = {}
    for e in started_engines:
        usage = ((u1[e][0] - u0[e][0]) / cycles, u1[e][1])
        r = summarize_engine(e, (q0[e], q1[e]), (q1[e], l1[e]), usage,
                             cycles * interval)
        summary[e.engine_id] = r
        print('  %-34s %7d %4d/%-4d %5.3f/%5.3f %4.2f/%4.2f %6d/%-6d '
              '%4d/%-6d %4.0f/%-4.0f %9.1f %5.2f/%-5.2f' % (
                  e.engine_id[:34], r['watched'], r['requests'][0],
                  r['lists'][0], r['monitor_cpu'][0],
                  r['monitor_cpu'][1], r['cpu'][0], r['cpu'][1],
                  r['statements'][0], r['quiet_statements'],
                  r['rows'][0], r['quiet_rows'], r['rss'],
                  r['group_rss'], r['url_per_s'], r['url_late_p99'],
                  r['url_late_max']))
    print('  (Nova req: most requests / most server listings in a cycle; '
          'CPU: max/mean s per cycle; DB: most in a loaded / a quiet cycle;'
          ' RSS: engine / with its listener workers; URL late: p99/max)')
    for e in started_engines:
        r = summary[e.engine_id]
        print('  %s: whole engine with its workers %.2f CPU s per cycle; '
              '%d URL checks skipped (previous one still running); %d full '
              'garbage collections, at most %.3f s in a cycle' % (
                  e.engine_id[:34], r['group_cpu_per_cycle'],
                  r['url_skipped'], r['gc_full'], r['gc_seconds']))
        if r['steps']:
            print('    monitor CPU s per cycle by step (mean under load): '
                  '%s' % ', '.join('%s %.3f' % (name, seconds) for
                                   name, seconds in sorted(
                                       r['steps'].items(),
                                       key=lambda item: -item[1])))

    # Failover, the load going on.
    owned = failover.owners(list(policies))
    victim_id = max(own, key=lambda e: sum(
        1 for o in owned.values() if o == e))
    orphans = sum(1 for o in owned.values() if o == victim_id)
    killed_at = time.monotonic()
    own[victim_id].kill()
    back = None
    while time.monotonic() - killed_at < 120 and not stop.is_set():
        found = failover.owners(list(policies))
        if all(o not in (None, victim_id) for o in found.values()):
            back = time.monotonic() - killed_at
            break
        time.sleep(0.25)
    stop.wait(args.after_kill)
    injector.pause()
    background.pause()
    deadline = time.monotonic() + args.bound + 2
    while (any(f.detected is None and f.source != 'lost'
               for f in injector.faults) and
           time.monotonic() < deadline and not stop.is_set()):
        time.sleep(0.5)
    faults = list(injector.faults)
    lost = [f for f in faults if f.detected is None]
    during = [f for f in faults if f.at >= killed_at]
    print('failover: kill -9 of %s owning %d of %d policies: every policy '
          'owned again after %s (target <= 20 s); faults lost: %d of %d, '
          'of them %d of the %d injected after the kill (target 0)' % (
              victim_id[:34], orphans, len(policies),
              '%.1f s' % back if back is not None else 'NOT within 120 s',
              len(lost), len(faults),
              sum(1 for f in lost if f.at >= killed_at), len(during)))
    # Detection latency of faults whose detection the kill could not
    # delay: those injected an interval and the bound of a check before.
    before_kill = [f for f in faults
                   if f.at < killed_at - args.interval - 2]
    latency = {}
    for mode, _fault, _notify in KINDS:
        seen = [f.detected for f in before_kill
                if f.mode == mode and f.detected is not None]
        first = collections.Counter(f.source for f in before_kill
                                    if f.mode == mode)
        latency[mode] = (pct(seen, 0.5), pct(seen, 0.99), len(seen))
        print('detection %-21s p50 %5.2f s  p99 %5.2f s  of %d faults '
              '(first seen by: %s)' % (
                  mode, latency[mode][0], latency[mode][1], len(seen),
                  ', '.join('%s %d' % kv for kv in sorted(first.items()))))
    print('background notifications sent: %d' % background.sent)
    if heal is not None:
        heal.report(events)
        for stack in heal.stacks:
            admin.delete_stack(stack['stack_name'])
    curve[size] = {'summary': summary, 'latency': latency,
                   'failover': back, 'lost': len(lost), 'settle': took}
    injector.close()
    for engine in started_engines:
        engine.stop()
    print('cleaning up the rows of %d policies' % len(policies))
    delete_policies(run)
    delete_stacks(run)


class Healing(object):
    """Real stacks that heal: each fault gets exactly one action."""

    def __init__(self, admin, stacks, stop):
        self._admin = admin
        self._stop = stop
        self.stacks = stacks
        self.servers = [r['physical_resource_id'] for s in stacks
                        for r in admin.nested_resources(s['stack_name'])
                        if r['resource_type'] == 'OS::Nova::Server']
        self.faults = []
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        for server_id in self.servers:
            if self._stop.wait(5):
                return
            self._admin.inject_fault(server_id, 'power_off')
            self.faults.append(server_id)

    def report(self, events):
        deadline = time.monotonic() + 60
        while (time.monotonic() < deadline and not self._stop.is_set() and
               any(events.issued[s] == 0 for s in self.faults)):
            time.sleep(1)
        counts = collections.Counter(events.issued[s] for s in self.faults)
        print('healing stacks: %d faults on their servers; recovery actions '
              'issued per fault: %s (want exactly 1 each)' % (
                  len(self.faults), ', '.join(
                      '%d action(s): %d faults' % kv
                      for kv in sorted(counts.items()))))


def healing(args, admin, made, stop):
    if not args.healing_stacks:
        return None
    stacks = []
    for _ in range(args.healing_stacks):
        stack = admin.create_stack('%s-heal' % PREFIX, str(HEAL_TEMPLATE),
                                   'interval=%d' % args.interval)
        made['stacks'].append(stack['stack_name'])
        stacks.append(stack)
    return Healing(admin, stacks, stop)


def print_curve(curve):
    print('\n=== the curve: each figure against the fleet size (worst '
          'engine) ===')
    sizes = sorted(curve)
    rows = [
        ('Nova requests per cycle', lambda s: max(
            r['requests'][0] for r in s['summary'].values()), '%d'),
        ('server listings per cycle', lambda s: max(
            r['lists'][0] for r in s['summary'].values()), '%d'),
        ('monitor CPU s per cycle (max)', lambda s: max(
            r['monitor_cpu'][0] for r in s['summary'].values()), '%.3f'),
        ('process CPU s per cycle (max)', lambda s: max(
            r['cpu'][0] for r in s['summary'].values()), '%.3f'),
        ('engine+workers CPU s per cycle', lambda s: max(
            r['group_cpu_per_cycle'] for r in s['summary'].values()),
         '%.2f'),
        ('RSS MB (engine)', lambda s: max(
            r['rss'] for r in s['summary'].values()), '%.0f'),
        ('RSS MB (engine + workers)', lambda s: max(
            r['group_rss'] for r in s['summary'].values()), '%.0f'),
        ('DB statements per cycle (load)', lambda s: max(
            r['statements'][0] for r in s['summary'].values()), '%d'),
        ('DB statements per cycle (quiet)', lambda s: max(
            r['quiet_statements'] for r in s['summary'].values()), '%d'),
        ('rows written per cycle (load)', lambda s: max(
            r['rows'][0] for r in s['summary'].values()), '%d'),
        ('rows written per cycle (quiet)', lambda s: max(
            r['quiet_rows'] for r in s['summary'].values()), '%d'),
        ('target rows written per cycle (quiet)', lambda s: max(
            r['quiet_target_rows'] for r in s['summary'].values()), '%d'),
        ('URL checks per s (engine)', lambda s: max(
            r['url_per_s'] for r in s['summary'].values()), '%.1f'),
        ('URL check lateness max s', lambda s: max(
            r['url_late_max'] for r in s['summary'].values()), '%.2f'),
    ] + [('detection p99 s %s' % mode, lambda s, m=mode: s['latency'][m][1],
          '%.2f') for mode, _f, _n in KINDS] + [
        ('failover s', lambda s: s['failover'] if s['failover'] is not None
         else float('nan'), '%.1f'),
        ('faults lost', lambda s: s['lost'], '%d'),
        ('seconds to watch all (start)', lambda s: s['settle'], '%.0f'),
    ]
    print('  %-34s' % 'servers' + ''.join('%10d' % n for n in sizes))
    for name, value, fmt in rows:
        print('  %-34s' % name + ''.join(
            '%10s' % (fmt % value(curve[n])) for n in sizes))


def cleanup(made):
    made['stop'].set()
    for thread in made['threads']:
        closer = getattr(thread, 'close', None)
        if closer:
            closer()
    for engine in made['engines']:
        engine.stop()
    for run in made['runs']:
        delete_policies(run)
        delete_stacks(run)
    admin = made.get('admin')
    for name in made['stacks']:
        admin.delete_stack(name)
    url = notifications.transport_url()
    for engine_id in made['engine_ids']:
        try:
            notifications.delete_queue(url, '%s.%s' % (
                cfg.CONF.heat_health.topic, engine_id))
        except Exception:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', default='1000,10000,30000,100000')
    parser.add_argument('--per-project', type=int, default=100)
    parser.add_argument('--interval', type=int, default=30)
    parser.add_argument('--quiet-cycles', type=int, default=3)
    parser.add_argument('--load-cycles', type=int, default=4)
    parser.add_argument('--steady', type=float, default=0.0,
                        help='seconds to wait after every target is '
                             'watched before measuring (600: the safety '
                             're-reads of trees and target rows are in '
                             'their steady rate)')
    parser.add_argument('--after-kill', type=float, default=30.0)
    parser.add_argument('--notifications', type=float, default=100.0)
    parser.add_argument('--fault-rate', type=float, default=1.0)
    parser.add_argument('--healing-stacks', type=int, default=2)
    parser.add_argument('--bound', type=int, default=60)
    parser.add_argument('--settle-timeout', type=int, default=900)
    parser.add_argument('--logs', default=None)
    parser.add_argument('--profile', action='store_true',
                        help='sample the engines with py-spy (installed '
                             'apart) and print where their time goes')
    args = parser.parse_args()

    cfg.CONF(['--config-file', str(engines.HEAT_CONF)], project='heat')
    admin = localcloud.Cloud('admin')
    nova = nova_client.Client(fakecloud_scale.NOVA_VERSION,
                              session=admin.session)
    workdir = args.logs or tempfile.mkdtemp(prefix='heat-health-scale-')
    os.makedirs(workdir, exist_ok=True)
    made = {'engines': [], 'engine_ids': [], 'runs': [], 'threads': [],
            'stacks': [], 'stop': threading.Event(), 'admin': admin}

    def interrupted(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupted)
    # Ctrl-C cleans up also when started where SIGINT was ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    curve = {}
    try:
        with engines.deployment_engine_stopped():
            for size in [int(s) for s in args.sizes.split(',')]:
                run_size(args, admin, nova, size, made, workdir, curve)
                made['threads'] = []
            print_curve(curve)
    except KeyboardInterrupt:
        print('interrupted: cleaning up')
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cleanup(made)
        if args.logs is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == '__main__':
    main()
