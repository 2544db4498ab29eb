"""A policy's targets: kept in step with Heat's places, read and reset.

What is written here is not fenced by ownership: the sync is idempotent
between engines and a user's reset is any engine's to store.
"""

import datetime
import functools

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_utils import timeutils
import sqlalchemy as sa

from heat_health.db import models
from heat_health.db import session as db_session


# The recovery key of a workflow execution that may still run: kept until
# it is seen ended, so that no later attempt acts beside it.
RUNNING_WORKFLOW = 'workflow_running'


def leftovers(recovery):
    """What a finished recovery still has to undo, or None.

    Members it drained and did not restore yet (``drained``, of the
    server ``drained_of``), the server whose resource it marked
    CHECK_FAILED (``marked_failed``), and a workflow execution that may
    still run (``RUNNING_WORKFLOW``).
    """
    recovery = recovery or {}
    left = {}
    if recovery.get(RUNNING_WORKFLOW):
        left[RUNNING_WORKFLOW] = recovery[RUNNING_WORKFLOW]
    if recovery.get('drained') and not recovery.get('restored'):
        left['drained'] = recovery['drained']
        if recovery.get('drained_of'):
            left['drained_of'] = recovery['drained_of']
    if recovery.get('marked_failed'):
        left['marked_failed'] = recovery['marked_failed']
    return left or None


# What a recovery does with a member it drained: holds it at weight 0,
# is giving its weight back, or gave it back.
HELD, RESTORING, RESTORED = 'held', 'restoring', 'restored'
_DRAIN_ORDER = (HELD, RESTORING, RESTORED)


def _drain_state(row):
    """(HELD, RESTORING or RESTORED) of a row's drain, or None.

    A drain given back counts only while the row holds the server
    drained: a replaced server's member gets no weight back.
    """
    recovery = row.recovery or {}
    if not (recovery.get('restored') or recovery.get('restoring')):
        return HELD
    if recovery.get('drained_of', row.server_id) != row.server_id:
        return None
    return RESTORED if recovery.get('restored') else RESTORING


def drain_states(pool_ids):
    """{pool id: {address: (state, weight it had)}} of recovery's drains.

    Members recovery drained, as their rows say now (``_drain_state``):
    whoever sends a pool's full member list sends them at the weight
    this says, not at what it read (``lb_follow``). Of an address two
    rows drained, the one held wins.
    """
    wanted = set(pool_ids)
    found = {}
    if not wanted:
        return found
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        rows = session.query(T.server_id, T.recovery).filter(
            T.recovery.isnot(None))
        for row in rows:
            drained = (row.recovery or {}).get('drained') or {}
            state = _drain_state(row) if drained else None
            for pool_id, member in drained.items():
                if state is None or pool_id not in wanted or not member:
                    continue
                members = found.setdefault(pool_id, {})
                known = members.get(member[0])
                if known is None or _DRAIN_ORDER.index(state) < \
                        _DRAIN_ORDER.index(known[0]):
                    members[member[0]] = (state, member[1])
    return found


@db_session.retry_on_deadlock
def target_reset(stack_id, resource_name, reason):
    """A user said the resource is healthy: forget its failure.

    The rows of that place (every policy watching it) in a failed or
    recovery state start again NO_DATA, attempts forgotten; any engine
    may write this (the owner follows the newer stored state). Returns
    the number of rows reset.
    """
    now = timeutils.utcnow()
    T = models.Target
    with db_session.facade.writer.using(db_session.Session()) as session:
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
            # Drained members still get their weight back, and what
            # recovery recorded it marks stays to be cleared once the
            # server is seen healthy: its mark may land after the user's
            # clear (Heat's lock is not held across both), and a group
            # member it marked (replace: MEMBER) is not the user's.
            row.recovery = leftovers(row.recovery)
            row.attempts = 0
            row.first_attempt_at = None
            row.next_attempt_at = None
            row.observation = None
            row.observed_at = None
        _bump_targets_version(session, {row.policy_id for row in rows})
        return len(rows)


def _bump_targets_version(session, policy_ids):
    """Tell the policies' owners their rows changed: they read them again.

    Every write of target rows but the owner's own goes with it (the owner
    knows its own writes).
    """
    if not policy_ids:
        return
    P = models.Policy
    session.query(P).filter(P.id.in_(sorted(policy_ids))).update(
        {'targets_version': P.targets_version + 1,
         'updated_at': P.updated_at}, synchronize_session=False)


