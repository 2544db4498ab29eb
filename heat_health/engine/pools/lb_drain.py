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

A worker waits for a busy load balancer at most ``PASS_SECONDS`` per
recovery pass (``NotYet``): the drain is carried on at the next pass,
counted from its start as stored in the recovery, so that busy load
balancers of one project never hold the engine's workers.

Weight changes of one pool asked for together (servers that failed
together) go in one batch update: while one batch is being sent, those
that come meanwhile wait and go together in the next, instead of one
update, and one wait for the load balancer, each. Recoveries started
together drain as a ``Cohort``: each drain joins it,
and the last on its way sends them all in one batch; the others find
theirs sent when they carry on. Without it, drains that arrive a few
tenths of a second apart go in two batches, the second after Octavia
applied the first. A drain waits until the load balancer took it before
its action goes on (``settle``): Octavia's worker stores the weights of a
batch only once it applied them, so a replacement that did not wait could
be created, and the old server stopped, while new connections still went
to it.
"""

import threading
import time

from heat.common import context as heat_context
from oslo_log import log as logging

from heat_health.common import lb_members
from heat_health.engine.ownership import lb_pools

LOG = logging.getLogger(__name__)

POLL_SECONDS = 0.2
DEFAULT_TIMEOUT = 60
# Most seconds one call waits for a busy load balancer.
PASS_SECONDS = 3.0
# Seconds a weight another caller's batch sent stands for this one's.
SENT_SECONDS = 10.0
# Seconds the drains of a cohort wait for those still on their way.
COHORT_SECONDS = 1.0


class NotYet(lb_members.Busy):
    """Still busy after this pass's wait: carried on at the next pass."""


class Gathering(NotYet):
    """Left for the cohort's last drain to send.

    Carried on at the next pass, which finds it sent.
    """


class Cohort(object):
    """The drains of recoveries started together, sent as one batch.

    Recoveries that start while it is open (none of its drains sent yet,
    its deadline not passed) join it: servers that failed together may be
    decided a pass apart.

    :param keys: the recoveries (target ids) that may drain.
    :param deadline: when those still on their way are no longer waited
        for (the loop's clock).
    """

    def __init__(self, keys, deadline):
        self._lock = threading.Lock()
        self._coming = set(keys)
        self._weights = []      # [{pool id: [address, 0]}]
        self._deadline = deadline
        self.done = False
        self._reading = threading.Lock()
        self._listings = {}     # pool id -> its members as first read

    def listing(self, pool_id, read, now):
        """The pool's members, read once for the whole cohort.

        Servers that failed together are in the same pools: the first
        recovery to ask reads each pool, the others share what it read,
        one Octavia read where there were one per server. Shared only
        while none of the cohort's drains was sent (and until its
        deadline), so every weight read is one from before the drains;
        after that, each reads its own.

        :param read: reads the pool's members now.
        """
        with self._reading:
            with self._lock:
                if self.done or now >= self._deadline:
                    return read()
            found = self._listings.get(pool_id)
            if found is None:
                found = self._listings[pool_id] = read()
            return found

    def expect(self, keys, now):
        """More recoveries started: True if they joined (it is open)."""
        with self._lock:
            if self.done or now >= self._deadline:
                return False
            self._coming.update(keys)
            return True

    def join(self, key, drained, now):
        """Own drain in: every drain to send now, or None to leave it.

        None while others are still on their way (until the deadline):
        the last of them sends this one too. Once the cohort was sent,
        or all the others left, each drain is its own again ([own]).
        """
        with self._lock:
            if self.done:
                return [drained]
            self._coming.discard(key)
            self._weights.append(drained)
            if self._coming and now < self._deadline:
                return None
            self.done = True
            return list(self._weights)

    def leave(self, key):
        """The recovery ends without a drain to join.

        True when drains that joined are left unsent (their own next
        pass sends them).
        """
        with self._lock:
            if self.done or key not in self._coming:
                return False
            self._coming.discard(key)
            if self._coming or not self._weights:
                return False
            self.done = True
            return True


