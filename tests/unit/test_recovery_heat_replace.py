"""heat_replace on real in-memory Heat stacks; only Heat's RPC is mocked.

Group stacks are laid out as heat-engine stores them (the nested stack's
owner and parent resource, the root's user_creds shared) without running
their create, which would need a heat-engine answering RPC.
"""

import datetime
import threading
from unittest import mock

from heat.common import context as heat_context
from heat.common import exception
from heat.common import template_format
from heat.engine.clients.os import nova
from heat.engine import service as heat_service
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.objects import resource as resource_object
from heat.objects import stack as stack_object
from heat.objects import stack_lock as stack_lock_object
from heat.rpc import client as rpc_client
from heat.tests import utils
from keystoneauth1 import access
from keystoneauth1.identity import access as access_plugin
from oslo_config import cfg
from oslo_utils import importutils
from oslo_utils import timeutils

from heat_health.engine import heat_locks
from heat_health.engine import marking
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import stack_owner
from heat_health.objects import marking as marking_object
from tests.unit import base

SERVER = '''
heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Heat::TestResource
    properties:
      value: server
'''

MEMBERS = '''
heat_template_version: 2018-08-31
resources:
  '0':
    type: OS::Heat::TestResource
  '1':
    type: OS::Heat::TestResource
'''

GROUPS = '''
heat_template_version: 2018-08-31
resources:
  rg:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: OS::Heat::TestResource
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      resource:
        type: OS::Heat::TestResource
  asg_sized:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      desired_capacity: 2
      resource:
        type: OS::Heat::TestResource
  aws_asg:
    type: AWS::AutoScaling::AutoScalingGroup
    properties:
      AvailabilityZones: [nova]
      LaunchConfigurationName: lc
      MinSize: '1'
      MaxSize: '3'
  aws_asg_sized:
    type: AWS::AutoScaling::AutoScalingGroup
    properties:
      AvailabilityZones: [nova]
      LaunchConfigurationName: lc
      MinSize: '1'
      MaxSize: '3'
      DesiredCapacity: '2'
'''

EXISTING = {'existing': True}


class ReplacerTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(ReplacerTestCase, self).setUp()
        self.setup_health_db()
        # Stacks store a trust of their owner (Heat's default, trusts).
        self.stub_keystoneclient(user_id='owner-id')
        self.ctx = utils.dummy_context(user='alice', user_id='alice-id',
                                       tenant_id='tenant-1')
        self.replacer = heat_replace.HeatReplacer('health-engine-1')
        self.update = self.patchobject(rpc_client.EngineClient,
                                       'update_stack')

    def _stack(self, name, tmpl, owner=None, parent_resource=None,
               create=True):
        stack = heat_stack.Stack(
            self.ctx, name, template.Template(template_format.parse(tmpl)),
            owner_id=owner and owner.id, parent_resource=parent_resource,
            user_creds_id=owner and owner.user_creds_id,
            nested_depth=1 if owner else 0)
        stack.store()
        if create:
            stack.create()
            self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state)
        # Stored as heat-engine stores it once it releases the stack.
        self._set_state(stack, 'CREATE', 'COMPLETE')
        return stack

    def _set_state(self, stack, action, status):
        stack_object.Stack.update_by_id(self.ctx, stack.id,
                                        {'action': action, 'status': status})

    def _state(self, stack, name):
        rsrc = heat_stack.Stack.load(self.ctx, stack_id=stack.id)[name]
        return rsrc.action, rsrc.status, rsrc.status_reason


