"""Names shared by the RPC client and the heat-health-engine endpoint."""

# 1.0 - mark_unhealthy
# 1.1 - register_policy, unregister_policy
RPC_API_VERSION = '1.1'

MARK_UNHEALTHY = 'mark_unhealthy'

# Where a marking came from, recorded with it.
SOURCE_API = 'api'

# Health policy registration (OS::Heat::HealthPolicy).
REGISTRY_RPC_API_VERSION = '1.1'

REGISTER_POLICY = 'register_policy'
UNREGISTER_POLICY = 'unregister_policy'

# Health report (GET .../stacks/{name}/{id}/health), part of 1.1 as well.
HEALTH_REPORT = 'health_report'
