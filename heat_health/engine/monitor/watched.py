"""What the tracker holds of each watched policy and target.

A policy as the tracker needs it (spec, fencing generation, what freezes
or suppresses it) and a target's decided state with each detector's
latest verdict. A target takes a state it did not decide itself in one
way only, ``take_stored``: from its row.
"""

from oslo_utils import timeutils

from heat_health.engine.monitor import states
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec


def naive(value):
    return value and timeutils.normalize_time(value)


def _parse_time(text):
    """A time stored in a recovery record (ISO 8601, naive UTC)."""
    if not text:
        return None
    return naive(timeutils.parse_isotime(text))


class WatchedPolicy(object):
    """A policy as the tracker needs it.

    Its spec, the generation it is owned under (fencing), and what
    suppresses its targets now.
    """

    __slots__ = ('id', 'stack_id', 'project_id', 'spec', 'generation',
                 'suspended', 'busy', 'paused', 'braked', 'created_at')

    def __init__(self, policy, generation, resolution=None):
        self.id = policy.id
        self.stack_id = policy.stack_id
        # Recovery workers are shared out per project.
        self.project_id = getattr(policy, 'project_id', None)
        self.spec = policy_spec.PolicySpec.of(policy)
        self.generation = generation
        self.suspended = bool(getattr(policy, 'suspended', False) or
                              (resolution is not None and
                               resolution.suspended))
        self.busy = resolution.busy if resolution is not None else ()
        # An operator's pause: {by, at, reason} or None.
        self.paused = getattr(policy, 'paused', None)
        # The brake as stored when the policy was read.
        self.braked = getattr(policy, 'braked', None)
        # Its row's creation: one deleted and registered again under the
        # same id starts its generations again.
        self.created_at = getattr(policy, 'created_at', None)

    @property
    def modes(self):
        return self.spec.modes

    def frozen(self):
        if not self.spec.enabled:
            return 'the policy is disabled'
        if self.suspended:
            return 'the stack is suspended'
        return None


class WatchedTarget(object):
    """One place's decided state and the latest verdict of each mode."""

    __slots__ = ('id', 'policy', 'server_id', 'stack_id', 'resource_name',
                 'path', 'state', 'reason', 'since', 'grace_until',
                 'verdicts', 'stored', 'recovery', 'attempts',
                 'first_attempt_at', 'next_attempt_at', 'streak',
                 'verdicts_after', 'changes', 'seen', 'blind')

    def __init__(self, row, policy):
        self.id = row.id
        self.policy = policy
        self.server_id = row.server_id
        self.stack_id = row.stack_id
        self.resource_name = row.resource_name
        self.path = row.path
        self.grace_until = naive(row.grace_until)
        # Counts what memory took of the target's state: a row read before
        # the latest of them is older than memory.
        self.changes = 0
        # {mode: why} of the modes whose checks the engine's rules refuse
        # for this server: they give no verdict, so they have no vote.
        self.blind = {}
        self.take_stored(row)
        # Resume from the database: the last stored verdict still stands.
        self.stored = None
        # When this engine last took a verdict on it (None: none since
        # it was loaded, so nothing stored is confirmed yet).
        self.seen = None
        if row.observation and row.observed_at:
            self.stored = obs.Observation(
                row.server_id, row.observation, row.observation_reason,
                row.observation_source, naive(row.observed_at))
            if (row.observation != obs.UNKNOWN and
                    row.observation_source in policy.modes and
                    (self.verdicts_after is None or
                     self.stored.observed_at >= self.verdicts_after)):
                self.verdicts[row.observation_source] = self.stored

    def take_stored(self, row):
        """Believe the stored state and recovery of the place.

        The one way memory takes a state it did not write itself (a
        restart, a takeover, a user's reset, a write that found the row
        changed): verdicts and the healthy streak start again, and only
        what is seen after a recovery's action judges it.
        """
        self.changes += 1
        self.state = row.state
        self.reason = row.state_reason
        self.since = naive(row.state_since)
        self.recovery = getattr(row, 'recovery', None)
        self.attempts = getattr(row, 'attempts', 0) or 0
        self.first_attempt_at = naive(getattr(row, 'first_attempt_at',
                                              None))
        self.next_attempt_at = naive(getattr(row, 'next_attempt_at', None))
        self.verdicts = {}
        self.streak = 0
        self.verdicts_after = None
        if self.state in states.IN_RECOVERY and self.recovery:
            self.verdicts_after = _parse_time(
                self.recovery.get('started_at'))

    @property
    def place(self):
        return (self.stack_id, self.resource_name)

    def suppression(self):
        policy = self.policy
        busy = None
        if self.place in policy.busy:
            busy = 'a stack action is working on %s' % self.path
        return states.Suppression(policy.frozen(), busy, self.grace_until)

    def differs(self, row):
        """Whether the row holds another state or recovery than memory."""
        return (row.state, getattr(row, 'recovery', None) or None,
                getattr(row, 'attempts', 0) or 0) != (
                    self.state, self.recovery or None, self.attempts)

    def follow(self, row, policy):
        """Take a re-read row of the same server, keeping what is decided.

        The state in memory is the stored one (it changes only after its
        write), so a spec change or a re-read never erases it; verdicts of
        modes the policy no longer has are dropped, and so is everything
        seen while the policy was disabled or its stack suspended: a
        server stopped by a suspend is judged by what is seen after the
        resume. True when the verdicts were dropped: the detectors must
        look again.
        """
        dropped = bool(self.policy.frozen() and not policy.frozen())
        if dropped:
            self.verdicts = {}
        since = naive(row.state_since)
        if (row.state != self.state and since is not None and
                self.since is not None and since > self.since):
            # Written since by someone else (a user's reset of the
            # resource, the replacement of our RECREATE): the newer
            # stored state is the truth.
            self.take_stored(row)
            dropped = True
        self.policy = policy
        self.grace_until = naive(row.grace_until)
        self.path = row.path
        for mode in set(self.verdicts) - set(policy.modes):
            del self.verdicts[mode]
        return dropped
