"""Cinder v3 volumes, and Nova's volume attachments that use them.

What Heat's OS::Cinder::Volume and OS::Cinder::VolumeAttachment ask
(through python-cinderclient, and python-novaclient's
os-volume_attachments): create a volume, show it until ``available``,
attach it to a server until ``in-use``, detach it until ``available``
again, delete it until it is gone. Each step takes a moment, as Cinder's
do. A server deleted lets go of its volumes, as Nova detaches them.
Volumes are blank, of any size: nothing is stored in them.
"""

import itertools
import time
import uuid

from tests.fakecloud import compute_base
from tests.fakecloud import http
from tests.fakecloud import state

MIN_VERSION, MAX_VERSION = (3, 0), (3, 70)
_UPDATED = '2023-08-31T00:00:00Z'
# Fractions of the task delay each step takes.
_STEP = 0.5
DEVICES = ['/dev/vd%s' % c for c in 'bcdefghijklmnopqrstuvwxyz']


class CinderError(http.ApiError):
    _KINDS = {400: 'badRequest', 403: 'forbidden', 404: 'itemNotFound',
              405: 'HTTPMethodNotAllowed', 406: 'HTTPNotAcceptable',
              409: 'conflictingRequest'}

    def __init__(self, status, message):
        super(CinderError, self).__init__(status, {self._KINDS[status]: {
            'code': status, 'message': message}})


def _version_text(version):
    return '%d.%d' % version


def _parse_version(req):
    """The volume microversion asked for, as Cinder reads its header."""
    text = None
    for item in (req.headers.get('OpenStack-API-Version') or '').split(','):
        service, _, value = item.strip().partition(' ')
        if service.lower() == 'volume':
            text = value.strip()
    if not text:
        return MIN_VERSION
    if text.lower() == 'latest':
        return MAX_VERSION
    try:
        major, minor = (int(part) for part in text.split('.'))
    except ValueError:
        raise CinderError(400, 'Invalid API version %s' % text)
    if not MIN_VERSION <= (major, minor) <= MAX_VERSION:
        raise CinderError(406, 'Version %s is not supported by the API. '
                               'Minimum is %s and maximum is %s.' % (
                                   text, _version_text(MIN_VERSION),
                                   _version_text(MAX_VERSION)))
    return major, minor


class Volumes(object):
    """The volumes of the store and their attachments; under its lock."""

    def __init__(self, store, scheduler, delay):
        self.store = store
        self.scheduler = scheduler
        self.delay = delay
        self.by_id = {}
        self.by_server = {}     # server id -> {volume id: volume}
        self._seq = itertools.count(1)

    def later(self, step, volume, *args):
        """step(volume, *args) a moment from now, under the store's lock.

        Unless the volume started another step meanwhile.
        """
        volume['step'] += 1

        def run(expected):
            with self.store.lock:
                if volume['step'] == expected:
                    step(volume, *args)
        self.scheduler.call_later(self.delay * _STEP, run, volume['step'])

    def _set(self, volume, status):
        volume['status'] = status
        volume['updated_at'] = time.time()

    def create(self, project_id, user_id, body):
        now = time.time()
        seq = next(self._seq)
        volume = {
            'id': str(uuid.uuid4()), 'seq': seq, 'project_id': project_id,
            'user_id': user_id, 'name': body.get('name'),
            'description': body.get('description'),
            'size': int(body.get('size') or 1), 'status': 'creating',
            'availability_zone': body.get('availability_zone') or 'nova',
            'metadata': dict(body.get('metadata') or {}),
            'volume_type': body.get('volume_type') or '__DEFAULT__',
            'snapshot_id': body.get('snapshot_id'),
            'source_volid': body.get('source_volid'),
            'image_id': body.get('imageRef'), 'readonly': False,
            'attachments': [], 'created_at': now, 'updated_at': now,
            'step': 0}
        self.by_id[volume['id']] = volume
        self.later(self._set, volume, 'available')
        return volume

    def delete(self, volume):
        self._set(volume, 'deleting')
        self.later(self._gone, volume)

    def _gone(self, volume):
        self.by_id.pop(volume['id'], None)

    def attach(self, volume, server, device):
        """Nova's attach: ``attaching``, then ``in-use`` on the server."""
        used = {a['device'] for v in self.by_server.get(server.id, {})
                .values() for a in v['attachments']}
        if device is None:
            device = [d for d in DEVICES if d not in used][0]
        self._set(volume, 'attaching')
        attachment = {'id': str(uuid.uuid4()), 'volume_id': volume['id'],
                      'server_id': server.id, 'device': device,
                      'attached_at': time.time(), 'host_name': server.host}
        volume['attachments'] = [attachment]
        self.by_server.setdefault(server.id, {})[volume['id']] = volume
        server.touch()
        self.later(self._set, volume, 'in-use')
        return attachment

    def detach(self, volume, server, at_once=False):
        """Nova's detach: ``detaching``, then ``available``."""
        if at_once:
            self._detached(volume, server)
            return
        self._set(volume, 'detaching')
        self.later(self._detached, volume, server)

    def _detached(self, volume, server):
        volume['attachments'] = []
        self._set(volume, 'available')
        attached = self.by_server.get(server.id, {})
        attached.pop(volume['id'], None)
        if not attached:
            self.by_server.pop(server.id, None)
        server.touch()

    def of_server(self, server_id):
        """The volumes attached (or attaching) to a server, in order."""
        return sorted(self.by_server.get(server_id, {}).values(),
                      key=lambda v: v['seq'])

    def server_gone(self, server):
        """A server deleted: Nova detaches its volumes."""
        for volume in self.of_server(server.id):
            self.detach(volume, server, at_once=True)


