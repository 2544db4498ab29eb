"""The planner's rules: brake, limits, back-off, give-up, escalation."""

import datetime
import types
import unittest

from heat_health.engine.monitor import states
from heat_health.engine.recovery import planner
from heat_health.policy import spec as policy_spec

NOW = datetime.datetime(2026, 11, 23, 12, 0, 0)


def _policy(recovery=None, frozen=None, busy=(), grace=300, paused=None):
    spec = policy_spec.PolicySpec.parse({
        'targets': ['group'], 'recovery': recovery or {},
        'detection': {'node_update_timeout': grace}})
    return types.SimpleNamespace(spec=spec, busy=busy, paused=paused,
                                 frozen=lambda: frozen)


PAUSED = {'by': 'ops', 'at': NOW, 'reason': 'kernel upgrade'}


def _target(n, state=states.HEALTHY, **kw):
    values = dict(id=n, server_id='s%d' % n, state=state, reason='down',
                  since=NOW - datetime.timedelta(seconds=5), recovery=None,
                  attempts=0, first_attempt_at=None, next_attempt_at=None,
                  grace_until=None, place=('stack', 'r%d' % n),
                  path='group/r%d' % n)
    values.update(kw)
    return types.SimpleNamespace(**values)


def _kinds(plan):
    return [(type(s).__name__, s.target.id) if hasattr(s, 'target') else
            (type(s).__name__, tuple(t.id for t in s.targets))
            for s in plan.steps]


