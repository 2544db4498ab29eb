"""Health policies: their rows, who owns each (leases), pause and brake."""

import datetime
import functools

from oslo_utils import timeutils
import sqlalchemy as sa

from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.db import targets


@db_session.retry_on_deadlock
def policy_create_or_update(values, grace_seconds=0):
    """Write a policy row; an existing one keeps its owner and lease.

    A policy enabled again gives its targets the grace, as a resumed stack
    does: what was seen while it was off is not judged before its servers
    were looked at again.
    """
    with db_session.facade.writer.using(db_session.Session()) as session:
        policy = session.get(models.Policy, values['id'])
        if policy is None:
            policy = models.Policy(**values)
            session.add(policy)
        else:
            if values.get('enabled') and not policy.enabled:
                targets.grace_targets(session, policy.id, grace_seconds)
            if is_deleted(policy):
                # Kept deleted for its leftovers, now registered again: a
                # new policy, with no brake of the old one, told apart by
                # its creation (its rows keep what is still to undo).
                policy.created_at = timeutils.utcnow()
                policy.braked = policy.braked_since = None
            for key, value in values.items():
                setattr(policy, key, value)
        session.flush()
        session.refresh(policy)
        return db_session.detached(session, [policy])[0]


def policy_get(policy_id):
    with db_session.facade.reader.using(db_session.Session()) as session:
        policy = session.get(models.Policy, policy_id)
        return policy and db_session.detached(session, [policy])[0]


# The spec key of a policy deleted whose rows still hold what recovery
# left (members drained, marks): kept, disabled, until that is undone.
DELETED = 'deleted'


def is_deleted(policy):
    """Whether the policy was deleted and waits to undo its leftovers."""
    return bool((policy.spec or {}).get(DELETED))


def policy_get_all_by_stack(stack_id):
    """The stack's policies, none deleted."""
    with db_session.facade.reader.using(db_session.Session()) as session:
        rows = session.query(models.Policy).filter_by(
            stack_id=stack_id).order_by(models.Policy.created_at).all()
        return [p for p in db_session.detached(session, rows)
                if not is_deleted(p)]


@db_session.retry_on_deadlock
def policy_delete(policy_id, only_deleted=False):
    """Delete a policy with its targets and events; True if it existed.

    :param only_deleted: only if it still waits as deleted (not registered
        again since).
    """
    with db_session.facade.writer.using(db_session.Session()) as session:
        if only_deleted:
            policy = session.get(models.Policy, policy_id)
            if policy is None or not is_deleted(policy):
                return False
        session.query(models.Event).filter_by(policy_id=policy_id).delete()
        session.query(models.Target).filter_by(policy_id=policy_id).delete()
        return bool(session.query(models.Policy).filter_by(
            id=policy_id).delete())


@db_session.retry_on_deadlock
def policy_keep_deleted(policy_id, gone):
    """Keep a deleted policy for what its rows still owe; True if found.

    Its rows ``gone`` (ids of those with nothing left to undo) go; it is
    disabled and flagged ``DELETED``: nothing watches or acts on it, its
    owner only undoes what the others hold, then deletes it. Registered
    again, its spec is written anew and the flag goes.
    """
    with db_session.facade.writer.using(db_session.Session()) as session:
        policy = session.get(models.Policy, policy_id)
        if policy is None:
            return False
        if gone:
            session.query(models.Target).filter(
                models.Target.policy_id == policy_id,
                models.Target.id.in_(list(gone))).delete(
                    synchronize_session=False)
        spec = dict(policy.spec or {})
        spec[DELETED] = True
        policy.spec = spec
        policy.enabled = False
        return True


# What changes in a policy's row whenever anything but its lease does: an
# owner that knows these of a policy need not read its row (and its spec)
# again at every claim.
CLAIM_KEY = (models.Policy.generation, models.Policy.updated_at,
             models.Policy.targets_version, models.Policy.enabled,
             models.Policy.suspended, models.Policy.paused_at,
             models.Policy.braked, models.Policy.error,
             models.Policy.handoff_to)


