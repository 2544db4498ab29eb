"""Find the resource named in a mark-unhealthy request, loaded by Heat.

Heat looks for the resource only in the addressed stack. Operators often know
just the top-level stack and the UUID of a failing server that is a member of
a group, i.e. a resource of a nested stack; so a physical id that is not in
the addressed stack is also looked up in its nested stacks.
"""

from heat.common import exception
from heat.common import identifier
from heat.db import api as heat_db
from heat.engine import service as heat_service
from heat.engine import stack as parser
from heat.objects import stack as stack_object
from oslo_utils import uuidutils


def _get_stack(ctxt, stack_identity):
    """The addressed stack's record, checked the way Heat's engine does."""
    identity = identifier.HeatIdentifier(**stack_identity)
    stack = stack_object.Stack.get_by_id(ctxt, identity.stack_id)
    if stack is None or identity.path or stack.name != identity.stack_name:
        raise exception.EntityNotFound(entity='Stack',
                                       name=identity.stack_name)
    if not ctxt.is_admin and ctxt.project_id not in (
            identity.tenant, stack.stack_user_project_id):
        raise exception.InvalidTenant(target=identity.tenant,
                                      actual=ctxt.project_id)
    return stack


def find_stack(ctxt, stack_identity):
    """The addressed stack's record, if the caller may see it.

    Raises Heat's EntityNotFound (404) or InvalidTenant (403) otherwise.
    """
    return _get_stack(ctxt, stack_identity)


def identify_stack(ctxt, name_or_id):
    """The caller's stack with this name or id, as Heat's lookup finds it.

    Raises EntityNotFound (404) when there is none, also for the id of
    another project's stack, which Heat's own lookup cannot tell from an
    unknown one.
    """
    stack = None
    if uuidutils.is_uuid_like(name_or_id):
        stack = stack_object.Stack.get_by_id(ctxt, name_or_id)
    if stack is None:
        stack = stack_object.Stack.get_by_name(ctxt, name_or_id)
    if stack is None:
        raise exception.EntityNotFound(entity='Stack', name=name_or_id)
    return stack


def _nested_in(ctxt, stack_id, root_id, max_depth):
    """The record of stack_id if it is nested at most max_depth below root."""
    stack = stack_object.Stack.get_by_id(ctxt, stack_id)
    owned = stack
    for _depth in range(max_depth):
        if owned is None or owned.owner_id is None:
            return None
        if owned.owner_id == root_id:
            return stack
        owned = stack_object.Stack.get_by_id(ctxt, owned.owner_id)
    return None


def _nested_owner(ctxt, stack, physical_id, max_depth):
    """The nested stack holding physical_id, or None if none does."""
    rows = heat_db.resource_get_all_by_physical_resource_id(ctxt,
                                                            physical_id)
    if any(row.stack_id == stack.id for row in rows):
        return None
    owners = [owner for owner in (
        _nested_in(ctxt, row.stack_id, stack.id, max_depth) for row in rows)
        if owner is not None]
    if len(owners) > 1:
        raise exception.PhysicalResourceIDAmbiguity(phys_id=physical_id)
    return owners[0] if owners else None


def find_resource(ctxt, stack_identity, resource_ref, max_depth):
    """(stack, resource) for resource_ref (logical name or physical id).

    The stack is returned too: a Heat Resource only holds a weak reference
    to its stack, which must outlive the resource's use.
    """
    stack = parser.Stack.load(ctxt, stack=_get_stack(ctxt, stack_identity))
    if resource_ref not in stack:
        owner = _nested_owner(ctxt, stack, resource_ref, max_depth)
        if owner is not None:
            stack = parser.Stack.load(ctxt, stack=owner)
    # Heat's own lookup: name, physical id (ambiguity), reference id.
    return stack, heat_service.EngineService._find_resource_in_stack(
        ctxt, resource_ref, stack)
