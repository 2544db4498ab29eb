"""The one place heat-health reads and writes its own tables.

A transaction factory of its own (configured from heat.conf ``[database]``)
keeps our sessions apart from Heat's, so a failure in ours can never roll
back, or be rolled back by, a Heat transaction.
"""

import datetime

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
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

# Writes that lose a deadlock to another engine's transaction (MySQL rolls
# theirs back whole) run again: they read what they change in the same
# transaction, so a second run decides afresh.
_retry_on_deadlock = oslo_db_api.wrap_db_retry(max_retries=5,
                                               retry_on_deadlock=True)


def _detached(session, rows):
    for row in rows:
        session.expunge(row)
    return rows


@_retry_on_deadlock
def policy_create_or_update(values, grace_seconds=0):
    """Write a policy row; an existing one keeps its owner and lease.

    A policy enabled again gives its targets the grace, as a resumed stack
    does: what was seen while it was off is not judged before its servers
    were looked at again.
    """
    with _facade.writer.using(_Session()) as session:
        policy = session.get(models.Policy, values['id'])
        if policy is None:
            policy = models.Policy(**values)
            session.add(policy)
        else:
            if values.get('enabled') and not policy.enabled:
                _grace_targets(session, policy.id, grace_seconds)
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


@_retry_on_deadlock
def policy_delete(policy_id):
    """Delete a policy with its targets and events; True if it existed."""
    with _facade.writer.using(_Session()) as session:
        session.query(models.Event).filter_by(policy_id=policy_id).delete()
        session.query(models.Target).filter_by(policy_id=policy_id).delete()
        return bool(session.query(models.Policy).filter_by(
            id=policy_id).delete())


@_retry_on_deadlock
def policy_claim(engine_id, lease_seconds, policy_id=None,
                 ring_owner=None, members=None):
    """Renew this engine's leases, offer, and take; returns what it owns.

    :param ring_owner: policy id -> the engine that should own it (the
        engines' hash ring); None: this engine wants every policy.
    :param members: the live engines (from the coordination group), or
        None: a holder is then live as long as its lease runs.
    A policy held by a live lease stays with its holder; the holder offers
    it (``handoff_to``) when the ring names another engine, which takes it
    at its next claim: the policy is watched until that moment. A take
    bumps the policy's generation, in one conditional UPDATE on the
    generation read, so two engines never both take it and every write of
    the previous owner is fenced off from then on.
    """
    P = models.Policy
    now = timeutils.utcnow()
    expires = now + datetime.timedelta(seconds=lease_seconds)
    with _facade.writer.using(_Session()) as session:
        query = session.query(P.id, P.engine_id, P.lease_expires_at,
                              P.generation, P.handoff_to)
        if policy_id is not None:
            query = query.filter(P.id == policy_id)
        keep, offers, takes = [], {}, []
        for row in query.all():
            wanted_by = engine_id if ring_owner is None else ring_owner(
                row.id)
            live = (row.engine_id is not None and
                    row.lease_expires_at is not None and
                    row.lease_expires_at >= now and
                    (members is None or row.engine_id in members or
                     row.engine_id == engine_id))
            if live and row.engine_id == engine_id:
                keep.append(row.id)
                offer = None if wanted_by == engine_id else wanted_by
                if offer != row.handoff_to:
                    offers[row.id] = offer
            elif wanted_by == engine_id and (
                    not live or row.handoff_to == engine_id):
                takes.append((row.id, row.generation))
        if keep:
            session.query(P).filter(
                P.id.in_(keep), P.engine_id == engine_id,
                P.lease_expires_at >= now).update(
                    {'lease_expires_at': expires,
                     'updated_at': P.updated_at},
                    synchronize_session=False)
        for pid, offer in offers.items():
            session.query(P).filter(P.id == pid,
                                    P.engine_id == engine_id).update(
                {'handoff_to': offer, 'updated_at': P.updated_at},
                synchronize_session=False)
        for pid, generation in takes:
            session.query(P).filter(P.id == pid,
                                    P.generation == generation).update(
                {'engine_id': engine_id, 'lease_expires_at': expires,
                 'generation': generation + 1, 'handoff_to': None,
                 'updated_at': P.updated_at},
                synchronize_session=False)
    with _facade.reader.using(_Session()) as session:
        query = session.query(P).filter(P.engine_id == engine_id,
                                        P.lease_expires_at >= now)
        if policy_id is not None:
            query = query.filter(P.id == policy_id)
        return _detached(session, query.order_by(P.id).all())


