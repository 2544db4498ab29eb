"""The monitor loop with a fake registry and a fake Nova."""

import collections
import datetime
import gc
import random
import threading
import types

import fixtures
from oslo_config import cfg
from oslo_utils import timeutils

from heat_health.common import nova_adapter
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.monitor import monitor
from heat_health.engine.monitor import poll_costs
from heat_health.policy import spec as policy_spec
from heat_health.policy import targets
from tests.unit import base
from tests.unit import test_monitor_nova_status as fakes

LEASE_END = timeutils.utcnow() + datetime.timedelta(days=1)


def _policy(policy_id, interval=5, modes=('NODE_STATUS_POLLING',)):
    spec = {'detection': {
        'interval': interval, 'recovery_conditional': 'ANY_FAILED',
        'node_update_timeout': 0,
        'detection_modes': [{'type': m, 'options': {'poll_url': 'u'}}
                            for m in modes]}}
    return types.SimpleNamespace(
        id=policy_id, stack_id='stack-' + policy_id,
        project_id='project-' + policy_id, enabled=True, suspended=False,
        paused=None, spec=spec,
        parsed=policy_spec.PolicySpec.parse(spec))


class FakeUrlChecker(object):
    def __init__(self):
        self.submitted = []
        self.stopped = False

    def submit(self, target, options):
        self.submitted.append((target, options))
        return True

    def stop(self):
        self.stopped = True


class FakeRegistry(object):
    """Policies owned by engine-1 (generation 0) and their targets.

    Targets are stored as target_sync stores them (NO_DATA); ``busy``
    holds the places a stack action works on.
    """

    partition = None
    lease_seconds = 30
    registrations = 0

    @property
    def resolutions_changed(self):
        # What the resolutions below are made of.
        return frozenset(self.busy)

    def __init__(self, policies, servers):
        self.policies = policies
        self.servers = servers
        self.busy = set()   # (policy id, server) whose place is busy
        self.refreshed = []
        self.released = False
        self.renewed = []   # threads that renewed the leases

    def claim(self):
        return list(self.policies)

    def renew(self):
        self.renewed.append(threading.current_thread())
        return 0

    def free_dead_owners(self):
        return 0

    def generation(self, policy_id):
        return 0

    def refresh_all(self, policies, read=None):
        self.refreshed.append(sorted(p.id for p in policies))
        result = {}
        stored = set()
        with db_session.facade.writer.using(db_session.Session()) as session:
            for policy in policies:
                if session.get(models.Policy, policy.id) is None:
                    stored.add(policy.id)
                    session.add(models.Policy(
                        id=policy.id, stack_id=policy.stack_id,
                        resource_name='health', project_id='p',
                        spec=policy.spec, enabled=True,
                        engine_id='engine-1', generation=0,
                        lease_expires_at=LEASE_END))
                    session.flush()
                    for server in self.servers[policy.id]:
                        session.add(models.Target(
                            policy_id=policy.id, server_id=server,
                            stack_id=policy.stack_id, resource_name=server,
                            path=server, state='NO_DATA'))
        with db_session.facade.reader.using(db_session.Session()) as session:
            for policy in policies:
                if not (read is None or policy.id in read or
                        policy.id in stored):
                    continue
                rows = session.query(models.Target).filter_by(
                    policy_id=policy.id).all()
                for row in rows:
                    session.expunge(row)
                result[policy.id] = rows
        return result

    def resolution(self, policy):
        busy = frozenset((policy.stack_id, server)
                         for pid, server in self.busy if pid == policy.id)
        return targets.Resolution({}, busy, False, [], ())

    resolve_now = resolution

    def release(self):
        self.released = True


