"""Time to heal: fault -> action issued -> healthy again, per path.

Three paths, chosen with --paths: power-off and hang (the default) heal
one server at a time where it is; recreate replaces servers of one group
that fail together.

The power-off and hang paths run on whichever Nova the local deployment
runs: fakecloud's simulated one, or real Nova (``tools/localcloud nova
real``), whose faults its computes' fault driver makes behind Nova's back.
Each path on a stack of its own made from
tests/functional/templates/heal_group.yaml (a ResourceGroup of --servers
servers and an OS::Heat::HealthPolicy with the default state-aware
recovery ladder):

* power-off, the notification path: a policy with LIFECYCLE_EVENTS alone;
  fakecloud's ``power_off`` fault (instance.power_off.end on the real
  RabbitMQ), or on real Nova the fault driver's ``power_off`` (the guest
  shuts down by itself; Nova's power state sync stops the server), is
  healed with START;
* hang, the poll-URL path: a policy with NODE_STATUS_POLL_URL alone on
  each server's health URL, ``http://127.0.0.1:8775/{id}/health`` (at the
  template's interval, 5 s; one try, 1 s timeout): fakecloud answers it,
  for real Nova's servers by asking the fault driver of the compute that
  holds the guest. fakecloud's ``hang`` fault, or the fault driver's
  application fault ``hang``, makes it stop answering while Nova still
  says ACTIVE; healed with REBOOT SOFT.

Attempts of a healed server are forgotten at once (``healthy_reset: 0``),
so every incident is a first attempt: what is timed is healing, not the
back-off between attempts. Faults are injected one at a time on the
servers in turn, each once every server is HEALTHY again with no attempt
counted and past its grace, so the brake never engages, after a random
pause of up to --spread seconds (the policy's interval by default), so
that faults fall anywhere in the poll and loop cycles. For each
incident:

* fault: fakecloud's timeline entry ``fault:<name>``; on real Nova the
  time the fault driver made it (``faulted_at`` of its answer, the host's
  clock);
* detected, decided, healthy again: the health report's events
  X -> UNHEALTHY, UNHEALTHY -> RECOVERING and VERIFYING -> HEALTHY. The
  report gives times in whole seconds (MariaDB keeps no fraction), so the
  benchmark polls it every --poll seconds while the incident runs and
  narrows each event's time to the interval between the last poll that
  did not show it and the first that did; the middle is used, and the
  width is printed;
* action issued: fakecloud's ``action:<name>`` entry (the compute API
  accepted it); back ACTIVE: fakecloud's next ``active`` entry.
  Action issued -> ACTIVE is fakecloud's own operation delay
  (``task_delay``: the simulated boot or reboot), reported apart. On real
  Nova, from Nova's versioned notifications (stamped by Nova, to the
  microsecond): action issued is the ``instance.update`` nova-api sends
  when it accepts the action (the task state set: ``powering-on``,
  ``rebooting``, ``rebooting_hard``), back ACTIVE the compute's
  ``instance.update`` after it with the server ACTIVE, running and no
  task (just before its ``instance.power_on.end`` or
  ``instance.reboot.end``): Nova's own time, reported apart. For
  power-off, Nova's own stop of the server (``instance.power_off.end`` of
  its sync) is shown as well.

The deployment may be shared: no fault is injected while an API-wide
fault of fakecloud is in force, or on real Nova while a nova-compute is
down (``openstack compute service list``) or another's host-down test
runs (``/tmp/heat-health-hostdown.running`` exists); an incident during
which one of these happened (by someone else), or during which another
engine took the policy over (an engine joined, left or restarted:
bench/failover.py times that), or whose health report did not answer, is
shown but left out of the figures.

Prints one line per incident (with the action's delay counted from the
earliest time the detection can have happened in brackets) and, per path,
p50 and max of each figure, and whether every action was issued within
1 s of detection (the target), by the estimate and for certain. Stacks
are deleted at the end, also on Ctrl-C. Runs against the local deployment
(``tools/localcloud up``) and stops by itself.

The recreate path, time to replace servers that fail together: RECREATE
of 1, 2, 5 at once (fakecloud only: it uses fakecloud's faults and
timeline).

heat-health replaces a broken server with RECREATE: its load balancer
members are drained, its resource is marked CHECK_FAILED and heat-engine
is asked for one stack update (existing), which makes a new server; the
pool follows and the new server is verified. Servers of one stack marked
together are replaced by ONE update. This measures how the time to
replace grows when N servers of one AutoScalingGroup behind an Octavia
pool fail at the same moment.

For each N of --counts and each of --rounds rounds, a stack of its own
is made from tests/functional/templates/lb_recreate.yaml: N + 2 servers,
each on the network with a port of its own, detection by
LIFECYCLE_EVENTS (fakecloud's notifications on the real RabbitMQ) and
NODE_STATUS_POLLING, recovery
RECREATE alone with ``max_concurrent`` N and a ``max_unhealthy_fraction``
above N of the group, so that the brake never engages. Once every target
is HEALTHY, without attempts and past its grace, and the pool holds one
member per server, fakecloud's ``crash_to_error`` fault is injected on N
servers at once (one thread each). Then, every --poll seconds until every
failed server is replaced, its new server verified HEALTHY and in the
pool, and the stack UPDATE_COMPLETE (or --timeout), the benchmark reads:

* the health events (``GET .../health/events`` after the last one seen):
  detected (-> UNHEALTHY), drained (-> DRAINED), fenced, marked
  CHECK_FAILED, stack update requested, verified (VERIFYING -> HEALTHY
  of the new server at the same place). Event times are whole seconds:
  each is narrowed to the interval between the last read that did not
  show it and the first that did, and the middle is used;
* the new server at each place: fakecloud's ``created`` entry of the
  server Heat named as it named the failed one (its place), else the
  health report's targets;
* the pool's members in Octavia: the replacement's address with weight
  > 0 (read once the new server is ACTIVE; where a replacement takes the
  old server's port the member keeps its address), the old member gone
  (its member id no longer listed; a member id kept for the new server is
  shown as such);
* the status of the stacks updated: the stack holding each failed
  server (each group member's own stack), and the root; "stack COMPLETE"
  is when every one reached by an update has completed it;
* fakecloud's timeline: the fault (t0 of each server) and the new
  server's ``active`` entry.

All times are the host's clock (fakecloud runs beside the benchmark).
Throughout, no member at a failed server's address may have weight > 0
after it was drained and before its replacement is ACTIVE: such reads are
counted as violations. The stack updates are Heat's own UPDATE
IN_PROGRESS events of those stacks after the faults, and the distinct
"stack update (existing) requested" batches of the health events.

Prints one line per round and, per N, p50 and max of the seconds from the
fault to each milestone (all in pool and stack COMPLETE per round, the
others per server), the updates per round, the split of the time between
the steps (p50), and the ratios of N=2 and N=5 to N=1 for every
replacement in the pool and the stack COMPLETE against the targets (2 at
once within 1.2x of one, 5 within 1.5x; one server back in the pool
within 4 s, p50). Stacks are deleted after each round, also on Ctrl-C.
Runs against the local deployment (``tools/localcloud up``) and stops by
itself.

    python bench/heal_time.py [--incidents 20] [--servers 4]
        [--paths power-off,hang] [--poll 0.1] [--spread S] [--timeout 120]
    python bench/heal_time.py --paths recreate [--counts 1,2,5] [--rounds 3]
        [--poll 0.1] [--timeout 180]
"""

