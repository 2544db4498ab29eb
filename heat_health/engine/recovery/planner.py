"""What recovery does next for each target of a policy: a pure function.

No I/O and no clock of its own: the recovery loop hands in what is stored
(states, attempts, the recovery under way) and the time, and carries out
the steps returned. Every rule of acting safely lives here, unit-tested:
the brake (a share of the fleet down at once, or observers that cannot
see), the limits on concurrent recoveries, the back-off between attempts
with noise, the give-up after too many attempts within a window, the
escalation when an action did not heal within its deadline, and what
holds a recovery back (OBSERVE, a disabled or suspended policy, a stack
action on the member, the grace, an operator's pause).
"""

import collections
import datetime

from heat_health.engine.monitor import states
from heat_health.policy import spec as policy_spec

# The brake needs at least this many targets down at once: one or two
# servers failing is not a mass failure, whatever the fleet's size (as
# Kubernetes' partial disruption needs more than two nodes NotReady).
BRAKE_MIN_DOWN = 3

Start = collections.namedtuple('Start', ['target', 'step', 'attempt',
                                         'reason'])
"""Begin an attempt at ladder ``step`` (the attempt-th in the window)."""
Advance = collections.namedtuple('Advance', ['target'])
"""Carry a stored RECOVERING target one stage further (or finish it)."""
Escalate = collections.namedtuple('Escalate', ['target', 'next_step',
                                               'reason'])
"""The action did not heal within its deadline: the next rung."""
GiveUp = collections.namedtuple('GiveUp', ['target', 'reason'])
ResetAttempts = collections.namedtuple('ResetAttempts', ['target'])
Restore = collections.namedtuple('Restore', ['target'])
"""Healthy again, or given up: give drained members their weight back."""
Unmark = collections.namedtuple('Unmark', ['target'])
"""Healthy again, or given up: clear the CHECK_FAILED a recovery put on its
resource."""
Hold = collections.namedtuple('Hold', ['target', 'reason'])
"""A failed target not acted on now, and why (for the timeline)."""
Follow = collections.namedtuple('Follow', ['target'])
"""Read how the rung's workflow execution goes: its ERROR escalates at
once, without waiting for the deadline."""
Abandon = collections.namedtuple('Abandon', ['target', 'reason'])
"""A stored attempt not to be carried on (the policy only observes now):
back to UNHEALTHY, what it drained and marked undone after."""
ReplaceMarked = collections.namedtuple('ReplaceMarked', ['targets'])
"""One stack update replaces the servers marked for it (the policy's, or,
with ``by_stack``, those of one stack)."""

# RECREATE's stages before its resource is marked, and once it is marked
# and waits for the stack update (see recovery.recreate).
_MARKING = frozenset(['intent', 'fencing', 'fenced'])
MARKED = 'marked'
# Stages of an attempt that may be abandoned: nothing is on its way in
# Nova or Heat (``issuing`` may have been sent, ``updating`` runs).
_ABANDONABLE = _MARKING | {MARKED}
# States in which what a recovery left is undone: over, healed, or meant.
_UNDONE_IN = frozenset([states.HEALTHY, states.SUPPRESSED])
# States in which recovery's CHECK_FAILED is cleared: those, given up, or
# reset by a user (NO_DATA), whose reset ends the recovery: left marked,
# the next update of its stack would replace the server anyway.
_UNMARKED_IN = _UNDONE_IN | {states.GAVE_UP, states.NO_DATA}

Plan = collections.namedtuple('Plan', ['brake', 'steps'])

BLIND = 'observers cannot see'
# Mistral's states of an execution that has ended.
EXECUTION_ENDED = frozenset(['SUCCESS', 'ERROR', 'CANCELLED'])


def parse_time(value):
    """A stored time: a datetime, or ISO 8601 text (naive UTC)."""
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(value).replace(tzinfo=None)


def attempts_in_window(target, spec, now):
    """Attempts counted now: none once the window since the first passed."""
    first = parse_time(target.first_attempt_at)
    if not target.attempts or first is None:
        return 0
    if now - first > datetime.timedelta(seconds=spec.attempt_window):
        return 0
    return target.attempts


def _down(target, spec, now):
    """Down for the brake: failing now, or given up within the window.

    A server given up on long ago is not part of a failure happening now.
    """
    if target.state != states.GAVE_UP:
        return target.state in states.DOWN
    since = parse_time(target.since)
    return since is None or now - since <= datetime.timedelta(
        seconds=spec.attempt_window)


def brake(targets, spec, now, blind=None):
    """Why the policy must not start recoveries now, or None.

    :param blind: why the observers cannot be trusted now (Nova errors,
        stale listings), or None.
    """
    if blind:
        return '%s: %s' % (BLIND, blind)
    down = [t for t in targets if _down(t, spec, now)]
    if (len(down) >= BRAKE_MIN_DOWN and
            len(down) >= spec.max_unhealthy_fraction * len(targets)):
        return ('%d of %d targets are failing at once (brake at %d%%): '
                'more likely a fault of the platform than of the servers'
                % (len(down), len(targets),
                   round(spec.max_unhealthy_fraction * 100)))
    return None


