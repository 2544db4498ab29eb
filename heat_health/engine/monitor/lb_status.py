"""LB_STATUS_POLLING: what an Octavia pool's health checks say of members.

One member list per pool per interval serves every policy that reads the
pool, and each of them judges it on its own: a verdict names the policy
whose members (the servers it watches, the pools of its own stack) it
came from, so it reaches only that policy's targets even where another
policy, of this project or another, watches the same server. A member
whose health checks fail (``operating_status`` ERROR) while
its admin state is up makes its server UNHEALTHY; ONLINE makes it HEALTHY.
OFFLINE (disabled, or not in the amphora's report yet), NO_MONITOR,
DRAINING and the members of a disabled pool say nothing of the server.

Every member of a pool in ERROR at once says more about the load balancer
(its network, its amphora) than about the servers: the verdicts are
UNKNOWN and the policy reading the pool is told its observer cannot
see, so they brake instead of recreating a fleet. So do Octavia's errors.
"""

import collections
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.common import lb_members
from heat_health.common import octavia_adapter
from heat_health.engine.ownership import lb_pools
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

SOURCE = obs.LB_STATUS_POLLING

# A pool read blind stays so this long after its last blind reading.
BLIND_SECONDS = 30

Pool = collections.namedtuple('Pool', ['pool_id', 'enabled', 'readers'])
"""A pool to read: its id, whether its admin state is up, and {policy
id: {(address, protocol_port): server id}} of the members each policy
reading it watches."""


def verdicts(pool_id, members, servers, now, policy_id=None):
    """(observations, blind reason or None) for one pool's member list.

    :param servers: {(address, protocol_port): server id} of the members
        judged: those one policy watches.
    :param policy_id: the policy the verdicts belong to.
    """
    found = []
    for member in members:
        server_id = servers.get((member.get('address'),
                                 member.get('protocol_port')))
        if server_id is None or not member.get('admin_state_up', True):
            continue
        found.append((server_id, member))
    errors = [m for _, m in found if m.get('operating_status') == 'ERROR']
    if len(found) >= 2 and len(errors) == len(found):
        reason = ('every member of pool %s is ERROR at once: the load '
                  'balancer cannot reach them' % pool_id)
        return [obs.Observation(server_id, obs.UNKNOWN, reason, SOURCE, now,
                                policy_id)
                for server_id, _ in found], reason
    observations = []
    for server_id, member in found:
        status = member.get('operating_status')
        if status == 'ERROR':
            observations.append(obs.Observation(
                server_id, obs.UNHEALTHY,
                'Octavia member %s of pool %s is ERROR: its health checks '
                'fail' % (member.get('id'), pool_id), SOURCE, now,
                policy_id))
        elif status == 'ONLINE':
            observations.append(obs.Observation(
                server_id, obs.HEALTHY, 'Octavia member %s ONLINE' %
                member.get('id'), SOURCE, now, policy_id))
    return observations, None


class MemberStatusPoller(object):
    """Reads the pools of the policies due and reports on their servers.

    :param list_members: pool id -> the pool's members as Octavia lists
        them; raises octavia_adapter.OctaviaUnavailable.
    :param observe_all: takes a list of Observations.
    """

    def __init__(self, list_members, observe_all, clock=time.monotonic,
                 utcnow=None):
        self._list = list_members
        self._observe_all = observe_all
        self._clock = clock
        self._utcnow = utcnow or timeutils.utcnow
        self._blind = {}  # policy id -> (reason, until, pool id)

    def poll(self, pools):
        """Read each pool once; hand every verdict over at once."""
        observations = []
        for pool in pools:
            now = self._utcnow()
            if not pool.enabled:
                continue
            try:
                members = self._list(pool.pool_id)
            except octavia_adapter.OctaviaUnavailable as ex:
                reason = 'Octavia error: %s' % ex
                LOG.warning('Members of pool %(pool)s not read: %(ex)s',
                            {'pool': pool.pool_id, 'ex': ex})
                for policy_id, servers in sorted(pool.readers.items()):
                    self._see_blind(policy_id, pool.pool_id, reason)
                    observations.extend(
                        obs.Observation(s, obs.UNKNOWN, reason, SOURCE, now,
                                        policy_id)
                        for s in sorted(set(servers.values())))
                continue
            for policy_id, servers in sorted(pool.readers.items()):
                found, reason = verdicts(pool.pool_id, members, servers,
                                         now, policy_id)
                if reason:
                    self._see_blind(policy_id, pool.pool_id, reason)
                else:
                    self._see_clear(policy_id, pool.pool_id)
                observations.extend(found)
        if observations:
            self._observe_all(observations)

    def _see_blind(self, policy_id, pool_id, reason):
        until = self._clock() + BLIND_SECONDS
        self._blind[policy_id] = (reason, until, pool_id)

    def _see_clear(self, policy_id, pool_id):
        """A good reading of the pool that made the policy blind."""
        found = self._blind.get(policy_id)
        if found is not None and found[2] == pool_id:
            del self._blind[policy_id]

    def blind(self, policy_id):
        """Why this policy's load balancer cannot be trusted now, or None."""
        found = self._blind.get(policy_id)
        if found is None:
            return None
        reason, until, _pool = found
        if self._clock() >= until:
            del self._blind[policy_id]
            return None
        return reason

    def forget(self, policy_ids):
        for policy_id in policy_ids:
            self._blind.pop(policy_id, None)


# The option naming the one load balancer a policy reads.
OPTION = 'loadbalancer'


def _members(spec):
    port = spec['protocol_port']
    return {(m.get('address'), port): server_id
            for server_id, m in spec['members'].items()}


def pools(ctxt, policies, watched, enabled=lambda pool_id: True):
    """The Pools to read for ``policies``.

    :param policies: policies with LB_STATUS_POLLING (``id``,
        ``stack_id``, ``parsed``).
    :param watched: policy id -> the server ids it watches.
    :param enabled: pool id -> whether its admin state is up.
    """
    if not policies:
        return []
    by_stack = lb_pools.load_balancers(ctxt, {p.stack_id for p in policies})
    merged = {}  # pool id -> {policy id: servers}
    for policy in policies:
        options = policy.parsed.options(SOURCE) or {}
        named = options.get(OPTION)
        mine = set(watched.get(policy.id, ()))
        for name, data in sorted(by_stack.get(policy.stack_id, {}).items()):
            spec = lb_members.read_data(data)
            if spec is None or (named and name != named):
                continue
            servers = merged.setdefault(spec['pool_id'], {}).setdefault(
                policy.id, {})
            servers.update({key: server_id for key, server_id
                            in _members(spec).items() if server_id in mine})
    return [Pool(pool_id, enabled(pool_id), readers)
            for pool_id, readers in sorted(merged.items())]
