"""Seed 003 against real Nova: controlled operations cut by a crash.

Seed 003 predicts, for each of Nova's controlled operations (reboot,
stop, start, pause, unpause, suspend, resume) interrupted by a crash,
the vm_state the server recovers to from the crashed task_state, the
crashed vm_state and the guest's actual power state. This bench makes
those crashes on the local deployment's real Nova
(``tools/localcloud nova real``) and records what Nova itself settles
in when its nova-compute starts again (its restart handling,
``_init_instance``), then what heat-health makes of it.

One server per row, all from one stack made of
tests/functional/templates/heal_group.yaml, watched by a health policy
with NODE_STATUS_POLLING and ``recovery: {mode: OBSERVE}`` (heat-health
reports, never acts). Each case is run twice: with the guest's power
state at the crash as it was before the operation, and as it would be
after it (the hypervisor finished the operation but nova-compute died
before saving it). A reboot from ACTIVE leaves the guest running before
and after, so its second row has the guest shut down midway instead.

Once every server is HEALTHY, the rows are shared out by the host Nova
placed each server on, and each host goes through one kill cycle for all
of its servers:

1. each server is brought to its pre-state through Nova's API (stopped,
   paused or suspended where the case starts there);
2. the compute's fault driver is armed to hang the operation's driver
   call (``hang_next``: reboot, power_off, power_on, pause, unpause,
   suspend, resume) and the operation is asked of Nova as the stack's
   user; once Nova shows the task_state and the driver is inside the
   call, the crashed task_state and vm_state are recorded;
3. the host's nova-compute is killed (``kill -9`` through its pid file),
   the "after" rows' guests get their new power state in the fault
   driver's guests file while it is down, and it stays down until Nova
   shows the service down (longer than service_down_time) and
   heat-health has polled the servers again;
4. it is started again (``tools/localcloud up``) and each server is
   watched until its task_state clears, or for --settle seconds: its
   status, vm_state, task_state and power state then, and the seconds
   from the new nova-compute's start;
5. heat-health's first verdict on each server after the restart (its
   last observation in the health report: verdict and reason, and when
   it came, counted from Nova showing the host up; the target's state
   follows it), and for one that is not healthy the action
   its default ladder would start with, Nova showing the server as it
   then does (``settled_state.default_ladder``, or ``stuck_action``
   while a task remains); the servers are watched until each has one and
   --linger seconds more (Nova's power state sync may still change what
   it shows), at most --watch seconds, and later changes are noted.
   While the host was down, each server's last observation is read (it
   must be UNKNOWN: the host is not reporting), and after it the
   policy's events (no action may start) and Nova's instance actions
   (nothing asked of a server but the bench's operation).

Seed rows needing a rescued or errored server are not run. Nova's API
refuses to stop, pause or suspend a RESCUED server (409: those need
ACTIVE, a stop ACTIVE or ERROR), so those crashed states cannot occur.
A stop of an ERROR server can (a failed operation left it so), but
Nova's restart handling returns at once for every ERROR server that is
not being resized or deleted, whatever its power state: the task stays
and the server stays ERROR, which its code says without a run.

Prints one line per row: the operation, crashed task_state and vm_state,
the guest's power state at the crash, seed 003's predicted vm_state,
what Nova settled in (vm_state/power/task), whether they agree,
heat-health's verdict and action, and the seconds Nova took. Other users
of the deployment are waited for: each kill cycle holds
``/tmp/heat-health-hostdown.running`` and starts only while neither it
nor ``/tmp/heat-health-bench.running`` exists. The stack is deleted at
the end and every compute started again, also on Ctrl-C. Runs against
the local deployment and stops by itself.

    python bench/nova_restart_table.py [--cases reboot-soft,...]
        [--hang 900] [--settle 60] [--watch 150] [--linger 25]
"""

import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

import heal_common as common  # noqa: E402
from heat_health.engine.recovery import settled_state  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import engines  # noqa: E402

