"""Compute hosts failing under real Nova: what heat-health does, and when.

Needs the local deployment on real Nova (``tools/localcloud nova real``);
it kills and starts the deployment's own nova-compute processes (by their
pid files) and forces their services down and up, and leaves every
compute up and reporting at the end. Two kinds of round, each on a stack
of its own made from tests/functional/templates/heal_group.yaml
(NODE_STATUS_POLLING, the default state-aware ladder):

* restart: a guest paused by the hypervisor is rebooted (hard) by
  heat-health; the reboot hangs in nova-compute, which is killed (-9)
  and started again once Nova shows it down (``--down`` seconds later at
  the least). Nova's own restart handling retries the reboot. Timed: the
  start of nova-compute -> the server healthy again; counted: recovery
  actions heat-health started for the server (its own reboot, and one
  more only if Nova's retry left the guest down: sent once the host
  reports again), and the "verification waits" it recorded while the
  host did not report;
* host: on a stack of its own each round, the host holding fewest (one
  at least) of the group's servers is lost with its guests (its
  nova-compute killed, its guests gone) and the operator fences it
  (``openstack compute service set --down``). Timed: the fencing ->
  each lost server replaced on the other host and healthy, and -> every
  target healthy again; counted: replacements (one per lost server is
  right) and the group's size.

Prints one line per round and, per kind, p50 and max. Stacks are deleted
at the end, also on Ctrl-C. Runs against the local deployment and stops
by itself.

    python bench/host_failure.py [--kinds restart,host] [--rounds 3]
        [--servers 4] [--down 12] [--timeout 180]
"""

import argparse
import json
import pathlib
import signal
import sys
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

import heal_common as common  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import computes  # noqa: E402

TEMPLATE = localcloud.TEMPLATES / 'heal_group.yaml'
POLLING = [{'type': 'NODE_STATUS_POLLING'}]
HOST = 'OS-EXT-SRV-ATTR:host'
TASK = 'OS-EXT-STS:task_state'
WAITS = 'verification waits'


class RoundFailed(Exception):
    pass


def _targets(demo, stack):
    return {t['path']: t for t in common.policy_of(
        demo.health_report(stack))['targets']}


def _healthy(demo, stack, count):
    found = _targets(demo, stack)
    if len(found) == count and all(t['state'] == 'HEALTHY'
                                   for t in found.values()):
        return found
    return None


def _events(demo, stack):
    return demo.health_report(stack)['events']


def _server(admin, server_id):
    return admin.session.get('%s/servers/%s' % (
        admin.endpoint('compute'), server_id)).json()['server']


def _wait(what, predicate, timeout, interval=0.2):
    return common.wait_until(predicate, what, timeout, RoundFailed,
                             interval)


def _stack(demo, made, kind, servers, recovery=None):
    params = ['count=%d' % servers, 'modes=%s' % json.dumps(POLLING)]
    if recovery:
        params.append('recovery=%s' % json.dumps(recovery))
    stack = common.create_stack(
        demo, made, TEMPLATE, 'host-%s-%s' % (kind, uuid.uuid4().hex[:6]),
        params, RoundFailed)
    _wait('every server HEALTHY', lambda: _healthy(demo, stack, servers),
          180, 1)
    return stack


def restart_round(demo, admin, stack, servers, args):
    targets = _wait('every server HEALTHY',
                    lambda: _healthy(demo, stack, servers), 120, 1)
    victim = targets['workers/0']['server_id']
    host = _server(admin, victim)[HOST]
    admin.guest_fault(victim, 'hang_next', operation='reboot', seconds=3600)
    admin.guest_fault(victim, 'pause')
    _wait('the reboot under way', lambda: _server(
        admin, victim)[TASK] == 'reboot_started_hard', 60)
    computes.kill(host)
    killed = time.time()
    _wait('%s down' % host, lambda: computes.service(
        admin, host)['state'] == 'down', computes.DOWN_TIMEOUT, 1)
    time.sleep(max(0.0, args.down - (time.time() - killed)))
    started = time.time()
    computes.start()
    healed = _wait('the server healthy again',
                   lambda: _healthy(demo, stack, servers), args.timeout)
    back = time.time()
    events = [e for e in _events(demo, stack) if e['server_id'] == victim]
    actions = [e for e in events if e['new_state'] == 'RECOVERING' and
               e['old_state'] == 'UNHEALTHY']
    waits = [e for e in events if WAITS in (e['reason'] or '')]
    return {'down': started - killed, 'start -> healthy': back - started,
            'actions': len(actions), 'waits': len(waits),
            'same server': healed['workers/0']['server_id'] == victim,
            'action': (actions[0]['reason'] or '').split(' started')[0]
            if actions else None}


