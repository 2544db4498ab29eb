"""A pool's full member list keeps the members recovery drained.

The follower lists a pool's members and sends the whole list back; a
drain that Octavia accepted in between (another engine's recovery, or
this one's) must not be undone by the weight the listing read.
"""

from unittest import mock

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from octaviaclient.api.v2 import octavia as octavia_api
import requests

from heat_health.common import lb_members
from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine.pools import lb_follow
from tests.unit import base
from tests.unit import test_lb_members as fake_octavia

DATA = {'pool_id': fake_octavia.POOL, 'loadbalancer_id': fake_octavia.LB,
        'protocol_port': 80, 'subnet_id': None, 'subnet_cidr': '10.0.0.0/24',
        'members': {'s1': {'address': '10.0.0.5', 'member_id': 'a'},
                    's2': {'address': '10.0.0.6', 'member_id': 'b'}}}


def _api(fake):
    http = requests.Session()
    http.mount('http://', fake)
    session = ks_session.Session(
        auth=token_endpoint.Token(fake_octavia.OCTAVIA, 't'), session=http)
    return octavia_api.OctaviaAPI(endpoint=fake_octavia.OCTAVIA,
                                  session=session)


class DrainedMembersTest(base.HeatHealthTestCase):

    def setUp(self):
        super(DrainedMembersTest, self).setUp()
        self.setup_health_db()
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Policy(
                id='p1', stack_id='stack', resource_name='health',
                project_id='p', spec={}, enabled=True, generation=1))

    def _target(self, name, recovery):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Target(
                policy_id='p1', server_id=name, stack_id='stack',
                resource_name=name, path='group/' + name, state='RECOVERING',
                recovery=recovery))

    def test_members_drained_are_listed_with_what_recovery_does(self):
        pool = fake_octavia.POOL
        self._target('s1', {'drained': {pool: ['10.0.0.5', 5]}})
        self._target('s2', {'drained': {pool: ['10.0.0.6', 1]},
                            'restoring': True})
        self._target('s3', {'drained': {pool: ['10.0.0.7', 1]},
                            'restored': True})
        self._target('s4', {'drained': {'other-pool': ['10.0.0.8', 1]}})
        self._target('s5', {'action': 'REBOOT'})
        # Replaced since its drain: its member gets no weight back.
        self._target('s6', {'drained': {pool: ['10.0.0.9', 1]},
                            'drained_of': 'old', 'restored': True})
        self.assertEqual({pool: {'10.0.0.5': (db_api.HELD, 5),
                                 '10.0.0.6': (db_api.RESTORING, 1),
                                 '10.0.0.7': (db_api.RESTORED, 1)}},
                         db_api.drain_states([pool]))
        self.assertEqual({}, db_api.drain_states([]))

    def _restore_after_listing(self, fake, name, address, weight):
        """The restore of the member lands just after the follower lists."""
        listed = lb_members.PoolMembers.list

        def listing(pool):
            found = listed(pool)
            with db_session.facade.writer.using(
                    db_session.Session()) as session:
                row = session.query(models.Target).filter_by(
                    server_id=name).one()
                row.recovery = dict(row.recovery, restoring=True,
                                    restored=True)
            for member in fake.members:
                if member['address'] == address:
                    member['weight'] = weight
            return found
        return mock.patch.object(lb_members.PoolMembers, 'list', listing)

    def test_the_follower_never_undoes_a_restore_after_its_listing(self):
        fake = fake_octavia.FakeOctavia()
        fake.members = [
            dict(fake_octavia._member('10.0.0.5', weight=0), id='a',
                 name='s1'),
            dict(fake_octavia._member('10.0.0.6'), id='b', name='s2')]
        self._target('s1', {'drained': {fake_octavia.POOL:
                                        ['10.0.0.5', 5]}})
        follower = lb_follow.MemberFollower(lambda stack_id: _api(fake),
                                            list_servers=lambda ids: {})
        wanted = {'s1': '10.0.0.5', 's2': '10.0.0.6', 's3': '10.0.0.7'}
        lb = lb_follow.LoadBalancer(1, 'lb-uuid', 'stack', 'lb', DATA)
        with mock.patch.object(follower, '_wanted',
                               return_value=(wanted, {}, frozenset())), \
                mock.patch.object(lb_members.PoolMembers, 'ready',
                                  return_value=True), \
                self._restore_after_listing(fake, 's1', '10.0.0.5', 5):
            follower._follow(None, lb)
        self.assertEqual({'10.0.0.5': 5, '10.0.0.6': 1, '10.0.0.7': 1},
                         {m['address']: m['weight'] for m in fake.members})

    def test_the_follower_sends_a_drained_member_at_weight_zero(self):
        fake = fake_octavia.FakeOctavia()
        # The listing still reads weight 1: the drain came after it.
        fake.members = [
            dict(fake_octavia._member('10.0.0.5'), id='a', name='s1'),
            dict(fake_octavia._member('10.0.0.6'), id='b', name='s2')]
        self._target('s1', {'drained': {fake_octavia.POOL:
                                        ['10.0.0.5', 1]}})
        follower = lb_follow.MemberFollower(lambda stack_id: _api(fake),
                                            list_servers=lambda ids: {})
        wanted = {'s1': '10.0.0.5', 's2': '10.0.0.6', 's3': '10.0.0.7'}
        lb = lb_follow.LoadBalancer(1, 'lb-uuid', 'stack', 'lb', DATA)
        with mock.patch.object(follower, '_wanted',
                               return_value=(wanted, {}, frozenset())):
            follower._follow(None, lb)
        self.assertEqual({'10.0.0.5': 0, '10.0.0.6': 1, '10.0.0.7': 1},
                         {m['address']: m['weight'] for m in fake.members})


