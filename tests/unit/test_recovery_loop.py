"""The recovery loop's exactly-once rules for a RECREATE under way."""

import threading
import types
import unittest
from unittest import mock

from oslo_config import cfg

from heat_health.common import config  # noqa: F401
from heat_health.engine.monitor import states
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import loop
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import planner
from heat_health.objects import policy as policy_object
from heat_health.policy import spec as policy_spec


class FakeReplacer(object):
    def __init__(self, status=('UPDATE', 'COMPLETE'), replaced=False,
                 resource=('CHECK', 'FAILED'), holds='old'):
        self.status = status
        self.statuses = {}      # stack id -> its own status
        self.is_replaced = replaced
        self.holds = holds
        self.state = resource
        self.updates = []
        self.marks = []
        self.traversals = {}    # stack id -> its latest action's id

    def stack_status(self, stack_id):
        return self.statuses.get(stack_id, self.status)

    def traversal(self, stack_id):
        return self.traversals.get(stack_id)

    def replaced(self, stack_id, name, old):
        return self.is_replaced

    def resource(self, stack_id, name):
        return heat_replace.ResourceState('old', self.state[0],
                                          self.state[1], '')

    def mark_failed(self, stack_id, name, reason, server_id=None):
        if server_id != self.holds:
            raise heat_replace.ServerMoved('holds %s' % self.holds)
        self.marks.append(name)
        return server_id

    def stack_to_update(self, root, stack_id, name):
        # replacement_update_stack = own: the stack holding the resource.
        return stack_id

    def update_target(self, root, stack_id, name):
        self.updates.append(stack_id)
        self.traversals[stack_id] = 'update-%d' % len(self.updates)
        return stack_id

    def record_event(self, *args, **kwargs):
        pass


class StoppedNova(object):
    """Nova showing the old server stopped by nobody: still failing."""

    def status(self, server_id):
        return nova_actions.ServerStatus(
            server_id, 'SHUTOFF', 'stopped', None, 4, 'image', None)

    def instance_actions(self, server_id):
        return []


class FakeTracker(object):
    def __init__(self):
        self.steps = []

    def store_step(self, target, expect, state, reason, columns=None,
                   source='recovery', at=None, announce=True):
        self.steps.append((expect, state, reason))
        target.state = state
        if columns and 'recovery' in columns:
            target.recovery = columns['recovery']
        return True

    def targets_of(self, policy_id):
        return []

    def stuck_after(self, server_id):
        return 30

    def look_again(self, server_id):
        pass

    def store_columns(self, target, columns):
        for name, value in columns.items():
            setattr(target, name, value)
        return True


def _policy():
    return types.SimpleNamespace(
        id='p', stack_id='root', generation=1, busy=(), frozen=lambda: None,
        spec=policy_spec.PolicySpec.parse({
            'targets': ['g'], 'recovery': {'actions': [{'name': 'RECREATE'}]}
        }))


def _target(stage, index=0, stack_id='nested', **recovery):
    return types.SimpleNamespace(
        id=index + 1, server_id='old', stack_id=stack_id,
        resource_name=str(index), path='g/%d' % index,
        state=states.RECOVERING, reason='down', verdicts={},
        recovery=dict(recovery, action='RECREATE', stage=stage,
                      old_server_id='old', step=0))


def _store_enabled(test):
    """The policy as stored: enabled, not suspended or paused."""
    stored = types.SimpleNamespace(enabled=True, suspended=False,
                                   paused=None, parsed=_policy().spec)
    patcher = mock.patch.object(policy_object.Policy, 'get',
                                return_value=stored)
    patcher.start()
    test.addCleanup(patcher.stop)