@db_session.retry_on_deadlock
def policy_claim(engine_id, lease_seconds, policy_id=None,
                 ring_owner=None, members=None, known=None, take_limit=None,
                 digest=None, observed=None):
    """Renew this engine's leases, offer, and take; returns what it owns.

    :param ring_owner: policy id -> the engine that should own it (the
        engines' hash ring); None: this engine wants every policy.
    :param members: the live engines (from the coordination group), or
        None: a holder is then live as long as its lease runs.
    :param known: {policy id: its ``CLAIM_KEY`` values} the caller holds
        rows of: then only the rows of the others (and of those whose key
        changed) are read, and (rows, {policy id: key} of every policy
        owned, the digest of this engine's rows) is returned.
    :param take_limit: most policies taken in this claim (None: all due),
        the others at the next claims: those nobody watches first, then
        those a live holder offers (watched by it until taken).
    :param digest: with ``known``, the digest the last claim returned,
        under the same ring: while this engine's rows give it still, none
        of their leases is due and there is nothing to take, none of its
        rows is read (the keys known and this very digest are returned).
    :param observed: called when leases are renewed: {policy id: when its
        detectors last confirmed what is stored}, stored with the leases
        (``observed_through``).
    A policy held by a live lease stays with its holder; the holder offers
    it (``handoff_to``) when the ring names another engine, which takes it
    at its next claim: the policy is watched until that moment. A take
    bumps the policy's generation, in one conditional UPDATE on the
    generation read, so two engines never both take it and every write of
    the previous owner is fenced off from then on.

    Only the rows this engine holds and those it may take are read: a
    policy another live engine holds and does not offer it is none of its
    business, and reading a thousand rows at every tick would cost more
    than the rest of the claim.
    """
    P = models.Policy
    now = timeutils.utcnow()

    def decide(rows):
        return _decide(engine_id, lease_seconds, now, ring_owner, members,
                       rows)
    with db_session.facade.writer.using(db_session.Session()) as session:
        others = _takeable(session, engine_id, now, policy_id, members)
        takes = decide(others)[2]
        if known is not None and digest is not None and not takes and (
                _held_digest(session, engine_id, lease_seconds, now) ==
                (0, digest)):
            return [], dict(known), digest
        mine = _held(session, engine_id, policy_id, known is not None)
        keep, offers, taken_back = decide(mine)
        takes += taken_back
        if take_limit is not None:
            takes = sorted(takes)[:take_limit]
        if keep:
            _renew(session, engine_id, lease_seconds, now, keep,
                   observed=observed() if observed else None)
        for pid, offer in offers.items():
            session.query(P).filter(P.id == pid,
                                    P.engine_id == engine_id).update(
                {'handoff_to': offer, 'updated_at': P.updated_at},
                synchronize_session=False)
        for _live, pid, generation in takes:
            session.query(P).filter(P.id == pid,
                                    P.generation == generation).update(
                {'engine_id': engine_id,
                 'lease_expires_at': _expires(now, lease_seconds),
                 'generation': generation + 1, 'handoff_to': None,
                 'updated_at': P.updated_at},
                synchronize_session=False)
        if known is not None and not (offers or takes):
            # Nothing but leases written: what this engine holds is what
            # it read.
            keys = {row.id: tuple(row[len(_MINE):]) for row in mine
                    if row.lease_expires_at is not None and
                    row.lease_expires_at >= now}
            return (_changed_rows(session, known, keys), keys,
                    _held_digest(session, engine_id, lease_seconds, now)[1])
    with db_session.facade.reader.using(db_session.Session()) as session:
        query = session.query(P).filter(P.engine_id == engine_id,
                                        P.lease_expires_at >= now)
        if policy_id is not None:
            query = query.filter(P.id == policy_id)
        if known is None:
            return db_session.detached(session, query.order_by(P.id).all())
        keys = {row[0]: tuple(row[1:]) for row in query.with_entities(
            P.id, *CLAIM_KEY)}
        return (_changed_rows(session, known, keys), keys,
                _held_digest(session, engine_id, lease_seconds, now)[1])


