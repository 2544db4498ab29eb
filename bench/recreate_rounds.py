"""The recreate path of bench/heal_time.py: servers failing together.

RECREATE of N servers of one group failing at once, for each N of
--counts, --rounds times; see bench/heal_time.py for what is timed and
printed.
"""

import json
import pathlib
import sys
import threading
import time
import uuid

from keystoneauth1 import exceptions as ks_exceptions

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

import heal_common as common  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import healing  # noqa: E402

TEMPLATE = localcloud.TEMPLATES / 'lb_recreate.yaml'
FAULT = 'crash_to_error'
# Seconds a round has to replace its servers, unless --timeout says
# otherwise.
TIMEOUT = 180
MODES = [{'type': 'LIFECYCLE_EVENTS'}, {'type': 'NODE_STATUS_POLLING'}]
# Healthy servers beside the failing ones.
SPARE = 2
# The policy's default brake (heat_health.policy.spec) and the
# fewest targets down it needs (planner.BRAKE_MIN_DOWN).
DEFAULT_BRAKE = 0.55
BRAKE_MIN_DOWN = 3
# Targets: against one server failing alone.
RATIO_TARGETS = {2: 1.2, 5: 1.5}
ONE_IN_POOL_SECONDS = 4.0

# Per server: milestone -> how it is shown.
MILESTONES = [('detected', 'detected'), ('drained', 'drained'),
              ('fenced', 'fenced'), ('marked', 'marked'),
              ('requested', 'update requested'),
              ('active', 'replacement ACTIVE'),
              ('in_pool', 'replacement in pool'),
              ('old_gone', 'old member gone'),
              ('verified', 'verified')]
# The steps between them: (label, from, to).
SPLIT = [('detection', 'fault', 'detected'),
         ('drain', 'detected', 'drained'),
         ('fence', 'drained', 'fenced'),
         ('mark', 'fenced', 'marked'),
         ('waiting for the update', 'marked', 'requested'),
         ("Heat's update until ACTIVE", 'requested', 'active'),
         ('pool change (from ACTIVE)', 'active', 'in_pool'),
         ('verification (from ACTIVE)', 'active', 'verified')]


class RoundFailed(Exception):
    pass


# The deployment

def brake_fraction(failing, count):
    """A max_unhealthy_fraction the brake does not reach with ``failing``."""
    if failing < BRAKE_MIN_DOWN or failing < DEFAULT_BRAKE * count:
        return DEFAULT_BRAKE
    return min(1.0, (failing + 1) / count)


def create_stack(demo, made, failing):
    count = failing + SPARE
    recovery = {'actions': [{'name': 'RECREATE'}],
                'max_concurrent': failing,
                'max_unhealthy_fraction': brake_fraction(failing, count)}
    name = 'recreate-time-%d-%s' % (failing, uuid.uuid4().hex[:8])
    params = ['count=%d' % count,
              'modes=%s' % json.dumps(MODES),
              'recovery=%s' % json.dumps(recovery)]
    stack = common.create_stack(demo, made, TEMPLATE, name, params,
                                RoundFailed)
    stack['count'] = count
    stack['recovery'] = recovery
    stack['pool_id'] = demo.resource(name, 'lb')['attributes'][
        'pools'][0]['id']
    return stack


def stack_url(demo, stack):
    return '%s/stacks/%s/%s' % (demo.endpoint('orchestration'),
                                stack['stack_name'], stack['id'])


def updated_stacks(demo, stack, failed):
    """The stacks whose updates replace the failed servers, and the root.

    Recovery updates the stack that holds each server (a group member's
    own stack); with ``replacement_update_stack = root``, the root.
    """
    found = {stack['id']: stack}
    for f in failed:
        holder = healing.holder(demo, stack, f.path)
        found[holder['id']] = holder
    return list(found.values())


def policy_of(demo, stack):
    return common.policy_of(demo.health_report(stack))


def health_events(demo, stack, marker=None):
    """Events after ``marker`` (an event id), oldest first."""
    query = 'limit=1000' if marker is not None else 'limit=1'
    if marker is not None:
        query += '&marker=%d' % marker
    return demo.session.get('%s/health/events?%s' % (
        stack_url(demo, stack), query)).json()['events']