def policy_other_owners(engine_id):
    """Engines other than this one holding a lease that has not expired."""
    now = timeutils.utcnow()
    with _facade.reader.using(_Session()) as session:
        rows = session.query(models.Policy.engine_id).filter(
            models.Policy.engine_id.isnot(None),
            models.Policy.engine_id != engine_id,
            models.Policy.lease_expires_at >= now).distinct().all()
        return sorted(row[0] for row in rows)


@_retry_on_deadlock
def policy_release(engine_id):
    """Give up this engine's policies so another may claim them at once."""
    with _facade.writer.using(_Session()) as session:
        return session.query(models.Policy).filter_by(
            engine_id=engine_id).update(
                {'engine_id': None, 'lease_expires_at': None,
                 'handoff_to': None, 'updated_at': models.Policy.updated_at},
                synchronize_session=False)


@_retry_on_deadlock
def policy_set_suspended(policy_id, suspended, grace_seconds=0):
    """Follow the stack's suspend/resume; True if the policy exists.

    On resume its targets get the grace: what was seen of them while
    suspended is not judged before they had time to start again.
    """
    with _facade.writer.using(_Session()) as session:
        found = bool(session.query(models.Policy).filter_by(
            id=policy_id).update({'suspended': suspended},
                                 synchronize_session=False))
        if found and not suspended:
            _grace_targets(session, policy_id, grace_seconds)
        return found


def _grace_targets(session, policy_id, grace_seconds):
    session.query(models.Target).filter_by(policy_id=policy_id).update(
        {'grace_until': timeutils.utcnow() + datetime.timedelta(
            seconds=grace_seconds)}, synchronize_session=False)


def _recreating(row):
    return (row.state in ('RECOVERING', 'VERIFYING') and
            (row.recovery or {}).get('action') == 'RECREATE')


def _replaced_by_recovery(row, found, now):
    """The row of a place whose RECREATE happened: VERIFYING, new server.

    Attempts and the recovery stay; verification starts now, with the
    deadline the recovery was given.
    """
    recovery = dict(row.recovery)
    seconds = recovery.get('verify_seconds') or 0
    recovery.update(stage='replaced', new_server_id=found['server_id'],
                    started_at=now.isoformat(),
                    deadline=(now + datetime.timedelta(
                        seconds=seconds)).isoformat())
    reason = 'server %s replaced by %s (RECREATE): verifying' % (
        row.server_id, found['server_id'])
    event = {'policy_id': row.policy_id, 'server_id': found['server_id'],
             'path': row.path,
             'old_state': row.state, 'new_state': 'VERIFYING',
             'reason': reason[:255], 'source': 'recovery',
             'created_at': now}
    values = _new_server_values(found['server_id'], now, None, reason)
    values.update(state='VERIFYING', recovery=recovery,
                  addresses=list(found.get('addresses') or ()))
    for key, value in values.items():
        setattr(row, key, value)
    return event


def policy_set_braked(engine_id, policy_id, generation, reason):
    """Store why the policy stopped acting (None: it acts again).

    Only its owner under that generation writes it. True if written.
    """
    now = timeutils.utcnow()
    with _facade.writer.using(_Session()) as session:
        return bool(session.query(models.Policy).filter_by(
            id=policy_id, engine_id=engine_id, generation=generation).update(
                {'braked': reason and reason[:255],
                 'braked_since': reason and now},
                synchronize_session=False))


# A policy's error is at most this long (its column's length).
POLICY_ERROR_MAX = models.Policy.error.type.length


def policy_set_error(engine_id, policy_id, generation, error):
    """Store why the policy cannot be watched fully (None: it can).

    Only its owner under that generation writes it; the time is kept
    while the error stays the same. True if written.
    """
    error = error and error[:POLICY_ERROR_MAX]
    with _facade.writer.using(_Session()) as session:
        query = session.query(models.Policy).filter_by(
            id=policy_id, engine_id=engine_id, generation=generation)
        row = query.first()
        if row is None:
            return False
        if row.error == error:
            return True
        since = row.error_since if row.error else timeutils.utcnow()
        return bool(query.update(
            {'error': error, 'error_since': error and since},
            synchronize_session=False))


