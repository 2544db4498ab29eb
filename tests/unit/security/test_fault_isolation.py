"""A tenant's failure never stops the others: the monitor on MariaDB.

A template decides resource names, nesting depth and (through some
resource types) physical ids. Before bounding, a path over the target
table's 1,024 characters or a physical id over 36 failed the policy's
target write on MariaDB, and with it every tick of the engine, for every
policy, while the leases stayed renewed. The real registry, monitor and
tracker run here on MariaDB (sqlite does not enforce VARCHAR lengths); only
Heat's side (which places a policy has) and Nova are doubles.
"""

import types
from unittest import mock

import fixtures
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import test_fixtures
from oslotest import base as test_base

from heat_health.common import nova_adapter
from heat_health.db import api as db_api
from heat_health.db import migration
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.monitor import monitor as monitor_mod
from heat_health.engine.ownership import place_limits
from heat_health.engine.ownership import registry as registry_mod
from heat_health.engine import report
from heat_health.policy import targets
from tests.unit import test_migrations
from tests.unit import test_monitor_nova_status as fakes

OK_SERVER = '11111111-1111-1111-1111-111111111111'
LONG_PATH_SERVER = '22222222-2222-2222-2222-222222222222'
NEXT_TO_BAD_ID = '33333333-3333-3333-3333-333333333333'
BAD_ID = 'x' * 37
# Nested provider templates with 255-character resource names.
LONG_PATH = '/'.join(['group'] + ['n' * 255] * 3 + ['n' * 242, 'server-0'])
assert len(LONG_PATH) == 1025
SPEC = {'targets': ['group'],
        'detection': {'interval': 5, 'recovery_conditional': 'ANY_FAILED',
                      'node_update_timeout': 0,
                      'detection_modes': [{'type': 'NODE_STATUS_POLLING'}]}}


def _place(stack_id, name, server_id, path):
    return {(stack_id, name): {'server_id': server_id, 'path': path,
                               'addresses': []}}


class FakeResolver(object):
    """Heat's side: the places each policy has, or an error reading them."""

    def __init__(self, places):
        self.places = places
        self.failing = {}    # policy id -> exception

    def resolve(self, ctxt, policies):
        for policy in policies:
            if policy.id in self.failing:
                raise self.failing[policy.id]
        return {p.id: targets.Resolution(
            places=dict(self.places[p.id]), busy=frozenset(),
            suspended=False, missing=[], fingerprint=())
            for p in policies}


