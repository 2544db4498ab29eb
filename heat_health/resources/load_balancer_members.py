"""OS::Heat::LoadBalancer's members: the servers of its targets.

The pool's members are made the servers of the targets with one
full-state batch member update (``heat_health.common.lb_members``): N
servers cost one Octavia change and one wait, not N of each. The members
and the pool's spec are stored in the resource's data, where
heat-health-engine reads them to keep the pool in step afterwards.
"""

import collections
import types

from heat.common import exception
from heat.common.i18n import _
from oslo_serialization import jsonutils

from heat_health.common import departures
from heat_health.common import lb_members
from heat_health.policy import targets as target_resolution

# Servers per Neutron port listing: keeps the query string short.
PORT_QUERY_SIZE = 100


def target_servers(ctxt, stack_id, names):
    """{server_id: path} of the servers the named resources of a stack hold.

    Groups are followed to any depth, as for a health policy, by reading
    Heat's database once.
    """
    query = types.SimpleNamespace(
        id=stack_id, stack_id=stack_id,
        parsed=types.SimpleNamespace(targets=list(names)))
    resolution = target_resolution.Resolver().resolve(ctxt, [query])
    return {place['server_id']: place['path']
            for place in resolution[stack_id].places.values()}


def fixed_addresses(neutron, server_ids):
    """{server_id: [fixed IP, ...]}, listing ports for many servers at once."""
    ids = sorted(server_ids)
    found = collections.defaultdict(list)
    for start in range(0, len(ids), PORT_QUERY_SIZE):
        ports = neutron.list_ports(
            device_id=ids[start:start + PORT_QUERY_SIZE])['ports']
        for port in ports:
            found[port['device_id']].extend(
                ip['ip_address'] for ip in port.get('fixed_ips') or [])
    return found


class MemberSync(object):
    """The pool's members made the targets' servers, and recorded."""

    def _members(self):
        value = self.data().get(self.MEMBERS_DATA)
        return jsonutils.loads(value) if value else {}

    def _store_members(self, members):
        if members != self._members():
            self.data_set(self.MEMBERS_DATA,
                          jsonutils.dumps(members, sort_keys=True))

    def _pool_subnet_id(self):
        return self.client_plugin('neutron').find_resourceid_by_name_or_id(
            'subnet', self.properties[self.POOL][self.POOL_SUBNET])

    def desired_members(self, subnet_id=None):
        """{address: {server_id, name}}: the members the targets make.

        The one place where targets become members: each server of the
        targets (at any group depth) with its address on the pool's subnet,
        named after its path in the stack. A server without such an address
        is an error, never a member silently left out; a server whose
        departure Heat is deleting is no member.
        """
        servers = target_servers(self.context, self.stack.id,
                                 self.properties[self.TARGETS])
        for server_id in departures.departing(self.context) & set(servers):
            del servers[server_id]
        if not servers:
            return {}
        subnet_id = subnet_id or self._pool_subnet_id()
        neutron = self.client('neutron')
        cidr = self._subnet_cidr(subnet_id)
        fixed = fixed_addresses(neutron, servers)
        desired, missing = {}, []
        for server_id, path in sorted(servers.items()):
            address = lb_members.address_on(cidr, fixed.get(server_id, []))
            if address is None:
                missing.append('%s (%s)' % (path, server_id))
            else:
                desired[address] = {'server_id': server_id, 'name': path}
        if missing:
            raise exception.Error(
                _('servers without an address on the pool subnet %(subnet)s '
                  '(%(cidr)s): %(servers)s') %
                {'subnet': subnet_id, 'cidr': cidr,
                 'servers': ', '.join(missing)})
        return desired

    def _subnet_cidr(self, subnet_id):
        """The subnet's CIDR, asked of Neutron once per resource object."""
        cidrs = self.__dict__.setdefault('_cidrs', {})
        if subnet_id not in cidrs:
            cidrs[subnet_id] = self.client('neutron').show_subnet(
                subnet_id)['subnet']['cidr']
        return cidrs[subnet_id]

    def _record_members(self, current, desired):
        """Members with their servers' places: a replaced one is known."""
        self._store_members(lb_members.member_map(
            current, {w['server_id']: address
                      for address, w in desired.items()},
            self.properties[self.POOL][self.POOL_PROTOCOL_PORT],
            paths={w['server_id']: w['name'] for w in desired.values()}))

    def _batch_applied(self, state, pool):
        try:
            ready = pool.ready(self.resource_id)
        except lb_members.MembersFailed as ex:
            raise exception.Error(
                _('Octavia did not apply the members of pool %(pool)s: '
                  '%(error)s') % {'pool': pool.pool_id, 'error': ex})
        if not ready:
            return self._not_yet(state, _('member update in progress'))
        self._record_members(pool.list(), state['desired'])
        self._store_spec(pool.pool_id, state)
        return True

    def _store_spec(self, pool_id, state):
        """What heat-health-engine needs to make the pool follow."""
        spec = {'pool_id': pool_id, 'loadbalancer_id': self.resource_id,
                'protocol_port': self.properties[self.POOL][
                    self.POOL_PROTOCOL_PORT],
                'subnet_id': state['subnet_id'],
                'subnet_cidr': self._subnet_cidr(state['subnet_id']),
                'targets': list(self.properties[self.TARGETS]),
                'lb_status_timeout': self.properties[self.LB_STATUS_TIMEOUT]}
        self.data_set(lb_members.DATA_SPEC, jsonutils.dumps(spec,
                                                            sort_keys=True))

    def _step_members(self, state, _argument):
        """Make the pool's members the targets' servers: one batch.

        Octavia is never sent an empty list: when no server is left, the
        last members are deleted one at a time instead.
        """
        pool = lb_members.PoolMembers(self.client(),
                                      self._object_id(self.POOL_DATA))
        if state.get('called') == 'batch':
            return self._batch_applied(state, pool)
        if state.get('called') == 'delete':
            if not self._settled(state):
                return False
            # Each deletion is a change of its own, with its own timeout.
            del state['called']
            self._start_wait(state)
        if 'desired' not in state:
            state['subnet_id'] = self._pool_subnet_id()
            state['desired'] = self.desired_members(state['subnet_id'])
        current = pool.list()
        desired = state['desired']
        members = lb_members.plan(
            current, self._members(),
            {w['server_id']: address for address, w in desired.items()},
            self.properties[self.POOL][self.POOL_PROTOCOL_PORT],
            state['subnet_id'],
            names={w['server_id']: w['name'] for w in desired.values()})
        if members is None:
            self._record_members(current, desired)
            self._store_spec(pool.pool_id, state)
            return True
        if members:
            try:
                pool.replace(members)
            except lb_members.Busy as ex:
                # Only a busy 409 waits: another one (a duplicate member)
                # would be refused again.
                state['conflict'] = str(ex)
                return self._refused(state)
            state['called'] = 'batch'
            return self._batch_applied(state, pool)
        return self._delete_one_member(state, pool, current[0]['id'])

    def _delete_one_member(self, state, pool, member_id):
        try:
            if not self._call(state, self.client().member_delete,
                              pool.pool_id, member_id):
                return self._refused(state)
        except Exception as ex:
            if not self.client_plugin().is_not_found(ex):
                raise
        state['called'] = 'delete'
        return False
