"""Client side of the heat-health RPC API (topic ``[heat_health] topic``).

It rides on Heat's transport, exchange and context serializer, so the Heat
request context of the API call reaches heat-health-engine intact and Heat's
exceptions raised there come back as themselves.
"""

from heat.common import messaging
from oslo_config import cfg

from heat_health.common import config  # noqa: F401  (registers options)
from heat_health.rpc import api as rpc_api


class HealthClient(object):

    def __init__(self):
        conf = cfg.CONF.heat_health
        self._client = messaging.get_rpc_client(
            topic=conf.topic, version=rpc_api.RPC_API_VERSION)
        self._timeout = conf.rpc_response_timeout

    def mark_unhealthy(self, ctxt, stack_identity, resource_name,
                       mark_unhealthy, resource_status_reason,
                       source=rpc_api.SOURCE_API):
        """Set or clear CHECK_FAILED on a resource; returns the marking."""
        cctxt = self._client.prepare(timeout=self._timeout)
        return cctxt.call(ctxt, rpc_api.MARK_UNHEALTHY,
                          stack_identity=dict(stack_identity),
                          resource_name=resource_name,
                          mark_unhealthy=mark_unhealthy,
                          resource_status_reason=resource_status_reason,
                          source=source)

    def health_report(self, ctxt, stack_identity):
        """Policies, targets and recent events of a stack (a dict)."""
        cctxt = self._client.prepare(timeout=self._timeout)
        return cctxt.call(ctxt, rpc_api.HEALTH_REPORT,
                          stack_identity=dict(stack_identity))


class RegistryClient(object):
    """Registration of health policies, as heat-engine's plugin calls it.

    Calls wait ``[heat_health] register_timeout`` at most: an unanswered
    registration must fail the resource, never pass silently unwatched.
    """

    def __init__(self):
        conf = cfg.CONF.heat_health
        self._client = messaging.get_rpc_client(
            topic=conf.topic, version=rpc_api.REGISTRY_RPC_API_VERSION)
        self.timeout = conf.register_timeout

    def register_policy(self, ctxt, policy):
        """Store, claim and resolve a policy; answers {engine_id, ...}.

        :param policy: dict with id, stack_id, resource_name, spec, enabled.
        """
        cctxt = self._client.prepare(timeout=self.timeout,
                                     version=rpc_api.REGISTRY_RPC_API_VERSION)
        return cctxt.call(ctxt, rpc_api.REGISTER_POLICY, policy=policy)

    def unregister_policy(self, ctxt, policy_id):
        cctxt = self._client.prepare(timeout=self.timeout,
                                     version=rpc_api.REGISTRY_RPC_API_VERSION)
        return cctxt.call(ctxt, rpc_api.UNREGISTER_POLICY,
                          policy_id=policy_id)