class TestReading(ReplacerTestCase):

    def test_stack_status_of_root_and_nested(self):
        root = self._stack('top', SERVER)
        nested = self._stack('top-x-abc', MEMBERS, owner=root)
        self._set_state(nested, 'UPDATE', 'IN_PROGRESS')
        self.assertEqual(('CREATE', 'COMPLETE'),
                         self.replacer.stack_status(root.id))
        self.assertEqual(('UPDATE', 'IN_PROGRESS'),
                         self.replacer.stack_status(nested.id))

    def test_traversal_names_the_latest_action(self):
        root = self._stack('top', SERVER)
        stack_object.Stack.update_by_id(self.ctx, root.id,
                                        {'current_traversal': 'ours'})
        self.assertEqual('ours', self.replacer.traversal(root.id))
        stack_object.Stack.update_by_id(self.ctx, root.id,
                                        {'current_traversal': 'a user\'s'})
        self.assertEqual("a user's", self.replacer.traversal(root.id))
        stack_object.Stack.update_by_id(self.ctx, root.id,
                                        {'current_traversal': ''})
        self.assertIsNone(self.replacer.traversal(root.id))

    def test_deleted_stack_is_not_found(self):
        root = self._stack('top', SERVER)
        stack_id = root.id
        root.delete()
        self.assertRaises(exception.EntityNotFound,
                          self.replacer.stack_status, stack_id)
        self.assertRaises(exception.EntityNotFound,
                          self.replacer.resource, stack_id, 'server')

    def test_resource_state(self):
        root = self._stack('top', SERVER)
        self.assertEqual(
            heat_replace.ResourceState(root['server'].resource_id,
                                       'CREATE', 'COMPLETE',
                                       'state changed'),
            self.replacer.resource(root.id, 'server'))
        self.assertRaises(exception.ResourceNotFound,
                          self.replacer.resource, root.id, 'nope')

    def test_owner(self):
        root = self._stack('top', SERVER)
        nested = self._stack('top-x-abc', MEMBERS, owner=root)
        owner = self.replacer.owner(nested.id)
        self.assertEqual(
            {'stack_id': nested.id, 'user_creds_id': root.user_creds_id,
             'trust_id': 'atrust', 'trustor_user_id': 'owner-id',
             'username': 'alice', 'project_id': 'tenant-1',
             'stack_user_project_id': None}, owner)

    def test_nova_client_acts_with_the_stored_trust(self):
        root = self._stack('top', SERVER)
        client = mock.Mock()
        # Asked of Nova otherwise.
        self.patchobject(nova.NovaClientPlugin, 'get_max_microversion',
                         return_value=None)
        contexts = []

        def create(plugin, version=None):
            contexts.append(plugin.context)
            return client

        self.patchobject(nova.NovaClientPlugin, '_create', autospec=True,
                         side_effect=create)
        self.assertIs(client, self.replacer.nova_client(root.id))
        [plugin_ctx] = contexts
        self.assertIsInstance(plugin_ctx, heat_context.StoredContext)
        self.assertFalse(plugin_ctx.is_admin)
        self.assertEqual(('atrust', 'owner-id'),
                         (plugin_ctx.trust_id, plugin_ctx.trustor_user_id))

    def test_a_client_is_made_when_its_context_is_forgotten_meanwhile(self):
        """Another thread's error drops the cached context mid-call."""
        root = self._stack('top', SERVER)
        client = mock.Mock()
        self.patchobject(nova.NovaClientPlugin, 'get_max_microversion',
                         return_value=None)
        self.patchobject(nova.NovaClientPlugin, '_create', autospec=True,
                         side_effect=lambda plugin, version=None: (
                             plugin.context and client))
        stored = self.replacer._stored_context

        def forgotten(stack_id):
            found = stored(stack_id)
            self.replacer.forget_clients(stack_id)
            return found
        self.patchobject(self.replacer, '_stored_context',
                         side_effect=forgotten)
        self.assertIs(client, self.replacer.nova_client(root.id))

    def test_one_stored_context_serves_nova_and_octavia_a_while(self):
        """One trust-scoped token per stack, not one per call."""
        root = self._stack('top', SERVER)
        loads = []
        load = heat_replace.HeatReplacer._load

        def counted(ctxt, stack_id, load_template=True):
            loads.append(stack_id)
            return load(ctxt, stack_id, load_template)
        self.patchobject(heat_replace.HeatReplacer, '_load',
                         side_effect=counted)
        now = [0.0]
        replacer = heat_replace.HeatReplacer('engine-1',
                                             clock=lambda: now[0])
        first = replacer._stored_context(root.id)
        self.assertIs(first, replacer._stored_context(root.id))
        self.assertEqual([root.id], loads)
        # After an error, or once kept long enough: a new one.
        replacer.forget_clients(root.id)
        second = replacer._stored_context(root.id)
        self.assertIsNot(first, second)
        now[0] += stack_owner.CONTEXT_SECONDS
        self.assertIsNot(second, replacer._stored_context(root.id))
        self.assertEqual(3, len(loads))

    def test_a_root_and_its_nested_stacks_share_one_stored_context(self):
        """One trust-scoped login per owner, not one per member stack."""
        root = self._stack('top', SERVER)
        nested = self._stack('top-member-abc', MEMBERS, owner=root,
                             parent_resource='server')
        first = self.replacer._stored_context(nested.id)
        self.assertIs(first, self.replacer._stored_context(root.id))
        self.assertEqual(('atrust', 'owner-id'),
                         (first.trust_id, first.trustor_user_id))
        # An error of one stack's clients renews them for the whole tree.
        self.replacer.forget_clients(nested.id)
        second = self.replacer._stored_context(root.id)
        self.assertIsNot(first, second)
        self.assertIs(second, self.replacer._stored_context(nested.id))

    def test_recoveries_starting_together_make_one_stored_context(self):
        root = self._stack('top', SERVER)
        row = stack_object.Stack.get_by_id(self.ctx, root.id)
        made = []
        gate = threading.Event()

        def make():
            made.append(object())
            gate.wait(5)
            return made[-1]
        found = []
        threads = [threading.Thread(target=lambda: found.append(
            self.replacer._context_of(row, make))) for _ in range(3)]
        for thread in threads:
            thread.start()
        gate.set()
        for thread in threads:
            thread.join(10)
        self.assertEqual(1, len(made))
        self.assertEqual(made * 3, found)


