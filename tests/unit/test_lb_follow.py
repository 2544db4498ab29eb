"""Which servers the member follower wants in a pool during a swap."""

import types
import unittest

from heat_health.common import nova_adapter
from heat_health.engine.pools import lb_follow

CIDR = '10.0.1.0/24'


def _server(status, address=None):
    addresses = (address,) if address else ()
    return nova_adapter.Server(status, addresses, 'web')


class FakeResolver(object):
    def __init__(self, places, busy=(), updating=False):
        self.places = places
        self.busy = frozenset(busy)
        self.updating = updating

    def resolve(self, ctxt, policies):
        return {policies[0].id: types.SimpleNamespace(places={
            ('nested', path): {'server_id': server_id, 'path': path}
            for server_id, path in self.places.items()}, busy=self.busy,
            updating=self.updating)}


class WantedTest(unittest.TestCase):

    def _wanted(self, places, servers, leaving=frozenset(), busy=(),
                updating=False):
        follower = self.follower = lb_follow.MemberFollower(
            octavia_client=None, list_servers=lambda ids: {
                i: servers[i] for i in ids if i in servers})
        follower._resolver = FakeResolver(places, busy, updating)
        lb = lb_follow.LoadBalancer(1, 'lb-uuid', 'stack', 'lb', {
            'subnet_cidr': CIDR, 'targets': ['web'],
            'members': {'old': {'member_id': 'm1', 'address': '10.0.1.5',
                                'path': 'web/0'},
                        'other': {'member_id': 'm2', 'address': '10.0.1.6',
                                  'path': 'web/1'}}})
        wanted, paths, self.building = follower._wanted(None, lb, leaving)
        return wanted, paths

    def test_the_old_member_stays_until_its_replacement_is_plugged_in(self):
        places = {'new': 'web/0', 'other': 'web/1'}
        wanted, paths = self._wanted(places, {'new': _server('BUILD'),
                                              'old': _server('ACTIVE')})
        self.assertEqual({'old': '10.0.1.5', 'other': '10.0.1.6'}, wanted)
        self.assertEqual('web/0', paths['old'])
        # Plugged in: swapped in one batch.
        wanted, _ = self._wanted(places, {
            'new': _server('ACTIVE', '10.0.1.7'), 'old': _server('ACTIVE')})
        self.assertEqual({'new': '10.0.1.7', 'other': '10.0.1.6'}, wanted)

    def test_a_new_server_without_an_address_yet_is_being_built(self):
        places = {'new': 'web/0', 'other': 'web/1'}
        self._wanted(places, {'new': _server('BUILD')})
        self.assertEqual({'new'}, self.building)
        # Plugged in, or failed: nothing to wait for.
        for server in (_server('BUILD', '10.0.1.7'), _server('ERROR')):
            self._wanted(places, {'new': server})
            self.assertEqual(frozenset(), self.building)

    def test_a_place_heat_is_replacing_has_a_server_on_its_way(self):
        places = {'old': 'web/0', 'other': 'web/1'}
        self._wanted(places, {}, busy={('nested', 'web/0')})
        self.assertEqual({'old'}, self.building)
        self._wanted(places, {})
        self.assertEqual(frozenset(), self.building)

    def test_a_stack_action_on_the_targets_makes_passes_follow_closely(
            self):
        places = {'new': 'web/0', 'other': 'web/1'}
        self._wanted(places, {'new': _server('BUILD')})
        self.assertFalse(self.follower._busy)
        # The replacement being created: passes every quarter second.
        self._wanted(places, {'new': _server('BUILD')},
                     busy={('nested', 'web/0')})
        self.assertTrue(self.follower._busy)
        # A stack of the tree updating, before its servers' rows show it.
        self._wanted(places, {'new': _server('BUILD')}, updating=True)
        self.assertTrue(self.follower._busy)

    def test_a_replaced_server_nova_no_longer_has_is_not_kept(self):
        places = {'new': 'web/0', 'other': 'web/1'}
        for servers in ({'new': _server('BUILD')},
                        {'new': _server('BUILD'), 'old': _server('DELETED')}):
            wanted, _ = self._wanted(places, servers)
            self.assertEqual({'other': '10.0.1.6'}, wanted)

    def test_a_departing_server_leaves_while_nova_still_has_it(self):
        places = {'old': 'web/0', 'other': 'web/1'}
        wanted, paths = self._wanted(
            places, {'old': _server('ACTIVE', '10.0.1.5')}, leaving={'old'})
        self.assertEqual({'other': '10.0.1.6'}, wanted)
        self.assertNotIn('old', paths)

    def test_a_departing_replaced_server_is_not_kept_for_its_place(self):
        places = {'new': 'web/0', 'other': 'web/1'}
        wanted, _ = self._wanted(places, {'new': _server('BUILD'),
                                          'old': _server('ACTIVE')},
                                 leaving={'old'})
        self.assertEqual({'other': '10.0.1.6'}, wanted)


class NudgeTest(unittest.TestCase):
    """After recovery asked for an update, passes follow closely a while."""

    def test_passes_follow_closely_for_a_while_after_a_nudge(self):
        now = [100.0]
        follower = lb_follow.MemberFollower(
            octavia_client=None, list_servers=lambda ids: {},
            clock=lambda: now[0])
        waits = []

        class Wake(object):
            def wait(self, seconds):
                waits.append(seconds)
                now[0] += seconds
                if len(waits) == 3:
                    follower._stopping.set()

            def set(self):
                pass

            def clear(self):
                pass
        follower._wake = Wake()
        follower.run_once = lambda: None
        follower.nudge()
        now[0] += lb_follow.NUDGE_SECONDS - 0.3
        follower._run()
        self.assertEqual([lb_follow.BUSY_PASS_SECONDS,
                          lb_follow.BUSY_PASS_SECONDS,
                          lb_follow.PASS_SECONDS], waits)