def _decide(engine_id, lease_seconds, now, ring_owner, members, rows):
    """(leases to renew, {policy id: engine offered}, takes) of rows."""
    held, due, offers, takes = [], False, {}, []
    for row in rows:
        wanted_by = engine_id if ring_owner is None else ring_owner(row.id)
        live = (row.engine_id is not None and
                row.lease_expires_at is not None and
                row.lease_expires_at >= now and
                (members is None or row.engine_id in members or
                 row.engine_id == engine_id))
        if live and row.engine_id == engine_id:
            held.append(row.id)
            due = due or (row.lease_expires_at <
                          _renew_before(now, lease_seconds))
            offer = None if wanted_by == engine_id else wanted_by
            if offer != row.handoff_to:
                offers[row.id] = offer
        elif wanted_by == engine_id and (
                not live or row.handoff_to == engine_id):
            takes.append((live, row.id, row.generation))
    # One due, all renewed: leases renewed together fall due together, so
    # that the rows held are read by one claim in a third of a lease, not
    # by a claim at every tick for the lease of the moment.
    return held if due else [], offers, takes


# What a claim reads of a row another engine may hold, and of one this
# engine holds (then followed by its ``CLAIM_KEY``, which has the rest).
_HEAD = (models.Policy.id, models.Policy.engine_id,
         models.Policy.lease_expires_at, models.Policy.generation,
         models.Policy.handoff_to)
_MINE = _HEAD[:3]


def _held(session, engine_id, policy_id, keyed):
    """The rows this engine holds, with their ``CLAIM_KEY`` when keyed.

    Live or not: one whose lease ran out may be taken again.
    """
    P = models.Policy
    query = session.query(*(_MINE + CLAIM_KEY if keyed else _HEAD)).filter(
        P.engine_id == engine_id)
    if policy_id is not None:
        query = query.filter(P.id == policy_id)
    return query.all()


def _takeable(session, engine_id, now, policy_id, members):
    """The rows of others this engine might take.

    Nobody holds them, their lease ran out, their holder left the group,
    or it offers them to this engine.
    """
    params = {'engine_id': engine_id, 'now': now}
    if members is not None:
        params['members'] = sorted(members)
    if policy_id is not None:
        params['policy_id'] = policy_id
    return session.execute(_takeable_statement(
        members is not None, policy_id is not None), params).all()


# The statements of every tick are built once: a dozen aggregates cost more
# to build than to run.
@functools.lru_cache(maxsize=None)
def _takeable_statement(grouped, one):
    P = models.Policy
    engine_id = sa.bindparam('engine_id')
    free = [P.engine_id.is_(None), P.lease_expires_at.is_(None),
            P.lease_expires_at < sa.bindparam('now'),
            P.handoff_to == engine_id]
    if grouped:
        # Empty, it leaves every other holder out of the group.
        free.append(P.engine_id.notin_(sa.bindparam('members',
                                                    expanding=True)))
    statement = sa.select(*_HEAD).where(
        sa.or_(P.engine_id.is_(None), P.engine_id != engine_id),
        sa.or_(*free))
    if one:
        statement = statement.where(P.id == sa.bindparam('policy_id'))
    return statement


def _held_digest(session, engine_id, lease_seconds, now):
    """(leases of this engine due or run out, digest of its rows).

    The digest changes with every change of the rows this engine holds
    but their leases: their number, a take (generation), their servers
    (targets version), any other write (the latest update, in seconds),
    and what a write may leave in the same second (enabled, suspended,
    paused, braked, error and offer, counted and measured).
    """
    row = session.execute(_held_digest_statement(), {
        'engine_id': engine_id,
        'renew_before': _renew_before(now, lease_seconds)}).one()
    return int(row[0]), tuple(
        str(value) if value is not None else None for value in row[1:])


