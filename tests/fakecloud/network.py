"""Neutron v2.0: networks, subnets, ports, security groups, extensions.

Enough for Heat's neutron client plugin and constraints, Heat's server
network code (internal ports, os-interface, address attributes), the
openstack CLI and python-octaviaclient's subnet lookups.  The port
functions at the top are also what the compute API uses to plug servers.
"""

import ipaddress
import time
import uuid

from tests.fakecloud import http
from tests.fakecloud import state

EXTENSIONS = (
    ('agent', 'agent', 'The agent management extension.'),
    ('allowed-address-pairs', 'Allowed Address Pairs',
     'Provides allowed address pairs'),
    ('binding', 'Port Binding', 'Expose port bindings of a virtual port'),
    ('extra_dhcp_opt', 'Neutron Extra DHCP options',
     'Extra options configuration for DHCP.'),
    ('net-mtu', 'Network MTU', 'Provides MTU attribute for a network'),
    ('port-security', 'Port Security', 'Provides port security'),
    ('project-id', 'project_id field enabled',
     'Extension that indicates that project_id field is enabled.'),
    ('quotas', 'Quota management support',
     'Expose functions for quotas management per project'),
    ('security-group', 'security-group',
     'The security groups extension.'),
    ('standard-attr-description', 'standard-attr-description',
     'Extension to add descriptions to standard attributes'),
    ('standard-attr-revisions', 'Resource revision numbers',
     'This extension will display the revision number of neutron '
     'resources.'),
    ('standard-attr-timestamp', 'Resource timestamps',
     'Adds created_at and updated_at fields to all Neutron resources '
     'that have Neutron standard attributes.'),
)

# Query parameters that are not field filters.
_CONTROL_PARAMS = ('fields', 'limit', 'marker', 'sort_key', 'sort_dir',
                   'page_reverse', 'shared_filter')

_PORT_FIELDS = (
    'id', 'name', 'network_id', 'project_id', 'tenant_id', 'mac_address',
    'admin_state_up', 'status', 'device_id', 'device_owner', 'fixed_ips',
    'security_groups', 'allowed_address_pairs', 'extra_dhcp_opts',
    'port_security_enabled', 'description', 'tags', 'created_at',
    'updated_at', 'revision_number', 'binding:vnic_type',
    'binding:host_id', 'binding:vif_type', 'binding:vif_details',
    'binding:profile', 'qos_policy_id', 'dns_name', 'dns_assignment',
    'propagate_uplink_status', 'ip_allocation')
_PORT_WRITABLE = ('name', 'admin_state_up', 'device_id', 'device_owner',
                  'security_groups', 'allowed_address_pairs',
                  'extra_dhcp_opts', 'port_security_enabled', 'description',
                  'binding:vnic_type', 'binding:host_id', 'binding:profile',
                  'qos_policy_id', 'dns_name', 'propagate_uplink_status',
                  'mac_address')


class NeutronError(http.ApiError):
    def __init__(self, status, kind, message):
        super(NeutronError, self).__init__(status, {'NeutronError': {
            'type': kind, 'message': message, 'detail': ''}})


def _bad_request(message):
    return NeutronError(400, 'HTTPBadRequest', message)


# Ports, for the network and compute APIs
# ---------------------------------------


def visible_network(store, ctx, network_id):
    network = store.networks.get(network_id)
    if network is None or not (network['shared'] or ctx.is_admin or
                               network['project_id'] == ctx.project_id):
        raise NeutronError(404, 'NetworkNotFound',
                           'Network %s could not be found.' % network_id)
    return network


def default_security_group(store, project_id):
    """The project's default group, made on first use as Neutron does."""
    group_id = store.default_security_group.get(project_id)
    if group_id is None:
        group_id = state.fixed_id('security-group-default', project_id)
        now = state.isotime(time.time())
        rules = [{
            'id': state.fixed_id('security-group-rule', '%s:%s:%s' % (
                project_id, direction, ethertype)),
            'security_group_id': group_id, 'direction': direction,
            'ethertype': ethertype, 'protocol': None,
            'port_range_min': None, 'port_range_max': None,
            'remote_ip_prefix': None,
            'remote_group_id': group_id if direction == 'ingress' else None,
            'remote_address_group_id': None, 'normalized_cidr': None,
            'project_id': project_id, 'tenant_id': project_id,
            'description': '', 'tags': [], 'created_at': now,
            'updated_at': now, 'revision_number': 0,
            'belongs_to_default_sg': True}
            for direction in ('ingress', 'egress')
            for ethertype in ('IPv4', 'IPv6')]
        store.security_groups[group_id] = {
            'id': group_id, 'name': 'default',
            'description': 'Default security group',
            'project_id': project_id, 'tenant_id': project_id,
            'security_group_rules': rules, 'stateful': True, 'shared': False,
            'tags': [], 'created_at': now, 'updated_at': now,
            'revision_number': 1}
        store.default_security_group[project_id] = group_id
    return group_id


