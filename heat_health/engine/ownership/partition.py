"""Which heat-health-engine should own which policy: tooz group and ring.

Engines join one tooz group (``[coordination] backend_url``: Redis, etcd,
ZooKeeper) and place policies on a consistent hash ring of the group's
members, as Aodh partitions alarms: each engine owns about its share, and
when an engine joins or leaves only the policies of its arcs move. The
policy row's lease stays the fencing token; the ring only says who should
hold it (see ``db.api.policy_claim`` for the hand-off).

The monitor loop proves it is alive by calling ``refresh`` at every tick
and between the long steps of one. Heartbeats are sent every second by a
thread of their own, but only while the loop's last call is less than a
lease old: a long step (the takeover of thousands of servers) does not
drop the engine and move its policies again, while an engine whose loop
hangs stops beating, drops out of the group after the backend's
membership timeout, and its policies are taken by the others.

Without a backend there is no ring: one engine owns everything, and further
engines only take policies whose lease has expired.
"""

from concurrent import futures
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination
from tooz import hashring

from heat_health.common import config  # noqa: F401  (registers options)

LOG = logging.getLogger(__name__)

GROUP = b'heat-health-engines'

# Seconds a monitor tick waits for the coordination backend.
REFRESH_TIMEOUT = 2.0

# Points of each engine on the ring. With tooz's default of 32, the
# busiest of three engines is given 39% of the policies on average and up
# to 49%; with 1024, 35% and at most 37% (200 rings of random ids).
RING_PARTITIONS = 2 ** 10

# Seconds between two heartbeats sent for a loop that is alive.
BEAT_SECONDS = 1.0


def ring(members):
    """The hash ring of these engine ids, as every engine builds it."""
    return hashring.HashRing(members, partitions=RING_PARTITIONS)


def ring_owner(a_ring, policy_id):
    """The engine ``a_ring`` gives ``policy_id`` to."""
    return next(iter(a_ring.get_nodes(policy_id.encode())))