class TestMarkFailed(ReplacerTestCase):

    def test_marks_with_the_stored_context_and_records_it(self):
        root = self._stack('top', SERVER)
        locked = self.patchobject(heat_locks, 'locked',
                                  wraps=heat_locks.locked)
        physical_id = self.replacer.mark_failed(root.id, 'server',
                                                'RECREATE: nova ERROR')
        self.assertEqual(root['server'].resource_id, physical_id)
        self.assertEqual(('CHECK', 'FAILED', 'RECREATE: nova ERROR'),
                         self._state(root, 'server'))
        ctxt, rsrc, engine_id = locked.call_args[0]
        self.assertIsInstance(ctxt, heat_context.StoredContext)
        self.assertFalse(ctxt.is_admin)
        self.assertEqual(('atrust', 'health-engine-1'),
                         (ctxt.trust_id, engine_id))
        self.assertIsNone(stack_lock_object.StackLock.get_engine_id(
            self.ctx, root.id))
        [marking] = marking_object.Marking.get_all_by_stack(root.id)
        self.assertEqual(
            (root.id, root.id, 'server', physical_id, True,
             'RECREATE: nova ERROR', 'owner-id', 'tenant-1', 'recovery'),
            (marking.stack_id, marking.owner_stack_id,
             marking.resource_name, marking.physical_resource_id,
             marking.mark_unhealthy, marking.reason, marking.user_id,
             marking.project_id, marking.source))

    def test_a_resource_holding_another_server_is_not_marked(self):
        root = self._stack('top', SERVER)
        self.assertRaises(heat_replace.ServerMoved,
                          self.replacer.mark_failed, root.id, 'server',
                          'RECREATE: nova ERROR', server_id='an-old-server')
        self.assertEqual('COMPLETE', self._state(root, 'server')[1])
        self.assertEqual([], marking_object.Marking.get_all_by_stack(root.id))

    def test_a_mark_is_cleared_only_while_it_holds_the_server(self):
        root = self._stack('top', SERVER)
        server_id = self.replacer.mark_failed(root.id, 'server', 'gave up',
                                              server_id=root['server']
                                              .resource_id)
        self.assertFalse(self.replacer.clear_mark(
            root.id, 'server', 'an-old-server', 'healthy again'))
        self.assertEqual('FAILED', self._state(root, 'server')[1])
        self.assertTrue(self.replacer.clear_mark(
            root.id, 'server', server_id, 'healthy again'))
        self.assertEqual(('CHECK', 'COMPLETE', 'healthy again'),
                         self._state(root, 'server'))
        # Nothing of ours to clear any more.
        self.assertFalse(self.replacer.clear_mark(
            root.id, 'server', server_id, 'healthy again'))
        self.assertEqual([True, False], [
            m.mark_unhealthy for m in
            marking_object.Marking.get_all_by_stack(root.id)][::-1])

    def test_a_users_own_mark_since_recoverys_is_not_cleared(self):
        root = self._stack('top', SERVER)
        server_id = self.replacer.mark_failed(root.id, 'server', 'gave up',
                                              server_id=root['server']
                                              .resource_id)
        stack = heat_stack.Stack.load(self.ctx, stack_id=root.id)
        marking.mark(self.ctx, 'engine-1', stack, stack['server'], True,
                     'broken, says its user', 'api', root.id)
        self.assertFalse(self.replacer.clear_mark(
            root.id, 'server', server_id, 'healthy again'))
        self.assertEqual(('CHECK', 'FAILED', 'broken, says its user'),
                         self._state(root, 'server'))

    def test_member_of_a_nested_stack_is_recorded_under_the_root(self):
        root = self._stack('top', GROUPS, create=False)
        nested = self._stack('top-rg-abc', MEMBERS, owner=root,
                             parent_resource='rg')
        self.replacer.mark_failed(nested.id, '1', 'probe failed')
        self.assertEqual(('CHECK', 'FAILED', 'probe failed'),
                         self._state(nested, '1'))
        self.assertEqual(('CREATE', 'COMPLETE'), self._state(nested, '0')[:2])
        [marking] = marking_object.Marking.get_all_by_stack(root.id)
        self.assertEqual((nested.id, '1'),
                         (marking.owner_stack_id, marking.resource_name))

    def test_a_lock_held_by_a_stack_action_is_honoured(self):
        root = self._stack('top', SERVER)
        stack_object.Stack.update_by_id(self.ctx, root.id,
                                        {'convergence': True})
        resource_object.Resource.update_by_id(
            self.ctx, root['server'].id, {'engine_id': 'worker-9'})
        self.assertRaises(exception.ActionInProgress,
                          self.replacer.mark_failed, root.id, 'server', 'x')
        self.assertEqual(('CREATE', 'COMPLETE'),
                         self._state(root, 'server')[:2])
        self.assertEqual([], marking_object.Marking.get_all_by_stack(root.id))

    def test_a_group_is_never_marked(self):
        root = self._stack('top', GROUPS, create=False)
        e = self.assertRaises(heat_replace.NotActionable,
                              self.replacer.mark_failed, root.id, 'asg', 'x')
        self.assertIn('has a nested stack', str(e))

    def test_a_resource_being_deleted_is_not_marked(self):
        root = self._stack('top', SERVER)
        resource_object.Resource.update_by_id(
            self.ctx, root['server'].id,
            {'action': 'DELETE', 'status': 'IN_PROGRESS'})
        e = self.assertRaises(heat_replace.NotActionable,
                              self.replacer.mark_failed, root.id, 'server',
                              'x')
        self.assertIn('DELETE_IN_PROGRESS', str(e))
        self.assertEqual([], marking_object.Marking.get_all_by_stack(root.id))

    def test_unknown_resource(self):
        root = self._stack('top', SERVER)
        self.assertRaises(exception.ResourceNotFound,
                          self.replacer.mark_failed, root.id, 'nope', 'x')


