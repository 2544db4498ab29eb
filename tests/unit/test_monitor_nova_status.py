"""The status poller against a fake Nova adapter."""

import datetime

from heat_health.common import nova_adapter
from heat_health.engine.monitor import compute_hosts
from heat_health.engine.monitor import nova_status
from heat_health.policy import observation as obs
from tests.unit import base

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)


def _server(status):
    return nova_adapter.Server(status, {})


class FakeNova(object):
    """Servers by id; pages of ``page_size`` in id order; a call log.

    Compute hosts by name, listed apart (``host_listings``).
    """

    def __init__(self, servers, page_size=2):
        self.servers = servers
        self.changed = {}
        self.page_size = page_size
        self.calls = []
        self.error = None
        self.hosts = {}
        self.host_listings = 0

    def list_compute_hosts(self):
        self.host_listings += 1
        if self.error:
            raise nova_adapter.NovaUnavailable(self.error)
        return dict(self.hosts)

    def _call(self, what):
        self.calls.append(what)
        if self.error:
            raise nova_adapter.NovaUnavailable(self.error)

    def list_all(self):
        self._call('all')
        return dict(self.servers)

    def list_changed(self, since):
        self._call(('changed', since))
        return dict(self.changed)

    def list_by_ids(self, server_ids, projects=None):
        self._call(('ids', tuple(sorted(server_ids))))
        self.projects = projects
        return {s: self.servers[s] for s in server_ids if s in self.servers}

    def list_page(self, marker=None):
        self._call(('page', marker))
        ids = sorted(s for s in self.servers if marker is None or s > marker)
        page = ids[:self.page_size]
        more = len(ids) > self.page_size
        return nova_adapter.Page({s: self.servers[s] for s in page},
                                 page[-1] if more else None)


