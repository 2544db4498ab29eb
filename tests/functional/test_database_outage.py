"""The database restarts while failures are being detected.

The machine's database server is not ours to stop: the test's engine reaches
it through a proxy of the test's own (``dbproxy``), whose outage is what a
client sees of a restart. Servers fail, and later come back, while the
database is away; once it is back, every change is stored exactly once and
announced exactly once, by an engine that kept running and kept its
policies."""

import collections
import configparser
import json
import re
import threading
import time
import urllib.parse
import uuid

from keystoneauth1 import exceptions as ks_exceptions
from oslo_config import cfg
import oslo_messaging
import pymysql
import pytest

from tests.functional import dbproxy
from tests.functional import engines
from tests.functional import notifications

# The local deployment's engine and database; fakecloud's faults.
pytestmark = pytest.mark.fakecloud

MODES = [{'type': 'LIFECYCLE_EVENTS'}, {'type': 'NODE_STATUS_POLLING'}]
SERVERS = 4       # watched by both modes
EVENTS_ONLY = 2   # watched by notifications alone
# The test's engine holds its policies under a lease this long: the first
# outage is shorter, the second longer (the engine takes its policies back).
LEASE_SECONDS = 20
SHORT_OUTAGE = 12
LONG_OUTAGE = 25
STATE_CHANGE = 'heat_health.target.state_change'
# What the engine logs when a database call of the monitor fails.
FAILED_WRITES = ('Could not store', 'Could not tell whether a stack action',
                 'Monitor tick failed')


def _database_url():
    conf = configparser.RawConfigParser(strict=False)
    conf.read(engines.HEAT_CONF)
    return conf.get('database', 'connection')


def _through(url, host, port):
    """The same database URL with its host and port replaced."""
    parts = urllib.parse.urlsplit(url)
    credentials = parts.netloc.rpartition('@')[0]
    netloc = '%s:%d' % (host, port)
    if credentials:
        netloc = '%s@%s' % (credentials, netloc)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class _StateChanges(object):
    """heat_health.target.state_change notifications on a topic of ours."""

    def __init__(self):
        self.topic = 'heat-health-tests-%s' % uuid.uuid4().hex[:8]
        self._url = notifications.transport_url()
        self._transport = oslo_messaging.get_notification_transport(
            cfg.ConfigOpts(), url=self._url)
        self._lock = threading.Lock()
        self.payloads = []
        self._listener = oslo_messaging.get_notification_listener(
            self._transport,
            [oslo_messaging.Target(exchange='heat', topic=self.topic)],
            [self], executor='threading', pool=self.topic)

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        if event_type == STATE_CHANGE:
            with self._lock:
                self.payloads.append(payload)

    def seen(self):
        with self._lock:
            return list(self.payloads)

    def start(self):
        self._listener.start()
        return self

    def stop(self):
        self._listener.stop()
        self._listener.wait()
        self._transport.cleanup()
        # Our pool's queue, and the topic's default one the notifier made.
        for queue in (self.topic, '%s.info' % self.topic):
            try:
                notifications.delete_queue(self._url, queue)
            except Exception:
                pass


def _stored(server_ids):
    """{server id: (state, [(old, new) of its events])} in the database."""
    url = urllib.parse.urlsplit(_database_url())
    connection = pymysql.connect(
        host=url.hostname, port=url.port or 3306,
        user=urllib.parse.unquote(url.username),
        password=urllib.parse.unquote(url.password or ''),
        database=url.path.lstrip('/'), connect_timeout=10)
    try:
        with connection.cursor() as cursor:
            found = {}
            for server_id in server_ids:
                cursor.execute('SELECT state FROM heat_health_target '
                               'WHERE server_id = %s', (server_id,))
                states = [row[0] for row in cursor.fetchall()]
                cursor.execute('SELECT old_state, new_state FROM '
                               'heat_health_event WHERE server_id = %s '
                               'ORDER BY id', (server_id,))
                found[server_id] = (states[0] if len(states) == 1
                                    else states,
                                    [tuple(row) for row in cursor])
            return found
    finally:
        connection.close()


def _targets(report):
    return {t['path']: t for t in report['policies'][0]['targets']}


def _alive(engine):
    process = engine._process
    return process is not None and process.poll() is None


