"""The servers' own health URLs, as each policy's poll URL check sees them.

A poll URL check is one policy's own (its URL template, its pattern), so
its verdict is for that policy's target of the server only: the
Observation carries the policy's id. What a check answers follows the
server as Nova has it (an application on a running guest answers, one on
a stopped or broken guest does not; a guest in a task is not judged),
unless the world made that policy's URL of that server stop answering
(``silence``): a URL that never answers, as an attacker's template would
name, while Nova says the server is ACTIVE and running. A policy in
``blind`` has a URL the engine may not fetch (outside its allowed
networks): every check of it is UNKNOWN, never a verdict.
"""

from heat_health.policy import observation as obs
from tests.simulation import nova_double

URL = 'http://{ip}/health'
# How the engine's check says its rules refuse it (older cores spelled it
# out where they refused).
_refused = getattr(obs, 'refused', 'check refused: {}'.format)


class PollUrlDouble(object):

    def __init__(self, clock, nova):
        self._clock = clock
        self._nova = nova
        self.silent = set()     # (policy id, server id) never answered
        # (policy id, server id) the engine's rules never let it fetch.
        self.refused = set()
        self.blind = set()      # policy ids whose URLs are all refused

    def silence(self, policy_id, server_id, silent=True):
        if silent:
            self.silent.add((policy_id, server_id))
        else:
            self.silent.discard((policy_id, server_id))

    def refuse(self, policy_id, server_id):
        """The server's address is outside what the engine may fetch."""
        self.refused.add((policy_id, server_id))

    def check(self, policy_id, server_id):
        """The policy's own check of the server now: an Observation."""
        now = self._clock()
        if (policy_id in self.blind or
                (policy_id, server_id) in self.refused):
            return obs.Observation(
                server_id, obs.UNKNOWN, _refused(
                    'address of %s is not in [heat_health] '
                    'poll_url_allowed_networks' % server_id),
                obs.NODE_STATUS_POLL_URL, now, policy_id)
        if (policy_id, server_id) in self.silent:
            return obs.Observation(
                server_id, obs.UNHEALTHY, 'poll URL of %s: no answer within '
                '5s' % server_id, obs.NODE_STATUS_POLL_URL, now, policy_id)
        server = self._nova.find(server_id)
        if server is None or server.deleted or not server.addresses:
            verdict, reason = obs.UNKNOWN, 'the server has no address'
        elif server.task_state:
            verdict, reason = obs.UNKNOWN, 'connection refused (in %s)' % (
                server.task_state)
        elif (server.vm_state == 'active' and
              server.power_state == nova_double.RUNNING):
            verdict, reason = obs.HEALTHY, 'poll URL answered 200'
        else:
            verdict, reason = obs.UNHEALTHY, 'poll URL: connection failed'
        return obs.Observation(server_id, verdict, reason,
                               obs.NODE_STATUS_POLL_URL, now, policy_id)
