"""Names shared by the RPC client and the heat-health-engine endpoint."""

# 1.0 - mark_unhealthy
RPC_API_VERSION = '1.0'

MARK_UNHEALTHY = 'mark_unhealthy'

# Where a marking came from, recorded with it.
SOURCE_API = 'api'