@pytest.fixture
def outage_engine(demo, tmp_path):
    """The test's engine, reaching the database through a proxy.

    Yields (engine, proxy, state change listener); the deployment's engine
    is stopped meanwhile, so that every policy goes to the test's.
    """
    url = _database_url()
    if not url.startswith('mysql'):
        pytest.skip('the deployment has no MariaDB (%s)'
                    % url.split(':', 1)[0])
    database = urllib.parse.urlsplit(url)
    proxy = dbproxy.DatabaseProxy((
        database.hostname or dbproxy.DEFAULT_TARGET[0],
        database.port or dbproxy.DEFAULT_TARGET[1]))
    changes = _StateChanges()
    engine = None
    engines.localcloud('stop', 'heat-health-engine')
    try:
        proxy.start()
        changes.start()
        options = '\n'.join([
            '[database]', 'connection = %s' % _through(
                url, dbproxy.LISTEN_HOST, proxy.port),
            '[heat_health]', 'lease_seconds = %d' % LEASE_SECONDS,
            '[oslo_messaging_notifications]', 'driver = messagingv2',
            'topics = %s' % changes.topic, ''])
        engine = engines.Engine(tmp_path, 'outage-engine', options)
        engine.start(demo)
        yield engine, proxy, changes
    finally:
        if engine is not None:
            engine.kill()
        proxy.stop()
        changes.stop()
        engines.localcloud('up')


class _Watch(object):
    """The stacks of the test, their servers, as the health report says."""

    def __init__(self, demo, engine):
        self.demo = demo
        self.engine = engine
        self.stacks = []
        self.servers = {}       # server id -> (stack, path)

    def add(self, stack, count):
        self.stacks.append((stack, ['workers/%d' % i for i in range(count)]))

    def reports(self):
        return [(stack, paths, self.demo.health_report(stack))
                for stack, paths in self.stacks]

    def _until(self, predicate, what, timeout):
        """wait_for; a report heat-api could not give counts as not yet.

        Another engine may answer it, busy with policies of its own.
        """
        def attempt():
            try:
                return predicate()
            except ks_exceptions.HttpError:
                return None
        return self.demo.wait_for(attempt, what, timeout=timeout,
                                  interval=0.5)

    def wait(self, state, server_ids, timeout):
        """Until these servers are in that state; the reports."""
        def done():
            found = {}
            for stack, paths, report in self.reports():
                targets = _targets(report)
                for path in paths:
                    target = targets.get(path) or {}
                    found[target.get('server_id')] = target.get('state')
            return (all(found.get(s) == state for s in server_ids) and
                    found)
        return self._until(done, '%d servers %s' % (len(server_ids), state),
                           timeout)

    def owned(self, timeout):
        """The servers, once all HEALTHY and every policy the engine's."""
        return self._until(self._owned, 'every member HEALTHY, watched by '
                           'the test\'s engine', timeout)

    def _owned(self):
        servers = {}
        for stack, paths, report in self.reports():
            policy = report['policies'][0]
            targets = _targets(report)
            if (policy['engine_id'] != self.engine.engine_id or
                    any(targets.get(p, {}).get('state') != 'HEALTHY'
                        for p in paths)):
                return None
            servers.update({targets[p]['server_id']: (stack['stack_name'], p)
                            for p in paths})
        self.servers = servers
        return servers

    def answered(self):
        return self._until(self.reports, 'the health reports', 60)

    def policies(self):
        return [report['policies'][0] for _s, _p, report in self.answered()]

    def events(self, server_id):
        """(old, new, source) of the server's events, oldest first."""
        return [(e['old_state'], e['new_state'], e['source'])
                for _s, _p, report in self.answered()
                for e in reversed(report['events'])
                if e['server_id'] == server_id]


def _database_away(proxy, seconds, engine, faults):
    """The database away while faults happen, for ``seconds``.

    Returns the engine's log of that time, and when it began.
    """
    logged = len(engine.log.read_text())
    started = time.monotonic()
    assert proxy.outage() > 0
    for admin, server_id, fault in faults:
        assert admin.inject_fault(server_id, fault).status_code == 200
    time.sleep(seconds)
    log = engine.log.read_text()[logged:]
    return log, started


def _failures(log):
    """{what failed: how many times} in a part of the engine's log."""
    return collections.Counter(
        what for line in log.splitlines() if ' ERROR ' in line
        for what in FAILED_WRITES if what in line)


