"""Helpers of the load balancer tests: Octavia as a user sees it."""

import threading
import time

from novaclient import exceptions as nova_exc
from octaviaclient.api.v2 import octavia as octavia_api
from osc_lib import exceptions as osc_exceptions

from tests.functional import engines
from tests.functional import healing


def octavia(user):
    """python-octaviaclient as ``user`` (a cloud.Cloud)."""
    return octavia_api.OctaviaAPI(endpoint=user.endpoint('load-balancer'),
                                  session=user.session)


def members(client, pool_id):
    """{address: member} of the pool."""
    return {m['address']: m
            for m in client.member_list(pool_id)['members']}


def weights(client, pool_id):
    """{address: weight} of the pool's members."""
    return {a: m['weight'] for a, m in members(client, pool_id).items()}


def servers(demo, stack_name):
    """{server id: path} of the stack's group, from Heat."""
    return {r['physical_resource_id']: r['resource_name']
            for r in demo.nested_resources(stack_name)
            if r['resource_type'] == 'OS::Nova::Server' and
            r['physical_resource_id']}


def addresses(admin_nova, server_ids):
    """{server id: address} of the servers plugged in already."""
    found = {}
    for server_id in server_ids:
        try:
            server = admin_nova.servers.get(server_id)
        except nova_exc.NotFound:
            continue   # deleted since the group was read: not yet settled
        private = server.networks.get('private')
        if private:
            found[server_id] = private[0]
    return found


def follows(demo, client, admin_nova, stack_name, pool_id, count):
    """{address: member} once the pool holds exactly the group's servers."""
    group = servers(demo, stack_name)
    if len(group) != count:
        return None
    found = members(client, pool_id)
    wanted = addresses(admin_nova, group)
    if len(wanted) != count:
        return None
    return found if set(found) == set(wanted.values()) else None


def lb_ids(demo, stack_name):
    """(load balancer id, pool id) of the stack's ``lb`` resource."""
    attributes = demo.resource(stack_name, 'lb')['attributes']
    return attributes['id'], attributes['pools'][0]['id']


def gone(client, lb_id):
    """Whether Octavia no longer knows the load balancer."""
    try:
        client.load_balancer_show(lb_id)
    except (octavia_api.OctaviaClientException,
            osc_exceptions.NotFound) as ex:
        return getattr(ex, 'code', 404) == 404
    return False


def set_status(member_id, status):
    """What Octavia's health manager would conclude of a member."""
    set_statuses([member_id], status)


def set_statuses(member_ids, status):
    """One heartbeat's conclusion on several members: seen all at once."""
    engines.localcloud('fault', 'member', *(list(member_ids) + [status]))


def wait_active(client, lb_id, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if client.load_balancer_show(lb_id)[
                'provisioning_status'] == 'ACTIVE':
            return
        time.sleep(0.3)
    raise AssertionError('load balancer %s not ACTIVE in %ss' % (lb_id,
                                                                 timeout))


class Watch(object):
    """Reads a pool's members every 0.2 s: when each weight was seen."""

    def __init__(self, client, pool_id):
        self._client = client
        self._pool_id = pool_id
        self.seen = []  # (time, {address: weight})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                found = members(self._client, self._pool_id)
                self.seen.append((time.time(), {
                    a: m['weight'] for a, m in found.items()}))
            except Exception:
                pass
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def first(self, predicate):
        """When the pool was first seen as ``predicate`` says, or None."""
        for when, weights in self.seen:
            if predicate(weights):
                return when
        return None


def signal_scaling(demo, stack, policy, group='web'):
    """Signal a scaling policy once the group's last scaling has ended.

    Heat ignores a signal while the group is still scaling (it only logs
    it), and a pool that already follows the new servers does not show
    that Heat has not finished.
    """
    url = '%s/stacks/%s/%s/resources/%s/metadata' % (
        demo.endpoint('orchestration'), stack['stack_name'], stack['id'],
        group)
    demo.wait_for(lambda: not demo.session.get(url).json()['metadata'].get(
        'scaling_in_progress'), 'group %s done scaling' % group, timeout=60)
    demo.run('stack', 'resource', 'signal', stack['stack_name'], policy)


def ready(demo, admin_nova, client, stack, pool_id, count):
    """Targets by path, once all are HEALTHY and exactly in the pool.

    Each target gets its server's ``address``; no member is drained.
    """
    found = healing.all_healthy(demo, stack, count)
    if not found:
        return None
    found_addresses = addresses(admin_nova, [t['server_id']
                                             for t in found.values()])
    found_weights = weights(client, pool_id)
    if len(found_addresses) != count or set(found_weights) != set(
            found_addresses.values()) or 0 in found_weights.values():
        return None
    for target in found.values():
        target['address'] = found_addresses[target['server_id']]
    return found
