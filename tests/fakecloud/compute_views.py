"""How Nova's API shows servers and flavors, per microversion and role.

A server's detailed view is rendered to JSON once per (role, microversion
tier) and kept until the server changes, so that listing 10,000 servers is
a join of cached strings rather than 10,000 renderings.
"""

import bisect
import json

from tests.fakecloud import state

# Microversions at which the server view changes shape.
_TIERS = ((2, 3), (2, 9), (2, 16), (2, 19), (2, 26), (2, 47), (2, 63),
          (2, 73), (2, 96))


def tier(version):
    return bisect.bisect_right(_TIERS, version)


class Views(object):

    def __init__(self, store, public_url):
        self.store = store
        self.base = public_url + '/compute'

    def links(self, kind, item_id):
        return [{'rel': 'self',
                 'href': '%s/v2.1/%s/%s' % (self.base, kind, item_id)},
                {'rel': 'bookmark',
                 'href': '%s/%s/%s' % (self.base, kind, item_id)}]

    # Flavors

    def flavor(self, flavor, version, detail=True):
        view = {'id': flavor['id'], 'name': flavor['name'],
                'links': self.links('flavors', flavor['id'])}
        if version >= (2, 55):
            view['description'] = flavor['description']
        if not detail:
            return view
        view.update({
            'ram': flavor['ram'], 'disk': flavor['disk'],
            'vcpus': flavor['vcpus'],
            'OS-FLV-EXT-DATA:ephemeral': flavor['ephemeral'],
            'OS-FLV-DISABLED:disabled': flavor['disabled'],
            'swap': flavor['swap'] if version >= (2, 75) else
            (flavor['swap'] or ''),
            'rxtx_factor': flavor['rxtx_factor'],
            'os-flavor-access:is_public': flavor['is_public']})
        if version >= (2, 61):
            view['extra_specs'] = dict(flavor['extra_specs'])
        return view

    # Servers

    def addresses(self, server):
        found = {}
        if server.deleted or server.task_state == 'scheduling':
            # Nova fills addresses in once the build allocated the network.
            return found
        for port in self.store.ports_of(server.id):
            network = self.store.networks.get(port['network_id'])
            label = network['name'] if network else port['network_id']
            entries = found.setdefault(label, [])
            for fixed in port['fixed_ips']:
                entries.append({
                    'version': 6 if ':' in fixed['ip_address'] else 4,
                    'addr': fixed['ip_address'],
                    'OS-EXT-IPS:type': 'fixed',
                    'OS-EXT-IPS-MAC:mac_addr': port['mac_address']})
        return found

    def volumes_attached(self, server, level):
        """The server's volumes; whether each goes with it, from 2.3."""
        volumes = self.store.volumes
        if volumes is None or server.deleted:
            return []
        return [dict({'id': v['id']}, **({'delete_on_termination': False}
                                         if level >= 1 else {}))
                for v in volumes.of_server(server.id)]

    def server_json(self, server, admin, version):
        """The detailed view of a server as a JSON string (cached)."""
        key = (admin, tier(version))
        text = server.views.get(key)
        if text is None:
            text = json.dumps(self._server(server, admin, key[1]))
            server.views[key] = text
        return text

    def server_show_json(self, server, admin, version):
        """GET /servers/{id}: the detailed view, with server_groups (2.71).

        Nova leaves server_groups out of lists.
        """
        text = self.server_json(server, admin, version)
        if version >= (2, 71):
            text = text[:-1] + ', "server_groups": []}'
        return text

    def server(self, server, admin, version):
        return json.loads(self.server_json(server, admin, version))

    def _server(self, server, admin, level):
        flavor = server.flavor
        if level >= 6:
            flavor_view = {
                'vcpus': flavor['vcpus'], 'ram': flavor['ram'],
                'disk': flavor['disk'],
                'ephemeral': flavor['ephemeral'], 'swap': flavor['swap'],
                'original_name': flavor['name'],
                'extra_specs': dict(flavor['extra_specs'])}
        else:
            flavor_view = {'id': flavor['id'], 'links': [
                self.links('flavors', flavor['id'])[1]]}
        view = {
            'id': server.id,
            'name': server.name,
            'status': server.status,
            'tenant_id': server.project_id,
            'user_id': server.user_id,
            'metadata': dict(server.metadata),
            'hostId': server.host_id if not server.deleted else '',
            'image': {'id': server.image_id, 'links': [
                self.links('images', server.image_id)[1]]}
            if server.image_id else '',
            'flavor': flavor_view,
            'created': state.isotime(server.created_at),
            'updated': state.isotime(server.updated_at),
            'addresses': self.addresses(server),
            'accessIPv4': '',
            'accessIPv6': '',
            'links': self.links('servers', server.id),
            'OS-DCF:diskConfig': 'MANUAL',
            'OS-EXT-AZ:availability_zone': server.availability_zone,
            'config_drive': server.config_drive,
            'key_name': server.key_name,
            'OS-SRV-USG:launched_at': state.isotime_us(server.launched_at),
            'OS-SRV-USG:terminated_at': state.isotime_us(
                server.terminated_at),
            'OS-EXT-STS:task_state': server.task_state,
            'OS-EXT-STS:vm_state': server.vm_state,
            'OS-EXT-STS:power_state': server.power_state,
            'os-extended-volumes:volumes_attached': self.volumes_attached(
                server, level),
        }
        if not server.deleted:
            view['security_groups'] = [{'name': name}
                                       for name in server.security_groups]
        if server.status in ('ACTIVE', 'BUILD', 'REBUILD', 'RESIZE',
                             'VERIFY_RESIZE', 'MIGRATING'):
            view['progress'] = 100 if server.status == 'ACTIVE' else 0
        if server.fault is not None and server.status in ('ERROR',
                                                          'DELETED'):
            view['fault'] = dict(server.fault)
        if admin:
            view.update({
                'OS-EXT-SRV-ATTR:host': server.host,
                'OS-EXT-SRV-ATTR:hypervisor_hostname': server.host,
                'OS-EXT-SRV-ATTR:instance_name': server.instance_name})
        if admin and level >= 1:
            view.update({
                'OS-EXT-SRV-ATTR:reservation_id': server.reservation_id,
                'OS-EXT-SRV-ATTR:launch_index': server.launch_index,
                'OS-EXT-SRV-ATTR:hostname': state.hostname(server.name),
                'OS-EXT-SRV-ATTR:kernel_id': '',
                'OS-EXT-SRV-ATTR:ramdisk_id': '',
                'OS-EXT-SRV-ATTR:root_device_name': '/dev/vda',
                'OS-EXT-SRV-ATTR:user_data': server.user_data})
        if level >= 2:
            view['locked'] = False
        if admin and level >= 3:
            view['host_status'] = 'UP' if not server.deleted else ''
        if level >= 4:
            view['description'] = server.description
        if level >= 5:
            view['tags'] = list(server.tags)
        if level >= 7:
            view['trusted_image_certificates'] = None
        if level >= 8:
            view['locked_reason'] = None
        if level >= 9:
            view['pinned_availability_zone'] = None
        return view

    def server_summary(self, server):
        return {'id': server.id, 'name': server.name,
                'links': self.links('servers', server.id)}
