"""Glance v2: version discovery, images (list and show) and the schemas
python-glanceclient builds its image model from."""

from tests.fakecloud import http

# Every property an image answer carries, with the JSON types it may have:
# glanceclient validates shown images against this schema.
_PROPERTIES = {
    'id': 'string', 'name': ['null', 'string'], 'status': 'string',
    'visibility': 'string', 'protected': 'boolean', 'os_hidden': 'boolean',
    'owner': ['null', 'string'], 'container_format': ['null', 'string'],
    'disk_format': ['null', 'string'], 'size': ['null', 'integer'],
    'virtual_size': ['null', 'integer'], 'min_disk': 'integer',
    'min_ram': 'integer', 'checksum': ['null', 'string'],
    'os_hash_algo': ['null', 'string'], 'os_hash_value': ['null', 'string'],
    'tags': 'array', 'created_at': 'string', 'updated_at': 'string',
    'self': 'string', 'file': 'string', 'schema': 'string',
    'direct_url': 'string', 'locations': 'array',
}


def _image_schema():
    properties = {name: {'type': kind} for name, kind in _PROPERTIES.items()}
    properties['tags'] = {'type': 'array', 'items': {'type': 'string'}}
    properties['locations'] = {'type': 'array', 'items': {'type': 'object'}}
    return {'name': 'image', 'properties': properties,
            'additionalProperties': {'type': 'string'},
            'links': [{'rel': 'self', 'href': '{self}'},
                      {'rel': 'enclosure', 'href': '{file}'},
                      {'rel': 'describedby', 'href': '{schema}'}]}


def _not_found(message):
    return http.ApiError(404, '404 Not Found\n\n%s\n' % message,
                         content_type='text/plain')


class ImageAPI(object):
    """Handlers under /image."""

    def __init__(self, store, conf):
        self.store = store
        self.base = conf.public_url + '/image'
        router = self.router = http.Router()
        router.add('GET', '/v2/images', self.list_images)
        router.add('GET', '/v2/images/{image_id}', self.show_image)
        router.add('GET', '/v2/schemas/image', self.image_schema)
        router.add('GET', '/v2/schemas/images', self.images_schema)

    def versions(self, status=300):
        versions = [{'id': 'v2.%d' % minor,
                     'status': 'CURRENT' if minor == 17 else 'SUPPORTED',
                     'links': [{'rel': 'self', 'href': self.base + '/v2/'}]}
                    for minor in range(17, -1, -1)]
        return http.Reply(status, {'versions': versions})

    def dispatch(self, req, ctx, path):
        handler, kwargs = self.router.match(req.method, path)
        if handler is None:
            raise _not_found('The resource could not be found.')
        with self.store.lock:
            return handler(req, ctx, **kwargs)

    def _visible(self, ctx, image):
        return (image['visibility'] in ('public', 'community') or
                ctx.is_admin or image['owner'] == ctx.project_id)

    def _view(self, image):
        view = dict(image)
        view.update({'self': '/v2/images/%s' % image['id'],
                     'file': '/v2/images/%s/file' % image['id'],
                     'schema': '/v2/schemas/image'})
        return view

    def list_images(self, req, ctx):
        images = [i for i in self.store.images.values()
                  if self._visible(ctx, i)]
        for key in ('name', 'status', 'visibility', 'owner', 'id',
                    'container_format', 'disk_format'):
            if key in req.GET:
                value = req.GET[key]
                if value.startswith('in:'):
                    values = value[3:].split(',')
                else:
                    values = [value]
                images = [i for i in images if str(i.get(key)) in values]
        images.sort(key=lambda i: (i['created_at'], i['id']), reverse=True)
        marker = req.GET.get('marker')
        if marker:
            ids = [i['id'] for i in images]
            if marker not in ids:
                raise http.ApiError(400, '400 Bad Request\n\nmarker not '
                                         'found\n', content_type='text/plain')
            images = images[ids.index(marker) + 1:]
        limit = int(req.GET.get('limit', 25))
        body = {'images': [self._view(i) for i in images[:limit]],
                'first': '/v2/images', 'schema': '/v2/schemas/images'}
        if len(images) > limit:
            body['next'] = '/v2/images?marker=%s&limit=%d' % (
                images[limit - 1]['id'], limit)
        return http.Reply(200, body)

    def show_image(self, req, ctx, image_id):
        image = self.store.images.get(image_id)
        if image is None or not self._visible(ctx, image):
            raise _not_found('No image found with ID %s' % image_id)
        return http.Reply(200, self._view(image))

    def image_schema(self, req, ctx):
        return http.Reply(200, _image_schema())

    def images_schema(self, req, ctx):
        return http.Reply(200, {
            'name': 'images',
            'properties': {
                'images': {'type': 'array', 'items': _image_schema()},
                'schema': {'type': 'string'}, 'first': {'type': 'string'},
                'next': {'type': 'string'}},
            'links': [{'rel': 'first', 'href': '{first}'},
                      {'rel': 'next', 'href': '{next}'},
                      {'rel': 'describedby', 'href': '{schema}'}]})