TEMPLATE = localcloud.TEMPLATES / 'heal_group.yaml'
MODES = [{'type': 'NODE_STATUS_POLLING'}]
RECOVERY = {'mode': 'OBSERVE'}
INTERVAL = 5
BENCH_MARK = '/tmp/heat-health-bench.running'
HOSTDOWN_MARK = '/tmp/heat-health-hostdown.running'
GUESTS_FILE = 'fault_driver_guests.json'
SERVICES_VERSION = '2.53'
HOST = 'OS-EXT-SRV-ATTR:host'
VM, TASK, POWER = ('OS-EXT-STS:vm_state', 'OS-EXT-STS:task_state',
                   'OS-EXT-STS:power_state')
# Nova's power state integers, by the seed's names (RUNNING: its ACTIVE).
RUNNING, PAUSED, SHUTDOWN, SUSPENDED = 1, 3, 4, 7
POWER_NAMES = {0: 'NOSTATE', 1: 'RUNNING', 3: 'PAUSED', 4: 'SHUTDOWN',
               6: 'CRASHED', 7: 'SUSPENDED'}
# Status a pre-state shows, and the request that brings a server to it.
PRE_STATES = {
    'active': ('ACTIVE', None),
    'stopped': ('SHUTOFF', {'os-stop': None}),
    'paused': ('PAUSED', {'pause': None}),
    'suspended': ('SUSPENDED', {'suspend': None}),
}

# case -> (pre-state, request, driver call hung, [(power kind, power,
# seed 003's recovered vm_state)]). Seed rows: reboot and rebooting_hard
# (crashed task states ``rebooting``/``rebooting_hard``; Nova's compute
# has made them reboot_started(_hard) by the time the driver is called),
# powering-off, powering-on, pausing, unpausing, suspending, resuming.
CASES = {
    'reboot-soft': ('active', {'reboot': {'type': 'SOFT'}}, 'reboot',
                    [('before', RUNNING, 'active'),
                     ('midway', SHUTDOWN, 'stopped')]),
    'reboot-hard': ('active', {'reboot': {'type': 'HARD'}}, 'reboot',
                    [('before', RUNNING, 'active'),
                     ('midway', SHUTDOWN, 'stopped')]),
    'reboot-hard-stopped': ('stopped', {'reboot': {'type': 'HARD'}},
                            'reboot',
                            [('before', SHUTDOWN, 'stopped'),
                             ('after', RUNNING, 'active')]),
    'stop': ('active', {'os-stop': None}, 'power_off',
             [('before', RUNNING, 'active'),
              ('after', SHUTDOWN, 'stopped')]),
    'start': ('stopped', {'os-start': None}, 'power_on',
              [('before', SHUTDOWN, 'stopped'),
               ('after', RUNNING, 'active')]),
    'pause': ('active', {'pause': None}, 'pause',
              [('before', RUNNING, 'active'),
               ('after', PAUSED, 'paused')]),
    'unpause': ('paused', {'unpause': None}, 'unpause',
                [('before', PAUSED, 'paused'),
                 ('after', RUNNING, 'active')]),
    'suspend': ('active', {'suspend': None}, 'suspend',
                [('before', RUNNING, 'active'),
                 ('after', SUSPENDED, 'suspended')]),
    'resume': ('suspended', {'resume': None}, 'resume',
               [('before', SUSPENDED, 'suspended'),
                ('after', RUNNING, 'active')]),
}


class Failed(Exception):
    pass


