"""Nova's server resources: create (with its ports), show, update, delete,
metadata, interfaces and security groups."""

import base64
import secrets

from tests.fakecloud import compute_base as base
from tests.fakecloud import http
from tests.fakecloud import network
from tests.fakecloud import state


class Servers(object):
    """Mixed into ComputeAPI: one server and what hangs off it."""

    def show_server(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        return http.Reply(200, '{"server": %s}' % self.views.server_show_json(
            server, ctx.is_admin, req.version))

    def update_server(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        body = http.json_body(req, base.bad_request).get('server')
        if not isinstance(body, dict):
            raise base.bad_request('Invalid input for field/attribute server.')
        if 'name' in body:
            server.name = str(body['name'])
        if 'description' in body:
            server.description = body['description']
        server.touch()
        return http.Reply(200, '{"server": %s}' % self.views.server_show_json(
            server, ctx.is_admin, req.version))

    def delete_server(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        # Nova deletes in any task state; a delete already under way is
        # left to finish, unless it is stuck and never will.
        if server.task_state != 'deleting' or server.stuck:
            self.store.record(server, 'action:delete')
            server.act('delete', ctx.to_notification())
            self.lifecycle.delete(server, ctx.to_notification())
        return http.Reply(204)

    def _image_id(self, ref):
        image_id = str(ref or '').rsplit('/', 1)[-1]
        if image_id not in self.store.images:
            raise base.bad_request('Image %s could not be found.' % image_id)
        if self.store.images[image_id]['status'] != 'active':
            raise base.bad_request('Image %s is not active.' % image_id)
        return image_id

    def _boot_image(self, body):
        if body.get('imageRef'):
            return self._image_id(body['imageRef'])
        for mapping in body.get('block_device_mapping_v2') or ():
            if (mapping.get('source_type') == 'image' and
                    mapping.get('boot_index') in (0, '0')):
                return self._image_id(mapping.get('uuid'))
        raise base.bad_request('Block Device Mapping is Invalid: Boot '
                               'sequence for the instance and image/block '
                               'device mapping '
                               'combination is not valid.')

    def _requested_networks(self, ctx, networks):
        """[(network, port or None, fixed ip or None)] for a boot."""
        if networks in (None, 'auto'):
            return [(self.store.networks[state.fixed_id('network',
                                                        'private')],
                     None, None)]
        if networks == 'none':
            return []
        if not isinstance(networks, list):
            raise base.bad_request(
                'Invalid input for field/attribute networks.')
        requested = []
        for item in networks:
            port = fixed_ip = None
            if item.get('port'):
                port = self.store.ports.get(item['port'])
                if port is None or not (ctx.is_admin or
                                        port['project_id'] == ctx.project_id):
                    raise base.bad_request('Port id %s could not be found.' %
                                           item['port'])
                if port['device_id']:
                    raise base.NovaError(409, 'Port %s is still in use.' %
                                         port['id'])
                network_id = port['network_id']
            else:
                network_id = item.get('uuid')
                fixed_ip = item.get('fixed_ip')
            try:
                net = network.visible_network(self.store, ctx, network_id)
            except http.ApiError:
                raise base.bad_request('Network %s could not be found.' %
                                       network_id)
            requested.append((net, port, fixed_ip))
        return requested

    def create_server(self, req, ctx):
        body = http.json_body(req, base.bad_request).get('server')
        if not isinstance(body, dict) or not body.get('name'):
            raise base.bad_request("Invalid input for field/attribute server. "
                                   "Value: %s. 'name' is a required property" %
                                   body)
        flavor_ref = str(body.get('flavorRef') or '').rsplit('/', 1)[-1]
        flavor = self.store.flavors.get(flavor_ref)
        if flavor is None:
            raise base.bad_request(
                'Flavor %s could not be found.' % flavor_ref)
        image_id = self._boot_image(body)
        if body.get('key_name'):
            raise base.bad_request('Invalid key_name provided.')
        networks = body.get('networks')
        if networks is None and req.version >= (2, 37):
            raise base.bad_request("Invalid input for field/attribute server. "
                                   "'networks' is a required property")
        requested = self._requested_networks(ctx, networks)
        groups = [g.get('name') for g in body.get('security_groups') or ()
                  if isinstance(g, dict)] or ['default']
        group_ids = self._security_group_ids(ctx, groups)
        try:
            min_count = int(body.get('min_count', 1))
            max_count = int(body.get('max_count', min_count))
        except (TypeError, ValueError):
            raise base.bad_request('Invalid input for field/attribute '
                                   'min_count.')
        if not 1 <= min_count <= max_count:
            raise base.bad_request('min_count must be <= max_count')
        if max_count > 1 and any(port for _, port, _ in requested):
            raise base.bad_request('Multiple instances cannot be booted '
                                   'with a '
                                   'port id.')
        user_data = body.get('user_data')
        if user_data is not None:
            try:
                base64.b64decode(user_data, validate=True)
            except ValueError:
                raise base.bad_request('User data needs to be valid base 64.')
        metadata = body.get('metadata') or {}
        if not isinstance(metadata, dict):
            raise base.bad_request(
                'Invalid input for field/attribute metadata.')
        reservation_id = 'r-%s' % secrets.token_hex(4)
        context = ctx.to_notification()
        created = []
        for index in range(max_count):
            name = body['name'] if max_count == 1 else '%s-%d' % (
                body['name'], index + 1)
            server = self.store.new_server(ctx.project_id, ctx.user_id, name,
                                           flavor, image_id)
            server.metadata = {str(k): str(v) for k, v in metadata.items()}
            server.security_groups = groups
            server.user_data = user_data
            server.reservation_id = reservation_id
            server.launch_index = index
            server.description = body.get('description')
            server.tags = list(body.get('tags') or ())
            server.availability_zone = body.get('availability_zone') or 'nova'
            server.config_drive = 'True' if body.get('config_drive') else ''
            self._plug(server, ctx, requested, group_ids)
            server.touch()
            self.store.record(server, 'created')
            server.act('create', context)
            self.lifecycle.boot(server, context)
            created.append(server)
        if body.get('return_reservation_id'):
            return http.Reply(202, {'reservation_id': reservation_id})
        server = created[0]
        answer = {'id': server.id, 'links': self.views.links('servers',
                                                             server.id),
                  'OS-DCF:diskConfig': 'MANUAL',
                  'security_groups': [{'name': g} for g in groups],
                  'adminPass': secrets.token_urlsafe(9)}
        return http.Reply(202, {'server': answer}, headers=[
            ('Location', answer['links'][0]['href'])])

    def _security_group_ids(self, ctx, names):
        network.default_security_group(self.store, ctx.project_id)
        ids = []
        for name in names:
            matches = [g['id'] for g in self.store.security_groups.values()
                       if g['project_id'] == ctx.project_id and
                       name in (g['name'], g['id'])]
            if not matches:
                raise base.bad_request('Security group %s not found for '
                                       'project '
                                       '%s.' % (name, ctx.project_id))
            ids.append(matches[0])
        return ids

    def _plug(self, server, ctx, requested, group_ids):
        """Ports for a new server: given ones bound, others created."""
        try:
            self._plug_ports(server, ctx, requested, group_ids)
        except http.ApiError:
            self._unplug_failed(server)
            raise

    def _unplug_failed(self, server):
        for port in self.store.ports_of(server.id):
            if port['id'] in server.owned_ports:
                network.delete_port(self.store, port)
            else:
                network.unbind_port(self.store, port)
        self.store.forget_server(server)
        self.store.deleted_servers.pop(server.id, None)
        self.store.by_change.pop(server.id, None)

    # Metadata

    def get_metadata(self, req, ctx, server_id):
        return http.Reply(200, {'metadata': dict(
            self._server(ctx, server_id).metadata)})

    @staticmethod
    def _meta_body(req, key):
        body = http.json_body(req, base.bad_request).get(key)
        if not isinstance(body, dict):
            raise base.bad_request('Malformed request body')
        return {str(k): str(v) for k, v in body.items()}

    def set_metadata(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        server.metadata = self._meta_body(req, 'metadata')
        server.touch()
        return http.Reply(200, {'metadata': dict(server.metadata)})

    def update_metadata(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        server.metadata.update(self._meta_body(req, 'metadata'))
        server.touch()
        return http.Reply(200, {'metadata': dict(server.metadata)})

    def get_meta_item(self, req, ctx, server_id, key):
        server = self._server(ctx, server_id)
        if key not in server.metadata:
            raise base.NovaError(404, 'Metadata item was not found')
        return http.Reply(200, {'meta': {key: server.metadata[key]}})

    def set_meta_item(self, req, ctx, server_id, key):
        server = self._server(ctx, server_id)
        meta = self._meta_body(req, 'meta')
        if list(meta) != [key]:
            raise base.bad_request('Request body and URI mismatch')
        server.metadata.update(meta)
        server.touch()
        return http.Reply(200, {'meta': meta})

    def delete_meta_item(self, req, ctx, server_id, key):
        server = self._server(ctx, server_id)
        if key not in server.metadata:
            raise base.NovaError(404, 'Metadata item was not found')
        del server.metadata[key]
        server.touch()
        return http.Reply(204)

    # Interfaces and security groups

    @staticmethod
    def _interface(port):
        return {'port_id': port['id'], 'net_id': port['network_id'],
                'mac_addr': port['mac_address'],
                'port_state': port['status'],
                'fixed_ips': [dict(f) for f in port['fixed_ips']],
                'tag': None}

    def list_interfaces(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        return http.Reply(200, {'interfaceAttachments': [
            self._interface(p) for p in self.store.ports_of(server.id)]})

    def show_interface(self, req, ctx, server_id, port_id):
        server = self._server(ctx, server_id)
        for port in self.store.ports_of(server.id):
            if port['id'] == port_id:
                return http.Reply(200, {
                    'interfaceAttachment': self._interface(port)})
        raise base.NovaError(404, 'Instance %s is not attached.' % server_id)

    def attach_interface(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        body = http.json_body(req, base.bad_request).get('interfaceAttachment')
        if not isinstance(body, dict):
            raise base.bad_request('Invalid input for field/attribute '
                                   'interfaceAttachment.')
        if server.vm_state not in ('active', 'paused', 'stopped',
                                   'suspended') or server.task_state:
            self._conflict(server, 'attach_interface')
        fixed = [f.get('ip_address') for f in body.get('fixed_ips') or ()]
        item = ({'port': body['port_id']} if body.get('port_id') else
                {'uuid': body.get('net_id') or state.fixed_id(
                    'network', 'private'),
                 'fixed_ip': fixed[0] if fixed else None})
        context = ctx.to_notification()
        server.act('attach_interface', context)
        self.lifecycle.emit(server, context,
                            'instance.interface_attach.start')
        groups = self._security_group_ids(ctx, server.security_groups)
        port, = self._plug_ports(server, ctx,
                                 self._requested_networks(ctx, [item]), groups)
        port['status'] = 'ACTIVE' if server.vm_state == 'active' else 'DOWN'
        server.touch()
        self.lifecycle.emit(server, context, 'instance.interface_attach.end')
        return http.Reply(200, {'interfaceAttachment': self._interface(port)})

    def _plug_ports(self, server, ctx, requested, group_ids):
        plugged = []
        for net, port, fixed_ip in requested:
            if port is None:
                attrs = {'security_groups': group_ids}
                if fixed_ip:
                    attrs['fixed_ips'] = [{'ip_address': fixed_ip}]
                try:
                    port = network.create_port(self.store, ctx.project_id,
                                               net, attrs)
                except http.ApiError as exc:
                    message = exc.reply.body['NeutronError']['message']
                    status = 409 if 'allocated' in message else 400
                    raise base.NovaError(status, message)
                server.owned_ports.add(port['id'])
            network.bind_port(self.store, port, server)
            plugged.append(port)
        return plugged

    def detach_interface(self, req, ctx, server_id, port_id):
        server = self._server(ctx, server_id)
        for port in self.store.ports_of(server.id):
            if port['id'] == port_id:
                break
        else:
            raise base.NovaError(404, 'Port %s is not attached' % port_id)
        context = ctx.to_notification()
        server.act('detach_interface', context)
        self.lifecycle.emit(server, context,
                            'instance.interface_detach.start')
        if port_id in server.owned_ports:
            server.owned_ports.discard(port_id)
            network.delete_port(self.store, port)
        else:
            network.unbind_port(self.store, port)
        server.touch()
        self.lifecycle.emit(server, context, 'instance.interface_detach.end')
        return http.Reply(202)

    def server_security_groups(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        ids = set(g for port in self.store.ports_of(server.id)
                  for g in port['security_groups'])
        return http.Reply(200, {'security_groups': [
            {'id': g['id'], 'name': g['name'],
             'description': g['description'], 'tenant_id': g['project_id'],
             'rules': []}
            for g in self.store.security_groups.values() if g['id'] in ids]})
