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
    with db_session.facade.writer.using(db_session.Session()) as session:
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
    with db_session.facade.writer.using(db_session.Session()) as session:
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
    with db_session.facade.writer.using(db_session.Session()) as session:
        statement = _fenced_update(engine_id, timeutils.utcnow(),
                                   sorted(columns))
        return session.execute(statement, params).rowcount == 1
