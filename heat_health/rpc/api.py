"""Names shared by the RPC client and the heat-health-engine endpoint."""

# 1.0 - mark_unhealthy
# 1.1 - register_policy, unregister_policy, health_report; a policy to
#       register may carry a deadline (ignored by engines that predate it)
# 1.2 - observe (news forwarded to the owning engine's own server),
#       set_policy_suspended
# 1.3 - health_events, set_paused
RPC_API_VERSION = '1.3'

MARK_UNHEALTHY = 'mark_unhealthy'
# The longest reason a marking takes, in bytes of UTF-8: what Heat's
# resource status_reason and our marking's reason (TEXT on MySQL) hold.
MAX_REASON_BYTES = 65535

# Where a marking came from, recorded with it.
SOURCE_API = 'api'

# Health policy registration (OS::Heat::HealthPolicy).
REGISTER_POLICY = 'register_policy'
UNREGISTER_POLICY = 'unregister_policy'

# Health report (GET .../stacks/{name}/{id}/health) and timeline
# (GET .../health/events).
HEALTH_REPORT = 'health_report'
HEALTH_EVENTS = 'health_events'

# An operator pauses or resumes healing (POST .../health/pause, resume).
SET_PAUSED = 'set_paused'

# Between engines: Nova news forwarded to the engine owning the server.
OBSERVE = 'observe'

# The stack of a policy is suspended or resumed (heat-engine's plugin).
SET_POLICY_SUSPENDED = 'set_policy_suspended'
