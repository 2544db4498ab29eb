"""The one place heat-health reads and writes its own tables.

A transaction factory of its own (configured from heat.conf ``[database]``)
keeps our sessions apart from Heat's, so a failure in ours can never roll
back, or be rolled back by, a Heat transaction.
"""

from oslo_db.sqlalchemy import enginefacade
import sqlalchemy as sa

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


# Target health decided by the monitor, and the health report.

def target_health_record(targets, events):
    """Update targets' health columns and add state-change events at once.

    :param targets: [{'id': target id, column: value, ...}]; rows may name
        different columns.
    :param events: [{column: value}] of heat_health_event rows.
    """
    by_columns = {}
    for row in targets:
        by_columns.setdefault(tuple(sorted(row)), []).append(row)
    with _facade.writer.using(_Session()) as session:
        for columns, rows in by_columns.items():
            values = {c: sa.bindparam('v_' + c) for c in columns if c != 'id'}
            session.execute(
                sa.update(models.Target.__table__).where(
                    models.Target.__table__.c.id == sa.bindparam('v_id')
                ).values(values),
                [{'v_' + c: v for c, v in row.items()} for row in rows])
        if events:
            session.execute(sa.insert(models.Event.__table__), events)


def event_get_recent(policy_ids, limit=50):
    """The newest state-change events of these policies, newest first."""
    if not policy_ids:
        return []
    with _facade.reader.using(_Session()) as session:
        rows = session.query(models.Event).filter(
            models.Event.policy_id.in_(list(policy_ids))).order_by(
                models.Event.id.desc()).limit(limit).all()
        for row in rows:
            session.expunge(row)
        return rows
