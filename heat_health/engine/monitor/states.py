"""Per-target health state machine: from observations to a decision.

Each detection mode of a policy keeps its own latest verdict for a target;
``decide`` combines them as the policy's ``recovery_conditional`` says.
Recovery states (recovering, verifying, gave up) come with recovery.
"""

import collections

from heat_health.engine.monitor import observation as obs

STATES = (INIT, HEALTHY, SUSPECT, UNHEALTHY) = (
    'INIT', 'HEALTHY', 'SUSPECT', 'UNHEALTHY')
# INIT: registered, within the grace after its create or update; no verdict.

CONDITIONALS = (ANY_FAILED, ALL_FAILED) = ('ANY_FAILED', 'ALL_FAILED')

Decision = collections.namedtuple('Decision', ['state', 'reason', 'source'])


def decide(verdicts, modes, conditional):
    """The state a target is in, given the latest verdict of each mode.

    :param verdicts: {mode: Observation}, the latest known (not UNKNOWN)
        observation of each mode that has one.
    :param modes: the policy's detection modes.
    :param conditional: ANY_FAILED or ALL_FAILED.
    :returns: a Decision; SUSPECT when some mode sees a failure that does
        not (yet) satisfy the conditional; HEALTHY when no mode sees one
        (an event-driven mode is silent while all is well).
    """
    failed = [verdicts[m] for m in modes
              if m in verdicts and verdicts[m].verdict == obs.UNHEALTHY]
    healthy = [verdicts[m] for m in modes
               if m in verdicts and verdicts[m].verdict == obs.HEALTHY]
    if failed:
        latest = max(failed, key=lambda o: o.observed_at)
        if conditional == ANY_FAILED or len(failed) == len(modes):
            return Decision(UNHEALTHY, latest.reason, latest.source)
        return Decision(SUSPECT, latest.reason, latest.source)
    if healthy:
        latest = max(healthy, key=lambda o: o.observed_at)
        return Decision(HEALTHY, latest.reason, latest.source)
    return Decision(HEALTHY, 'no failure observed', None)