class PlanTest(unittest.TestCase):

    def test_unhealthy_target_is_started_at_the_first_step(self):
        plan = planner.plan(_policy(), [_target(1, states.UNHEALTHY),
                                        _target(2)], NOW)
        self.assertIsNone(plan.brake)
        [step] = plan.steps
        self.assertIsInstance(step, planner.Start)
        self.assertEqual((0, 1), (step.step, step.attempt))

    def test_observe_mode_never_starts(self):
        plan = planner.plan(_policy({'mode': 'OBSERVE'}),
                            [_target(1, states.UNHEALTHY)], NOW)
        self.assertEqual(planner.Plan(None, []), plan)

    def test_frozen_busy_and_grace_hold(self):
        for policy, target in [
                (_policy(frozen='the policy is disabled'),
                 _target(1, states.UNHEALTHY)),
                (_policy(busy=(('stack', 'r1'),)),
                 _target(1, states.UNHEALTHY)),
                (_policy(), _target(1, states.UNHEALTHY,
                                    grace_until=NOW +
                                    datetime.timedelta(seconds=9)))]:
            plan = planner.plan(policy, [target], NOW)
            self.assertEqual([('Hold', 1)], _kinds(plan))

    def test_three_of_four_down_brakes_and_two_of_four_do_not(self):
        four = [_target(n, states.UNHEALTHY if n < 3 else states.HEALTHY)
                for n in range(4)]
        plan = planner.plan(_policy({'max_concurrent': 4}), four, NOW)
        self.assertIn('3 of 4', plan.brake)
        self.assertEqual({'Hold'}, {k for k, _ in _kinds(plan)})
        four[2].state = states.HEALTHY
        four[1].state = states.HEALTHY
        plan = planner.plan(_policy(), four, NOW)
        self.assertIsNone(plan.brake)
        self.assertEqual([('Start', 0)], _kinds(plan))

    def test_two_of_three_down_is_not_a_mass_failure(self):
        three = [_target(0, states.UNHEALTHY), _target(1, states.UNHEALTHY),
                 _target(2)]
        plan = planner.plan(_policy({'max_concurrent': 2}), three, NOW)
        self.assertIsNone(plan.brake)
        self.assertEqual([('Start', 0), ('Start', 1)], _kinds(plan))

    def test_blind_observers_brake(self):
        plan = planner.plan(_policy(), [_target(1, states.UNHEALTHY)], NOW,
                            blind='Nova API unavailable')
        self.assertIn('cannot see', plan.brake)
        self.assertEqual([('Hold', 1)], _kinds(plan))

    def test_concurrency_limits_of_policy_and_engine(self):
        targets = [_target(n, states.UNHEALTHY) for n in range(2)] + [
            _target(n) for n in range(2, 10)]
        plan = planner.plan(_policy({'max_concurrent': 1}), targets, NOW)
        self.assertEqual([('Start', 0), ('Hold', 1)], _kinds(plan))
        plan = planner.plan(_policy({'max_concurrent': 5}), targets, NOW,
                            engine_room=0)
        self.assertEqual([('Hold', 0), ('Hold', 1)], _kinds(plan))
        targets[2].state = states.VERIFYING
        targets[2].recovery = {'deadline': (NOW + datetime.timedelta(
            seconds=60)).isoformat()}
        plan = planner.plan(_policy({'max_concurrent': 1}), targets, NOW)
        self.assertEqual([('Hold', 0), ('Hold', 1)], _kinds(plan))

    def test_back_off_holds_until_the_next_attempt(self):
        target = _target(1, states.UNHEALTHY, attempts=2,
                         first_attempt_at=NOW - datetime.timedelta(
                             seconds=60),
                         next_attempt_at=NOW + datetime.timedelta(
                             seconds=20))
        plan = planner.plan(_policy(), [target], NOW)
        self.assertEqual([('Hold', 1)], _kinds(plan))
        self.assertIn('backing off', plan.steps[0].reason)
        target.next_attempt_at = NOW
        [step] = planner.plan(_policy(), [target], NOW).steps
        self.assertEqual(3, step.attempt)

    def test_gives_up_after_max_attempts_within_the_window(self):
        target = _target(1, states.UNHEALTHY, attempts=3,
                         first_attempt_at=NOW - datetime.timedelta(
                             seconds=100))
        spec = {'max_attempts': 3, 'attempt_window': 600}
        [step] = planner.plan(_policy(spec), [target], NOW).steps
        self.assertIsInstance(step, planner.GiveUp)
        # Outside the window the count starts again.
        target.first_attempt_at = NOW - datetime.timedelta(seconds=601)
        [step] = planner.plan(_policy(spec), [target], NOW).steps
        self.assertEqual((planner.Start, 1), (type(step), step.attempt))

    def test_backoff_doubles_to_the_maximum_with_noise(self):
        spec = policy_spec.RecoverySpec.parse({
            'backoff_initial': 10, 'backoff_max': 60,
            'backoff_jitter': 0.2})
        self.assertEqual([10, 20, 40, 60, 60],
                         [spec.backoff(n) for n in range(1, 6)])
        self.assertEqual(12.0, spec.backoff(1, 1.0))
        self.assertEqual(8.0, spec.backoff(1, -1.0))

    def test_verification_past_its_deadline_escalates(self):
        target = _target(1, states.VERIFYING, recovery={
            'step': 0, 'action': 'REBOOT', 'verify_seconds': 30,
            'deadline': (NOW - datetime.timedelta(seconds=1)).isoformat()})
        [step] = planner.plan(_policy(), [target], NOW).steps
        self.assertEqual((planner.Escalate, 1),
                         (type(step), step.next_step))
        target.recovery['deadline'] = (
            NOW + datetime.timedelta(seconds=1)).isoformat()
        self.assertEqual([], planner.plan(_policy(), [target], NOW).steps)

    def test_pause_holds_new_actions_and_carries_issued_ones_through(self):
        failed = _target(1, states.UNHEALTHY)
        overdue = _target(2, states.VERIFYING, recovery={
            'step': 0, 'action': 'REBOOT', 'verify_seconds': 30,
            'deadline': (NOW - datetime.timedelta(seconds=1)).isoformat()})
        issued = _target(3, states.RECOVERING, recovery={'stage': 'issuing'})
        decided = _target(4, states.RECOVERING, recovery={'stage': 'intent'})
        plan = planner.plan(_policy(paused=PAUSED),
                            [failed, overdue, issued, decided], NOW)
        self.assertEqual([('Hold', 1), ('Hold', 2), ('Advance', 3),
                          ('Hold', 4)],
                         sorted(_kinds(plan), key=lambda k: k[1]))
        self.assertEqual({'healing paused by ops: kernel upgrade'},
                         {s.reason for s in plan.steps
                          if isinstance(s, planner.Hold)})
        # A disabled policy says so first; resumed, both act again.
        plan = planner.plan(_policy(frozen='the policy is disabled',
                                    paused=PAUSED), [failed], NOW)
        self.assertEqual('the policy is disabled', plan.steps[0].reason)
        plan = planner.plan(_policy({'max_concurrent': 2}), [failed, overdue],
                            NOW)
        self.assertEqual([('Escalate', 2), ('Start', 1)],
                         sorted(_kinds(plan)))

    def test_escalated_target_starts_at_its_next_step(self):
        target = _target(1, states.UNHEALTHY, recovery={
            'stage': 'escalate', 'next_step': 2}, attempts=1,
            first_attempt_at=NOW, next_attempt_at=NOW)
        [step] = planner.plan(_policy(), [target], NOW).steps
        self.assertEqual((2, 2), (step.step, step.attempt))

    def test_recovering_target_is_carried_on_even_under_the_brake(self):
        targets = [_target(n, states.UNHEALTHY) for n in range(3)] + [
            _target(3, states.RECOVERING, recovery={'stage': 'fenced'})]
        plan = planner.plan(_policy(), targets, NOW)
        self.assertIsNotNone(plan.brake)
        self.assertIn(('Advance', 3), _kinds(plan))
        self.assertNotIn('Start', {k for k, _ in _kinds(plan)})

    def _recreating(self, n, stage, marked_ago=None):
        recovery = {'action': 'RECREATE', 'stage': stage}
        if marked_ago is not None:
            recovery['marked_at'] = (
                NOW - datetime.timedelta(seconds=marked_ago)).isoformat()
        return _target(n, states.RECOVERING, recovery=recovery)

    def test_marked_targets_are_replaced_by_one_step(self):
        targets = [self._recreating(n, 'marked', 0.1) for n in range(3)] + [
            _target(3)]
        plan = planner.plan(_policy(), targets, NOW, gather=0.5)
        self.assertEqual([('ReplaceMarked', (0, 1, 2))], _kinds(plan))

    def test_marked_targets_wait_for_others_on_the_way_within_gather(self):
        for other in (self._recreating(2, 'fencing'),
                      _target(2, states.UNHEALTHY)):
            targets = [self._recreating(0, 'marked', 0.1),
                       self._recreating(1, 'marked', 0.3), other] + [
                           _target(n) for n in range(3, 12)]
            policy = _policy({'max_concurrent': 5})
            plan = planner.plan(policy, targets, NOW, gather=0.5)
            self.assertNotIn('ReplaceMarked', {k for k, _ in _kinds(plan)})
            # ...at most the gather window from the first mark.
            targets[1].recovery['marked_at'] = (
                NOW - datetime.timedelta(seconds=0.5)).isoformat()
            plan = planner.plan(policy, targets, NOW, gather=0.5)
            self.assertIn(('ReplaceMarked', (0, 1)), _kinds(plan))
        # One being started by this engine counts as on its way too.
        targets = [self._recreating(0, 'marked', 0.1), _target(1)]
        plan = planner.plan(_policy(), targets, NOW, running={1},
                            gather=0.5)
        self.assertEqual([], _kinds(plan))

    def test_each_stack_has_its_own_update_by_stack(self):
        targets = [self._recreating(0, 'marked', 0.1),
                   self._recreating(1, 'marked', 0.1),
                   self._recreating(2, 'marked', 0.1),
                   self._recreating(3, 'fencing')]
        for target, stack in zip(targets, ['m0', 'm1', 'm0', 'm1']):
            target.stack_id = stack
        policy = _policy({'max_concurrent': 5})
        plan = planner.plan(policy, targets, NOW, gather=0.5, by_stack=True)
        # m1's waits for 3, on its way to its mark; m0's does not.
        self.assertEqual([('Advance', 3), ('ReplaceMarked', (0, 2))],
                         _kinds(plan))
        # One update of the policy's stack waits for 3 too.
        plan = planner.plan(policy, targets, NOW, gather=0.5)
        self.assertEqual([('Advance', 3)], _kinds(plan))
        targets[3].recovery['stage'] = 'marked'
        plan = planner.plan(policy, targets, NOW, gather=0.5, by_stack=True)
        self.assertEqual([('ReplaceMarked', (0, 2)),
                          ('ReplaceMarked', (1, 3))], _kinds(plan))

    def test_members_replaced_whole_share_their_groups_update(self):
        # Each member's server is in a stack of its own; the members are
        # marked in their group's stack, whose one update replaces them.
        targets = [self._recreating(n, 'marked', 0.1) for n in range(3)]
        for n, target in enumerate(targets):
            target.stack_id = 'member-%d' % n
            target.recovery['member'] = {
                'stack_id': 'group' if n < 2 else 'other-group',
                'name': 'm%d' % n, 'nested_id': 'member-%d' % n}
        policy = _policy({'max_concurrent': 5})
        plan = planner.plan(policy, targets, NOW, gather=0.5, by_stack=True)
        self.assertEqual([('ReplaceMarked', (0, 1)),
                          ('ReplaceMarked', (2,))], _kinds(plan))

    def test_a_paused_policy_holds_its_marked_targets(self):
        policy = _policy()
        policy.paused = {'by': 'ops', 'at': NOW, 'reason': 'maintenance'}
        plan = planner.plan(policy, [self._recreating(0, 'marked', 1)], NOW)
        self.assertEqual([('Hold', 0)], _kinds(plan))

    def test_attempts_reset_after_a_healthy_period(self):
        target = _target(1, states.HEALTHY, attempts=2,
                         since=NOW - datetime.timedelta(seconds=601))
        [step] = planner.plan(_policy(), [target], NOW).steps
        self.assertIsInstance(step, planner.ResetAttempts)
        target.since = NOW - datetime.timedelta(seconds=599)
        self.assertEqual([], planner.plan(_policy(), [target], NOW).steps)


