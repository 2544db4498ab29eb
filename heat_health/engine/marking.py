"""Marking a resource unhealthy, or healthy again, and recording it.

The one path of every marking, the API's (``endpoint``) and recovery's
(``recovery.heat_replace``): Heat's own lock is taken around the state
change (``heat_locks``) and the marking is recorded in heat-health's table.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.engine import heat_locks
from heat_health.objects import marking as marking_object
from heat_health.rpc import api as rpc_api

LOG = logging.getLogger(__name__)


def set_health(rsrc, mark_unhealthy, reason):
    """The spec's transition: CHECK_FAILED, or back only from CHECK_FAILED."""
    if mark_unhealthy:
        if rsrc.action != rsrc.DELETE:
            rsrc.state_set(rsrc.CHECK, rsrc.FAILED, reason=reason)
    elif rsrc.state == (rsrc.CHECK, rsrc.FAILED):
        rsrc.handle_metadata_reset()
        rsrc.state_set(rsrc.CHECK, rsrc.COMPLETE, reason=reason)


def mark(ctxt, engine_id, stack, rsrc, mark_unhealthy, reason, source,
         addressed_stack_id):
    """Set or clear CHECK_FAILED under Heat's lock, then record it.

    The one path of every marking, the API's and recovery's, so both honour
    Heat's locks and leave the same record. ``ctxt`` acts: the caller's
    request context, or a stack's stored context (its user is then the
    trustor). Returns the recorded Marking, or None when the state changed
    but the record could not be written.
    """
    with heat_locks.locked(ctxt, rsrc, engine_id):
        set_health(rsrc, mark_unhealthy, reason)
    LOG.info('%(what)s %(res)s (%(phys)s) in stack %(stack)s: %(why)s',
             {'what': 'Marked unhealthy' if mark_unhealthy
              else 'Reset health of',
              'res': rsrc.name, 'phys': rsrc.resource_id,
              'stack': stack.name, 'why': reason})
    values = {
        'stack_id': addressed_stack_id,
        'owner_stack_id': stack.id,
        'resource_name': rsrc.name,
        'physical_resource_id': rsrc.resource_id,
        'mark_unhealthy': mark_unhealthy,
        # What a TEXT column holds on MySQL, whole characters (the API
        # refuses longer reasons; recovery's own are short).
        'reason': reason.encode('utf-8')[:rpc_api.MAX_REASON_BYTES].decode(
            'utf-8', 'ignore'),
        'user_id': ctxt.user_id or ctxt.trustor_user_id,
        'project_id': ctxt.project_id or stack.tenant_id,
        'source': source,
        'created_at': timeutils.utcnow(),
    }
    try:
        return marking_object.Marking.create(values)
    except Exception:
        LOG.exception('The marking of %(res)s in stack %(stack)s was '
                      'made but not recorded; the record was %(values)s',
                      {'res': rsrc.name, 'stack': stack.name,
                       'values': values})
        return None