class TestStatusPoller(base.HeatHealthTestCase):

    def setUp(self):
        super(TestStatusPoller, self).setUp()
        self.now = T0
        self.seen = []
        self.watched = {'a', 'b', 'c', 'd'}
        self.nova = FakeNova({s: _server('ACTIVE') for s in 'abcdef'})
        self.poller = nova_status.StatusPoller(
            self.nova, self.seen.append, lambda: set(self.watched),
            resync_cycles=3, clock=lambda: self.now)

    def _poll(self):
        del self.seen[:]
        del self.nova.calls[:]
        self.poller.poll()
        self.now += datetime.timedelta(seconds=5)
        return {o.server_id: (o.verdict, o.reason) for o in self.seen}

    def test_status_verdicts(self):
        self.assertEqual((obs.UNHEALTHY, 'Nova status SHUTOFF'),
                         nova_status.verdict('SHUTOFF'))
        for status in ('ERROR', 'PAUSED', 'SUSPENDED', 'DELETED',
                       'SOFT_DELETED'):
            self.assertEqual(obs.UNHEALTHY, nova_status.verdict(status)[0])
        self.assertEqual(obs.HEALTHY, nova_status.verdict('ACTIVE')[0])
        for status in ('BUILD', 'REBOOT', 'HARD_REBOOT', 'REBUILD',
                       'MIGRATING', 'RESIZE', 'VERIFY_RESIZE'):
            self.assertIsNone(nova_status.verdict(status))

    def test_first_poll_lists_all_and_missing_is_unhealthy(self):
        del self.nova.servers['d']
        seen = self._poll()
        self.assertEqual(['all'], self.nova.calls)
        self.assertEqual(obs.HEALTHY, seen['a'][0])
        self.assertEqual((obs.UNHEALTHY, nova_status.MISSING_REASON),
                         seen['d'])
        self.assertNotIn('e', seen)
        self.assertTrue(all(o.source == obs.NODE_STATUS_POLLING
                            for o in self.seen))

    def test_changes_since_then_one_page_per_poll(self):
        self._poll()
        self.nova.changed = {'b': _server('ERROR'), 'e': _server('ERROR'),
                             'c': _server('REBOOT')}
        seen = self._poll()
        self.assertEqual([('changed', T0 - nova_status.OVERLAP)],
                         self.nova.calls)
        self.assertEqual({'b': (obs.UNHEALTHY, 'Nova status ERROR')}, seen)
        self.nova.changed = {}
        self._poll()
        # Third poll since the full listing: a resync starts, page by page.
        del self.nova.servers['c']
        seen = self._poll()
        self.assertEqual(2, len(self.nova.calls))
        self.assertEqual(('page', None), self.nova.calls[1])
        # Only news is passed on: b is back, a was known to be ACTIVE.
        self.assertEqual({'b': (obs.HEALTHY, 'Nova status ACTIVE')}, seen)
        seen = self._poll()
        self.assertEqual(('page', 'b'), self.nova.calls[1])
        # Page (b, e]: c is gone, d is there (and known).
        self.assertEqual({'c': (obs.UNHEALTHY, nova_status.MISSING_REASON)},
                         seen)
        seen = self._poll()
        self.assertEqual(('page', 'e'), self.nova.calls[1])
        self.assertEqual({}, seen)
        # The next full listing starts three polls after the last one did.
        self._poll()
        self.assertEqual(('page', None), self.nova.calls[1])

    def test_never_more_than_two_requests(self):
        self.nova.page_size = 1
        for _ in range(20):
            self._poll()
            self.assertLessEqual(len(self.nova.calls), 2)

    def test_api_errors_make_every_watched_server_unknown(self):
        self.assertIsNone(self.poller.polled_at)
        self._poll()
        self.assertEqual(T0, self.poller.polled_at)
        self.nova.error = 'ServiceUnavailable: 503'
        seen = self._poll()
        self.assertEqual(self.watched, set(seen))
        self.assertEqual({obs.UNKNOWN}, {v for v, _r in seen.values()})
        self.assertIn('503', seen['a'][1])
        # A failed poll confirms nothing of what was reported before.
        self.assertEqual(T0, self.poller.polled_at)
        # The next successful poll covers the time of the failed one.
        self.nova.error = None
        self.nova.changed = {'a': _server('ACTIVE')}
        at = self.now
        seen = self._poll()
        self.assertEqual(at, self.poller.polled_at)
        self.assertEqual(('changed', T0 - nova_status.OVERLAP),
                         self.nova.calls[0])
        # After UNKNOWN, what is known again is passed on again.
        self.assertEqual({'a': (obs.HEALTHY, 'Nova status ACTIVE')}, seen)

    def test_a_server_listed_again_unchanged_is_kept_as_it_was(self):
        self._poll()
        first = self.poller.listed['a']
        self.nova.servers['a'] = _server('ACTIVE')   # a new, equal object
        self.nova.servers['b'] = _server('SHUTOFF')
        self.poller.lookup(['a', 'b'])
        self.assertIs(first, self.poller.listed['a'])
        self.assertEqual('SHUTOFF', self.poller.listed['b'].status)

    def test_nothing_watched_asks_nothing(self):
        self.watched = set()
        self._poll()
        self.assertEqual([], self.nova.calls)

    def test_lookup_gives_newly_watched_servers_a_verdict_at_once(self):
        self.nova.servers['b'] = _server('SHUTOFF')
        self.nova.servers['c'] = nova_adapter.Server('ACTIVE', ['10.0.0.3'],
                                                     'vm-c')
        self.nova.servers['d'] = _server('BUILD')
        self.assertEqual(2, self.poller.lookup({'b', 'c', 'd', 'gone'},
                                               projects={'p1'}))
        self.assertEqual([('ids', ('b', 'c', 'd', 'gone'))], self.nova.calls)
        self.assertEqual({'p1'}, self.nova.projects)
        # The verdict stands for the notifications too: an event-only
        # policy has a verdict before any notification arrives.
        self.assertEqual(
            {('b', obs.NODE_STATUS_POLLING, obs.UNHEALTHY),
             ('b', obs.LIFECYCLE_EVENTS, obs.UNHEALTHY),
             ('c', obs.NODE_STATUS_POLLING, obs.HEALTHY),
             ('c', obs.LIFECYCLE_EVENTS, obs.HEALTHY)},
            {(o.server_id, o.source, o.verdict) for o in self.seen})
        # Its name and addresses are known for poll URLs.
        self.assertEqual('vm-c', self.poller.listed['c'].name)
        # A server missing from the answer is no verdict: only the full
        # listing tells it is gone.
        self.assertNotIn('gone', {o.server_id for o in self.seen})
        # What was looked up is known: the first listing passes on news
        # only.
        seen = self._poll()
        self.assertNotIn('b', seen)
        self.assertNotIn('c', seen)

    def test_lookup_judges_no_server_nova_is_working_on(self):
        # A new owner finds a server its first owner just asked to start.
        self._poll()
        self.nova.servers['a'] = nova_adapter.Server(
            'SHUTOFF', [], 'a', 'powering-on', self.now)
        del self.seen[:]
        self.assertEqual(0, self.poller.lookup({'a'}))
        self.assertEqual([], self.seen)
        # The next poll looks it up again, changed or not: the start ended.
        self.nova.servers['a'] = _server('ACTIVE')
        seen = self._poll()
        self.assertEqual({'a': (obs.HEALTHY, 'Nova status ACTIVE')}, seen)
        self.assertIn(('ids', ('a',)), self.nova.calls)

    def test_lookup_errors_are_no_verdict(self):
        self.nova.error = 'computeFault: 500'
        self.assertEqual(0, self.poller.lookup({'a'}))
        self.assertEqual([], self.seen)
        self.assertEqual(0, self.poller.lookup(set()))
        self.assertEqual(1, len(self.nova.calls))

    def test_forgotten_server_is_reported_again(self):
        self._poll()
        self.poller.forget({'a'})
        self.assertNotIn('a', self.poller.listed)
        self.nova.changed = {'a': _server('ACTIVE'), 'b': _server('ACTIVE')}
        seen = self._poll()
        # b was known ACTIVE: skipped; a is news again once watched anew.
        self.assertEqual({'a': (obs.HEALTHY, 'Nova status ACTIVE')}, seen)

    def test_a_recheck_reports_an_unchanged_server_at_the_next_poll(self):
        self._poll()
        self.poller.recheck({'a'})
        # Nothing changed: a is in no changes-since listing, so it is
        # looked up by id, once.
        seen = self._poll()
        self.assertEqual({'a': (obs.HEALTHY, 'Nova status ACTIVE')}, seen)
        self.assertIn(('ids', ('a',)), self.nova.calls)
        self.assertEqual({}, self._poll())
        self.assertNotIn(('ids', ('a',)), self.nova.calls)