import argparse
import functools
import json
import os
import pathlib
import random
import signal
import sys
import time
import uuid

from keystoneauth1 import exceptions as ks_exceptions

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'bench'))

import heal_common as common  # noqa: E402
import recreate_rounds  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402
from tests.functional import notifications  # noqa: E402

TEMPLATE = localcloud.TEMPLATES / 'heal_group.yaml'
TARGET_SECONDS = 1.0
# Every incident starts as a first attempt (see the docstring).
RECOVERY = {'healthy_reset': 0}
# Seconds an incident has to heal, unless --timeout says otherwise.
TIMEOUT = 120


class Path(object):
    """A detection path: how the policy watches, and the fault it heals."""

    def __init__(self, name, title, fault, modes, action, nova_action):
        # action: the one the default ladder should take, as fakecloud's
        # timeline names it; nova_action: as real Nova's does (see
        # ACCEPTED). The fault has the same name on both.
        self.name = name
        self.title = title
        self.fault = fault
        self.modes = modes
        self.action = action
        self.nova_action = nova_action


PATHS = {p.name: p for p in [
    Path('power-off', 'power-off, notification path (LIFECYCLE_EVENTS)',
         'power_off', [{'type': 'LIFECYCLE_EVENTS'}], 'os-start', 'start'),
    Path('hang', 'hang, poll-URL path (NODE_STATUS_POLL_URL)',
         'hang', [{'type': 'NODE_STATUS_POLL_URL', 'options': {
             'poll_url': 'http://127.0.0.1:8775/{id}/health',
             'poll_url_healthy_response': '^ok',
             'poll_url_conn_error_as_unhealthy': True,
             'poll_url_retry_limit': 0,
             'poll_url_timeout': 1}}], 'reboot', 'reboot'),
]}
# The path whose servers fail together: bench/recreate_rounds.py.
RECREATE = 'recreate'
# Made by another's tests while they take computes down (see the
# docstring).
HOSTDOWN_MARK = '/tmp/heat-health-hostdown.running'
# Real Nova: the task state nova-api saves when it accepts an action (an
# instance.update carries it), and the action.
ACCEPTED = {'powering-on': 'start', 'rebooting': 'reboot SOFT',
            'rebooting_hard': 'reboot HARD', 'rebuilding': 'rebuild',
            'unpausing': 'unpause', 'resuming': 'resume'}