def grace_targets(session, policy_id, grace_seconds):
    """Judge none of the policy's targets for ``grace_seconds`` from now.

    Its owner reads the rows again (their version is bumped): a resumed or
    re-enabled policy's grace must not wait for its safety re-read.
    """
    session.query(models.Target).filter_by(policy_id=policy_id).update(
        {'grace_until': timeutils.utcnow() + datetime.timedelta(
            seconds=grace_seconds)}, synchronize_session=False)
    _bump_targets_version(session, {policy_id})


def owner_index(server_ids=None):
    """{server id: {engine id, ...}} of the servers watched by live leases.

    Deployment-wide: every consumer of Nova's notifications knows which
    engine to hand news of a server to.
    """
    P, T = models.Policy, models.Target
    now = timeutils.utcnow()
    index = {}
    with db_session.facade.reader.using(db_session.Session()) as session:
        query = session.query(T.server_id, P.engine_id).join(
            P, P.id == T.policy_id).filter(P.engine_id.isnot(None),
                                           P.lease_expires_at >= now)
        if server_ids is not None:
            query = query.filter(T.server_id.in_(sorted(server_ids)))
        for server_id, engine in query:
            index.setdefault(server_id, set()).add(engine)
    return index


def policy_servers(policy_ids):
    """{policy id: [server ids of its targets]}, for the owner index."""
    found = {policy_id: [] for policy_id in policy_ids}
    if not found:
        return found
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        for policy_id, server_id in session.query(
                T.policy_id, T.server_id).filter(
                    T.policy_id.in_(sorted(found))):
            found[policy_id].append(server_id)
    return found


def target_get_all(policy_ids):
    """{policy_id: [targets ordered by path]} for the given policies."""
    result = {policy_id: [] for policy_id in policy_ids}
    if not result:
        return result
    with db_session.facade.reader.using(db_session.Session()) as session:
        rows = session.query(models.Target).filter(
            models.Target.policy_id.in_(list(result))).order_by(
                models.Target.policy_id, models.Target.path).all()
        for row in db_session.detached(session, rows):
            result[row.policy_id].append(row)
    return result


# What of a target's row memory holds too: a safety re-read compares them.
HELD_COLUMNS = ('policy_id', 'id', 'server_id', 'path', 'grace_until',
                'state', 'recovery', 'attempts')


@functools.lru_cache(maxsize=None)
def _held_statement():
    T = models.Target.__table__
    return sa.select(*(T.c[c] for c in HELD_COLUMNS)).where(
        T.c.policy_id.in_(sa.bindparam('ids', expanding=True)))


def target_held_columns(policy_ids):
    """{policy_id: [plain rows of HELD_COLUMNS]} for the given policies.

    What an owner checks its memory against, now and then, when nothing
    said the rows changed: a hundred plain tuples cost a tenth of a
    hundred objects, and most such reads find nothing new.
    """
    result = {policy_id: [] for policy_id in policy_ids}
    if not result:
        return result
    with db_session.facade.reader.using(db_session.Session()) as session:
        for row in session.execute(_held_statement(),
                                   {'ids': sorted(result)}):
            result[row.policy_id].append(row)
    return result


# What the health report shows of a target.
SHOWN_COLUMNS = (
    'policy_id', 'server_id', 'server_name', 'resource_name', 'path',
    'state', 'state_reason', 'state_since', 'grace_until', 'recovery',
    'attempts', 'next_attempt_at', 'observation', 'observation_reason',
    'observation_source', 'observed_at')


def target_get_shown(policy_ids):
    """{policy_id: [targets ordered by path]}: the report's columns only.

    Plain rows read by attribute, neither ORM instances nor objects: making
    those for a policy's 1,000 targets takes longer than reading them.
    """
    result = {policy_id: [] for policy_id in policy_ids}
    if not result:
        return result
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        rows = session.query(*(getattr(T, c) for c in SHOWN_COLUMNS)).filter(
            T.policy_id.in_(list(result))).order_by(T.policy_id, T.path)
        for row in rows:
            result[row.policy_id].append(row)
    return result