def paused_reason(paused):
    """Why an operator's pause ({by, at, reason}) holds new actions."""
    if not paused:
        return None
    return 'healing paused by %s%s' % (
        paused['by'], ': %s' % paused['reason'] if paused['reason'] else '')


def _paused(policy):
    return paused_reason(getattr(policy, 'paused', None))


def _hold_reason(target, policy, now):
    """Why no new action may be taken on the target now, or None."""
    frozen = policy.frozen()
    if frozen:
        return frozen
    paused = _paused(policy)
    if paused:
        return paused
    if target.place in policy.busy:
        return 'a stack action is working on %s' % target.path
    grace = parse_time(target.grace_until)
    if grace is not None and now < grace:
        return 'within the grace after a create or update'
    return None


def _deadline_passed(target, now):
    deadline = parse_time((target.recovery or {}).get('deadline'))
    return deadline is not None and now >= deadline


def _undo(target, observing=False):
    """A step undoing what a finished recovery left, or None.

    :param observing: the policy only observes: whatever no recovery
        carries on any more is undone, failing or not.
    """
    recovery = target.recovery or {}
    over = observing and target.state not in states.IN_RECOVERY
    # A user's reset (NO_DATA) ends the recovery: its member serves again.
    if (over or target.state in _UNDONE_IN | {states.GAVE_UP,
                                              states.NO_DATA}) and (
            recovery.get('drained') and not recovery.get('restored')):
        return Restore(target)
    if (over or target.state in _UNMARKED_IN) and (
            recovery.get('marked_failed')):
        return Unmark(target)
    return None


def _observing(targets, now):
    """OBSERVE's steps: abandon, and undo what recoveries left.

    Attempts not under way in Nova or Heat are abandoned; a verification
    past its deadline ends as it would in HEAL (no next rung follows), so
    that what its attempt drained is given back; nothing else is done.
    """
    steps = []
    for target in targets:
        if (target.state == states.RECOVERING and
                (target.recovery or {}).get('stage') in _ABANDONABLE):
            steps.append(Abandon(target, 'the policy only observes'))
            continue
        if target.state == states.VERIFYING and _deadline_passed(target,
                                                                 now):
            steps.append(_escalation(target))
            continue
        undo = _undo(target, observing=True)
        if undo is not None:
            steps.append(undo)
    return steps


def _following(target):
    """Whether the target's workflow execution has yet to end."""
    recovery = target.recovery or {}
    return (target.state == states.VERIFYING and
            recovery.get('action') == policy_spec.MISTRAL_WORKFLOW and
            recovery.get('execution') and
            recovery.get('execution_state') not in EXECUTION_ENDED)


def _escalation(target):
    recovery = target.recovery or {}
    action = policy_spec.rung_label(recovery.get('action', 'the action'),
                                    recovery.get('params'))
    return Escalate(target, recovery.get('step', 0) + 1,
                    'not healthy %ss after %s' % (
                        recovery.get('verify_seconds', '?'), action))


def _gathered(targets, marked, running, starting, now, gather):
    """Whether the marked targets' update may be asked for now.

    At once when no other RECREATE of their stack is on its way to its
    mark (deciding, fencing, marking); otherwise once the first marked
    target has waited ``gather`` seconds for them.

    :param targets: the targets that share the marked ones' update.
    :param starting: ids of targets whose recovery starts now.
    """
    on_the_way = any(t.id in running or t.id in starting
                     for t in targets) or any(
        t.state == states.RECOVERING and
        (t.recovery or {}).get('action') == 'RECREATE' and
        (t.recovery or {}).get('stage') in _MARKING for t in targets)
    if not on_the_way:
        return True
    first = min((parse_time((t.recovery or {}).get('marked_at')) or now
                 for t in marked))
    return now >= first + datetime.timedelta(seconds=gather)


def _replacements(targets, marked, running, starting, now, gather,
                  by_stack):
    """A ReplaceMarked for each update the marked targets may have now.

    :param by_stack: each stack holding marked resources has an update of
        its own (``replacement_update_stack = own``), a group's members
        replaced whole their group's; else one update of the policy's
        stack replaces them all.
    """
    def key(target):
        if not by_stack:
            return None
        # A group member replaced whole (``replace: MEMBER``) is marked
        # in its group's stack: the members of one group share its update.
        member = (target.recovery or {}).get('member')
        return member['stack_id'] if member else target.stack_id
    shares = collections.defaultdict(list)
    for target in targets:
        shares[key(target)].append(target)
    groups = collections.OrderedDict()
    for target in marked:
        groups.setdefault(key(target), []).append(target)
    return [ReplaceMarked(tuple(group)) for k, group in groups.items()
            if _gathered(shares[k], group, running, starting, now, gather)
            and not any(_mark_left(t) for t in shares[k])]


