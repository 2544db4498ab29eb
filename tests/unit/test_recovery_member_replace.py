"""RECREATE with ``replace: MEMBER``: the group member is replaced whole.

Heat's side on real in-memory stacks laid out as heat-engine stores a
group of provider-template members (the group's nested stack, each
member's own nested stack holding a server and its port), without running
their create, which needs a heat-engine answering RPC. Only Heat's RPC is
mocked.
"""

from heat.common import exception
from heat.common import template_format
from heat.engine import resource
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.objects import resource as resource_object
from heat.objects import stack as stack_object
from heat.rpc import client as rpc_client

from heat_health.engine import marking
from heat_health.engine.recovery import heat_replace
from heat_health.objects import marking as marking_object
from tests.unit import test_recovery_heat_replace as replace_tests

# A member of the group: the server, its port and its volume.
MEMBER = '''
heat_template_version: 2018-08-31
resources:
  port:
    type: OS::Heat::TestResource
  server:
    type: OS::Heat::TestResource
  volume:
    type: OS::Heat::TestResource
'''

# A group's nested stack of two provider-template members.
TEMPLATE_MEMBERS = '''
heat_template_version: 2018-08-31
resources:
  m0:
    type: member.yaml
  m1:
    type: member.yaml
'''

FILES = {'member.yaml': MEMBER}


class MemberTestCase(replace_tests.ReplacerTestCase):

    def setUp(self):
        super(MemberTestCase, self).setUp()
        self.root = self._stack('top', replace_tests.GROUPS, create=False)

    def _group_of_members(self, group='asg'):
        """The group's nested stack and its members' own stacks."""
        nested = heat_stack.Stack(
            self.ctx, 'top-%s-abc' % group,
            template.Template(template_format.parse(TEMPLATE_MEMBERS),
                              files=FILES),
            owner_id=self.root.id, parent_resource=group,
            user_creds_id=self.root.user_creds_id, nested_depth=1)
        nested.store()
        self._set_state(nested, 'CREATE', 'COMPLETE')
        members = {}
        for name in ('m0', 'm1'):
            members[name] = self._member_stack(nested, name)
        return heat_stack.Stack.load(self.ctx, stack_id=nested.id), members

    def _member_stack(self, nested, name):
        """A member's own stack, created, held by the member's row."""
        member = heat_stack.Stack(
            self.ctx, '%s-%s-xyz' % (nested.name, name),
            template.Template(template_format.parse(MEMBER)),
            owner_id=nested.id, parent_resource=name,
            user_creds_id=self.root.user_creds_id, nested_depth=2)
        member.store()
        member.create()
        self.assertEqual((member.CREATE, member.COMPLETE), member.state)
        self._set_state(member, 'CREATE', 'COMPLETE')
        group = heat_stack.Stack.load(self.ctx, stack_id=nested.id)
        rsrc = group[name]
        rsrc.resource_id = member.id
        rsrc.state_set(rsrc.CREATE, rsrc.COMPLETE)
        return member

    def _member(self, nested, member, name='m0'):
        return {'stack_id': nested.id, 'name': name, 'nested_id': member.id}


class TestMemberOf(MemberTestCase):

    def test_the_member_holding_the_server(self):
        for group in ('asg', 'asg_sized', 'rg'):
            nested, members = self._group_of_members(group)
            member = members['m1']
            self.assertEqual(
                self._member(nested, member, 'm1'),
                self.replacer.member_of(self.root.id, member.id, 'server',
                                        member['server'].resource_id))

    def test_a_server_that_is_itself_the_member_is_replaced_alone(self):
        group = self._stack('top-rg-abc', replace_tests.MEMBERS,
                            owner=self.root, parent_resource='rg')
        self.assertIsNone(self.replacer.member_of(
            self.root.id, group.id, '0', group['0'].resource_id))
        root = self._stack('other', replace_tests.SERVER)
        self.assertIsNone(self.replacer.member_of(
            root.id, root.id, 'server', root['server'].resource_id))

    def test_no_member_above_the_policys_stack(self):
        # A policy inside the member's template: its stack is never
        # replaced by its own recovery.
        _nested, members = self._group_of_members()
        member = members['m0']
        self.assertIsNone(self.replacer.member_of(
            member.id, member.id, 'server', member['server'].resource_id))

    def test_a_resource_holding_another_server(self):
        _nested, members = self._group_of_members()
        self.assertRaises(heat_replace.ServerMoved, self.replacer.member_of,
                          self.root.id, members['m0'].id, 'server',
                          'an-old-server')


