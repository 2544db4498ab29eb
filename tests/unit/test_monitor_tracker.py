"""The tracker on our real tables: decisions, suppression, records.

The database is the truth: a change is in memory (``states()``) and
announced only once it is stored, under this engine's lease and generation.
"""

import datetime
import sqlite3
import threading
from unittest import mock

from oslo_utils import timeutils
import sqlalchemy as sa

from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.monitor import monitor
from heat_health.engine.monitor import tracker
from heat_health.engine.monitor import watched
from heat_health.objects import policy as policy_object
from heat_health.objects import target as target_object
from heat_health.policy import observation as obs
from heat_health.policy import targets
from tests.unit import base

POLL = obs.NODE_STATUS_POLLING
EVENTS = obs.LIFECYCLE_EVENTS
URL = obs.NODE_STATUS_POLL_URL
LB = obs.LB_STATUS_POLLING
ENGINE = 'engine-1'


class FakeNotifier(object):
    def __init__(self):
        self.sent = []

    def info(self, ctxt, event_type, payload):
        self.sent.append((event_type, payload))

    def changes(self):
        return [(p['server_id'], p['old_state'], p['new_state'])
                for _e, p in self.sent]


def _spec(modes, conditional='ANY_FAILED', interval=5):
    return {'detection': {
        'interval': interval, 'node_update_timeout': 0,
        'recovery_conditional': conditional,
        'detection_modes': [{'type': m, 'options': {}} for m in modes]}}


def _resolution(busy=(), suspended=False):
    return targets.Resolution({}, frozenset(busy), suspended, [], ())


class TrackerCase(base.HeatHealthTestCase):
    """A tracker over a real database, and helpers to drive it."""

    def setUp(self):
        super(TrackerCase, self).setUp()
        self.setup_health_db()
        # Leases and a resume's grace are on the database's clock: the
        # tracker's starts from the same time.
        self.t0 = timeutils.utcnow()
        self.now = self.t0
        self.lease_end = self.t0 + datetime.timedelta(days=1)
        self.fresh = {}       # policy id -> Resolution asked before failing
        self.notifier = FakeNotifier()
        self.tracker = self._tracker(ENGINE)

    def _tracker(self, engine_id):
        return tracker.Tracker(
            engine_id, 'host-1', fresh_resolution=self.fresh.get,
            notifier=self.notifier, clock=lambda: self.now)

    def _add_policy(self, policy_id, servers, modes=(POLL,),
                    conditional='ANY_FAILED', state='HEALTHY', grace=None,
                    generation=1):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Policy(
                id=policy_id, stack_id='stack-' + policy_id,
                resource_name='health', project_id='p1',
                spec=_spec(modes, conditional), enabled=True,
                engine_id=ENGINE, lease_expires_at=self.lease_end,
                generation=generation))
            session.flush()
            for server in servers:
                session.add(models.Target(
                    policy_id=policy_id, server_id=server,
                    stack_id='stack-' + policy_id, resource_name=server,
                    path='group/' + server, state=state, state_since=self.t0,
                    grace_until=grace))

    def _update_policy(self, policy_id, **values):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Policy).filter_by(id=policy_id).update(
                values)

    def _load(self, resolutions=None, engine_id=ENGINE, tracker_=None):
        """Load what the monitor hands the tracker, as stored.

        The policies this engine owns, their targets and generations.
        """
        with db_session.facade.reader.using(db_session.Session()) as session:
            policies = session.query(models.Policy).filter_by(
                engine_id=engine_id).all()
            rows = session.query(models.Target).all()
            for row in policies + rows:
                session.expunge(row)
        by_policy = {}
        for row in rows:
            by_policy.setdefault(row.policy_id, []).append(row)
        let_go = (tracker_ or self.tracker).load(
            policies, by_policy, {p.id: p.generation for p in policies},
            resolutions)
        self.ids = {(row.policy_id, row.server_id): row.id for row in rows}
        return let_go

    def _rows(self):
        with db_session.facade.reader.using(db_session.Session()) as session:
            return {(t.policy_id, t.server_id): t
                    for t in session.query(models.Target)}

    def _stored(self, policy_id, server):
        return self._rows()[(policy_id, server)].state

    def _believed(self, policy_id, server):
        return self.tracker.states()[self.ids[(policy_id, server)]]

    def _state(self, policy_id, server):
        """(in the database, in memory): always the same here."""
        return (self._stored(policy_id, server),
                self._believed(policy_id, server))

    def _observe(self, server, verdict, source=POLL, reason=None,
                 policy_id=None):
        self.tracker.observe(obs.Observation(
            server, verdict, reason or 'Nova status X', source, self.now,
            policy_id))