def _allocate_fixed_ips(store, network, wanted):
    """Fixed IPs for a port.

    wanted is None (one from the first subnet) or a list of {subnet_id,
    ip_address} with either key optional.
    """
    if wanted is None:
        wanted = [{}] if network['subnets'] else []
    allocated = []
    try:
        for item in wanted:
            subnet_id = item.get('subnet_id')
            address = item.get('ip_address')
            if subnet_id is None and address is not None:
                subnet_id = _subnet_for_address(store, network, address)
            subnet_id = subnet_id or network['subnets'][0]
            if subnet_id not in network['subnets']:
                raise _bad_request('Subnet %s is not on network %s.' % (
                    subnet_id, network['id']))
            try:
                ip = store.ip_pools[subnet_id].allocate(address)
            except LookupError:
                raise NeutronError(
                    409, 'IpAddressAlreadyAllocated',
                    'IP address %s already allocated in subnet %s' % (
                        address, subnet_id))
            except ValueError:
                raise NeutronError(
                    400, 'InvalidIpForSubnet',
                    'IP address %s is not a valid IP for the specified '
                    'subnet.' % address)
            except OverflowError:
                raise NeutronError(
                    409, 'IpAddressGenerationFailure',
                    'No more IP addresses available on network %s.' %
                    network['id'])
            allocated.append({'subnet_id': subnet_id, 'ip_address': ip})
    except http.ApiError:
        _release_fixed_ips(store, allocated)
        raise
    return allocated


def _subnet_for_address(store, network, address):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise _bad_request("'%s' is not a valid IP address." % address)
    for subnet_id in network['subnets']:
        if ip in ipaddress.ip_network(store.subnets[subnet_id]['cidr']):
            return subnet_id
    raise NeutronError(400, 'InvalidIpForNetwork',
                       'IP address %s is not a valid IP for any of the '
                       'subnets on the specified network.' % address)


def _release_fixed_ips(store, fixed_ips):
    for item in fixed_ips:
        store.ip_pools[item['subnet_id']].release(item['ip_address'])


def create_port(store, project_id, network, attrs):
    """Create a port on network for project_id; attrs as in the API."""
    now = state.isotime(time.time())
    port_id = str(uuid.uuid4())
    groups = attrs.get('security_groups')
    if groups is None:
        groups = [default_security_group(store, project_id)]
    port = {
        'id': port_id, 'name': '', 'network_id': network['id'],
        'project_id': project_id, 'tenant_id': project_id,
        'mac_address': store.new_mac(), 'admin_state_up': True,
        'status': 'DOWN', 'device_id': '', 'device_owner': '',
        'fixed_ips': [], 'security_groups': groups,
        'allowed_address_pairs': [], 'extra_dhcp_opts': [],
        'port_security_enabled': True, 'description': '', 'tags': [],
        'created_at': now, 'updated_at': now, 'revision_number': 1,
        'binding:vnic_type': 'normal', 'binding:host_id': '',
        'binding:vif_type': 'unbound', 'binding:vif_details': {},
        'binding:profile': {}, 'qos_policy_id': None, 'dns_name': '',
        'dns_assignment': [], 'propagate_uplink_status': False,
        'ip_allocation': 'immediate'}
    for key in _PORT_WRITABLE:
        if key in attrs and key != 'security_groups':
            port[key] = attrs[key]
    port['fixed_ips'] = _allocate_fixed_ips(store, network,
                                            attrs.get('fixed_ips'))
    store.ports[port_id] = port
    store.index_port(port)
    return port


