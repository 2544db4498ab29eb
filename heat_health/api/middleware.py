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
from heat_health.api import events_query
from heat_health.api import mark_unhealthy
from heat_health.api import pause
from heat_health.common import policies
from heat_health.rpc import client as rpc_client

LOG = logging.getLogger(__name__)

RESOURCE_PATH = ('/{tenant_id}/stacks/{stack_name}/{stack_id}'
                 '/resources/{resource_name}')
HEALTH_PATH = '/{tenant_id}/stacks/{stack_name}/{stack_id}/health'
STACK_HEALTH_PATH = '/{tenant_id}/stacks/{stack}/health'
HEALTH_ROUTES = (('', 'health_report', 'GET'),
                 ('/events', 'health_events', 'GET'),
                 ('/pause', 'health_pause', 'POST'),
                 ('/resume', 'health_resume', 'POST'))


def _routes():
    mapper = routes.Mapper()
    mapper.connect('mark_unhealthy', RESOURCE_PATH, action='mark_unhealthy',
                   conditions={'method': ['PATCH']})
    # Each health route twice: under the stack's full path, as Heat's own
    # routes, and under its name or id alone, as the CLI addresses it.
    for path in (HEALTH_PATH, STACK_HEALTH_PATH):
        for suffix, action, method in HEALTH_ROUTES:
            mapper.connect(path + suffix, action=action,
                           conditions={'method': [method]})
    return mapper


def _json(body):
    return webob.Response(body=jsonutils.dump_as_bytes(body), status=200,
                          content_type='application/json', charset='UTF-8')


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
        """Heat's own path-project check and registered policy rule.

        Refused exactly as Heat's routes refuse: one 403 for another
        project in the path and for a rule that does not allow the call.
        """
        ctxt = req.context
        if ctxt.is_admin and ctxt.project_id:
            tenant_id = ctxt.project_id
        if ctxt.project_id != tenant_id:
            raise errors.forbidden()
        if not ctxt.policy.enforce(context=ctxt, action=action, scope=scope,
                                   target={'project_id': tenant_id},
                                   is_registered_policy=True):
            raise errors.forbidden()

    def mark_unhealthy(self, req, tenant_id, stack_name, stack_id,
                       resource_name):
        self._authorize(req, tenant_id, 'resource', 'mark_unhealthy')
        # Refused before the body is read when its announced size is over.
        mark_unhealthy.check_size(req.content_length)
        mark, reason = mark_unhealthy.parse_body(req.body)
        identity = identifier.HeatIdentifier(req.context.project_id,
                                             stack_name, stack_id)
        self._ask('mark_unhealthy for %s/%s' % (stack_name, resource_name),
                  self.rpc.mark_unhealthy, req.context, dict(identity),
                  resource_name, mark, reason,
                  _advice='; check the resource status before retrying')
        return _json(None)

    @staticmethod
    def _ask(what, call, *args, _advice='', **kwargs):
        """An RPC call to heat-health-engine; 503 when it does not answer."""
        try:
            return call(*args, **kwargs)
        except oslo_messaging.MessagingTimeout:
            LOG.error('heat-health-engine did not answer %s', what)
            raise errors.service_unavailable(
                'heat-health-engine did not answer in time%s.' % _advice)

    def _stack(self, req, tenant_id, action, stack_name=None,
               stack_id=None, stack=None):
        """Authorize; the stack as the engine is asked to find it."""
        policies.register(req.context.policy)
        self._authorize(req, tenant_id, 'health', action)
        if stack is not None:
            return stack
        return dict(identifier.HeatIdentifier(req.context.project_id,
                                              stack_name, stack_id))

    def health_report(self, req, tenant_id, **stack):
        addressed = self._stack(req, tenant_id, 'show', **stack)
        report = self._ask('health_report', self.rpc.health_report,
                           req.context, addressed)
        return _json({'health': report})

    def health_events(self, req, tenant_id, **stack):
        addressed = self._stack(req, tenant_id, 'show', **stack)
        query = events_query.parse(req.params)
        return _json(self._ask('health_events', self.rpc.health_events,
                               req.context, addressed, **query))

    def _set_paused(self, req, tenant_id, pausing, stack):
        addressed = self._stack(req, tenant_id, 'pause', **stack)
        policy, reason = pause.parse_body(req.body, pausing)
        return _json(self._ask('set_paused', self.rpc.set_paused,
                               req.context, addressed, pausing,
                               policy=policy, reason=reason))

    def health_pause(self, req, tenant_id, **stack):
        return self._set_paused(req, tenant_id, True, stack)

    def health_resume(self, req, tenant_id, **stack):
        return self._set_paused(req, tenant_id, False, stack)