def test_failures_seen_during_a_database_restart_are_stored_once(
        admin, demo, stacks, outage_engine):
    """Two outages: failures seen, then recoveries seen, while it is away.

    The first stack is watched by notifications and status polling, the
    second by notifications alone: its changes can only come from verdicts
    the engine kept while it could not store them. The second outage
    outlasts the engine's leases: it takes its policies back after, and
    still knows what it saw meanwhile.
    """
    engine, proxy, changes = outage_engine
    watch = _Watch(demo, engine)
    for modes, count in ((MODES, SERVERS), (MODES[:1], EVENTS_ONLY)):
        watch.add(stacks('outage', 'health_modes.yaml', 'count=%d' % count,
                         'modes=%s' % json.dumps(modes)), count)
    servers = watch.owned(timeout=120)
    both = [s for s, (name, _p) in servers.items()
            if name == watch.stacks[0][0]['stack_name']]
    events_only = [s for s in servers if s not in both]
    generations = [p['generation'] for p in watch.policies()]

    # 1. Every server fails while the database is away (for less than
    # the lease).
    log, started = _database_away(
        proxy, SHORT_OUTAGE, engine,
        [(admin, s, 'power_off') for s in servers])
    stored = _stored(servers)
    proxy.restore()
    first = time.monotonic() - started
    assert stored == {s: ('HEALTHY', [('NO_DATA', 'HEALTHY')])
                      for s in servers}, stored
    assert not [c for c in changes.seen() if c['new_state'] != 'HEALTHY']
    held = _failures(log)
    assert held['Could not tell whether a stack action'] >= len(servers), \
        log
    watch.wait('UNHEALTHY', servers, timeout=60)
    first_stored = time.monotonic() - started - first

    after_short = [p['generation'] for p in watch.policies()]
    assert after_short == generations, 'taken again after a short outage'

    # 2. The servers watched by notifications alone come back while it is
    # away, longer than the lease: HEALTHY is stored without asking Heat
    # first, so these writes are the ones that fail.
    log, started = _database_away(
        proxy, LONG_OUTAGE, engine,
        [(admin, s, 'reset') for s in events_only])
    stored = _stored(events_only)
    proxy.restore()
    second = time.monotonic() - started
    assert all(state == 'UNHEALTHY' for state, _e in stored.values()), \
        stored
    failed = _failures(log)
    assert failed['Could not store'] >= len(events_only), log
    watch.wait('HEALTHY', events_only, timeout=60)
    second_stored = time.monotonic() - started - second
    watch.wait('UNHEALTHY', both, timeout=5)

    # A few more ticks: nothing is stored twice, nothing announced twice.
    time.sleep(3)
    for server_id in both:
        events = watch.events(server_id)
        assert [e[:2] for e in events] == [
            ('NO_DATA', 'HEALTHY'), ('HEALTHY', 'UNHEALTHY')], events
    for server_id in events_only:
        events = watch.events(server_id)
        assert [e[:2] for e in events] == [
            ('NO_DATA', 'HEALTHY'), ('HEALTHY', 'UNHEALTHY'),
            ('UNHEALTHY', 'HEALTHY')], events
        # No status poll there: decided from the notification kept.
        assert events[1][2] == 'LIFECYCLE_EVENTS', events
    assert _stored(servers) == {
        s: ('UNHEALTHY' if s in both else 'HEALTHY',
            [('NO_DATA', 'HEALTHY'), ('HEALTHY', 'UNHEALTHY')] +
            ([] if s in both else [('UNHEALTHY', 'HEALTHY')]))
        for s in servers}

    expected = sorted([(s, 'HEALTHY', 'UNHEALTHY') for s in servers] +
                      [(s, 'UNHEALTHY', 'HEALTHY') for s in events_only])

    def announced():
        seen = sorted((c['server_id'], c['old_state'], c['new_state'])
                      for c in changes.seen() if c['server_id'] in servers
                      and c['old_state'] != 'NO_DATA')
        return len(seen) >= len(expected) and seen
    assert demo.wait_for(announced, 'the changes announced',
                         timeout=30) == expected
    logged = sorted(re.findall(
        r'Target (\S+) \(\S+\) of policy \S+: (HEALTHY|UNHEALTHY) -> '
        r'(HEALTHY|UNHEALTHY)', engine.log.read_text()))
    assert [t for t in logged if t[0] in servers] == expected

    assert _alive(engine), engine.log.read_text()[-4000:]
    policies = watch.policies()
    assert [p['engine_id'] for p in policies] == [engine.engine_id] * 2
    # Taken back once, after the second outage, by the same engine.
    assert [p['generation'] for p in policies] == [
        g + 1 for g in generations], 'not taken back once after the lease'
    print('\noutages %.1fs and %.1fs; stored %.1fs and %.1fs after; '
          'failed database calls: %s, then %s; proxy: %d connections cut, '
          '%d refused' % (first, second, first_stored, second_stored,
                          dict(held), dict(failed), proxy.cut,
                          proxy.refused))
