"""RECREATE's stages with ``replace: MEMBER``: one member, recorded first.

The recovery loop with a fake replacer: the group member that holds the
server is recorded in the recovery (a fenced write) before it is marked;
whoever carries the recovery on marks, updates for and watches that same
member, and members of one group marked in stacks of their own share one
update of the group's stack.
"""

import datetime
import threading
import time
import types
import unittest

from heat.common import exception as heat_exc

from heat_health.engine.monitor import states
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import planner
from heat_health.engine.recovery import recreate
from heat_health.policy import spec as policy_spec
from tests.unit import test_recovery_loop as loop_tests

MEMBER = {'stack_id': 'group', 'name': 'm0', 'nested_id': 'member-0'}


class MemberReplacer(loop_tests.FakeReplacer):
    """Heat with a group of template members: server ``old`` in m0."""

    def __init__(self, member=MEMBER, **kwargs):
        super(MemberReplacer, self).__init__(**kwargs)
        self.member = member
        self.asked = []          # member_of calls
        self.marked = []         # (name, member) of each mark
        self.replaced_asked = []
        self.gone = set()        # stacks deleted

    def member_of(self, root, stack_id, name, server_id):
        self.asked.append((root, stack_id, name, server_id))
        if server_id != self.holds:
            raise heat_replace.ServerMoved('holds %s' % self.holds)
        return self.member

    def mark_failed(self, stack_id, name, reason, server_id=None,
                    member=None):
        if server_id != self.holds:
            raise heat_replace.ServerMoved('holds %s' % self.holds)
        self.marks.append(name)
        self.marked.append((name, member))
        return server_id

    def replaced(self, stack_id, name, old, member=None):
        self.replaced_asked.append((stack_id, name, member))
        return self.is_replaced

    def stack_status(self, stack_id):
        if stack_id in self.gone:
            raise heat_exc.EntityNotFound(entity='Stack', name=stack_id)
        return super(MemberReplacer, self).stack_status(stack_id)


def _policy(replace=policy_spec.MEMBER):
    return types.SimpleNamespace(
        id='p', stack_id='root', generation=1, busy=(), frozen=lambda: None,
        spec=policy_spec.PolicySpec.parse({
            'targets': ['asg'], 'recovery': {
                'actions': [{'name': 'RECREATE'}], 'replace': replace}}))


def _target(stage, index=0, stack_id='member-0', **recovery):
    target = loop_tests._target(stage, index, stack_id, **recovery)
    target.resource_name = 'server'
    target.path = 'asg/m%d/server' % index
    return target