@_retry_on_deadlock
def policy_set_paused(policy_ids, pause, user, reason=None):
    """Pause these policies' healing, or resume it, for ``user``.

    Any engine may write it (an operator's request, not a decision of the
    owner, so no fencing): the owner reads it at its next claim. Only the
    policies whose pause changes are written, each with its timeline row
    in the same transaction. Returns the ids of those.
    """
    P = models.Policy
    now = timeutils.utcnow()
    if pause:
        text = 'paused by %s' % user + (': %s' % reason if reason else '')
    else:
        text = 'resumed by %s' % user
    with _facade.writer.using(_Session()) as session:
        query = session.query(P.id).filter(P.id.in_(list(policy_ids)))
        query = query.filter(P.paused_at.is_(None) if pause
                             else P.paused_at.isnot(None))
        changed = sorted(row.id for row in query)
        if not changed:
            return []
        session.query(P).filter(P.id.in_(changed)).update(
            {'paused_at': now if pause else None,
             'paused_by': user[:255] if pause else None,
             'paused_reason': reason[:255] if pause and reason else None,
             'updated_at': P.updated_at},
            synchronize_session=False)
        session.execute(sa.insert(models.Event.__table__), [{
            'policy_id': policy_id, 'server_id': None, 'old_state': None,
            'new_state': 'PAUSED' if pause else 'RESUMED',
            'reason': text[:255], 'source': 'operator', 'created_at': now}
            for policy_id in changed])
    return changed


def event_add(events):
    """Store timeline rows that are not state changes (holds, brakes)."""
    if not events:
        return
    with _facade.writer.using(_Session()) as session:
        session.execute(sa.insert(models.Event.__table__),
                        [dict(e, reason=(e.get('reason') or '')[:255])
                         for e in events])


def leftovers(recovery, marked=True):
    """What a finished recovery still has to undo, or None.

    Members it drained and did not restore yet (``drained``, of the
    server ``drained_of``), and the server whose resource it marked
    CHECK_FAILED (``marked_failed``).
    """
    recovery = recovery or {}
    left = {}
    if recovery.get('drained') and not recovery.get('restored'):
        left['drained'] = recovery['drained']
        if recovery.get('drained_of'):
            left['drained_of'] = recovery['drained_of']
    if marked and recovery.get('marked_failed'):
        left['marked_failed'] = recovery['marked_failed']
    return left or None


def drained_members(pool_ids):
    """{pool id: {address}} of members a recovery drained and holds so.

    Those drained (recorded before the weight changed) and neither given
    back nor being given back: whoever sends a pool's full member list
    sends them at weight 0, whatever weight it read.
    """
    wanted = set(pool_ids)
    found = {}
    if not wanted:
        return found
    T = models.Target
    with _facade.reader.using(_Session()) as session:
        rows = session.query(T.recovery).filter(T.recovery.isnot(None))
        for (recovery,) in rows:
            recovery = recovery or {}
            if recovery.get('restored') or recovery.get('restoring'):
                continue
            for pool_id, member in (recovery.get('drained') or {}).items():
                if pool_id in wanted and member:
                    found.setdefault(pool_id, set()).add(member[0])
    return found


@_retry_on_deadlock
def target_reset(stack_id, resource_name, reason):
    """A user said the resource is healthy: forget its failure.

    The rows of that place (every policy watching it) in a failed or
    recovery state start again NO_DATA, attempts forgotten; any engine
    may write this (the owner follows the newer stored state). Returns
    the number of rows reset.
    """
    now = timeutils.utcnow()
    T = models.Target
    with _facade.writer.using(_Session()) as session:
        rows = session.query(T).filter(
            T.stack_id == stack_id, T.resource_name == resource_name,
            T.state.in_(['SUSPECT', 'UNHEALTHY', 'RECOVERING', 'VERIFYING',
                         'GAVE_UP'])).all()
        for row in rows:
            session.add(models.Event(
                policy_id=row.policy_id, server_id=row.server_id,
                path=row.path, old_state=row.state, new_state='NO_DATA',
                reason=reason[:255], source='api', created_at=now))
            row.state = 'NO_DATA'
            row.state_reason = reason[:255]
            row.state_since = now
            # Drained members still get their weight back; the user's
            # reset cleared the resource's CHECK_FAILED itself.
            row.recovery = leftovers(row.recovery, marked=False)
            row.attempts = 0
            row.first_attempt_at = None
            row.next_attempt_at = None
            row.observation = None
            row.observed_at = None
        return len(rows)