class TestMonitor(base.HeatHealthTestCase):

    def setUp(self):
        super(TestMonitor, self).setUp()
        self.setup_health_db()
        self.time = 1000.0
        self.registry = FakeRegistry(
            [_policy('pa'), _policy('pb', interval=20)],
            {'pa': ['s1', 's2'], 'pb': ['s2', 's3']})
        self.nova = fakes.FakeNova(
            {s: nova_adapter.Server('ACTIVE', ['10.0.0.%s' % s[1]],
                                    'vm-%s' % s)
             for s in ('s1', 's2', 's3')})
        self.urls = FakeUrlChecker()
        self.monitor = monitor.Monitor(
            'engine-1', 'host-1', registry=self.registry, adapter=self.nova,
            listener_factory=None, url_checker_factory=lambda t: self.urls,
            clock=lambda: self.time)
        self.monitor.tracker._notifier = types.SimpleNamespace(
            info=lambda *a: None)

    def _states(self):
        with db_session.facade.reader.using(db_session.Session()) as session:
            return {(t.policy_id, t.server_id): t.state
                    for t in session.query(models.Target)}

    def test_one_nova_query_for_all_policies_when_due(self):
        self.monitor.tick()
        # Newly watched servers are looked up by id at once, then the
        # listing of the policies due serves them all.
        self.assertEqual([('ids', ('s1', 's2', 's3')), 'all'],
                         self.nova.calls)
        self.assertEqual([['pa', 'pb']], self.registry.refreshed)
        # Many of them are listed by the projects of the policies taken.
        self.assertEqual({'project-pa', 'project-pb'}, self.nova.projects)
        self.nova.changed = {'s2': nova_adapter.Server('SHUTOFF', {})}
        self.time += 1
        self.monitor.tick()
        self.assertEqual(2, len(self.nova.calls))  # nobody due yet
        self.time += 5
        self.monitor.tick()
        self.assertEqual(3, len(self.nova.calls))
        self.assertEqual('changed', self.nova.calls[2][0])
        states = self._states()
        self.assertEqual('UNHEALTHY', states[('pa', 's2')])
        self.assertEqual('UNHEALTHY', states[('pb', 's2')])
        self.assertEqual('HEALTHY', states[('pa', 's1')])

    def test_poll_costs_tell_the_loops_cpu_by_step(self):
        cfg.CONF.set_override('log_poll_costs', True, group='heat_health')
        self.addCleanup(cfg.CONF.clear_override, 'log_poll_costs',
                        group='heat_health')
        log = self.useFixture(fixtures.FakeLogger(name=poll_costs.__name__))
        self.nova.requests = 0
        costed = monitor.Monitor(
            'engine-1', 'host-1', registry=self.registry, adapter=self.nova,
            listener_factory=None, url_checker_factory=None,
            clock=lambda: self.time)
        costed.tracker._notifier = types.SimpleNamespace(
            info=lambda *a: None)
        for _ in range(4):
            costed.tick()
            self.time += 30
        lines = [line for line in log.output.splitlines()
                 if 'Poll costs' in line]
        self.assertGreaterEqual(len(lines), 2)
        steps = dict(part.rsplit(' ', 1) for part in lines[-1].split(
            'monitor CPU s by step: ')[1].split(', '))
        self.assertLessEqual({'claim', 'resolve', 'load', 'index', 'poll',
                              'urls', 'pools', 'settle'}, set(steps))
        self.assertTrue(all(float(v) >= 0 for v in steps.values()))
        # A full garbage collection in a cycle is told with its seconds.
        told = len(lines)
        gc.collect()
        self.time += 30
        costed.tick()
        collected = [line.split('full garbage collections ')[1].split(';')[0]
                     for line in log.output.splitlines()
                     if 'Poll costs' in line][told:]
        self.assertEqual(1, len(collected))
        full, seconds = collected[0].split(', ')
        self.assertGreaterEqual(int(full), 1)
        self.assertGreater(float(seconds.rstrip(' s')), 0)

    def test_a_long_step_keeps_heartbeats_and_leases_going(self):
        """Each answer of Nova within a tick says the tick progresses."""
        progress = []
        self.registry.partition = types.SimpleNamespace(
            enabled=True, refresh=lambda: None,
            progress=lambda: progress.append(1))
        self.nova.on_request = None
        looped = monitor.Monitor(
            'engine-1', 'host-1', registry=self.registry, adapter=self.nova,
            listener_factory=None, url_checker_factory=None,
            clock=lambda: self.time)
        # Outside a tick (a recovery thread's look-up): nothing is kept.
        self.nova.on_request()
        self.registry.on_progress()
        self.assertEqual(([], []), (progress, self.registry.renewed))
        # Within one: both the Nova pages and a refresh's policies.
        looped._ticking = threading.current_thread()
        self.nova.on_request()
        self.registry.on_progress()
        self.assertEqual(2, len(progress))
        self.assertEqual([threading.current_thread()] * 2,
                         self.registry.renewed)
        # A whole tick says it between its steps.
        del progress[:]
        looped.tick()
        self.assertGreaterEqual(len(progress), 2)
        self.assertIsNone(looped._ticking)

    def test_a_policy_that_comes_later_joins_the_next_listing(self):
        self.registry.policies = [_policy('pa', interval=30)]
        self.monitor.tick()
        self.assertEqual(['all'], [c for c in self.nova.calls
                                   if c == 'all'])
        # pb comes 10 s later (a takeover): its servers are looked up by
        # id, and it is listed with pa 20 s later, not in a listing of
        # its own in between.
        self.registry.policies = [_policy('pa', interval=30),
                                  _policy('pb', interval=30)]
        self.time += 10
        self.monitor.tick()
        listings = []
        for _second in range(50):
            self.time += 1
            del self.nova.calls[:]
            self.monitor.tick()
            listings.extend(self.time for c in self.nova.calls
                            if c != 'all' and c[0] == 'changed')
        self.assertEqual([1030.0, 1060.0], listings)

    def test_policies_are_claimed_every_few_seconds_or_when_called_for(self):
        claims, resolved = [], []
        claim, resolution = self.registry.claim, self.registry.resolution
        self.registry.claim = lambda: claims.append(self.time) or claim()
        self.registry.resolution = lambda p: (resolved.append(p.id) or
                                              resolution(p))
        self.registry.partition = types.SimpleNamespace(
            members=frozenset(['engine-1']), enabled=False)
        for _second in range(7):
            self.monitor.tick()
            self.time += 1
        self.assertEqual([1000.0, 1000.0 + monitor.CLAIM_SECONDS,
                          1000.0 + 2 * monitor.CLAIM_SECONDS], claims)
        # A tick that claimed nothing and read nothing goes over no
        # policy to tell whether the tracker is to be loaded.
        del resolved[:]
        self.time += 0.5
        self.monitor.tick()
        self.assertEqual([], resolved)
        # The group changed: policies may move, claimed at once; so are
        # they when one was just registered here.
        self.registry.partition.members = frozenset(['engine-1', 'e-2'])
        self.monitor.tick()
        self.registry.registrations += 1
        self.time += 0.5
        self.monitor.tick()
        self.assertEqual([1007.5, 1008.0], claims[3:])
        # Its policies are compared again when something changed.
        self.registry.busy.add(('pa', 's1'))
        self.time += 0.5
        self.monitor.tick()
        self.assertEqual(['pa', 'pb'], sorted(resolved))

    def test_new_targets_have_no_data_until_nova_answers(self):
        self.nova.error = 'computeFault: 500'
        self.monitor.tick()
        self.assertEqual({'NO_DATA'}, set(self._states().values()))
        self.assertEqual({'NO_DATA'},
                         set(self.monitor.tracker.states().values()))
        self.nova.error = None
        self.time += 20
        self.monitor.tick()
        self.assertEqual({'HEALTHY'}, set(self._states().values()))

    def test_api_errors_change_nothing(self):
        self.monitor.tick()
        self.assertEqual({'HEALTHY'}, set(self._states().values()))
        self.nova.error = 'computeFault: 500'
        for _ in range(3):
            self.time += 5
            self.monitor.tick()
        self.assertEqual({'HEALTHY'}, set(self._states().values()))

    def test_stack_action_on_a_target_holds_only_its_failure(self):
        self.monitor.tick()
        self.registry.busy.add(('pa', 's1'))
        self.nova.changed = {'s1': nova_adapter.Server('DELETED', {}),
                             's2': nova_adapter.Server('SHUTOFF', {})}
        self.time += 5
        self.monitor.tick()
        states = self._states()
        self.assertEqual('HEALTHY', states[('pa', 's1')])
        # Another target of the same policy is not suppressed.
        self.assertEqual('UNHEALTHY', states[('pa', 's2')])
        self.registry.busy.clear()
        self.time += 5
        self.monitor.tick()
        self.assertEqual('UNHEALTHY', self._states()[('pa', 's1')])

    def test_stop_releases(self):
        self.monitor.stop()
        self.assertTrue(self.registry.released)
        self.assertTrue(self.urls.stopped)

    def test_poll_urls_checked_with_addresses_from_nova(self):
        self.registry.policies = [_policy('pu', modes=(
            'NODE_STATUS_POLL_URL',))]
        self.registry.servers['pu'] = ['s1', 's3']
        self.monitor.tick()
        # Nova is asked for the addresses, then the URLs are checked.
        self.assertEqual([('ids', ('s1', 's3')), 'all'], self.nova.calls)
        self.assertEqual({('s1', ('10.0.0.1',)), ('s3', ('10.0.0.3',))},
                         {(t.server_id, tuple(t.addresses))
                          for t, _o in self.urls.submitted})
        self.assertEqual({'poll_url': 'u'}, self.urls.submitted[0][1])
        # Each check is the policy's own, in its project's share.
        self.assertEqual({('pu', 'project-pu')},
                         {(t.policy_id, t.project_id)
                          for t, _o in self.urls.submitted})
        self.time += 1
        self.monitor.tick()
        self.assertEqual(2, len(self.urls.submitted))
        self.time += 5
        self.monitor.tick()
        self.assertEqual(4, len(self.urls.submitted))

    def test_poll_urls_name_the_server_as_nova_does_and_it_is_kept(self):
        self.registry.policies = [_policy('pu', modes=(
            'NODE_STATUS_POLL_URL',))]
        self.registry.servers['pu'] = ['s1']
        self.monitor.tick()
        target, _options = self.urls.submitted[0]
        self.assertEqual('vm-s1', target.name)
        with db_session.facade.reader.using(db_session.Session()) as session:
            row = session.query(models.Target).filter_by(
                policy_id='pu').one()
            self.assertEqual(('vm-s1', ['10.0.0.1']),
                             (row.server_name, row.addresses))
        # A new engine knows them before it lists Nova (down here).
        self.nova.error = 'Nova is down'
        fresh = monitor.Monitor(
            'engine-2', 'host-1', registry=self.registry, adapter=self.nova,
            listener_factory=None, url_checker_factory=lambda t: self.urls,
            clock=lambda: self.time)
        fresh.tracker._notifier = self.monitor.tracker._notifier
        fresh.tick()
        target, _options = self.urls.submitted[-1]
        self.assertEqual(('vm-s1', ['10.0.0.1']),
                         (target.name, list(target.addresses)))


