"""Drain a server's load balancer members before it is acted on.

A reboot, rebuild or replacement cuts the connections a server holds. Its
members are set to weight 0 first (Octavia sends no new connections to it,
existing ones go on), and given their weight back once the server was
verified healthy. A replaced server's member is not restored: the pool
follows the group, and the new server's member comes with it.

The members and their weights are read first (``members``) and stored by
the recovery loop before any weight changes (``drain``), so a restart or a
takeover never loses the weight to give back. Best effort within
``lb_status_timeout``: a load balancer that stays busy or cannot be read
delays a recovery by that much at most, never stops it.
"""

import time

from heat.common import context as heat_context
from oslo_log import log as logging

from heat_health.common import lb_members
from heat_health.engine import lb_pools

LOG = logging.getLogger(__name__)

POLL_SECONDS = 0.5
DEFAULT_TIMEOUT = 60


class Drainer(object):
    """Drains and restores members, as the stack's owner.

    :param octavia_client: stack id -> an OctaviaAPI (the stack's trust).
    :param specs: stack id -> the decoded data of its load balancers; read
        from Heat's database by default.
    """

    def __init__(self, octavia_client, clock=time.monotonic,
                 sleep=time.sleep, specs=None):
        self._octavia_client = octavia_client
        self._clock = clock
        self._sleep = sleep
        self._specs = specs or self._stored_specs

    @staticmethod
    def _stored_specs(stack_id):
        """The decoded data of the stack's load balancers."""
        ctxt = heat_context.get_admin_context()
        found = lb_pools.load_balancers(ctxt, [stack_id]).get(stack_id, {})
        specs = [lb_members.read_data(data) for _n, data in
                 sorted(found.items())]
        return [s for s in specs if s]

    def _set_weight(self, pool, spec, address, weight):
        """Send the pool back with one member's weight changed.

        Returns the weight it had, or None if the pool does not hold it.
        """
        deadline = self._clock() + int(spec.get('lb_status_timeout') or
                                       DEFAULT_TIMEOUT)
        lb_id = spec['loadbalancer_id']
        while True:
            try:
                if pool.ready(lb_id):
                    current = pool.list()
                    port = spec['protocol_port']
                    old = [m for m in current if
                           (m['address'], m['protocol_port']) ==
                           (address, port)]
                    if not old:
                        return None
                    servers = {s: m['address']
                               for s, m in spec['members'].items()}
                    members = lb_members.plan(
                        current, spec['members'], servers, port,
                        spec.get('subnet_id'), weights={address: weight})
                    if members:
                        pool.replace(members)
                        self._wait(pool, lb_id, deadline)
                    return old[0].get('weight', 1)
            except lb_members.Busy:
                pass
            if self._clock() >= deadline:
                raise lb_members.Busy('load balancer %s still busy after '
                                      '%ss' % (lb_id,
                                               spec.get('lb_status_timeout')))
            self._sleep(POLL_SECONDS)

    def _wait(self, pool, lb_id, deadline):
        while not pool.ready(lb_id):
            if self._clock() >= deadline:
                raise lb_members.Busy('load balancer %s did not take the '
                                      'change in time' % lb_id)
            self._sleep(POLL_SECONDS)

    def members(self, stack_id, server_id):
        """The server's members now: {pool id: [address, weight]}.

        Read before a drain, so that what is to be given back is stored
        before any weight is changed. Members at weight 0 (drained by hand)
        are left out: they are not ours to give back.
        """
        found = {}
        specs = [s for s in self._specs(stack_id)
                 if server_id in s['members']]
        if not specs:
            return found
        client = self._octavia_client(stack_id)
        for spec in specs:
            address = spec['members'][server_id]['address']
            pool = lb_members.PoolMembers(client, spec['pool_id'])
            for member in pool.list():
                weight = member.get('weight', 1)
                if weight and (member['address'], member['protocol_port']) == (
                        address, spec['protocol_port']):
                    found[spec['pool_id']] = [address, weight]
        return found

    def drain(self, stack_id, drained):
        """Weight 0 for the members of ``drained`` (as ``members`` gave).

        Idempotent: a drain carried on after a restart sends the same.
        """
        return self._set_weights(stack_id, {
            pool_id: [address, 0]
            for pool_id, (address, _w) in (drained or {}).items()})

    def restore(self, stack_id, drained):
        """Give drained members their weight back (those still there).

        Returns {pool id: [address, weight]} of the members restored: a
        replaced server's member left the pool with it.
        """
        return self._set_weights(stack_id, drained)

    def _set_weights(self, stack_id, weights):
        done = {}
        if not weights:
            return done
        client = self._octavia_client(stack_id)
        specs = {s['pool_id']: s for s in self._specs(stack_id)}
        for pool_id, (address, weight) in sorted(weights.items()):
            spec = specs.get(pool_id)
            if spec is None:
                continue
            pool = lb_members.PoolMembers(client, pool_id)
            if self._set_weight(pool, spec, address, weight) is not None:
                done[pool_id] = [address, weight]
        return done
