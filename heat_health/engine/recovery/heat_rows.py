"""Heat's own rows, read as recovery needs them.

Through an admin context that only reads, never acts; only the columns
recovery looks at, since it reads them at every step of every recovery
and Heat's own reads would join in every row's data and properties.
"""

from heat.common import context as heat_context
from heat.common import exception
from heat.db import api as heat_db
from heat.db import models as heat_models
from heat.objects import stack as stack_object
from sqlalchemy import orm


def reader():
    """A context that only reads Heat's rows, fresh for every call.

    Fresh because a context caches the resources it read. No owner acts
    through it: stacks that act are loaded with their stored context.
    """
    return heat_context.get_admin_context()


def stack_row(ctxt, stack_id):
    """The stack's object, its template joined in, for loading the stack."""
    row = stack_object.Stack.get_by_id(ctxt, stack_id, eager_load=True)
    if row is None:
        raise exception.EntityNotFound(entity='Stack', name=stack_id)
    return row


def current_row(ctxt, stack, resource_name):
    """The resource's newest row not deleted.

    During a convergence replacement a stack holds two rows of one name
    (the old server and its replacement); the replacement is the newer.
    Only the columns recovery reads: watched every pass of an update,
    Heat's own read would join in every row's data and properties.
    """
    rows = [row for row in _named_rows(ctxt, stack.id, resource_name)
            if (row.action, row.status) != ('DELETE', 'COMPLETE')]
    if not rows:
        raise exception.ResourceNotFound(resource_name=resource_name,
                                         stack_name=stack.name)
    return max(rows, key=lambda row: row.id)


@heat_db.context_manager.reader
def _named_rows(context, stack_id, resource_name):
    model = heat_models.Resource
    return context.session.query(model).options(orm.load_only(
        model.id, model.physical_resource_id, model.action, model.status,
        model.status_reason)).filter_by(stack_id=stack_id,
                                        name=resource_name).all()


@heat_db.context_manager.reader
def stack_state(context, stack_id):
    """A stack not deleted: only the columns recovery reads of it.

    Heat's own read makes a versioned object of every column, several
    times per recovery step; its template is only read to load a stack.
    """
    model = heat_models.Stack
    row = context.session.query(model).options(orm.load_only(
        model.id, model.name, model.tenant, model.owner_id,
        model.parent_resource_name, model.action, model.status,
        model.current_traversal, model.raw_template_id,
        model.user_creds_id, model.deleted_at)).filter_by(
            id=stack_id).first()
    if row is None or row.deleted_at is not None:
        raise exception.EntityNotFound(entity='Stack', name=stack_id)
    return row


def resource_type(ctxt, stack, resource_name):
    """The type the stack's template gives the resource, as Heat shows it."""
    template = heat_db.raw_template_get(ctxt, stack.raw_template_id).template
    for section, key in (('resources', 'type'), ('Resources', 'Type')):
        definition = (template.get(section) or {}).get(resource_name)
        if isinstance(definition, dict) and definition.get(key):
            return definition[key]
    return None
