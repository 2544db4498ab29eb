"""The timeline: markings asked through the API and every state change."""

import sqlalchemy as sa

from heat_health.db import models
from heat_health.db import session as db_session


def marking_create(values):
    with db_session.facade.writer.using(db_session.Session()) as session:
        marking = models.Marking(**values)
        session.add(marking)
        session.flush()
        session.refresh(marking)
        session.expunge(marking)
        return marking


def marking_get_all_by_stack(stack_id, limit=None):
    """Markings of a stack and its nested stacks, newest first."""
    with db_session.facade.reader.using(db_session.Session()) as session:
        query = session.query(models.Marking).filter_by(
            stack_id=stack_id).order_by(models.Marking.id.desc())
        if limit:
            query = query.limit(limit)
        markings = query.all()
        for marking in markings:
            session.expunge(marking)
        return markings


def marking_last_of(physical_resource_id, owner_stack_id, resource_name):
    """The latest marking of the resource holding that physical id, or None.

    By its physical id (indexed), then its stack and name.
    """
    with db_session.facade.reader.using(db_session.Session()) as session:
        marking = session.query(models.Marking).filter_by(
            physical_resource_id=physical_resource_id,
            owner_stack_id=owner_stack_id,
            resource_name=resource_name).order_by(
                models.Marking.id.desc()).first()
        if marking is not None:
            session.expunge(marking)
        return marking


def event_add(events):
    """Store timeline rows that are not state changes (holds, brakes).

    Each may have a ``detail`` (a dict: crash evidence).
    """
    if not events:
        return
    with db_session.facade.writer.using(db_session.Session()) as session:
        session.execute(sa.insert(models.Event.__table__),
                        [dict(e, reason=(e.get('reason') or '')[:255],
                              detail=e.get('detail'))
                         for e in events])


def _event_rows(session):
    """A query of events as plain rows (read by attribute, like a model).

    Neither ORM instances nor objects: a timeline page holds up to 1,000.
    """
    return session.query(*models.Event.__table__.columns)


def event_get_after(policy_ids, marker=None, since=None, limit=None):
    """Events of these policies, oldest first.

    Only those after ``marker`` (an event id) and at or after ``since``;
    the newest ``limit`` of them.
    """
    if not policy_ids:
        return []
    E = models.Event
    with db_session.facade.reader.using(db_session.Session()) as session:
        query = _event_rows(session).filter(E.policy_id.in_(list(policy_ids)))
        if marker is not None:
            query = query.filter(E.id > marker)
        if since is not None:
            query = query.filter(E.created_at >= since)
        return query.order_by(E.id.desc()).limit(limit).all()[::-1]


def event_get_recent(policy_ids, limit=50):
    """The newest state-change events of these policies, newest first."""
    if not policy_ids:
        return []
    E = models.Event
    with db_session.facade.reader.using(db_session.Session()) as session:
        return _event_rows(session).filter(
            E.policy_id.in_(list(policy_ids))).order_by(
                E.id.desc()).limit(limit).all()