class TestAdapter(base.HeatHealthTestCase):

    class FakeHTTP(object):
        def __init__(self, bodies):
            self.bodies = list(bodies)
            self.urls = []

        def get(self, url):
            self.urls.append(url)
            body = self.bodies.pop(0)
            if isinstance(body, Exception):
                raise body
            return None, body

    def _adapter(self, *bodies):
        http = self.FakeHTTP(bodies)
        client = type('Client', (), {'client': http})()
        return nova_adapter.NovaAdapter(client=client), http

    def test_follows_pages(self):
        link = 'http://nova/v2.1/servers/detail?all_tenants=1&marker=s2'
        adapter, http = self._adapter(
            {'servers': [{'id': 's1', 'status': 'ACTIVE'},
                         {'id': 's2', 'status': 'SHUTOFF',
                          'addresses': {'private': []}},
                         {'id': 's4', 'status': 'ACTIVE',
                          'addresses': {'a': [{'addr': '10.0.0.4'}],
                                        'b': [{'addr': 'fd00::4'}]}}],
             'servers_links': [{'rel': 'next', 'href': link}]},
            {'servers': [{'id': 's3', 'status': 'ERROR'}]})
        servers = adapter.list_all()
        self.assertEqual([], servers['s2'].addresses)
        self.assertEqual(['ACTIVE', 'SHUTOFF', 'ERROR'],
                         [servers[s].status for s in ('s1', 's2', 's3')])
        self.assertEqual(['10.0.0.4', 'fd00::4'], servers['s4'].addresses)
        self.assertIn('all_tenants=1', http.urls[0])
        self.assertIn('marker=s2', http.urls[1])
        self.assertEqual(2, adapter.requests)

    def test_by_ids_one_request_each(self):
        """Nova's uuid filter keeps one value: one request per id."""
        adapter, http = self._adapter(
            {'servers': [{'id': 'id-000', 'status': 'ACTIVE',
                          'name': 'vm-0'}]},
            {'servers': []})
        servers = adapter.list_by_ids(['id-001', 'id-000'])
        self.assertEqual({'id-000': nova_adapter.Server('ACTIVE', [],
                                                        'vm-0')}, servers)
        self.assertEqual(2, len(http.urls))
        for url, server_id in zip(http.urls, ('id-000', 'id-001')):
            self.assertIn('all_tenants=1', url)
            self.assertEqual(1, url.count('uuid='))
            self.assertIn('uuid=%s' % server_id, url)

    def test_by_many_ids_one_listing(self):
        ids = ['id-%03d' % n for n in range(nova_adapter.BY_ID_LIMIT + 1)]
        adapter, http = self._adapter(
            {'servers': [{'id': 'id-000', 'status': 'ACTIVE'},
                         {'id': 'other', 'status': 'ACTIVE'}]})
        self.assertEqual(['id-000'], list(adapter.list_by_ids(ids)))
        self.assertEqual(1, len(http.urls))
        self.assertNotIn('uuid=', http.urls[0])

    def test_by_many_ids_in_few_projects_their_listings(self):
        """A takeover's servers: their projects are listed, not the fleet."""
        ids = ['id-%03d' % n for n in range(nova_adapter.BY_ID_LIMIT + 1)]
        adapter, http = self._adapter(
            {'servers': [{'id': 'id-000', 'status': 'ACTIVE'},
                         {'id': 'other', 'status': 'ACTIVE'}],
             'servers_links': [{'rel': 'next',
                                'href': '/servers/detail?marker=other'}]},
            {'servers': [{'id': 'id-001', 'status': 'ERROR'}]},
            {'servers': [{'id': 'id-002', 'status': 'ACTIVE'}]})
        servers = adapter.list_by_ids(ids, projects={'p2', 'p1'})
        self.assertEqual({'id-000': 'ACTIVE', 'id-001': 'ERROR',
                          'id-002': 'ACTIVE'},
                         {s: v.status for s, v in servers.items()})
        self.assertEqual(3, len(http.urls))
        for url in http.urls:
            self.assertIn('all_tenants=1', url)
            self.assertNotIn('uuid=', url)
        self.assertIn('project_id=p1', http.urls[0])
        self.assertIn('marker=other', http.urls[1])
        self.assertIn('project_id=p1', http.urls[1])
        self.assertIn('project_id=p2', http.urls[2])

    def test_by_many_ids_in_many_projects_one_listing(self):
        ids = ['id-%03d' % n for n in range(nova_adapter.BY_ID_LIMIT + 1)]
        projects = {'p%d' % n
                    for n in range(nova_adapter.BY_PROJECT_LIMIT + 1)}
        adapter, http = self._adapter(
            {'servers': [{'id': 'id-000', 'status': 'ACTIVE'}]})
        self.assertEqual(['id-000'], list(adapter.list_by_ids(
            ids, projects=projects)))
        self.assertEqual(1, len(http.urls))
        self.assertNotIn('project_id=', http.urls[0])

    def test_power_state_is_listed(self):
        adapter, _http = self._adapter(
            {'servers': [{'id': 's1', 'status': 'ACTIVE',
                          'OS-EXT-STS:power_state': 3},
                         {'id': 's2', 'status': 'ACTIVE'}]})
        servers = adapter.list_all()
        self.assertEqual(3, servers['s1'].power_state)
        # Not shown (an older microversion, no admin view): unknown.
        self.assertIsNone(servers['s2'].power_state)

    def test_changes_since_query(self):
        adapter, http = self._adapter({'servers': []})
        adapter.list_changed(T0)
        self.assertIn('changes-since=2026-01-01T12%3A00%3A00', http.urls[0])

    def test_errors_are_unavailable(self):
        from keystoneauth1 import exceptions as ks_exc
        from novaclient import exceptions as nova_exc
        for error in (nova_exc.ClientException(500),
                      ks_exc.ConnectTimeout(), ks_exc.EndpointNotFound(),
                      {'error': 'no list'}):
            adapter, _http = self._adapter(error)
            self.assertRaises(nova_adapter.NovaUnavailable, adapter.list_all)