NOVA_STOPPED = '  Nova: fault -> SHUTOFF (its sync)'


class IncidentFailed(Exception):
    pass


class NoReport(IncidentFailed):
    """The health report did not answer: heat-api or the engines away."""


# The deployment

def create_stack(demo, made, path, servers):
    name = 'heal-time-%s-%s' % (path.name, uuid.uuid4().hex[:8])
    params = ['count=%d' % servers, 'modes=%s' % json.dumps(path.modes),
              'recovery=%s' % json.dumps(RECOVERY)]
    return common.create_stack(demo, made, TEMPLATE, name, params,
                               RuntimeError)


def read_report(demo, stack, patience=60):
    """The health report; an API that does not answer is waited for."""
    deadline = time.time() + patience
    while True:
        try:
            return demo.health_report(stack)
        except (ks_exceptions.ClientException, ValueError, KeyError) as e:
            if time.time() >= deadline:
                raise NoReport('no health report: %s' % e)
            print('  (health report: %s; trying again)' % e)
            time.sleep(2)


def wait_ready(demo, stack, count, timeout):
    """Every target HEALTHY, no attempt counted, past its grace, no brake.

    Returns the targets, ordered by their place in the group.
    """
    targets = common.wait_ready(
        lambda: common.policy_of(read_report(demo, stack)), count, timeout,
        IncidentFailed, lambda t: '%s %s (%s attempts)' % (
            t['path'], t['state'], t['attempts']))
    return [t for _p, t in sorted(targets.items())]