def stack_statuses(demo, stacks):
    """The status of each stack, read in one request.

    One list of the stacks by id rather than one read each: the readings
    of a round of N servers cost Heat the same for every N, so that what
    is timed is not slowed by the timing.
    """
    query = '&'.join(['show_nested=True'] + ['id=%s' % s['id']
                                             for s in stacks])
    found = {s['id']: s['stack_status'] for s in demo.session.get(
        '%s/stacks?%s' % (demo.endpoint('orchestration'), query)).json()[
            'stacks']}
    return [found.get(s['id'], 'GONE') for s in stacks]


def updates_status(demo, stacks):
    """The round's update status over all the stacks updated.

    UPDATE_IN_PROGRESS while any updates; UPDATE_COMPLETE once every one
    an update reached has completed it.
    """
    found = stack_statuses(demo, stacks)
    if 'UPDATE_IN_PROGRESS' in found:
        return 'UPDATE_IN_PROGRESS'
    if 'UPDATE_FAILED' in found:
        return 'UPDATE_FAILED'
    return 'UPDATE_COMPLETE' if 'UPDATE_COMPLETE' in found else found[0]


def heat_updates(demo, stack, since):
    """Heat's UPDATE IN_PROGRESS events of the stack itself since then."""
    events = demo.session.get(
        '%s/events?resource_action=UPDATE&resource_status=IN_PROGRESS'
        % stack_url(demo, stack)).json()['events']
    return sorted(common.epoch(e['event_time']) for e in events
                  if e['resource_name'] == stack['stack_name'] and
                  common.epoch(e['event_time']) >= int(since))


def octavia_url(demo, pool_id):
    endpoint = demo.endpoint('load-balancer').rstrip('/')
    if not endpoint.endswith('/v2.0'):
        endpoint += '/v2.0'
    return '%s/lbaas/pools/%s/members' % (endpoint, pool_id)


def members(demo, pool_id):
    """{address: (member id, weight)} of the pool."""
    return {m['address']: (m['id'], m['weight'])
            for m in demo.session.get(octavia_url(demo, pool_id)).json()[
                'members']}


def address_of(admin, server_id):
    """The server's first fixed address, as fakecloud holds it, or None."""
    for port in admin.fakecloud_server(server_id)['ports']:
        for fixed in port['fixed_ips']:
            return fixed['ip_address']
    return None


def wait_ready(demo, admin, stack, timeout):
    """Targets by path once all are HEALTHY, past grace, and in the pool.

    Each target gets its ``address``.
    """
    def in_pool(targets):
        for target in targets.values():
            target['address'] = address_of(admin, target['server_id'])
        pool = members(demo, stack['pool_id'])
        wanted = {t['address'] for t in targets.values()}
        if set(pool) == wanted and all(w > 0 for _i, w in pool.values()):
            for target in targets.values():
                target['member_id'] = pool[target['address']][0]
            return None
        return 'pool %s, servers %s' % (sorted(pool), sorted(wanted))

    return common.wait_ready(
        lambda: policy_of(demo, stack), stack['count'], timeout, RoundFailed,
        lambda t: '%s %s' % (t['path'], t['state']), in_pool)


# One round

class Failed(object):
    """One server made to fail, and when each of its milestones was seen."""

    def __init__(self, target):
        self.path = target['path']
        self.old = target['server_id']
        self.address = target['address']
        self.member_id = target['member_id']
        self.new = None
        self.new_address = None
        self.name = None   # the failed server's name in Nova
        self.reused_member = False
        self.times = {}
        self.drained_at = None    # weight 0 first read in the pool
        self.violations = []      # (time, weight) read in the pool

    def see(self, milestone, when):
        if milestone not in self.times:
            self.times[milestone] = when

    def seconds(self, milestone):
        if milestone not in self.times:
            return None
        return self.times[milestone] - self.times['fault']


REASONS = [('fenced', 'fenced'), ('marked', 'marked CHECK_FAILED'),
           ('requested', 'stack update (existing) requested')]


