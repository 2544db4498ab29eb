"""The one place heat-health reads and writes its own tables.

Callers use these names only; each lives in the module of what it keeps:
``policies`` (rows, leases, pause and brake), ``targets`` (kept in step
with Heat's places), ``fenced_writes`` (the owner's decisions, fenced by
generation and server), ``events`` (the timeline), all through
``session``'s transaction factory, apart from Heat's.
"""

from heat_health.db import events
from heat_health.db import fenced_writes
from heat_health.db import policies
from heat_health.db import session as db_session
from heat_health.db import targets

get_engine = db_session.get_engine

marking_create = events.marking_create
marking_get_all_by_stack = events.marking_get_all_by_stack
marking_last_of = events.marking_last_of
event_add = events.event_add
event_get_after = events.event_get_after
event_get_recent = events.event_get_recent

POLICY_ERROR_MAX = policies.POLICY_ERROR_MAX
policy_create_or_update = policies.policy_create_or_update
policy_get = policies.policy_get
policy_get_all_by_stack = policies.policy_get_all_by_stack
policy_delete = policies.policy_delete
policy_keep_deleted = policies.policy_keep_deleted
policy_is_deleted = policies.is_deleted
policy_claim = policies.policy_claim
policy_other_owners = policies.policy_other_owners
policy_owners = policies.policy_owners
policy_owners_digest = policies.policy_owners_digest
policy_release = policies.policy_release
policy_renew = policies.policy_renew
policy_set_suspended = policies.policy_set_suspended
policy_set_blind = policies.policy_set_blind
policy_set_braked = policies.policy_set_braked
policy_set_error = policies.policy_set_error
policy_set_paused = policies.policy_set_paused

leftovers = targets.leftovers
RUNNING_WORKFLOW = targets.RUNNING_WORKFLOW
drain_states = targets.drain_states
HELD, RESTORING, RESTORED = targets.HELD, targets.RESTORING, targets.RESTORED
owner_index = targets.owner_index
policy_servers = targets.policy_servers
target_reset = targets.target_reset
target_get_all = targets.target_get_all
target_get_rows = targets.target_get_rows
target_get_shown = targets.target_get_shown
target_held_columns = targets.target_held_columns
target_paths = targets.target_paths
target_details_update = targets.target_details_update
target_sync = targets.target_sync

target_transition = fenced_writes.target_transition
target_observations_store = fenced_writes.target_observations_store
target_store_columns = fenced_writes.target_store_columns
