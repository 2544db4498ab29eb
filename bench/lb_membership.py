"""Pool membership changes in Octavia: one batch update vs one at a time.

A group that grows or shrinks by N servers changes N members of its load
balancer's pool. heat_health.common.lb_members sends the whole member list
in one batch ``PUT /v2/lbaas/pools/{id}/members`` and waits once for the
load balancer; Senlin changes members one by one, since every change locks
the load balancer: wait until it is ACTIVE, POST (or DELETE) one member,
wait until it is ACTIVE again. This measures both on the local deployment's
real Octavia (noop drivers, so what is timed is the API, the worker's flows
and the waiting, not amphorae).

One load balancer on the --network network's subnet, an HTTP:80 listener
and a ROUND_ROBIN pool holding an anchor member throughout (a batch never
sends an empty list, so the batched removal sends the anchor alone). Then,
on the same pool, each path adds --members members and removes them:

* batched: list the pool, one batch PUT with the full state
  (``lb_members.full_state`` + ``PoolMembers.replace``), poll
  ``PoolMembers.ready`` (the load balancer, then the members once it is
  ACTIVE);
* serial: per member, poll the load balancer until ACTIVE, POST (DELETE)
  the member, poll until ACTIVE again.

Both poll every --poll seconds (Senlin polls every 10 s: the same interval
is used for both paths so only the number of waits differs). Wall time is
measured from the first request of a change to the end of its last wait;
calls are every HTTP request to the catalog's load-balancer endpoint,
polls and 409s included. Senlin's Neutron and Nova look-ups per member
are not made, so the serial figures are a lower bound. Prints per path the
add and remove time and calls, and the serial/batched ratios (target:
>= 5x fewer calls and >= 5x faster). The load balancer is deleted (cascade)
at the end, also on Ctrl-C. Runs against the local deployment
(``tools/localcloud up``), endpoints from the Keystone catalog, and stops
by itself.

    python bench/lb_membership.py [--members 20] [--poll 0.5]
        [--timeout 300] [--user demo] [--network private]
"""

import argparse
import collections
import ipaddress
import pathlib
import signal
import sys
import time
import uuid

from keystoneauth1 import exceptions as ks_exceptions
from octaviaclient.api.v2 import octavia
from osc_lib import exceptions as osc_exceptions

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from heat_health.common import lb_members  # noqa: E402
from tests.functional import cloud as localcloud  # noqa: E402

PROTOCOL_PORT = 80
FIRST_HOST = 100        # members are the subnet's hosts 100, 101, ...
ANCHOR_HOST = 99
TARGET_RATIO = 5.0
SENLIN_POLL = 10

ERRORS = (octavia.OctaviaClientException, osc_exceptions.ClientException,
          ks_exceptions.ClientException, lb_members.MembersFailed,
          lb_members.Busy)


class BenchFailed(Exception):
    pass


class Interrupted(Exception):
    pass


class Calls(object):
    """Every response from the load-balancer endpoint, in order."""

    def __init__(self, session, endpoint):
        self.prefix = endpoint.rstrip('/') + '/'
        self.seen = []
        # keystoneauth sends through a requests.Session: its response
        # hooks see every request, retries and redirects included.
        session.session.hooks['response'].append(self._hook)

    def _hook(self, response, *args, **kwargs):
        if response.request.url.startswith(self.prefix):
            self.seen.append((response.request.method,
                              response.status_code))

    def mark(self):
        return len(self.seen)

    def since(self, mark):
        return self.seen[mark:]


class Figures(object):
    """Time and calls of one change (add or remove) of one path."""

    def __init__(self, calls):
        self.calls = calls
        self.mark = calls.mark()
        self.begin = time.monotonic()
        self.seconds = None
        self.requests = None

    def stop(self):
        self.seconds = time.monotonic() - self.begin
        self.requests = self.calls.since(self.mark)

    @property
    def count(self):
        return len(self.requests)

    def detail(self):
        methods = collections.Counter(m for m, _s in self.requests)
        text = ', '.join('%d %s' % (n, m) for m, n in sorted(
            methods.items()))
        conflicts = sum(1 for _m, s in self.requests if s == 409)
        errors = sum(1 for _m, s in self.requests
                     if s >= 400 and s != 409)
        if conflicts:
            text += '; %d answered 409' % conflicts
        if errors:
            text += '; %d other errors' % errors
        return text


# Waiting

def wait_until(check, what, poll, timeout):
    """Call check() now and every poll seconds until it is true."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() >= deadline:
            raise BenchFailed('timed out after %ss waiting for %s'
                              % (timeout, what))
        time.sleep(poll)


def lb_active(api, lb_id):
    status = api.load_balancer_show(lb_id)['provisioning_status']
    if status == 'ERROR':
        raise BenchFailed('load balancer %s went to ERROR' % lb_id)
    return status == 'ACTIVE'


def wait_active(api, lb_id, poll, timeout):
    wait_until(lambda: lb_active(api, lb_id),
               'load balancer %s ACTIVE' % lb_id, poll, timeout)


def retry_busy(call, what, poll, timeout):
    """Make a change, again while Octavia answers 409 "immutable"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except lb_members.Busy:
            pass
        except octavia.OctaviaClientException as e:
            if e.code != 409 or 'immutable' not in str(e.message):
                raise
        if time.monotonic() >= deadline:
            raise BenchFailed('load balancer busy for %ss: %s'
                              % (timeout, what))
        time.sleep(poll)


