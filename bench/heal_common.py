"""What the paths of bench/heal_time.py share: stacks, timelines, times.

The stacks made, the health report's policy and its targets, fakecloud's
timeline, the report's event times narrowed by the reads around them, and
p50 and max of a figure.
"""

import datetime
import statistics
import time


class Interrupted(Exception):
    pass


def epoch(iso):
    when = datetime.datetime.fromisoformat(iso)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


# The deployment

def create_stack(demo, made, template, name, params, failure):
    """Stack ``name`` from ``template``; ``failure`` if it is not made."""
    made.append(name)
    args = ['stack', 'create', '--wait', '-t', str(template)]
    for param in params:
        args += ['--parameter', param]
    demo.run(*(args + [name]))
    stack = demo.json('stack', 'show', name)
    if stack['stack_status'] != 'CREATE_COMPLETE':
        raise failure('stack %s is %s: %s' % (
            name, stack['stack_status'], stack.get('stack_status_reason')))
    return stack


def delete_stacks(demo, made, tries=5):
    """Delete the stacks made, trying again while the API is away."""
    while made:
        name = made[0]
        for attempt in range(1, tries + 1):
            result = demo.run('stack', 'delete', '--yes', '--wait', name,
                              check=False)
            gone = demo.run('stack', 'show', name, check=False)
            if gone.returncode != 0 and 'not found' in gone.stderr.lower():
                break
            if attempt == tries:
                print('could not delete stack %s: %s'
                      % (name, (result.stderr or gone.stderr).strip()))
            else:
                time.sleep(5)
        made.pop(0)


def policy_of(report):
    policy, = report['policies']
    return policy


def wait_ready(read_policy, count, timeout, failure, state, settled=None):
    """The targets by path once ready; ``failure`` after ``timeout`` s.

    Ready: ``count`` targets, the policy not braked, every target HEALTHY
    with no attempt counted and past its grace, and then ``settled``
    (targets by path -> why they are not ready yet, or None), if given.
    ``read_policy()`` reads the policy; ``state(target)`` shows a target
    in why they are not ready.
    """
    deadline = time.time() + timeout
    why = 'no report'
    while time.time() < deadline:
        policy = read_policy()
        targets = {t['path']: t for t in policy['targets']}
        graces = [epoch(t['grace_until']) for t in targets.values()
                  if t['grace_until']]
        # grace_until is in whole seconds: one more to be past it.
        grace = max(graces) + 1 if graces else 0
        if len(targets) != count:
            why = '%d targets of %d' % (len(targets), count)
        elif policy['braked']:
            why = 'braked: %s' % policy['braked']
        elif any(t['state'] != 'HEALTHY' or t['attempts']
                 for t in targets.values()):
            why = ', '.join(state(t) for _p, t in sorted(targets.items()))
        elif time.time() < grace:
            time.sleep(grace - time.time())
            continue
        else:
            why = settled(targets) if settled is not None else None
            if why is None:
                return targets
        time.sleep(0.5)
    raise failure('not ready within %ss: %s' % (timeout, why))


def last_seq(admin):
    return admin.session.get(admin.fakecloud_url(
        '/timeline?since_seq=%d' % 2 ** 62)).json()['last_seq']


def timeline(admin, since_seq, server_id=None):
    query = 'since_seq=%d' % since_seq
    if server_id is not None:
        query += '&server_id=%s' % server_id
    return admin.session.get(admin.fakecloud_url(
        '/timeline?' + query)).json()['timeline']


def event_key(event):
    return (event['server_id'], event['old_state'], event['new_state'],
            event['reason'], event['time'])


def new_events(report, known, not_before, not_after):
    """The report's events not in ``known`` (keys, updated), oldest first.

    Each as Seen between the read before this one and this one's answer.
    """
    found = []
    for event in reversed(report['events']):
        key = event_key(event)
        if key not in known:
            known.add(key)
            found.append(Seen(event, not_before, not_after))
    return found


# Times

class Seen(object):
    """An event of the report, its time narrowed by the reads around it."""

    def __init__(self, event, not_before, not_after):
        self.event = event
        floor = epoch(event['time'])
        # Whole seconds unless the database kept a fraction.
        ceiling = floor + (1.0 if floor == int(floor) else 0.0)
        self.low = max(floor, min(not_before, ceiling))
        self.high = min(ceiling, max(not_after, floor))

    def narrow(self, after=None, before=None):
        """What else is known: it came after, or before, that time."""
        if after is not None and self.low < after <= self.high:
            self.low = after
        if before is not None and self.low <= before < self.high:
            self.high = before

    @property
    def at(self):
        return (self.low + self.high) / 2

    @property
    def width(self):
        return self.high - self.low


def p50_max(values):
    """(p50, max, how many) of the values that are not None."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None, 0
    return statistics.median(values), max(values), len(values)


def wait_until(predicate, what, timeout, failure, interval=0.5):
    """What ``predicate()`` returns once true; ``failure`` at the deadline."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(interval)
    raise failure('not within %ss: %s' % (timeout, what))
