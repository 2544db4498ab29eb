"""A target's change written: the database first, then memory, then news.

A mixin of ``tracker.Tracker``, which provides its index, its lock and its
notifier. A change is stored by a conditional UPDATE that matches only
while the target is still in the state it was decided from and its policy
is still this engine's under the generation it holds; only then does the
target change in memory, and only then is the change announced. Recovery
stores its steps through ``store_step`` and ``store_columns``.

A write that raised may still have committed (the connection dropped after
the COMMIT): its outcome is believed neither way. The target is *unknown*
until its row is read again (at once, else at the next ``settle`` or
recovery pass): nothing is decided or written for it from memory meanwhile,
and recovery counts it as recovering for its limits.
"""

import datetime

from heat.common import context as heat_context
from heat.common import messaging
from oslo_log import log as logging

from heat_health.db import api as db_api
from heat_health.engine.monitor import states

LOG = logging.getLogger(__name__)

EVENT_TYPE = 'heat_health.target.state_change'


# States that close a recovery: the next failure starts a new incident.
_ENDS_RECOVERY = frozenset([states.HEALTHY, states.NO_DATA])


def _first_healthy(change):
    return change.old == states.NO_DATA and (
        change.decision.state == states.HEALTHY)


def observation_columns(o):
    """What a target's row stores of its latest observation."""
    return {'observation': o.verdict,
            'observation_reason': (o.reason or '')[:255],
            'observation_source': o.source,
            'observed_at': o.observed_at}


class Change(object):
    """A decided transition on its way to the database."""

    __slots__ = ('target', 'old', 'decision', 'at', 'generation',
                 'observation', 'columns')

    def __init__(self, target, decision, at, observation, rnd=None):
        self.target = target
        self.old = target.state
        self.decision = decision
        self.at = at
        self.generation = target.policy.generation
        self.observation = observation
        self.columns = {}
        if (self.old in states.IN_RECOVERY and target.attempts and
                decision.state in (states.HEALTHY, states.UNHEALTHY)):
            # The attempt ended, healed or failed: the next one waits its
            # back-off from now.
            delay = target.policy.spec.recovery.backoff(
                target.attempts, rnd.uniform(-1, 1) if rnd else 0.0)
            self.columns['next_attempt_at'] = at + datetime.timedelta(
                seconds=delay)