class RecreateTest(unittest.TestCase):

    def setUp(self):
        _store_enabled(self)

    def _loop(self, replacer):
        self.tracker = FakeTracker()
        return loop.RecoveryLoop('engine', self.tracker, replacer,
                                 actions=lambda stack_id: StoppedNova(),
                                 conf=cfg.CONF)

    def _advance(self, target):
        self.recovery._advance(_policy(), target, None)

    def _replace(self, *targets):
        self.recovery._replace_marked(_policy(),
                                      planner.ReplaceMarked(targets))

    def tearDown(self):
        self.recovery._pool.shutdown()

    def test_an_update_in_progress_holds_the_marking(self):
        replacer = FakeReplacer(status=('UPDATE', 'IN_PROGRESS'))
        self.recovery = self._loop(replacer)
        self._advance(_target('intent'))
        self.assertEqual([], replacer.updates)
        self.assertEqual([], replacer.marks)

    def test_updating_and_already_replaced_asks_nothing_more(self):
        replacer = FakeReplacer(replaced=True)
        self.recovery = self._loop(replacer)
        self._advance(_target('updating', updates=1))
        self.assertEqual([], replacer.updates)

    def test_an_update_that_ended_without_replacing_is_asked_once_more(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        target = _target('updating', updates=1)
        self._advance(target)
        # Marked again: asked with whatever else is marked by then.
        self.assertEqual('marked', target.recovery['stage'])
        self.assertEqual([], replacer.updates)
        self._replace(target)
        self.assertEqual(['nested'], replacer.updates)
        self.assertEqual(2, target.recovery['updates'])
        # The next pass while heat-engine works: nothing more.
        replacer.status = ('UPDATE', 'IN_PROGRESS')
        self._advance(target)
        self.assertEqual(['nested'], replacer.updates)

    def test_a_superseded_update_is_asked_again_then_given_up(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        target = _target('updating', updates=loop.MAX_UPDATES)
        self._advance(target)
        self.assertEqual([], replacer.updates)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertIn('superseded', self.tracker.steps[-1][2])

    def test_a_mark_wakes_the_pass_that_asks_for_its_update_once_done(self):
        # A pass woken while the marking step still runs finds its target
        # busy and leaves the update to the pass after, a tick later.
        self.recovery = self._loop(FakeReplacer())
        target = _target('intent')
        wakes = []
        self.recovery.wake = lambda gather=True: wakes.append(
            (gather, target.id in self.recovery._running))
        self.recovery._running[target.id] = (_policy().id, planner.Advance)
        self.recovery._carry_out(_policy(), planner.Advance(target))
        self.assertEqual('marked', target.recovery['stage'])
        self.assertEqual([(False, False)], wakes)
        # Its next step, already marked, wakes no pass of its own.
        self.recovery._running[target.id] = (_policy().id, planner.Advance)
        self.recovery._carry_out(_policy(), planner.Advance(target))
        self.assertEqual([(False, False)], wakes)

    def test_intent_marks_then_updates(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        target = _target('intent')
        self._advance(target)
        self.assertEqual(['0'], replacer.marks)
        self.assertEqual([], replacer.updates)
        self.assertEqual('marked', target.recovery['stage'])
        self._advance(target)           # the update is not its own
        self.assertEqual([], replacer.updates)
        self._replace(target)
        self.assertEqual(['nested'], replacer.updates)
        self.assertEqual('updating', target.recovery['stage'])
        self.assertEqual('nested', target.recovery['updated_stack'])
        self.assertEqual('update-1', target.recovery['update_traversal'])

    def test_a_drain_goes_on_under_our_update_not_under_a_users(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        self._replace(_target('marked', stack_id='root'))
        replacer.status = ('UPDATE', 'IN_PROGRESS')
        policy = _policy()
        self.assertIsNone(self.recovery._not_now(policy, before_mark=True))
        # A user's update supersedes ours.
        replacer.traversals['root'] = 'a user\'s'
        self.assertEqual('not now: stack is UPDATE_IN_PROGRESS',
                         self.recovery._not_now(policy, before_mark=True))

    def test_an_update_another_engine_stored_as_ours_counts(self):
        replacer = FakeReplacer(status=('UPDATE', 'IN_PROGRESS'))
        replacer.traversals['root'] = 'update-7'
        self.recovery = self._loop(replacer)
        awaited = _target('updating', updates=1, updated_stack='root',
                          update_traversal='update-7')
        self.tracker.targets_of = lambda policy_id: [awaited]
        self.assertIsNone(self.recovery._not_now(_policy(),
                                                 before_mark=True))
        awaited.recovery['update_traversal'] = 'update-6'
        self.assertIsNotNone(self.recovery._not_now(_policy(),
                                                    before_mark=True))

    def test_every_marked_target_of_a_stack_shares_one_update(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        targets = [_target('marked', index=i) for i in range(3)]
        self._replace(*targets)
        self.assertEqual(['nested'], replacer.updates)
        self.assertEqual(['updating'] * 3,
                         [t.recovery['stage'] for t in targets])
        self.assertEqual([1, 1, 1], [t.recovery['updates'] for t in targets])
        # Each one's timeline names the others replaced with it.
        self.assertIn('with 2 others', self.tracker.steps[0][2])

    def test_a_marked_target_whose_write_failed_waits_for_the_next(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        store = self.tracker.store_step
        targets = [_target('marked', index=i) for i in range(2)]

        def second_fails(target, *args, **kwargs):
            if target is targets[1]:
                return False
            return store(target, *args, **kwargs)
        self.tracker.store_step = second_fails
        self._replace(*targets)
        self.assertEqual(['nested'], replacer.updates)
        self.assertEqual(['updating', 'marked'],
                         [t.recovery['stage'] for t in targets])

    def test_marked_targets_wait_while_the_stack_is_busy(self):
        replacer = FakeReplacer(status=('UPDATE', 'IN_PROGRESS'))
        self.recovery = self._loop(replacer)
        target = _target('marked')
        self._replace(target)
        self.assertEqual([], replacer.updates)
        self.assertEqual('marked', target.recovery['stage'])

    def test_targets_of_two_stacks_are_replaced_by_an_update_of_each(self):
        replacer = FakeReplacer()
        self.recovery = self._loop(replacer)
        targets = [_target('marked', index=i, stack_id='member-%d' % (i % 2))
                   for i in range(3)]
        self._replace(*targets)
        self.assertEqual(['member-0', 'member-1'], replacer.updates)
        self.assertEqual(['member-0', 'member-1', 'member-0'],
                         [t.recovery['updated_stack'] for t in targets])
        reasons = [step[2] for step in self.tracker.steps]
        self.assertIn('with 1 other (old, old)', reasons[0])
        self.assertNotIn('other', reasons[2])

    def test_a_stack_still_updating_holds_only_its_own_targets(self):
        replacer = FakeReplacer()
        replacer.statuses['member-0'] = ('UPDATE', 'IN_PROGRESS')
        self.recovery = self._loop(replacer)
        targets = [_target('marked', index=i, stack_id='member-%d' % i)
                   for i in range(2)]
        self._replace(*targets)
        self.assertEqual(['member-1'], replacer.updates)
        self.assertEqual(['marked', 'updating'],
                         [t.recovery['stage'] for t in targets])

    def test_updating_without_the_stack_stored_watches_its_own_stack(self):
        # Stored updating, then the engine stopped before the answer: the
        # update it asked for runs on the member's stack, not the root.
        replacer = FakeReplacer()
        replacer.statuses['nested'] = ('UPDATE', 'IN_PROGRESS')
        self.recovery = self._loop(replacer)
        target = _target('updating', updates=1)
        self._advance(target)
        self.assertEqual('updating', target.recovery['stage'])
        self.assertEqual([], replacer.updates)

    def test_a_resource_holding_another_server_is_not_marked(self):
        replacer = FakeReplacer(holds='new')
        self.recovery = self._loop(replacer)
        self._advance(_target('intent'))
        self.assertEqual([], replacer.marks)
        self.assertEqual([], replacer.updates)


class WakeTest(unittest.TestCase):
    """A failure is gathered with others before a pass; a mark is not."""

    def setUp(self):
        tracker = FakeTracker()
        tracker.policies = lambda: []
        self.recovery = loop.RecoveryLoop('engine', tracker, FakeReplacer(),
                                          actions=lambda stack_id: None,
                                          conf=cfg.CONF)
        self.recovery._tick = 60
        self.passes = threading.Semaphore(0)
        self.recovery.run_once = self.passes.release
        patcher = mock.patch.object(loop, 'GATHER_SECONDS', 5)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.recovery.start()
        self.addCleanup(self.recovery.stop)

    def test_a_mark_wakes_a_pass_at_once(self):
        self.recovery.wake(gather=False)
        self.assertTrue(self.passes.acquire(timeout=2))

    def test_a_failure_waits_for_others_first(self):
        self.recovery.wake()
        self.assertFalse(self.passes.acquire(timeout=1))
        self.assertTrue(self.passes.acquire(timeout=10))


class NotSwappedDrainer(object):
    """The pool follower has not swapped the replaced server's member."""

    def __init__(self):
        self.restores = 0
        self.swapped = False

    def restore(self, stack_id, drained, server_id=None):
        self.restores += 1
        if not self.swapped:
            raise loop.lb_drain.NotYet('not swapped yet')
        return {}


def _drain_loop(case, drainer, now):
    """A recovery loop with this drainer, at the clock time ``now[0]``."""
    recovery = loop.RecoveryLoop(
        'engine', FakeTracker(), FakeReplacer(), actions=lambda s: None,
        drainer=drainer, conf=cfg.CONF, clock=lambda: now[0])
    case.addCleanup(recovery._pool.shutdown)
    recovery.timeline = mock.Mock()
    return recovery


class RestoreTest(unittest.TestCase):

    def test_a_restore_put_off_is_tried_again_a_second_later(self):
        drainer = NotSwappedDrainer()
        now = [loop.timeutils.utcnow()]
        recovery = _drain_loop(self, drainer, now)
        target = _target('updating', drained={'pool': ['10.0.0.5', 1]})
        target.state = states.HEALTHY
        step = planner.Restore(target)
        for _pass in range(4):       # passes 0.25 s apart
            recovery._restore(_policy(), target, step)
            now[0] += loop.datetime.timedelta(seconds=0.25)
        self.assertEqual(1, drainer.restores)
        self.assertFalse(target.recovery.get('restored'))
        drainer.swapped = True
        recovery._restore(_policy(), target, step)
        self.assertEqual(2, drainer.restores)
        self.assertTrue(target.recovery['restored'])


class BlockedEventsReplacer(FakeReplacer):
    """Heat's event table answers only once released."""

    def __init__(self):
        super(BlockedEventsReplacer, self).__init__()
        self.release = threading.Event()
        self.events = []

    def record_event(self, stack_id, name, reason, status=None):
        self.release.wait(10)
        self.events.append(reason)


class HeatEventsTest(unittest.TestCase):
    """A step's line in Heat's event list never holds up its effect."""

    def setUp(self):
        _store_enabled(self)
        self.replacer = BlockedEventsReplacer()
        self.recovery = loop.RecoveryLoop(
            'engine', FakeTracker(), self.replacer,
            actions=lambda stack_id: StoppedNova(), conf=cfg.CONF,
            background_events=True)
        self.recovery.timeline.heat_events.start()
        self.addCleanup(self.replacer.release.set)

    def test_the_update_is_asked_before_heat_shows_the_mark(self):
        target = _target('intent')
        self.recovery._advance(_policy(), target, None)
        self.recovery._replace_marked(_policy(),
                                      planner.ReplaceMarked([target]))
        self.assertEqual(['0'], self.replacer.marks)
        self.assertEqual(['nested'], self.replacer.updates)
        self.assertEqual([], self.replacer.events)
        # Stopping writes what was queued, in the order of the steps.
        self.replacer.release.set()
        self.recovery.stop()
        self.assertEqual(2, len(self.replacer.events))
        self.assertIn('marked CHECK_FAILED', self.replacer.events[0])
        self.assertIn('stack update (existing) requested',
                      self.replacer.events[1])


class UnappliedDrainer(object):
    """Octavia accepted the batch, its worker has not applied it yet."""

    def __init__(self):
        self.applied = False
        self.drains = 0

    def drain(self, stack_id, drained, waited=0, settle=True, cohort=None):
        self.drains += 1
        if settle and not self.applied:
            raise loop.lb_drain.NotYet('did not take the change yet')
        return {}


class DrainTest(unittest.TestCase):

    def test_a_replacement_waits_until_the_load_balancer_took_the_drain(
            self):
        drainer = UnappliedDrainer()
        recovery = _drain_loop(self, drainer, [loop.timeutils.utcnow()])
        target = _target('intent', drained={'pool': ['10.0.0.5', 1]})
        stored = {'action': loop.RECREATE,
                  'drained': {'pool': ['10.0.0.5', 1]}}
        # The server is not replaced while new connections may still go
        # to it: the action goes on at a later pass.
        self.assertFalse(recovery._drain(_policy(), target, dict(stored)))
        drainer.applied = True
        self.assertTrue(recovery._drain(_policy(), target, dict(stored)))
        self.assertEqual(2, drainer.drains)