def host_round(demo, admin, stack, servers, args):
    targets = _wait('every server HEALTHY',
                    lambda: _healthy(demo, stack, servers), 120, 1)
    placed = {p: _server(admin, t['server_id'])[HOST]
              for p, t in targets.items()}
    # The host holding fewest of the group (one at least): a host holding
    # all of it is a mass failure, which the brake holds on purpose.
    counts = {h: list(placed.values()).count(h) for h in set(placed.values())}
    if len(counts) < 2:
        raise RoundFailed('every server is on %s: the whole group would be '
                          'lost' % list(counts)[0])
    host = min(counts, key=lambda h: (counts[h], h))
    lost = sorted(p for p, on in placed.items() if on == host)
    computes.kill(host)
    computes.lose_guests(host)
    computes.force_down(admin, host)
    fenced = time.time()
    replaced_at = {}

    def progress():
        found = _targets(demo, stack)
        now = time.time()
        for path in lost:
            new = found.get(path)
            if (new and new['server_id'] != targets[path]['server_id'] and
                    new['state'] == 'HEALTHY'):
                replaced_at.setdefault(path, now)
        return (len(replaced_at) == len(lost) and
                _healthy(demo, stack, servers))
    try:
        _wait('the lost servers replaced', progress, args.timeout)
    finally:
        computes.force_down(admin, host, False)
        computes.start()
        computes.wait_state(admin, host, 'up', timeout=120)
    reasons = [e['reason'] or '' for e in _events(demo, stack)]
    times = sorted(t - fenced for t in replaced_at.values())
    return {'lost': len(lost), 'first replaced': times[0],
            'all healthy': times[-1],
            'replacements': len([r for r in reasons if 'replaced by' in r]),
            'size': len(_targets(demo, stack))}


KINDS = {'restart': restart_round, 'host': host_round}
ROWS = {'restart': ['start -> healthy'],
        'host': ['first replaced', 'all healthy']}


def run_kind(demo, admin, made, kind, args):
    # Every round a first attempt; a host's servers fail together, and
    # are not braked.
    recovery = ({'max_concurrent': args.servers,
                 'max_unhealthy_fraction': 0.9} if kind == 'host'
                else {'healthy_reset': 0})
    stack = None
    print('%s:' % kind)
    done = []
    for number in range(args.rounds):
        try:
            if stack is None or kind == 'host':
                # A host round leaves the whole group on the other host:
                # each has a stack of its own, spread by the scheduler.
                stack = _stack(demo, made, kind, args.servers, recovery)
            found = KINDS[kind](demo, admin, stack, args.servers, args)
        except RoundFailed as e:
            print('  #%-2d FAILED: %s' % (number + 1, e))
            continue
        done.append(found)
        print('  #%-2d %s' % (number + 1, ', '.join(
            '%s %s' % (k, '%.2f s' % v if isinstance(v, float) else v)
            for k, v in found.items())))
    for row in ROWS[kind]:
        p50, top, count = common.p50_max([f.get(row) for f in done])
        if count:
            print('  %-20s p50 %6.2f s   max %6.2f s   (%d)' % (
                row, p50, top, count))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--kinds', default=','.join(KINDS))
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--servers', type=int, default=4)
    parser.add_argument('--down', type=float, default=12,
                        help='seconds nova-compute stays killed, at least')
    parser.add_argument('--timeout', type=int, default=180)
    args = parser.parse_args()
    kinds = args.kinds.split(',')
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error('unknown kinds: %s' % ', '.join(unknown))
    demo = localcloud.Cloud('demo')
    admin = localcloud.Cloud('admin')
    if not admin.has_real_nova():
        sys.exit('the local deployment runs no real Nova: '
                 'tools/localcloud nova real')
    made = []

    def interrupted(signum, frame):
        raise common.Interrupted()
    signal.signal(signal.SIGTERM, interrupted)
    try:
        for kind in kinds:
            run_kind(demo, admin, made, kind, args)
    except (KeyboardInterrupt, common.Interrupted):
        print('interrupted')
    finally:
        for host in computes.hosts():
            if computes.service(admin, host).get('forced_down'):
                computes.force_down(admin, host, False)
        computes.start()
        common.delete_stacks(demo, made)


if __name__ == '__main__':
    main()