class TestUpdateTarget(ReplacerTestCase):

    def setUp(self):
        super(TestUpdateTarget, self).setUp()
        self.root = self._stack('top', GROUPS, create=False)
        self.logins = []
        self._trust_token(hours=1)

    def _trust_token(self, hours):
        """Keystone answers a trust login with a token of ``hours``."""
        expires = timeutils.utcnow() + datetime.timedelta(hours=hours)
        self.body = {'token': {
            'expires_at': expires.strftime('%Y-%m-%dT%H:%M:%S.000000Z'),
            'methods': ['password'], 'catalog': [],
            'user': {'id': 'trustee-id', 'name': 'heat',
                     'domain': {'id': 'default', 'name': 'Default'}},
            'project': {'id': 'tenant-1', 'name': 'demo',
                        'domain': {'id': 'default', 'name': 'Default'}},
            'roles': [{'id': 'r1', 'name': 'member'}],
            'OS-TRUST:trust': {'id': 'atrust'}}}

        def plugin(conf, group, trust_id=None):
            # As keystoneauth's: one login, then its token is kept.
            kept = []

            def get_access(session, **kwargs):
                if not kept:
                    self.logins.append(trust_id)
                    kept.append(access.create(body=self.body,
                                              auth_token='trust-token'))
                return kept[0]
            return mock.Mock(get_access=mock.Mock(side_effect=get_access))
        self.patchobject(heat_context.ks_loading,
                         'load_auth_from_conf_options', side_effect=plugin)
        # Keystone's address as configured, without asking Keystone.
        importutils.import_module('keystonemiddleware.auth_token')
        cfg.CONF.set_override('www_authenticate_uri',
                              'http://127.0.0.1:5000/v3',
                              group='keystone_authtoken')
        self.addCleanup(cfg.CONF.clear_override, 'www_authenticate_uri',
                        group='keystone_authtoken')

    def _group(self, name):
        return self._stack('top-%s-abc' % name, MEMBERS, owner=self.root,
                           parent_resource=name)

    def _updated(self, stack):
        """The one update sent: heat-engine's RPC, the owner, existing."""
        self.update.assert_called_once_with(
            mock.ANY, dict(stack.identifier()), None, {}, {}, EXISTING)
        ctxt = self.update.call_args[0][0]
        self.assertFalse(ctxt.is_admin)
        # The token of the owner's trust, which heat-engine reuses for
        # every step of the update: no login of its own.
        self.assertEqual((None, 'trust-token', self.body),
                         (ctxt.trust_id, ctxt.auth_token,
                          ctxt.auth_token_info))
        self.assertEqual(('tenant-1', 'trustee-id', ['member']),
                         (ctxt.project_id, ctxt.user_id, ctxt.roles))
        received = heat_context.RequestContext.from_dict(ctxt.to_dict())
        self.assertIsInstance(received.auth_plugin,
                              access_plugin.AccessInfoPlugin)
        self.assertEqual('trust-token', received.auth_plugin.get_token(
            received.keystone_session))
        self.assertNotEqual(self.replacer._stored_context(
            stack.id).request_id, ctxt.request_id)
        self.assertEqual(['atrust'], self.logins)

    def test_resource_group_member_updates_its_own_stack(self):
        group = self._group('rg')
        self.assertEqual(group.id, self.replacer.update_target(
            self.root.id, group.id, '0'))
        self._updated(group)
        self.assertEqual(group.id, self.replacer.stack_to_update(
            self.root.id, group.id, '0'))

    def test_each_update_of_an_owner_reuses_its_login(self):
        group = self._group('rg')
        self.replacer.update_target(self.root.id, group.id, '0')
        self.replacer.update_target(self.root.id, group.id, '1')
        self.assertEqual(2, self.update.call_count)
        self.assertEqual(['atrust'], self.logins)

    def test_a_token_near_its_end_sends_the_trust(self):
        # heat-engine would act on it for the whole update: it logs in
        # through the trust instead, as for its own updates.
        self._trust_token(hours=0.25)
        group = self._group('rg')
        self.replacer.update_target(self.root.id, group.id, '0')
        ctxt = self.update.call_args[0][0]
        self.assertIsInstance(ctxt, heat_context.StoredContext)
        self.assertEqual(('atrust', 'owner-id'),
                         (ctxt.trust_id, ctxt.trustor_user_id))
        self.assertIs(ctxt, self.replacer._stored_context(group.id))

    def test_resource_group_member_updates_the_root_if_so_set(self):
        self.replacer = heat_replace.HeatReplacer(
            'health-engine-1', update_stack=heat_replace.ROOT)
        group = self._group('rg')
        self.assertEqual(self.root.id, self.replacer.stack_to_update(
            self.root.id, group.id, '0'))
        self.assertEqual(self.root.id, self.replacer.update_target(
            self.root.id, group.id, '0'))
        self._updated(self.root)

    def test_resource_of_the_root_updates_the_root(self):
        root = self._stack('other', SERVER)
        self.assertEqual(root.id, self.replacer.update_target(
            root.id, root.id, 'server'))
        self._updated(root)

    def test_asg_without_desired_capacity_updates_its_nested_stack(self):
        for name in ('asg', 'aws_asg'):
            self.update.reset_mock()
            group = self._group(name)
            self.assertEqual(group.id, self.replacer.update_target(
                self.root.id, group.id, '1'))
            self._updated(group)

    def test_asg_with_desired_capacity_updates_the_root_if_so_set(self):
        self.replacer = heat_replace.HeatReplacer(
            'health-engine-1', update_stack=heat_replace.ROOT)
        for name in ('asg_sized', 'aws_asg_sized'):
            self.update.reset_mock()
            group = self._group(name)
            self.assertEqual(self.root.id, self.replacer.update_target(
                self.root.id, group.id, '1'))
            self._updated(self.root)

    def test_owner_is_unchanged(self):
        group = self._group('asg')
        before = [self.replacer.owner(s.id) for s in (self.root, group)]
        self.replacer.update_target(self.root.id, group.id, '1')
        self.replacer.update_target(self.root.id, self._group('rg').id, '0')
        self.assertEqual(before, [self.replacer.owner(s.id)
                                  for s in (self.root, group)])

    def test_refuses_a_stack_not_complete(self):
        group = self._group('rg')
        for state, why in [
                (('UPDATE', 'IN_PROGRESS'), 'an action is in progress'),
                (('SUSPEND', 'COMPLETE'), 'heat-engine does not update'),
                (('DELETE', 'COMPLETE'), 'heat-engine does not update'),
                (('UPDATE', 'FAILED'), 'its last action failed')]:
            self._set_state(self.root, *state)
            e = self.assertRaises(heat_replace.NotActionable,
                                  self.replacer.update_target,
                                  self.root.id, group.id, '0')
            self.assertIn('Stack top (%s) is %s_%s: %s' % (
                self.root.id, state[0], state[1], why), str(e))
        self.update.assert_not_called()

    def test_updatable_states(self):
        root = self._stack('other', SERVER)
        for action in sorted(heat_replace.UPDATABLE_ACTIONS):
            self._set_state(root, action, 'COMPLETE')
            self.replacer.update_target(root.id, root.id, 'server')
        self.assertEqual(len(heat_replace.UPDATABLE_ACTIONS),
                         self.update.call_count)

    def test_refuses_an_asg_nested_stack_not_complete(self):
        group = self._group('asg')
        self._set_state(group, 'UPDATE', 'IN_PROGRESS')
        e = self.assertRaises(heat_replace.NotActionable,
                              self.replacer.update_target,
                              self.root.id, group.id, '1')
        self.assertIn('top-asg-abc', str(e))
        self.update.assert_not_called()

    def test_refuses_an_asg_nested_stack_while_the_root_updates(self):
        group = self._group('asg')
        self._set_state(self.root, 'UPDATE', 'IN_PROGRESS')
        self.assertRaises(heat_replace.NotActionable,
                          self.replacer.update_target,
                          self.root.id, group.id, '1')
        self.update.assert_not_called()

    def test_a_member_gone_is_not_updated_for(self):
        group = self._group('rg')
        self.assertRaises(exception.ResourceNotFound,
                          self.replacer.update_target,
                          self.root.id, group.id, '7')
        self.update.assert_not_called()

    def test_errors_of_heat_engine_reach_the_caller(self):
        group = self._group('rg')
        self.update.side_effect = exception.ActionInProgress(
            stack_name='top', action='UPDATE')
        self.assertRaises(exception.ActionInProgress,
                          self.replacer.update_target,
                          self.root.id, group.id, '0')