def _owned_by(engine_id, now):
    """Criteria: the target's policy is this engine's by a live lease."""
    P, T = models.Policy.__table__, models.Target.__table__
    return sa.exists().where(P.c.id == T.c.policy_id,
                             P.c.engine_id == engine_id,
                             P.c.generation == sa.bindparam('v_generation'),
                             P.c.lease_expires_at >= now)


def owner_index(server_ids=None):
    """{server id: {engine id, ...}} of the servers watched by live leases.

    Deployment-wide: every consumer of Nova's notifications knows which
    engine to hand news of a server to.
    """
    P, T = models.Policy, models.Target
    now = timeutils.utcnow()
    index = {}
    with _facade.reader.using(_Session()) as session:
        query = session.query(T.server_id, P.engine_id).join(
            P, P.id == T.policy_id).filter(P.engine_id.isnot(None),
                                           P.lease_expires_at >= now)
        if server_ids is not None:
            query = query.filter(T.server_id.in_(sorted(server_ids)))
        for server_id, engine in query:
            index.setdefault(server_id, set()).add(engine)
    return index


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


def _new_server_values(server_id, now, grace_until, reason):
    """A place's columns when a (new) server is there: no verdict yet."""
    return {'server_id': server_id, 'state': 'NO_DATA',
            'state_reason': reason[:255], 'state_since': now,
            'grace_until': grace_until, 'server_name': None,
            'observation': None, 'observation_reason': None,
            'observation_source': None, 'observed_at': None}


@oslo_db_api.wrap_db_retry(max_retries=3, retry_on_deadlock=True,
                           exception_checker=lambda e: isinstance(
                               e, db_exc.DBDuplicateEntry))
def target_sync(policy_id, places, grace_seconds, graced=()):
    """Make the policy's target rows match the places found in Heat.

    :param places: {(stack_id, resource_name): {server_id, path,
        addresses}} as found in Heat's database now.
    :param graced: places whose resource has just ended a stack action:
        their grace starts again.
    New places start NO_DATA within the grace; a place whose server was
    replaced keeps its row (and history) with the new server, NO_DATA;
    places gone from the stack are removed. Idempotent: two engines
    syncing at once both end with the same rows (a duplicate insert is
    retried against the rows the other stored).
    Returns (added, removed, replaced) lists of places.
    """
    now = timeutils.utcnow()
    grace_until = now + datetime.timedelta(seconds=grace_seconds)
    events = []
    with _facade.writer.using(_Session()) as session:
        existing = {(row.stack_id, row.resource_name): row
                    for row in session.query(models.Target).filter_by(
                        policy_id=policy_id)}
        removed = sorted(set(existing) - set(places))
        if removed:
            session.query(models.Target).filter(models.Target.id.in_(
                [existing[place].id for place in removed])).delete(
                    synchronize_session=False)
        added = sorted(set(places) - set(existing))
        for place in added:
            found = places[place]
            session.add(models.Target(
                policy_id=policy_id, stack_id=place[0],
                resource_name=place[1], path=found['path'],
                addresses=list(found.get('addresses') or ()),
                **_new_server_values(found['server_id'], now, grace_until,
                                     'registered, no verdict yet')))
        replaced = []
        for place in set(places) & set(existing):
            row, found = existing[place], places[place]
            if row.path != found['path']:
                row.path = found['path']
            if (row.server_id != found['server_id'] and
                    _recreating(row)):
                # Our own recovery's replacement: verify the new server.
                replaced.append(place)
                events.append(_replaced_by_recovery(row, found, now))
                continue
            if row.server_id != found['server_id']:
                replaced.append(place)
                reason = 'server %s replaced by %s' % (row.server_id,
                                                       found['server_id'])
                events.append({'policy_id': policy_id,
                               'server_id': found['server_id'],
                               'path': found['path'],
                               'old_state': row.state,
                               'new_state': 'NO_DATA', 'reason': reason,
                               'source': 'heat', 'created_at': now})
                for key, value in _new_server_values(
                        found['server_id'], now, grace_until,
                        reason).items():
                    setattr(row, key, value)
                row.addresses = list(found.get('addresses') or ())
            elif place in graced:
                row.grace_until = grace_until
            if found.get('addresses') and row.addresses != list(
                    found['addresses']):
                row.addresses = list(found['addresses'])
        if events:
            session.execute(sa.insert(models.Event.__table__), events)
    return added, removed, sorted(replaced)


