"""The one place heat-health reads and writes its own tables.

A transaction factory of its own (configured from heat.conf ``[database]``)
keeps our sessions apart from Heat's, so a failure in ours can never roll
back, or be rolled back by, a Heat transaction.
"""

import datetime

from oslo_db.sqlalchemy import enginefacade
from oslo_utils import timeutils
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


# Health policies, their targets and events (the registry).

def _detached(session, rows):
    for row in rows:
        session.expunge(row)
    return rows


def policy_create_or_update(values):
    """Write a policy row; an existing one keeps its owner and lease."""
    with _facade.writer.using(_Session()) as session:
        policy = session.get(models.Policy, values['id'])
        if policy is None:
            policy = models.Policy(**values)
            session.add(policy)
        else:
            for key, value in values.items():
                setattr(policy, key, value)
        session.flush()
        session.refresh(policy)
        return _detached(session, [policy])[0]


def policy_get(policy_id):
    with _facade.reader.using(_Session()) as session:
        policy = session.get(models.Policy, policy_id)
        return policy and _detached(session, [policy])[0]


def policy_get_all_by_stack(stack_id):
    with _facade.reader.using(_Session()) as session:
        return _detached(session, session.query(models.Policy).filter_by(
            stack_id=stack_id).order_by(models.Policy.created_at).all())


def policy_delete(policy_id):
    """Delete a policy with its targets and events; True if it existed."""
    with _facade.writer.using(_Session()) as session:
        session.query(models.Event).filter_by(policy_id=policy_id).delete()
        session.query(models.Target).filter_by(policy_id=policy_id).delete()
        return bool(session.query(models.Policy).filter_by(
            id=policy_id).delete())


def _claimable(engine_id, now):
    return sa.or_(models.Policy.engine_id == engine_id,
                  models.Policy.engine_id.is_(None),
                  models.Policy.lease_expires_at.is_(None),
                  models.Policy.lease_expires_at < now)


def policy_claim(engine_id, lease_seconds, policy_id=None):
    """Renew this engine's leases and take the unowned or expired ones.

    One conditional UPDATE: two engines racing for an expired policy cannot
    both match it, so a policy never has two owners. Returns the policies
    this engine owns afterwards (only policy_id's if given).
    """
    now = timeutils.utcnow()
    expires = now + datetime.timedelta(seconds=lease_seconds)
    with _facade.writer.using(_Session()) as session:
        query = session.query(models.Policy).filter(
            _claimable(engine_id, now))
        if policy_id is not None:
            query = query.filter(models.Policy.id == policy_id)
        query.update({'engine_id': engine_id, 'lease_expires_at': expires,
                      'updated_at': models.Policy.updated_at},
                     synchronize_session=False)
    with _facade.reader.using(_Session()) as session:
        query = session.query(models.Policy).filter_by(engine_id=engine_id)
        if policy_id is not None:
            query = query.filter(models.Policy.id == policy_id)
        return _detached(session, query.order_by(models.Policy.id).all())


def policy_other_owners(engine_id):
    """Engines other than this one holding a lease that has not expired."""
    now = timeutils.utcnow()
    with _facade.reader.using(_Session()) as session:
        rows = session.query(models.Policy.engine_id).filter(
            models.Policy.engine_id.isnot(None),
            models.Policy.engine_id != engine_id,
            models.Policy.lease_expires_at >= now).distinct().all()
        return sorted(row[0] for row in rows)


def policy_release(engine_id):
    """Give up this engine's policies so another may claim them at once."""
    with _facade.writer.using(_Session()) as session:
        return session.query(models.Policy).filter_by(
            engine_id=engine_id).update(
                {'engine_id': None, 'lease_expires_at': None,
                 'updated_at': models.Policy.updated_at},
                synchronize_session=False)


def target_get_all(policy_ids):
    """{policy_id: [targets ordered by path]} for the given policies."""
    result = {policy_id: [] for policy_id in policy_ids}
    if not result:
        return result
    with _facade.reader.using(_Session()) as session:
        rows = session.query(models.Target).filter(
            models.Target.policy_id.in_(list(result))).order_by(
                models.Target.policy_id, models.Target.path).all()
        for row in _detached(session, rows):
            result[row.policy_id].append(row)
    return result


_LOCATION = ('stack_id', 'resource_name', 'path', 'addresses')


def target_details_update(details):
    """Store server names and addresses learnt from Nova, in one go.

    :param details: {target id: (server_name, [address, ...])}.
    """
    if not details:
        return
    with _facade.writer.using(_Session()) as session:
        for target_id, (name, addresses) in details.items():
            session.query(models.Target).filter_by(id=target_id).update(
                {'server_name': name, 'addresses': list(addresses)},
                synchronize_session=False)


def target_sync(policy_id, resolved, grace_seconds):
    """Make the policy's target rows match ``resolved``.

    :param resolved: {server_id: {stack_id, resource_name, path,
        addresses}} as found in Heat's database now.
    New servers start INIT within the grace; known ones keep their state
    and only follow where they are; vanished ones are removed.
    Returns (added, removed) server ids.
    """
    now = timeutils.utcnow()
    with _facade.writer.using(_Session()) as session:
        existing = {row.server_id: row for row in session.query(
            models.Target).filter_by(policy_id=policy_id)}
        removed = sorted(set(existing) - set(resolved))
        if removed:
            session.query(models.Target).filter(
                models.Target.policy_id == policy_id,
                models.Target.server_id.in_(removed)).delete(
                    synchronize_session=False)
        added = sorted(set(resolved) - set(existing))
        for server_id in added:
            session.add(models.Target(
                policy_id=policy_id, server_id=server_id, state='INIT',
                state_reason='registered, within the grace after creation',
                state_since=now,
                grace_until=now + datetime.timedelta(seconds=grace_seconds),
                **{k: resolved[server_id][k] for k in _LOCATION}))
        for server_id in set(resolved) & set(existing):
            row = existing[server_id]
            for key in _LOCATION:
                value = resolved[server_id][key]
                if key == 'addresses' and not value:
                    continue  # keep what a detector learnt from Nova
                if getattr(row, key) != value:
                    setattr(row, key, value)
    return added, removed


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