class TestMarkMember(MemberTestCase):

    def test_the_member_is_marked_not_the_server(self):
        nested, members = self._group_of_members()
        member = members['m0']
        server_id = member['server'].resource_id
        marked = self.replacer.mark_failed(
            member.id, 'server', 'RECREATE: nova ERROR', server_id=server_id,
            member=self._member(nested, member))
        self.assertEqual(member.id, marked)
        self.assertEqual(('CHECK', 'FAILED', 'RECREATE: nova ERROR'),
                         self._state(nested, 'm0'))
        self.assertEqual(('CREATE', 'COMPLETE'),
                         self._state(member, 'server')[:2])
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(nested, 'm1')[:2])
        [recorded] = marking_object.Marking.get_all_by_stack(self.root.id)
        self.assertEqual(
            (nested.id, 'm0', member.id, True, 'recovery'),
            (recorded.owner_stack_id, recorded.resource_name,
             recorded.physical_resource_id, recorded.mark_unhealthy,
             recorded.source))

    def test_a_member_holding_another_stack_is_not_marked(self):
        nested, members = self._group_of_members()
        member = members['m0']
        recorded = self._member(nested, member)
        # Replaced meanwhile (convergence: a newer row of the same name).
        resource_object.Resource.create(self.ctx, {
            'stack_id': nested.id, 'name': 'm0',
            'physical_resource_id': 'another-stack', 'action': 'CREATE',
            'status': 'COMPLETE', 'current_template_id': nested.t.id})
        self.assertRaises(heat_replace.ServerMoved, self.replacer.mark_failed,
                          member.id, 'server', 'x',
                          server_id=member['server'].resource_id,
                          member=recorded)
        self.assertEqual([], marking_object.Marking.get_all_by_stack(
            self.root.id))

    def test_a_server_replaced_alone_meanwhile_is_not_marked(self):
        nested, members = self._group_of_members()
        member = members['m0']
        old = member['server'].resource_id
        member['server'].resource_id_set('new-server')
        self.assertRaises(heat_replace.ServerMoved, self.replacer.mark_failed,
                          member.id, 'server', 'x', server_id=old,
                          member=self._member(nested, member))
        self.assertEqual('COMPLETE', self._state(nested, 'm0')[1])

    def test_a_member_of_another_member_is_not_marked(self):
        nested, members = self._group_of_members()
        other = self._member(nested, members['m1'], 'm1')
        self.assertRaises(heat_replace.ServerMoved, self.replacer.mark_failed,
                          members['m0'].id, 'server', 'x',
                          server_id=members['m0']['server'].resource_id,
                          member=other)
        self.assertEqual('COMPLETE', self._state(nested, 'm1')[1])


class TestClearMemberMark(MemberTestCase):

    def setUp(self):
        super(TestClearMemberMark, self).setUp()
        self.nested, members = self._group_of_members()
        self.member = members['m0']
        self.server_id = self.member['server'].resource_id

    def test_recoverys_mark_of_the_member_is_cleared(self):
        self.replacer.mark_failed(
            self.member.id, 'server', 'RECREATE: down',
            server_id=self.server_id,
            member=self._member(self.nested, self.member))
        self.assertFalse(self.replacer.clear_mark(
            self.member.id, 'server', 'an-old-server', 'healthy again'))
        self.assertEqual('FAILED', self._state(self.nested, 'm0')[1])
        self.assertTrue(self.replacer.clear_mark(
            self.member.id, 'server', self.server_id, 'healthy again'))
        self.assertEqual(('CHECK', 'COMPLETE', 'healthy again'),
                         self._state(self.nested, 'm0'))
        self.assertFalse(self.replacer.clear_mark(
            self.member.id, 'server', self.server_id, 'healthy again'))

    def test_a_users_mark_of_the_member_stays(self):
        stack = heat_stack.Stack.load(self.ctx, stack_id=self.nested.id)
        marking.mark(self.ctx, 'api-engine', stack, stack['m0'], True,
                     'the user replaces it', 'api', self.root.id)
        self.assertFalse(self.replacer.clear_mark(
            self.member.id, 'server', self.server_id, 'healthy again'))
        self.assertEqual(('CHECK', 'FAILED', 'the user replaces it'),
                         self._state(self.nested, 'm0'))

    def test_the_servers_and_the_members_marks_are_both_cleared(self):
        self.replacer.mark_failed(self.member.id, 'server', 'gave up',
                                  server_id=self.server_id)
        self.replacer.mark_failed(
            self.member.id, 'server', 'RECREATE: down',
            server_id=self.server_id,
            member=self._member(self.nested, self.member))
        self.assertTrue(self.replacer.clear_mark(
            self.member.id, 'server', self.server_id, 'healthy again'))
        self.assertEqual('COMPLETE', self._state(self.member, 'server')[1])
        self.assertEqual('COMPLETE', self._state(self.nested, 'm0')[1])