# Target health decided by the monitor, and the health report.

def _fenced_update(engine_id, now, columns, extra=()):
    """UPDATE of target ``v_id`` while it holds server ``v_server_id``.

    What was seen or decided of a server never lands on the server Heat
    put at its place since (the row is the place's).
    """
    T = models.Target.__table__
    return sa.update(T).where(
        T.c.id == sa.bindparam('v_id'),
        T.c.server_id == sa.bindparam('v_server_id'),
        _owned_by(engine_id, now),
        *extra).values({c: sa.bindparam('v_' + c) for c in columns})


def target_transition(engine_id, changes):
    """Store state changes of targets, each only if still true; at once.

    :param changes: [{'target': {id, state, ...columns to set},
        'old_state': the state it is expected to be in, 'server_id': the
        server it was decided of, 'generation': the owning policy's
        generation as this engine holds it, 'event': heat_health_event
        row, or None for none}].
    A change is written only where the target is still in ``old_state``
    with that server, and its policy is still this engine's under that
    generation with a live lease: one conditional UPDATE each. The event
    rows of the
    changes written are inserted in the same transaction.
    Returns the ids of the targets changed.
    """
    T = models.Target.__table__
    now = timeutils.utcnow()
    done = set()
    events = []
    with _facade.writer.using(_Session()) as session:
        for change in changes:
            values = change['target']
            columns = sorted(c for c in values if c != 'id')
            statement = _fenced_update(
                engine_id, now, columns,
                [T.c.state == sa.bindparam('v_old_state')])
            params = {'v_' + c: v for c, v in values.items()}
            params.update(v_old_state=change['old_state'],
                          v_server_id=change['server_id'],
                          v_generation=change['generation'])
            if session.execute(statement, params).rowcount == 1:
                done.add(values['id'])
                if change['event'] is not None:
                    events.append(change['event'])
        if events:
            session.execute(sa.insert(models.Event.__table__), events)
    return done


def target_observations_store(engine_id, rows):
    """Store the latest observations of targets this engine owns.

    :param rows: [{'id', 'server_id' (the server observed),
        'generation', observation columns...}]; rows of a policy the
        engine no longer owns, or whose place holds another server now,
        are not written.
    """
    by_columns = {}
    for row in rows:
        by_columns.setdefault(tuple(sorted(row)), []).append(row)
    now = timeutils.utcnow()
    with _facade.writer.using(_Session()) as session:
        for columns, group in by_columns.items():
            statement = _fenced_update(
                engine_id, now,
                [c for c in columns
                 if c not in ('id', 'server_id', 'generation')])
            session.execute(statement, [{'v_' + c: v for c, v in r.items()}
                                        for r in group])


def target_store_columns(engine_id, target_id, server_id, generation,
                         columns):
    """Store columns of one target this engine owns; True if stored.

    Fenced as a state change is (the policy this engine's under
    ``generation``, the place still holding ``server_id``); False when
    that no longer holds and nothing was written.
    """
    params = {'v_' + c: v for c, v in columns.items()}
    params.update(v_id=target_id, v_server_id=server_id,
                  v_generation=generation)
    with _facade.writer.using(_Session()) as session:
        statement = _fenced_update(engine_id, timeutils.utcnow(),
                                   sorted(columns))
        return session.execute(statement, params).rowcount == 1


def target_get_rows(target_ids):
    """{target id: row} as stored (detached)."""
    with _facade.reader.using(_Session()) as session:
        rows = session.query(models.Target).filter(
            models.Target.id.in_(sorted(target_ids))).all()
        return {row.id: row for row in _detached(session, rows)}


def event_get_after(policy_ids, marker=None, since=None, limit=None):
    """Events of these policies, oldest first.

    Only those after ``marker`` (an event id) and at or after ``since``;
    the newest ``limit`` of them.
    """
    if not policy_ids:
        return []
    E = models.Event
    with _facade.reader.using(_Session()) as session:
        query = session.query(E).filter(E.policy_id.in_(list(policy_ids)))
        if marker is not None:
            query = query.filter(E.id > marker)
        if since is not None:
            query = query.filter(E.created_at >= since)
        rows = query.order_by(E.id.desc()).limit(limit).all()
        for row in rows:
            session.expunge(row)
        return rows[::-1]


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
