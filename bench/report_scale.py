"""Health report and events API of a stack with 1,000 watched servers.

Boots --servers servers on fakecloud through the Nova API in bulk, writes one
stack holding them into Heat's database as heat-engine leaves a created stack
(a stack row of the admin's project, its template, one OS::Nova::Server
resource row per server, CREATE_COMPLETE) and an unowned health policy row
for it (LIFECYCLE_EVENTS and NODE_STATUS_POLLING, recovery OBSERVE), which
the deployment's heat-health-engine claims, resolves and watches. Once every
target is HEALTHY the policy is given a history: --faults servers are
powered off behind Nova's back (fakecloud's fault API), seen UNHEALTHY, and
reset, seen HEALTHY again (--rounds times).

Then it times, as the admin user, --calls requests each of: the health
report through the Heat API (``GET .../stacks/{name}/health``, the request
``openstack stack health show`` makes), the events API with its default page
and with the largest (``limit=1000``), and a ``--follow`` poll (``marker``
of the newest event); and --cli-calls runs of the real
``openstack stack health show`` (table and JSON) next to the command's
start-up alone (``--help``). Prints p50/p99/max of each (target: p99 <= 1 s),
the number of targets and events answered, and the size of the answers.
Servers and rows are removed at the end, also on Ctrl-C, unless --keep;
--reuse RUN times again what a kept run left, --remove RUN removes it.
Needs ``tools/localcloud up`` (its fakecloud Nova).

    python bench/report_scale.py [--servers 1000] [--faults 100]
        [--rounds 1] [--calls 50] [--cli-calls 5]
        [--keep | --reuse RUN | --remove RUN]
"""

import argparse
import concurrent.futures
import math
import os
import pathlib
import random
import signal
import statistics
import sys
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

import failover  # noqa: E402
import fakecloud_scale  # noqa: E402
from heat_health.db import models  # noqa: E402
from heat_health.db import session as db_session  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import engines  # noqa: E402

# The run's name: its stack's and policy's, in its servers' names.
PREFIX = 'report-scale-'
POLICY_RESOURCE = 'health'
MODES = [{'type': 'LIFECYCLE_EVENTS', 'options': {}},
         {'type': 'NODE_STATUS_POLLING', 'options': {}}]
TARGET_SECONDS = 1.0


# Rows: one stack of the admin's project, one policy

def write_stack(run, tenant, server_ids):
    """One CREATE_COMPLETE stack with a resource per server; its id."""
    names = ['server%04d' % n for n in range(len(server_ids))]
    template = {'heat_template_version': '2018-08-31', 'resources': {
        name: {'type': 'OS::Nova::Server',
               'properties': {'image': 'cirros', 'flavor': 'm1.tiny'}}
        for name in names}}
    now = timeutils.utcnow()
    stack_id = str(uuid.uuid4())
    ctxt = heat_context.get_admin_context()
    with heat_db.context_manager.writer.using(ctxt):
        session = ctxt.session
        raw = heat_models.RawTemplate(template=template, files={},
                                      environment={})
        session.add(raw)
        session.flush()
        session.add(heat_models.Stack(
            id=stack_id, name=run, raw_template_id=raw.id,
            username='admin', tenant=tenant, action='CREATE',
            status='COMPLETE',
            status_reason='Stack CREATE completed successfully',
            disable_rollback=True, nested_depth=0, convergence=True,
            created_at=now))
        session.flush()
        for name, server_id in zip(names, server_ids):
            session.add(heat_models.Resource(
                name=name, physical_resource_id=server_id,
                stack_id=stack_id, root_stack_id=stack_id,
                action='CREATE', status='COMPLETE',
                status_reason='state changed', created_at=now,
                current_template_id=raw.id))
    return stack_id, names


def stack_exists(run):
    ctxt = heat_context.get_admin_context()
    S = heat_models.Stack
    with heat_db.context_manager.reader.using(ctxt):
        return ctxt.session.query(S.id).filter(
            S.name == run).first() is not None


def delete_stack(run):
    """Remove the run's stack rows (resources, stack, template)."""
    ctxt = heat_context.get_admin_context()
    R, S, T = heat_models.Resource, heat_models.Stack, heat_models.RawTemplate
    with heat_db.context_manager.writer.using(ctxt):
        session = ctxt.session
        stacks = session.query(S.id, S.raw_template_id).filter(
            S.name == run).all()
        if not stacks:
            return
        ids = [row[0] for row in stacks]
        session.query(R).filter(R.stack_id.in_(ids)).delete(
            synchronize_session=False)
        session.query(S).filter(S.id.in_(ids)).delete(
            synchronize_session=False)
        session.query(T).filter(T.id.in_([row[1] for row in stacks])).delete(
            synchronize_session=False)