class Row(object):

    def __init__(self, case, kind, power, predicted):
        self.case = case
        self.pre, self.request, self.operation, _rows = CASES[case]
        self.kind = kind
        self.power = power
        self.predicted = predicted
        self.server_id = self.host = None
        self.crashed = None        # (task_state, vm_state, Nova's power)
        self.settled = None        # the server once its task cleared
        self.seconds = None        # from nova-compute's start to no task
        self.guest_after = None    # the guest's power state at the end
        self.first = None          # heat-health's first verdict after it
        self.verdict = None        # (state, reason) of heat-health at the end
        self.final = None          # the server as Nova shows it then
        self.action = None
        self.events = []           # heat-health's events since the crash
        self.down_seen = None      # last observation while the host was down
        self.actions = []          # Nova's instance actions after the crash

    @property
    def label(self):
        return '%s (%s)' % (self.case, self.kind)


# The deployment

HELD = []


def _computes_running():
    return all(alive(compute_pid(h)) for h in hosts())


def wait_quiet(poll=5):
    """Hold the host-down mark once neither mark exists.

    And every compute runs: one killed without the mark is someone else's
    test too.
    """
    told = False
    mine = 'nova_restart_table %d\n' % os.getpid()
    while True:
        if (not os.path.exists(BENCH_MARK) and
                not os.path.exists(HOSTDOWN_MARK) and _computes_running()):
            try:
                fd = os.open(HOSTDOWN_MARK, os.O_CREAT | os.O_EXCL |
                             os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, mine.encode())
            os.close(fd)
            HELD.append((HOSTDOWN_MARK, mine))
            if not os.path.exists(BENCH_MARK) and _computes_running():
                return
            release_quiet()
        if not told:
            print('waiting for another run on the deployment to end')
            told = True
        time.sleep(poll)


def release_quiet():
    """Remove the host-down mark if this run holds it (still ours)."""
    while HELD:
        path, mine = HELD.pop()
        try:
            with open(path) as f:
                if f.read() != mine:
                    continue
            os.unlink(path)
        except FileNotFoundError:
            pass


def hosts():
    """The compute hosts, in the order tools/localcloud numbers them."""
    return list(json.loads(localcloud.FAULT_DRIVER_FILE.read_text()))


def compute_pid(host):
    return engines.deployment_pid('nova-compute-%d' % (
        hosts().index(host) + 1))


def alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def control(host, path, body=None):
    """The fault driver's control API on the host."""
    url = json.loads(localcloud.FAULT_DRIVER_FILE.read_text())[host] + path
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(),
        headers={'Content-Type': 'application/json'},
        method='GET' if body is None else 'POST')
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as resp:
        return json.loads(resp.read())['guest']


def guests_file(host):
    return localcloud.STATE_DIR / 'data' / 'nova' / host / GUESTS_FILE


def set_powers(host, powers):
    """Guests' power states in the host's file; its nova-compute dead."""
    path = guests_file(host)
    kept = json.loads(path.read_text())
    for server_id, power in powers.items():
        kept[server_id]['state'] = power
    path.with_suffix('.bench').write_text(json.dumps(kept))
    os.replace(path.with_suffix('.bench'), path)


def service_state(admin, host):
    resp = admin.session.get(
        '%s/os-services?binary=nova-compute&host=%s' % (
            admin.endpoint('compute'), host),
        headers={'X-OpenStack-Nova-API-Version': SERVICES_VERSION})
    found, = resp.json()['services']
    return found['state']


def server(admin, server_id):
    return admin.session.get('%s/servers/%s' % (
        admin.endpoint('compute'), server_id)).json()['server']


def act(user, server_id, body):
    resp = user.session.post('%s/servers/%s/action' % (
        user.endpoint('compute'), server_id), json=body, raise_exc=False)
    if resp.status_code != 202:
        raise Failed('%s on %s: %s %s' % (list(body)[0], server_id,
                                          resp.status_code, resp.text))


def instance_actions(admin, server_id):
    """Nova's instance actions of the server, oldest first."""
    found = admin.session.get('%s/servers/%s/os-instance-actions' % (
        admin.endpoint('compute'), server_id)).json()['instanceActions']
    return sorted(found, key=lambda a: a['start_time'])