class TestMemberReplaced(MemberTestCase):

    def test_replaced_once_the_new_member_is_created(self):
        nested, members = self._group_of_members()
        member = members['m0']
        old = member['server'].resource_id
        recorded = self._member(nested, member)
        self.assertFalse(self.replacer.replaced(member.id, 'server', old,
                                                member=recorded))
        new_row = resource_object.Resource.create(self.ctx, {
            'stack_id': nested.id, 'name': 'm0', 'action': 'INIT',
            'status': 'COMPLETE', 'current_template_id': nested.t.id})
        for state, replaced in [(('CREATE', 'IN_PROGRESS'), False),
                                (('CREATE', 'FAILED'), False),
                                (('CREATE', 'COMPLETE'), True)]:
            resource_object.Resource.update_by_id(self.ctx, new_row.id, {
                'physical_resource_id': 'new-member-stack',
                'action': state[0], 'status': state[1]})
            self.assertEqual(replaced, self.replacer.replaced(
                member.id, 'server', old, member=recorded), state)

    def test_a_gone_group_is_not_found(self):
        nested, members = self._group_of_members()
        recorded = self._member(nested, members['m0'])
        stack_object.Stack.delete(self.ctx, nested.id)
        self.assertRaises(exception.EntityNotFound, self.replacer.replaced,
                          members['m0'].id, 'server', 'x', member=recorded)


class TestMemberUpdate(MemberTestCase):

    def setUp(self):
        super(TestMemberUpdate, self).setUp()
        self.update = self.patchobject(rpc_client.EngineClient,
                                       'update_stack')
        self.patchobject(heat_replace.stack_owner, 'token_context',
                         side_effect=lambda stored: stored)

    def test_asg_without_capacity_updates_its_nested_stack(self):
        nested, _members = self._group_of_members('asg')
        self.assertEqual(nested.id, self.replacer.stack_to_update(
            self.root.id, nested.id, 'm0'))
        self.assertEqual(nested.id, self.replacer.update_target(
            self.root.id, nested.id, 'm0'))
        self.assertEqual(dict(nested.identifier()),
                         self.update.call_args[0][1])

    def test_asg_with_capacity_updates_the_root_if_so_set(self):
        self.replacer = heat_replace.HeatReplacer(
            'health-engine-1', update_stack=heat_replace.ROOT)
        nested, _members = self._group_of_members('asg_sized')
        self.assertEqual(self.root.id, self.replacer.update_target(
            self.root.id, nested.id, 'm0'))


class TestHeatReplacesTheMarkedMember(MemberTestCase):
    """What Heat makes of the mark: the whole member is replaced.

    ``StackResource._needs_update`` of the marked template member, as a
    stack update runs it (heat-internals §2): replaced with its nested
    stack, unless a stack check marked the nested stack itself.
    """

    def test_marked_member_needs_replacing(self):
        nested, members = self._group_of_members()
        member = members['m0']
        self.replacer.mark_failed(
            member.id, 'server', 'RECREATE: down',
            server_id=member['server'].resource_id,
            member=self._member(nested, member))
        group = heat_stack.Stack.load(self.ctx, stack_id=nested.id)
        rsrc = group['m0']
        show = self.patchobject(rpc_client.EngineClient, 'show_stack',
                                return_value=[{'stack_action': 'CREATE',
                                               'stack_status': 'COMPLETE'}])
        self.assertRaises(resource.UpdateReplace, rsrc._needs_update,
                          rsrc.t, rsrc.t, None, None, rsrc)
        self.assertEqual(member.id, show.call_args[0][1].stack_id)
        # The member left alone is updated in place (its nested stack).
        other = group['m1']
        self.assertTrue(other._needs_update(other.t, other.t, None, None,
                                            other))
