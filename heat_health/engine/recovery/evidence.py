"""Whether a server still fails, and whether somebody meant it: pure.

A stored decision is a plan, not a licence. Immediately before an effect
on a server (drain, Nova action, fence, mark, stack update, workflow,
webhook) recovery asks Nova how the server is now and reads the verdicts
its detectors gave since the attempt began; this module judges them,
with no I/O and no clock of its own:

* ``judge``: the server is failing when Nova no longer has it, shows it
  in error, stopped or with a guest that does not run, keeps a task on
  it past the stuck deadline, or when a detector that does not read Nova
  (its poll URL, its load balancer) said it failed within the evidence
  bound, since Nova last changed the server; otherwise it is not,
  whatever was decided before;
* ``deliberate``: a server Nova shows stopped, paused, suspended, shelved
  or deleted by an action a user (or an admin) asked for is not failing:
  Nova's instance actions say who asked. A stop Nova made itself after
  the guest shut down (its power sync, with no user) is a failure.
"""

import collections
import datetime

from heat_health.engine.monitor import nova_status
from heat_health.policy import observation as obs

# Modes whose verdicts repeat what Nova shows: Nova's own answer now
# supersedes them.
NOVA_SOURCES = frozenset([obs.LIFECYCLE_EVENTS, obs.NODE_STATUS_POLLING])

# vm_state a user's action leaves a server in -> the instance actions
# (Nova's names) that lead there.
_DELIBERATE = {
    'stopped': frozenset(['stop']),
    'paused': frozenset(['pause']),
    'suspended': frozenset(['suspend']),
    'shelved': frozenset(['shelve']),
    'shelved_offloaded': frozenset(['shelve', 'shelveOffload']),
    'soft-delete': frozenset(['delete']),
    'deleted': frozenset(['delete']),
}
# A user's stop (pause...) that Nova could not carry out leaves a lost
# guest's server ACTIVE: the user still did not want it to run.
_REVERTED_IN = 'active'
_ANY_DELIBERATE = frozenset().union(*_DELIBERATE.values())
# vm_states whose cause Nova's instance actions are asked for.
DELIBERATE_STATES = frozenset(_DELIBERATE) | {_REVERTED_IN}
# Instance actions of recovery's own fencing.
_FENCING = frozenset(['stop', 'delete', 'forceDelete'])
# Seconds Nova's clock and the engine's may differ by.
CLOCK_SKEW_SECONDS = 5
# The instance actions that can stand for a user's intent, when a server
# is gone from Nova's listing.
_GONE_BY = frozenset(['delete'])

Judgement = collections.namedtuple('Judgement', ['failing', 'why'])
"""``failing`` True or False, and ``why`` in a user's words."""

Intent = collections.namedtuple('Intent', ['action', 'user_id',
                                           'request_id', 'at'])
"""A user's own action that explains the server's state."""


def _age(now, then):
    return (now - then).total_seconds()


def _changed_at(found):
    """When Nova last changed the server (naive UTC), or None."""
    try:
        when = datetime.datetime.fromisoformat(found.updated)
    except (TypeError, ValueError):
        return None
    return when.replace(tzinfo=None)


def judge(found, verdicts, now, max_age, stuck=False):
    """Whether the server fails now, by Nova's view and fresh verdicts.

    :param found: the server as Nova shows it now (``ServerStatus``), or
        None when Nova no longer has it.
    :param verdicts: {mode: Observation} taken since the attempt began.
    :param max_age: seconds a verdict of a detector stays evidence.
    :param stuck: Nova's task on the server is past its stuck deadline.
    """
    if found is None:
        return Judgement(True, 'Nova no longer has the server')
    if found.task_state:
        if stuck:
            return Judgement(True, 'Nova task %s for too long' %
                             found.task_state)
        return Judgement(False, 'Nova is carrying out task %s on the '
                         'server' % found.task_state)
    said = nova_status.verdict(found.status, found.power_state)
    if said is not None and said[0] == obs.UNHEALTHY:
        return Judgement(True, said[1])
    # A verdict from before Nova last changed the server (a task ended: a
    # reboot or start, whichever policy or user asked for it) saw the
    # server before that change or while it was under way, not as it is
    # now: its detector is to say it again.
    changed = _changed_at(found)
    if changed is not None:
        changed += datetime.timedelta(seconds=CLOCK_SKEW_SECONDS)
    fresh = [o for mode, o in verdicts.items()
             if mode not in NOVA_SOURCES and o.verdict == obs.UNHEALTHY and
             _age(now, o.observed_at) <= max_age and
             (changed is None or o.observed_at >= changed)]
    if fresh:
        latest = max(fresh, key=lambda o: o.observed_at)
        return Judgement(True, '%s [%s]' % (latest.reason, latest.source))
    return Judgement(False, 'Nova shows the server %s and running, and no '
                     'detector said it failed in the last %ds' % (
                         found.status, max_age))


def deliberate(vm_state, actions, fenced_since=None):
    """The user's action that put the server in ``vm_state``, or None.

    :param vm_state: Nova's vm_state, or None for a server Nova no
        longer has. ACTIVE with a user's stop (pause...) latest: Nova
        could not carry it out (a guest lost from its host), and the
        user still meant it not to run.
    :param actions: its instance actions, newest first (``action``,
        ``user_id``, ``request_id``, ``start_time``).
    :param fenced_since: when recovery began to fence the server (stop
        or delete it), if it did: Heat's trusts impersonate the stack's
        owner, so Nova records recovery's own stop as the owner's; one
        begun since then is recovery's, not a user's intent.
    """
    if vm_state is None:
        wanted = _GONE_BY
    elif vm_state == _REVERTED_IN:
        wanted = _ANY_DELIBERATE
    else:
        wanted = _DELIBERATE.get(vm_state)
    if not wanted or not actions:
        return None
    latest = actions[0]
    if latest.action not in wanted or not latest.user_id:
        # Nova's own power sync stops a guest that shut down with no
        # user: a failure, not an intent.
        return None
    if (fenced_since is not None and latest.action in _FENCING and
            latest.start_time is not None and latest.start_time >=
            fenced_since - datetime.timedelta(seconds=CLOCK_SKEW_SECONDS)):
        return None
    return Intent(latest.action, latest.user_id, latest.request_id,
                  latest.start_time)


def since(when):
    """An instance action's time for a reason: ISO 8601, seconds."""
    if isinstance(when, datetime.datetime):
        return when.replace(microsecond=0).isoformat()
    return str(when)