class Partition(object):
    """This engine's view of the group; ``owner()`` of any policy.

    :param engine_id: this engine's member id (its Heat engine id).
    :param stall_seconds: how long after the loop's last ``refresh`` its
        heartbeats go on; by default a lease (``[heat_health]
        lease_seconds``): past it the loop holds no lease anyway.
    """

    def __init__(self, engine_id, conf=cfg.CONF, stall_seconds=None):
        self.engine_id = engine_id
        self._stall = (cfg.CONF.heat_health.lease_seconds
                       if stall_seconds is None else stall_seconds)
        self._progress = None   # monotonic time of the last refresh
        self._stopped = threading.Event()
        self._beats = None
        self._url = conf.coordination.backend_url
        self._coordinator = None
        self._ring = None
        self._owners = (None, {})   # (ring, {policy id: its owner})
        self.members = None   # frozenset of engine ids, None: no group
        # Backend calls run here, so that a tick waits for them a bounded
        # time.
        self._executor = futures.ThreadPoolExecutor(
            1, thread_name_prefix='heat-health-coordination')
        self._pending = None
        self._lock = threading.Lock()

    @property
    def enabled(self):
        return bool(self._url)

    def start(self):
        if not self.enabled:
            LOG.info('No [coordination] backend_url: this engine takes any '
                     'policy whose lease has expired')
            return
        # Joined by the first refresh, which waits a bounded time.
        self.refresh()
        self._beats = threading.Thread(target=self._beat, daemon=True,
                                       name='heat-health-heartbeat')
        self._beats.start()

    def _beat(self):
        """Send heartbeats while the loop has called ``refresh`` lately."""
        while not self._stopped.wait(BEAT_SECONDS):
            progress = self._progress
            if progress is None or time.monotonic() - progress > self._stall:
                continue
            try:
                self._submit()
            except RuntimeError:
                return   # stopped meanwhile

    def progress(self):
        """The loop is alive, within a long step: heartbeats go on.

        Costs nothing (no backend call), so that a step may say so often.
        """
        self._progress = time.monotonic()

    def _submit(self):
        """The backend call in progress, or a new one (never two)."""
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._executor.submit(self._refresh)
            return self._pending

    def _connect(self):
        """Join the group; False (and an error logged) if it cannot."""
        try:
            coordinator = coordination.get_coordinator(
                self._url, self.engine_id.encode())
            coordinator.start(start_heart=False)
            try:
                coordinator.create_group(GROUP).get()
            except coordination.GroupAlreadyExist:
                pass
            try:
                coordinator.join_group(GROUP).get()
            except coordination.MemberAlreadyExist:
                pass  # joined before this process, and not yet expired
        except coordination.ToozError as e:
            LOG.error('Cannot join the coordination group at the '
                      '[coordination] backend_url: %s; this engine claims '
                      'no policy it does not hold until it can', e)
            return False
        self._coordinator = coordinator
        LOG.info('Engine %s joined the coordination group', self.engine_id)
        return True

    def refresh(self):
        """Heartbeat and read the group; called by every monitor tick.

        Waits ``REFRESH_TIMEOUT`` at most (a backend that is down makes
        the client retry for a minute): the tick goes on with the last
        view, and the call in progress is not started again until it
        ends. A backend that does not answer keeps the last view: leases
        still fence every write, and the engine cannot renew a lease
        another engine took.
        """
        if not self.enabled:
            return None
        self._progress = time.monotonic()
        pending = self._submit()
        try:
            return pending.result(timeout=REFRESH_TIMEOUT)
        except futures.TimeoutError:
            LOG.warning('The coordination backend did not answer within '
                        '%ss: keeping the last view of the group',
                        REFRESH_TIMEOUT)
            return self.members

    def _refresh(self):
        if self._coordinator is None and not self._connect():
            return self.members
        try:
            self._coordinator.heartbeat()
            found = self._coordinator.get_members(GROUP).get()
            if self.engine_id.encode() not in found:
                # Another member removed this one when its heartbeat
                # lapsed; the Redis driver reads the group without saying
                # so.
                raise coordination.MemberNotJoined(GROUP,
                                                   self.engine_id.encode())
        except coordination.MemberNotJoined:
            LOG.warning('Engine %s was dropped from the coordination group '
                        '(its heartbeat lapsed): joining again',
                        self.engine_id)
            try:
                self._coordinator.join_group(GROUP).get()
                found = self._coordinator.get_members(GROUP).get()
            except coordination.ToozError as e:
                LOG.warning('Could not join the coordination group again, '
                            'keeping the last view of it: %s', e)
                return self.members
        except coordination.ToozError as e:
            LOG.warning('Coordination backend unavailable, keeping the last '
                        'view of the group: %s', e)
            return self.members
        members = frozenset(m.decode() for m in found) | {self.engine_id}
        if members != self.members:
            LOG.info('heat-health-engines in the group: %s',
                     ', '.join(sorted(members)))
            # The ring first: a claim that reads the new members answers
            # from their ring (it reads its rows again when they change).
            self._ring = ring(members)
            self.members = members
        return self.members

    def owner(self, policy_id):
        """The engine the ring gives ``policy_id`` to.

        Before the group was ever read (backend down at start), no engine:
        this one takes nothing new, it only renews what it holds.
        """
        if not self.enabled:
            return self.engine_id
        a_ring = self._ring
        if a_ring is None:
            return None
        # Asked for every policy at every claim: kept per ring.
        owners = self._owners
        if owners[0] is not a_ring:
            owners = self._owners = (a_ring, {})
        found = owners[1].get(policy_id)
        if found is None:
            found = owners[1][policy_id] = ring_owner(a_ring, policy_id)
        return found

    def stop(self):
        self._stopped.set()
        self._executor.shutdown(wait=False)
        if self._coordinator is None:
            return
        try:
            self._coordinator.leave_group(GROUP).get()
        except coordination.ToozError:
            LOG.exception('Could not leave the coordination group: the '
                          'others drop this engine after the membership '
                          'timeout')
        finally:
            try:
                self._coordinator.stop()
            except coordination.ToozError:
                LOG.exception('Could not stop the coordination client')
            self._coordinator = None