class MemberRecreateTest(unittest.TestCase):

    setUp = loop_tests.RecreateTest.setUp
    tearDown = loop_tests.RecreateTest.tearDown
    _loop = loop_tests.RecreateTest._loop

    def _advance(self, target, policy=None):
        self.recovery._advance(policy or _policy(), target, None)

    def _replace(self, *targets):
        self.recovery._replace_marked(_policy(),
                                      planner.ReplaceMarked(targets))

    def test_the_member_is_recorded_then_marked(self):
        replacer = MemberReplacer()
        self.recovery = self._loop(replacer)
        target = _target('intent')
        marks_when_stored = []
        store = self.tracker.store_step

        def store_step(target, *args, **kwargs):
            marks_when_stored.append(len(replacer.marks))
            return store(target, *args, **kwargs)
        self.tracker.store_step = store_step
        self._advance(target)
        self.assertEqual([('root', 'member-0', 'server', 'old')],
                         replacer.asked)
        self.assertEqual([('server', MEMBER)], replacer.marked)
        # Stored before the mark, and again once marked.
        self.assertEqual([0, 1], marks_when_stored)
        self.assertEqual(MEMBER, target.recovery['member'])
        self.assertEqual('marked', target.recovery['stage'])
        self.assertIn('marked member m0 CHECK_FAILED: server old to be '
                      'replaced with its whole member (stack member-0)',
                      self.tracker.steps[-1][2])

    def test_a_recorded_member_is_the_one_marked(self):
        # Carried on by another engine: the member the first recorded.
        replacer = MemberReplacer(member=dict(MEMBER, name='m7'))
        self.recovery = self._loop(replacer)
        target = _target('fenced', member=MEMBER)
        self._advance(target)
        self.assertEqual([], replacer.asked)
        self.assertEqual([('server', MEMBER)], replacer.marked)

    def test_nothing_is_marked_unless_the_member_is_stored(self):
        replacer = MemberReplacer()
        self.recovery = self._loop(replacer)
        self.tracker.store_step = lambda *args, **kwargs: False
        target = _target('intent')
        self._advance(target)
        self.assertEqual([], replacer.marks)

    def test_a_server_moved_meanwhile_is_neither_recorded_nor_marked(self):
        replacer = MemberReplacer(holds='new')
        self.recovery = self._loop(replacer)
        target = _target('intent')
        self._advance(target)
        self.assertEqual([], replacer.marks)
        self.assertNotIn('member', target.recovery)
        self.assertEqual(states.RECOVERING, target.state)

    def test_a_server_that_is_the_member_itself_is_marked_alone(self):
        replacer = MemberReplacer(member=None)
        self.recovery = self._loop(replacer)
        target = _target('intent')
        self._advance(target)
        self.assertEqual([('server', None)], replacer.marked)
        self.assertNotIn('member', target.recovery)

    def test_replace_server_never_looks_for_a_member(self):
        replacer = MemberReplacer()
        self.recovery = self._loop(replacer)
        target = _target('intent')
        self._advance(target, _policy(policy_spec.SERVER))
        self.assertEqual([], replacer.asked)
        self.assertEqual([('server', None)], replacer.marked)

    def test_the_groups_stack_is_updated_for_the_member(self):
        replacer = MemberReplacer()
        self.recovery = self._loop(replacer)
        target = _target('marked', member=MEMBER)
        self._replace(target)
        self.assertEqual(['group'], replacer.updates)
        self.assertEqual([('member-0', 'server', MEMBER)],
                         replacer.replaced_asked)
        self.assertEqual('group', target.recovery['updated_stack'])
        self.assertIn('to replace server old with its member m0',
                      self.tracker.steps[-1][2])

    def test_members_marked_in_stacks_of_their_own_share_one_update(self):
        # Each member's server is in a stack of its own: with
        # replacement_update_stack = own, a ReplaceMarked each, run side
        # by side; the group's stack is updated once.
        replacer = MemberReplacer()
        asked = threading.Event()

        def update_target(root, stack_id, name):
            time.sleep(0.2)
            replacer.statuses[stack_id] = ('UPDATE', 'IN_PROGRESS')
            replacer.updates.append(stack_id)
            asked.set()
            return stack_id
        replacer.update_target = update_target
        self.recovery = self._loop(replacer)
        targets = [_target('marked', index=i, stack_id='member-%d' % i,
                           member=dict(MEMBER, name='m%d' % i,
                                       nested_id='member-%d' % i))
                   for i in range(2)]
        threads = [threading.Thread(target=self._replace, args=(t,))
                   for t in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        self.assertEqual(['group'], replacer.updates)

    def test_an_update_ended_without_replacing_the_member_marks_again(self):
        replacer = MemberReplacer()
        self.recovery = self._loop(replacer)
        target = _target('updating', updates=1, member=MEMBER)
        self._advance(target)
        self.assertEqual('marked', target.recovery['stage'])
        self.assertEqual([('member-0', 'server', MEMBER)],
                         replacer.replaced_asked)

    def test_a_member_no_longer_marked_fails_the_attempt(self):
        replacer = MemberReplacer(resource=('UPDATE', 'COMPLETE'))
        self.recovery = self._loop(replacer)
        target = _target('updating', updates=1, member=MEMBER)
        self._advance(target)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertIn('the member is UPDATE_COMPLETE and was not replaced',
                      self.tracker.steps[-1][2])

    def test_a_replaced_member_waits_for_its_target_to_move(self):
        now = [datetime.datetime(2026, 1, 1)]
        replacer = MemberReplacer(replaced=True)
        self.recovery = self._loop(replacer)
        self.recovery._clock = lambda: now[0]
        target = _target('updating', updates=1, member=MEMBER)
        self._advance(target)
        self.assertEqual(states.RECOVERING, target.state)
        # The old member's stack gone: the registry's sync moves the
        # target as soon as it sees the new member's server.
        replacer.gone.add('member-0')
        self._advance(target)
        now[0] += datetime.timedelta(seconds=recreate.UNMOVED_SECONDS - 1)
        self._advance(target)
        self.assertEqual(states.RECOVERING, target.state)
        now[0] += datetime.timedelta(seconds=1)
        self._advance(target)
        self.assertEqual(states.UNHEALTHY, target.state)
        self.assertIn('member m0 was replaced but holds no server at '
                      'asg/m0/server', self.tracker.steps[-1][2])