class JoinTogetherTest(base.HeatHealthTestCase):
    """Servers built together join the pool in one batch."""

    def setUp(self):
        super(JoinTogetherTest, self).setUp()
        self.setup_health_db()
        self.now = [100.0]
        self.fake = fake_octavia.FakeOctavia()
        self.fake.members = [
            dict(fake_octavia._member('10.0.0.5', weight=0), id='a',
                 name='s1'),
            dict(fake_octavia._member('10.0.0.6', weight=0), id='b',
                 name='s2')]
        self.follower = lb_follow.MemberFollower(
            lambda stack_id: _api(self.fake), list_servers=lambda ids: {},
            clock=lambda: self.now[0])
        self.lb = lb_follow.LoadBalancer(1, 'lb-uuid', 'stack', 'lb', DATA)

    def _pass(self, wanted, building):
        with mock.patch.object(self.follower, '_wanted', return_value=(
                wanted, {}, frozenset(building))):
            self.follower._follow(None, self.lb)
        return sorted(m['address'] for m in self.fake.members)

    def _sent(self):
        return [r for r in self.fake.requests if r[0] == 'PUT']

    def test_a_replacement_waits_for_its_sibling_being_built(self):
        # s3 replaces s1 and has its address; s4, replacing s2, is built.
        first = {'s3': '10.0.0.7', 's2': '10.0.0.6'}
        self.assertEqual(['10.0.0.5', '10.0.0.6'], self._pass(first, {'s4'}))
        self.now[0] += lb_follow.JOIN_SECONDS / 2
        self._pass(first, {'s4'})
        self.assertEqual([], self._sent())
        # s4 has its address: both swaps in one batch.
        self.now[0] += 0.1
        both = {'s3': '10.0.0.7', 's4': '10.0.0.8'}
        self.assertEqual(['10.0.0.7', '10.0.0.8'], self._pass(both, ()))
        self.assertEqual(1, len(self._sent()))

    def test_a_server_that_stays_in_build_holds_the_pool_briefly(self):
        first = {'s3': '10.0.0.7', 's2': '10.0.0.6'}
        self._pass(first, {'s4'})
        self.now[0] += lb_follow.JOIN_SECONDS
        self.assertEqual(['10.0.0.6', '10.0.0.7'], self._pass(first, {'s4'}))
        self.assertEqual(1, len(self._sent()))

    def test_nothing_waits_when_nothing_else_is_built(self):
        self.assertEqual(['10.0.0.6', '10.0.0.7'], self._pass(
            {'s3': '10.0.0.7', 's2': '10.0.0.6'}, ()))