class TestFaultIsolationMySQL(test_fixtures.OpportunisticDBTestMixin,
                              test_base.BaseTestCase):
    FIXTURE = test_migrations._MySQLFixture

    def setUp(self):
        super(TestFaultIsolationMySQL, self).setUp()
        self.assertEqual('mysql', db_api.get_engine().dialect.name)
        migration.db_sync()
        self.log = self.useFixture(fixtures.FakeLogger(
            name=registry_mod.__name__))
        places = {
            'healthy': _place('stack-healthy', 'group', OK_SERVER,
                              'group'),
            'long-path': _place('nested-1', 'server-0', LONG_PATH_SERVER,
                                LONG_PATH),
            'bad-id': _place('nested-2', 'server-0', BAD_ID,
                             'group/server-0'),
        }
        places['bad-id'].update(_place('nested-2', 'server-1',
                                       NEXT_TO_BAD_ID, 'group/server-1'))
        with db_session.facade.writer.using(db_session.Session()) as session:
            for policy_id in places:
                session.add(models.Policy(
                    id=policy_id, stack_id='stack-' + policy_id,
                    resource_name='health', project_id='tenant-' + policy_id,
                    spec=SPEC, enabled=True))
        self.resolver = FakeResolver(places)
        self.registry = registry_mod.Registry('engine-1', lease_seconds=60)
        self.registry._resolver = self.resolver
        self.nova = fakes.FakeNova({
            s: nova_adapter.Server('ACTIVE', ['10.0.0.1'], 'vm')
            for s in (OK_SERVER, LONG_PATH_SERVER, NEXT_TO_BAD_ID)})
        self.time = 1000.0
        self.monitor = monitor_mod.Monitor(
            'engine-1', 'host-1', registry=self.registry, adapter=self.nova,
            listener_factory=None, url_checker_factory=None,
            clock=lambda: self.time)
        self.monitor.tracker._notifier = types.SimpleNamespace(
            info=lambda *a: None)

    def _states(self):
        with db_session.facade.reader.using(db_session.Session()) as session:
            return {t.server_id: t.state
                    for t in session.query(models.Target)}

    def _policy_report(self, policy_id):
        policy, = report.health_report('stack-' + policy_id)['policies']
        return policy

    def _power_off(self, *servers):
        self.nova.changed = {s: nova_adapter.Server('SHUTOFF', ['10.0.0.1'],
                                                    'vm')
                             for s in servers}
        self.time += 5
        self.monitor.tick()

    def test_long_path_and_long_id_leave_every_power_off_detected(self):
        self.monitor.tick()
        self.assertEqual({OK_SERVER: 'HEALTHY', LONG_PATH_SERVER: 'HEALTHY',
                          NEXT_TO_BAD_ID: 'HEALTHY'}, self._states())

        self._power_off(OK_SERVER, LONG_PATH_SERVER, NEXT_TO_BAD_ID)
        self.assertEqual({OK_SERVER: 'UNHEALTHY',
                          LONG_PATH_SERVER: 'UNHEALTHY',
                          NEXT_TO_BAD_ID: 'UNHEALTHY'}, self._states())

        # The long path is watched under a shortened path that keeps its
        # first name and its end, around a digest of the whole.
        shown, = self._policy_report('long-path')['targets']
        self.assertLessEqual(len(shown['path']), 1024)
        self.assertTrue(shown['path'].startswith('group/...'))
        self.assertTrue(shown['path'].endswith('/server-0'))
        self.assertIsNone(self._policy_report('long-path')['error'])
        # The id no Nova server has is not watched, and the report says so;
        # the policy's other server is.
        bad = self._policy_report('bad-id')
        self.assertEqual([NEXT_TO_BAD_ID],
                         [t['server_id'] for t in bad['targets']])
        self.assertIn('resource group/server-0 is not watched: its physical '
                      'id %s (37 characters) is not a Nova server id'
                      % BAD_ID, bad['error'])
        self.assertIsNone(self._policy_report('healthy')['error'])

    def test_a_refused_place_stays_reported_while_its_tree_is_quiet(self):
        kept = {}
        resolve = self.resolver.resolve

        def keeping(ctxt, policies):
            # As the resolver keeps the Resolution of a quiet tree.
            return {pid: kept.setdefault(pid, found) for pid, found in
                    resolve(ctxt, policies).items()}
        self.resolver.resolve = keeping
        self.monitor.tick()
        with mock.patch.object(place_limits, 'bounded',
                               wraps=place_limits.bounded) as bounded:
            self.time += monitor_mod.REFRESH_SECONDS + 1
            self.monitor.tick()
        bounded.assert_not_called()
        self.assertIn('(37 characters) is not a Nova server id',
                      self._policy_report('bad-id')['error'])
        self._power_off(NEXT_TO_BAD_ID)
        self.assertEqual('UNHEALTHY', self._states()[NEXT_TO_BAD_ID])

    def test_any_error_of_one_policy_is_kept_shown_and_retried(self):
        # Without bounding, MariaDB refuses the long values themselves.
        self.useFixture(fixtures.MockPatchObject(
            place_limits, 'bounded', side_effect=lambda places: (places,
                                                                 {})))
        self.monitor.tick()
        self.assertEqual({OK_SERVER: 'HEALTHY'}, self._states())
        for policy_id in ('long-path', 'bad-id'):
            error = self._policy_report(policy_id)['error']
            self.assertTrue(error.startswith(
                'its targets could not be stored: (pymysql.err.DataError) '
                '(1406, "Data too long for column '), error)

        # Heat's database fails for one policy alone: the others go on.
        self.resolver.failing['long-path'] = db_exc.DBConnectionError(
            'Lost connection to MySQL server during query')
        for _tick in range(3):
            self._power_off(OK_SERVER)
        self.assertEqual({OK_SERVER: 'UNHEALTHY'}, self._states())
        self.assertEqual(
            'its stack could not be read: Lost connection to MySQL server '
            'during query', self._policy_report('long-path')['error'])
        # Logged once per distinct error, not at every refresh.
        self.assertEqual(1, self.log.output.count(
            'Policy long-path of stack stack-long-path is not watched '
            'fully, its stack could not be read'))

        # Retried at each refresh: once it can be stored, the error clears.
        del self.resolver.failing['long-path']
        self.useFixture(fixtures.MockPatchObject(
            place_limits, 'bounded', side_effect=self._real_bounded))
        self.time += 5
        self.monitor.tick()
        self.assertIsNone(self._policy_report('long-path')['error'])
        self.assertEqual('HEALTHY', self._states()[LONG_PATH_SERVER])
        self.assertIn('Policy long-path is watched fully again',
                      self.log.output)

    _real_bounded = staticmethod(place_limits.bounded)