def wait(predicate, what, timeout, interval=0.5):
    return common.wait_until(predicate, what, timeout, Failed, interval)


def ensure_computes_up(admin):
    """Every compute running and shown up, as before the run."""
    if not all(alive(compute_pid(h)) for h in hosts()):
        engines.localcloud('up')
    for host in hosts():
        wait(lambda: service_state(admin, host) == 'up',
             'nova-compute of %s up' % host, 120, 1)


# One host's kill cycle

def bring_to_pre_state(demo, admin, rows):
    for row in rows:
        body = PRE_STATES[row.pre][1]
        if body is not None:
            act(demo, row.server_id, body)
    for row in rows:
        status = PRE_STATES[row.pre][0]
        wait(lambda: (lambda s: s['status'] == status and not s[TASK])(
            server(admin, row.server_id)),
            '%s %s' % (row.server_id, status), 60)


def crash(demo, admin, host, rows, hang):
    """Operations under way and hung in the driver; nova-compute killed."""
    for row in rows:
        control(host, '/guests/%s/fault' % row.server_id,
                {'fault': 'hang_next', 'operation': row.operation,
                 'seconds': hang})
    for row in rows:
        act(demo, row.server_id, row.request)

    def inside(row):
        shown = server(admin, row.server_id)
        guest = control(host, '/guests/%s' % row.server_id)
        if shown[TASK] and row.operation not in guest['next']:
            return shown
        return None
    for row in rows:
        wait(lambda: inside(row), '%s: %s under way' % (
            row.server_id, row.operation), 60)
    # The driver is inside every call: what Nova has saved is final.
    for row in rows:
        shown = server(admin, row.server_id)
        row.crashed = (shown[TASK], shown[VM], shown[POWER])
    pid = compute_pid(host)
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    wait(lambda: not alive(pid), 'nova-compute of %s gone' % host, 30, 0.1)
    set_powers(host, {r.server_id: r.power for r in rows})
    return killed


def while_down(demo, admin, stack, host, rows):
    """Until Nova shows the host down and heat-health has polled since."""
    wait(lambda: service_state(admin, host) == 'down',
         'nova-compute of %s down' % host, 90, 1)
    down_at = time.time()
    ids = {r.server_id: r for r in rows}

    def observed():
        targets = common.policy_of(demo.health_report(stack))['targets']
        seen = {}
        for target in targets:
            row = ids.get(target['server_id'])
            last = target['last_observation']
            if row is None or last is None:
                continue
            if common.epoch(last['time']) + 1 >= down_at:
                seen[row.server_id] = (target['state'], last['verdict'],
                                       last['reason'])
        return seen if len(seen) == len(rows) else None
    try:
        seen = wait(observed, 'heat-health polling %s again' % host,
                    4 * INTERVAL, 1)
    except Failed:
        seen = {}
    for row in rows:
        row.down_seen = seen.get(row.server_id)
    return down_at


def restart(admin, host, rows, settle):
    """Start nova-compute; each server watched until its task clears."""
    old = compute_pid(host)
    others = [h for h in hosts() if h != host and not alive(compute_pid(h))]
    if others:
        print('  warning: nova-compute of %s was not running (another run '
              'killed it?): tools/localcloud up starts it too' %
              ', '.join(others))
    up = subprocess.Popen([str(REPO / 'tools' / 'localcloud'), 'up'],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True)
    started = None
    deadline = time.time() + settle + 120
    while started is None and time.time() < deadline:
        try:
            pid = compute_pid(host)
        except (OSError, ValueError):
            pid = old
        if pid != old and alive(pid):
            started = time.time()
        else:
            time.sleep(0.1)
    if started is None:
        up.kill()
        raise Failed('nova-compute of %s did not start: %s' % (
            host, up.communicate()[0]))
    pending = list(rows)
    up_at = asked = None
    while pending and time.time() < started + settle:
        for row in list(pending):
            shown = server(admin, row.server_id)
            if not shown[TASK]:
                row.seconds = time.time() - started
                row.settled = shown
                pending.remove(row)
        if up_at is None and (asked is None or time.time() - asked >= 1):
            asked = time.time()
            if service_state(admin, host) == 'up':
                up_at = asked
        time.sleep(0.3)
    for row in pending:
        row.settled = server(admin, row.server_id)
    if up_at is None:
        wait(lambda: service_state(admin, host) == 'up',
             'nova-compute of %s up' % host, 120, 0.5)
        up_at = time.time()
    output = up.communicate(timeout=600)[0]
    if up.returncode != 0:
        raise Failed('tools/localcloud up: %s' % output)
    for row in rows:
        row.guest_after = control(host, '/guests/%s' % row.server_id)[
            'power_state']
    return started, up_at


