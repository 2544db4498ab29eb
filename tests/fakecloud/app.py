"""The WSGI application of the API port: logging, version documents,
Keystone authentication, and routing by path prefix to the four APIs and
the admin API.

    /compute/v2.1/...   Nova        /image/v2/...      Glance
    /network/v2.0/...   Neutron     /volume/v3/...     Cinder
    /fakecloud/...      faults (admin)

Version documents answer without a token, as the real services do; the
rest goes through keystonemiddleware's auth_token.
"""

import logging
import time

from keystonemiddleware import auth_token
import webob

from tests.fakecloud import http

LOG = logging.getLogger('fakecloud.api')

_NOAUTH_DEFAULTS = (('HTTP_X_PROJECT_ID', 'demo'), ('HTTP_X_USER_ID', 'demo'),
                    ('HTTP_X_ROLES', 'member'))


class Application(object):

    def __init__(self, conf, compute, image, network, faults, volume=None):
        self.compute = compute
        self.image = image
        self.network = network
        self.volume = volume
        self.faults = faults
        self._versions = {
            '/compute': compute.versions,
            '/compute/v2.1': compute.version,
            '/image': image.versions,
            '/image/versions': lambda: image.versions(200),
            '/network': network.versions,
        }
        if volume is not None:
            self._versions['/volume'] = volume.versions
        if conf.auth_strategy == 'keystone':
            self._authenticated = auth_token.AuthProtocol(
                self._api, {'oslo_config_config': conf})
        else:
            self._authenticated = self._noauth

    def __call__(self, environ, start_response):
        start = time.monotonic()
        answer = {}

        def logged_start_response(status, headers, exc_info=None):
            answer['status'] = status
            return start_response(status, headers, exc_info)

        path = environ['PATH_INFO']
        versions = self._versions.get(path.rstrip('/'))
        if versions is not None and environ['REQUEST_METHOD'] == 'GET':
            result = self._respond(versions(), None, logged_start_response)
        else:
            result = self._authenticated(environ, logged_start_response)
        query = environ.get('QUERY_STRING')
        LOG.info('%s %s%s %s %.3fs project=%s', environ['REQUEST_METHOD'],
                 path, '?' + query if query else '',
                 answer.get('status', '-').split(' ')[0],
                 time.monotonic() - start,
                 environ.get('HTTP_X_PROJECT_ID', '-'))
        return result

    def _noauth(self, environ, start_response):
        for key, default in _NOAUTH_DEFAULTS:
            environ.setdefault(key, default)
        return self._api(environ, start_response)

    @staticmethod
    def _respond(reply, ctx, start_response):
        headers = [('Content-Type', reply.content_type)] + reply.headers
        if ctx is not None:
            headers.append(('x-openstack-request-id', ctx.request_id))
        start_response(http.status_line(reply.status), headers)
        return [reply.encode()]

    def _api(self, environ, start_response):
        req = webob.Request(environ)
        ctx = http.Context.from_environ(environ)
        path = environ['PATH_INFO']
        try:
            if path.startswith('/compute/v2.1/'):
                reply = self.compute.dispatch(req, ctx,
                                              path[len('/compute/v2.1'):])
            elif path.startswith('/image/'):
                self.faults.before(compute_api=False)
                reply = self.image.dispatch(req, ctx, path[len('/image'):])
            elif path.startswith('/network/'):
                self.faults.before(compute_api=False)
                reply = self.network.dispatch(req, ctx,
                                              path[len('/network'):])
            elif path.startswith('/volume/') and self.volume is not None:
                self.faults.before(compute_api=False)
                reply = self.volume.dispatch(req, ctx, path[len('/volume'):])
            elif path.startswith('/fakecloud/'):
                reply = self.faults.dispatch(req, ctx,
                                             path[len('/fakecloud'):])
            else:
                reply = http.Reply(404, {'error': {
                    'code': 404, 'message': 'no API at %s' % path}})
        except http.ApiError as exc:
            reply = exc.reply
        return self._respond(reply, ctx, start_response)