def write_policy(run, tenant, stack_id, names):
    """The stack's unowned policy row (OBSERVE); its id."""
    spec = {'targets': names,
            'detection': {'interval': 30, 'node_update_timeout': 0,
                          'recovery_conditional': 'ANY_FAILED',
                          'detection_modes': MODES},
            'recovery': {'mode': 'OBSERVE'}, 'enabled': True}
    policy_id = run
    with db_session.facade.writer.using(db_session.Session()) as session:
        session.add(models.Policy(
            id=policy_id, stack_id=stack_id, resource_name=POLICY_RESOURCE,
            project_id=tenant, spec=spec, enabled=True))
    return policy_id


def delete_policy(policy_id):
    """The policy row with its targets and events."""
    with db_session.facade.writer.using(db_session.Session()) as session:
        for model in (models.Event, models.Target):
            session.query(model).filter(model.policy_id == policy_id).delete(
                synchronize_session=False)
        session.query(models.Policy).filter(
            models.Policy.id == policy_id).delete(synchronize_session=False)


def event_count(policy_id):
    E = models.Event
    with db_session.facade.reader.using(db_session.Session()) as session:
        return session.query(E.id).filter(E.policy_id == policy_id).count()


def policy_exists(policy_id):
    with db_session.facade.reader.using(db_session.Session()) as session:
        return session.query(models.Policy.id).filter(
            models.Policy.id == policy_id).first() is not None


# Setting up

def wait_states(policy_id, servers, state, timeout, stop):
    """Wait until every one of ``servers`` is stored in ``state``.

    Returns the seconds it took, or None when some never got there.
    """
    start = time.monotonic()
    wanted = set(servers)
    while not stop.is_set():
        stored = failover.targets([policy_id])
        if all(stored.get(s, (None, None))[1] == state for s in wanted):
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            late = [s for s in wanted
                    if stored.get(s, (None, None))[1] != state]
            print('  %d of %d targets not %s after %d s'
                  % (len(late), len(wanted), state, timeout))
            return None
        stop.wait(1)
    return None


def history(admin, policy_id, servers, faults, rounds, stop):
    """power_off then reset ``faults`` servers, ``rounds`` times."""
    chooser = random.Random(policy_id)

    def inject(pair):
        server_id, fault = pair
        response = admin.inject_fault(server_id, fault)
        if response.status_code != 200:
            return '%s %s: %d' % (fault, server_id, response.status_code)
    for n in range(rounds):
        victims = chooser.sample(servers, min(faults, len(servers)))
        for fault, state in (('power_off', 'UNHEALTHY'),
                             ('reset', 'HEALTHY')):
            if stop.is_set():
                return
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                failed = [f for f in pool.map(
                    inject, [(s, fault) for s in victims]) if f]
            for failure in failed[:5]:
                print('  fault refused: %s' % failure)
            took = wait_states(policy_id, victims, state, 180, stop)
            if took is not None:
                print('  round %d: %d servers %s, all stored %s after '
                      '%.1f s' % (n + 1, len(victims), fault, state, took))


def setup(args, admin, nova, made):
    tenant = admin.session.get_project_id()
    run = made['run']
    start = time.monotonic()
    active, booted = failover.boot(nova, run, args.servers)
    if len(active) < args.servers:
        raise RuntimeError('only %d of %d servers became ACTIVE'
                           % (len(active), args.servers))
    stack_id, names = write_stack(run, tenant, active)
    made['policy'] = write_policy(run, tenant, stack_id, names)
    failover.settle([made['policy']], args.servers, timeout=600)
    print('setup: %d servers booted, stack %s, %d targets HEALTHY; %.0f s'
          % (len(booted), run, args.servers,
             time.monotonic() - start))
    history(admin, made['policy'], active, args.faults, args.rounds,
            made['stop'])


# Timing

def percentile(values, fraction):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def line(what, seconds, extra=''):
    worst = percentile(seconds, 0.99)
    return ('%-34s p50 %6.3f s  p99 %6.3f s  max %6.3f s  (%d)%s%s'
            % (what, statistics.median(seconds), worst, max(seconds),
               len(seconds), '' if worst <= TARGET_SECONDS else '  > 1 s',
               extra))


