"""Nova v2.1: versions, flavors, limits, servers, their metadata,
interfaces, volume attachments and actions, with microversions 2.1 to
2.96.

What python-novaclient, openstacksdk (the openstack CLI) and Heat's
OS::Nova::Server send, answered in Nova's shapes, status codes and errors.
Server lists, single servers and actions live in compute_lists,
compute_servers and compute_actions; this module routes and holds the rest.
"""

import uuid

from tests.fakecloud import compute_actions
from tests.fakecloud import compute_base as base
from tests.fakecloud import compute_lists
from tests.fakecloud import compute_servers
from tests.fakecloud import compute_views
from tests.fakecloud import http
from tests.fakecloud import volume

_VERSION_UPDATED = '2013-07-23T11:33:21Z'


class ComputeAPI(compute_lists.ServerLists, compute_servers.Servers,
                 compute_actions.Actions, volume.VolumeAttachments):
    """Handlers under /compute."""

    def __init__(self, store, lifecycle, faults, conf):
        self.store = store
        self.lifecycle = lifecycle
        self.faults = faults
        self.views = compute_views.Views(store, conf.public_url)
        self.max_limit = conf.max_limit
        self.base = conf.public_url + '/compute'
        router = self.router = http.Router()
        router.add('GET', '', self.version)
        router.add('GET', '/flavors', self.list_flavors)
        router.add('GET', '/flavors/detail', self.list_flavors_detail)
        router.add('POST', '/flavors', self.create_flavor)
        router.add('GET', '/flavors/{flavor_id}', self.show_flavor)
        router.add('DELETE', '/flavors/{flavor_id}', self.delete_flavor)
        router.add('GET', '/flavors/{flavor_id}/os-extra_specs',
                   self.flavor_extra_specs)
        router.add('GET', '/limits', self.limits)
        router.add('GET', '/os-keypairs/{name}', self.show_keypair)
        router.add('GET', '/servers', self.list_servers)
        router.add('GET', '/servers/detail', self.list_servers_detail)
        router.add('POST', '/servers', self.create_server)
        router.add('GET', '/servers/{server_id}', self.show_server)
        router.add('PUT', '/servers/{server_id}', self.update_server)
        router.add('DELETE', '/servers/{server_id}', self.delete_server)
        router.add('POST', '/servers/{server_id}/action', self.action)
        router.add('GET', '/servers/{server_id}/os-instance-actions',
                   self.list_instance_actions)
        router.add('GET',
                   '/servers/{server_id}/os-instance-actions/{request_id}',
                   self.show_instance_action)
        router.add('GET', '/servers/{server_id}/metadata', self.get_metadata)
        router.add('PUT', '/servers/{server_id}/metadata', self.set_metadata)
        router.add('POST', '/servers/{server_id}/metadata',
                   self.update_metadata)
        router.add('GET', '/servers/{server_id}/metadata/{key}',
                   self.get_meta_item)
        router.add('PUT', '/servers/{server_id}/metadata/{key}',
                   self.set_meta_item)
        router.add('DELETE', '/servers/{server_id}/metadata/{key}',
                   self.delete_meta_item)
        router.add('GET', '/servers/{server_id}/os-interface',
                   self.list_interfaces)
        router.add('POST', '/servers/{server_id}/os-interface',
                   self.attach_interface)
        router.add('GET', '/servers/{server_id}/os-interface/{port_id}',
                   self.show_interface)
        router.add('DELETE', '/servers/{server_id}/os-interface/{port_id}',
                   self.detach_interface)
        router.add('GET', '/servers/{server_id}/os-security-groups',
                   self.server_security_groups)
        router.add('GET', '/servers/{server_id}/os-volume_attachments',
                   self.list_volume_attachments)
        router.add('POST', '/servers/{server_id}/os-volume_attachments',
                   self.attach_volume)
        router.add('GET',
                   '/servers/{server_id}/os-volume_attachments/{volume_id}',
                   self.show_volume_attachment)
        router.add('DELETE',
                   '/servers/{server_id}/os-volume_attachments/{volume_id}',
                   self.detach_volume)

    # Versions

    def _version_doc(self):
        return {'id': 'v2.1', 'status': 'CURRENT',
                'version': base.version_text(base.MAX_VERSION),
                'min_version': base.version_text(base.MIN_VERSION),
                'updated': _VERSION_UPDATED,
                'links': [{'rel': 'self', 'href': self.base + '/v2.1/'},
                          {'rel': 'describedby', 'type': 'text/html',
                           'href': 'http://docs.openstack.org/'}],
                'media-types': [{
                    'base': 'application/json',
                    'type': 'application/vnd.openstack.compute+json;'
                            'version=2.1'}]}

    def versions(self):
        legacy = {'id': 'v2.0', 'status': 'SUPPORTED', 'version': '',
                  'min_version': '', 'updated': '2011-01-21T11:33:21Z',
                  'links': [{'rel': 'self', 'href': self.base + '/v2/'}]}
        return http.Reply(200, {'versions': [legacy, self._version_doc()]})

    def version(self, req=None, ctx=None):
        return http.Reply(200, {'version': self._version_doc()})

    # Dispatch

    def dispatch(self, req, ctx, path):
        """Route path (below /compute/v2.1) with the microversion headers."""
        try:
            version = base.parse_version(req)
            handler, kwargs = self.router.match(req.method, path)
            if handler is None:
                if kwargs:
                    raise base.NovaError(405, 'The method specified is not '
                                         'allowed for this resource.')
                raise base.NovaError(404, 'The resource could not be found.')
            if ctx.project_id is None:
                raise base.NovaError(403, 'Project-scoped token required.')
            self.faults.before(kwargs.get('server_id'),
                               action=handler == self.action)
            req.version = version
            with self.store.lock:
                reply = handler(req, ctx, **kwargs)
        except http.ApiError as exc:
            reply = exc.reply
            version = getattr(req, 'version', base.MIN_VERSION)
        text = base.version_text(version)
        reply.headers += [
            ('OpenStack-API-Version', 'compute %s' % text),
            ('X-OpenStack-Nova-API-Version', text),
            ('Vary', 'OpenStack-API-Version, X-OpenStack-Nova-API-Version'),
            ('x-compute-request-id', ctx.request_id)]
        return reply

    # Lookups

    def _server(self, ctx, server_id):
        server = self.store.servers.get(server_id)
        if server is None or not (ctx.is_admin or
                                  server.project_id == ctx.project_id):
            raise base.NovaError(404, 'Instance %s could not be found.' %
                                 server_id)
        return server

    def _flavor(self, flavor_id):
        flavor = self.store.flavors.get(str(flavor_id))
        if flavor is None:
            raise base.NovaError(
                404, 'Flavor %s could not be found.' % flavor_id)
        return flavor

    @staticmethod
    def _admin_only(ctx, rule):
        if not ctx.is_admin:
            raise base.NovaError(403, 'Policy doesn\'t allow %s to be '
                                      'performed.'
                                 % rule)

    # Flavors

    def _flavors(self, req, ctx, detail):
        flavors = sorted(self.store.flavors.values(),
                         key=lambda f: (f['ram'], f['id']))
        public = req.GET.get('is_public', 'true').lower()
        if public not in ('none', 'all') or not ctx.is_admin:
            want = public not in ('false', '0', 'no')
            flavors = [f for f in flavors if f['is_public'] == want or
                       public in ('none', 'all')]
        for key, field in (('minRam', 'ram'), ('minDisk', 'disk')):
            if key in req.GET:
                flavors = [f for f in flavors
                           if f[field] >= int(req.GET[key])]
        marker = req.GET.get('marker')
        if marker:
            ids = [f['id'] for f in flavors]
            if marker not in ids:
                raise base.bad_request('marker [%s] not found' % marker)
            flavors = flavors[ids.index(marker) + 1:]
        limit = self._limit(req)
        return http.Reply(200, {'flavors': [
            self.views.flavor(f, req.version, detail)
            for f in flavors[:limit]]})

    def list_flavors(self, req, ctx):
        return self._flavors(req, ctx, detail=False)

    def list_flavors_detail(self, req, ctx):
        return self._flavors(req, ctx, detail=True)

    def show_flavor(self, req, ctx, flavor_id):
        return http.Reply(200, {'flavor': self.views.flavor(
            self._flavor(flavor_id), req.version)})

    def flavor_extra_specs(self, req, ctx, flavor_id):
        return http.Reply(200, {'extra_specs': dict(
            self._flavor(flavor_id)['extra_specs'])})

    def create_flavor(self, req, ctx):
        self._admin_only(ctx, 'os_compute_api:os-flavor-manage:create')
        body = http.json_body(req, base.bad_request).get('flavor')
        if not isinstance(body, dict):
            raise base.bad_request("Invalid input for field/attribute flavor.")
        try:
            flavor = {
                'id': str(body.get('id') or uuid.uuid4()),
                'name': body['name'], 'ram': int(body['ram']),
                'vcpus': int(body['vcpus']), 'disk': int(body['disk']),
                'ephemeral': int(body.get('OS-FLV-EXT-DATA:ephemeral', 0)),
                'swap': int(body.get('swap') or 0),
                'rxtx_factor': float(body.get('rxtx_factor', 1.0)),
                'is_public': bool(body.get('os-flavor-access:is_public',
                                           True)),
                'disabled': False, 'description': body.get('description'),
                'extra_specs': {}}
        except (KeyError, TypeError, ValueError) as exc:
            raise base.bad_request('Invalid input for field/attribute flavor: '
                                   '%s' % exc)
        for existing in self.store.flavors.values():
            if existing['name'] == flavor['name']:
                raise base.NovaError(409, 'Flavor with name %s already exists.'
                                     % flavor['name'])
        if flavor['id'] in self.store.flavors:
            raise base.NovaError(409, 'Flavor with ID %s already exists.' %
                                 flavor['id'])
        self.store.flavors[flavor['id']] = flavor
        return http.Reply(200, {'flavor': self.views.flavor(flavor,
                                                            req.version)})

    def delete_flavor(self, req, ctx, flavor_id):
        self._admin_only(ctx, 'os_compute_api:os-flavor-manage:delete')
        self._flavor(flavor_id)
        del self.store.flavors[flavor_id]
        return http.Reply(202)

    # Limits and keypairs

    def limits(self, req, ctx):
        servers = self.store.servers_by_project.get(ctx.project_id, {})
        absolute = {
            'maxServerMeta': 128, 'maxTotalInstances': -1,
            'maxTotalCores': -1, 'maxTotalRAMSize': -1,
            'maxTotalKeypairs': 100, 'maxServerGroups': 10,
            'maxServerGroupMembers': 10,
            'totalInstancesUsed': len(servers),
            'totalCoresUsed': sum(s.flavor['vcpus']
                                  for s in servers.values()),
            'totalRAMUsed': sum(s.flavor['ram'] for s in servers.values()),
            'totalServerGroupsUsed': 0}
        if req.version < (2, 57):
            absolute.update({'maxPersonality': 5,
                             'maxPersonalitySize': 10240,
                             'maxImageMeta': 128})
        return http.Reply(200, {'limits': {'rate': [],
                                           'absolute': absolute}})

    def show_keypair(self, req, ctx, name):
        # No keypairs exist here; Heat's nova.keypair constraint asks.
        raise base.NovaError(404, 'Keypair %s not found for user %s' % (
            name, ctx.user_id))