def read_events(failed, seen):
    """Each failed server's milestones of the health events."""
    by_old = {f.old: f for f in failed}
    by_path = {f.path: f for f in failed}
    for item in seen:
        e = item.event
        mine = by_old.get(e['server_id'])
        if mine is not None:
            if e['new_state'] == 'UNHEALTHY':
                mine.see('detected', item.at)
            elif e['new_state'] == 'DRAINED':
                mine.see('drained', item.at)
            for milestone, prefix in REASONS:
                if (e['reason'] or '').startswith(prefix):
                    mine.see(milestone, item.at)
            continue
        mine = by_path.get(e.get('path'))
        if (mine is not None and e['server_id'] and
                e['old_state'] == 'VERIFYING' and
                e['new_state'] == 'HEALTHY'):
            mine.see('verified', item.at)


def read_pool(failed, pool, when, active):
    """Milestones and violations of one read of the pool's members."""
    for f in failed:
        at_old = pool.get(f.address)
        if f.drained_at is None and at_old and at_old[1] == 0:
            f.drained_at = when
        if 'old_gone' not in f.times and f.member_id not in {
                i for i, _w in pool.values()}:
            f.see('old_gone', when)
        if (f.drained_at is not None and at_old and at_old[1] > 0 and
                (f.new not in active or when < active[f.new])):
            f.violations.append((when, at_old[1]))
        if f.new in active and f.new_address and when >= active[f.new]:
            found = pool.get(f.new_address)
            if found and found[1] > 0:
                f.see('in_pool', when)
                f.reused_member = found[0] == f.member_id


def batches(seen):
    """Distinct "stack update requested" batches of the health events."""
    found = set()
    for item in seen:
        reason = item.event['reason'] or ''
        if reason.startswith(REASONS[2][1]):
            olds = reason.rsplit('(', 1)[-1] if ' with ' in reason else (
                reason.split()[-1])
            found.add((item.event['time'], olds))
    return len(found)


