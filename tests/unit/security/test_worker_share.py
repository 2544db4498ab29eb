"""One project cannot hold the engine's recovery workers.

Each project gets at most its share of them
(``max_concurrent_recoveries_per_project``), and a busy load balancer is
waited for across passes, never in a worker for its whole
``lb_status_timeout``.
"""

import types
import unittest
from unittest import mock

from oslo_config import cfg

from heat_health.engine.monitor import states
from heat_health.engine.recovery import loop
from heat_health.policy import spec as policy_spec
from tests.unit.test_recovery_loop import _policy
from tests.unit.test_recovery_loop import _store_enabled
from tests.unit.test_recovery_loop import FakeReplacer
from tests.unit.test_recovery_loop import FakeTracker
from tests.unit.test_recovery_loop import StoppedNova


class RecordingExecutor(object):
    """Takes the steps without running them: they stay under way."""

    def __init__(self):
        self.submitted = []

    def submit(self, func, policy, step):
        self.submitted.append((policy.project_id, type(step).__name__,
                               step.target.id))

    def shutdown(self, **kwargs):
        pass


class ProjectShareTest(unittest.TestCase):
    """One project's failures never take every recovery worker."""

    def _policy(self, policy_id, project_id):
        return types.SimpleNamespace(
            id=policy_id, stack_id='stack-' + policy_id,
            project_id=project_id, generation=1, busy=(), paused=None,
            frozen=lambda: None, spec=policy_spec.PolicySpec.parse({
                'targets': ['g'], 'recovery': {'max_concurrent': 100}}))

    def _failing(self, first, count, state=states.UNHEALTHY):
        return [types.SimpleNamespace(
            id=n, server_id='s%d' % n, stack_id='nested', place=('n', n),
            resource_name=str(n), path='g/%d' % n, state=state,
            reason='down', since=None, grace_until=None, recovery=None,
            attempts=0, first_attempt_at=None, next_attempt_at=None)
            for n in range(first, first + count)]

    def test_a_project_gets_at_most_its_share_of_the_workers(self):
        cfg.CONF.set_override('max_concurrent_recoveries', 10,
                              group='heat_health')
        cfg.CONF.set_override('max_concurrent_recoveries_per_project', 3,
                              group='heat_health')
        self.addCleanup(cfg.CONF.clear_override,
                        'max_concurrent_recoveries', group='heat_health')
        self.addCleanup(cfg.CONF.clear_override,
                        'max_concurrent_recoveries_per_project',
                        group='heat_health')
        # The noisy project has two policies and twenty failing servers
        # (of eighty: not enough for the brake).
        policies = [self._policy('noisy-1', 'noisy'),
                    self._policy('noisy-2', 'noisy'),
                    self._policy('quiet', 'quiet')]
        targets = {'noisy-1': (self._failing(0, 10) + self._failing(
                       200, 30, states.HEALTHY)),
                   'noisy-2': (self._failing(10, 10) + self._failing(
                       300, 30, states.HEALTHY)),
                   'quiet': self._failing(100, 1)}
        tracker = types.SimpleNamespace(policies=lambda: policies,
                                        targets_of=targets.get,
                                        reread_unknown=set)
        executor = RecordingExecutor()
        recovery = loop.RecoveryLoop('engine', tracker, FakeReplacer(),
                                     actions=lambda stack_id: None,
                                     conf=cfg.CONF, executor=executor)
        holds = []
        recovery.timeline = mock.Mock()
        recovery.timeline.hold.side_effect = (
            lambda policy, target, reason, now: holds.append(
                (target.id, reason)))

        recovery.run_once()
        started = [(project, target) for project, kind, target
                   in executor.submitted if kind == 'Start']
        self.assertEqual([('noisy', 0), ('noisy', 1), ('noisy', 2),
                          ('quiet', 100)], started)
        self.assertEqual(17, len(holds))
        self.assertEqual({"waiting: 3 recoveries of this project at once "
                          "at most (the engine's share per project)"},
                         {reason for _t, reason in holds})

        # Their starts still under way: the next pass starts no more.
        recovery.run_once()
        self.assertEqual(4, len(executor.submitted))


class BusyDrainer(object):
    """A load balancer busy for the first ``busy`` passes."""

    def __init__(self, busy):
        self.busy = busy
        self.calls = []

    def drain(self, stack_id, drained, waited=0, settle=True, cohort=None):
        self.calls.append(waited)
        if len(self.calls) <= self.busy:
            raise loop.lb_drain.NotYet('load balancer lb busy')
        return drained


class DrainAcrossPassesTest(unittest.TestCase):
    """A busy load balancer frees the worker; the drain goes on later."""

    def test_the_action_waits_for_the_drain_across_passes(self):
        _store_enabled(self)
        drainer = BusyDrainer(busy=2)
        tracker = FakeTracker()
        now = [loop.timeutils.utcnow()]
        recovery = loop.RecoveryLoop(
            'engine', tracker, FakeReplacer(), actions=lambda s: None,
            drainer=drainer, conf=cfg.CONF, clock=lambda: now[0])
        self.addCleanup(recovery._pool.shutdown)
        recovery.timeline = mock.Mock()
        nova = mock.Mock()
        # Still stopped, by nobody (Nova's power sync): still failing.
        nova.status.return_value = StoppedNova().status('old')
        nova.instance_actions.return_value = []
        target = types.SimpleNamespace(
            id=1, server_id='old', stack_id='nested', resource_name='0',
            path='g/0', state=states.RECOVERING, reason='down', verdicts={},
            recovery={'action': 'REBOOT', 'params': {'type': 'HARD'},
                      'stage': 'intent', 'step': 0,
                      'drained': {'pool': ['10.0.0.5', 1]}})
        for _pass in range(2):
            recovery._carry_on(_policy(), target, nova)
            now[0] += loop.datetime.timedelta(seconds=3)
        # Its start was stored before the first try; nothing sent yet.
        started = target.recovery['drain_started']
        self.assertEqual([], nova.run.call_args_list)
        recovery._carry_on(_policy(), target, nova)
        self.assertEqual([0.0, 3.0, 6.0], drainer.calls)
        self.assertEqual(started, target.recovery['drain_started'])
        self.assertEqual(1, nova.run.call_count)
