"""The engines' group and hash ring on a real Redis (tooz's redis driver).

Redis must answer on 127.0.0.1:6379 (``tools/localcloud up`` runs it):
without it these tests fail and say so, they do not skip. Each test uses
a group of its own, so the engines of a running deployment (in the real
group) neither see these test engines nor are seen by them.
"""

import socket
import time
import types
import uuid

import fixtures
from oslotest import base as test_base
import redis
from tooz import coordination

from heat_health.engine.ownership import partition

HOST, PORT = '127.0.0.1', 6379
# Short, so a test can wait for a member's heartbeat to lapse.
MEMBERSHIP_TIMEOUT = 2
URL = 'redis://%s:%d?membership_timeout=%d' % (HOST, PORT,
                                               MEMBERSHIP_TIMEOUT)
# Seconds a test's loop may go without a refresh before its heartbeats stop.
STALL = 1.0
POLICIES = [str(uuid.UUID(int=n)) for n in range(100)]


def _conf(url):
    return types.SimpleNamespace(
        coordination=types.SimpleNamespace(backend_url=url))


class TestPartition(test_base.BaseTestCase):

    def setUp(self):
        super(TestPartition, self).setUp()
        try:
            answered = redis.Redis(HOST, PORT, socket_timeout=5).ping()
        except (redis.RedisError, socket.error) as e:
            self.fail('Redis does not answer at %s:%d (%s): these tests '
                      'need the real Redis of the local deployment'
                      % (HOST, PORT, e))
        self.assertTrue(answered)
        self.group = ('heat-health-test-%s' % uuid.uuid4()).encode()
        self.useFixture(fixtures.MockPatchObject(partition, 'GROUP',
                                                 self.group))
        self.addCleanup(self._delete_group)

    def _delete_group(self):
        coordinator = coordination.get_coordinator(
            URL, ('cleanup-%s' % uuid.uuid4()).encode())
        coordinator.start(start_heart=False)
        try:
            for member in coordinator.get_members(self.group).get():
                coordinator._client.delete(
                    coordinator._encode_beat_id(member))
            coordinator._destroy_group(self.group)
            coordinator._client.srem(coordinator._groups,
                                     coordinator._encode_group_id(
                                         self.group))
        except coordination.GroupNotCreated:
            pass
        finally:
            coordinator.stop()

    def _engine(self, url=URL, stall_seconds=None):
        engine = partition.Partition('engine-%s' % uuid.uuid4(), _conf(url),
                                     stall_seconds=stall_seconds)
        engine.start()
        self.addCleanup(engine.stop)
        return engine

    def _shares(self, *engines):
        owners = [{p: e.owner(p) for p in POLICIES} for e in engines]
        for other in owners[1:]:
            self.assertEqual(owners[0], other)
        shares = {e.engine_id: 0 for e in engines}
        for owner in owners[0].values():
            shares[owner] += 1
        return shares

    def test_two_engines_agree_and_share(self):
        one = self._engine()
        two = self._engine()
        for engine in (one, two):
            self.assertEqual({one.engine_id, two.engine_id},
                             engine.refresh())
        shares = self._shares(one, two)
        self.assertEqual(100, sum(shares.values()))
        self.assertTrue(all(shares.values()), shares)

    def test_engine_that_leaves_hands_everything_over(self):
        one = self._engine()
        two = self._engine()
        one.refresh()
        two.refresh()
        two.stop()
        self.assertEqual({one.engine_id}, one.refresh())
        self.assertEqual({one.engine_id: 100}, self._shares(one))

    def test_engine_whose_loop_hangs_is_dropped_then_rejoins(self):
        one = self._engine()
        two = self._engine(stall_seconds=STALL)
        one.refresh()
        two.refresh()
        # two's loop hangs: its heartbeats stop once it has not called
        # for STALL seconds, and it is dropped a membership timeout later.
        time.sleep(STALL + partition.BEAT_SECONDS + MEMBERSHIP_TIMEOUT + 0.5)
        self.assertEqual({one.engine_id}, one.refresh())
        self.assertEqual({one.engine_id: 100}, self._shares(one))
        # two's loop runs again: it is in the group again, and both see
        # the same ring.
        self.assertEqual({one.engine_id, two.engine_id}, two.refresh())
        self.assertEqual({one.engine_id, two.engine_id}, one.refresh())
        shares = self._shares(one, two)
        self.assertTrue(all(shares.values()), shares)

    def test_a_long_step_of_a_live_loop_keeps_the_engine(self):
        one = self._engine()
        two = self._engine(stall_seconds=MEMBERSHIP_TIMEOUT * 3)
        one.refresh()
        two.refresh()
        # two's loop is in one step (a takeover) for longer than the
        # membership timeout, but less than its stall bound: its
        # policies do not move.
        time.sleep(MEMBERSHIP_TIMEOUT * 2)
        self.assertEqual({one.engine_id, two.engine_id}, one.refresh())

    def test_without_a_backend_the_engine_owns_everything(self):
        alone = self._engine(url=None)
        self.assertFalse(alone.enabled)
        self.assertIsNone(alone.refresh())
        self.assertIsNone(alone.members)
        self.assertEqual({alone.engine_id: 100}, self._shares(alone))

    def test_group_never_read_takes_nothing_new(self):
        # A backend that did not answer at start: no ring yet, so this
        # engine only renews what it holds (the claim takes no policy
        # whose owner is None).
        unread = partition.Partition('engine-%s' % uuid.uuid4(), _conf(URL))
        self.assertTrue(unread.enabled)
        self.assertIsNone(unread.members)
        self.assertIsNone(unread.owner(POLICIES[0]))