class Fakecloud(object):
    """fakecloud's simulated Nova: its faults and its timeline."""

    name = 'fakecloud'

    def __init__(self, admin):
        self.admin = admin

    @staticmethod
    def expected(path):
        return path.action

    def api_faults(self):
        """fakecloud's API-wide faults in force (someone else's)."""
        return self.admin.session.get(self.admin.fakecloud_url(
            '/fault')).json()['api_faults']

    def wait_quiet(self, timeout):
        """No API-wide fault in force."""
        deadline = time.time() + timeout
        faults = self.api_faults()
        if faults:
            print('  (waiting: API-wide faults in force on fakecloud: %s)'
                  % ', '.join(sorted(faults)))
        while faults:
            if time.time() >= deadline:
                raise IncidentFailed('API-wide faults in force for %ss: %s'
                                     % (timeout, ', '.join(sorted(faults))))
            time.sleep(1)
            faults = self.api_faults()

    def inject(self, incident, fault):
        incident.seq = common.last_seq(self.admin)
        response = self.admin.inject_fault(incident.server_id, fault)
        if response.status_code != 200:
            raise IncidentFailed('fault %s answered %d: %s' % (
                fault, response.status_code, response.text[:200]))

    def watch(self, incident):
        pass

    def finish(self, incident):
        incident.entries = common.timeline(self.admin, incident.seq,
                                           incident.server_id)
        # Faults of the whole API, made by others meanwhile: they disturb
        # what is timed (the brake holds recoveries while Nova errs).
        incident.disturbed += sorted({
            'API-wide fault %s' % e['event'][len('fault:'):]
            for e in common.timeline(self.admin, incident.seq)
            if e['server_id'] is None and e['event'].startswith('fault:')})

    @staticmethod
    def steps(incident):
        """What happened, by the timeline.

        The times of the fault, the action and back ACTIVE (or None), the
        action, how many were accepted, and the steps missing.
        """
        fault = incident.entry('fault:')
        action = incident.entry('action:', fault) if fault else None
        active = incident.entry('active', action) if action else None
        name = None
        if action:
            name = action['event'][len('action:'):]
            if action.get('type'):
                name += ' ' + action['type']
        missing = [what for what, found in [
            ('fault in the timeline', fault),
            ('action in the timeline', action),
            ('ACTIVE after the action', active)] if found is None]
        return {'fault': fault and fault['time'],
                'action': action and action['time'],
                'active': active and active['time'], 'name': name,
                'actions': sum(1 for i in incident.entries
                               if i['event'].startswith('action:')),
                'missing': missing, 'extra': {}}


class RealNova(object):
    """Real Nova: the fault driver's faults, Nova's notifications."""

    name = 'Nova'

    def __init__(self, admin, listener):
        self.admin = admin
        self.listener = listener

    @staticmethod
    def expected(path):
        return path.nova_action

    def computes_down(self):
        """nova-compute services down or forced down, as Nova lists them."""
        services = self.admin.session.get(
            self.admin.endpoint('compute') +
            '/os-services?binary=nova-compute').json()['services']
        return sorted('%s %s' % (s['host'], 'forced down'
                                 if s.get('forced_down') else s['state'])
                      for s in services
                      if s['state'] != 'up' or s.get('forced_down'))

    def wait_quiet(self, timeout):
        """Every compute up, and no host-down test of another running."""
        deadline = time.time() + timeout
        said = None
        while True:
            why = self.computes_down()
            if os.path.exists(HOSTDOWN_MARK):
                why.append('%s exists' % HOSTDOWN_MARK)
            if not why:
                return
            if why != said:
                said = why
                print('  (waiting: %s)' % ', '.join(why))
            if time.time() >= deadline:
                raise IncidentFailed('not quiet for %ss: %s'
                                     % (timeout, ', '.join(why)))
            time.sleep(1)

    def inject(self, incident, fault):
        incident.down = set(self.computes_down())
        incident.hostdown = os.path.exists(HOSTDOWN_MARK)
        incident.fault_before = time.time()
        try:
            found = self.admin.guest_fault(incident.server_id, fault)
        except Exception as e:
            raise IncidentFailed('fault %s: %s' % (fault, e))
        # When the fault driver made it (this host's clock): Nova may have
        # handled it before the driver answered. Else at the answer.
        incident.fault_time = found.get('faulted_at') or time.time()

    def watch(self, incident):
        if os.path.exists(HOSTDOWN_MARK):
            incident.hostdown = True

    def finish(self, incident):
        incident.down.update(self.computes_down())
        if incident.down:
            incident.disturbed.append('compute down: %s' % ', '.join(
                sorted(incident.down)))
        if incident.hostdown:
            incident.disturbed.append('host-down test running')

    def notifications(self, incident):
        """[(Nova's time, type, payload data)] since the fault, in order."""
        found = []
        for event_type, payload, stamp in self.listener.stamped():
            data = payload.get('nova_object.data', {})
            if data.get('uuid') != incident.server_id or not stamp:
                continue
            when = common.epoch(stamp.replace(' ', 'T'))
            if when >= incident.fault_before:
                found.append((when, event_type, data))
        return sorted(found, key=lambda f: f[0])

    def steps(self, incident):
        seen = self.notifications(incident)
        # Each instance.update carries the task state saved (its
        # state_update's old_task_state is the new one as well): an action
        # is accepted where the task state turns to one of ACCEPTED.
        accepted, task = [], None
        for when, event_type, data in seen:
            if event_type != 'instance.update':
                continue
            if data.get('task_state') in ACCEPTED and \
                    data['task_state'] != task:
                accepted.append((when, ACCEPTED[data['task_state']]))
            task = data.get('task_state')
        action, name, active = None, None, None
        extra = {}
        if accepted:
            action, name = accepted[0]
            # The compute's save of the server ACTIVE and running with no
            # task, which comes just before its instance.<action>.end.
            active = next((when for when, event_type, data in seen
                           if event_type == 'instance.update' and
                           when > action and data.get('state') == 'active'
                           and data.get('task_state') is None and
                           data.get('power_state') == 'running'), None)
            stopped = next((when for when, event_type, _d in seen
                            if event_type == 'instance.power_off.end' and
                            when <= action), None)
            if stopped is not None:
                extra[NOVA_STOPPED] = stopped - incident.fault_time
        missing = [what for what, found in [
            ('an action accepted by Nova (instance.update)', action),
            ('ACTIVE and running after it (instance.update)', active)]
            if found is None]
        return {'fault': incident.fault_time, 'action': action,
                'active': active, 'name': name, 'actions': len(accepted),
                'missing': missing, 'extra': extra}