class VerifyingTransitionTest(unittest.TestCase):
    """What the tracker's rule does with a recovery's states."""

    def _verdicts(self, verdict):
        from heat_health.policy import observation as obs
        return {obs.NODE_STATUS_POLLING: obs.Observation(
            's1', verdict, 'Nova status', obs.NODE_STATUS_POLLING, NOW)}

    def test_recovering_ignores_verdicts(self):
        from heat_health.policy import observation as obs
        spec = _policy().spec
        self.assertEqual(states.NOTHING, states.transition(
            states.RECOVERING, self._verdicts(obs.HEALTHY), NOW, spec))

    def test_verifying_needs_the_success_threshold(self):
        from heat_health.policy import observation as obs
        spec = _policy({'success_threshold': 2}).spec
        healthy = self._verdicts(obs.HEALTHY)
        self.assertIsNone(states.transition(
            states.VERIFYING, healthy, NOW, spec, streak=1).decision)
        result = states.transition(states.VERIFYING, healthy, NOW, spec,
                                   streak=2)
        self.assertEqual(states.HEALTHY, result.decision.state)
        self.assertTrue(result.decision.reason.startswith('recovered'))
        self.assertIsNone(states.transition(
            states.VERIFYING, self._verdicts(obs.UNHEALTHY), NOW,
            spec).decision)

    def test_gave_up_ends_only_when_healthy(self):
        from heat_health.policy import observation as obs
        spec = _policy().spec
        self.assertIsNone(states.transition(
            states.GAVE_UP, self._verdicts(obs.UNHEALTHY), NOW,
            spec).decision)
        self.assertEqual(states.HEALTHY, states.transition(
            states.GAVE_UP, self._verdicts(obs.HEALTHY), NOW,
            spec).decision.state)

    def test_verifying_needs_every_detector_to_agree(self):
        from heat_health.policy import observation as obs
        spec = policy_spec.PolicySpec.parse({
            'targets': ['g'], 'detection': {'detection_modes': [
                {'type': 'LIFECYCLE_EVENTS'},
                {'type': 'NODE_STATUS_POLL_URL'}]}})
        events = {obs.LIFECYCLE_EVENTS: obs.Observation(
            's1', obs.HEALTHY, 'instance.reboot.end', obs.LIFECYCLE_EVENTS,
            NOW)}
        self.assertIsNone(states.transition(
            states.VERIFYING, events, NOW, spec, streak=1).decision)
        events[obs.NODE_STATUS_POLL_URL] = obs.Observation(
            's1', obs.HEALTHY, '200', obs.NODE_STATUS_POLL_URL, NOW)
        self.assertEqual(states.HEALTHY, states.transition(
            states.VERIFYING, events, NOW, spec, streak=2).decision.state)