class TestReplaced(ReplacerTestCase):

    def setUp(self):
        super(TestReplaced, self).setUp()
        self.root = self._stack('top', SERVER)
        self.old = self.root['server'].resource_id

    def test_same_server_is_not_replaced(self):
        self.assertFalse(self.replacer.replaced(self.root.id, 'server',
                                                self.old))

    def test_new_physical_id_is_replaced(self):
        # Legacy: the replacement takes the resource's place in the stack.
        self.root['server'].resource_id_set('new-server')
        self.assertTrue(self.replacer.replaced(self.root.id, 'server',
                                               self.old))

    def test_convergence_replacement_counts_once_created(self):
        # Convergence: a second row of the same name replaces the old one.
        old_row = self.root['server']
        new_row = resource_object.Resource.create(self.ctx, {
            'stack_id': self.root.id, 'name': 'server',
            'replaces': old_row.id, 'action': 'INIT', 'status': 'COMPLETE',
            'current_template_id': self.root.t.id})
        self.assertFalse(self.replacer.replaced(self.root.id, 'server',
                                                self.old))
        for state, replaced in [(('CREATE', 'IN_PROGRESS'), False),
                                (('CREATE', 'FAILED'), False),
                                (('CREATE', 'COMPLETE'), True)]:
            resource_object.Resource.update_by_id(self.ctx, new_row.id, {
                'physical_resource_id': 'new-server',
                'action': state[0], 'status': state[1]})
            self.assertEqual(replaced, self.replacer.replaced(
                self.root.id, 'server', self.old), state)
        self.assertEqual('new-server', self.replacer.resource(
            self.root.id, 'server').physical_id)

    def test_deleted_replacement_leaves_the_old_server(self):
        new_row = resource_object.Resource.create(self.ctx, {
            'stack_id': self.root.id, 'name': 'server',
            'physical_resource_id': 'new-server',
            'action': 'DELETE', 'status': 'COMPLETE'})
        self.assertIsNotNone(new_row.id)
        self.assertEqual(self.old, self.replacer.resource(
            self.root.id, 'server').physical_id)