class _PollerCase(base.HeatHealthTestCase):
    """A poller over servers a and b, on a clock the test moves."""

    _poll = TestStatusPoller._poll

    def _poller(self, server, **options):
        self.now = T0
        self.seen = []
        self.watched = {'a', 'b'}
        self.nova = FakeNova({s: server for s in 'ab'})
        self.poller = nova_status.StatusPoller(
            self.nova, self.seen.append, lambda: set(self.watched),
            resync_cycles=100, clock=lambda: self.now, **options)


class TestStuckTask(_PollerCase):
    """A task Nova never ends is a failure once it outlasts the deadline."""

    def setUp(self):
        super(TestStuckTask, self).setUp()
        self._poller(_server('ACTIVE'), stuck_after=lambda server_id: 8)

    def test_stuck_task_is_unhealthy_after_the_deadline(self):
        self._poll()
        self.nova.changed = {'a': nova_adapter.Server(
            'ACTIVE', [], 'a', 'pausing', self.now)}
        # Busy, not healthy: no verdict while the task may still end.
        self.assertEqual({}, self._poll())
        self.nova.changed = {}
        self.assertEqual({}, self._poll())
        seen = self._poll()
        self.assertEqual(obs.UNHEALTHY, seen['a'][0])
        self.assertIn('pausing stuck', seen['a'][1])
        self.assertEqual({}, self._poll())
        # Nova ends the task (a hard reboot): healthy again.
        self.nova.changed = {'a': _server('ACTIVE')}
        self.assertEqual(obs.HEALTHY, self._poll()['a'][0])

    def test_a_task_that_ends_in_time_says_nothing_of_failure(self):
        self._poll()
        self.nova.changed = {'a': nova_adapter.Server(
            'REBOOT', [], 'a', 'rebooting', self.now)}
        self._poll()
        self.nova.changed = {'a': _server('ACTIVE')}
        self.assertEqual({}, self._poll())