def action_for(verdict, shown):
    """The action heat-health would start with, Nova showing the server so."""
    if verdict == 'HEALTHY':
        return None
    if shown[TASK]:
        return settled_state.stuck_action(shown[TASK], shown[VM],
                                          shown[POWER])[1]
    return settled_state.default_ladder(shown[VM], shown[TASK],
                                        shown[POWER])[0]


def verdicts(demo, admin, stack, rows, down_at, up_at, watch, linger):
    """heat-health's verdicts on each server once its host is back.

    The first verdict that is not UNKNOWN since the host went down (seconds
    after Nova showed it up again), with what Nova showed then, and the
    last one once every server has one and ``linger`` more seconds
    passed (Nova's power state sync may still change what it shows), or
    ``watch`` seconds after the host was up.
    """
    ids = {r.server_id: r for r in rows}
    deadline = up_at + watch
    all_seen = None
    while time.time() < deadline:
        targets = common.policy_of(demo.health_report(stack))['targets']
        for target in targets:
            row = ids.get(target['server_id'])
            last = target['last_observation']
            if (row is None or row.first is not None or not last or
                    last['verdict'] == 'UNKNOWN' or
                    common.epoch(last['time']) + 1 < down_at):
                continue
            shown = server(admin, row.server_id)
            row.first = (last['verdict'], last['reason'],
                         common.epoch(last['time']) - up_at,
                         action_for(last['verdict'], shown))
        if all_seen is None and all(r.first for r in rows):
            all_seen = time.time()
        if all_seen is not None and time.time() >= all_seen + linger:
            break
        time.sleep(1)
    targets = common.policy_of(demo.health_report(stack))['targets']
    for target in targets:
        row = ids.get(target['server_id'])
        if row is not None:
            row.verdict = (target['state'], target['reason'])
            row.final = server(admin, row.server_id)
            row.action = action_for(target['state'], row.final)
    events = all_events(demo, stack)
    for row in rows:
        row.events = [(e['old_state'], e['new_state'], e['reason'],
                       common.epoch(e['time']) - up_at) for e in events
                      if e['server_id'] == row.server_id and
                      common.epoch(e['time']) + 1 >= down_at]
        # A verdict changed again between two reads of the report is
        # still in the events (Nova showing the server as it settled).
        if row.events and (row.first is None or
                           row.events[0][3] < row.first[2] - 1):
            _old, new, reason, at = row.events[0]
            row.first = (new, reason, at, action_for(new, row.settled))