def update_port(store, port, changes):
    old_device = port['device_id']
    if 'fixed_ips' in changes:
        network = store.networks[port['network_id']]
        new_ips = _allocate_fixed_ips(store, network, [
            item for item in changes['fixed_ips']
            if item not in port['fixed_ips']])
        kept = [item for item in port['fixed_ips']
                if item in changes['fixed_ips']]
        _release_fixed_ips(store, [item for item in port['fixed_ips']
                                   if item not in kept])
        port['fixed_ips'] = kept + new_ips
    for key in _PORT_WRITABLE:
        if key in changes:
            port[key] = changes[key]
    port['updated_at'] = state.isotime(time.time())
    port['revision_number'] += 1
    store.index_port(port, old_device)
    _server_changed(store, old_device)
    _server_changed(store, port['device_id'])


def delete_port(store, port):
    _release_fixed_ips(store, port['fixed_ips'])
    store.ports.pop(port['id'], None)
    device_id = port['device_id']
    port['device_id'] = ''
    store.index_port(port, device_id)
    _server_changed(store, device_id)


def bind_port(store, port, server):
    """Plug a port into a server, as Nova does when it boots or attaches."""
    old_device = port['device_id']
    port.update({'device_id': server.id, 'device_owner': 'compute:nova',
                 'binding:host_id': server.host, 'binding:vif_type': 'ovs',
                 'binding:vif_details': {'port_filter': True},
                 'updated_at': state.isotime(time.time())})
    port['revision_number'] += 1
    store.index_port(port, old_device)


def set_ports_status(store, server, status):
    for port in store.ports_of(server.id):
        port['status'] = status


def unbind_port(store, port):
    device_id = port['device_id']
    port.update({'device_id': '', 'device_owner': '', 'status': 'DOWN',
                 'binding:host_id': '', 'binding:vif_type': 'unbound',
                 'binding:vif_details': {},
                 'updated_at': state.isotime(time.time())})
    port['revision_number'] += 1
    store.index_port(port, device_id)


def _server_changed(store, device_id):
    server = store.servers.get(device_id) if device_id else None
    if server is not None:
        server.touch()


# API
# ---


def _filter(items, req, skip=()):
    """Neutron's list filters: field=value, repeated for any of several."""
    wanted = {}
    for key, value in req.GET.items():
        if key in _CONTROL_PARAMS or key in skip:
            continue
        wanted.setdefault(key, []).append(value)
    if not wanted:
        return list(items)
    fixed = wanted.pop('fixed_ips', None)
    found = []
    for item in items:
        ok = True
        for key, values in wanted.items():
            value = item.get(key)
            if isinstance(value, bool):
                value = 'true' if value else 'false'
                values = [v.lower() for v in values]
            if isinstance(value, list):
                if not any(v in value for v in values):
                    ok = False
                    break
            elif value is None or str(value) not in values:
                ok = False
                break
        if ok and fixed:
            ok = all(_fixed_ip_matches(item.get('fixed_ips', []), spec)
                     for spec in fixed)
        if ok:
            found.append(item)
    return found


def _fixed_ip_matches(fixed_ips, spec):
    key, _, value = spec.partition('=')
    if key == 'ip_address_substr':
        return any(value in item['ip_address'] for item in fixed_ips)
    return any(item.get(key) == value for item in fixed_ips)


