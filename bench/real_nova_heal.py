"""Time to heal on real Nova: a fault behind Nova's back -> healthy again.

Needs the local deployment on real Nova (``tools/localcloud nova real``):
faults are made by the fault driver of the compute holding the server, as
a hypervisor or guest makes them, and Nova's own handling runs before
heat-health sees anything. One kind of failure per path, each on a stack
of its own made from tests/functional/templates/heal_group.yaml
(--servers servers, the default state-aware ladder, every incident a
first attempt: ``healthy_reset: 0``):

* shutdown: the guest shuts down by itself; Nova's sync stops the server
  (SHUTOFF); LIFECYCLE_EVENTS; healed by START;
* crash: the guest crashes; Nova stops it at its next power state sync;
  LIFECYCLE_EVENTS and NODE_STATUS_POLLING; healed by START;
* suspend: suspended behind Nova's back; Nova stops it; LIFECYCLE_EVENTS;
  healed by START;
* paused: QEMU pauses the guest (I/O error); Nova leaves the server
  ACTIVE with power state PAUSED; NODE_STATUS_POLLING; healed by a hard
  REBOOT;
* lost: the guest vanishes from the hypervisor; Nova leaves the server
  ACTIVE and, at its next sync, power state NOSTATE; NODE_STATUS_POLLING;
  healed by a hard REBOOT.

Faults are made one at a time on the servers in turn, each once every
target is HEALTHY again with no attempt counted and past its grace, after a
random pause of up to the policy's interval. For each incident: the
fault's time (the host's clock at the driver's answer), detected and
healthy again (the health report's events, narrowed by the reads around
them, every --poll seconds), the action heat-health issued (the
timeline's reason) and Nova's own time for it (its versioned
notifications' start and end, stamped by Nova). Prints one line per
incident and, per path, p50 and max of each figure. Stacks are deleted at
the end, also on Ctrl-C. Runs against the local deployment and stops by
itself.

    python bench/real_nova_heal.py [--paths shutdown,crash,suspend,paused,lost]
        [--incidents 20] [--servers 3] [--poll 0.2] [--timeout 120]
"""

import argparse
import json
import pathlib
import random
import signal
import sys
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

import heal_common as common  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import notifications  # noqa: E402

TEMPLATE = localcloud.TEMPLATES / 'heal_group.yaml'
RECOVERY = {'healthy_reset': 0}
EVENTS = {'type': 'LIFECYCLE_EVENTS'}
POLLING = {'type': 'NODE_STATUS_POLLING'}
INTERVAL = 5
# path -> (fault, detection modes)
PATHS = {
    'shutdown': ('power_off', [EVENTS]),
    'crash': ('crash', [EVENTS, POLLING]),
    'suspend': ('suspend', [EVENTS]),
    'paused': ('pause', [POLLING]),
    'lost': ('lose', [POLLING]),
}
# heat-health's action -> the versioned notification of Nova doing it.
NOVA_EVENTS = {'START': 'instance.power_on', 'REBOOT': 'instance.reboot'}
ROWS = ['fault -> detected', 'detected -> action', 'fault -> healthy',
        '  Nova: action start -> end']


class IncidentFailed(Exception):
    pass


class Incident(object):

    def __init__(self, server_id):
        self.server_id = server_id
        self.seen = []

    def first(self, new_state, old_state=None):
        for seen in self.seen:
            event = seen.event
            if (event['server_id'] == self.server_id and
                    event['new_state'] == new_state and
                    old_state in (None, event['old_state'])):
                return seen
        return None


def nova_seconds(listener, server_id, action, since):
    """Nova's own start -> end of the action, by its notifications."""
    prefix = NOVA_EVENTS.get(action.split()[0])
    if prefix is None:
        return None
    stamps = {}
    for event_type, payload, stamp in listener.stamped():
        data = payload.get('nova_object.data', {})
        when = common.epoch(stamp.replace(' ', 'T')) if stamp else 0
        if data.get('uuid') != server_id or when < since:
            continue
        for end in ('start', 'end'):
            if event_type == '%s.%s' % (prefix, end):
                stamps.setdefault(end, when)
    if 'start' in stamps and 'end' in stamps:
        return stamps['end'] - stamps['start']
    return None