def _mark_left(target):
    """Whether the target's CHECK_FAILED waits to be cleared.

    Heat replaces every resource marked in the stack it updates: the
    update of the others waits until the mark of a recovery abandoned
    (its server healthy again), given up or reset by a user is cleared
    (``Unmark``).
    """
    return bool(target.state in _UNMARKED_IN and
                (target.recovery or {}).get('marked_failed'))


def plan(policy, targets, now, running=(), engine_room=None, blind=None,
         project_room=None, project_cap=None, gather=0.0, by_stack=False):
    """The steps for one policy's targets now.

    :param policy: has ``spec`` (PolicySpec), ``busy`` (places a stack
        action works on) and ``frozen()`` (why nothing may change).
    :param targets: the policy's targets (id, state, recovery, attempts,
        first_attempt_at, next_attempt_at, since, grace_until, place,
        path).
    :param running: ids of the targets whose recovery this engine is
        starting now (still UNHEALTHY until their intent is stored).
    :param engine_room: recoveries the engine may still start (its own
        limit), None for no limit.
    :param blind: as for ``brake``.
    :param project_room: recoveries the engine may still start for the
        policy's project (its share, ``project_cap``), None for no limit.
    :param gather: seconds a marked RECREATE waits for the others of its
        stack on their way to their mark, to share one stack update.
    :param by_stack: the marked targets of each stack have an update of
        their own (see ``_replacements``).
    """
    spec = policy.spec.recovery
    steps = []
    if spec.mode == policy_spec.OBSERVE:
        # Detection and the report only: nothing to hold back or brake,
        # but what an earlier recovery left is still undone.
        return Plan(None, _observing(targets, now))
    braked = brake(targets, spec, now, blind)
    active = {t.id for t in targets if t.state in states.IN_RECOVERY}
    room = max(spec.max_concurrent - len(active | set(running)), 0)
    marked = []
    for target in sorted(targets, key=lambda t: (parse_time(t.since) or now)):
        state = target.state
        undo = _undo(target)
        if undo is not None:
            steps.append(undo)
        elif state in states.IN_RECOVERY:
            held = _hold_reason(target, policy, now)
            stage = (target.recovery or {}).get('stage')
            if state == states.RECOVERING and stage == MARKED:
                # Replaced together with the others marked; only the
                # switches hold it (the loop waits while the stack is
                # busy).
                switched = policy.frozen() or _paused(policy)
                if switched:
                    steps.append(Hold(target, switched))
                else:
                    marked.append(target)
            elif state == states.RECOVERING and (
                    held is None or stage == 'issuing'):
                # Stored intent: carried through even under the brake (it
                # was decided before), never issued twice (the stages say
                # what was done).
                steps.append(Advance(target))
            elif held is not None and (state == states.RECOVERING or
                                       _deadline_passed(target, now)):
                steps.append(Hold(target, held))
            elif _deadline_passed(target, now):
                steps.append(_escalation(target))
            elif held is None and _following(target):
                steps.append(Follow(target))
        elif state == states.HEALTHY:
            if target.attempts and (
                    now - (parse_time(target.since) or now) >=
                    datetime.timedelta(seconds=spec.healthy_reset)):
                steps.append(ResetAttempts(target))
        elif state == states.UNHEALTHY:
            reason = _hold_reason(target, policy, now)
            if reason is None and braked:
                reason = 'braked: %s' % braked
            if reason is not None:
                steps.append(Hold(target, reason))
                continue
            done = attempts_in_window(target, spec, now)
            if done >= spec.max_attempts:
                steps.append(GiveUp(target, 'gave up after %d attempts '
                                    'within %ss' % (done,
                                                    spec.attempt_window)))
                continue
            not_before = parse_time(target.next_attempt_at)
            if done and not_before is not None and now < not_before:
                steps.append(Hold(target, 'backing off until %s' %
                                  not_before.isoformat(
                                      timespec='seconds')))
                continue
            if target.id in running:
                continue
            if room <= 0:
                steps.append(Hold(target, 'waiting: %d recoveries of this '
                                  'policy at once at most' %
                                  spec.max_concurrent))
                continue
            if project_room is not None and project_room <= 0:
                steps.append(Hold(target, 'waiting: %s recoveries of this '
                                  "project at once at most (the engine's "
                                  'share per project)' % project_cap))
                continue
            if engine_room is not None and engine_room <= 0:
                steps.append(Hold(target, 'waiting: every recovery worker '
                                  'of the engine is busy'))
                continue
            room -= 1
            if project_room is not None:
                project_room -= 1
            if engine_room is not None:
                engine_room -= 1
            recovery = target.recovery or {}
            step = (recovery.get('next_step', 0)
                    if recovery.get('stage') == 'escalate' else 0)
            steps.append(Start(target, step, done + 1, target.reason))
    starting = {s.target.id for s in steps if isinstance(s, Start)}
    steps += _replacements(targets, marked, running, starting, now, gather,
                           by_stack)
    return Plan(braked, steps)