class TestRefreshSchedule(base.HeatHealthTestCase):

    def test_a_policy_held_under_a_new_generation_is_read_at_once(self):
        schedule = monitor.RefreshSchedule()
        held = {'pa': 1, 'pb': 1}
        policies = [_policy('pa'), _policy('pb', interval=60)]
        self.assertEqual(['pa', 'pb'], [p.id for p in schedule.due(
            policies, 100.0, held.get)])
        schedule.read(policies, 100.0, held.get)
        self.assertEqual([], schedule.due(policies, 101.0, held.get))
        # Another engine held pa in between, unseen: its rows are stale.
        held['pa'] = 3
        self.assertEqual(['pa'], [p.id for p in schedule.due(
            policies, 101.0, held.get)])
        schedule.read(policies[:1], 101.0, held.get)
        self.assertEqual([], schedule.due(policies, 102.0, held.get))
        # Otherwise every REFRESH_SECONDS at most.
        self.assertEqual(['pa', 'pb'], [p.id for p in schedule.due(
            policies, 101.0 + monitor.REFRESH_SECONDS, held.get)])
        # A policy let go and held again is read at once.
        schedule.due(policies[1:], 102.0, held.get)
        self.assertEqual(['pa'], [p.id for p in schedule.due(
            policies, 102.0, held.get)])

    def test_policies_read_apart_come_to_be_read_together(self):
        schedule = monitor.RefreshSchedule()
        held = {'pa': 1, 'pb': 1, 'pc': 1}
        pa, pb, pc = _policy('pa'), _policy('pb'), _policy('pc', interval=60)
        schedule.read([pa], 100.0, held.get)
        schedule.read([pb], 102.0, held.get)   # taken two seconds later
        schedule.read([pc], 104.0, held.get)
        self.assertEqual([], schedule.due([pa, pb, pc], 104.5, held.get))
        # pa is due: pb, due within half a period, comes along; pc not.
        due = schedule.due([pa, pb, pc], 105.0, held.get)
        self.assertEqual(['pa', 'pb'], [p.id for p in due])
        schedule.read(due, 105.0, held.get)
        self.assertEqual(['pa', 'pb', 'pc'], [p.id for p in schedule.due(
            [pa, pb, pc], 110.0, held.get)])

    def test_a_policy_whose_servers_version_grew_is_resolved_at_once(self):
        # Enabled again, say: its targets' grace must be seen in the tick
        # the switch is, or the planner acts on what the grace holds.
        schedule = monitor.RefreshSchedule()
        held = {'pa': 1}
        pa = _policy('pa', interval=60)
        pa.targets_version = 0
        schedule.read([pa], 100.0, held.get)
        schedule.rows_read([pa], 100.0, held.get)
        self.assertEqual([], schedule.due([pa], 101.0, held.get))
        pa.targets_version = 1
        self.assertEqual(['pa'], [p.id for p in schedule.due(
            [pa], 101.0, held.get)])
        self.assertEqual({'pa'}, schedule.rows_due([pa], 101.0, held.get))

    def test_rows_are_read_again_only_when_something_says_they_changed(self):
        schedule = monitor.RefreshSchedule()
        held = {'pa': 1, 'pb': 1}
        pa, pb = _policy('pa'), _policy('pb')
        pa.targets_version = pb.targets_version = 0
        self.assertEqual({'pa', 'pb'},
                         schedule.rows_due([pa, pb], 100.0, held.get))
        schedule.rows_read([pa, pb], 100.0, held.get)
        # Resolved every few seconds, the rows are not read again...
        self.assertEqual(set(), schedule.rows_due([pa, pb], 105.0, held.get))
        # ...unless their servers' version grew (a sync, a user's reset),
        pa.targets_version = 1
        # or the policy is held under a new generation,
        held['pb'] = 2
        self.assertEqual({'pa', 'pb'},
                         schedule.rows_due([pa, pb], 106.0, held.get))
        schedule.rows_read([pa, pb], 106.0, held.get)
        # or they were last read ROWS_SECONDS ago (to half as long again).
        self.assertEqual(set(), schedule.rows_due([pa, pb], 107.0, held.get))
        self.assertEqual(set(), schedule.rows_due(
            [pa, pb], 106.0 + monitor.ROWS_SECONDS - 1, held.get))
        self.assertEqual({'pa', 'pb'}, schedule.rows_due(
            [pa, pb], 106.0 + 1.5 * monitor.ROWS_SECONDS, held.get))

    def test_rows_read_together_are_not_read_again_together(self):
        schedule = monitor.RefreshSchedule(rnd=random.Random(1))
        held = collections.defaultdict(lambda: 1)
        policies = [_policy('p%d' % n) for n in range(100)]
        schedule.rows_read(policies, 100.0, held.__getitem__)
        # A takeover read them in one tick: the safety net reads them
        # again spread over half of ROWS_SECONDS, not all in one tick.
        due = [len(schedule.rows_due(
            policies, 100.0 + monitor.ROWS_SECONDS * (1 + k / 8.0),
            held.__getitem__)) for k in range(5)]
        self.assertEqual(sorted(due), due)
        self.assertLess(due[0], 10)
        self.assertTrue(20 < due[2] < 80, due)
        self.assertEqual(100, due[4])