# One incident

class Incident(object):

    def __init__(self, number, target):
        self.number = number
        self.server_id = target['server_id']
        self.place = target['path']
        self.events = []       # Seen, in the order they were first seen
        self.entries = []      # fakecloud's timeline of the server
        self.disturbed = []    # what others did meanwhile
        self.owners = []       # engines seen watching the policy meanwhile
        self.error = None

    def first(self, new_state, old_state=None):
        for seen in self.events:
            e = seen.event
            if (e['server_id'] == self.server_id and
                    e['new_state'] == new_state and
                    (old_state is None or e['old_state'] == old_state)):
                return seen
        return None

    def entry(self, prefix, after=None):
        for item in self.entries:
            if (item['event'].startswith(prefix) and
                    (after is None or item['seq'] > after['seq'])):
                return item
        return None

    def figures(self, backend):
        """{figure: seconds}; raises IncidentFailed if a step is missing."""
        steps = backend.steps(self)
        detected = self.first('UNHEALTHY')
        decided = self.first('RECOVERING', 'UNHEALTHY')
        healthy = self.first('HEALTHY', 'VERIFYING')
        missing = [name for name, found in [
            ('detection', detected), ('decision', decided),
            ('VERIFYING -> HEALTHY', healthy)] if found is None]
        missing += steps['missing']
        if missing:
            raise IncidentFailed('missing: %s' % ', '.join(missing))
        fault, action, active = steps['fault'], steps['action'], \
            steps['active']
        self.action = steps['name']
        self.actions = steps['actions']
        self.holds = [s.event['reason'] for s in self.events
                      if s.event['server_id'] == self.server_id and
                      s.event['new_state'] == 'SUPPRESSED']
        self.attempts = sum(1 for s in self.events
                            if s.event['server_id'] == self.server_id and
                            s.event['old_state'] == 'UNHEALTHY' and
                            s.event['new_state'] == 'RECOVERING')
        # The order of what happened narrows the report's times: a fault
        # is detected after it happened, an action decided before it is
        # issued, and healed after it.
        detected.narrow(after=fault)
        decided.narrow(after=detected.low, before=action)
        healthy.narrow(after=action)
        self.widths = [s.width for s in (detected, decided, healthy)]
        found = {
            'fault -> detected': detected.at - fault,
            'detected -> decided': decided.at - detected.at,
            'detected -> action issued': action - detected.at,
            'fault -> action issued': action - fault,
            'fault -> healthy again': healthy.at - fault,
            own_row(backend): active - action,
            '  ACTIVE -> healthy again': healthy.at - active,
            # For the target: from the earliest the detection can be.
            'bound': action - detected.low,
        }
        found.update(steps['extra'])
        return found