def inject(admin, failed):
    """The fault on every server at once: one thread each."""
    gate = threading.Barrier(len(failed))
    answers = {}

    def one(f):
        gate.wait()
        answers[f.path] = admin.inject_fault(f.old, FAULT)
    threads = [threading.Thread(target=one, args=(f,)) for f in failed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bad = ['%s: %d %s' % (p, r.status_code, r.text[:100])
           for p, r in answers.items() if r.status_code != 200]
    if bad:
        raise RoundFailed('fault %s refused: %s' % (FAULT, '; '.join(bad)))


class Round(object):

    def __init__(self, failing, number):
        self.failing = failing
        self.number = number
        self.failed = []
        self.complete = None
        self.updates = None
        self.requested = None
        self.error = None

    @property
    def t0(self):
        return min(f.times['fault'] for f in self.failed)

    def all_in_pool(self):
        times = [f.seconds('in_pool') for f in self.failed]
        return None if None in times else max(times)

    def stack_complete(self):
        return None if self.complete is None else self.complete - self.t0

    def violations(self):
        return sum(len(f.violations) for f in self.failed)


def done(rnd, status):
    return status == 'UPDATE_COMPLETE' and all(
        'verified' in f.times and 'in_pool' in f.times and
        ('old_gone' in f.times or f.reused_member) for f in rnd.failed)


def _place_of(name):
    """A Heat-made server name without its random suffix."""
    return name.rsplit('-', 1)[0]


def run_round(demo, admin, made, rnd, poll, timeout):
    stack = create_stack(demo, made, rnd.failing)
    targets = wait_ready(demo, admin, stack, timeout)
    rnd.stack = stack
    rnd.failed = [Failed(t) for _p, t in sorted(targets.items())[
        :rnd.failing]]
    marker = (health_events(demo, stack) or [{'id': 0}])[-1]['id']
    seq = common.last_seq(admin)
    updated = updated_stacks(demo, stack, rnd.failed)
    inject(admin, rnd.failed)
    seen, entries, active = [], [], {}
    previous = time.time()
    was_updating = False
    deadline = time.time() + timeout
    status = None
    while time.time() < deadline:
        started = time.time()
        new = health_events(demo, stack, marker)
        answered = time.time()
        for event in new:
            seen.append(common.Seen(event, previous, answered))
            marker = max(marker, event['id'])
        previous = started
        read_events(rnd.failed, seen)
        entries += common.timeline(admin, seq)
        if entries:
            seq = entries[-1]['seq']
        olds = {f.old: f for f in rnd.failed}
        for entry in entries:
            if entry['event'].startswith('fault:') and \
                    entry['server_id'] in olds:
                olds[entry['server_id']].see('fault', entry['time'])
                olds[entry['server_id']].name = entry.get('name')
            elif entry['event'] == 'active':
                active.setdefault(entry['server_id'], entry['time'])
            elif entry['event'] == 'created':
                # Heat names a server after its place: the replacement of
                # a failed server is the one made with the same prefix.
                for f in rnd.failed:
                    if f.new is None and f.name and entry.get('name') and \
                            entry['server_id'] != f.old and \
                            _place_of(entry['name']) == _place_of(f.name):
                        f.new = entry['server_id']
        # The report names a replacement fakecloud's timeline did not.
        targets = {}
        if any(f.new is None and 'requested' in f.times
               for f in rnd.failed):
            targets = {t['path']: t
                       for t in policy_of(demo, stack)['targets']}
        for f in rnd.failed:
            server_id = targets.get(f.path, {}).get('server_id')
            if server_id and server_id != f.old and f.new is None:
                f.new = server_id
            if f.new and f.new_address is None and f.new in active:
                f.new_address = address_of(admin, f.new)
            if f.new in active:
                f.see('active', active[f.new])
        before = time.time()
        pool = members(demo, stack['pool_id'])
        read_pool(rnd.failed, pool, (before + time.time()) / 2, active)
        status = updates_status(demo, updated)
        if status == 'UPDATE_IN_PROGRESS':
            was_updating = True
            rnd.complete = None
        elif status == 'UPDATE_COMPLETE' and rnd.complete is None and (
                was_updating or any('requested' in f.times
                                    for f in rnd.failed)):
            rnd.complete = time.time()
        if done(rnd, status):
            break
        time.sleep(max(0.0, poll - (time.time() - started)))
    if any('fault' not in f.times for f in rnd.failed):
        raise RoundFailed('no fault in fakecloud\'s timeline')
    rnd.updates = sum(len(heat_updates(demo, s, rnd.t0)) for s in updated)
    rnd.requested = batches(seen)
    rnd.braked = sum(1 for s in seen if s.event['new_state'] == 'BRAKED')
    if not done(rnd, status):
        rnd.error = 'not replaced within %ss (stack %s): %s' % (
            timeout, status, '; '.join(
                '%s missing %s' % (f.path, ', '.join(
                    m for m, _t in MILESTONES
                    if m not in f.times and m != 'fenced'))
                for f in rnd.failed))


# Output

def fmt(value):
    return '  -  ' if value is None else '%5.2f' % value


def line(rnd):
    spread = max(f.times['fault'] for f in rnd.failed) - rnd.t0
    head = ('N=%d #%d (%d servers): faults within %.3f s, all in pool %s s, '
            'stack COMPLETE %s s, updates %d (requested %d)'
            % (rnd.failing, rnd.number, rnd.stack['count'], spread,
               fmt(rnd.all_in_pool()), fmt(rnd.stack_complete()),
               rnd.updates, rnd.requested))
    if rnd.violations():
        head += ', VIOLATIONS %d' % rnd.violations()
    if rnd.braked:
        head += ', BRAKED events %d' % rnd.braked
    if rnd.error:
        head += '; FAILED: %s' % rnd.error
    rows = [head]
    for f in rnd.failed:
        rows.append('    %-28s %s%s' % (f.path[-28:], ' '.join(
            '%s %s' % (name.split()[-1] if m != 'old_gone' else 'gone',
                       fmt(f.seconds(m)).strip())
            for m, name in MILESTONES),
            ' (member id kept)' if f.reused_member else ''))
        for when, weight in f.violations[:3]:
            rows.append('      old address %s weight %s at %+.2f s before '
                        'its replacement was ACTIVE'
                        % (f.address, weight, when - f.times['fault']))
    return '\n'.join(rows)


def step(f, start, end):
    """Seconds of one step; a missing start is the step before it."""
    if end not in f.times:
        return None
    order = ['fault'] + [m for m, _n in MILESTONES]
    index = order.index(start)
    while order[index] not in f.times:
        index -= 1
    return max(0.0, f.times[end] - f.times[order[index]])


def summary(failing, rounds, poll):
    print()
    good = [r for r in rounds if not r.error]
    print('N=%d: %d rounds, %d complete (reads every %.2f s; health events '
          'in whole seconds, placed between reads)'
          % (failing, len(rounds), len(good), poll))
    if not good:
        return {}
    servers = [f for r in good for f in r.failed]
    print('  %-36s %7s %7s %4s' % ('seconds from the fault', 'p50', 'max',
                                   'n'))
    for m, name in MILESTONES:
        p50, worst, n = common.p50_max(f.seconds(m) for f in servers)
        print('  %-36s %7s %7s %4d' % (name, fmt(p50), fmt(worst), n))
    figures = {}
    for key, name, get in [('pool', 'every replacement in pool',
                            Round.all_in_pool),
                           ('complete', 'stack UPDATE_COMPLETE',
                            Round.stack_complete)]:
        p50, worst, n = common.p50_max(get(r) for r in good)
        figures[key] = p50
        print('  %-36s %7s %7s %4d' % (name, fmt(p50), fmt(worst), n))
    print('  stack updates per round: Heat %s; requested batches %s'
          % (', '.join(str(r.updates) for r in good),
             ', '.join(str(r.requested) for r in good)))
    print('  old members with weight > 0 after the drain, before their '
          'replacement was ACTIVE: %d reads' % sum(
              r.violations() for r in rounds))
    # Only servers seen both ACTIVE and in the pool: step() would count
    # from an earlier milestone where ACTIVE was missed.
    joined = [max(0.0, f.times['in_pool'] - f.times['active'])
              for f in servers if {'active', 'in_pool'} <= set(f.times)]
    if joined:
        print('  new member in the pool after its server was ACTIVE: p50 '
              '%s, max %s s; within 1 s: %d of %d' % (
                  fmt(common.p50_max(joined)[0]).strip(),
                  fmt(max(joined)).strip(),
                  sum(1 for d in joined if d <= 1.0), len(joined)))
    print('  split, p50 seconds: %s' % '; '.join(
        '%s %s' % (label, fmt(common.p50_max(
            step(f, a, b) for f in servers)[0]).strip())
        for label, a, b in SPLIT))
    return figures


def ratios(figures):
    print()
    one = figures.get(1, {})
    pool = one.get('pool')
    if pool is not None:
        print('one server back in the pool: p50 %.2f s (target <= %.0f s: '
              '%s)' % (pool, ONE_IN_POOL_SECONDS,
                       'MET' if pool <= ONE_IN_POOL_SECONDS else 'NOT MET'))
    for failing, target in sorted(RATIO_TARGETS.items()):
        these = figures.get(failing)
        if not these or not one:
            continue
        for key, name in [('pool', 'every replacement in pool'),
                          ('complete', 'stack COMPLETE')]:
            if these.get(key) is None or not one.get(key):
                continue
            ratio = these[key] / one[key]
            print('p50(N=%d)/p50(N=1), %-26s %.2fx (target <= %.1fx: %s)'
                  % (failing, name + ':', ratio, target,
                     'MET' if ratio <= target else 'NOT MET'))


# The run

def run(demo, admin, made, counts, per_count, poll, timeout, results):
    """``per_count`` rounds for each N of ``counts``.

    (N, its rounds) are added to ``results`` as they run; the stacks are
    deleted after each round.
    """
    for failing in counts:
        rounds = []
        results.append((failing, rounds))
        for number in range(1, per_count + 1):
            rnd = Round(failing, number)
            try:
                run_round(demo, admin, made, rnd, poll, timeout)
            except (RoundFailed, localcloud.CommandFailed,
                    ks_exceptions.ClientException) as e:
                print('N=%d #%d FAILED: %s' % (failing, number, e))
                common.delete_stacks(demo, made)
                continue
            rounds.append(rnd)
            print(line(rnd))
            common.delete_stacks(demo, made)


def report(results, poll):
    """Per N, p50 and max, and the ratios against the targets."""
    figures = {}
    for failing, rounds in results:
        figures[failing] = summary(failing, rounds, poll)
    ratios(figures)