class _Line(object):
    """The weight changes of one pool waiting for the next batch."""

    def __init__(self):
        self.guard = threading.Lock()    # pending and sent
        self.sending = threading.Lock()  # one batch of the pool at a time
        self.pending = {}   # address -> weight, not sent yet
        self.sent = {}      # address -> (weight, weight it had or None)


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
        self._lines = {}    # pool id -> _Line
        self._lines_guard = threading.Lock()

    @staticmethod
    def _stored_specs(stack_id):
        """The decoded data of the stack's load balancers."""
        ctxt = heat_context.get_admin_context()
        found = lb_pools.load_balancers(ctxt, [stack_id]).get(stack_id, {})
        specs = [lb_members.read_data(data) for _n, data in
                 sorted(found.items())]
        return [s for s in specs if s]

    def _line(self, pool_id):
        with self._lines_guard:
            return self._lines.setdefault(pool_id, _Line())

    def _set_weight(self, pool, spec, weights, waited, settle=True):
        """Have members' weights changed, in the pool's next batch.

        :param weights: {address: weight}.
        Returns {address: weight it had} of those the pool holds. A
        change another caller's batch sent (meanwhile, or within
        SENT_SECONDS) is not sent again. Raises as ``_send`` does; the
        changes of a call that raised are withdrawn.
        """
        line = self._line(pool.pool_id)
        olds = {}
        now = self._clock()
        left = set()
        with line.guard:
            for address, weight in weights.items():
                found = line.sent.pop(address, None)
                if found is not None and found[0] == weight and (
                        found[2] > now - SENT_SECONDS):
                    if found[1] is not None:
                        olds[address] = found[1]
                    continue
                line.pending[address] = weight
                left.add(address)
        if not left:
            return olds
        with line.sending:
            with line.guard:
                for address in sorted(left):
                    if address in line.pending:
                        continue
                    found = line.sent.pop(address, None)
                    if found is not None and found[0] == weights[address]:
                        left.discard(address)
                        if found[1] is not None:
                            olds[address] = found[1]
                    else:
                        line.pending[address] = weights[address]
            if left:
                try:
                    sent = self._send(pool, spec, line, waited, settle)
                except Exception:
                    # Not carried by another caller's batch later: each
                    # change is asked again by its caller, whose next
                    # pass checks first that it is still wanted.
                    with line.guard:
                        for address in left:
                            if line.pending.get(address) == weights[address]:
                                del line.pending[address]
                    raise
                olds.update((a, w) for a, w in sent.items() if a in left)
        return olds

    def _send(self, pool, spec, line, waited, settle):
        """Send every pending weight of the pool in one batch update.

        Returns {address: weight it had} of the members the pool holds.
        Raises NotYet when the load balancer is busy after this pass's
        wait, Busy once ``lb_status_timeout`` has passed since the first
        try (``waited`` seconds before this one; None: never).
        """
        timeout = int(spec.get('lb_status_timeout') or DEFAULT_TIMEOUT)
        now = self._clock()
        deadline = now + PASS_SECONDS
        last = None if waited is None else now + max(timeout - waited, 0)
        if last is not None:
            deadline = min(deadline, last)
        lb_id = spec['loadbalancer_id']
        while True:
            batch = None
            try:
                if pool.ready(lb_id):
                    # Taken once the load balancer is free: what came
                    # while it was busy goes too.
                    with line.guard:
                        batch, line.pending = line.pending, {}
                    olds = self._put(pool, spec, batch)
                    if olds and settle:
                        self._wait(pool, lb_id, deadline, last)
                    sent_at = self._clock()
                    with line.guard:
                        line.sent.update(
                            (a, (w, olds.get(a), sent_at))
                            for a, w in batch.items())
                    return olds
            except Exception as ex:
                # The batch's changes wait for the next one.
                with line.guard:
                    for address, weight in (batch or {}).items():
                        line.pending.setdefault(address, weight)
                if isinstance(ex, NotYet) or not isinstance(
                        ex, lb_members.Busy):
                    raise
            if self._clock() >= deadline:
                self._not_yet(lb_id, last, 'still busy')
            self._sleep(POLL_SECONDS)

    @staticmethod
    def _put(pool, spec, weights):
        """One batch with ``weights`` changed: {address: old weight}."""
        current = pool.list()
        port = spec['protocol_port']
        olds = {m['address']: m.get('weight', 1) for m in current
                if m['protocol_port'] == port and m['address'] in weights}
        if not olds:
            return olds
        members = lb_members.reweighted(
            current, port, {a: w for a, w in weights.items() if a in olds})
        if members:
            pool.replace(members)
        return olds

    def _not_yet(self, lb_id, last, what):
        if last is not None and self._clock() >= last:
            raise lb_members.Busy('load balancer %s %s after its '
                                  'lb_status_timeout' % (lb_id, what))
        raise NotYet('load balancer %s %s: carried on at the next pass' %
                     (lb_id, what))

    def _wait(self, pool, lb_id, deadline, last):
        while not pool.ready(lb_id):
            if self._clock() >= deadline:
                self._not_yet(lb_id, last, 'did not take the change yet')
            self._sleep(POLL_SECONDS)

    def members(self, stack_id, server_id, cohort=None):
        """The server's members now: {pool id: [address, weight]}.

        Read before a drain, so that what is to be given back is stored
        before any weight is changed. Members at weight 0 (drained by hand)
        are left out: they are not ours to give back.

        :param cohort: (Cohort, now) of a recovery started with others:
            each pool is read once for all of them (``Cohort.listing``).
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
            listed = (pool.list() if cohort is None else
                      cohort[0].listing(spec['pool_id'], pool.list,
                                        cohort[1]))
            for member in listed:
                weight = member.get('weight', 1)
                if weight and (member['address'], member['protocol_port']) == (
                        address, spec['protocol_port']):
                    found[spec['pool_id']] = [address, weight]
        return found

    def drain(self, stack_id, drained, waited=0, settle=True, cohort=None):
        """Weight 0 for the members of ``drained`` (as ``members`` gave).

        :param waited: seconds since the drain's first try (stored).
        :param settle: wait until the load balancer took it; False once
            Octavia accepted it (the server is replaced anyway).
        :param cohort: (Cohort, key, now) of a recovery started with
            others of the same policy (so the same stack): Gathering
            while the last of them is to send it too.
        Idempotent: a drain carried on at the next pass, or after a
        restart, sends the same.
        """
        weights = {pool_id: [address, 0]
                   for pool_id, (address, _w) in (drained or {}).items()}
        if cohort is None or not weights:
            found = [weights]
        else:
            together, key, now = cohort
            found = together.join(key, weights, now)
            if found is None:
                raise Gathering('sent with the drains of the servers that '
                                'failed with it')
        return self._own(self._set_weights(stack_id, found, waited, settle),
                         weights)

    def restore(self, stack_id, drained, server_id=None):
        """Give drained members their weight back (those still there).

        :param server_id: the target's server now. A member is given its
            weight back only while it is that server's: the server's own,
            or its replacement's where the replacement took the same
            address (its port). A replaced server's member left, or
            leaves, the pool with it and gets nothing; one the pool
            follower has not yet swapped raises NotYet.
        Returns {pool id: [address, weight]} of the members restored. A
        busy load balancer raises NotYet: tried again at the next pass,
        as long as it takes.
        """
        if server_id is not None:
            drained = self._of_server(stack_id, drained or {}, server_id)
        return self._own(self._set_weights(stack_id, [drained], None),
                         drained)

    def restore_together(self, stack_id, drains):
        """``restore`` of several servers' members, one batch a pool.

        For a caller that gets one try (a policy deleted): one at a
        time, the first update keeps the load balancer busy and the
        next ones would find it so. Nothing waits for the load balancer
        to take the weights: nothing waits on them.

        :param drains: {key: (drained, server_id)}.
        Returns {key: error} of those not restored: a member the pool
        follower has not swapped yet holds back its own key only; a load
        balancer still busy, all.
        """
        mine, failed = {}, {}
        for key, (drained, server_id) in drains.items():
            try:
                mine[key] = self._of_server(stack_id, drained or {},
                                            server_id)
            except Exception as ex:
                failed[key] = ex
        try:
            self._set_weights(stack_id, list(mine.values()), None,
                              settle=False, gone_ok=True)
        except Exception as ex:
            failed.update(dict.fromkeys(mine, ex))
        return failed

    def _of_server(self, stack_id, drained, server_id):
        specs = {s['pool_id']: s for s in self._specs(stack_id)}
        mine = {}
        for pool_id, (address, weight) in sorted(drained.items()):
            spec = specs.get(pool_id)
            if spec is None:
                continue
            member = spec['members'].get(server_id)
            if member is None:
                if any(m.get('address') == address
                       for m in spec['members'].values()):
                    raise NotYet('pool %s does not hold server %s yet: '
                                 'its follower has not swapped the member '
                                 'at %s' % (pool_id, server_id, address))
                continue
            if member.get('address') == address:
                mine[pool_id] = [address, weight]
        return mine

    def _set_weights(self, stack_id, weights, waited, settle=True,
                     gone_ok=False):
        """Send ``weights`` ([{pool id: [address, weight]}]), one batch a pool.

        Returns {(pool id, address): weight} of the members pools hold.
        With ``gone_ok``, a pool Octavia no longer has (404) is skipped:
        its members went with it, nothing is left to give back.
        """
        done = {}
        by_pool = {}
        for found in weights:
            for pool_id, (address, weight) in (found or {}).items():
                by_pool.setdefault(pool_id, {})[address] = weight
        if not by_pool:
            return done
        client = self._octavia_client(stack_id)
        specs = {s['pool_id']: s for s in self._specs(stack_id)}
        for pool_id, changes in sorted(by_pool.items()):
            spec = specs.get(pool_id)
            if spec is None:
                continue
            pool = lb_members.PoolMembers(client, pool_id)
            try:
                olds = self._set_weight(pool, spec, changes, waited, settle)
            except Exception as ex:
                if not (gone_ok and getattr(ex, 'code', None) == 404):
                    raise
                LOG.info('Pool %s is gone: its members with it', pool_id)
                continue
            done.update(((pool_id, address), changes[address])
                        for address in olds)
        return done

    @staticmethod
    def _own(done, weights):
        """{pool id: [address, weight]} of ``weights`` found in ``done``."""
        return {pool_id: [address, weight]
                for pool_id, (address, weight) in (weights or {}).items()
                if (pool_id, address) in done}