def _count(condition):
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)),
                            0)


@functools.lru_cache(maxsize=None)
def _held_digest_statement():
    P = models.Policy

    def measure(column):
        return sa.func.sum(sa.func.length(column))
    return sa.select(
        _count(sa.or_(P.lease_expires_at.is_(None),
                      P.lease_expires_at < sa.bindparam('renew_before'))),
        sa.func.count(P.id), sa.func.sum(P.generation),
        sa.func.sum(P.targets_version), sa.func.max(P.updated_at),
        _count(P.enabled == sa.true()), _count(P.suspended == sa.true()),
        sa.func.count(P.paused_at), sa.func.max(P.paused_at),
        sa.func.count(P.braked), measure(P.braked),
        sa.func.count(P.error), measure(P.error),
        sa.func.count(P.handoff_to), sa.func.max(P.handoff_to)).where(
            P.engine_id == sa.bindparam('engine_id'))


@functools.lru_cache(maxsize=None)
def _owners_digest_statement():
    P = models.Policy
    return sa.select(
        sa.func.count(P.id), sa.func.sum(P.generation),
        sa.func.sum(P.targets_version),
        _count(P.lease_expires_at >= sa.bindparam('now')),
        sa.func.max(P.created_at))


def _changed_rows(session, known, keys):
    """The whole rows of the policies held whose key is not as known."""
    P = models.Policy
    changed = sorted(pid for pid, key in keys.items()
                     if known.get(pid) != key)
    rows = []
    for start in range(0, len(changed), 500):
        rows.extend(session.query(P).filter(
            P.id.in_(changed[start:start + 500])).all())
    return db_session.detached(session, rows)


def _expires(now, lease_seconds):
    return now + datetime.timedelta(seconds=lease_seconds)


def _renew_before(now, lease_seconds):
    """Leases ending before this are renewed: a third of them has run.

    Not at every claim: a row written per policy per tick would be the
    database's largest load in a large deployment, and nothing reads a
    lease more finely.
    """
    return now + datetime.timedelta(seconds=lease_seconds * 2.0 / 3)


def _renew(session, engine_id, lease_seconds, now, ids=None,
           observed=None):
    """Renew this engine's live leases: of ``ids``, or (None) those due.

    :param observed: {policy id: time}, each policy's ``observed_through``
        moved forward in the same statement.
    """
    P = models.Policy
    values = {'lease_expires_at': _expires(now, lease_seconds),
              'updated_at': P.updated_at}
    if observed:
        values['observed_through'] = sa.case(
            observed, value=P.id, else_=P.observed_through)
    query = session.query(P).filter(P.engine_id == engine_id,
                                    P.lease_expires_at >= now)
    if ids is None:
        query = query.filter(
            P.lease_expires_at < _renew_before(now, lease_seconds))
    else:
        query = query.filter(P.id.in_(ids))
    return query.update(values, synchronize_session=False)


@db_session.retry_on_deadlock
def policy_renew(engine_id, lease_seconds):
    """Renew this engine's live leases that are a third run; how many.

    What a claim renews, without reading any row: called between the long
    steps of a takeover, so that the leases taken at its start do not run
    out before it ends. A lease that ran out stays so (the policy may have
    been taken since).
    """
    with db_session.facade.writer.using(db_session.Session()) as session:
        return _renew(session, engine_id, lease_seconds,
                      timeutils.utcnow())