class StateWrites(object):
    """Changes of watched targets stored, followed and announced."""

    def store_step(self, target, expect, state, reason, columns=None,
                   source='recovery', at=None, announce=True):
        """Store a recovery step of ``target``, then follow it in memory.

        Fenced like every change: written only while the target is still
        in ``expect`` with the same server and its policy is this
        engine's under the generation held. Returns True if stored (and
        then announced, unless ``announce`` is False: bookkeeping of a
        stage that the timeline need not show); False leaves memory as
        the database has it: a write that found the row changed re-reads
        it.
        """
        at = at or self._clock()
        if self._still_unknown(target):
            return False
        with self._lock:
            if target.id in self._inflight or target.state != expect:
                return False
            if self._targets.get(target.id) is not target:
                return False
            self._inflight.add(target.id)
            change = Change(target, states.Decision(state, reason, source),
                            at, None, self._rnd)
        row = self._row(change)
        if not announce:
            row['event'] = None
        columns = dict(change.columns, **(columns or {}))
        row['target'].update(columns)
        try:
            done = db_api.target_transition(self.engine_id, [row])
            written = True
        except Exception:
            LOG.exception('Could not store recovery step %(s)s of %(t)s',
                          {'s': state, 't': target.server_id})
            done, written = set(), False
        with self._lock:
            self._inflight.discard(target.id)
            if not written:
                self._unknown.add(target.id)
            if target.id in done:
                target.changes += 1
                self.writes += 1
                self.written[target.policy.id] += 1
                target.state = state
                target.reason = reason
                target.since = at
                for key in ('recovery', 'attempts', 'first_attempt_at',
                            'next_attempt_at'):
                    if key in columns:
                        setattr(target, key, columns[key])
                if state in _ENDS_RECOVERY:
                    target.recovery = db_api.leftovers(target.recovery)
                if state == states.RECOVERING and expect != state:
                    # Only what is seen from now on judges the action.
                    target.verdicts = {}
                    target.streak = 0
                    target.verdicts_after = at
                # Verdicts that arrived meanwhile may end it at once.
                self._unsettled.add(target.id)
        if target.id not in done:
            # Found changed, or maybe committed: memory follows the row.
            self._follow_stored([target])
            return False
        if announce:
            self._announce(change)
        if state == states.RECOVERING and expect != state:
            self._look_again(target.server_id)
        return True

    def store_columns(self, target, columns):
        """Store bookkeeping of a target that changes no state (fenced).

        True once stored; False when the write failed or matched no row
        (then memory follows the row as stored).
        """
        if self._still_unknown(target):
            return False
        with self._lock:
            if target.id in self._inflight:
                return False
            self._inflight.add(target.id)
            key = (target.id, target.server_id, target.policy.generation)
        try:
            done = db_api.target_store_columns(self.engine_id, *key,
                                               columns=columns)
        except Exception:
            LOG.exception('Could not store %(c)s of %(t)s',
                          {'c': sorted(columns), 't': target.server_id})
            done = None
        with self._lock:
            self._inflight.discard(target.id)
            if done is None:
                self._unknown.add(target.id)
            if done:
                target.changes += 1
                self.writes += 1
                self.written[target.policy.id] += 1
                for name, value in columns.items():
                    setattr(target, name, value)
        if not done:
            self._follow_stored([target])
        return bool(done)

    def _still_unknown(self, target):
        """Whether a write of the target raised and its row is not read yet.

        Read again now; True even when that worked: the caller's columns
        were computed from memory before the read, so it decides again.
        """
        with self._lock:
            if target.id not in self._unknown:
                return False
        self._follow_stored([target])
        return True

    def unknown(self):
        """Ids of the targets whose write raised, their rows not read yet."""
        with self._lock:
            return set(self._unknown)

    def reread_unknown(self):
        """Read the rows of the targets whose write raised; ids still not."""
        with self._lock:
            targets = [self._targets[i] for i in self._unknown
                       if i in self._targets]
        if targets:
            self._follow_stored(targets)
        return self.unknown()

    def _still_failing(self, changes):
        """Drop failures a stack action started on since the last refresh.

        One fresh resolution per policy (outside the lock).
        """
        if self._fresh_resolution is None:
            return changes, []
        fresh = {}
        kept, held = [], []
        for change in changes:
            if change.decision.state not in states.FAILING:
                kept.append(change)
                continue
            policy_id = change.target.policy.id
            if policy_id not in fresh:
                fresh[policy_id] = self._fresh_resolution(policy_id)
            resolution = fresh[policy_id]
            if resolution is not None and (
                    resolution.suspended or
                    change.target.place in resolution.busy):
                held.append(change)
            else:
                kept.append(change)
        return kept, held

    def _commit(self, changes):
        """Store the changes, then apply and announce those stored."""
        if not changes:
            return
        try:
            changes, held = self._still_failing(changes)
        except Exception:
            LOG.exception('Could not tell whether a stack action works on '
                          'the targets: deciding them later')
            changes, held = [], changes
        done, written = set(), False
        if changes:
            try:
                done = db_api.target_transition(
                    self.engine_id, [self._row(c) for c in changes])
                written = True
            except Exception:
                LOG.exception('Could not store %d state changes; they are '
                              'decided again at the next tick', len(changes))
        applied, mismatched = [], []
        with self._lock:
            for change in held:
                self._inflight.discard(change.target.id)
                self._unsettled.add(change.target.id)
            for change in changes:
                target = change.target
                self._inflight.discard(target.id)
                if target.id not in done:
                    # Not stored (or maybe, when the write raised):
                    # memory stays as it was until the row is read, and
                    # it is decided again (a lost lease drops it at the
                    # next claim).
                    self._unsettled.add(target.id)
                    if not written:
                        self._unknown.add(target.id)
                    mismatched.append(target)
                    continue
                target.changes += 1
                self.writes += 1
                self.written[target.policy.id] += 1
                target.state = change.decision.state
                target.reason = change.decision.reason
                target.since = change.at
                for key, value in change.columns.items():
                    setattr(target, key, value)
                if target.state in _ENDS_RECOVERY:
                    target.recovery = db_api.leftovers(target.recovery)
                    target.verdicts_after = None
                if (change.observation is not None and
                        self._dirty.get(target.id) is change.observation):
                    del self._dirty[target.id]
                applied.append(change)
        if applied:
            context = heat_context.get_admin_context()
            for change in applied:
                self._announce(change, context)
            first = sum(1 for c in applied if _first_healthy(c))
            if first:
                LOG.info('%d newly watched targets are HEALTHY', first)
        if self.on_failure is not None and any(
                c.decision.state == states.UNHEALTHY for c in applied):
            self.on_failure()
        if mismatched:
            self._follow_stored(mismatched)

    def _follow_stored(self, targets):
        """Memory follows the database where a write found it changed.

        The row changed under this engine (a user's reset, its server
        replaced, another owner): the stored state and recovery are the
        truth. Targets whose policy this engine lost are dropped at the
        next load. A target whose write raised is known again once its
        row is read (unless memory changed meanwhile).
        """
        with self._lock:
            seen = {t.id: t.changes for t in targets}
        try:
            stored = db_api.target_get_rows(list(seen))
        except Exception:
            LOG.exception('Could not read the stored states of %d targets',
                          len(targets))
            return
        taken = []
        with self._lock:
            for target in targets:
                row = stored.get(target.id)
                if (row is None or target.id in self._inflight or
                        target.changes != seen[target.id] or
                        self._targets.get(target.id) is not target or
                        row.server_id != target.server_id):
                    # Memory changed since the read: it is the newer.
                    continue
                self._unknown.discard(target.id)
                if target.differs(row):
                    LOG.info('Target %(t)s is %(s)s in the database, not '
                             '%(m)s: following it',
                             {'t': target.server_id, 's': row.state,
                              'm': target.state})
                    target.take_stored(row)
                    self._unsettled.add(target.id)
                    taken.append(target.server_id)
        for server_id in taken:
            self._look_again(server_id)

    def _row(self, change):
        target = change.target
        decision = change.decision
        reason = (decision.reason or '')[:255]
        values = {'id': target.id, 'state': decision.state,
                  'state_reason': reason, 'state_since': change.at}
        if decision.state in _ENDS_RECOVERY:
            values['recovery'] = db_api.leftovers(target.recovery)
        values.update(change.columns)
        if change.observation is not None:
            values.update(observation_columns(change.observation))
        return {'target': values, 'old_state': change.old,
                'server_id': target.server_id,
                'generation': change.generation,
                'event': {'policy_id': target.policy.id,
                          'server_id': target.server_id,
                          'path': target.path,
                          'old_state': change.old,
                          'new_state': decision.state,
                          'reason': reason, 'source': decision.source,
                          'created_at': change.at}}

    def _announce(self, change, context=None):
        """Log and notify one state change stored.

        A newly watched target found HEALTHY (a takeover finds thousands)
        is logged at debug level only: the batch counts them.
        """
        target = change.target
        decision = change.decision
        log = LOG.debug if _first_healthy(change) else LOG.info
        log('Target %(server)s (%(path)s) of policy %(policy)s: '
            '%(old)s -> %(new)s (%(reason)s, by %(source)s)',
            {'server': target.server_id, 'path': target.path,
             'policy': target.policy.id, 'old': change.old,
             'new': decision.state, 'reason': decision.reason,
             'source': decision.source})
        payload = {'policy_id': target.policy.id,
                   'stack_id': target.policy.stack_id,
                   'target_stack_id': target.stack_id,
                   'server_id': target.server_id,
                   'resource_name': target.resource_name,
                   'path': target.path,
                   'old_state': change.old,
                   'new_state': decision.state,
                   'reason': decision.reason,
                   'source': decision.source,
                   'time': change.at.isoformat()}
        try:
            notifier = self._notifier or messaging.get_notifier(
                self._publisher)
            notifier.info(context or heat_context.get_admin_context(),
                          EVENT_TYPE,
                          payload)
        except Exception:
            LOG.exception('Could not send %s for %s', EVENT_TYPE,
                          target.server_id)
