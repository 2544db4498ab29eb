"""Find the stack that owns a resource named in a mark-unhealthy request.

Heat looks for the resource only in the addressed stack. Operators often know
just the top-level stack and the UUID of a failing server that is a member of
a group, i.e. a resource of a nested stack; so a physical id that is not in
the addressed stack is also looked up in its nested stacks.
"""

import collections

from heat.common import exception
from heat.common import identifier
from heat.db import api as heat_db
from heat.objects import stack as stack_object

Target = collections.namedtuple(
    'Target', ['stack_identity', 'resource_ref', 'resource_name',
               'physical_resource_id'])


def get_stack(ctxt, stack_identity):
    """The addressed stack, checked the way Heat's engine checks it."""
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


def _identity(stack):
    return dict(identifier.HeatIdentifier(stack.tenant, stack.name,
                                          stack.id))


def _nested_in(ctxt, stack_id, root_id, max_depth):
    """The stack ``stack_id`` if it is nested at most max_depth below root."""
    stack = stack_object.Stack.get_by_id(ctxt, stack_id)
    owned = stack
    for _depth in range(max_depth):
        if owned is None or owned.owner_id is None:
            return None
        if owned.owner_id == root_id:
            return stack
        owned = stack_object.Stack.get_by_id(ctxt, owned.owner_id)
    return None


def locate(ctxt, stack_identity, resource_ref, max_depth):
    """Resolve ``resource_ref`` (logical name or physical id) to a Target."""
    stack = get_stack(ctxt, stack_identity)
    identity = _identity(stack)

    by_name = heat_db.resource_get_by_name_and_stack(ctxt, resource_ref,
                                                     stack.id)
    if by_name is not None:
        return Target(identity, resource_ref, resource_ref,
                      by_name.physical_resource_id)

    by_id = heat_db.resource_get_all_by_physical_resource_id(ctxt,
                                                             resource_ref)
    if any(r.stack_id == stack.id for r in by_id):
        # Heat itself resolves (and reports ambiguity) within this stack.
        name = next(r.name for r in by_id if r.stack_id == stack.id)
        return Target(identity, resource_ref, name, resource_ref)

    nested = []
    for rsrc in by_id:
        owner = _nested_in(ctxt, rsrc.stack_id, stack.id, max_depth)
        if owner is not None:
            nested.append((owner, rsrc))
    if len(nested) > 1:
        raise exception.PhysicalResourceIDAmbiguity(phys_id=resource_ref)
    if nested:
        owner, rsrc = nested[0]
        return Target(_identity(owner), resource_ref, rsrc.name,
                      resource_ref)

    # Unknown here: Heat still tries a reference id, then answers 404.
    return Target(identity, resource_ref, resource_ref, None)
