"""The health report of a stack: what its policies watch and what they saw.

Read from heat-health's tables, so any engine can answer for policies
another engine watches. Times are ISO 8601 strings in UTC. Targets and
events are read as plain rows, not objects: a policy may watch thousands
of servers, and the report of each must still come within a second.
"""

import collections
import datetime

from heat_health.db import api as db_api
from heat_health.objects import policy as policy_object

EVENTS_SHOWN = 50

# At most this many events in one answer of the timeline.
EVENTS_MAX = 1000


def _aware(value):
    """A naive time from a row is UTC."""
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


def _time(value):
    """ISO 8601 with its offset."""
    return None if value is None else _aware(value).isoformat()


def _target(target, observed_through=None):
    seen = target.observed_at
    if seen is not None and observed_through is not None:
        # Stored when it changed; its owner saw it so again since.
        seen = max(_aware(seen), _aware(observed_through))
    return {'server_id': target.server_id,
            'server_name': target.server_name,
            'resource_name': target.resource_name,
            'path': target.path,
            'state': target.state,
            'reason': target.state_reason,
            'since': _time(target.state_since),
            'grace_until': _time(target.grace_until),
            'recovery': target.recovery,
            'attempts': target.attempts,
            'next_attempt_at': _time(target.next_attempt_at),
            'last_observation': {
                'verdict': target.observation,
                'reason': target.observation_reason,
                'source': target.observation_source,
                'time': _time(target.observed_at),
                'still_seen_at': _time(seen),
            } if target.observation else None}


def _policy(policy, targets):
    spec = policy.parsed
    return {'id': policy.id,
            'resource_name': policy.resource_name,
            'enabled': policy.enabled,
            'suspended': policy.suspended,
            'engine_id': policy.engine_id,
            'generation': policy.generation,
            'handoff_to': policy.handoff_to,
            'lease_expires_at': _time(policy.lease_expires_at),
            'detection_modes': list(spec.modes),
            'recovery_conditional': spec.conditional,
            'interval': spec.interval,
            'node_update_timeout': spec.grace,
            'recovery_mode': spec.recovery.mode,
            'braked': policy.braked,
            'braked_since': _time(policy.braked_since),
            'error': policy.error,
            'error_since': _time(policy.error_since),
            'paused': policy.paused and dict(
                policy.paused, at=_time(policy.paused['at'])),
            'observed_through': _time(policy.observed_through),
            # Modes that cannot see some targets: they have no vote.
            'blind_modes': policy.blind or {},
            'counts': dict(collections.Counter(t.state for t in targets)),
            'targets': [_target(t, policy.observed_through)
                        for t in targets]}


def _event(event):
    return {'id': event.id,
            'policy_id': event.policy_id,
            'server_id': event.server_id,
            'path': event.path,
            'old_state': event.old_state,
            'new_state': event.new_state,
            'reason': event.reason,
            'source': event.source,
            'time': _time(event.created_at),
            'detail': event.detail}


def health_report(stack_id, events_shown=EVENTS_SHOWN, stack_name=None):
    """{stack_id, stack_name, policies: [...], events: [...newest first]}."""
    policies = policy_object.Policy.get_all_by_stack(stack_id)
    ids = [p.id for p in policies]
    targets = db_api.target_get_shown(ids)
    events = db_api.event_get_recent(ids, events_shown)
    return {'stack_id': stack_id,
            'stack_name': stack_name,
            'policies': [_policy(p, targets.get(p.id, [])) for p in policies],
            'events': [_event(e) for e in events]}


def policies(stack_id, policy_ids):
    """{policies: [...]} of these policies of the stack, as now stored."""
    found = [p for p in policy_object.Policy.get_all_by_stack(stack_id)
             if p.id in policy_ids]
    targets = db_api.target_get_shown([p.id for p in found])
    return {'policies': [_policy(p, targets.get(p.id, [])) for p in found]}


def timeline(stack_id, marker=None, since=None, limit=None):
    """{events: [...oldest first]} of the stack's policies.

    Each event also names its policy (resource name) and its server's
    place in the stack where that server is still watched.
    """
    policies = policy_object.Policy.get_all_by_stack(stack_id)
    names = {p.id: p.resource_name for p in policies}
    paths = db_api.target_paths(list(names))
    limit = min(limit or EVENTS_MAX, EVENTS_MAX)
    events = db_api.event_get_after(list(names), marker, since, limit)
    return {'events': [dict(_event(e), policy=names.get(e.policy_id),
                            path=e.path or paths.get(e.server_id))
                       for e in events]}