PAUSED_REASON = ('Nova status ACTIVE but power state PAUSED (guest paused '
                 'by the hypervisor)')
LOST_REASON = ('Nova status ACTIVE but power state NOSTATE (guest not found '
               'on the hypervisor)')


def _active(power_state, updated=None, task_state=None):
    return nova_adapter.Server('ACTIVE', [], 'vm', task_state, updated,
                               power_state)


class TestGuestNotRunning(_PollerCase):
    """ACTIVE in Nova, but the hypervisor does not run the guest."""

    def setUp(self):
        super(TestGuestNotRunning, self).setUp()
        self._poller(_active(1), power_grace=10)

    def test_power_state_verdicts(self):
        self.assertEqual((obs.UNHEALTHY, PAUSED_REASON),
                         nova_status.verdict('ACTIVE', 3))
        self.assertEqual((obs.UNHEALTHY, LOST_REASON),
                         nova_status.verdict('ACTIVE', 0))
        for power, name in ((4, 'SHUTDOWN'), (6, 'CRASHED'),
                            (7, 'SUSPENDED')):
            found = nova_status.verdict('ACTIVE', power)
            self.assertEqual(obs.UNHEALTHY, found[0])
            self.assertIn('but power state %s' % name, found[1])
        # Running, or not shown (an older microversion): the status alone.
        for power in (1, None):
            self.assertEqual((obs.HEALTHY, 'Nova status ACTIVE'),
                             nova_status.verdict('ACTIVE', power))
        self.assertEqual((obs.UNHEALTHY, 'Nova status SHUTOFF'),
                         nova_status.verdict('SHUTOFF', 4))
        self.assertIsNone(nova_status.verdict('REBOOT', 3))

    def test_a_paused_guest_is_unhealthy_once_the_grace_is_over(self):
        self.assertEqual(obs.HEALTHY, self._poll()['a'][0])
        # QEMU pauses the guest: Nova saves the power state, nothing else.
        self.nova.changed = {'a': _active(3, self.now)}
        self.assertEqual({}, self._poll())
        self.nova.changed = {}
        self.assertEqual({}, self._poll())
        # Ten seconds on: no listing of changes names it, it is still
        # judged.
        self.assertEqual({'a': (obs.UNHEALTHY, PAUSED_REASON)},
                         self._poll())
        self.assertEqual({}, self._poll())
        # Running again: healthy again.
        self.nova.changed = {'a': _active(1, self.now)}
        self.assertEqual({'a': (obs.HEALTHY, 'Nova status ACTIVE')},
                         self._poll())

    def test_a_mismatch_nova_settles_within_the_grace_says_nothing(self):
        self._poll()
        self.nova.changed = {'a': _active(4, self.now)}
        self.assertEqual({}, self._poll())
        self.nova.changed = {'a': _active(1, self.now)}
        self.assertEqual({}, self._poll())
        self.nova.changed = {}
        for _ in range(4):
            self.assertEqual({}, self._poll())
        # One that lasts is judged.
        self.nova.changed = {'a': _active(6, self.now)}
        self.assertEqual({}, self._poll())
        self.nova.changed = {}
        self._poll()
        self.assertEqual({'a': (obs.UNHEALTHY, 'Nova status ACTIVE but '
                                'power state CRASHED (guest crashed)')},
                         self._poll())

    def test_without_a_power_state_the_status_alone_decides(self):
        self.nova.servers['b'] = _active(None)
        self.nova.servers['a'] = _active(3)
        seen = self._poll()
        self.assertEqual((obs.HEALTHY, 'Nova status ACTIVE'), seen['b'])
        # A guest already paused when first listed is not healthy either.
        self.assertNotIn('a', seen)
        self.nova.changed = {'b': _active(None, self.now)}
        self.assertEqual({}, self._poll())
        self.assertEqual({'a': (obs.UNHEALTHY, PAUSED_REASON)},
                         self._poll())

    def test_a_guest_lost_long_ago_is_unhealthy_at_once(self):
        # Nova saved the power state an hour ago: the grace is long over.
        self.nova.servers['a'] = _active(0, T0 - datetime.timedelta(hours=1))
        self.assertEqual(1, self.poller.lookup({'a'}))
        self.assertEqual(
            {('a', obs.NODE_STATUS_POLLING, obs.UNHEALTHY, LOST_REASON),
             ('a', obs.LIFECYCLE_EVENTS, obs.UNHEALTHY, LOST_REASON)},
            {(o.server_id, o.source, o.verdict, o.reason)
             for o in self.seen})

    def test_active_after_a_reboot_is_not_healed_while_the_guest_is_not(
            self):
        self.nova.servers['a'] = _active(3, T0 - datetime.timedelta(hours=1))
        self.assertEqual(obs.UNHEALTHY, self._poll()['a'][0])
        # A recovery's hard reboot: judged anew once Nova ends it.
        self.poller.recheck(['a'])
        self.nova.servers['a'] = _active(3, self.now, 'rebooting_hard')
        self.assertEqual({}, self._poll())
        self.nova.changed = {'a': _active(3, self.now)}
        # ACTIVE and no task, but still paused: neither healthy, nor
        # judged before its grace.
        self.assertEqual({}, self._poll())
        self.nova.changed = {}
        self.assertEqual({}, self._poll())
        self.assertEqual({'a': (obs.UNHEALTHY, PAUSED_REASON)},
                         self._poll())


