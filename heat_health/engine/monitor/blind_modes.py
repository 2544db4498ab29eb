"""Each owned policy's blind modes, stored when they change.

A detection mode whose checks the engine's rules refuse for a server
gives it no verdict: it has no vote (see ``states.transition``), and the
policy's report says so, with the targets and the rule, so that nobody
takes the silence for health.
"""

from oslo_log import log as logging

from heat_health.db import api as db_api

LOG = logging.getLogger(__name__)


class BlindModes(object):
    """Stores ``Tracker.blind_of`` of each owned policy when it changes."""

    def __init__(self, engine_id):
        self.engine_id = engine_id
        self._stored = {}   # policy id -> (generation, blind modes)

    def store(self, tracker):
        for policy in tracker.policies():
            blind = tracker.blind_of(policy.id)
            if self._stored.get(policy.id) == (policy.generation, blind):
                continue
            try:
                db_api.policy_set_blind(self.engine_id, policy.id,
                                        policy.generation, blind)
            except Exception:
                LOG.exception('Could not store the blind modes of policy '
                              '%s', policy.id)
                continue
            if blind:
                LOG.warning('Policy %(p)s: detection modes that cannot see '
                            'some targets: %(b)s',
                            {'p': policy.id, 'b': blind})
            self._stored[policy.id] = (policy.generation, blind)