def own_row(backend):
    """The row of the compute API's own time for the action."""
    return '  %s: action -> ACTIVE' % backend.name


def run_incident(demo, backend, stack, path, incident, poll, timeout):
    seen = {common.event_key(e)
            for e in read_report(demo, stack)['events']}
    previous = time.time()
    backend.inject(incident, path.fault)
    deadline = time.time() + timeout
    healed = False
    while time.time() < deadline:
        started = time.time()
        report = read_report(demo, stack,
                             patience=max(deadline - started, 0))
        answered = time.time()
        backend.watch(incident)
        owner = common.policy_of(report)['engine_id']
        if owner not in incident.owners:
            incident.owners.append(owner)
        incident.events += common.new_events(report, seen, previous,
                                             answered)
        previous = started
        healed = (incident.first('HEALTHY', 'VERIFYING') is not None and
                  all(t['state'] == 'HEALTHY'
                      for t in common.policy_of(report)['targets']))
        if healed:
            break
        time.sleep(max(0.0, poll - (time.time() - started)))
    backend.finish(incident)
    if len(incident.owners) > 1:
        # Another engine took the policy over meanwhile (an engine
        # joined, left or restarted): bench/failover.py times that.
        incident.disturbed.append('owner changed: %s' % ' -> '.join(
            o or 'none' for o in incident.owners))
    if not healed:
        states = ', '.join('%s %s' % (s.event['old_state'],
                                      s.event['new_state'])
                           for s in incident.events
                           if s.event['server_id'] == incident.server_id)
        raise IncidentFailed('not healed within %ss (events: %s)'
                             % (timeout, states or 'none'))
    return incident.figures(backend)


# Output

def rows(backend):
    """The figures printed per path (those no incident has left out)."""
    return ['fault -> detected', 'detected -> decided',
            'detected -> action issued', 'fault -> action issued',
            'fault -> healthy again', NOVA_STOPPED, own_row(backend),
            '  ACTIVE -> healthy again']


def line(backend, path, incident, figures):
    extra = ''
    expected = backend.expected(path)
    if incident.action.split()[0] != expected:
        extra += '; NOT the expected %s' % expected
    if incident.disturbed:
        extra += '; DISTURBED: %s' % ', '.join(incident.disturbed)
    if incident.attempts > 1:
        extra += '; %d attempts' % incident.attempts
    if incident.actions > 1:
        extra += '; %d actions accepted' % incident.actions
    if incident.holds:
        extra += '; held: %s' % ' | '.join(incident.holds)
    return ('  #%-2d %-10s %-12s detected %5.2f s, action %5.2f s after '
            'it (<= %.2f), healthy %5.2f s after the fault%s'
            % (incident.number, incident.place, incident.action,
               figures['fault -> detected'],
               figures['detected -> action issued'], figures['bound'],
               figures['fault -> healthy again'], extra))