def _on(host, status='ACTIVE', task_state=None, power_state=1):
    return nova_adapter.Server(status, [], 'vm', task_state, None,
                               power_state, host)


class TestComputeHostStates(_PollerCase):
    """Nova's word on a server is only as fresh as its compute's reports."""

    def setUp(self):
        super(TestComputeHostStates, self).setUp()
        self._poller(_on('compute1'), stuck_after=lambda server_id: 8)
        self.nova.servers['b'] = _on('compute2')
        self.nova.hosts = {'compute1': 'UP', 'compute2': 'UP'}
        self.poller._hosts = compute_hosts.ComputeHosts(
            self.nova, listed=self.poller.listed, clock=lambda: 0)
        self.assertEqual({'a': (obs.HEALTHY, 'Nova status ACTIVE'),
                          'b': (obs.HEALTHY, 'Nova status ACTIVE')},
                         self._poll())

    def test_a_host_not_reporting_makes_its_servers_unknown_once(self):
        self.nova.hosts['compute2'] = 'UNKNOWN'
        # No server changed in Nova: the host's state alone tells.
        seen = self._poll()
        self.assertEqual(['b'], list(seen))
        self.assertEqual(obs.UNKNOWN, seen['b'][0])
        self.assertIn('nova-compute on host compute2 is not reporting',
                      seen['b'][1])
        self.assertEqual({}, self._poll())
        # Back: the server as Nova shows it now, looked up at once (its
        # guest did not survive).
        self.nova.hosts['compute2'] = 'UP'
        self.nova.servers['b'] = _on('compute2', power_state=4)
        seen = self._poll()
        self.assertEqual(obs.UNHEALTHY, seen['b'][0])
        self.assertIn('power state SHUTDOWN', seen['b'][1])

    def test_a_task_is_not_stuck_while_its_host_does_not_report(self):
        self.nova.changed = {'a': _on('compute1', 'HARD_REBOOT',
                                      'reboot_started_hard')}
        self.assertEqual({}, self._poll())
        self.nova.changed = {}
        self.nova.hosts['compute1'] = 'UNKNOWN'
        for _ in range(5):
            seen = self._poll()
            self.assertNotIn(obs.UNHEALTHY, [v for v, _r in seen.values()])

    def test_a_power_state_from_a_host_just_back_waits_for_nova_s_sync(
            self):
        # Restarted, nova-compute left the guest running; Nova still shows
        # the PAUSED it saved before, until its first power sync.
        self.poller._return_grace = datetime.timedelta(seconds=20)
        self.nova.hosts['compute2'] = 'UNKNOWN'
        self._poll()
        self.nova.hosts['compute2'] = 'UP'
        self.nova.servers['b'] = _on('compute2', power_state=3)
        for _ in range(4):
            self.assertEqual({}, self._poll())
        # Nova's sync has not changed it: a guest really paused.
        seen = self._poll()
        self.assertEqual(obs.UNHEALTHY, seen['b'][0])
        self.assertIn('power state PAUSED', seen['b'][1])

    def test_nova_s_sync_after_a_host_is_back_says_nothing_of_failure(self):
        self.poller._return_grace = datetime.timedelta(seconds=20)
        self.nova.hosts['compute2'] = 'UNKNOWN'
        self._poll()
        self.nova.hosts['compute2'] = 'UP'
        self.nova.servers['b'] = _on('compute2', power_state=3)
        self.assertEqual({}, self._poll())
        self.nova.changed = {'b': _on('compute2', power_state=1)}
        self.assertEqual({'b': (obs.HEALTHY, 'Nova status ACTIVE')},
                         self._poll())
        self.nova.changed = {}
        for _ in range(5):
            self.assertEqual({}, self._poll())

    def test_a_host_forced_down_makes_its_servers_unhealthy(self):
        self.nova.hosts['compute1'] = 'DOWN'
        seen = self._poll()
        self.assertEqual({'a': (obs.UNHEALTHY, 'host compute1 is down (its '
                                'nova-compute is forced down)')}, seen)

    def test_a_deleted_server_is_deleted_whatever_its_host(self):
        self.nova.hosts['compute1'] = 'DOWN'
        self.nova.changed = {'a': _on('compute1', 'DELETED')}
        self.assertEqual({'a': (obs.UNHEALTHY, 'Nova status DELETED')},
                         self._poll())

    def test_a_nova_without_the_services_api_judges_as_before(self):
        self.nova.list_compute_hosts = _refused(404)
        self.nova.servers['a'] = _on('compute1', power_state=4)
        self.nova.changed = {'a': self.nova.servers['a']}
        self.assertEqual(obs.UNHEALTHY, self._poll()['a'][0])


