"""Client side of the heat-health RPC API (topic ``[heat_health] topic``).

It rides on Heat's transport, exchange and context serializer, so the Heat
request context of the API call reaches heat-health-engine intact and Heat's
exceptions raised there come back as themselves.
"""

import datetime

from heat.common import messaging
from oslo_config import cfg
from oslo_utils import timeutils

from heat_health.common import config  # noqa: F401  (registers options)
from heat_health.rpc import api as rpc_api


class _Client(object):
    """Calls on topic ``[heat_health] topic``, waiting ``timeout`` at most."""

    def __init__(self, timeout):
        self._client = messaging.get_rpc_client(
            topic=cfg.CONF.heat_health.topic,
            version=rpc_api.RPC_API_VERSION)
        self.timeout = timeout

    def _call(self, ctxt, method, **kwargs):
        cctxt = self._client.prepare(timeout=self.timeout)
        return cctxt.call(ctxt, method, **kwargs)


def _addressed(stack):
    """The RPC arguments naming a stack: its identity, or name or id."""
    if isinstance(stack, dict):
        return {'stack_identity': dict(stack)}
    return {'stack': stack}


class HealthClient(_Client):

    def __init__(self):
        super(HealthClient, self).__init__(
            cfg.CONF.heat_health.rpc_response_timeout)

    def mark_unhealthy(self, ctxt, stack_identity, resource_name,
                       mark_unhealthy, resource_status_reason,
                       source=rpc_api.SOURCE_API):
        """Set or clear CHECK_FAILED on a resource; returns the marking."""
        return self._call(ctxt, rpc_api.MARK_UNHEALTHY,
                          stack_identity=dict(stack_identity),
                          resource_name=resource_name,
                          mark_unhealthy=mark_unhealthy,
                          resource_status_reason=resource_status_reason,
                          source=source)

    def health_report(self, ctxt, stack):
        """Policies, targets and recent events of a stack (a dict).

        :param stack: the stack's identity (a dict), or its name or id.
        """
        return self._call(ctxt, rpc_api.HEALTH_REPORT, **_addressed(stack))

    def health_events(self, ctxt, stack, marker=None, since=None,
                      limit=None):
        """{events: [...oldest first]} of the stack's policies."""
        return self._call(ctxt, rpc_api.HEALTH_EVENTS, marker=marker,
                          since=since, limit=limit, **_addressed(stack))

    def set_paused(self, ctxt, stack, pause, policy=None, reason=None):
        """Pause or resume healing; {policies: [...]} of those named."""
        return self._call(ctxt, rpc_api.SET_PAUSED, pause=pause,
                          policy=policy, reason=reason, **_addressed(stack))


class RegistryClient(_Client):
    """Registration of health policies, as heat-engine's plugin calls it.

    Calls wait ``[heat_health] register_timeout`` at most: an unanswered
    registration must fail the resource, never pass silently unwatched.
    """

    def __init__(self):
        super(RegistryClient, self).__init__(
            cfg.CONF.heat_health.register_timeout)

    def register_policy(self, ctxt, policy):
        """Store, claim and resolve a policy; answers {engine_id, ...}.

        :param policy: dict with id, stack_id, resource_name, spec, enabled.
            The call adds ``deadline``: when this client stops waiting. An
            engine that reaches the request later drops it, so a policy
            whose resource failed is never watched.
        """
        deadline = timeutils.utcnow() + datetime.timedelta(
            seconds=self.timeout)
        return self._call(ctxt, rpc_api.REGISTER_POLICY,
                          policy=dict(policy, deadline=deadline.isoformat()))

    def set_policy_suspended(self, ctxt, policy_id, suspended):
        return self._call(ctxt, rpc_api.SET_POLICY_SUSPENDED,
                          policy_id=policy_id, suspended=suspended)

    def unregister_policy(self, ctxt, policy_id):
        return self._call(ctxt, rpc_api.UNREGISTER_POLICY,
                          policy_id=policy_id)