def summary(backend, path, incidents, done, servers, poll):
    print()
    print('%s: %d incidents on %d servers (%s), %d healed'
          % (path.title, len(incidents), servers, backend.name,
             len(done)))
    braked = {i.number: sum(1 for seen in i.events
                            if seen.event['new_state'] == 'BRAKED')
              for i in incidents}
    if any(braked.values()):
        print('  BRAKED events recorded: %s' % ', '.join(
            '%d in #%d' % (n, number) for number, n in sorted(
                braked.items()) if n))
    disturbed = [i for i in incidents if i.disturbed]
    if disturbed:
        print('  left out of the figures: %d incidents disturbed by others '
              '(%s)' % (len(disturbed), '; '.join(
                  '#%d %s' % (i.number, ', '.join(i.disturbed))
                  for i in disturbed)))
        incidents = [i for i in incidents if not i.disturbed]
        done = [(i, f) for i, f in done if not i.disturbed]
    if not done:
        return
    print('  %-34s %8s %8s' % ('seconds', 'p50', 'max'))
    for row in rows(backend):
        values = [figures.get(row) for _i, figures in done]
        p50, worst, count = common.p50_max(values)
        if count:
            print('  %-34s %8.2f %8.2f%s' % (
                row, p50, worst, '' if count == len(done) else
                '   (%d incidents)' % count))
    p50, worst, _n = common.p50_max(
        w for incident, _f in done for w in incident.widths)
    print('  (report events in whole seconds, placed by polling it every '
          '%.2f s: uncertainty p50 %.2f s, max %.2f s)' % (poll, p50, worst))
    actions = sorted({incident.action for incident, _f in done})
    holds = sum(1 for incident, _f in done if incident.holds)
    several = sum(1 for incident, _f in done if incident.attempts > 1 or
                  incident.actions > 1)
    print('  actions: %s; incidents held before acting: %d; with more '
          'than one attempt or action: %d'
          % (', '.join(actions), holds, several))
    estimates = [figures['detected -> action issued']
                 for _i, figures in done]
    bounds = [figures['bound'] for _i, figures in done]
    likely = sum(1 for e in estimates if e <= TARGET_SECONDS)
    certain = sum(1 for b in bounds if b <= TARGET_SECONDS)
    if certain == len(incidents):
        verdict = 'MET'
    elif likely == len(incidents):
        verdict = 'MET by the estimate, not beyond its uncertainty'
    else:
        verdict = 'NOT MET'
    print('  action issued within %.0f s of detection: %d of %d incidents '
          'by the estimate, %d for certain (from the earliest possible '
          'detection: worst %.2f s): target %s'
          % (TARGET_SECONDS, likely, len(incidents), certain, max(bounds),
             verdict))


# The run

