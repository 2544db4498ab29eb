"""The registry on a real sqlite database, targets from real Heat stacks."""

import datetime
import threading
from unittest import mock

import fixtures
from heat.common import template_format
from heat.db import api as heat_db
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.tests import utils
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import test_fixtures
from oslo_utils import timeutils
from oslotest import base as test_base
import sqlalchemy as sa

from heat_health.db import api as db_api
from heat_health.db import fenced_writes
from heat_health.db import migration
from heat_health.db import models
from heat_health.db import policies as db_policies
from heat_health.db import session as db_session
from heat_health.db import targets as db_targets
from heat_health.engine import endpoint
from heat_health.engine.ownership import partition
from heat_health.engine.ownership import registry
from heat_health.objects import policy as policy_object
from heat_health.policy import targets
from tests.unit import base
from tests.unit import test_migrations

LEAVES = '''
heat_template_version: 2018-08-31
resources:
  '0':
    type: OS::Heat::TestResource
  '1':
    type: OS::Heat::TestResource
'''

TOP = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
  other:
    type: OS::Heat::TestResource
  workers:
    type: OS::Heat::TestResource
  cells:
    type: OS::Heat::TestResource
'''


def _policy(policy_id, stack_id='stack-1', names=('web',), grace=300,
            project_id='tenant'):
    return policy_object.Policy.create_or_update({
        'id': policy_id, 'stack_id': stack_id, 'resource_name': 'policy',
        'project_id': project_id, 'enabled': True,
        'spec': {'targets': list(names),
                 'detection': {'node_update_timeout': grace}}})


class ClaimTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(ClaimTestCase, self).setUp()
        self.setup_health_db()

    def test_two_engines_never_share(self):
        for n in range(10):
            _policy('p%d' % n)
        one = registry.Registry('engine-1', lease_seconds=30)
        two = registry.Registry('engine-2', lease_seconds=30)
        first = {p.id for p in one.claim()}
        self.assertEqual(10, len(first))
        self.assertEqual([], two.claim())
        # Renewal keeps them with engine-1.
        self.assertEqual(first, {p.id for p in one.claim()})
        self.assertEqual([], two.claim())

    def test_expired_lease_is_taken_over(self):
        _policy('p1')
        one = registry.Registry('engine-1', lease_seconds=30)
        two = registry.Registry('engine-2', lease_seconds=30)
        self.assertEqual(['p1'], [p.id for p in one.claim()])
        later = timeutils.utcnow() + datetime.timedelta(seconds=31)
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            taken = two.claim()
        self.assertEqual(['engine-2'], [p.engine_id for p in taken])
        # engine-1 comes back: the policy stays with engine-2.
        self.assertEqual([], one.claim())

    def test_a_claim_reads_again_only_the_rows_that_changed(self):
        for n in range(3):
            _policy('p%d' % n)
        one = registry.Registry('engine-1', lease_seconds=30)
        first = {p.id: p for p in one.claim()}
        statements = []

        def executed(conn, cursor, statement, *args):
            statements.append(statement)
        engine = db_session.get_engine()
        sa.event.listen(engine, 'before_cursor_execute', executed)
        self.addCleanup(sa.event.remove, engine, 'before_cursor_execute',
                        executed)
        again = {p.id: p for p in one.claim()}
        self.assertEqual(first, again)
        self.assertEqual([], [s for s in statements if 'spec' in s])
        # A user's update of p1's spec is read at the next claim.
        policy_object.Policy.create_or_update({
            'id': 'p1', 'stack_id': 'stack-1', 'resource_name': 'policy',
            'project_id': 'tenant', 'enabled': True,
            'spec': {'targets': ['other'],
                     'detection': {'node_update_timeout': 30}}})
        del statements[:]
        claimed = {p.id: p for p in one.claim()}
        self.assertEqual(['other'], claimed['p1'].spec['targets'])
        self.assertIs(first['p0'], claimed['p0'])
        self.assertEqual(1, len([s for s in statements if 'spec' in s]))

    def test_a_quiet_claim_reads_no_row_of_others_nor_its_own(self):
        for n in range(6):
            _policy('p%d' % n)
        members = {'engine-1', 'engine-2'}

        def claim(engine_id, known, digest=None):
            return policy_object.Policy.claim(
                engine_id, 30, known=known, members=frozenset(members),
                digest=digest,
                ring_owner=lambda pid: ('engine-1' if pid < 'p3' or
                                        'engine-2' not in members
                                        else 'engine-2'))
        _rows, keys, digest = claim('engine-1', {})
        claim('engine-2', {})
        self.assertEqual(['p0', 'p1', 'p2'], sorted(keys))
        read = []

        def recorded(real):
            def call(*args):
                found = real(*args)
                read.append((real.__name__, sorted(r.id for r in found)))
                return found
            return call
        for name in ('_held', '_takeable'):
            self.patchobject(db_policies, name, side_effect=recorded(
                getattr(db_policies, name)))
        # Nothing changed: no row of engine-2's, no whole row, same keys;
        # with the last digest, not even its own rows.
        self.assertEqual(([], keys, digest), claim('engine-1', keys))
        self.assertEqual([('_takeable', []), ('_held', ['p0', 'p1', 'p2'])],
                         read)
        del read[:]
        self.assertEqual(([], keys, digest),
                         claim('engine-1', keys, digest))
        self.assertEqual([('_takeable', [])], read)
        # An operator pauses p1: its row is read again at the next claim.
        policy_object.Policy.set_paused(['p1'], True, 'admin')
        rows, keys, digest = claim('engine-1', keys, digest)
        self.assertEqual(['p1'], [r.id for r in rows])
        self.assertIsNotNone(rows[0].paused)
        # engine-2 leaves the group: its rows are read and taken.
        del read[:]
        members.discard('engine-2')
        rows, keys, digest = claim('engine-1', keys, digest)
        self.assertEqual(['p3', 'p4', 'p5'], sorted(r.id for r in rows))
        self.assertEqual(('_takeable', ['p3', 'p4', 'p5']), read[0])
        self.assertEqual(['p%d' % n for n in range(6)], sorted(keys))

    def test_a_lease_is_renewed_once_a_third_of_it_ran(self):
        _policy('p1')
        one = registry.Registry('engine-1', lease_seconds=30)
        start = timeutils.utcnow()
        with mock.patch.object(timeutils, 'utcnow', return_value=start):
            one.claim()
        taken = policy_object.Policy.get('p1').lease_expires_at

        def claim_at(seconds):
            at = start + datetime.timedelta(seconds=seconds)
            with mock.patch.object(timeutils, 'utcnow', return_value=at):
                self.assertEqual(['p1'], [p.id for p in one.claim()])
            return policy_object.Policy.get('p1').lease_expires_at
        # Claims every tick write nothing for the first third...
        self.assertEqual(taken, claim_at(1))
        self.assertEqual(taken, claim_at(9))
        # ...then the lease is renewed for its whole length again.
        renewed = claim_at(11)
        self.assertEqual(start + datetime.timedelta(seconds=41),
                         renewed.replace(tzinfo=None))
        # It never runs out while the engine claims, and another engine
        # does not take it.
        two = registry.Registry('engine-2', lease_seconds=30)
        at = start + datetime.timedelta(seconds=35)
        with mock.patch.object(timeutils, 'utcnow', return_value=at):
            self.assertEqual([], two.claim())

    def test_when_targets_were_seen_goes_with_the_leases(self):
        _policy('p1')
        _policy('p2')
        one = registry.Registry('engine-1', lease_seconds=30)
        start = timeutils.utcnow()
        seen = start - datetime.timedelta(seconds=3)
        asked = []
        one.observed = lambda: asked.append(1) or {'p1': seen}
        with mock.patch.object(timeutils, 'utcnow', return_value=start):
            one.claim()
        # Taken, not renewed: nothing asked or written yet.
        self.assertEqual([], asked)
        at = start + datetime.timedelta(seconds=11)
        with mock.patch.object(timeutils, 'utcnow', return_value=at):
            one.claim()
        self.assertEqual([1], asked)
        rows = {pid: policy_object.Policy.get(pid) for pid in ('p1', 'p2')}
        self.assertEqual(seen, rows['p1'].observed_through.replace(
            tzinfo=None))
        self.assertIsNone(rows['p2'].observed_through)
        # Both leases renewed; a quiet claim after that asks nothing.
        self.assertEqual({at + datetime.timedelta(seconds=30)}, {
            r.lease_expires_at.replace(tzinfo=None) for r in rows.values()})
        with mock.patch.object(timeutils, 'utcnow', return_value=at):
            one.claim()
        self.assertEqual([1], asked)
        # Another engine says the same of p1, which it does not hold: its
        # renewal writes nothing of p1, and p1 stays as its owner left it.
        two = registry.Registry('engine-2', lease_seconds=30)
        two.observed = lambda: {'p1': at, 'p2': at}
        later = at + datetime.timedelta(seconds=11)
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            self.assertEqual([], two.claim())
            db_policies.policy_claim('engine-2', 30, known={},
                                     observed=two.observed)
        self.assertEqual(seen, policy_object.Policy.get(
            'p1').observed_through.replace(tzinfo=None))

    def test_a_row_named_for_this_engine_without_a_lease_is_not_held(self):
        _policy('p1')
        _policy('p2')
        one = registry.Registry('engine-1', lease_seconds=30)
        one.claim()
        with db_session.facade.writer.using(db_session.Session()) as s:
            s.query(models.Policy).filter_by(id='p2').update(
                {'lease_expires_at': None}, synchronize_session=False)
        # The ring gives p2 to another engine: this one neither holds nor
        # takes it, and its claim goes on with p1.
        held = policy_object.Policy.claim(
            'engine-1', 30, known={}, ring_owner=lambda pid: (
                'engine-1' if pid == 'p1' else 'engine-2'),
            members=frozenset(['engine-1', 'engine-2']))
        self.assertEqual(['p1'], sorted(held[1]))

    def test_leases_taken_apart_are_renewed_together(self):
        one = registry.Registry('engine-1', lease_seconds=30)
        start = timeutils.utcnow()

        def claim_at(seconds):
            at = start + datetime.timedelta(seconds=seconds)
            with mock.patch.object(timeutils, 'utcnow', return_value=at):
                one.claim()
            rows = [policy_object.Policy.get(p) for p in ('p1', 'p2')]
            return {p.id: p.lease_expires_at.replace(tzinfo=None) - start
                    for p in rows if p is not None}
        _policy('p1')
        self.assertEqual({'p1': datetime.timedelta(seconds=30)},
                         claim_at(0))
        _policy('p2')
        self.assertEqual({'p1': datetime.timedelta(seconds=30),
                          'p2': datetime.timedelta(seconds=35)},
                         claim_at(5))
        # p1 falls due: p2 is renewed with it, and from then on they fall
        # due together (one claim in ten seconds reads the rows held).
        self.assertEqual({'p1': datetime.timedelta(seconds=41),
                          'p2': datetime.timedelta(seconds=41)},
                         claim_at(11))

    def test_release_hands_over_at_once(self):
        _policy('p1')
        one = registry.Registry('engine-1', lease_seconds=30)
        two = registry.Registry('engine-2', lease_seconds=30)
        one.claim()
        self.assertEqual(1, one.release())
        self.assertEqual(['p1'], [p.id for p in two.claim()])

    def test_dead_holder_is_freed_live_one_kept(self):
        for n in range(3):
            _policy('p%d' % n)
        registry.Registry('engine-dead', lease_seconds=300).claim()
        restarted = registry.Registry('engine-new', lease_seconds=300)
        alive = self.patchobject(registry.service_utils, 'engine_alive',
                                 return_value=True)
        self.assertEqual(0, restarted.free_dead_owners())
        self.assertEqual([], restarted.claim())
        alive.return_value = False
        self.assertEqual(3, restarted.free_dead_owners())
        alive.assert_called_with(mock.ANY, 'engine-dead')
        self.assertEqual(['p0', 'p1', 'p2'],
                         sorted(p.id for p in restarted.claim()))

    def test_leases_renewed_between_steps_only_while_live(self):
        one = registry.Registry('e1', lease_seconds=30)
        for policy_id in ('p1', 'p2', 'p3'):
            _policy(policy_id)
        one.claim()
        now = timeutils.utcnow()
        soon = now + datetime.timedelta(seconds=5)
        with db_session.facade.writer.using(db_session.Session()) as s:
            P = models.Policy
            s.query(P).filter(P.id == 'p1').update(
                {'lease_expires_at': soon}, synchronize_session=False)
            # Ran out: the policy may have been taken since.
            s.query(P).filter(P.id == 'p2').update(
                {'lease_expires_at': now - datetime.timedelta(seconds=1)},
                synchronize_session=False)
            s.query(P).filter(P.id == 'p3').update(
                {'engine_id': 'e2', 'lease_expires_at': soon},
                synchronize_session=False)
        self.assertEqual(1, one.renew())
        with db_session.facade.reader.using(db_session.Session()) as s:
            leases = {p.id: (p.engine_id, p.lease_expires_at)
                      for p in s.query(models.Policy)}
        self.assertGreater(leases['p1'][1],
                           now + datetime.timedelta(seconds=25))
        self.assertLess(leases['p2'][1], now)
        self.assertEqual(('e2', soon), leases['p3'])
        # At most once a sixth of a lease.
        self.assertEqual(0, one.renew())

    def test_claim_one(self):
        _policy('p1')
        _policy('p2')
        one = registry.Registry('engine-1', lease_seconds=30)
        self.assertEqual(['p2'], [p.id for p in one.claim(policy_id='p2')])
        self.assertIsNone(policy_object.Policy.get('p1').engine_id)

    def test_claim_lost_to_a_deadlock_runs_again(self):
        """Engines claiming at once on MySQL: the loser is not an error."""
        _policy('p1')
        one = registry.Registry('engine-1', lease_seconds=30)
        utcnow = timeutils.utcnow
        deadlocks = [db_exc.DBDeadlock()]

        def now_or_deadlock(*args, **kwargs):
            if deadlocks:
                raise deadlocks.pop()
            return utcnow(*args, **kwargs)
        with mock.patch.object(timeutils, 'utcnow', now_or_deadlock):
            self.assertEqual(['p1'], [p.id for p in one.claim()])
        self.assertEqual([], deadlocks)
        self.assertEqual('engine-1', policy_object.Policy.get('p1').engine_id)

    def test_delete_removes_targets(self):
        _policy('p1')
        db_api.target_sync('p1', {('x', 'web'): {'server_id': 's1',
                                                 'path': 'web',
                                                 'addresses': []}}, 10)
        self.assertEqual(1, len(db_api.target_get_all(['p1'])['p1']))
        self.assertTrue(policy_object.Policy.delete('p1'))
        self.assertEqual({'p1': []}, db_api.target_get_all(['p1']))
        self.assertFalse(policy_object.Policy.delete('p1'))

    def test_state_changes_stored_in_batches_each_only_if_still_true(self):
        _policy('p1')
        db_api.target_sync('p1', {
            ('x', 'web-%d' % n): {'server_id': 's%d' % n, 'path': 'web',
                                  'addresses': []} for n in range(5)}, 0)
        one = registry.Registry('engine-1', lease_seconds=30)
        one.claim()
        generation = one.generation('p1')
        ids = {t.server_id: t.id for t in db_api.target_get_all(['p1'])['p1']}

        def change(server, old, new, server_id=None, gen=generation):
            return {'target': {'id': ids[server], 'state': new,
                               'state_reason': 'seen %s' % new},
                    'old_state': old, 'server_id': server_id or server,
                    'generation': gen,
                    'event': {'policy_id': 'p1', 'server_id': server,
                              'path': 'web', 'old_state': old,
                              'new_state': new, 'reason': '',
                              'source': 'test'}}
        changes = [
            change('s0', 'NO_DATA', 'HEALTHY'),
            # Decided of the state the previous change gave it.
            change('s0', 'HEALTHY', 'UNHEALTHY'),
            change('s1', 'HEALTHY', 'UNHEALTHY'),         # not in that state
            change('s2', 'NO_DATA', 'HEALTHY', 'other'),  # another server
            change('s3', 'NO_DATA', 'HEALTHY', gen=generation + 1),
            change('s4', 'NO_DATA', 'HEALTHY')]
        with mock.patch.object(fenced_writes, 'BATCH', 2):
            # Not this engine's: nothing is written.
            self.assertEqual(set(), db_api.target_transition('engine-2',
                                                             changes))
            done = db_api.target_transition('engine-1', changes)
        self.assertEqual({ids['s0'], ids['s4']}, done)
        self.assertEqual({'s0': 'UNHEALTHY', 's1': 'NO_DATA',
                          's2': 'NO_DATA', 's3': 'NO_DATA',
                          's4': 'HEALTHY'},
                         {t.server_id: t.state
                          for t in db_api.target_get_all(['p1'])['p1']})
        # One event per change stored, in the order they were decided.
        self.assertEqual([('s0', 'HEALTHY'), ('s0', 'UNHEALTHY'),
                          ('s4', 'HEALTHY')],
                         [(e.server_id, e.new_state)
                          for e in db_api.event_get_after(['p1'])])

    def test_a_grace_given_by_a_resume_is_read_by_the_owner_at_once(self):
        _policy('p1')
        db_api.target_sync('p1', {('x', 'web'): {'server_id': 's1',
                                                 'path': 'web',
                                                 'addresses': []}}, 0)
        before = db_api.policy_get('p1').targets_version
        db_api.policy_set_suspended('p1', True)
        db_api.policy_set_suspended('p1', False, grace_seconds=60)
        # Any engine stores the grace: the owner reads the rows again at
        # its next tick, not only at its safety re-read a minute later.
        after = db_api.policy_get('p1').targets_version
        self.assertGreater(after, before)
        row = db_api.target_get_all(['p1'])['p1'][0]
        self.assertGreater(row.grace_until,
                           timeutils.utcnow() + datetime.timedelta(seconds=50))
        # So does a policy enabled again.
        values = {'id': 'p1', 'stack_id': 'stack-1', 'resource_name': 'policy',
                  'project_id': 'tenant', 'spec': {'targets': ['web']}}
        db_api.policy_create_or_update(dict(values, enabled=False))
        db_api.policy_create_or_update(dict(values, enabled=True), 60)
        self.assertGreater(db_api.policy_get('p1').targets_version, after)


class FakePartition(object):
    """The engines' group as a Partition shows it, on tooz's hash ring."""

    enabled = True

    def __init__(self, members):
        self.members = None
        self.set_members(members)

    def set_members(self, members):
        self.members = frozenset(members)
        self._ring = partition.ring(self.members)

    def owner(self, policy_id):
        return partition.ring_owner(self._ring, policy_id)


def _rows():
    with db_session.facade.reader.using(db_session.Session()) as session:
        return {p.id: (p.engine_id, p.generation, p.handoff_to)
                for p in session.query(models.Policy)}


class RingClaimTestCase(base.HeatHealthTestCase):
    """Claims with a coordination group: the ring says who owns what."""

    def setUp(self):
        super(RingClaimTestCase, self).setUp()
        self.setup_health_db()
        self.ids = ['p%d' % n for n in range(10)]
        for policy_id in self.ids:
            _policy(policy_id)

    def _engine(self, engine_id, partition):
        return registry.Registry(engine_id, lease_seconds=30,
                                 partition=partition)

    def test_two_engines_split_as_the_ring_says(self):
        partition = FakePartition(['e1', 'e2'])
        wanted = {e: {p for p in self.ids if partition.owner(p) == e}
                  for e in ('e1', 'e2')}
        # Both engines have a share (the ring spreads ten policies).
        self.assertTrue(wanted['e1'] and wanted['e2'], wanted)
        one = self._engine('e1', partition)
        two = self._engine('e2', partition)
        self.assertEqual(wanted['e1'], {p.id for p in one.claim()})
        self.assertEqual(wanted['e2'], {p.id for p in two.claim()})
        # Renewals change nothing.
        self.assertEqual(wanted['e1'], {p.id for p in one.claim()})
        self.assertEqual(wanted['e2'], {p.id for p in two.claim()})
        rows = _rows()
        for policy_id in self.ids:
            self.assertEqual((partition.owner(policy_id), 1, None),
                             rows[policy_id])

    def test_live_owner_offers_and_keeps_until_taken(self):
        alone = FakePartition(['e1'])
        one = self._engine('e1', alone)
        self.assertEqual(set(self.ids), {p.id for p in one.claim()})
        # e2 joins the group: the ring moves some policies to it.
        both = FakePartition(['e1', 'e2'])
        one.partition = both
        two = self._engine('e2', both)
        moved = {p for p in self.ids if both.owner(p) == 'e2'}
        self.assertTrue(moved)
        # e2 first: nothing offered yet, e1's lease is live.
        self.assertEqual([], two.claim())
        # e1 offers the moved policies and still watches all of them.
        self.assertEqual(set(self.ids), {p.id for p in one.claim()})
        rows = _rows()
        for policy_id in self.ids:
            self.assertEqual(
                ('e1', 1, 'e2' if policy_id in moved else None),
                rows[policy_id])
        # The new owner takes them: a new generation fences e1's writes.
        self.assertEqual(moved, {p.id for p in two.claim()})
        self.assertEqual({p: 2 for p in moved},
                         {p: two.generation(p) for p in moved})
        self.assertEqual(set(self.ids) - moved,
                         {p.id for p in one.claim()})
        rows = _rows()
        for policy_id in self.ids:
            if policy_id in moved:
                self.assertEqual(('e2', 2, None), rows[policy_id])
            else:
                self.assertEqual(('e1', 1, None), rows[policy_id])
        self.assertIsNone(one.generation(sorted(moved)[0]))

    def test_dead_holder_loses_its_policies_at_once(self):
        one = self._engine('e1', FakePartition(['e1']))
        one.claim()
        # e1 left the group (its heartbeat lapsed) with leases still live.
        two = self._engine('e2', FakePartition(['e2']))
        self.assertEqual(set(self.ids), {p.id for p in two.claim()})
        self.assertEqual({p: ('e2', 2, None) for p in self.ids}, _rows())
        # e1 joins again and sees e2 alive: it keeps nothing, and gets
        # its share of the ring only once e2 offers it.
        both = FakePartition(['e1', 'e2'])
        one.partition = two.partition = both
        self.assertEqual([], one.claim())
        two.claim()
        self.assertEqual({p for p in self.ids if both.owner(p) == 'e1'},
                         {p.id for p in one.claim()})
        # Without a group view, a live lease of another engine is kept.
        three = self._engine('e3', None)
        self.assertEqual([], three.claim())

    def test_takeovers_in_batches_those_nobody_watches_first(self):
        cfg.CONF.set_override('takeover_batch', 3, group='heat_health')
        self.addCleanup(cfg.CONF.clear_override, 'takeover_batch',
                        group='heat_health')
        for n in range(10, 20):
            self.ids.append('p%d' % n)
            _policy(self.ids[-1])
        one = self._engine('e1', FakePartition(['e1']))
        claimed = [{p.id for p in one.claim()} for _n in range(7)]
        self.assertEqual([3, 6, 9, 12, 15, 18, 20],
                         [len(c) for c in claimed])
        self.assertEqual(set(self.ids), claimed[-1])
        # e2 joins: e1 offers the ring's moved policies, and e3's are
        # freed as e3 leaves the group: e2 takes e3's first, as nobody
        # watches them, then the offered ones, three at each claim.
        both = FakePartition(['e1', 'e2'])
        one.partition = both
        one.claim()
        moved = {p for p in self.ids if both.owner(p) == 'e2'}
        self.assertGreater(len(moved), 3)
        with db_session.facade.writer.using(db_session.Session()) as s:
            orphans = sorted(moved)[-2:]
            s.query(models.Policy).filter(
                models.Policy.id.in_(orphans)).update(
                    {'engine_id': 'e3', 'handoff_to': None},
                    synchronize_session=False)
        two = self._engine('e2', both)
        first = {p.id for p in two.claim()}
        self.assertEqual(3, len(first))
        self.assertTrue(set(orphans) <= first, (orphans, first))
        # The others are still e1's until taken: watched all along.
        rows = _rows()
        for policy_id in moved - first:
            self.assertEqual(('e1', 'e2'), (rows[policy_id][0],
                                            rows[policy_id][2]))
        while len(first) < len(moved):
            first = {p.id for p in two.claim()}
        self.assertEqual(moved, first)

    def test_registration_takes_a_free_policy_whatever_the_ring(self):
        ring = FakePartition(['e1', 'e2'])
        theirs = [p for p in self.ids if ring.owner(p) == 'e2'][0]
        one = self._engine('e1', ring)
        self.assertEqual([theirs],
                         [p.id for p in one.claim(policy_id=theirs)])
        # ... and offers it to the ring's owner at its next claim.
        one.claim()
        self.assertEqual(('e1', 1, 'e2'), _rows()[theirs])

    def test_ring_not_read_yet_takes_nothing_new(self):
        class Unread(object):
            enabled = True
            members = None

            def owner(self, policy_id):
                return None
        one = self._engine('e1', Unread())
        self.assertEqual([], one.claim())


class TargetSyncTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(TargetSyncTestCase, self).setUp()
        self.setup_health_db()
        _policy('p1')
        self.places = {
            ('stack-1', 'web'): {'server_id': 's1', 'path': 'web',
                                 'addresses': ['10.0.0.1']},
            ('nested-1', '0'): {'server_id': 's2', 'path': 'group/0',
                                'addresses': []}}

    def _targets(self):
        return {(t.stack_id, t.resource_name): t
                for t in db_api.target_get_all(['p1'])['p1']}

    def test_repeated_sync_changes_nothing(self):
        added, removed, replaced = db_api.target_sync('p1', self.places, 60)
        self.assertEqual((sorted(self.places), [], []),
                         (added, removed, replaced))
        first = {k: (t.id, t.server_id, t.state)
                 for k, t in self._targets().items()}
        self.assertEqual(([], [], []),
                         db_api.target_sync('p1', self.places, 60))
        self.assertEqual(first, {k: (t.id, t.server_id, t.state)
                                 for k, t in self._targets().items()})
        self.assertEqual({'NO_DATA'}, {s for _i, _s, s in first.values()})

    def test_replaced_server_keeps_the_place(self):
        db_api.target_sync('p1', self.places, 60)
        before = self._targets()[('stack-1', 'web')]
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Target).filter_by(
                id=before.id).update({'state': 'UNHEALTHY',
                                      'observation': 'UNHEALTHY',
                                      'observation_source': 'X',
                                      'observed_at': timeutils.utcnow()})
        places = dict(self.places)
        places[('stack-1', 'web')] = {'server_id': 's9', 'path': 'web',
                                      'addresses': ['10.0.0.9']}
        self.assertEqual(([], [], [('stack-1', 'web')]),
                         db_api.target_sync('p1', places, 60))
        after = self._targets()[('stack-1', 'web')]
        self.assertEqual((before.id, 's9', 'NO_DATA', None, ['10.0.0.9']),
                         (after.id, after.server_id, after.state,
                          after.observation, after.addresses))
        self.assertEqual('server s1 replaced by s9', after.state_reason)
        event, = db_api.event_get_recent(['p1'])
        self.assertEqual(('s9', 'UNHEALTHY', 'NO_DATA',
                          'server s1 replaced by s9'),
                         (event.server_id, event.old_state, event.new_state,
                          event.reason))
        # The other place is untouched; a place gone is removed.
        del places[('nested-1', '0')]
        self.assertEqual(([], [('nested-1', '0')], []),
                         db_api.target_sync('p1', places, 60))
        self.assertEqual([('stack-1', 'web')], sorted(self._targets()))


class _ConcurrentSyncTests(object):
    """Two engines sync the same new places at the same moment.

    Both read no rows, then both insert: on a database with real
    concurrency one insert waits for the other and meets its rows. The
    loser must retry against them, never raise a duplicate-key error.
    """

    def setUp(self):
        try:
            super(_ConcurrentSyncTests, self).setUp()
        except self.skipException as skip:
            raise self.skipException(
                '%s: the opportunistic tests connect to localhost as user '
                'openstack_citest, password openstack_citest' % skip)
        migration.db_sync()
        _policy('p1')

    def test_both_end_with_the_same_rows(self):
        places = {('stack-1', str(n)): {'server_id': 's%d' % n,
                                        'path': 'group/%d' % n,
                                        'addresses': []}
                  for n in range(3)}
        together = threading.Barrier(2, timeout=20)
        seen = threading.local()
        real = db_targets._new_server_values

        def after_both_read(*args):
            if not getattr(seen, 'waited', False):
                seen.waited = True
                together.wait()
            return real(*args)
        self.useFixture(fixtures.MockPatchObject(
            db_targets, '_new_server_values', side_effect=after_both_read))
        results, errors = [], []

        def sync():
            try:
                results.append(db_api.target_sync('p1', places, 60))
            except Exception as e:
                errors.append(e)
        threads = [threading.Thread(target=sync) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual([], errors)
        # One added the places; the other found them there on its retry.
        self.assertEqual(sorted([(sorted(places), [], []), ([], [], [])]),
                         sorted(results))
        rows = db_api.target_get_all(['p1'])['p1']
        self.assertEqual(sorted(places),
                         sorted((t.stack_id, t.resource_name) for t in rows))


class ConcurrentSyncMySQL(_ConcurrentSyncTests,
                          test_fixtures.OpportunisticDBTestMixin,
                          test_base.BaseTestCase):
    FIXTURE = test_migrations._MySQLFixture


class ConcurrentSyncPostgreSQL(_ConcurrentSyncTests,
                               test_fixtures.OpportunisticDBTestMixin,
                               test_base.BaseTestCase):
    FIXTURE = test_migrations._PostgreSQLFixture


class TargetResolutionTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(TargetResolutionTestCase, self).setUp()
        self.setup_health_db()
        # TestResource stands in for OS::Nova::Server (no Nova here).
        self.useFixture(fixtures.MockPatchObject(
            targets, 'SERVER_TYPES', frozenset(['OS::Heat::TestResource'])))
        self.ctx = utils.dummy_context()
        self._stacks = []
        # A group's nested stack, built as Heat builds it: owned by the
        # parent stack, its id the group resource's physical id.
        self.stack = self._create(TOP)
        self._nest(self.stack, 'workers', LEAVES)
        cells = self._nest(self.stack, 'cells', LEAVES.replace(
            'OS::Heat::TestResource', 'OS::Heat::None'))
        for cell in ('0', '1'):
            self._nest(cells, cell, LEAVES)
        self.registry = registry.Registry('engine-1', lease_seconds=30)

    def _create(self, tmpl, owner=None):
        stack = heat_stack.Stack(
            self.ctx, 'nested-%d' % len(self._stacks) if owner else 'top',
            template.Template(template_format.parse(tmpl)),
            owner_id=owner and owner.id)
        stack.store()
        stack.create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        # The legacy test engine leaves the stored status behind.
        heat_db.stack_update(self.ctx, stack.id, {'status': 'COMPLETE'})
        self._stacks.append(stack)
        return stack

    def _nest(self, parent, name, tmpl):
        nested = self._create(tmpl, owner=parent)
        parent[name].resource_id_set(nested.id)
        return nested

    def _heat_statements(self):
        """The statements run on Heat's database from now on."""
        statements = []

        def executed(conn, cursor, statement, *args):
            statements.append(statement)
        engine = heat_db.context_manager.writer.get_engine()
        sa.event.listen(engine, 'before_cursor_execute', executed)
        self.addCleanup(sa.event.remove, engine, 'before_cursor_execute',
                        executed)
        return statements

    def test_servers_at_any_depth(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers', 'cells'])
        found = self.registry.refresh_targets(policy)
        self.assertEqual(
            ['cells/0/0', 'cells/0/1', 'cells/1/0', 'cells/1/1', 'web',
             'workers/0', 'workers/1'], sorted(t.path for t in found))
        web = [t for t in found if t.path == 'web'][0]
        self.assertEqual(self.stack['web'].resource_id, web.server_id)
        self.assertEqual(self.stack.id, web.stack_id)
        # Watched, no verdict yet: never shown as HEALTHY.
        self.assertEqual('NO_DATA', web.state)
        resolution = self.registry.resolution(policy)
        self.assertEqual(frozenset(), resolution.busy)
        self.assertFalse(resolution.suspended)
        self.assertEqual([], self.registry.missing_targets(policy))

    def test_keeps_state_and_follows_removal(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers'])
        self.registry.refresh_targets(policy)
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Target).filter_by(
                path='web').update({'state': 'HEALTHY'})
        policy = _policy('p1', self.stack.id, ['web'])
        found = self.registry.refresh_targets(policy)
        self.assertEqual([('web', 'HEALTHY')],
                         [(t.path, t.state) for t in found])

    def test_in_progress_and_missing(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers', 'gone'])
        self.registry.refresh_targets(policy)
        self.assertEqual(['gone'], self.registry.missing_targets(policy))
        self.assertFalse(self.registry.resolution(policy).updating)
        # A stack in progress does not make its targets busy, but says
        # the tree is updating ...
        heat_db.stack_update(self.ctx, self.stack.id,
                             {'status': 'IN_PROGRESS'})
        self.registry.refresh_targets(policy)
        self.assertEqual(frozenset(), self.registry.resolution(policy).busy)
        self.assertTrue(self.registry.resolution(policy).updating)
        # ... an action on the resource holding a server does, and only
        # that place.
        member = self._stacks[1]['0']
        heat_db.resource_update_and_save(self.ctx, member.id,
                                         {'status': 'IN_PROGRESS'})
        self.registry.refresh_targets(policy)
        self.assertEqual(frozenset([(self._stacks[1].id, '0')]),
                         self.registry.resolution(policy).busy)
        self.assertFalse(self.registry.resolution(policy).suspended)

    def test_grace_starts_again_when_a_stack_action_ends(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers'], grace=60)
        before = {t.path: t.grace_until
                  for t in self.registry.refresh_targets(policy)}
        # Heat works on a resource within an action of its stack.
        heat_db.stack_update(self.ctx, self.stack.id,
                             {'action': 'UPDATE', 'status': 'IN_PROGRESS'})
        heat_db.resource_update_and_save(self.ctx, self.stack['web'].id,
                                         {'status': 'IN_PROGRESS'})
        self.registry.refresh_targets(policy)
        later = timeutils.utcnow() + datetime.timedelta(seconds=30)
        heat_db.resource_update_and_save(self.ctx, self.stack['web'].id,
                                         {'status': 'COMPLETE'})
        heat_db.stack_update(self.ctx, self.stack.id,
                             {'action': 'UPDATE', 'status': 'COMPLETE'})
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            after = {t.path: t.grace_until
                     for t in self.registry.refresh_targets(policy)}
        self.assertEqual(later + datetime.timedelta(seconds=60),
                         timeutils.normalize_time(after['web']))
        self.assertEqual(before['workers/0'], after['workers/0'])

    def test_suspended_stack(self):
        policy = _policy('p1', self.stack.id, ['web'])
        heat_db.stack_update(self.ctx, self.stack.id, {'action': 'SUSPEND'})
        self.registry.refresh_targets(policy)
        self.assertTrue(self.registry.resolve_now(policy).suspended)
        heat_db.stack_update(self.ctx, self.stack.id, {'action': 'RESUME'})
        self.assertFalse(self.registry.resolve_now(policy).suspended)

    def test_resources_are_read_again_only_when_a_stack_changed(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers'])
        self.registry.refresh_targets(policy)
        statements = self._heat_statements()
        first = self.registry.resolve_now(policy)
        self.assertEqual([], [s for s in statements
                              if 'FROM resource' in s])
        # The tree is quiet: its Resolution is the one made before, for
        # the same names only.
        self.assertIs(first, self.registry.resolve_now(policy))
        other = _policy('p1', self.stack.id, ['web'])
        self.assertEqual({(self.stack.id, 'web')},
                         set(self.registry.resolve_now(other).places))
        # A stack update in progress: its resources are read at once.
        heat_db.stack_update(self.ctx, self.stack.id,
                             {'action': 'UPDATE', 'status': 'IN_PROGRESS'})
        heat_db.resource_update_and_save(self.ctx, self.stack['web'].id,
                                         {'status': 'IN_PROGRESS'})
        found = self.registry.resolve_now(policy)
        self.assertIn((self.stack.id, 'web'), found.busy)
        self.assertTrue([s for s in statements if 'FROM resource' in s])

    def test_a_quiet_tree_is_checked_by_one_row_now_and_then(self):
        policy = _policy('p1', self.stack.id, ['web', 'workers'])
        now = [1000.0]
        self.registry._resolver._clock = lambda: now[0]
        self.registry.refresh_targets(policy)
        first = self.registry.resolve_now(policy)
        statements = self._heat_statements()

        def read_rows():
            return [s for s in statements if 'FROM resource' in s and
                    'GROUP BY' not in s]
        # Its safety net ran: one summing row says nothing changed, and
        # the Resolution made before is kept.
        now[0] += targets.TREE_SECONDS
        self.assertIs(first, self.registry.resolve_now(policy))
        self.assertEqual(1, len([s for s in statements if 'GROUP BY' in s]))
        self.assertEqual([], read_rows())
        now[0] += 1
        self.registry.resolve_now(policy)
        self.assertEqual(1, len([s for s in statements if 'GROUP BY' in s]))
        # A resource written while no stack row said so: read again at
        # the next check.
        heat_db.resource_update_and_save(
            self.ctx, self._stacks[1]['0'].id, {'physical_resource_id':
                                                'another-server'})
        self.assertIs(first, self.registry.resolve_now(policy))
        now[0] += targets.TREE_SECONDS
        found = self.registry.resolve_now(policy)
        self.assertTrue(read_rows())
        self.assertEqual('another-server', found.places[
            (self._stacks[1].id, '0')]['server_id'])

    def test_many_policies_in_one_batch(self):
        policies = [_policy('p%d' % n, self.stack.id, ['workers'])
                    for n in range(5)]
        result = self.registry.refresh_all(policies)
        self.assertEqual({'p%d' % n: 2 for n in range(5)},
                         {k: len(v) for k, v in result.items()})


class RegistrationDeadlineTestCase(TargetResolutionTestCase):
    """register_policy as heat-engine calls it, with its deadline."""

    def setUp(self):
        super(RegistrationDeadlineTestCase, self).setUp()
        self.endpoint = endpoint.HealthEndpoint('engine-1', self.registry)

    def _request(self, deadline, policy_id='p1'):
        return {'id': policy_id, 'stack_id': self.stack.id,
                'resource_name': 'policy', 'enabled': True,
                'spec': {'targets': ['web']},
                'deadline': deadline.isoformat()}

    def test_registration_in_time_is_confirmed(self):
        answer = self.endpoint.register_policy(
            self.ctx, self._request(timeutils.utcnow() +
                                    datetime.timedelta(seconds=10)))
        self.assertEqual('engine-1', answer['engine_id'])
        self.assertEqual(['web'], answer['targets'])
        self.assertIsNotNone(policy_object.Policy.get('p1'))

    def test_registration_past_its_deadline_stores_nothing(self):
        answer = self.endpoint.register_policy(
            self.ctx, self._request(timeutils.utcnow() -
                                    datetime.timedelta(seconds=1)))
        self.assertEqual({'policy_id': 'p1', 'expired': True}, answer)
        self.assertIsNone(policy_object.Policy.get('p1'))

    def _deadline_passes_during_resolution(self):
        """A deadline that passes while the targets are being resolved."""
        deadline = timeutils.utcnow() + datetime.timedelta(seconds=5)
        resolve = self.registry.refresh_targets

        def slow_resolution(policy):
            found = resolve(policy)
            self.useFixture(fixtures.MockPatchObject(
                timeutils, 'utcnow',
                return_value=deadline + datetime.timedelta(seconds=1)))
            return found
        self.useFixture(fixtures.MockPatchObject(
            self.registry, 'refresh_targets', side_effect=slow_resolution))
        return deadline

    def test_new_policy_stored_as_the_deadline_passed_is_removed(self):
        deadline = self._deadline_passes_during_resolution()
        answer = self.endpoint.register_policy(self.ctx,
                                               self._request(deadline))
        self.assertTrue(answer['expired'])
        self.assertIsNone(policy_object.Policy.get('p1'))
        self.assertEqual([], self.registry.claim())

    def test_update_stored_as_the_deadline_passed_is_kept(self):
        _policy('p1', self.stack.id, ['web'], project_id=self.ctx.project_id)
        deadline = self._deadline_passes_during_resolution()
        answer = self.endpoint.register_policy(self.ctx,
                                               self._request(deadline))
        self.assertNotIn('expired', answer)
        self.assertIsNotNone(policy_object.Policy.get('p1'))
