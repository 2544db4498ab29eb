"""A target follows its server when its group member is replaced whole.

With ``replace: MEMBER`` Heat replaces the member's nested stack: the
server comes back in another stack, at the same path. The resolver keeps
the old member's servers until the new member's stack holds one, and the
sync moves the target's row there (its history and recovery kept), never
removing it while the update runs.
"""

import fixtures
from heat.common import template_format
from heat.db import api as heat_db
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.objects import resource as resource_object
from heat.tests import utils
from oslo_utils import timeutils

from heat_health.common import nova_adapter
from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.pools import lb_follow
from heat_health.policy import targets
from tests.unit import base
from tests.unit import test_registry

MEMBER = {'stack_id': 'group-1', 'name': 'm0', 'nested_id': 'member-0'}

TOP = '''
heat_template_version: 2018-08-31
resources:
  asg:
    type: OS::Heat::None
'''

GROUP = '''
heat_template_version: 2018-08-31
resources:
  m0:
    type: OS::Heat::None
  m1:
    type: OS::Heat::None
'''

MEMBER_TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  port:
    type: OS::Heat::None
  server:
    type: OS::Heat::TestResource
'''


def _server(status, address):
    return nova_adapter.Server(status, (address,) if address else (), 'web')


def _place(stack_id, server_id, path='asg/m0/server'):
    return {(stack_id, 'server'): {'server_id': server_id, 'path': path,
                                   'addresses': []}}


class MemberSyncTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(MemberSyncTestCase, self).setUp()
        self.setup_health_db()
        test_registry._policy('p1')
        self.others = _place('member-1', 's1', 'asg/m1/server')

    def _sync(self, *places):
        found = dict(self.others)
        for place in places:
            found.update(place)
        return db_api.target_sync('p1', found, 60)

    def _rows(self):
        return {t.path: t for t in db_api.target_get_all(['p1'])['p1']}

    def _recovering(self, path, stage, **recovery):
        values = dict(action='RECREATE', stage=stage, attempt=2,
                      old_server_id='s0', verify_seconds=30,
                      drained={'pool-1': ['10.0.0.5', 3]},
                      drained_of='s0', **recovery)
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Target).filter_by(path=path).update(
                {'state': 'RECOVERING', 'recovery': values, 'attempts': 2})

    def test_a_marked_member_keeps_its_row_then_moves_with_its_server(self):
        self._sync(_place('member-0', 's0'))
        before = self._rows()['asg/m0/server']
        self._recovering('asg/m0/server', 'updating', member=MEMBER)
        # The update runs: the old member's place is gone, no new one yet.
        self.assertEqual(([], [], []), self._sync())
        kept = self._rows()['asg/m0/server']
        self.assertEqual((before.id, 'member-0', 's0', 'RECOVERING'),
                         (kept.id, kept.stack_id, kept.server_id,
                          kept.state))
        # The new member's server at the same path: the row follows it.
        added, removed, replaced = self._sync(_place('member-9', 's9'))
        self.assertEqual(([], [], [('member-9', 'server')]),
                         (added, removed, replaced))
        moved = self._rows()['asg/m0/server']
        self.assertEqual((before.id, 'member-9', 'server', 's9', 'VERIFYING',
                          2), (moved.id, moved.stack_id, moved.resource_name,
                               moved.server_id, moved.state, moved.attempts))
        self.assertEqual(('replaced', 's9', MEMBER, 2),
                         (moved.recovery['stage'],
                          moved.recovery['new_server_id'],
                          moved.recovery['member'],
                          moved.recovery['attempt']))
        # What the recovery drained stays with the target to undo.
        self.assertEqual({'pool-1': ['10.0.0.5', 3]},
                         moved.recovery['drained'])
        self.assertEqual('server s0 replaced by s9 (RECREATE): verifying',
                         moved.state_reason)
        # The other member is untouched; syncing again changes nothing.
        self.assertEqual('member-1', self._rows()['asg/m1/server'].stack_id)
        self.assertEqual(([], [], []), self._sync(_place('member-9', 's9')))

    def test_moved_at_once_when_the_new_server_shows_straight_away(self):
        self._sync(_place('member-0', 's0'))
        self._recovering('asg/m0/server', 'marked', member=MEMBER)
        self.assertEqual(([], [], [('member-9', 'server')]),
                         self._sync(_place('member-9', 's9')))
        self.assertEqual('member-9', self._rows()['asg/m0/server'].stack_id)

    def test_a_member_not_marked_yet_is_a_place_gone(self):
        # Before the mark nothing of ours replaces it: a user's update
        # or scale-in took it.
        self._sync(_place('member-0', 's0'))
        self._recovering('asg/m0/server', 'fenced', member=MEMBER)
        self.assertEqual(([], [('member-0', 'server')], []), self._sync())
        self.assertNotIn('asg/m0/server', self._rows())

    def test_a_member_replaced_by_a_users_update_keeps_its_row(self):
        # Not ours: a new server at the place, judged from NO_DATA.
        self._sync(_place('member-0', 's0'))
        before = self._rows()['asg/m0/server']
        self.assertEqual(([], [], [('member-9', 'server')]),
                         self._sync(_place('member-9', 's9')))
        moved = self._rows()['asg/m0/server']
        self.assertEqual((before.id, 'member-9', 's9', 'NO_DATA',
                          'server s0 replaced by s9'),
                         (moved.id, moved.stack_id, moved.server_id,
                          moved.state, moved.state_reason))

    def test_a_server_replaced_alone_is_a_place_gone_when_it_goes(self):
        self._sync(_place('member-0', 's0'))
        self._recovering('asg/m0/server', 'updating')
        self.assertEqual(([], [('member-0', 'server')], []), self._sync())

    def test_a_member_given_up_on_is_a_place_gone(self):
        self._sync(_place('member-0', 's0'))
        self._recovering('asg/m0/server', 'updating', member=MEMBER)
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Target).filter_by(
                path='asg/m0/server').update({'state': 'UNHEALTHY'})
        self.assertEqual(([], [('member-0', 'server')], []), self._sync())

    def test_a_users_reset_leaves_recoverys_marks_to_be_cleared(self):
        # The user's mark_unhealthy: false on the server's resource does
        # not reach the member recovery marked, and recovery's mark of
        # the resource may land after the user's clear: both stay to be
        # cleared (Unmark) once the server is seen healthy.
        self._sync(_place('member-0', 's0'))
        self._recovering('asg/m0/server', 'marked', member=MEMBER,
                         marked_failed='s0')
        self._recovering('asg/m1/server', 'marked', marked_failed='s1')
        self.assertEqual(1, db_api.target_reset('member-0', 'server',
                                                'marked healthy'))
        self.assertEqual(1, db_api.target_reset('member-1', 'server',
                                                'marked healthy'))
        rows = self._rows()
        self.assertEqual('s0', rows['asg/m0/server'].recovery.get(
            'marked_failed'))
        self.assertEqual('s1', rows['asg/m1/server'].recovery.get(
            'marked_failed'))


class _MemberTree(base.HeatHealthTestCase):
    """A group of template members, each a server and its port."""

    def setUp(self):
        super(_MemberTree, self).setUp()
        self.setup_health_db()
        self.useFixture(fixtures.MockPatchObject(
            targets, 'SERVER_TYPES', frozenset(['OS::Heat::TestResource'])))
        self.ctx = utils.dummy_context()
        self.top = self._create('top', TOP)
        self.group = self._create('top-asg', GROUP, self.top, 'asg')
        self.members = [self._create('top-asg-m%d' % i, MEMBER_TEMPLATE,
                                     self.group, 'm%d' % i)
                        for i in range(2)]
        self.resolver = targets.Resolver()
        self.policy = test_registry._policy('p1', self.top.id, ['asg'])

    def _create(self, name, tmpl, owner=None, parent=None, create=True):
        stack = heat_stack.Stack(
            self.ctx, name, template.Template(template_format.parse(tmpl)),
            owner_id=owner and owner.id, parent_resource=parent)
        stack.store()
        if create:
            stack.create()
            heat_db.stack_update(self.ctx, stack.id, {'status': 'COMPLETE'})
        if owner is not None:
            owner[parent].resource_id_set(stack.id)
        return stack

    def _places(self):
        found = self.resolver.resolve(self.ctx, [self.policy])[
            self.policy.id].places
        return {p['path']: (key[0], p['server_id'])
                for key, p in found.items()}

    def _replacement(self, name):
        """Convergence's replacement of the member, its stack not made."""
        old = self.group[name]
        new = resource_object.Resource.create(self.ctx, {
            'stack_id': self.group.id, 'name': name, 'replaces': old.id,
            'action': 'INIT', 'status': 'COMPLETE',
            'current_template_id': self.group.t.id,
            'root_stack_id': self.top.id})
        resource_object.Resource.update_by_id(self.ctx, old.id,
                                              {'replaced_by': new.id})
        heat_db.stack_update(self.ctx, self.group.id,
                             {'action': 'UPDATE', 'status': 'IN_PROGRESS'})
        return new


class MemberResolutionTestCase(_MemberTree):
    """The resolver on a group of template members being replaced."""

    def test_the_old_members_server_stays_until_the_new_one_has_one(self):
        server = self.members[0]['server'].resource_id
        self.assertEqual((self.members[0].id, server),
                         self._places()['asg/m0/server'])
        new = self._replacement('m0')
        self.assertEqual((self.members[0].id, server),
                         self._places()['asg/m0/server'])
        # The new member's stack is made, its server not yet.
        stack = heat_stack.Stack(
            self.ctx, 'top-asg-m0-new',
            template.Template(template_format.parse(MEMBER_TEMPLATE)),
            owner_id=self.group.id, parent_resource='m0')
        stack.store()
        resource_object.Resource.update_by_id(self.ctx, new.id, {
            'physical_resource_id': stack.id, 'action': 'CREATE',
            'status': 'IN_PROGRESS'})
        self.assertEqual((self.members[0].id, server),
                         self._places()['asg/m0/server'])
        # Its server is made: the place is the new member's.
        stack.create()
        found = self._places()
        self.assertEqual(stack.id, found['asg/m0/server'][0])
        self.assertNotEqual(server, found['asg/m0/server'][1])
        self.assertEqual(stack['server'].resource_id,
                         found['asg/m0/server'][1])
        self.assertEqual(self.members[1].id, found['asg/m1/server'][0])
        self.assertEqual(2, len([p for p in found if p.endswith('server')]))

    def test_the_old_member_gone_leaves_the_new_only(self):
        new = self._replacement('m0')
        stack = heat_stack.Stack(
            self.ctx, 'top-asg-m0-new',
            template.Template(template_format.parse(MEMBER_TEMPLATE)),
            owner_id=self.group.id, parent_resource='m0')
        stack.store()
        stack.create()
        resource_object.Resource.update_by_id(self.ctx, new.id, {
            'physical_resource_id': stack.id, 'action': 'CREATE',
            'status': 'COMPLETE'})
        resource_object.Resource.update_by_id(
            self.ctx, self.group['m0'].id,
            {'action': 'DELETE', 'status': 'COMPLETE',
             'updated_at': timeutils.utcnow()})
        self.assertEqual(stack.id, self._places()['asg/m0/server'][0])


class MemberPoolTestCase(_MemberTree):
    """The pool follower on a member replaced whole: a new port, address.

    The member's server stays in the pool until the new member's server
    is plugged in on its own new port; then the one batch swaps them.
    """

    def _wanted(self, servers):
        follower = lb_follow.MemberFollower(
            octavia_client=None, list_servers=lambda ids: {
                i: servers[i] for i in ids if i in servers})
        follower._resolver = self.resolver
        old = self.members[0]['server'].resource_id
        other = self.members[1]['server'].resource_id
        lb = lb_follow.LoadBalancer(1, self.policy.id, self.top.id, 'lb', {
            'subnet_cidr': '10.0.1.0/24', 'targets': ['asg'],
            'members': {
                old: {'member_id': 'm1', 'address': '10.0.1.5',
                      'path': 'asg/m0/server'},
                other: {'member_id': 'm2', 'address': '10.0.1.6',
                        'path': 'asg/m1/server'}}})
        return follower._wanted(self.ctx, lb)[0]

    def test_the_pool_swaps_the_member_for_the_new_ones_address(self):
        old = self.members[0]['server'].resource_id
        other = self.members[1]['server'].resource_id
        servers = {old: _server('SHUTOFF', '10.0.1.5'),
                   other: _server('ACTIVE', '10.0.1.6')}
        before = {old: '10.0.1.5', other: '10.0.1.6'}
        self.assertEqual(before, self._wanted(servers))
        new = self._replacement('m0')
        stack = heat_stack.Stack(
            self.ctx, 'top-asg-m0-new',
            template.Template(template_format.parse(MEMBER_TEMPLATE)),
            owner_id=self.group.id, parent_resource='m0')
        stack.store()
        resource_object.Resource.update_by_id(self.ctx, new.id, {
            'physical_resource_id': stack.id, 'action': 'CREATE',
            'status': 'IN_PROGRESS'})
        # The new member's stack holds no server yet: the pool keeps the
        # old one (drained by recovery), never shrinks.
        self.assertEqual(before, self._wanted(servers))
        stack.create()
        created = stack['server'].resource_id
        # Its server is building, not plugged in yet: still the old one.
        servers[created] = _server('BUILD', None)
        self.assertEqual(before, self._wanted(servers))
        # On its new port: swapped for the new address in one batch.
        servers[created] = _server('ACTIVE', '10.0.1.9')
        self.assertEqual({created: '10.0.1.9', other: '10.0.1.6'},
                         self._wanted(servers))
