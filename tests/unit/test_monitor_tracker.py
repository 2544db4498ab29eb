"""The tracker on our real tables: decisions, suppression, records."""

import datetime
import threading
import types

from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.engine.monitor import observation as obs
from heat_health.engine.monitor import tracker
from tests.unit import base

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)
POLL = obs.NODE_STATUS_POLLING
EVENTS = obs.LIFECYCLE_EVENTS


class FakeNotifier(object):
    def __init__(self):
        self.sent = []

    def info(self, ctxt, event_type, payload):
        self.sent.append((event_type, payload))


def _spec(modes, conditional='ANY_FAILED', interval=5):
    return {'detection': {
        'interval': interval, 'node_update_timeout': 0,
        'recovery_conditional': conditional,
        'detection_modes': [{'type': m, 'options': {}} for m in modes]}}


class TestTracker(base.HeatHealthTestCase):

    def setUp(self):
        super(TestTracker, self).setUp()
        self.setup_health_db()
        self.now = T0
        self.busy = set()
        self.notifier = FakeNotifier()
        self.tracker = tracker.Tracker(
            'host-1', in_progress=lambda pid: pid in self.busy,
            notifier=self.notifier, clock=lambda: self.now)

    def _add_policy(self, policy_id, servers, modes=(POLL,),
                    conditional='ANY_FAILED', state='HEALTHY', grace=None):
        with db_api._facade.writer.using(db_api._Session()) as session:
            session.add(models.Policy(
                id=policy_id, stack_id='stack-' + policy_id,
                resource_name='health', project_id='p1',
                spec=_spec(modes, conditional), enabled=True))
            session.flush()
            for server in servers:
                session.add(models.Target(
                    policy_id=policy_id, server_id=server,
                    stack_id='stack-' + policy_id, resource_name=server,
                    path='group/' + server, state=state, state_since=T0,
                    grace_until=grace))

    def _load(self):
        with db_api._facade.reader.using(db_api._Session()) as session:
            policies = session.query(models.Policy).all()
            rows = session.query(models.Target).all()
            for row in policies + rows:
                session.expunge(row)
        by_policy = {}
        for row in rows:
            by_policy.setdefault(row.policy_id, []).append(row)
        self.tracker.load(policies, by_policy)

    def _rows(self):
        with db_api._facade.reader.using(db_api._Session()) as session:
            return {(t.policy_id, t.server_id): t
                    for t in session.query(models.Target)}

    def _observe(self, server, verdict, source=POLL, reason=None):
        self.tracker.observe(obs.Observation(
            server, verdict, reason or 'Nova status X', source, self.now))

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
        self.assertEqual('HEALTHY', rows[('pa', 's2')].state)
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
        self.assertEqual('HEALTHY', self._rows()[('pa', 's1')].state)
        self.assertEqual(4, len(self.notifier.sent))

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
        self.assertEqual('HEALTHY', self._rows()[('pa', 's1')].state)

    def test_late_older_observation_does_not_override(self):
        self._add_policy('pa', ['s1'], modes=(EVENTS,))
        self._load()
        self.now = T0 + datetime.timedelta(seconds=10)
        self._observe('s1', obs.UNHEALTHY, source=EVENTS,
                      reason='instance.power_off.end')
        self.now = T0 + datetime.timedelta(seconds=5)
        self._observe('s1', obs.HEALTHY, source=EVENTS,
                      reason='instance.power_on.end')
        self.assertEqual('UNHEALTHY', self._rows()[('pa', 's1')].state)

    def test_all_failed_needs_every_mode(self):
        self._add_policy('pa', ['s1'], modes=(POLL, EVENTS),
                         conditional='ALL_FAILED')
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual('SUSPECT', self._rows()[('pa', 's1')].state)
        self._observe('s1', obs.UNHEALTHY, source=EVENTS)
        self.assertEqual('UNHEALTHY', self._rows()[('pa', 's1')].state)

    def test_grace_suppresses_then_decides(self):
        self._add_policy('pa', ['s1', 's2'], state='INIT',
                         grace=T0 + datetime.timedelta(seconds=30))
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self.tracker.settle()
        self.assertEqual('INIT', self._rows()[('pa', 's1')].state)
        self.now += datetime.timedelta(seconds=31)
        self.tracker.settle()
        rows = self._rows()
        self.assertEqual('UNHEALTHY', rows[('pa', 's1')].state)
        # Silent detectors and no failure: healthy once the grace ends.
        self.assertEqual('HEALTHY', rows[('pa', 's2')].state)

    def test_stack_in_progress_suppresses(self):
        self._add_policy('pa', ['s1'])
        self._load()
        self.busy.add('pa')
        self._observe('s1', obs.UNHEALTHY)
        self.assertEqual('HEALTHY', self._rows()[('pa', 's1')].state)
        self.assertEqual([], self.notifier.sent)
        self.tracker.settle()
        self.assertEqual('HEALTHY', self._rows()[('pa', 's1')].state)
        # The stack action ends with the server still failed.
        self.busy.clear()
        self.tracker.set_in_progress('pa', False)
        self.tracker.settle()
        self.assertEqual('UNHEALTHY', self._rows()[('pa', 's1')].state)

    def test_restart_resumes_from_the_database(self):
        self._add_policy('pa', ['s1'], modes=(POLL, EVENTS),
                         conditional='ALL_FAILED')
        self._load()
        self._observe('s1', obs.UNHEALTHY)
        self.tracker.flush()
        self.tracker = tracker.Tracker('host-2', notifier=self.notifier,
                                       clock=lambda: self.now)
        self._load()
        self._observe('s1', obs.UNHEALTHY, source=EVENTS)
        self.assertEqual('UNHEALTHY', self._rows()[('pa', 's1')].state)

    def test_same_observation_is_stored_once(self):
        self._add_policy('pa', ['s1'])
        self._load()
        calls = []
        real = db_api.target_health_record
        self.patchobject(db_api, 'target_health_record',
                         side_effect=lambda t, e: (calls.append(len(t)),
                                                   real(t, e)))
        for _ in range(3):
            self._observe('s1', obs.HEALTHY)
            self.tracker.flush()
        self.assertEqual([1], calls)
        self.now += tracker.OBSERVATION_REFRESH
        self._observe('s1', obs.HEALTHY)
        self.tracker.flush()
        self.assertEqual([1, 1], calls)

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
        self.assertEqual(50, len(db_api.event_get_recent(['pa'], 100)))

    def test_policy_view_reads_the_spec(self):
        policy = types.SimpleNamespace(id='p', stack_id='s', enabled=True,
                                       spec=_spec((POLL, EVENTS),
                                                  'ALL_FAILED', 7))
        view = tracker.WatchedPolicy(policy)
        self.assertEqual(((POLL, EVENTS), 'ALL_FAILED', 7),
                         (view.modes, view.conditional, view.interval))
