"""News of a server reaches the engines that own it, whichever got it."""

import datetime
from unittest import mock

from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.monitor import routing
from heat_health.policy import observation as obs
from tests.unit import base

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)


class FakeTracker(object):
    """The servers this engine's tracker watches, and what it was told."""

    def __init__(self, servers=()):
        self.watched = set(servers)
        self.seen = []

    def is_watched(self, server_id):
        return server_id in self.watched

    def servers(self):
        return set(self.watched)

    def observe(self, observation):
        self.seen.append(observation.server_id)

    def observe_all(self, observations):
        for observation in observations:
            self.observe(observation)


class FakeForwarder(object):
    def __init__(self):
        self.sent = []
        self.messages = 0
        self.error = None

    def forward(self, engine_id, observations, hops):
        if self.error:
            raise self.error
        self.messages += 1
        self.sent.extend((engine_id, o.server_id, hops)
                         for o in observations)


def _news(server_id):
    return obs.Observation(server_id, obs.UNHEALTHY, 'instance.power_off.end',
                           obs.LIFECYCLE_EVENTS, T0)


class TestRouter(base.HeatHealthTestCase):

    def setUp(self):
        super(TestRouter, self).setUp()
        self.setup_health_db()
        live = timeutils.utcnow() + datetime.timedelta(minutes=5)
        gone = timeutils.utcnow() - datetime.timedelta(seconds=1)
        # s1 is e1's, s2 e2's, s3 is watched by a policy of each; s4's
        # owner let its lease expire.
        self._policy('pa', 'e1', live, ['s1', 's3'])
        self._policy('pb', 'e2', live, ['s2', 's3'])
        self._policy('pc', 'e3', gone, ['s4'])
        self.tracker = FakeTracker(['s1', 's3'])
        self.forwarder = FakeForwarder()
        self.router = routing.Router('e1', self.tracker, self.forwarder)
        self.assertTrue(self.router.refresh())

    def _policy(self, policy_id, engine_id, lease, servers):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Policy(
                id=policy_id, stack_id='stack-' + policy_id,
                resource_name='health', project_id='p', spec={},
                enabled=True, engine_id=engine_id, lease_expires_at=lease,
                generation=1))
            session.flush()
            for server in servers:
                session.add(models.Target(
                    policy_id=policy_id, server_id=server,
                    stack_id='stack-' + policy_id, resource_name=server,
                    path=server, state='NO_DATA'))

    def _move(self, policy_id, engine_id):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Policy).filter_by(id=policy_id).update(
                {'engine_id': engine_id, 'generation': 2})

    def test_owned_here_goes_to_the_tracker(self):
        self.router.route(_news('s1'))
        self.assertEqual(['s1'], self.tracker.seen)
        self.assertEqual([], self.forwarder.sent)

    def test_owned_elsewhere_is_forwarded_to_the_owner(self):
        self.router.route(_news('s2'))
        self.assertEqual([], self.tracker.seen)
        self.assertEqual([('e2', 's2', routing.MAX_HOPS)], self.forwarder.sent)
        self.assertEqual(1, self.router.forwarded)

    def test_watched_here_and_elsewhere_goes_to_both(self):
        self.router.route(_news('s3'))
        self.assertEqual(['s3'], self.tracker.seen)
        self.assertEqual([('e2', 's3', routing.MAX_HOPS)], self.forwarder.sent)

    def test_unwatched_is_dropped(self):
        for server in ('s4', 's9'):
            self.assertFalse(self.router.is_watched(server))
            self.router.route(_news(server))
        self.assertEqual([], self.tracker.seen)
        self.assertEqual([], self.forwarder.sent)

    def test_news_for_a_dead_owner_goes_where_the_database_says(self):
        # e2 was killed: the group dropped it and e3 took its policy, but
        # this engine's index, read before the takeover, still names e2.
        members = {'e1', 'e2', 'e3'}
        self.router = routing.Router('e1', self.tracker, self.forwarder,
                                     live=lambda: frozenset(members))
        self.router.refresh()
        members.discard('e2')
        self._move('pb', 'e3')
        self.router.route(_news('s2'))
        self.assertEqual([('e3', 's2', routing.MAX_HOPS)],
                         self.forwarder.sent)
        # Watched here too: the tracker has it once, e3 its copy.
        del self.forwarder.sent[:]
        self.router.route(_news('s3'))
        self.assertEqual([('e3', 's3', routing.MAX_HOPS)],
                         self.forwarder.sent)
        self.assertEqual(0, self.router.replay())
        self.assertEqual(['s3'], self.tracker.seen)

    def test_index_is_deployment_wide_and_followed(self):
        self.assertEqual({'s1', 's2', 's3'}, self.router.watched())
        self.assertTrue(self.router.is_watched('s2'))
        self.assertFalse(self.router.refresh())
        # pb moves to e3: news of s2 goes there from now on.
        self._move('pb', 'e3')
        self.assertTrue(self.router.refresh())
        self.router.route(_news('s2'))
        self.assertEqual([('e3', 's2', routing.MAX_HOPS)], self.forwarder.sent)

    def test_servers_a_sync_gives_a_policy_are_followed(self):
        # pb's place s2 now holds server s5, and a new place holds s6.
        db_api.target_sync('pb', {
            ('stack-pb', 's2'): {'server_id': 's5', 'path': 's2'},
            ('stack-pb', 's3'): {'server_id': 's3', 'path': 's3'},
            ('stack-pb', 's6'): {'server_id': 's6', 'path': 's6'}}, 0)
        self.assertTrue(self.router.refresh())
        self.assertEqual({'s1', 's3', 's5', 's6'}, self.router.watched())
        self.router.route(_news('s6'))
        self.assertEqual([('e2', 's6', routing.MAX_HOPS)],
                         self.forwarder.sent)

    def test_a_tick_that_finds_nothing_changed_reads_no_target(self):
        with mock.patch.object(db_api, 'policy_servers',
                               wraps=db_api.policy_servers) as read:
            self.assertFalse(self.router.refresh())
            self._move('pb', 'e3')
            self.assertTrue(self.router.refresh())
        # The owner changed, not the servers: still none read.
        read.assert_not_called()

    def test_a_tick_that_finds_nothing_changed_reads_one_row(self):
        clock = [0.0]
        self.router = routing.Router('e1', self.tracker, self.forwarder,
                                     clock=lambda: clock[0])
        self.assertTrue(self.router.refresh())
        self.assertTrue(self.router.is_watched('s2'))
        with mock.patch.object(db_api, 'policy_owners',
                               wraps=db_api.policy_owners) as read:
            self.assertFalse(self.router.refresh())
            read.assert_not_called()
            # e2's lease runs out: nobody live watches s2 any more.
            with db_session.facade.writer.using(
                    db_session.Session()) as session:
                session.query(models.Policy).filter_by(id='pb').update(
                    {'lease_expires_at': timeutils.utcnow() -
                     datetime.timedelta(seconds=1)})
            self.assertTrue(self.router.refresh())
            self.assertFalse(self.router.is_watched('s2'))
            # A new policy of e2's is followed at the next tick.
            self._policy('pd', 'e2', timeutils.utcnow() +
                         datetime.timedelta(minutes=5), ['s7'])
            self.assertTrue(self.router.refresh())
            self.assertTrue(self.router.is_watched('s7'))
            self.assertEqual(2, read.call_count)
            # The whole index is read again now and then all the same.
            clock[0] += routing.INDEX_SECONDS
            self.assertFalse(self.router.refresh())
            self.assertEqual(3, read.call_count)

    def test_forwarding_failure_is_not_raised(self):
        self.forwarder.error = RuntimeError('broker gone')
        self.router.route(_news('s3'))
        self.assertEqual(['s3'], self.tracker.seen)
        self.assertEqual(0, self.router.forwarded)

    def test_received_news_of_a_server_watched_here_is_kept(self):
        self.router.receive([_news('s1'), _news('s3')], 1)
        self.assertEqual(['s1', 's3'], self.tracker.seen)
        self.assertEqual([], self.forwarder.sent)

    def test_received_news_of_a_server_moved_away_is_passed_on_once(self):
        # e1 lost pa to e2 after the sender forwarded news of s1 to it.
        self._move('pa', 'e2')
        self.tracker.watched = set()
        self.router.receive([_news('s1')], 1)
        self.assertEqual([], self.tracker.seen)
        # The owner is looked up in the database, not in the stale index.
        self.assertEqual([('e2', 's1', 0)], self.forwarder.sent)
        # Passed on once already: dropped, never bounced around.
        self.router.receive([_news('s1')], 0)
        self.assertEqual([('e2', 's1', 0)], self.forwarder.sent)

    def test_received_news_is_never_sent_back_to_this_engine(self):
        self.tracker.watched = set()
        self.router.receive([_news('s1'), _news('s9')], 1)
        self.assertEqual([], self.forwarder.sent)
        self.assertEqual([], self.tracker.seen)

    def test_news_of_a_server_held_but_not_loaded_is_kept_for_the_load(self):
        # The database says e1 holds s1, its tracker loads it at its next
        # tick: a power-off forwarded meanwhile must not be lost.
        now = [100.0]
        self.router._clock = lambda: now[0]
        self.tracker.watched = set()
        self.router.receive([_news('s1')], 0)
        self.assertEqual(0, self.router.replay())
        self.tracker.watched = {'s1'}
        now[0] += 5
        self.assertEqual(1, self.router.replay())
        self.assertEqual(['s1'], self.tracker.seen)
        self.assertEqual(0, self.router.replay())
        self.assertEqual(['s1'], self.tracker.seen)

    def test_kept_news_is_dropped_when_never_loaded(self):
        now = [100.0]
        self.router._clock = lambda: now[0]
        self.tracker.watched = set()
        self.router.receive([_news('s1')], 1)
        now[0] += routing.KEEP_SECONDS
        self.router.replay()
        self.tracker.watched = {'s1'}
        self.assertEqual(0, self.router.replay())
        self.assertEqual([], self.tracker.seen)

    def test_stale_index_naming_this_engine_asks_the_database(self):
        # The index still says e1 watches s1, but e2 took pa and this
        # engine's tracker let s1 go: the news goes to e2.
        self._move('pa', 'e2')
        self.tracker.watched = set()
        self.router.route(_news('s1'))
        self.assertEqual([('e2', 's1', routing.MAX_HOPS)],
                         self.forwarder.sent)

    def test_verdicts_let_go_are_handed_to_the_new_owner(self):
        self._move('pa', 'e2')
        self.router.hand_on([_news('s1'), _news('s3')])
        self.assertEqual({('e2', 's1', routing.MAX_HOPS),
                          ('e2', 's3', routing.MAX_HOPS)},
                         set(self.forwarder.sent))
        # Both of e2's in one message.
        self.assertEqual(1, self.forwarder.messages)

    def test_many_verdicts_let_go_go_in_a_few_messages(self):
        self._move('pa', 'e2')
        with mock.patch.object(routing, 'FORWARD_BATCH', 2):
            self.router.hand_on([_news('s1'), _news('s3'), _news('s1'),
                                 _news('s3'), _news('s1')])
        self.assertEqual(5, len(self.forwarder.sent))
        self.assertEqual(3, self.forwarder.messages)