class TestComputeHosts(base.HeatHealthTestCase):

    def setUp(self):
        super(TestComputeHosts, self).setUp()
        self.now = 0.0
        self.nova = FakeNova({'a': _on('compute1')})
        self.nova.hosts = {'compute1': 'UNKNOWN'}
        self.hosts = compute_hosts.ComputeHosts(self.nova,
                                                clock=lambda: self.now)

    def test_place_looks_a_server_up_once_and_hosts_once_a_second(self):
        self.assertEqual(('compute1', 'UNKNOWN'), self.hosts.place('a'))
        self.nova.hosts['compute1'] = 'UP'
        self.assertEqual(('compute1', 'UNKNOWN'), self.hosts.place('a'))
        self.now += compute_hosts.FRESH_SECONDS
        self.assertEqual(('compute1', 'UP'), self.hosts.place('a'))
        self.assertEqual([('ids', ('a',))], self.nova.calls)
        self.assertEqual(2, self.nova.host_listings)
        self.assertIsNone(self.hosts.place('gone'))

    def test_a_nova_that_shows_no_hosts_is_asked_again_later(self):
        self.nova.list_compute_hosts = _refused(404)
        self.assertIsNone(self.hosts.place('a'))
        self.now += compute_hosts.UNAVAILABLE_SECONDS - 1
        self.nova.list_compute_hosts = _refused(AssertionError)
        self.assertIsNone(self.hosts.place('a'))

    def test_a_nova_that_did_not_answer_leaves_the_last_word(self):
        self.assertEqual(('compute1', 'UNKNOWN'), self.hosts.place('a'))
        self.nova.list_compute_hosts = _refused(500)
        self.now += compute_hosts.FRESH_SECONDS
        self.assertEqual(('compute1', 'UNKNOWN'), self.hosts.place('a'))


def _refused(code):
    def listing():
        if code is AssertionError:
            raise AssertionError('asked again too soon')
        raise nova_adapter.NovaUnavailable('HTTP %s' % code, code)
    return listing


class TestHostState(base.HeatHealthTestCase):

    def test_as_nova_derives_host_status(self):
        state = nova_adapter.host_state
        self.assertEqual('DOWN', state({'forced_down': True,
                                        'status': 'disabled',
                                        'state': 'down'}))
        self.assertEqual('MAINTENANCE', state({'status': 'disabled',
                                               'state': 'up'}))
        self.assertEqual('UNKNOWN', state({'status': 'enabled',
                                           'state': 'down'}))
        self.assertEqual('UP', state({'status': 'enabled', 'state': 'up',
                                      'forced_down': False}))