class TestTracker(TrackerCase):

    def test_failure_is_recorded_announced_and_in_every_policy(self):
        self._add_policy('pa', ['s1', 's2'])
        self._add_policy('pb', ['s1'])
        self._load()
        self.assertTrue(self.tracker.is_watched('s1'))
        self.assertFalse(self.tracker.is_watched('s9'))
        self._observe('s1', obs.UNHEALTHY, reason='Nova status SHUTOFF')
        rows = self._rows()
        for policy in ('pa', 'pb'):
            row = rows[(policy, 's1')]
            self.assertEqual(('UNHEALTHY', 'Nova status SHUTOFF'),
                             (row.state, row.state_reason))
            self.assertEqual((obs.UNHEALTHY, POLL),
                             (row.observation, row.observation_source))
            self.assertEqual('UNHEALTHY', self._believed(policy, 's1'))
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's2'))
        events = db_api.event_get_recent(['pa', 'pb'])
        self.assertEqual({('pa', 'HEALTHY', 'UNHEALTHY', POLL),
                          ('pb', 'HEALTHY', 'UNHEALTHY', POLL)},
                         {(e.policy_id, e.old_state, e.new_state, e.source)
                          for e in events})
        self.assertEqual(2, len(self.notifier.sent))
        event_type, payload = self.notifier.sent[0]
        self.assertEqual('heat_health.target.state_change', event_type)
        self.assertEqual('s1', payload['server_id'])
        self.assertEqual('group/s1', payload['path'])
        self.assertEqual(('HEALTHY', 'UNHEALTHY'),
                         (payload['old_state'], payload['new_state']))
        self.assertIn(payload['stack_id'], ('stack-pa', 'stack-pb'))
        # Healthy again: a second change, recorded the same way.
        self._observe('s1', obs.HEALTHY)
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.assertEqual(4, len(self.notifier.sent))

    def test_a_policys_own_verdict_reaches_only_its_own_target(self):
        # Two policies watch s1, each with its own URL and pools.
        self._add_policy('pa', ['s1'], modes=(POLL, URL, LB))
        self._add_policy('pb', ['s1'], modes=(POLL, URL, LB))
        self._load()
        self._observe('s1', obs.UNHEALTHY, source=URL, policy_id='pa',
                      reason='poll URL of pa answered 500')
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pb', 's1'))
        self._observe('s1', obs.UNHEALTHY, source=LB, policy_id='pb',
                      reason='member of pb ERROR')
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pb', 's1'))
        # pb's healthy URL verdict does not heal pa.
        self._observe('s1', obs.HEALTHY, source=URL, policy_id='pb')
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self.tracker.flush()
        rows = self._rows()
        self.assertEqual('poll URL of pa answered 500',
                         rows[('pa', 's1')].observation_reason)
        self.assertNotEqual('poll URL of pa answered 500',
                            rows[('pb', 's1')].observation_reason)
        self.assertEqual({('pa', 'HEALTHY', 'UNHEALTHY', URL),
                          ('pb', 'HEALTHY', 'UNHEALTHY', LB)},
                         {(e.policy_id, e.old_state, e.new_state, e.source)
                          for e in db_api.event_get_recent(['pa', 'pb'])})

    def test_a_nova_fact_reaches_every_policy_watching_the_server(self):
        self._add_policy('pa', ['s1'], modes=(POLL, URL))
        self._add_policy('pb', ['s1'], modes=(POLL, URL))
        self._load()
        self._observe('s1', obs.UNHEALTHY, reason='Nova status SHUTOFF')
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pb', 's1'))

    def test_unknown_never_changes_the_state(self):
        self._add_policy('pa', ['s1'])
        self._load()
        self._observe('s1', obs.UNKNOWN, reason='Nova API unavailable')
        self.tracker.flush()
        row = self._rows()[('pa', 's1')]
        self.assertEqual('HEALTHY', row.state)
        self.assertEqual((obs.UNKNOWN, 'Nova API unavailable'),
                         (row.observation, row.observation_reason))
        self.assertEqual([], self.notifier.sent)

    def test_modes_not_in_the_policy_are_ignored(self):
        self._add_policy('pa', ['s1'], modes=(POLL,))
        self._load()
        self._observe('s1', obs.UNHEALTHY, source=EVENTS)
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))

    def test_late_older_observation_does_not_override(self):
        self._add_policy('pa', ['s1'], modes=(EVENTS,))
        self._load()
        self.now = self.t0 + datetime.timedelta(seconds=10)
        self._observe('s1', obs.UNHEALTHY, source=EVENTS,
                      reason='instance.power_off.end')
        self.now = self.t0 + datetime.timedelta(seconds=5)
        self._observe('s1', obs.HEALTHY, source=EVENTS,
                      reason='instance.power_on.end')
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_all_failed_needs_every_mode(self):
        self._add_policy('pa', ['s1'], modes=(POLL, EVENTS),
                         conditional='ALL_FAILED')
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual(('SUSPECT', 'SUSPECT'), self._state('pa', 's1'))
        self._observe('s1', obs.UNHEALTHY, source=EVENTS)
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_no_verdict_is_no_data(self):
        self._add_policy('pa', ['s1', 's2'], modes=(POLL,), state='NO_DATA')
        self._load()
        self._observe('s1', obs.UNKNOWN, reason='Nova API unavailable')
        self._observe('s2', obs.UNHEALTHY, source=EVENTS)
        self.tracker.settle()
        self.tracker.flush()
        for server in ('s1', 's2'):
            self.assertEqual(('NO_DATA', 'NO_DATA'),
                             self._state('pa', server))
        self.assertEqual([], self.notifier.sent)
        self.assertEqual([], db_api.event_get_recent(['pa']))

    def test_grace_holds_failures_not_health(self):
        self._add_policy('pa', ['s1', 's2', 's3'], state='NO_DATA',
                         grace=self.t0 + datetime.timedelta(seconds=30))
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        # A server that answers is healthy at once, grace or not.
        self._observe('s3', obs.HEALTHY)
        self.tracker.settle()
        self.assertEqual(('NO_DATA', 'NO_DATA'), self._state('pa', 's1'))
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's3'))
        self.now += datetime.timedelta(seconds=31)
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        # Silent detectors: still no verdict once the grace ends.
        self.assertEqual(('NO_DATA', 'NO_DATA'), self._state('pa', 's2'))
        self.assertEqual([('s3', 'NO_DATA', 'HEALTHY'),
                          ('s1', 'NO_DATA', 'UNHEALTHY')],
                         self.notifier.changes())

    def test_stack_action_holds_only_the_failure_of_its_target(self):
        self._add_policy('pa', ['s1', 's2'])
        busy = _resolution(busy=[('stack-pa', 's1')])
        self._load({'pa': busy})
        self._observe('s1', obs.UNHEALTHY)
        self._observe('s2', obs.UNHEALTHY)
        self.tracker.settle()
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's2'))
        self.assertEqual([('s2', 'HEALTHY', 'UNHEALTHY')],
                         self.notifier.changes())
        # The stack action ends with the server still failed.
        self._load({'pa': _resolution()})
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self.assertEqual(2, len(self.notifier.sent))

    def test_stack_action_started_since_the_load_holds_the_failure(self):
        self._add_policy('pa', ['s1'])
        self._load({'pa': _resolution()})
        # Heat's database, read just before a failure is stored.
        self.fresh['pa'] = _resolution(busy=[('stack-pa', 's1')])
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.fresh['pa'] = _resolution()
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_suspended_holds_every_change(self):
        self._add_policy('pa', ['s1'])
        self._add_policy('pb', ['s2'])
        # pa's stack is suspended (as heat-engine tells it), pb's is
        # found suspended in Heat's database.
        db_api.policy_set_suspended('pa', True)
        self._load({'pb': _resolution(suspended=True)})
        self._observe('s1', obs.UNHEALTHY, reason='Nova status SHUTOFF')
        self._observe('s2', obs.UNHEALTHY, reason='Nova status SUSPENDED')
        self.tracker.settle()
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pb', 's2'))
        self.assertEqual([], self.notifier.sent)
        # Resumed: what was seen while suspended is not judged at all.
        db_api.policy_set_suspended('pa', False, grace_seconds=60)
        self._load({'pb': _resolution()})
        self.tracker.settle()
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pb', 's2'))
        self.assertEqual([], self.notifier.sent)
        # A server that did not come back: pb's is judged at once, pa's
        # once the grace its resume gave it has passed.
        self.now = timeutils.utcnow()
        self._observe('s1', obs.UNHEALTHY, reason='Nova status SUSPENDED')
        self._observe('s2', obs.UNHEALTHY, reason='Nova status SUSPENDED')
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pb', 's2'))
        self.now = timeutils.utcnow() + datetime.timedelta(seconds=61)
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_suspend_found_just_before_storing_holds_the_failure(self):
        self._add_policy('pa', ['s1'])
        self._load()
        self.fresh['pa'] = _resolution(suspended=True)
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))

    def test_heat_unreadable_before_a_failure_decides_it_later(self):
        self._add_policy('pa', ['s1'])
        self._load()
        calls = []

        def unreadable(policy_id):
            calls.append(policy_id)
            if len(calls) == 1:
                raise sa.exc.OperationalError('SELECT', {}, 'gone away')
            return None
        self.tracker._fresh_resolution = unreadable
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self.assertEqual(['pa', 'pa'], calls)

    def test_disabled_policy_keeps_what_is_stored(self):
        self._add_policy('pa', ['s1'])
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self._update_policy('pa', enabled=False)
        self._load()
        self._observe('s1', obs.HEALTHY)
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self._update_policy('pa', enabled=True)
        self._load()
        self.tracker.settle()
        # What was seen while disabled is not judged afterwards...
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        # ...what is seen once enabled again is.
        self._observe('s1', obs.HEALTHY)
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))

    def test_reset_read_in_the_load_that_enables_the_policy_is_followed(
            self):
        self._add_policy('pa', ['s1'])
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self._update_policy('pa', enabled=False)
        self._load()
        # The user's reset, stored in the second of the UNHEALTHY (MySQL
        # keeps no fractions), and the switch back on: read in one load.
        since = self._rows()[('pa', 's1')].state_since
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Target).filter_by(
                policy_id='pa', server_id='s1').update(
                    {'state': 'NO_DATA', 'state_since': since})
        self._update_policy('pa', enabled=True)
        self._load()
        self.assertEqual(('NO_DATA', 'NO_DATA'), self._state('pa', 's1'))

    def test_spec_change_never_erases_a_stored_failure(self):
        self._add_policy('pa', ['s1'])
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        for change in ({'spec': _spec((POLL,), interval=30)},
                       {'enabled': False},
                       # Other modes: the old verdicts go, the state stays.
                       {'spec': _spec((EVENTS,)), 'enabled': True}):
            self._update_policy('pa', **change)
            self._load()
            self.tracker.settle()
            self.tracker.flush()
            self.assertEqual(('UNHEALTHY', 'UNHEALTHY'),
                             self._state('pa', 's1'), change)
        self.assertEqual(1, len(self.notifier.sent))
        # A restarted engine reads it back as it was.
        self.tracker = self._tracker(ENGINE)
        self._load()
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_failed_write_changes_nothing_and_is_retried(self):
        self._add_policy('pa', ['s1'])
        self._load()
        failures = []

        def database_restarting(conn, cursor, statement, params, context,
                                executemany):
            if (not failures and statement.startswith(
                    'UPDATE heat_health_target') and
                    'state_since' in statement):
                failures.append(statement)
                raise sqlite3.OperationalError('disk I/O error')
        engine = db_api.get_engine()
        sa.event.listen(engine, 'before_cursor_execute',
                        database_restarting)
        self.addCleanup(sa.event.remove, engine, 'before_cursor_execute',
                        database_restarting)
        self._observe('s1', obs.UNHEALTHY, reason='Nova status SHUTOFF')
        self.assertEqual(1, len(failures))
        self.assertEqual(('HEALTHY', 'HEALTHY'), self._state('pa', 's1'))
        self.assertEqual([], self.notifier.sent)
        self.assertEqual([], db_api.event_get_recent(['pa']))
        # The next tick stores it, and it is announced once.
        self.tracker.settle()
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))
        self.assertEqual([('s1', 'HEALTHY', 'UNHEALTHY')],
                         self.notifier.changes())
        self.tracker.settle()
        self.tracker.flush()
        self.assertEqual(1, len(self.notifier.sent))
        self.assertEqual(1, len(db_api.event_get_recent(['pa'])))
        row = self._rows()[('pa', 's1')]
        self.assertEqual((obs.UNHEALTHY, 'Nova status SHUTOFF'),
                         (row.observation, row.observation_reason))

    def test_policy_taken_by_another_engine_fences_the_write(self):
        self._add_policy('pa', ['s1'])
        self._add_policy('pb', ['s2'])
        self._add_policy('pc', ['s3'])
        self._load()
        # pa is taken by engine-2; pb is taken back by this engine after
        # a takeover (this tracker still holds the old generation); pc's
        # lease ran out.
        self._update_policy('pa', engine_id='engine-2', generation=2)
        self._update_policy('pb', generation=3)
        self._update_policy('pc', lease_expires_at=(
            timeutils.utcnow() - datetime.timedelta(seconds=1)))
        for server in ('s1', 's2', 's3'):
            self._observe(server, obs.UNHEALTHY)
        self.tracker.settle()
        self.tracker.flush()
        for policy, server in (('pa', 's1'), ('pb', 's2'), ('pc', 's3')):
            self.assertEqual(('HEALTHY', 'HEALTHY'),
                             self._state(policy, server))
            # Not even the observation is written.
            self.assertIsNone(self._rows()[(policy, server)].observation)
        self.assertEqual([], self.notifier.sent)
        self.assertEqual([], db_api.event_get_recent(['pa', 'pb', 'pc']))
        # The new owner's tracker stores it.
        self.tracker = self._tracker('engine-2')
        self._load(engine_id='engine-2')
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_news_fenced_off_is_handed_on_when_the_policy_is_let_go(self):
        self._add_policy('pa', ['s1'], modes=(EVENTS,))
        self._add_policy('pb', ['s2'], modes=(EVENTS,))
        self.assertEqual([], self._load())
        # engine-2 took pa and looked s1 up; the power-off reaches this
        # engine before its next claim tells it so.
        self._update_policy('pa', engine_id='engine-2', generation=2)
        self._observe('s1', obs.UNHEALTHY, source=EVENTS,
                      reason='instance.power_off.end')
        self._observe('s2', obs.HEALTHY, source=EVENTS)
        self.assertEqual('HEALTHY', self._stored('pa', 's1'))
        let_go = self._load()
        self.assertFalse(self.tracker.is_watched('s1'))
        self.assertEqual([('s1', obs.UNHEALTHY, 'instance.power_off.end')],
                         [(o.server_id, o.verdict, o.reason) for o in let_go])
        # Handed to engine-2's tracker, it is the failure it never saw.
        other = self._tracker('engine-2')
        self._load(engine_id='engine-2', tracker_=other)
        other.observe_all(let_go)
        self.assertEqual('UNHEALTHY', self._stored('pa', 's1'))

    def test_restart_resumes_from_the_database(self):
        self._add_policy('pa', ['s1'], modes=(POLL, EVENTS),
                         conditional='ALL_FAILED')
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self.tracker.flush()
        # The engine restarts under a new id and takes the policy again.
        self._update_policy('pa', engine_id='engine-2', generation=2)
        self.tracker = self._tracker('engine-2')
        self._load(engine_id='engine-2')
        self.assertEqual(('SUSPECT', 'SUSPECT'), self._state('pa', 's1'))
        self._observe('s1', obs.UNHEALTHY, source=EVENTS)
        self.assertEqual(('UNHEALTHY', 'UNHEALTHY'), self._state('pa', 's1'))

    def test_same_observation_is_stored_once(self):
        self._add_policy('pa', ['s1'])
        self._load()
        calls = []
        real = db_api.target_observations_store
        self.patchobject(db_api, 'target_observations_store',
                         side_effect=lambda e, rows: (calls.append(len(rows)),
                                                      real(e, rows)))
        for _ in range(3):
            self._observe('s1', obs.HEALTHY)
            self.tracker.flush()
        self.assertEqual([1], calls)
        # Said again an hour later: still not written, as long as it says
        # the same; when it was seen so goes with the policy's leases.
        first = self.now
        self.now += datetime.timedelta(hours=1)
        self._observe('s1', obs.HEALTHY)
        self.tracker.flush()
        self.assertEqual([1], calls)
        self.assertEqual(first, self._rows()[('pa', 's1')].observed_at)
        self.assertEqual({'pa': self.now},
                         self.tracker.observed_through(self.now))
        # Said otherwise: written.
        self._observe('s1', obs.HEALTHY, reason='Nova status ACTIVE')
        self.tracker.flush()
        self.assertEqual([1, 1], calls)

    def test_when_the_detectors_last_confirmed_what_is_stored(self):
        self._add_policy('pa', ['s1', 's2'], modes=(POLL, URL))
        self._add_policy('pb', ['s3'], modes=(POLL,))
        self._add_policy('pc', ['s4'], modes=(EVENTS,))
        self._load()
        polled = self.now
        for server in ('s1', 's3', 's4'):
            self._observe(server, obs.HEALTHY, source=(
                EVENTS if server == 's4' else POLL))
        # Nothing is known of s2 yet, and what was seen is not stored.
        self.assertEqual({}, self.tracker.observed_through(polled))
        self.tracker.flush()
        # Nova's poll reports only news: its last good poll confirms pb.
        # Notifications are only news: they confirm nothing.
        self.assertEqual({'pb': polled},
                         self.tracker.observed_through(polled))
        self.assertEqual({}, self.tracker.observed_through(None))
        self.now += datetime.timedelta(seconds=10)
        self._observe('s2', obs.HEALTHY)
        self._observe('s1', obs.HEALTHY, source=URL, policy_id='pa')
        self.now += datetime.timedelta(seconds=10)
        self._observe('s2', obs.HEALTHY, source=URL, policy_id='pa')
        self.tracker.flush()
        # A poll URL confirms each target at each check: pa is as old as
        # its oldest check, or its last poll if that is older.
        later = self.now + datetime.timedelta(seconds=5)
        self.assertEqual(
            {'pa': later - datetime.timedelta(seconds=15), 'pb': later},
            self.tracker.observed_through(later))
        self.assertEqual({'pa': polled, 'pb': polled},
                         self.tracker.observed_through(polled))

    def test_observe_from_many_threads(self):
        servers = ['s%d' % i for i in range(50)]
        self._add_policy('pa', servers)
        self._load()
        threads = [threading.Thread(target=self._observe,
                                    args=(s, obs.UNHEALTHY))
                   for s in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual({'UNHEALTHY'},
                         {r.state for r in self._rows().values()})
        self.assertEqual({'UNHEALTHY'}, set(self.tracker.states().values()))
        self.assertEqual(50, len(db_api.event_get_recent(['pa'], 100)))
        self.assertEqual(50, len(self.notifier.sent))

    def test_policy_view_reads_the_spec(self):
        self._add_policy('pa', [], modes=(POLL, EVENTS),
                         conditional='ALL_FAILED')
        policy = db_api.policy_get('pa')
        view = watched.WatchedPolicy(policy, 4,
                                     _resolution(busy=[('x', 'y')]))
        self.assertEqual(((POLL, EVENTS), 'ALL_FAILED', 5, 4),
                         (view.modes, view.spec.conditional,
                          view.spec.interval, view.generation))
        self.assertEqual(frozenset([('x', 'y')]), view.busy)
        self.assertIsNone(view.frozen())

    def test_news_of_a_replaced_server_never_lands_on_its_successor(self):
        """News of a server is never stored on its successor.

        Heat replaced s1 by s9 at the same place (the row is kept,
        NO_DATA) while news of s1 was on its way.
        """
        self._add_policy('pa', ['s1'], state='NO_DATA')
        self._load()
        place = {('stack-pa', 's1'): {'server_id': 's9', 'path': 'group/s1',
                                      'addresses': []}}
        # Seen between two ticks, stored at the end of the next one.
        self._observe('s1', obs.UNKNOWN, reason='Nova API unavailable')
        db_api.target_sync('pa', place, 0)
        self._load()
        self.tracker.flush()
        row = self._rows()[('pa', 's9')]
        self.assertEqual(('NO_DATA', None), (row.state, row.observation))
        # The tracker had not read the replacement yet when s1's deletion
        # was seen: the decision about s1 is not stored on s9's row.
        self._add_policy('pb', ['s2'], state='NO_DATA')
        self._load()
        db_api.target_sync('pb', {('stack-pb', 's2'): {
            'server_id': 's8', 'path': 'group/s2', 'addresses': []}}, 0)
        self._observe('s2', obs.UNHEALTHY, reason='Nova status DELETED')
        row = self._rows()[('pb', 's8')]
        self.assertEqual(('NO_DATA', None), (row.state, row.observation))
        self.assertEqual([], self.notifier.sent)
        self.assertEqual([], [e for e in db_api.event_get_recent(['pb'])
                              if e.new_state != 'NO_DATA'])


class TestLoadOnlyWhatChanged(TrackerCase):
    """The monitor loads the tracker per policy: unchanged ones are kept."""

    def setUp(self):
        super(TestLoadOnlyWhatChanged, self).setUp()
        self.signatures = monitor.LoadSignatures()
        self._add_policy('pa', ['s1', 's2'])
        self._add_policy('pb', ['s3'])
        self._monitor_load()

    def _monitor_load(self):
        """Monitor._load_if_changed over what is stored now."""
        policies = {p.id: p for p in (policy_object.Policy.get(pid)
                                      for pid in ('pa', 'pb'))}
        targets = target_object.Target.get_all_by_policies(sorted(policies))
        changed, unchanged, parts = self.signatures.compare(
            policies, lambda pid: policies[pid].generation, {}, targets,
            self.tracker.written)
        if changed:
            self.tracker.load(list(policies.values()), targets,
                              {pid: p.generation
                               for pid, p in policies.items()},
                              unchanged=unchanged)
            self.signatures.loaded(parts)
        self.ids = {(t.policy_id, t.server_id): t.id
                    for rows in targets.values() for t in rows}
        return changed, unchanged

    def _memory(self):
        return {t.policy.id + '/' + t.server_id: t
                for t in (self.tracker.targets_of('pa') +
                          self.tracker.targets_of('pb'))}

    def test_a_tick_that_finds_nothing_changed_loads_nothing(self):
        before = self._memory()
        self.assertEqual((False, {'pa', 'pb'}), self._monitor_load())
        self.assertEqual(before, self._memory())

    def test_a_users_reset_is_followed_and_the_rest_kept(self):
        self._observe('s3', obs.UNHEALTHY)
        self.assertEqual('UNHEALTHY', self._believed('pb', 's3'))
        # The engine wrote pb's target: pb is loaded again, pa is kept.
        before = self._memory()
        changed, unchanged = self._monitor_load()
        self.assertEqual((True, {'pa'}), (changed, unchanged))
        self.assertIs(before['pa/s1'], self._memory()['pa/s1'])
        # A user's reset of s3, a second later.
        self.now += datetime.timedelta(seconds=1)
        with mock.patch.object(timeutils, 'utcnow', return_value=self.now):
            db_api.target_reset('stack-pb', 's3', 'the user says so')
        changed, unchanged = self._monitor_load()
        self.assertEqual((True, {'pa'}), (changed, unchanged))
        self.assertEqual('NO_DATA', self._believed('pb', 's3'))
        self.assertIs(before['pa/s1'], self._memory()['pa/s1'])
        self.assertEqual(['s1', 's2'],
                         [t.server_id for t in self.tracker.targets_of('pa')])

    def test_a_safety_reread_loads_only_rows_memory_lacks(self):
        """Rows changed only by this engine's writes are not read again."""
        self._observe('s1', obs.UNHEALTHY)
        self._observe('s3', obs.UNHEALTHY)
        self.assertEqual({}, monitor.read_unless_held(self.tracker,
                                                      {'pa', 'pb'}))
        # A write nobody announced (no new version): pb is read again.
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Target).filter_by(
                policy_id='pb', server_id='s3').update(
                    {'state': 'HEALTHY'})
        found = monitor.read_unless_held(self.tracker, {'pa', 'pb'})
        self.assertEqual(['pb'], list(found))
        self.assertEqual(['HEALTHY'], [t.state for t in found['pb']])
        # So is a policy whose rows memory does not hold at all, and one
        # with a target memory does not know.
        self._add_policy('pc', ['s4'])
        self.assertEqual({'pc'}, set(monitor.read_unless_held(
            self.tracker, {'pa', 'pc'})))
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Target(
                policy_id='pa', server_id='s9', stack_id='stack-pa',
                resource_name='s9', path='group/s9', state='NO_DATA',
                state_since=self.t0))
        self.assertEqual({'pa'}, set(monitor.read_unless_held(
            self.tracker, {'pa'})))

    def test_a_server_of_a_kept_and_a_loaded_policy_keeps_both(self):
        """Only what changed leaves the index; the kept stays as it was."""
        self._add_policy('pc', ['s3', 's4'])
        policies = {pid: policy_object.Policy.get(pid)
                    for pid in ('pa', 'pb', 'pc')}
        targets = target_object.Target.get_all_by_policies(sorted(policies))
        generations = {pid: p.generation for pid, p in policies.items()}
        before = self._memory()
        self.tracker.load(list(policies.values()), targets, generations,
                          unchanged={'pa', 'pb'})
        self.ids = {(t.policy_id, t.server_id): t.id
                    for rows in targets.values() for t in rows}
        self.assertIs(before['pb/s3'], self._memory()['pb/s3'])
        self.assertEqual({'pb', 'pc'}, {
            t.policy.id for t in self.tracker.watching()['s3']})
        self._observe('s3', obs.UNHEALTHY)
        self.assertEqual('UNHEALTHY', self._believed('pb', 's3'))
        self.assertEqual('UNHEALTHY', self._believed('pc', 's3'))
        # pc goes (another engine took it), pb's spec changed: s4 is no
        # longer watched, s3 by pb alone, through its new target.
        self._update_policy('pb', spec=_spec((POLL, URL)))
        policies = {pid: policy_object.Policy.get(pid)
                    for pid in ('pa', 'pb')}
        targets = target_object.Target.get_all_by_policies(sorted(policies))
        let_go = self.tracker.load(list(policies.values()), targets,
                                   generations, unchanged={'pa'})
        self.assertEqual({'s3'}, {o.server_id for o in let_go})
        self.assertFalse(self.tracker.is_watched('s4'))
        self.assertEqual(['pb'], [
            t.policy.id for t in self.tracker.watching()['s3']])
        self.assertEqual({POLL, URL},
                         set(self.tracker.watching()['s3'][0].policy.modes))
        self.assertEqual({'s1', 's2', 's3'}, self.tracker.servers())
        self.assertIs(before['pa/s1'], self.tracker.watching()['s1'][0])

    def test_a_spec_change_loads_that_policy(self):
        self._update_policy('pa', spec=_spec((POLL, URL)))
        changed, unchanged = self._monitor_load()
        self.assertEqual((True, {'pb'}), (changed, unchanged))
        self.assertEqual({POLL, URL},
                         set(self.tracker.targets_of('pa')[0].policy.modes))
