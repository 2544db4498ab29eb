"""The one place heat-health reads and writes its own tables.

A transaction factory of its own (configured from heat.conf ``[database]``)
keeps our sessions apart from Heat's, so a failure in ours can never roll
back, or be rolled back by, a Heat transaction.
"""

from oslo_db.sqlalchemy import enginefacade

from heat_health.db import models

_facade = enginefacade.transaction_context()


def get_engine():
    return _facade.writer.get_engine()


def marking_create(values):
    with _facade.writer.using(_Session()) as session:
        marking = models.Marking(**values)
        session.add(marking)
        session.flush()
        session.refresh(marking)
        session.expunge(marking)
        return marking


def marking_get_all_by_stack(stack_id, limit=None):
    """Markings of a stack and its nested stacks, newest first."""
    with _facade.reader.using(_Session()) as session:
        query = session.query(models.Marking).filter_by(
            stack_id=stack_id).order_by(models.Marking.id.desc())
        if limit:
            query = query.limit(limit)
        markings = query.all()
        for marking in markings:
            session.expunge(marking)
        return markings


@enginefacade.transaction_context_provider
class _Session(object):
    """Carrier for enginefacade's per-call transaction state."""