class NetworkAPI(object):
    """Handlers under /network."""

    def __init__(self, store, conf):
        self.store = store
        self.base = conf.public_url + '/network'
        router = self.router = http.Router()
        router.add('GET', '/v2.0', self.resources)
        router.add('GET', '/v2.0/extensions', self.list_extensions)
        router.add('GET', '/v2.0/extensions/{alias}', self.show_extension)
        router.add('GET', '/v2.0/networks', self.list_networks)
        router.add('GET', '/v2.0/networks/{item_id}', self.show_network)
        router.add('GET', '/v2.0/subnets', self.list_subnets)
        router.add('GET', '/v2.0/subnets/{item_id}', self.show_subnet)
        router.add('GET', '/v2.0/ports', self.list_ports)
        router.add('POST', '/v2.0/ports', self.create_port)
        router.add('GET', '/v2.0/ports/{item_id}', self.show_port)
        router.add('PUT', '/v2.0/ports/{item_id}', self.update_port)
        router.add('DELETE', '/v2.0/ports/{item_id}', self.delete_port)
        router.add('GET', '/v2.0/security-groups', self.list_security_groups)
        router.add('GET', '/v2.0/security-groups/{item_id}',
                   self.show_security_group)
        router.add('GET', '/v2.0/security-group-rules', self.list_rules)
        router.add('GET', '/v2.0/floatingips', self.list_floatingips)
        router.add('GET', '/v2.0/quotas/{project_id}', self.show_quota)

    def versions(self):
        return http.Reply(200, {'versions': [{
            'id': 'v2.0', 'status': 'CURRENT',
            'links': [{'rel': 'self', 'href': self.base + '/v2.0/'}]}]})

    def dispatch(self, req, ctx, path):
        if path.endswith('.json'):
            path = path[:-len('.json')]
        handler, kwargs = self.router.match(req.method, path)
        if handler is None:
            if kwargs:
                raise NeutronError(405, 'HTTPMethodNotAllowed',
                                   'Method not allowed.')
            raise NeutronError(404, 'HTTPNotFound',
                               'The resource could not be found.')
        if ctx.project_id is None:
            raise NeutronError(403, 'HTTPForbidden',
                               'A project-scoped token is required.')
        with self.store.lock:
            return handler(req, ctx, **kwargs)

    # Rendering and paging

    def _answer(self, req, collection, items):
        items = sorted(items, key=lambda item: item.get('created_at') or '')
        if req.GET.get('sort_dir') == 'desc':
            items.reverse()
        marker = req.GET.get('marker')
        if marker:
            ids = [item['id'] for item in items]
            if marker in ids:
                items = items[ids.index(marker) + 1:]
        links = []
        limit = req.GET.get('limit')
        if limit:
            try:
                limit = int(limit)
            except ValueError:
                raise _bad_request("Bad limit request: Limit must be an "
                                   "integer 0 or greater and not '%s'." %
                                   limit)
            if 0 < limit < len(items):
                items = items[:limit]
                links.append({'rel': 'next', 'href': '%s/v2.0/%s?limit=%d'
                              '&marker=%s' % (self.base, collection, limit,
                                              items[-1]['id'])})
        body = {collection: [self._fields(req, item) for item in items]}
        if links:
            body[collection + '_links'] = links
        return http.Reply(200, body)

    @staticmethod
    def _fields(req, item):
        fields = req.GET.getall('fields')
        if not fields:
            return item
        return {key: item[key] for key in fields if key in item}

    def _show(self, req, name, item):
        return http.Reply(200, {name: self._fields(req, item)})

    # Handlers

    def resources(self, req, ctx):
        return http.Reply(200, {'resources': [
            {'name': name, 'collection': collection,
             'links': [{'rel': 'self',
                        'href': '%s/v2.0/%s' % (self.base, collection)}]}
            for name, collection in (('network', 'networks'),
                                     ('subnet', 'subnets'),
                                     ('port', 'ports'))]})

    @staticmethod
    def _extension(alias, name, description):
        return {'alias': alias, 'name': name, 'description': description,
                'updated': '2013-01-01T00:00:00-00:00', 'links': []}

    def list_extensions(self, req, ctx):
        return http.Reply(200, {'extensions': [
            self._extension(*ext) for ext in EXTENSIONS]})

    def show_extension(self, req, ctx, alias):
        for ext in EXTENSIONS:
            if ext[0] == alias:
                return http.Reply(200, {'extension': self._extension(*ext)})
        raise NeutronError(404, 'HTTPNotFound',
                           'Extension with alias %s does not exist' % alias)

    def _visible_networks(self, ctx):
        return [n for n in self.store.networks.values()
                if n['shared'] or ctx.is_admin or
                n['project_id'] == ctx.project_id]

    def list_networks(self, req, ctx):
        return self._answer(req, 'networks',
                            _filter(self._visible_networks(ctx), req))

    def show_network(self, req, ctx, item_id):
        return self._show(req, 'network',
                          visible_network(self.store, ctx, item_id))

    def _visible_subnets(self, ctx):
        networks = set(n['id'] for n in self._visible_networks(ctx))
        return [s for s in self.store.subnets.values()
                if s['network_id'] in networks]

    def list_subnets(self, req, ctx):
        return self._answer(req, 'subnets',
                            _filter(self._visible_subnets(ctx), req))

    def show_subnet(self, req, ctx, item_id):
        for subnet in self._visible_subnets(ctx):
            if subnet['id'] == item_id:
                return self._show(req, 'subnet', subnet)
        raise NeutronError(404, 'SubnetNotFound',
                           'Subnet %s could not be found.' % item_id)

    def _port(self, ctx, port_id):
        port = self.store.ports.get(port_id)
        if port is None or not (ctx.is_admin or
                                port['project_id'] == ctx.project_id):
            raise NeutronError(404, 'PortNotFound',
                               'Port %s could not be found.' % port_id)
        return port

    def list_ports(self, req, ctx):
        device_ids = req.GET.getall('device_id')
        if device_ids:
            ports = [p for device_id in device_ids
                     for p in self.store.ports_of(device_id)]
        else:
            ports = self.store.ports.values()
        ports = [p for p in ports
                 if ctx.is_admin or p['project_id'] == ctx.project_id]
        return self._answer(req, 'ports',
                            _filter(ports, req, skip=('device_id',)))

    def show_port(self, req, ctx, item_id):
        return self._show(req, 'port', self._port(ctx, item_id))

    def create_port(self, req, ctx):
        attrs = http.json_body(req, _bad_request).get('port')
        if not isinstance(attrs, dict) or not attrs.get('network_id'):
            raise _bad_request("Failed to parse request. Required attribute "
                               "'network_id' not specified")
        project_id = ctx.project_id
        for key in ('project_id', 'tenant_id'):
            if attrs.get(key) and attrs[key] != project_id:
                if not ctx.is_admin:
                    raise NeutronError(403, 'HTTPForbidden',
                                       "(rule:create_port and "
                                       "rule:create_port:%s) is disallowed "
                                       "by policy" % key)
                project_id = attrs[key]
        network = visible_network(self.store, ctx, attrs['network_id'])
        self._check_security_groups(ctx, project_id,
                                    attrs.get('security_groups'))
        port = create_port(self.store, project_id, network, attrs)
        if port['device_id']:
            _server_changed(self.store, port['device_id'])
        return http.Reply(201, {'port': port})

    def _check_security_groups(self, ctx, project_id, groups):
        for group_id in groups or ():
            group = self.store.security_groups.get(group_id)
            if group is None or not (ctx.is_admin or
                                     group['project_id'] == project_id):
                raise NeutronError(404, 'SecurityGroupNotFound',
                                   'Security group %s does not exist' %
                                   group_id)

    def update_port(self, req, ctx, item_id):
        port = self._port(ctx, item_id)
        changes = http.json_body(req, _bad_request).get('port')
        if not isinstance(changes, dict):
            raise _bad_request('Resource body required')
        self._check_security_groups(ctx, port['project_id'],
                                    changes.get('security_groups'))
        update_port(self.store, port, changes)
        return http.Reply(200, {'port': port})

    def delete_port(self, req, ctx, item_id):
        delete_port(self.store, self._port(ctx, item_id))
        return http.Reply(204)

    def _visible_groups(self, ctx):
        default_security_group(self.store, ctx.project_id)
        return [g for g in self.store.security_groups.values()
                if ctx.is_admin or g['project_id'] == ctx.project_id]

    def list_security_groups(self, req, ctx):
        return self._answer(req, 'security_groups',
                            _filter(self._visible_groups(ctx), req))

    def show_security_group(self, req, ctx, item_id):
        for group in self._visible_groups(ctx):
            if group['id'] == item_id:
                return self._show(req, 'security_group', group)
        raise NeutronError(404, 'SecurityGroupNotFound',
                           'Security group %s does not exist' % item_id)

    def list_rules(self, req, ctx):
        rules = [rule for group in self._visible_groups(ctx)
                 for rule in group['security_group_rules']]
        return self._answer(req, 'security_group_rules', _filter(rules, req))

    def list_floatingips(self, req, ctx):
        return http.Reply(200, {'floatingips': []})

    def show_quota(self, req, ctx, project_id):
        if project_id != ctx.project_id and not ctx.is_admin:
            raise NeutronError(403, 'HTTPForbidden', 'Not allowed')
        return http.Reply(200, {'quota': {
            'network': 100, 'subnet': 100, 'port': -1, 'router': 10,
            'floatingip': 50, 'security_group': 10,
            'security_group_rule': 100, 'rbac_policy': 10,
            'subnetpool': -1}})