class VolumeAPI(object):
    """Handlers under /volume (Cinder v3)."""

    def __init__(self, store, volumes, conf):
        self.store = store
        self.volumes = volumes
        self.base = conf.public_url + '/volume'
        router = self.router = http.Router()
        router.add('GET', '/v3/{project_id}', self.version)
        router.add('GET', '/v3/{project_id}/volumes', self.list_volumes)
        router.add('GET', '/v3/{project_id}/volumes/detail',
                   self.list_volumes_detail)
        router.add('POST', '/v3/{project_id}/volumes', self.create_volume)
        router.add('GET', '/v3/{project_id}/volumes/{volume_id}',
                   self.show_volume)
        router.add('DELETE', '/v3/{project_id}/volumes/{volume_id}',
                   self.delete_volume)
        router.add('POST', '/v3/{project_id}/volumes/{volume_id}/action',
                   self.volume_action)

    def _version_doc(self):
        return {'id': 'v3.0', 'status': 'CURRENT',
                'version': _version_text(MAX_VERSION),
                'min_version': _version_text(MIN_VERSION),
                'updated': _UPDATED,
                'links': [{'rel': 'self', 'href': self.base + '/v3/'}],
                'media-types': [{
                    'base': 'application/json',
                    'type': 'application/vnd.openstack.volume+json;'
                            'version=3'}]}

    def versions(self):
        return http.Reply(300, {'versions': [self._version_doc()]})

    def version(self, req, ctx, project_id):
        return http.Reply(200, {'versions': [self._version_doc()]})

    def dispatch(self, req, ctx, path):
        """Route path (below /volume) with the microversion header."""
        try:
            version = _parse_version(req)
            handler, kwargs = self.router.match(req.method, path)
            if handler is None:
                raise CinderError(405 if kwargs else 404,
                                  'The resource could not be found.')
            project_id = kwargs.pop('project_id')
            if ctx.project_id is None or (project_id != ctx.project_id and
                                          not ctx.is_admin):
                raise CinderError(403, 'Policy does not allow this action.')
            with self.store.lock:
                reply = handler(req, ctx, **kwargs)
        except http.ApiError as exc:
            reply = exc.reply
            version = MIN_VERSION
        reply.headers += [
            ('OpenStack-API-Version', 'volume %s' % _version_text(version)),
            ('Vary', 'OpenStack-API-Version'),
            ('x-openstack-request-id', ctx.request_id)]
        return reply

    def _volume(self, ctx, volume_id):
        volume = self.volumes.by_id.get(volume_id)
        if volume is None or not (ctx.is_admin or
                                  volume['project_id'] == ctx.project_id):
            raise CinderError(404, 'Volume %s could not be found.' %
                              volume_id)
        return volume

    def view(self, volume, ctx, detail=True):
        links = [{'rel': 'self', 'href': '%s/v3/%s/volumes/%s' % (
            self.base, volume['project_id'], volume['id'])}]
        if not detail:
            return {'id': volume['id'], 'name': volume['name'],
                    'links': links}
        view = {
            'id': volume['id'], 'name': volume['name'],
            'description': volume['description'], 'size': volume['size'],
            'status': volume['status'],
            'availability_zone': volume['availability_zone'],
            'bootable': 'true' if volume['image_id'] else 'false',
            'encrypted': False, 'multiattach': False,
            'metadata': dict(volume['metadata']),
            'volume_type': volume['volume_type'],
            'snapshot_id': volume['snapshot_id'],
            'source_volid': volume['source_volid'],
            'user_id': volume['user_id'], 'replication_status': None,
            'consistencygroup_id': None, 'migration_status': None,
            'group_id': None, 'provider_id': None,
            'shared_targets': True, 'service_uuid': None,
            'cluster_name': None, 'consumes_quota': True,
            'created_at': state.isotime_us(volume['created_at']),
            'updated_at': state.isotime_us(volume['updated_at']),
            'attachments': [{
                'id': a['volume_id'], 'attachment_id': a['id'],
                'volume_id': a['volume_id'], 'server_id': a['server_id'],
                'host_name': a['host_name'], 'device': a['device'],
                'attached_at': state.isotime_us(a['attached_at'])}
                for a in volume['attachments']
                if volume['status'] != 'attaching'],
            'links': links}
        if volume['image_id']:
            view['volume_image_metadata'] = {'image_id': volume['image_id']}
        if ctx.is_admin:
            view['os-vol-tenant-attr:tenant_id'] = volume['project_id']
            view['os-vol-host-attr:host'] = 'fakecloud@lvm#lvm'
        return view

    def _list(self, req, ctx, detail):
        found = [v for v in self.volumes.by_id.values()
                 if v['project_id'] == ctx.project_id or (
                     ctx.is_admin and req.GET.get('all_tenants') in (
                         '1', 'true', 'True'))]
        for key in ('name', 'status'):
            if key in req.GET:
                found = [v for v in found if v[key] == req.GET[key]]
        found.sort(key=lambda v: v['seq'], reverse=True)
        return http.Reply(200, {'volumes': [self.view(v, ctx, detail)
                                            for v in found]})

    def list_volumes(self, req, ctx):
        return self._list(req, ctx, detail=False)

    def list_volumes_detail(self, req, ctx):
        return self._list(req, ctx, detail=True)

    def create_volume(self, req, ctx):
        body = http.json_body(
            req, lambda m: CinderError(400, m)).get('volume')
        if not isinstance(body, dict):
            raise CinderError(400, 'Missing required element \'volume\' in '
                                   'request body.')
        try:
            if int(body.get('size') or 0) < 1 and not (
                    body.get('snapshot_id') or body.get('source_volid')):
                raise ValueError
        except (TypeError, ValueError):
            raise CinderError(400, 'Invalid input received: size must be '
                                   'an integer greater than 0.')
        if body.get('imageRef') and body['imageRef'] not in \
                self.store.images:
            raise CinderError(400, 'Invalid image identifier or unable to '
                                   'access requested image.')
        volume = self.volumes.create(ctx.project_id, ctx.user_id, body)
        return http.Reply(202, {'volume': self.view(volume, ctx)})

    def show_volume(self, req, ctx, volume_id):
        return http.Reply(200, {'volume': self.view(
            self._volume(ctx, volume_id), ctx)})

    def delete_volume(self, req, ctx, volume_id):
        volume = self._volume(ctx, volume_id)
        if volume['status'] not in ('available', 'error', 'error_restoring',
                                    'error_extending', 'deleting'):
            raise CinderError(400, 'Invalid volume: Volume status must be '
                                   'available or error or error_restoring '
                                   'or error_extending or error_managing '
                                   'and must not be migrating, attached, '
                                   'belong to a group, have snapshots or be '
                                   'disassociated from snapshots after '
                                   'volume transfer.')
        if volume['status'] != 'deleting':
            self.volumes.delete(volume)
        return http.Reply(202)

    def volume_action(self, req, ctx, volume_id):
        volume = self._volume(ctx, volume_id)
        body = http.json_body(req, lambda m: CinderError(400, m))
        if 'os-update_readonly_flag' in body:
            volume['readonly'] = bool(
                body['os-update_readonly_flag'].get('readonly'))
            return http.Reply(202)
        raise CinderError(400, 'There is no such action: %s' % (
            ', '.join(sorted(body)) or '(none)'))