def policy_owners():
    """Who holds each policy, and the version of its set of servers.

    {policy id: (engine id holding a live lease or None, targets
    version)}: one row per policy, no spec.
    """
    P = models.Policy
    # The database tells whether a lease runs: a thousand dates decoded at
    # every tick cost more than the rest of the read.
    holder = sa.case((P.lease_expires_at >= timeutils.utcnow(),
                      P.engine_id), else_=sa.null())
    with db_session.facade.reader.using(db_session.Session()) as session:
        return {pid: (engine, version) for pid, engine, version in
                session.query(P.id, holder, P.targets_version)}


def policy_owners_digest():
    """One row that changes whenever ``policy_owners`` would answer anew.

    Policies made or deleted (their count, the latest made), taken (every
    take grows a generation), let go or run out (the live leases), their
    servers changed (every change grows a targets version): the index of a
    thousand policies is read again only then.
    """
    with db_session.facade.reader.using(db_session.Session()) as session:
        return tuple(session.execute(_owners_digest_statement(),
                                     {'now': timeutils.utcnow()}).one())


def policy_other_owners(engine_id):
    """Engines other than this one holding a lease that has not expired."""
    now = timeutils.utcnow()
    with db_session.facade.reader.using(db_session.Session()) as session:
        rows = session.query(models.Policy.engine_id).filter(
            models.Policy.engine_id.isnot(None),
            models.Policy.engine_id != engine_id,
            models.Policy.lease_expires_at >= now).distinct().all()
        return sorted(row[0] for row in rows)


@db_session.retry_on_deadlock
def policy_release(engine_id):
    """Give up this engine's policies so another may claim them at once."""
    with db_session.facade.writer.using(db_session.Session()) as session:
        return session.query(models.Policy).filter_by(
            engine_id=engine_id).update(
                {'engine_id': None, 'lease_expires_at': None,
                 'handoff_to': None, 'updated_at': models.Policy.updated_at},
                synchronize_session=False)


@db_session.retry_on_deadlock
def policy_set_suspended(policy_id, suspended, grace_seconds=0):
    """Follow the stack's suspend/resume; True if the policy exists.

    On resume its targets get the grace: what was seen of them while
    suspended is not judged before they had time to start again.
    """
    with db_session.facade.writer.using(db_session.Session()) as session:
        found = bool(session.query(models.Policy).filter_by(
            id=policy_id).update({'suspended': suspended},
                                 synchronize_session=False))
        if found and not suspended:
            targets.grace_targets(session, policy_id, grace_seconds)
        return found


def policy_set_braked(engine_id, policy_id, generation, reason):
    """Store why the policy stopped acting (None: it acts again).

    Only its owner under that generation writes it. True if written.
    """
    now = timeutils.utcnow()
    with db_session.facade.writer.using(db_session.Session()) as session:
        return bool(session.query(models.Policy).filter_by(
            id=policy_id, engine_id=engine_id, generation=generation).update(
                {'braked': reason and reason[:255],
                 'braked_since': reason and now},
                synchronize_session=False))


def policy_set_blind(engine_id, policy_id, generation, blind):
    """Store the policy's blind modes (None: every mode sees).

    Only its owner under that generation writes it. True if written.
    """
    with db_session.facade.writer.using(db_session.Session()) as session:
        return bool(session.query(models.Policy).filter_by(
            id=policy_id, engine_id=engine_id, generation=generation).update(
                {'blind': blind or None, 'updated_at':
                 models.Policy.updated_at},
                synchronize_session=False))


# A policy's error is at most this long (its column's length).
POLICY_ERROR_MAX = models.Policy.error.type.length


def policy_set_error(engine_id, policy_id, generation, error):
    """Store why the policy cannot be watched fully (None: it can).

    Only its owner under that generation writes it; the time is kept
    while the error stays the same. True if written.
    """
    error = error and error[:POLICY_ERROR_MAX]
    with db_session.facade.writer.using(db_session.Session()) as session:
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


@db_session.retry_on_deadlock
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
    with db_session.facade.writer.using(db_session.Session()) as session:
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