def run_host(demo, admin, stack, host, rows, args):
    print('%s: %d servers (%s)' % (host, len(rows), ', '.join(
        r.label for r in rows)))
    try:
        wait_quiet()
        if service_state(admin, host) != 'up':
            raise Failed('nova-compute of %s is not up' % host)
        bring_to_pre_state(demo, admin, rows)
        before = {r.server_id: len(instance_actions(admin, r.server_id))
                  for r in rows}
        killed = crash(demo, admin, host, rows, args.hang)
        down_at = while_down(demo, admin, stack, host, rows)
        started, up_at = restart(admin, host, rows, args.settle)
        print('  nova-compute killed; shown down %.1f s later; started '
              'again %.1f s after the kill, shown up %.1f s after its '
              'start' % (down_at - killed, started - killed,
                         up_at - started))
        verdicts(demo, admin, stack, rows, down_at, up_at, args.watch,
                 args.linger)
        for row in rows:
            # The operation asked is the one action expected after them.
            row.actions = [a['action'] for a in instance_actions(
                admin, row.server_id)[before[row.server_id] + 1:]]
    finally:
        try:
            if HELD:
                ensure_computes_up(admin)
        finally:
            release_quiet()


# The table

def power_name(power):
    return POWER_NAMES.get(power, str(power))


def agreement(row):
    vm, task = row.settled[VM], row.settled[TASK]
    if vm == row.predicted:
        return 'yes' if not task else 'vm only'
    return 'no'


def action_name(action):
    if action is None:
        return '-'
    name, params = action
    return ' '.join([name] + [str(v) for v in params.values()])


def all_events(demo, stack):
    """Every event of the stack's policy, oldest first."""
    return demo.session.get('%s/stacks/%s/%s/health/events?limit=1000' % (
        demo.endpoint('orchestration'), stack['stack_name'],
        stack['id'])).json()['events']


def short(reason):
    """A verdict's reason without its times and explanations."""
    reason = re.sub(r' since \S+', '', reason or '')
    return re.sub(r' \(.*\)$', '', reason)


def verdict_text(state, reason, seconds=None):
    text = '%s: %s' % (state, short(reason))
    if seconds is not None:
        text += ' (%+.0f s)' % seconds
    return text


FORMAT = '%-28s %-19s %-9s %-9s | %-9s | %-32s %-7s %-5s | %-53s %s'


