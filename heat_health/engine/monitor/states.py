"""Per-target health states and the rule that moves a target between them.

``transition`` is a pure function of (old state, the latest verdict of each
detection mode, time, the policy, what suppresses the target): no I/O, no
clock of its own, so every rule is unit-tested on its own. The tracker only
applies what it returns, and only after the change was stored.

Recovery moves a target into RECOVERING (an action stored before it is
issued) and VERIFYING (issued; the detectors must agree it worked): while
RECOVERING, verdicts change nothing, the recovery loop drives; VERIFYING
and GAVE_UP end only when the server is seen healthy.
"""

import collections

from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec

STATES = (NO_DATA, HEALTHY, SUSPECT, UNHEALTHY, RECOVERING, VERIFYING,
          GAVE_UP, SUPPRESSED) = (
    'NO_DATA', 'HEALTHY', 'SUSPECT', 'UNHEALTHY', 'RECOVERING', 'VERIFYING',
    'GAVE_UP', 'SUPPRESSED')
# NO_DATA: watched, but no detector has given a verdict yet. Never shown as
# HEALTHY: a server nobody has looked at is not known to be well.
# SUPPRESSED: its user stopped (paused, suspended, shelved, deleted) it
# through Nova on purpose: not a failure, until it runs again.

# States left only for HEALTHY: a failure changes nothing there.
ENDED_ONLY_BY_HEALTH = frozenset([VERIFYING, GAVE_UP, SUPPRESSED])

FAILING = frozenset([SUSPECT, UNHEALTHY])
# States of a recovery: the planner's, never left for a failure.
IN_RECOVERY = frozenset([RECOVERING, VERIFYING])
# Not well, for the brake: what share of a policy's targets is down.
DOWN = frozenset([UNHEALTHY, RECOVERING, VERIFYING, GAVE_UP])

CONDITIONALS = (ANY_FAILED, ALL_FAILED) = (
    policy_spec.ANY_FAILED, policy_spec.ALL_FAILED)

Decision = collections.namedtuple('Decision', ['state', 'reason', 'source'])

Transition = collections.namedtuple('Transition', ['decision', 'held'])
"""What to do with a target: ``decision`` is the new state (None: no
change); ``held`` says a change was wanted but is suppressed for now, so
the target must be looked at again when the suppression ends."""

NOTHING = Transition(None, False)


def decide(verdicts, modes, conditional, blind=frozenset()):
    """The state the verdicts call for, or None without any verdict.

    :param verdicts: {mode: Observation}, the latest known (not UNKNOWN)
        observation of each mode that has one.
    :param modes: the policy's detection modes.
    :param conditional: ANY_FAILED or ALL_FAILED.
    :param blind: modes that cannot see the target (their checks are
        refused by the engine's rules): ALL_FAILED asks only the others.
    :returns: a Decision; SUSPECT when some mode sees a failure that does
        not (yet) satisfy the conditional; HEALTHY when verdicts exist and
        none is a failure.
    """
    modes = [m for m in modes if m not in blind] or list(modes)
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
    return None


Suppression = collections.namedtuple('Suppression', [
    'frozen',      # reason no state may change at all (disabled, suspended)
    'busy',        # reason no failure may be decided (a stack action
                   # touches this target)
    'grace_until',  # no failure is decided before this time
])

NOT_SUPPRESSED = Suppression(None, None, None)


def transition(old, verdicts, now, spec, suppression=NOT_SUPPRESSED,
               streak=0, blind=frozenset()):
    """The Transition of a target in state ``old``.

    :param verdicts: {mode: Observation} as for ``decide``.
    :param now: the current time (naive UTC), compared with the grace.
    :param spec: the policy's PolicySpec (modes, conditional).
    :param suppression: a Suppression of this target: frozen holds every
        change (a disabled policy, a suspended stack keep what is stored);
        busy and the grace hold failures only, so a server that answers
        is HEALTHY at once, while a server that is still booting or being
        updated is not taken for a failure.
    :param streak: healthy verdicts in a row since the last recovery
        action (VERIFYING ends at the policy's success threshold).
    :param blind: modes that cannot see the target: they have no vote,
        neither holding verification nor deciding a failure alone.
    """
    if old == RECOVERING:
        return NOTHING
    decision = decide(verdicts, spec.modes, spec.conditional, blind)
    if decision is None or decision.state == old:
        return NOTHING
    if old in ENDED_ONLY_BY_HEALTH:
        if decision.state != HEALTHY:
            return NOTHING
        if old == VERIFYING and (
                streak < spec.recovery.success_threshold or
                any(m not in verdicts for m in spec.modes
                    if m in policy_spec.POLLED and m not in blind)):
            # Every polling detector that can see must agree, having
            # looked since the action: a reboot's notification says
            # nothing of the application a poll URL checks.
            return NOTHING
        if old == VERIFYING:
            decision = Decision(HEALTHY, 'recovered: %s' % decision.reason,
                                decision.source)
    if suppression.frozen:
        return Transition(None, True)
    if decision.state in FAILING and (
            suppression.busy or (suppression.grace_until is not None and
                                 now < suppression.grace_until)):
        return Transition(None, True)
    return Transition(decision, False)
