"""Paste filter placed after ``context`` in Heat's API pipeline.

It answers the requests heat-health owns and passes every other request to
Heat untouched. Errors are raised, not returned, so Heat's ``faultwrap``
renders them exactly like Heat's own.
"""

from heat.common import identifier
from heat.common import wsgi
from oslo_log import log as logging
import oslo_messaging
from oslo_serialization import jsonutils
import routes
import webob

from heat_health.api import errors
from heat_health.api import mark_unhealthy
from heat_health.common import policies
from heat_health.rpc import client as rpc_client

LOG = logging.getLogger(__name__)

RESOURCE_PATH = ('/{tenant_id}/stacks/{stack_name}/{stack_id}'
                 '/resources/{resource_name}')
HEALTH_PATH = '/{tenant_id}/stacks/{stack_name}/{stack_id}/health'


def _routes():
    mapper = routes.Mapper()
    mapper.connect('mark_unhealthy', RESOURCE_PATH, action='mark_unhealthy',
                   conditions={'method': ['PATCH']})
    mapper.connect('health_report', HEALTH_PATH, action='health_report',
                   conditions={'method': ['GET']})
    return mapper


class HealthMiddleware(wsgi.Middleware):

    def __init__(self, application):
        super(HealthMiddleware, self).__init__(application)
        self._mapper = _routes()
        self._rpc = None

    @property
    def rpc(self):
        # Created on first use: the transport exists only once heat-api
        # has set up messaging.
        if self._rpc is None:
            self._rpc = rpc_client.HealthClient()
        return self._rpc

    def process_request(self, req):
        path = req.path_info
        # Before versionnegotiation the version is still in the path.
        if path.startswith('/v1/'):
            path = path[len('/v1'):]
        match = self._mapper.match(path, req.environ)
        if match is None:
            return None
        handler = getattr(self, match.pop('action'))
        match.pop('controller', None)
        return handler(req, **match)

    @staticmethod
    def _authorize(req, tenant_id, scope, action):
        """Heat's own path-project check and registered policy rule."""
        ctxt = req.context
        if ctxt.is_admin and ctxt.project_id:
            tenant_id = ctxt.project_id
        if ctxt.project_id != tenant_id:
            raise errors.forbidden('The project in the path is not the '
                                   'project of the token.')
        if not ctxt.policy.enforce(context=ctxt, action=action, scope=scope,
                                   target={'project_id': tenant_id},
                                   is_registered_policy=True):
            raise errors.forbidden('%s:%s is disallowed by policy'
                                   % (scope, action))

    def mark_unhealthy(self, req, tenant_id, stack_name, stack_id,
                       resource_name):
        self._authorize(req, tenant_id, 'resource', 'mark_unhealthy')
        # Refused before the body is read when its announced size is over.
        mark_unhealthy.check_size(req.content_length)
        mark, reason = mark_unhealthy.parse_body(req.body)
        identity = identifier.HeatIdentifier(req.context.project_id,
                                             stack_name, stack_id)
        try:
            self.rpc.mark_unhealthy(req.context, dict(identity),
                                    resource_name, mark, reason)
        except oslo_messaging.MessagingTimeout:
            LOG.error('heat-health-engine did not answer mark_unhealthy for '
                      '%s/%s', stack_name, resource_name)
            raise errors.service_unavailable(
                'heat-health-engine did not answer in time; check the '
                'resource status before retrying.')
        return webob.Response(body=b'null', status=200,
                              content_type='application/json',
                              charset='UTF-8')

    def health_report(self, req, tenant_id, stack_name, stack_id):
        policies.register(req.context.policy)
        self._authorize(req, tenant_id, 'health', 'show')
        identity = identifier.HeatIdentifier(req.context.project_id,
                                             stack_name, stack_id)
        try:
            report = self.rpc.health_report(req.context, dict(identity))
        except oslo_messaging.MessagingTimeout:
            LOG.error('heat-health-engine did not answer health_report for '
                      '%s', stack_name)
            raise errors.service_unavailable(
                'heat-health-engine did not answer in time.')
        return webob.Response(body=jsonutils.dump_as_bytes({'health': report}),
                              status=200, content_type='application/json',
                              charset='UTF-8')