def run_path(demo, backend, made, path, args, incidents, done):
    begin = time.time()
    stack = create_stack(demo, made, path, args.servers)
    targets = wait_ready(demo, stack, args.servers, args.timeout)
    policy = common.policy_of(read_report(demo, stack))
    interval = policy['interval']
    path.title += ', interval %d s' % interval
    spread = interval if args.spread is None else args.spread
    owners = [policy['engine_id']]
    print('%s: stack %s, %d servers ready in %.0f s, policy watched by '
          'engine %s' % (path.name, stack['stack_name'], len(targets),
                         time.time() - begin, owners[0]))
    rnd = random.Random(args.seed)
    for number in range(1, args.incidents + 1):
        try:
            targets = wait_ready(demo, stack, args.servers, args.timeout)
        except IncidentFailed as e:
            print('  stopping %s: %s' % (path.name, e))
            break
        try:
            backend.wait_quiet(args.timeout)
        except IncidentFailed as e:
            print('  stopping %s: %s' % (path.name, e))
            break
        incident = Incident(number, targets[(number - 1) % len(targets)])
        owner = common.policy_of(read_report(demo, stack))['engine_id']
        if owner != owners[-1]:
            owners.append(owner)
            print('  the policy is now watched by engine %s' % owner)
        time.sleep(rnd.uniform(0, spread))
        try:
            figures = run_incident(demo, backend, stack, path, incident,
                                   args.poll, args.timeout)
        except (IncidentFailed, ks_exceptions.ClientException) as e:
            incident.error = str(e)
            if isinstance(e, NoReport):
                incident.disturbed.append('no health report')
            incidents.append(incident)
            print('  #%-2d %-10s FAILED: %s' % (number, incident.place, e))
            continue
        incidents.append(incident)
        done.append((incident, figures))
        print(line(backend, path, incident, figures))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--paths', default='power-off,hang',
                        help='comma-separated, of: %s' % ', '.join(
                            list(PATHS) + [RECREATE]))
    parser.add_argument('--incidents', type=int, default=20,
                        help='incidents per path (power-off, hang)')
    parser.add_argument('--servers', type=int, default=4,
                        help='servers in each stack\'s group (power-off, '
                             'hang)')
    parser.add_argument('--counts', default='1,2,5',
                        help='recreate: comma-separated: servers failing '
                             'at once')
    parser.add_argument('--rounds', type=int, default=3,
                        help='recreate: rounds per count')
    parser.add_argument('--poll', type=float, default=0.1,
                        help='seconds between reads of the health report '
                             '(recreate: between two reads)')
    parser.add_argument('--spread', type=float, default=None,
                        help='most seconds of the random pause before a '
                             'fault (default: the policy\'s interval)')
    parser.add_argument('--seed', type=int, default=None,
                        help='seed of the random pauses')
    parser.add_argument('--timeout', type=int, default=None,
                        help='seconds an incident has to heal, or a '
                             'recreate round to replace its servers (and '
                             'the servers to be ready); default %d, %d for '
                             'recreate' % (TIMEOUT, recreate_rounds.TIMEOUT))
    args = parser.parse_args()
    names = [name.strip() for name in args.paths.split(',')]
    unknown = [name for name in names
               if name not in PATHS and name != RECREATE]
    if unknown:
        parser.error('--paths: unknown %s' % ', '.join(unknown))
    if args.servers < 2 and any(name in PATHS for name in names):
        parser.error('--servers: at least 2')
    try:
        counts = [int(c) for c in args.counts.split(',')]
    except ValueError:
        parser.error('--counts: integers, comma-separated')
    if any(c < 1 for c in counts):
        parser.error('--counts: at least 1')
    recreate_timeout = args.timeout
    if args.timeout is None:
        recreate_timeout = recreate_rounds.TIMEOUT
        args.timeout = TIMEOUT

    demo = localcloud.Cloud('demo')
    admin = localcloud.Cloud('admin')
    listener = None
    if admin.has_fakecloud():
        backend = Fakecloud(admin)
    elif admin.has_real_nova():
        # Nova's own steps are read from its notifications: listened to
        # from the start.
        listener = notifications.NovaNotifications()
        listener.start()
        backend = RealNova(admin, listener)
    else:
        sys.exit('the local deployment runs neither fakecloud nor real '
                 'Nova with the fault driver: tools/localcloud up')
    print('Nova: %s' % ('fakecloud\'s' if isinstance(backend, Fakecloud)
                        else 'real, faults by the computes\' fault driver'))
    made = []
    # What each path prints once every path has run, in their order.
    reports = []

    def interrupted(signum, frame):
        raise common.Interrupted()
    signal.signal(signal.SIGTERM, interrupted)
    # Ctrl-C cleans up also when started where SIGINT was ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for name in names:
            if name == RECREATE and not isinstance(backend, Fakecloud):
                print('%s: skipped: it needs fakecloud\'s faults and '
                      'timeline (tools/localcloud nova fake)' % name)
                continue
            if name == RECREATE:
                results = []
                reports.append(functools.partial(
                    recreate_rounds.report, results, args.poll))
                recreate_rounds.run(demo, admin, made, counts, args.rounds,
                                    args.poll, recreate_timeout, results)
                continue
            path = PATHS[name]
            incidents, done = [], []
            reports.append(functools.partial(
                summary, backend, path, incidents, done, args.servers,
                args.poll))
            try:
                run_path(demo, backend, made, path, args, incidents, done)
            except (IncidentFailed, localcloud.CommandFailed, RuntimeError,
                    ks_exceptions.ClientException) as e:
                print('%s: stopped: %s' % (path.name, e))
    except (KeyboardInterrupt, common.Interrupted):
        print('interrupted: cleaning up')
    finally:
        # Not interrupted again while removing what was made.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        common.delete_stacks(demo, made)
        if listener is not None:
            listener.stop()
    for report in reports:
        report()


if __name__ == '__main__':
    main()
