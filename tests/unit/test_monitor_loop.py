"""The monitor loop with a fake registry and a fake Nova."""

import types

from heat_health.common import nova_adapter
from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.engine.monitor import monitor
from tests.unit import base
from tests.unit import test_monitor_nova_status as fakes


def _policy(policy_id, interval=5, modes=('NODE_STATUS_POLLING',)):
    return types.SimpleNamespace(
        id=policy_id, stack_id='stack-' + policy_id, enabled=True,
        spec={'detection': {
            'interval': interval, 'recovery_conditional': 'ANY_FAILED',
            'detection_modes': [{'type': m, 'options': {'poll_url': 'u'}}
                                for m in modes]}})


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
    def __init__(self, policies, servers):
        self.policies = policies
        self.servers = servers
        self.in_progress = set()
        self.refreshed = []
        self.released = False

    def claim(self):
        return list(self.policies)

    def refresh_all(self, policies):
        self.refreshed.append(sorted(p.id for p in policies))
        result = {}
        with db_api._facade.writer.using(db_api._Session()) as session:
            for policy in policies:
                if session.get(models.Policy, policy.id) is None:
                    session.add(models.Policy(
                        id=policy.id, stack_id=policy.stack_id,
                        resource_name='health', project_id='p',
                        spec=policy.spec, enabled=True))
                    session.flush()
                    for server in self.servers[policy.id]:
                        session.add(models.Target(
                            policy_id=policy.id, server_id=server,
                            stack_id=policy.stack_id, resource_name=server,
                            path=server, state='HEALTHY'))
        with db_api._facade.reader.using(db_api._Session()) as session:
            for policy in policies:
                rows = session.query(models.Target).filter_by(
                    policy_id=policy.id).all()
                for row in rows:
                    session.expunge(row)
                result[policy.id] = rows
        return result

    def stack_in_progress(self, policy):
        return policy.id in self.in_progress

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
        with db_api._facade.reader.using(db_api._Session()) as session:
            return {(t.policy_id, t.server_id): t.state
                    for t in session.query(models.Target)}

    def test_one_nova_query_for_all_policies_when_due(self):
        self.monitor.tick()
        self.assertEqual(['all'], self.nova.calls)
        self.assertEqual([['pa', 'pb']], self.registry.refreshed)
        self.nova.changed = {'s2': nova_adapter.Server('SHUTOFF', {})}
        self.time += 1
        self.monitor.tick()
        self.assertEqual(1, len(self.nova.calls))  # nobody due yet
        self.time += 5
        self.monitor.tick()
        self.assertEqual(2, len(self.nova.calls))
        self.assertEqual('changed', self.nova.calls[1][0])
        states = self._states()
        self.assertEqual('UNHEALTHY', states[('pa', 's2')])
        self.assertEqual('UNHEALTHY', states[('pb', 's2')])
        self.assertEqual('HEALTHY', states[('pa', 's1')])

    def test_api_errors_change_nothing(self):
        self.monitor.tick()
        self.nova.error = 'computeFault: 500'
        for _ in range(3):
            self.time += 5
            self.monitor.tick()
        self.assertEqual({'HEALTHY'}, set(self._states().values()))

    def test_stack_in_progress_holds_decisions(self):
        self.registry.in_progress.add('pa')
        self.monitor.tick()
        self.nova.changed = {'s1': nova_adapter.Server('DELETED', {})}
        self.time += 5
        self.monitor.tick()
        self.assertEqual('HEALTHY', self._states()[('pa', 's1')])
        self.registry.in_progress.clear()
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
        # Nova is listed for the addresses, then the URLs are checked.
        self.assertEqual(['all'], self.nova.calls)
        self.assertEqual({('s1', ('10.0.0.1',)), ('s3', ('10.0.0.3',))},
                         {(t.server_id, tuple(t.addresses))
                          for t, _o in self.urls.submitted})
        self.assertEqual({'poll_url': 'u'}, self.urls.submitted[0][1])
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
        with db_api._facade.reader.using(db_api._Session()) as session:
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