class VolumeAttachments(object):
    """Nova's os-volume_attachments, a mixin of the compute API.

    Needs ``_server`` and ``store`` (its ``volumes``).
    """

    @property
    def volumes(self):
        return self.store.volumes

    def _attachment(self, req, volume, attachment):
        view = {'id': volume['id'], 'serverId': attachment['server_id'],
                'volumeId': volume['id'], 'device': attachment['device']}
        if req.version >= (2, 70):
            view['tag'] = None
        if req.version >= (2, 79):
            view['delete_on_termination'] = False
        if req.version >= (2, 89) and req.method == 'GET':
            del view['id']
            view.update(attachment_id=attachment['id'],
                        bdm_uuid=attachment['id'])
        return view

    def _attached(self, server, volume_id):
        volume = self.volumes.by_server.get(server.id, {}).get(volume_id)
        if volume is None:
            raise compute_base.NovaError(
                404, 'Volume %s is not attached to %s' % (
                    volume_id, server.id))
        return volume

    def list_volume_attachments(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        return http.Reply(200, {'volumeAttachments': [
            self._attachment(req, v, v['attachments'][0])
            for v in self.volumes.of_server(server.id)]})

    def show_volume_attachment(self, req, ctx, server_id, volume_id):
        server = self._server(ctx, server_id)
        volume = self._attached(server, volume_id)
        return http.Reply(200, {'volumeAttachment': self._attachment(
            req, volume, volume['attachments'][0])})

    def attach_volume(self, req, ctx, server_id):
        server = self._server(ctx, server_id)
        body = http.json_body(req, compute_base.bad_request).get(
            'volumeAttachment')
        if not isinstance(body, dict) or not body.get('volumeId'):
            raise compute_base.bad_request(
                "Invalid input for field/attribute volumeAttachment.")
        volume = self.volumes.by_id.get(body['volumeId'])
        if volume is None or volume['project_id'] != server.project_id:
            raise compute_base.NovaError(404, 'Volume %s could not be found.'
                                         % body['volumeId'])
        if volume['status'] != 'available':
            raise compute_base.bad_request(
                'Invalid volume: volume %s status must be available, but '
                'current status is: %s' % (volume['id'], volume['status']))
        if server.vm_state not in ('active', 'stopped', 'paused',
                                   'suspended'):
            raise compute_base.NovaError(
                409, "Cannot 'attach_volume' instance %s while it is in "
                     "vm_state %s" % (server.id, server.vm_state))
        attachment = self.volumes.attach(volume, server, body.get('device'))
        self.store.record(server, 'action:attach_volume',
                          volume_id=volume['id'])
        server.act('attach_volume', ctx.to_notification())
        return http.Reply(200, {'volumeAttachment': self._attachment(
            req, volume, attachment)})

    def detach_volume(self, req, ctx, server_id, volume_id):
        server = self._server(ctx, server_id)
        volume = self._attached(server, volume_id)
        if volume['status'] != 'in-use':
            raise compute_base.bad_request(
                'Invalid volume: Unable to detach volume. Volume status '
                'must be \'in-use\' and attach_status must be \'attached\' '
                'to detach.')
        self.volumes.detach(volume, server)
        self.store.record(server, 'action:detach_volume',
                          volume_id=volume['id'])
        server.act('detach_volume', ctx.to_notification())
        return http.Reply(202)
