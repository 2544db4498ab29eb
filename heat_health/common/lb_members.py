"""An Octavia pool's members, set in one full-state batch update.

Used by ``OS::Heat::LoadBalancer`` in heat-engine and by heat-health-engine
when a group changes or a member is drained for recovery. Octavia's batch
``PUT /v2/lbaas/pools/{id}/members`` replaces the whole member list: a
listed member is created or updated, an unlisted one is deleted, and a field
left out is reset to its default (weight 1, admin up, not backup). So every
request names every member with all three fields, keeping what the pool
already has for members that stay.

The client is python-octaviaclient's ``OctaviaAPI`` (Heat's ``octavia``
client plugin returns one); it has no batch method, so the request goes
through its session and error translation, which Heat's ``is_conflict`` and
``is_not_found`` understand.
"""

import ipaddress

from octaviaclient.api import constants as octavia_const
from octaviaclient.api.v2 import octavia as octavia_api
from oslo_serialization import jsonutils

# The resource data of an OS::Heat::LoadBalancer that heat-health-engine
# reads, both JSON: what its pool is (pool_id, loadbalancer_id,
# protocol_port, subnet_id, subnet_cidr, targets), and its members
# ({server id: {"member_id", "address"}}), which the engine rewrites when
# it makes the pool follow a group.
DATA_SPEC, DATA_MEMBERS = ('lb_spec', 'lb_members')
SPEC_KEYS = ('pool_id', 'loadbalancer_id', 'protocol_port', 'subnet_id',
             'subnet_cidr', 'targets')
STATUS_TIMEOUT = 'lb_status_timeout'
# Longest lb_status_timeout: six times the wait Octavia's own defaults give
# an amphora to boot (30 retries of 10 s); a load balancer busy for longer
# is in trouble, and a drain waits no longer for it.
MAX_STATUS_TIMEOUT = 1800

# Provisioning states in which Octavia refuses changes (409 "immutable").
PENDING = frozenset(['PENDING_CREATE', 'PENDING_UPDATE', 'PENDING_DELETE'])
KEPT_FIELDS = (('weight', 1), ('admin_state_up', True), ('backup', False))
# What a member the resource did not add is sent back with.
SENT_FIELDS = ('address', 'protocol_port', 'subnet_id', 'name', 'weight',
               'admin_state_up', 'backup', 'monitor_address',
               'monitor_port', 'tags')


class Busy(Exception):
    """The load balancer is being changed: ask again later."""


class MembersFailed(Exception):
    """Octavia's worker put members of the last update in ERROR."""


def address_on(subnet_cidr, fixed_ips):
    """The first of a server's fixed IPs inside the pool's subnet.

    :param subnet_cidr: the subnet's CIDR: its IP version is the one a
        dual-stack server's address must have.
    :param fixed_ips: the server's addresses, in the order of its ports.
    """
    network = ipaddress.ip_network(subnet_cidr, strict=False)
    for address in fixed_ips:
        try:
            if ipaddress.ip_address(address) in network:
                return address
        except ValueError:
            continue
    return None


def full_state(current, wanted, protocol_port, subnet_id=None,
               weights=None):
    """The member list to send: ``wanted`` addresses, nothing else.

    :param current: the pool's members as Octavia lists them; a member that
        stays keeps its weight, admin state and backup flag.
    :param wanted: {address: name} of the members the pool must hold.
    :param weights: {address: weight} overriding the kept weight (a drain
        sends 0, a restore the weight it had).
    :returns: members sorted by address, each address once.
    """
    weights = weights or {}
    existing = {(m['address'], m['protocol_port']): m for m in current}
    members = []
    for address in sorted(set(wanted)):
        old = existing.get((address, protocol_port), {})
        member = {'address': address, 'protocol_port': protocol_port}
        for field, default in KEPT_FIELDS:
            value = old.get(field)
            member[field] = default if value is None else value
        if address in weights:
            member['weight'] = weights[address]
        if wanted[address]:
            member['name'] = wanted[address]
        if subnet_id:
            member['subnet_id'] = subnet_id
        members.append(member)
    return members


def plan(current, added, servers, protocol_port, subnet_id=None,
         weights=None, names=None):
    """The full member list that makes the pool follow ``servers``.

    :param current: the pool's members as Octavia lists them.
    :param added: {server id: {"address": ...}} of the members this
        resource added before (its resource data); members it did not add
        (a reused pool's) are sent back exactly as they are.
    :param servers: {server id: address} the pool must hold now.
    :param names: {server id: member name}; without one, a member keeps
        the name it has (Octavia keeps names left out).
    :returns: the list to send, or None when the pool already holds it.
    """
    # Members added before are ours on any port (the port may have
    # changed since); others only on the port and address wanted now.
    added_addresses = {m.get('address') for m in added.values()}
    wanted = {(a, protocol_port) for a in servers.values()}
    foreign = [{k: m[k] for k in SENT_FIELDS if m.get(k) is not None}
               for m in current
               if m['address'] not in added_addresses and
               (m['address'], m['protocol_port']) not in wanted]
    names = names or {}
    mine = full_state(current, {a: names.get(s)
                                for s, a in servers.items()},
                      protocol_port, subnet_id, weights)
    members = sorted(foreign + mine, key=lambda m: (m['address'],
                                                    m['protocol_port']))
    if same_members(current, members):
        return None
    return members