class RestoreTest(unittest.TestCase):

    def test_healthy_with_drained_members_is_restored_once(self):
        drained = {'drained': {'pool-1': ['10.0.0.5', 5]}}
        plan = planner.plan(_policy(), [_target(1, recovery=drained)], NOW)
        self.assertEqual([('Restore', 1)], _kinds(plan))
        done = dict(drained, restored=True)
        plan = planner.plan(_policy(), [_target(1, recovery=done)], NOW)
        self.assertEqual([], _kinds(plan))

    def test_a_finished_recovery_keeps_only_what_is_to_restore(self):
        from heat_health.db import api as db_api
        self.assertEqual(
            {'drained': {'pool-1': ['10.0.0.5', 5]}},
            db_api.leftovers({'action': 'REBOOT', 'stage': 'issued',
                              'drained': {'pool-1': ['10.0.0.5', 5]}}))
        self.assertIsNone(db_api.leftovers({'action': 'REBOOT'}))
        self.assertIsNone(db_api.leftovers(
            {'drained': {'pool-1': ['10.0.0.5', 5]}, 'restored': True}))
        self.assertIsNone(db_api.leftovers(None))
        self.assertEqual({'marked_failed': 's1'}, db_api.leftovers(
            {'action': 'RECREATE', 'marked_failed': 's1'}))
