"""oslo.policy rules of heat-health's own API (report, timeline, pause).

Marking a resource unhealthy keeps Heat's own ``resource:mark_unhealthy``
rule; the rules here are new, registered on Heat's enforcer before use and
listed for oslopolicy-sample-generator (namespace ``heat_health``).
"""

from oslo_policy import policy

PROJECT_READER = 'role:reader and project_id:%(project_id)s'
PROJECT_MEMBER = 'role:member and project_id:%(project_id)s'
HEALTH_PATH = '/v1/{tenant_id}/stacks/{stack_name}/{stack_id}/health'

rules = [
    policy.DocumentedRuleDefault(
        name='health:show',
        check_str=PROJECT_READER,
        scope_types=['project'],
        description='Show the health report of a stack: its health '
                    'policies, the state of each watched server, the last '
                    'observation and recent state changes.',
        operations=[{'path': HEALTH_PATH, 'method': 'GET'},
                    {'path': HEALTH_PATH + '/events', 'method': 'GET'}]),
    policy.DocumentedRuleDefault(
        name='health:pause',
        check_str=PROJECT_MEMBER,
        scope_types=['project'],
        description='Pause or resume the automatic healing of a stack\'s '
                    'health policies (detection and the report go on).',
        operations=[{'path': HEALTH_PATH + '/pause', 'method': 'POST'},
                    {'path': HEALTH_PATH + '/resume', 'method': 'POST'}]),
]


def list_rules():
    """Entry point for oslo.policy's generators."""
    return rules


def register(enforcer):
    """Add our rules to Heat's enforcer (heat.common.policy.Enforcer)."""
    registered = enforcer.enforcer.registered_rules
    for rule in rules:
        if rule.name not in registered:
            enforcer.enforcer.register_default(rule)