def reweighted(current, protocol_port, weights):
    """The pool's members as they are, but for ``weights``, or None.

    A drain or a restore changes weights only: the member list is the one
    the pool holds now, so a swap the pool follower made meanwhile is
    never undone (a stale list would add a removed member back, or drop
    a new one).

    :param weights: {address: weight} for members on ``protocol_port``.
    :returns: the list to send, or None when no weight changes.
    """
    members, changed = [], False
    for member in current:
        sent = {k: member[k] for k in SENT_FIELDS
                if member.get(k) is not None}
        for field, default in KEPT_FIELDS:
            sent.setdefault(field, default)
        if member['protocol_port'] == protocol_port and \
                member['address'] in weights:
            changed |= sent['weight'] != weights[member['address']]
            sent['weight'] = weights[member['address']]
        members.append(sent)
    if not changed:
        return None
    return sorted(members, key=lambda m: (m['address'], m['protocol_port']))


def member_map(current, servers, protocol_port, paths=None):
    """{server id: {member_id, address[, path]}} once the pool holds them.

    :param paths: {server id: its place in the stack}: kept, so that the
        member of a server being replaced is known by its place.
    """
    ids = {(m['address'], m['protocol_port']): m.get('id') for m in current}
    found = {}
    for server_id, address in servers.items():
        if (address, protocol_port) not in ids:
            continue
        found[server_id] = {'member_id': ids[(address, protocol_port)],
                            'address': address}
        if paths and paths.get(server_id):
            found[server_id]['path'] = paths[server_id]
    return found


def read_data(data):
    """The spec and members of a load balancer's resource data, or None.

    A ``lb_status_timeout`` stored before it had a maximum is read as the
    maximum.

    :param data: {key: stored string} of its resource data.
    """
    try:
        spec = jsonutils.loads(data[DATA_SPEC])
        members = jsonutils.loads(data.get(DATA_MEMBERS) or '{}')
        spec['protocol_port'] = int(spec['protocol_port'])
        if spec.get(STATUS_TIMEOUT) is not None:
            spec[STATUS_TIMEOUT] = min(int(spec[STATUS_TIMEOUT]),
                                       MAX_STATUS_TIMEOUT)
    except (KeyError, TypeError, ValueError):
        return None
    if not (spec.get('pool_id') and isinstance(members, dict)):
        return None
    spec['members'] = {s: m for s, m in members.items()
                       if isinstance(m, dict)}
    return spec


def same_members(current, members):
    """Whether the pool already holds exactly ``members``."""
    def key(member):
        return (member['address'], member['protocol_port']) + tuple(
            member.get(field, default) for field, default in KEPT_FIELDS)
    return sorted(map(key, current)) == sorted(map(key, members))


class PoolMembers(object):
    """Batch member updates of one pool, through an ``OctaviaAPI``."""

    def __init__(self, client, pool_id):
        self.client = client
        self.pool_id = pool_id

    def list(self):
        return self.client.member_list(self.pool_id).get('members', [])

    def replace(self, members):
        """Send the full member list; raise Busy while Octavia is busy.

        An empty list is never sent (Octavia's worker mishandled it in
        past releases): the caller deletes the last members one by one.
        """
        if not members:
            raise ValueError('an empty member list is not sent in a batch')
        url = octavia_const.BASE_MEMBER_URL.format(pool_id=self.pool_id)
        put = octavia_api.correct_return_codes(self.client._create)
        try:
            put(url, method='PUT', json={'members': members})
        except octavia_api.OctaviaClientException as ex:
            if ex.code == 409 and 'immutable' in str(ex.message):
                raise Busy(str(ex.message))
            raise

    def ready(self, loadbalancer_id):
        """True once the load balancer took the last change.

        The batch flow marks members ACTIVE before the load balancer, so
        the load balancer's provisioning status is the one to read; then
        the members, since a failed flow leaves them in ERROR while the
        load balancer returns to ACTIVE.
        """
        lb = self.client.load_balancer_show(loadbalancer_id)
        status = lb.get('provisioning_status')
        if status in PENDING:
            return False
        failed = [m['address'] for m in self.list()
                  if m.get('provisioning_status') == 'ERROR']
        if failed:
            raise MembersFailed('members in ERROR after the update: %s' %
                                ', '.join(sorted(failed)))
        if status != 'ACTIVE':
            raise MembersFailed('load balancer %s is %s' % (loadbalancer_id,
                                                            status))
        return True