def print_table(rows):
    print()
    head = FORMAT % (
        'operation (power at crash)', 'crashed task', 'vm', 'power',
        'seed 003', 'Nova settled: vm / power / task', 'agree', 's',
        'heat-health (s after the host was up)', 'action')
    print(head)
    print('-' * len(head))
    for row in rows:
        if row.verdict is None or row.settled is None:
            print('%-28s not run' % row.label)
            continue
        task, vm, _power = row.crashed
        shown = row.settled
        nova = '%s / %s / %s' % (shown[VM], power_name(shown[POWER]),
                                 shown[TASK] or '-')
        if row.first is not None:
            # What the detector said, and why.
            state, reason, seconds, action = row.first
        else:
            (state, reason), seconds, action = row.verdict, None, row.action
        print(FORMAT % (
            row.label, task, vm, power_name(row.power), row.predicted, nova,
            agreement(row),
            '%.1f' % row.seconds if row.seconds is not None else 'left',
            verdict_text(state, reason, seconds), action_name(action)))
    print()
    for row in rows:
        if row.verdict is None or row.settled is None:
            continue
        notes = []
        if row.first is None:
            notes.append('no verdict of heat-health after the restart')
        if row.guest_after != row.settled[POWER]:
            notes.append('the guest is %s, Nova shows %s' % (
                power_name(row.guest_after),
                power_name(row.settled[POWER])))
        if row.settled[TASK]:
            notes.append("settled_state.settled(): %s with Nova's power, %s "
                         "with the guest's" % (
                             settled_state.settled(
                                 row.settled[TASK], row.settled[VM],
                                 row.settled[POWER]),
                             settled_state.settled(
                                 row.settled[TASK], row.settled[VM],
                                 row.guest_after)))
        if row.down_seen is None:
            notes.append('no poll of heat-health seen while the host was '
                         'down')
        elif row.down_seen[1] != 'UNKNOWN':
            notes.append('while the host was down: %s %s (%s)' % (
                row.down_seen[0], row.down_seen[1], row.down_seen[2]))
        if row.actions:
            notes.append('Nova actions after the one asked: %s' %
                         ', '.join(row.actions))
        changes = ['%s->%s %s (%+.0f s)' % (old, new, short(reason), at)
                   for old, new, reason, at in row.events]
        if changes:
            notes.append('heat-health: %s' % ', '.join(changes))
        final = row.final
        if (row.first is not None and row.verdict[0] != row.first[0]) or (
                final[VM], final[POWER], final[TASK]) != (
                    row.settled[VM], row.settled[POWER], row.settled[TASK]):
            notes.append('at the end: Nova %s / %s / %s, heat-health %s, '
                         'action %s' % (
                             final[VM], power_name(final[POWER]),
                             final[TASK] or '-',
                             verdict_text(*row.verdict),
                             action_name(row.action)))
        if notes:
            print('  %s: %s' % (row.label, '; '.join(notes)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--cases', default=','.join(CASES))
    parser.add_argument('--hang', type=int, default=900,
                        help='seconds each hung driver call would last')
    parser.add_argument('--settle', type=int, default=60,
                        help='seconds a task may take to clear after the '
                        'restart')
    parser.add_argument('--watch', type=int, default=150,
                        help='seconds heat-health is watched for verdicts '
                        'after the host is up again')
    parser.add_argument('--linger', type=int, default=25,
                        help='seconds watched once every server has one')
    args = parser.parse_args()
    names = args.cases.split(',')
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error('unknown cases: %s' % ', '.join(unknown))
    rows = [Row(name, kind, power, predicted) for name in names
            for kind, power, predicted in CASES[name][3]]
    demo = localcloud.Cloud('demo')
    admin = localcloud.Cloud('admin')
    if not admin.has_real_nova() or not localcloud.FAULT_DRIVER_FILE.exists():
        sys.exit('the local deployment runs no real Nova: '
                 'tools/localcloud nova real')
    made = []

    def interrupted(signum, frame):
        raise common.Interrupted()
    signal.signal(signal.SIGTERM, interrupted)
    try:
        stack = common.create_stack(
            demo, made, TEMPLATE, 'nova-restart-%s' % uuid.uuid4().hex[:6],
            ['count=%d' % len(rows), 'modes=%s' % json.dumps(MODES),
             'recovery=%s' % json.dumps(RECOVERY),
             'interval=%d' % INTERVAL], Failed)
        targets = common.wait_ready(
            lambda: common.policy_of(demo.health_report(stack)), len(rows),
            300, Failed, lambda t: '%s %s' % (t['path'], t['state']))
        by_host = {}
        for target in targets.values():
            on = server(admin, target['server_id'])[HOST]
            by_host.setdefault(on, []).append(target['server_id'])
        # Rows in order, a host's servers after the other's.
        free = [(h, s) for h in hosts() for s in sorted(by_host.get(h, []))]
        for row, (on, server_id) in zip(rows, free):
            row.host, row.server_id = on, server_id
        for host in hosts():
            mine = [r for r in rows if r.host == host]
            if not mine:
                continue
            try:
                run_host(demo, admin, stack, host, mine, args)
            except Failed as e:
                print('  FAILED: %s' % e)
        print_table(rows)
        events = all_events(demo, stack)
        started = [e for e in events if e['new_state'] == 'RECOVERING']
        waits = [e for e in events if 'not reporting' in (e['reason'] or '')]
        unknown = [r for r in rows if r.down_seen and
                   r.down_seen[1] == 'UNKNOWN' and
                   'not reporting' in r.down_seen[2]]
        print('heat-health: %d of %d servers UNKNOWN (host not reporting) '
              'while their host was down; %d recovery actions started; '
              '%d events saying a host was not reporting' % (
                  len(unknown), len(rows), len(started), len(waits)))
    except (KeyboardInterrupt, common.Interrupted):
        print('interrupted')
    finally:
        common.delete_stacks(demo, made)


if __name__ == '__main__':
    main()