def time_requests(session, url, calls, params=None):
    """Seconds of each GET, and the last answer (decoded) and its size."""
    seconds = []
    response = None
    for _ in range(calls):
        start = time.monotonic()
        response = session.get(url, params=params)
        response.content
        seconds.append(time.monotonic() - start)
    return seconds, response.json(), len(response.content)


def time_cli(admin, calls, *args):
    seconds = []
    for _ in range(calls):
        start = time.monotonic()
        admin.run(*args)
        seconds.append(time.monotonic() - start)
    return seconds


def measure(args, admin, name):
    policy_id = name
    session = admin.session
    base = '%s/stacks/%s/health' % (admin.endpoint('orchestration'), name)
    stored = event_count(policy_id)
    print('policy %s: %d targets, %d events stored; load average %.1f '
          '(%d CPUs)' % (policy_id, len(failover.targets([policy_id])),
                         stored, os.getloadavg()[0], os.cpu_count()))
    # A first call of each: connections and caches warm.
    session.get(base)
    session.get(base + '/events')

    seconds, body, size = time_requests(session, base, args.calls)
    report = body['health']
    targets = sum(len(p['targets']) for p in report['policies'])
    print(line('report (GET .../health)', seconds,
               '; %d targets, %d events, %d kB'
               % (targets, len(report['events']), size // 1024)))
    for what, params in (('events, default page', None),
                         ('events, limit=1000', {'limit': 1000})):
        seconds, body, size = time_requests(session, base + '/events',
                                            args.calls, params)
        print(line(what, seconds, '; %d events, %d kB'
                   % (len(body['events']), size // 1024)))
    newest = body['events'][-1]['id'] if body['events'] else 0
    seconds, body, size = time_requests(
        session, base + '/events', args.calls, {'marker': newest})
    print(line('events, --follow poll (marker)', seconds,
               '; %d events' % len(body['events'])))

    if args.cli_calls:
        print(line('CLI stack health show --help', time_cli(
            admin, args.cli_calls, 'stack', 'health', 'show', '--help')))
        print(line('CLI stack health show (table)', time_cli(
            admin, args.cli_calls, 'stack', 'health', 'show', name)))
        print(line('CLI stack health show -f json', time_cli(
            admin, args.cli_calls, 'stack', 'health', 'show', name, '-f',
            'json')))
        print(line('CLI stack health event list', time_cli(
            admin, args.cli_calls, 'stack', 'health', 'event', 'list',
            name, '-f', 'json')))


def cleanup(made, nova):
    made['stop'].set()
    if made.get('policy'):
        delete_policy(made['policy'])
    delete_stack(made['run'])
    failover.delete_servers(nova, made['run'])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--servers', type=int, default=1000)
    parser.add_argument('--faults', type=int, default=100,
                        help='servers powered off and reset per round')
    parser.add_argument('--rounds', type=int, default=1)
    parser.add_argument('--calls', type=int, default=50,
                        help='API requests timed of each kind')
    parser.add_argument('--cli-calls', type=int, default=5,
                        help='runs of each openstack command timed')
    parser.add_argument('--keep', action='store_true',
                        help='leave the servers and rows for --reuse')
    parser.add_argument('--reuse', metavar='RUN',
                        help='time again what a --keep run left')
    parser.add_argument('--remove', metavar='RUN',
                        help='only remove what a --keep run left')
    args = parser.parse_args()

    cfg.CONF(['--config-file', str(engines.HEAT_CONF)], project='heat')
    admin = localcloud.Cloud('admin')
    nova = nova_client.Client(fakecloud_scale.NOVA_VERSION,
                              session=admin.session)
    if args.remove:
        cleanup({'run': args.remove, 'policy': args.remove,
                 'stop': threading.Event()}, nova)
        return
    run = args.reuse or PREFIX + uuid.uuid4().hex[:8]
    made = {'run': run, 'policy': None, 'stop': threading.Event()}

    def interrupted(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupted)
    try:
        if args.reuse:
            made['policy'] = run
            if not (stack_exists(run) and policy_exists(run)):
                raise SystemExit('no stack and policy of run %s' % run)
            # An engine restarted since takes the policy in again.
            failover.settle([run], len(failover.targets([run])))
        else:
            setup(args, admin, nova, made)
        measure(args, admin, run)
    except KeyboardInterrupt:
        print('interrupted: cleaning up')
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if args.keep:
            print('kept: rerun with --reuse %s' % run)
        else:
            cleanup(made, nova)


if __name__ == '__main__':
    main()
