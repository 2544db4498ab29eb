"""What a detector reports about one server at one moment."""

import collections
import datetime

VERDICTS = (HEALTHY, UNHEALTHY, UNKNOWN) = ('HEALTHY', 'UNHEALTHY',
                                            'UNKNOWN')

# Detection modes of OS::Heat::HealthPolicy, also the observation sources.
MODES = (NODE_STATUS_POLLING, NODE_STATUS_POLL_URL, LIFECYCLE_EVENTS,
         LB_STATUS_POLLING) = ('NODE_STATUS_POLLING', 'NODE_STATUS_POLL_URL',
                               'LIFECYCLE_EVENTS', 'LB_STATUS_POLLING')

Observation = collections.namedtuple(
    'Observation', ['server_id', 'verdict', 'reason', 'source',
                    'observed_at', 'policy_id'], defaults=(None,))
"""One detector's verdict on one server.

UNKNOWN means the detector could not tell (API error, timeout): it never
counts as a failure, it only leaves the previous verdict of that source
standing.

``policy_id`` None: a fact about the server shared by every policy that
watches it (what Nova says).  Set: the verdict of that one policy's own
check (its poll URL and pattern, its pools), which no other policy's
target may take.
"""


# What an UNKNOWN says when the engine's rules refuse the check itself: the
# mode cannot see that server at all (blind), not for a moment.
REFUSED = 'check refused'


def refused(reason):
    """An UNKNOWN's reason for a check the engine's rules refuse."""
    return '%s: %s' % (REFUSED, reason)


def is_blind(observation):
    """Whether the observation says its mode cannot see the server."""
    return (observation.verdict == UNKNOWN and
            (observation.reason or '').startswith(REFUSED + ':'))


def to_wire(observation):
    """A JSON-able list (between processes and engines)."""
    return [observation.server_id, observation.verdict, observation.reason,
            observation.source, observation.observed_at.isoformat(),
            observation.policy_id]


def from_wire(values):
    server_id, verdict, reason, source, when = values[:5]
    policy_id = values[5] if len(values) > 5 else None
    return Observation(server_id, verdict, reason, source,
                       datetime.datetime.fromisoformat(when), policy_id)