class TestRecordEvent(ReplacerTestCase):

    def _events(self, stack, nested_depth=None):
        engine = heat_service.EngineService('host-1', 'engine')
        return [(e['resource_name'], e['resource_action'],
                 e['resource_status'], e['resource_status_reason'],
                 e['physical_resource_id'], e['resource_type'])
                for e in engine.list_events(
                    self.ctx, dict(stack.identifier()),
                    nested_depth=nested_depth)]

    def test_event_in_heats_list_of_the_resource(self):
        root = self._stack('top', SERVER)
        physical_id = root['server'].resource_id
        self.assertIsNotNone(self.replacer.record_event(
            root.id, 'server', 'fencing: stopping server %s' % physical_id))
        self.replacer.record_event(root.id, 'server', 'x' * 300,
                                   status=heat_replace.FAILED)
        events = self._events(root)
        self.assertIn(('server', 'HEALTH', 'IN_PROGRESS',
                       'fencing: stopping server %s' % physical_id,
                       physical_id, 'OS::Heat::TestResource'), events)
        self.assertIn(('server', 'HEALTH', 'FAILED', 'x' * 255, physical_id,
                       'OS::Heat::TestResource'), events)

    def test_event_of_a_member_shows_in_the_roots_nested_list(self):
        root = self._stack('top', GROUPS, create=False)
        nested = self._stack('top-rg-abc', MEMBERS, owner=root,
                             parent_resource='rg')
        self.replacer.record_event(nested.id, '0', 'replaced',
                                   status=heat_replace.COMPLETE)
        self.assertIn(('0', 'HEALTH', 'COMPLETE', 'replaced',
                       nested['0'].resource_id, 'OS::Heat::TestResource'),
                      self._events(root, nested_depth=1))

    def test_never_named_like_the_stack(self):
        root = self._stack('server', SERVER)
        self.assertIsNone(self.replacer.record_event(root.id, 'server', 'x'))
        self.assertNotIn('HEALTH', [e[1] for e in self._events(root)])

    def test_status_is_one_of_heats(self):
        root = self._stack('top', SERVER)
        self.assertRaises(ValueError, self.replacer.record_event, root.id,
                          'server', 'x', status='DONE')