def run_incident(demo, admin, stack, fault, incident, poll, timeout):
    report = demo.health_report(stack)
    known = {common.event_key(e) for e in report['events']}
    previous = time.time()
    admin.guest_fault(incident.server_id, fault)
    faulted = time.time()
    deadline = faulted + timeout
    while time.time() < deadline:
        started = time.time()
        report = demo.health_report(stack)
        answered = time.time()
        incident.seen += common.new_events(report, known, previous,
                                           answered)
        previous = started
        healthy = incident.first('HEALTHY', 'VERIFYING')
        if healthy and all(t['state'] == 'HEALTHY'
                           for t in common.policy_of(report)['targets']):
            break
        time.sleep(max(0.0, poll - (time.time() - started)))
    detected = incident.first('UNHEALTHY')
    decided = incident.first('RECOVERING', 'UNHEALTHY')
    healthy = incident.first('HEALTHY', 'VERIFYING')
    if not (detected and decided and healthy):
        raise IncidentFailed('not healed within %ss: %s' % (
            timeout, ', '.join('%s->%s' % (s.event['old_state'],
                                           s.event['new_state'])
                               for s in incident.seen) or 'no event'))
    detected.narrow(after=faulted)
    incident.action = (decided.event['reason'] or '').split(' started')[0]
    incident.attempts = sum(
        1 for s in incident.seen if s.event['new_state'] == 'RECOVERING' and
        s.event['old_state'] == 'UNHEALTHY')
    return {'fault -> detected': detected.at - faulted,
            'detected -> action': decided.at - detected.at,
            'fault -> healthy': healthy.at - faulted,
            'source': detected.event['source'],
            'reason': detected.event['reason'],
            'faulted': faulted}


def run_path(demo, admin, listener, made, name, args):
    fault, modes = PATHS[name]
    stack = common.create_stack(
        demo, made, TEMPLATE, 'real-heal-%s-%s' % (name, uuid.uuid4().hex[:6]),
        ['count=%d' % args.servers, 'modes=%s' % json.dumps(modes),
         'recovery=%s' % json.dumps(RECOVERY), 'interval=%d' % INTERVAL],
        RuntimeError)
    figures = []
    print('%s (%s, %s):' % (name, fault, '+'.join(m['type'] for m in modes)))
    for number in range(args.incidents):
        targets = common.wait_ready(
            lambda: common.policy_of(demo.health_report(stack)),
            args.servers, 120, IncidentFailed,
            lambda t: '%s %s' % (t['path'], t['state']))
        paths = sorted(targets)
        target = targets[paths[number % len(paths)]]
        time.sleep(random.uniform(0, INTERVAL))
        incident = Incident(target['server_id'])
        try:
            found = run_incident(demo, admin, stack, fault, incident,
                                 args.poll, args.timeout)
        except IncidentFailed as e:
            print('  #%-2d FAILED: %s' % (number + 1, e))
            figures.append(None)
            continue
        found['  Nova: action start -> end'] = nova_seconds(
            listener, target['server_id'], incident.action, found['faulted'])
        nova = found['  Nova: action start -> end']
        print('  #%-2d detected %5.2f s (%s), %-12s %5.2f s after it, '
              'healthy %5.2f s after the fault; Nova %s%s' % (
                  number + 1, found['fault -> detected'], found['source'],
                  incident.action, found['detected -> action'],
                  found['fault -> healthy'],
                  '-' if nova is None else '%.2f s' % nova,
                  '' if incident.attempts == 1 else
                  '; %d attempts' % incident.attempts))
        figures.append(found)
    done = [f for f in figures if f]
    print('  %d of %d healed' % (len(done), len(figures)))
    for row in ROWS:
        p50, top, count = common.p50_max([f.get(row) for f in done])
        if count:
            print('  %-30s p50 %6.2f s   max %6.2f s   (%d)' % (
                row, p50, top, count))
    reasons = sorted({f['reason'] for f in done})
    print('  detected as: %s' % ' | '.join(reasons))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--paths', default=','.join(PATHS))
    parser.add_argument('--incidents', type=int, default=20)
    parser.add_argument('--servers', type=int, default=3)
    parser.add_argument('--poll', type=float, default=0.2)
    parser.add_argument('--timeout', type=int, default=120)
    args = parser.parse_args()
    names = args.paths.split(',')
    unknown = [n for n in names if n not in PATHS]
    if unknown:
        parser.error('unknown paths: %s' % ', '.join(unknown))
    demo = localcloud.Cloud('demo')
    admin = localcloud.Cloud('admin')
    if not admin.has_real_nova():
        sys.exit('the local deployment runs no real Nova: '
                 'tools/localcloud nova real')
    listener = notifications.NovaNotifications()
    listener.start()
    made = []

    def interrupted(signum, frame):
        raise common.Interrupted()
    signal.signal(signal.SIGTERM, interrupted)
    try:
        for name in names:
            run_path(demo, admin, listener, made, name, args)
    except (KeyboardInterrupt, common.Interrupted):
        print('interrupted')
    finally:
        common.delete_stacks(demo, made)
        listener.stop()


if __name__ == '__main__':
    main()
