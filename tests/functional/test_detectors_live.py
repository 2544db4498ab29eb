"""The notification and poll URL detectors against the real bus and real
Nova, on their own, before any monitor drives them.

Each fault happens behind Nova's back (or through its API as an admin's
action), and the detectors see what Nova makes of it.
"""

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
from tests.functional import healing as h
from tests.functional import notifications
from tests.functional import server_faults as faults

pytestmark = pytest.mark.real_nova
# Seconds for Nova to act on a guest's fault: its power sync runs every
# 10 s here, and a crashed guest waits for it.
NOVA_SYNC_TIMEOUT = 60


class _Observations(object):
    def __init__(self):
        self.seen = []
        self.changed = threading.Condition()

    def observe(self, observation):
        with self.changed:
            self.seen.append(observation)
            self.changed.notify_all()

    def wait_for(self, server_id, verdict, reason_parts, timeout=30,
                 after=None):
        """The first observation with one of the reason parts.

        :param after: an observation; only those made since count.
        """
        deadline = time.time() + timeout
        with self.changed:
            while True:
                start = 0 if after is None else self.seen.index(after) + 1
                for o in self.seen[start:]:
                    if (o.server_id == server_id and o.verdict == verdict and
                            any(p in o.reason for p in reason_parts)):
                        return o
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(
                        'no %s observation with %r for %s; seen %s' % (
                            verdict, reason_parts, server_id,
                            [o for o in self.seen
                             if o.server_id == server_id]))
                self.changed.wait(left)


@pytest.fixture(scope='module')
def watched():
    return set()


@pytest.fixture(scope='module')
def lifecycle(watched):
    if not h.local_deployment():
        pytest.skip("listens on the local deployment's message bus (its "
                    "heat.conf)")
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


@pytest.mark.parametrize('fault,settled,seen', [
    # Nova's power sync saves the guest's power state (instance.update,
    # still ACTIVE), then stops a guest that shut off or crashed.
    ('power_off', 'SHUTOFF', ('ACTIVE but power state SHUTDOWN',
                              'instance.power_off.end', 'vm_state stopped')),
    # One the hypervisor paused stays ACTIVE.
    ('pause', 'ACTIVE', ('ACTIVE but power state PAUSED',)),
    ('crash', 'SHUTOFF', ('ACTIVE but power state CRASHED',
                          'ACTIVE but power state SHUTDOWN',
                          'instance.power_off.end', 'vm_state stopped')),
    # A suspend that fails in the hypervisor: Nova sets ERROR.
    pytest.param('error', 'ERROR', ('instance.update (vm_state error)',),
                 marks=pytest.mark.guest_operation_faults),
])
def test_fault_seen_through_notifications(admin, demo_nova, lifecycle,
                                          watched, server, fault, settled,
                                          seen):
    watched.add(server.id)
    faults.break_server(admin, server.id, fault)
    found = lifecycle.wait_for(server.id, obs.UNHEALTHY, seen,
                               timeout=NOVA_SYNC_TIMEOUT)
    assert found.source == obs.LIFECYCLE_EVENTS
    age = datetime.datetime.utcnow() - found.observed_at
    assert datetime.timedelta(0) <= age < datetime.timedelta(seconds=60)

    # Put right once Nova is done with the guest (its stop may follow).
    cloud.wait_server_status(demo_nova, server.id, settled,
                             timeout=NOVA_SYNC_TIMEOUT)
    faults.break_server(admin, server.id, 'reset')
    if fault == 'error':
        # Nova leaves ERROR until asked: the owner's hard reboot.
        demo_nova.servers.reboot(server.id, 'HARD')
    lifecycle.wait_for(server.id, obs.HEALTHY, ('Nova notification',),
                       after=found)


def test_unwatched_server_is_ignored(admin, demo_nova, lifecycle, server):
    faults.break_server(admin, server.id, 'power_off')
    cloud.wait_server_status(demo_nova, server.id, 'SHUTOFF',
                             timeout=NOVA_SYNC_TIMEOUT)
    time.sleep(1)
    assert not [o for o in lifecycle.seen if o.server_id == server.id]


# The health URL of each guest is the local deployment's (the fault
# driver's, through fakecloud's health port).
@pytest.mark.guest_operation_faults
def test_hang_seen_through_poll_url(admin, server):
    health_url = h.FAKECLOUD_HEALTH_URL.format(id=server.id)
    template = h.FAKECLOUD_HEALTH_URL
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

        faults.break_server(admin, server.id, 'hang')
        started = time.monotonic()
        assert checker.submit(target, options)
        assert time.monotonic() - started < 0.5
        assert not checker.submit(target, options)
        found = seen.wait_for(server.id, obs.UNHEALTHY, ('no answer within',))
        assert found.source == obs.NODE_STATUS_POLL_URL

        faults.break_server(admin, server.id, 'reset')
        assert checker.submit(target, options)
        seen.wait_for(server.id, obs.HEALTHY, ('answered 200',))
    finally:
        checker.stop()
        refusing.stop()
        faults.break_server(admin, server.id, 'reset')
