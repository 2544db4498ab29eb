"""The notification and poll URL detectors against the real bus and
fakecloud, on their own, before any monitor drives them."""

import datetime
import threading
import time
import urllib.parse
import uuid

from oslo_config import cfg
import oslo_messaging
import pytest

from heat_health.engine.monitor import lifecycle_events
from heat_health.engine.monitor import poll_url
from heat_health.policy import observation as obs
from heat_health.policy import poll_url_rules
from tests.functional import cloud
from tests.functional import notifications

# fakecloud's faults, on the local deployment's message bus (its heat.conf).
pytestmark = pytest.mark.fakecloud


class _Observations(object):
    def __init__(self):
        self.seen = []
        self.changed = threading.Condition()

    def observe(self, observation):
        with self.changed:
            self.seen.append(observation)
            self.changed.notify_all()

    def wait_for(self, server_id, verdict, reason_part, timeout=30):
        deadline = time.time() + timeout
        with self.changed:
            while True:
                for o in self.seen:
                    if (o.server_id == server_id and o.verdict == verdict and
                            reason_part in o.reason):
                        return o
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(
                        'no %s observation with %r for %s; seen %s' % (
                            verdict, reason_part, server_id,
                            [o for o in self.seen
                             if o.server_id == server_id]))
                self.changed.wait(left)


@pytest.fixture(scope='module')
def watched():
    return set()


@pytest.fixture(scope='module')
def lifecycle(watched):
    seen = _Observations()
    url = notifications.transport_url()
    transport = oslo_messaging.get_notification_transport(
        cfg.ConfigOpts(), url=url)
    pool = 'heat-health-tests-%s' % uuid.uuid4().hex[:8]
    listener = lifecycle_events.LifecycleListener(
        seen.observe, watched.__contains__, transport=transport, pool=pool)
    listener.start()
    yield seen
    listener.stop()
    transport.cleanup()
    notifications.delete_queue(url, pool)


def _inject(admin, server_id, fault):
    resp = admin.inject_fault(server_id, fault)
    assert resp.status_code == 200, resp.text
    return resp.json()['server']


@pytest.mark.parametrize('fault,event_type', [
    ('power_off', 'instance.power_off.end'),
    ('pause', 'instance.pause.end'),
    ('shutdown', 'instance.shutdown.end'),
    ('crash_to_error', 'instance.update (vm_state error)'),
])
def test_fault_seen_through_notifications(admin, demo_nova, lifecycle,
                                          watched, server, fault,
                                          event_type):
    watched.add(server.id)
    _inject(admin, server.id, fault)
    found = lifecycle.wait_for(server.id, obs.UNHEALTHY,
                               'Nova notification %s' % event_type)
    assert found.source == obs.LIFECYCLE_EVENTS
    age = datetime.datetime.utcnow() - found.observed_at
    assert datetime.timedelta(0) <= age < datetime.timedelta(seconds=60)

    _inject(admin, server.id, 'reset')
    lifecycle.wait_for(server.id, obs.HEALTHY, 'Nova notification')


def test_unwatched_server_is_ignored(admin, demo_nova, lifecycle, server):
    _inject(admin, server.id, 'power_off')
    cloud.wait_server_status(demo_nova, server.id, 'SHUTOFF')
    time.sleep(1)
    assert not [o for o in lifecycle.seen if o.server_id == server.id]


def test_hang_seen_through_poll_url(admin, server):
    health_url = _inject(admin, server.id, 'reset')['health_url']
    template = health_url.replace(server.id, '{id}')
    host = urllib.parse.urlsplit(health_url).hostname
    # Only the health endpoints' address and port, as the deployment has.
    endpoint = [urllib.parse.urlsplit(health_url).netloc]
    addresses = [a['addr'] for net in server.addresses.values()
                 for a in net]
    target = poll_url.Target(server.id, server.name, addresses)
    options = {poll_url_rules.POLL_URL: template,
               poll_url_rules.HEALTHY_RESPONSE: '^ok',
               poll_url_rules.RETRY_LIMIT: 1,
               poll_url_rules.RETRY_INTERVAL: 0.5,
               poll_url_rules.TIMEOUT: 1}
    seen = _Observations()
    checker = poll_url.PollUrlChecker(seen.observe, max_workers=4,
                                      allowed_hosts=[host],
                                      allowed_networks=endpoint)
    refusing = poll_url.PollUrlChecker(seen.observe, max_workers=1,
                                       allowed_hosts=[],
                                       allowed_networks=endpoint)
    try:
        assert checker.check(target, options).verdict == obs.HEALTHY
        refused = refusing.check(target, options)
        assert refused.verdict == obs.UNKNOWN
        assert host in refused.reason

        _inject(admin, server.id, 'hang')
        started = time.monotonic()
        assert checker.submit(target, options)
        assert time.monotonic() - started < 0.5
        assert not checker.submit(target, options)
        found = seen.wait_for(server.id, obs.UNHEALTHY, 'no answer within')
        assert found.source == obs.NODE_STATUS_POLL_URL

        _inject(admin, server.id, 'reset')
        assert checker.submit(target, options)
        seen.wait_for(server.id, obs.HEALTHY, 'answered 200')
    finally:
        checker.stop()
        refusing.stop()
        _inject(admin, server.id, 'reset')
