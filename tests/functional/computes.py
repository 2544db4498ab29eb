"""The local deployment's nova-compute services, stopped as hosts fail.

A host's failures that Nova itself meets: its nova-compute killed (it
stops reporting; started again, its restart handling ``_init_instance``
runs before it reports), the whole host lost (its guests gone too), and
an operator's fencing of it (``openstack compute service set --down``).
Only for the local deployment's real Nova (``tools/localcloud``), whose
computes run the fault driver: their pid files say which process is
which, and the driver keeps each host's guests in a file of its own.
"""

import json
import os
import signal

from tests.functional import cloud
from tests.functional import engines

# Services' API microversion that sets forced_down by service id.
SERVICES_VERSION = '2.53'
# Seconds Nova takes to show a killed compute down (its service_down_time
# in the local deployment, and a report interval), and then some.
DOWN_TIMEOUT = 40
GUESTS_FILE = 'fault_driver_guests.json'


def hosts():
    """The computes' host names, in the order tools/localcloud numbers."""
    return list(json.loads(cloud.FAULT_DRIVER_FILE.read_text()))


def _service_name(host):
    return 'nova-compute-%d' % (hosts().index(host) + 1)


def kill(host):
    """kill -9 of the host's nova-compute; its guests run on."""
    os.kill(engines.deployment_pid(_service_name(host)), signal.SIGKILL)


def lose_guests(host):
    """The host's guests gone, as when the host itself died.

    Only while its nova-compute is stopped: it writes the file.
    """
    path = cloud.STATE_DIR / 'data' / 'nova' / host / GUESTS_FILE
    if path.exists():
        path.write_text('{}')


def start():
    """Start what is not running: a killed compute comes back."""
    engines.localcloud('up')


def _headers():
    return {'X-OpenStack-Nova-API-Version': SERVICES_VERSION}


def service(admin, host):
    """The host's nova-compute service as an admin lists it."""
    resp = admin.session.get('%s/os-services?binary=nova-compute&host=%s' % (
        admin.endpoint('compute'), host), headers=_headers())
    [found] = resp.json()['services']
    return found


def force_down(admin, host, down=True):
    """The operator's fencing: the service forced down (or up again)."""
    found = service(admin, host)
    admin.session.put('%s/os-services/%s' % (admin.endpoint('compute'),
                                             found['id']),
                      json={'forced_down': down}, headers=_headers())


def wait_state(admin, host, state, timeout=DOWN_TIMEOUT):
    """Until Nova shows the host's nova-compute up or down."""
    return admin.wait_for(lambda: service(admin, host)['state'] == state,
                          'nova-compute of %s %s' % (host, state),
                          timeout=timeout)


def servers_on(admin_nova, server_ids, host):
    """Those of the servers that Nova places on the host."""
    return [s for s in server_ids if getattr(
        admin_nova.servers.get(s), 'OS-EXT-SRV-ATTR:host', None) == host]
