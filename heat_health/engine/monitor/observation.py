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
                    'observed_at'])
"""One detector's verdict on one server.

UNKNOWN means the detector could not tell (API error, timeout): it never
counts as a failure, it only leaves the previous verdict of that source
standing.
"""


def to_wire(observation):
    """A JSON-able list (between processes and engines)."""
    return [observation.server_id, observation.verdict, observation.reason,
            observation.source, observation.observed_at.isoformat()]


def from_wire(values):
    server_id, verdict, reason, source, when = values
    return Observation(server_id, verdict, reason, source,
                       datetime.datetime.fromisoformat(when))