# The deployment

def find_subnet(session, name):
    """The named network's first subnet, through the catalog's Neutron."""
    endpoint = session.get_endpoint(service_type='network',
                                    interface='public').rstrip('/')
    if not endpoint.endswith('/v2.0'):
        endpoint += '/v2.0'
    networks = session.get(endpoint + '/networks',
                           params={'name': name}).json()['networks']
    if not networks or not networks[0]['subnets']:
        raise BenchFailed('no network %r with a subnet' % name)
    subnet_id = networks[0]['subnets'][0]
    return session.get('%s/subnets/%s' % (endpoint, subnet_id)).json()[
        'subnet']


def build_lb(api, made, subnet, poll, timeout):
    name = 'bench-lb-membership-%s' % uuid.uuid4().hex[:8]
    lb = api.load_balancer_create(json={'loadbalancer': {
        'name': name, 'vip_subnet_id': subnet['id']}})['loadbalancer']
    made.append(lb['id'])
    wait_active(api, lb['id'], poll, timeout)
    listener = api.listener_create(json={'listener': {
        'name': name, 'loadbalancer_id': lb['id'], 'protocol': 'HTTP',
        'protocol_port': 80}})['listener']
    wait_active(api, lb['id'], poll, timeout)
    pool = api.pool_create(json={'pool': {
        'name': name, 'listener_id': listener['id'], 'protocol': 'HTTP',
        'lb_algorithm': 'ROUND_ROBIN'}})['pool']
    wait_active(api, lb['id'], poll, timeout)
    return name, lb['id'], pool['id']


def delete_lb(api, lb_id, poll, timeout):
    """Delete the load balancer and all in it; wait until it is gone."""
    begin = time.monotonic()

    def delete():
        try:
            api.load_balancer_delete(lb_id, cascade=True)
        except octavia.OctaviaClientException as e:
            if e.code != 404:
                raise

    def gone():
        try:
            api.load_balancer_show(lb_id)
        except (osc_exceptions.NotFound, ks_exceptions.NotFound):
            return True
        return False

    try:
        retry_busy(delete, 'deleting %s' % lb_id, poll, timeout)
        wait_until(gone, 'load balancer %s deleted' % lb_id, poll, timeout)
    except ERRORS + (BenchFailed,) as e:
        print('could not delete load balancer %s: %s' % (lb_id, e))
        return
    print('load balancer %s deleted (cascade) in %.1f s'
          % (lb_id, time.monotonic() - begin))


def check_pool(pool, expected):
    """After a path's change, untimed: the pool holds what it should."""
    members = pool.list()
    addresses = sorted(m['address'] for m in members)
    states = collections.Counter(m['provisioning_status'] for m in members)
    if addresses != sorted(expected) or set(states) != {'ACTIVE'}:
        raise BenchFailed('the pool holds %d members (%s), expected %d'
                          % (len(members), ', '.join(
                              '%d %s' % (n, s) for s, n in states.items()),
                             len(expected)))


# The paths

def batched(api, calls, pool, lb_id, subnet, anchor, addresses, args):
    """Add all with one batch PUT, wait; remove all the same way."""
    def change(wanted):
        figures = Figures(calls)
        members = lb_members.full_state(pool.list(), wanted, PROTOCOL_PORT,
                                        subnet_id=subnet['id'])
        retry_busy(lambda: pool.replace(members), 'batch update',
                   args.poll, args.timeout)
        wait_until(lambda: pool.ready(lb_id), 'the batch update',
                   args.poll, args.timeout)
        figures.stop()
        return figures

    wanted = {a: 'bench-%s' % a for a in [anchor] + addresses}
    added = change(wanted)
    check_pool(pool, [anchor] + addresses)
    removed = change({anchor: wanted[anchor]})
    check_pool(pool, [anchor])
    return added, removed


def serial(api, calls, pool, lb_id, subnet, anchor, addresses, args):
    """Senlin's way: per member, wait ACTIVE, POST (DELETE), wait again."""
    def one(call, what):
        wait_active(api, lb_id, args.poll, args.timeout)
        result = retry_busy(call, what, args.poll, args.timeout)
        wait_active(api, lb_id, args.poll, args.timeout)
        return result

    ids = []
    added = Figures(calls)
    for address in addresses:
        body = {'member': {'address': address,
                           'protocol_port': PROTOCOL_PORT,
                           'subnet_id': subnet['id'],
                           'name': 'bench-%s' % address}}
        member = one(lambda: api.member_create(pool.pool_id, json=body),
                     'adding %s' % address)
        ids.append(member['member']['id'])
    added.stop()
    check_pool(pool, [anchor] + addresses)
    removed = Figures(calls)
    for member_id in ids:
        one(lambda: api.member_delete(pool.pool_id, member_id),
            'removing %s' % member_id)
    removed.stop()
    check_pool(pool, [anchor])
    return added, removed


