"""What the owning engine decides of its targets, fenced.

Each write lands only while the policy is this engine's under the
generation it holds, with a live lease, and the place still holds the
server the decision was about.
"""

from oslo_utils import timeutils
import sqlalchemy as sa

from heat_health.db import models
from heat_health.db import session as db_session


def _owned_by(engine_id, now):
    """Criteria: the target's policy is this engine's by a live lease."""
    P, T = models.Policy.__table__, models.Target.__table__
    return sa.exists().where(P.c.id == T.c.policy_id,
                             P.c.engine_id == engine_id,
                             P.c.generation == sa.bindparam('v_generation'),
                             P.c.lease_expires_at >= now)


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


# Targets checked and written per statement batch: a takeover stores
# thousands of first verdicts at once.
BATCH = 500


def _held_rows(session, engine_id, now, target_ids):
    """Targets whose policy is this engine's by a live lease, locked.

    {target id: (server id, state, policy generation)}. Read once for a
    batch, then written by id: the rows and their policies' rows stay as
    read until the commit (no other engine takes the policy, no reset
    lands in between), which one conditional UPDATE per row gave at
    several times the cost.
    """
    P, T = models.Policy.__table__, models.Target.__table__
    if session.get_bind().dialect.name == 'sqlite':
        # sqlite ignores FOR UPDATE, and a reader that writes later cannot
        # wait for its one write lock: it is taken before reading.
        session.execute(sa.update(T).where(sa.false()).values(id=T.c.id))
    query = sa.select(T.c.id, T.c.server_id, T.c.state,
                      P.c.generation).select_from(
        T.join(P, P.c.id == T.c.policy_id)).where(
        T.c.id.in_(sorted(target_ids)), P.c.engine_id == engine_id,
        P.c.lease_expires_at >= now).with_for_update()
    return {r.id: (r.server_id, r.state, r.generation)
            for r in session.execute(query)}


def _update_by_id(session, rows):
    """Write rows known to be this engine's to write, by id.

    ``rows``: [{'id', columns...}]; one statement per set of columns.
    """
    T = models.Target.__table__
    by_columns = {}
    for row in rows:
        by_columns.setdefault(tuple(sorted(c for c in row if c != 'id')),
                              []).append(row)
    for columns, group in by_columns.items():
        statement = sa.update(T).where(
            T.c.id == sa.bindparam('v_id')).values(
            {c: sa.bindparam('v_' + c) for c in columns})
        session.execute(statement, [{'v_' + c: v for c, v in r.items()}
                                    for r in group])


def _batches(items):
    for start in range(0, len(items), BATCH):
        yield items[start:start + BATCH]


@db_session.retry_on_deadlock
def target_transition(engine_id, changes):
    """Store state changes of targets, each only if still true; at once.

    :param changes: [{'target': {id, state, ...columns to set},
        'old_state': the state it is expected to be in, 'server_id': the
        server it was decided of, 'generation': the owning policy's
        generation as this engine holds it, 'event': heat_health_event
        row, or None for none}].
    A change is written only where the target is still in ``old_state``
    with that server, and its policy is still this engine's under that
    generation with a live lease. The event rows of the changes written
    are inserted in the same transaction. Returns the ids of the targets
    changed.
    """
    now = timeutils.utcnow()
    done = set()
    events = []
    with db_session.facade.writer.using(db_session.Session()) as session:
        for batch in _batches(changes):
            held = _held_rows(session, engine_id, now,
                              {c['target']['id'] for c in batch})
            rows, pending = [], set()
            for change in batch:
                values = change['target']
                if held.get(values['id']) != (change['server_id'],
                                              change['old_state'],
                                              change['generation']):
                    continue
                if values['id'] in pending:
                    # A second change of the target, expecting the state
                    # the first gave it: written after the first.
                    _update_by_id(session, rows)
                    rows, pending = [], set()
                pending.add(values['id'])
                held[values['id']] = (change['server_id'], values['state'],
                                      change['generation'])
                done.add(values['id'])
                rows.append(values)
                if change['event'] is not None:
                    events.append(change['event'])
            _update_by_id(session, rows)
        if events:
            session.execute(sa.insert(models.Event.__table__), events)
    return done


@db_session.retry_on_deadlock
def target_observations_store(engine_id, rows):
    """Store the latest observations of targets this engine owns.

    :param rows: [{'id', 'server_id' (the server observed),
        'generation', observation columns...}]; rows of a policy the
        engine no longer owns, or whose place holds another server now,
        are not written.
    """
    now = timeutils.utcnow()
    with db_session.facade.writer.using(db_session.Session()) as session:
        for batch in _batches(rows):
            held = _held_rows(session, engine_id, now,
                              {r['id'] for r in batch})
            _update_by_id(session, [
                {c: v for c, v in r.items()
                 if c not in ('server_id', 'generation')}
                for r in batch
                if r['id'] in held and
                (held[r['id']][0], held[r['id']][2]) == (
                    r['server_id'], r['generation'])])


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
    with db_session.facade.writer.using(db_session.Session()) as session:
        statement = _fenced_update(engine_id, timeutils.utcnow(),
                                   sorted(columns))
        return session.execute(statement, params).rowcount == 1