def target_paths(policy_ids):
    """{server id: its place (path)} of the servers these policies watch."""
    if not policy_ids:
        return {}
    T = models.Target
    with db_session.facade.reader.using(db_session.Session()) as session:
        return dict(session.query(T.server_id, T.path).filter(
            T.policy_id.in_(list(policy_ids))))


def target_get_rows(target_ids):
    """{target id: row} as stored (detached)."""
    with db_session.facade.reader.using(db_session.Session()) as session:
        rows = session.query(models.Target).filter(
            models.Target.id.in_(sorted(target_ids))).all()
        return {row.id: row for row in db_session.detached(session, rows)}


def target_details_update(details):
    """Store server names and addresses learnt from Nova, in one go.

    :param details: {target id: (server_name, [address, ...])}.
    """
    if not details:
        return
    with db_session.facade.writer.using(db_session.Session()) as session:
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


def _recreating(row):
    return (row.state in ('RECOVERING', 'VERIFYING') and
            (row.recovery or {}).get('action') == 'RECREATE')


def _replacing_member(row):
    """Whether the row's RECREATE has marked its group member.

    Heat then replaces the member whole (``replace: MEMBER``): the server
    moves to the new member's stack, at the same path.
    """
    recovery = row.recovery or {}
    return (row.state == 'RECOVERING' and recovery.get('member') and
            recovery.get('action') == 'RECREATE' and
            recovery.get('stage') in ('marked', 'updating'))


def _follow_paths(existing, places, added, removed):
    """Rows follow their server to another stack at the same path.

    A group member replaced whole (a template member's nested stack: by
    a RECREATE with ``replace: MEMBER``, or any update) brings its server
    back in a new stack, at the same path: the same place, whose row is
    moved there, keeping its history. A row whose RECREATE marked its
    member is kept where it was until that place appears, not removed:
    the update that replaces the member is still under way.
    ``existing`` is updated; returns the places left to add and to
    remove.
    """
    by_path = {places[place]['path']: place for place in added}
    kept, moved = set(), set()
    for place in removed:
        row = existing[place]
        new = by_path.pop(row.path, None)
        if new is not None:
            del existing[place]
            row.stack_id, row.resource_name = new
            existing[new] = row
            moved.add(new)
            kept.add(place)
        elif _replacing_member(row):
            kept.add(place)
    return ([p for p in added if p not in moved],
            [p for p in removed if p not in kept])


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


@oslo_db_api.wrap_db_retry(max_retries=3, retry_on_deadlock=True,
                           exception_checker=lambda e: isinstance(
                               e, db_exc.DBDuplicateEntry))
def target_sync(policy_id, places, grace_seconds, graced=(), keep=()):
    """Make the policy's target rows match the places found in Heat.

    :param places: {(stack_id, resource_name): {server_id, path,
        addresses}} as found in Heat's database now.
    :param graced: places whose resource has just ended a stack action:
        their grace starts again.
    :param keep: places gone whose rows stay for now: what recovery left
        on them is not undone yet (``recovery.leftovers``).
    New places start NO_DATA within the grace; a place whose server was
    replaced keeps its row (and history) with the new server, NO_DATA;
    a place whose server came back in another stack at the same path (its
    group member replaced whole) keeps its row there; places gone from the
    stack are removed, but for a RECREATE's whose group member is being
    replaced (``_follow_paths``). Idempotent: two engines
    syncing at once both end with the same rows (a duplicate insert is
    retried against the rows the other stored).
    Returns (added, removed, replaced) lists of places.
    """
    now = timeutils.utcnow()
    grace_until = now + datetime.timedelta(seconds=grace_seconds)
    events = []
    with db_session.facade.writer.using(db_session.Session()) as session:
        existing = {(row.stack_id, row.resource_name): row
                    for row in session.query(models.Target).filter_by(
                        policy_id=policy_id)}
        added, removed = _follow_paths(
            existing, places, sorted(set(places) - set(existing)),
            sorted(set(existing) - set(places) - set(keep)))
        if removed:
            session.query(models.Target).filter(models.Target.id.in_(
                [existing[place].id for place in removed])).delete(
                    synchronize_session=False)
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
        if added or removed or replaced:
            _bump_targets_version(session, {policy_id})
    return added, removed, sorted(replaced)