# Output

def ratio(serial_value, batched_value):
    return serial_value / batched_value if batched_value else float('inf')


def report(results, args):
    print()
    print('%d members added and removed per path; polls every %.2f s for '
          'both paths (Senlin polls every %d s)'
          % (args.members, args.poll, SENLIN_POLL))
    print('  %-24s %9s %9s %9s %9s'
          % ('', 'add s', 'add calls', 'remove s', 'rm calls'))
    for name, (added, removed) in results.items():
        print('  %-24s %9.2f %9d %9.2f %9d'
              % (name, added.seconds, added.count, removed.seconds,
                 removed.count))
    if len(results) == 2:
        ratios(results, args)
    print('  requests:')
    for name, (added, removed) in results.items():
        print('    %-22s add: %s; remove: %s'
              % (name, added.detail(), removed.detail()))


def ratios(results, args):
    (b_add, b_rm), (s_add, s_rm) = results.values()
    times = [ratio(s_add.seconds, b_add.seconds),
             ratio(s_rm.seconds, b_rm.seconds)]
    calls = [ratio(s_add.count, b_add.count), ratio(s_rm.count, b_rm.count)]
    print('  %-24s %8.1fx %8.1fx %8.1fx %8.1fx'
          % ('serial / batched', times[0], calls[0], times[1], calls[1]))
    print('  serial, per member: add %.2f s and %.1f calls, remove %.2f s '
          'and %.1f calls'
          % (s_add.seconds / args.members, s_add.count / args.members,
             s_rm.seconds / args.members, s_rm.count / args.members))
    met = min(times) >= TARGET_RATIO and min(calls) >= TARGET_RATIO
    print('  target >= %.0fx fewer calls and >= %.0fx faster, add and '
          'remove: %s' % (TARGET_RATIO, TARGET_RATIO,
                          'MET' if met else 'NOT MET'))


# The run

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--members', type=int, default=20,
                        help='members added and removed by each path')
    parser.add_argument('--poll', type=float, default=0.5,
                        help='seconds between reads of the load balancer')
    parser.add_argument('--timeout', type=int, default=300,
                        help='seconds any one wait may take')
    parser.add_argument('--user', default='demo',
                        help='user of the local deployment (its openrc)')
    parser.add_argument('--network', default='private',
                        help='network whose subnet holds VIP and members')
    args = parser.parse_args()
    if args.members < 1:
        parser.error('--members: at least 1')
    if args.poll <= 0:
        parser.error('--poll: more than 0')

    cloud = localcloud.Cloud(args.user)
    session = cloud.session
    endpoint = session.get_endpoint(service_type='load-balancer',
                                    interface='public')
    api = octavia.OctaviaAPI(endpoint=endpoint, session=session)
    calls = Calls(session, endpoint)
    subnet = find_subnet(session, args.network)
    network = ipaddress.ip_network(subnet['cidr'], strict=False)
    if FIRST_HOST + args.members >= network.num_addresses - 1:
        parser.error('--members: subnet %s is too small' % subnet['cidr'])
    anchor = str(network[ANCHOR_HOST])
    addresses = [str(network[FIRST_HOST + i]) for i in range(args.members)]

    made = []
    results = collections.OrderedDict()

    def interrupted(signum, frame):
        raise Interrupted()
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        begin = time.monotonic()
        name, lb_id, pool_id = build_lb(api, made, subnet, args.poll,
                                        args.timeout)
        pool = lb_members.PoolMembers(api, pool_id)
        api.member_create(pool_id, json={'member': {
            'address': anchor, 'protocol_port': PROTOCOL_PORT,
            'subnet_id': subnet['id'], 'name': 'bench-%s' % anchor}})
        wait_active(api, lb_id, args.poll, args.timeout)
        print('load balancer %s (%s) as %s on %s %s: listener HTTP:80, '
              'pool ROUND_ROBIN, anchor member %s: ACTIVE in %.1f s'
              % (name, lb_id, args.user, subnet['name'], subnet['cidr'],
                 anchor, time.monotonic() - begin))
        for title, path in [('batched (1 PUT)', batched),
                            ('serial (Senlin\'s way)', serial)]:
            added, removed = path(api, calls, pool, lb_id, subnet,
                                  anchor, addresses, args)
            results[title] = (added, removed)
            print('%s: %d members added in %.2f s with %d calls, removed '
                  'in %.2f s with %d calls'
                  % (title, args.members, added.seconds, added.count,
                     removed.seconds, removed.count))
    except ERRORS + (BenchFailed,) as e:
        print('stopped: %s' % e)
    except (KeyboardInterrupt, Interrupted):
        print('interrupted: cleaning up')
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for lb_id in made:
            delete_lb(api, lb_id, args.poll, args.timeout)
    if results:
        report(results, args)


if __name__ == '__main__':
    main()
