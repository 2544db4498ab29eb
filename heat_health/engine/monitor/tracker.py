"""The actual state: what every watched target's detectors last said.

Every detector hands its observations to ``Tracker.observe``; the tracker
finds the targets of the observed server (a server may be watched by several
policies, of several projects): a fact Nova tells reaches each of them, a
verdict of one policy's own check (its poll URL, its pools) only that
policy's. It keeps each mode's latest verdict per target, and asks
``states.transition`` what follows. The database is the truth and memory
follows it: a change is stored first, by a conditional UPDATE that matches
only while the target is still in the state it was decided from and its
policy is still this engine's under the generation it holds; only then does
the target change in memory, and only then is the change announced as a
``heat_health.target.state_change`` notification. A write that fails
(database restarting) leaves memory as it was and the target is decided
again at the next ``settle``. No database work runs under the tracker's
lock.

A failure is held, and decided as soon as that ends, while the target is
within its grace or a stack action works on its resource; no state changes
while the policy is disabled or its stack suspended. Observations that
change nothing are written in bulk by ``flush`` and only when they differ
from what is stored, or the stored one is old, so tens of thousands of
healthy servers cost almost nothing.
"""

import datetime
import random
import threading

from heat.common import context as heat_context
from heat.common import messaging
from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.engine.monitor import states
from heat_health.engine.monitor import watched
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

EVENT_TYPE = 'heat_health.target.state_change'

# A Nova task is never taken for stuck sooner: reboots and rebuilds take
# this long on a busy host.
STUCK_MIN_SECONDS = 30

# States that close a recovery: the next failure starts a new incident.
_ENDS_RECOVERY = frozenset([states.HEALTHY, states.NO_DATA])


# A stored observation that still says the same is rewritten after this
# long, so the report shows that detectors are alive.
OBSERVATION_REFRESH = datetime.timedelta(minutes=10)


def _taken_back(old, new):
    """This engine took the policy again after its own lease ran out.

    Every take adds one to the generation: one more than the generation
    held means nobody else held the policy in between.
    """
    return (old.generation is not None and new.generation is not None and
            new.generation == old.generation + 1)


def _observation_columns(o):
    return {'observation': o.verdict,
            'observation_reason': (o.reason or '')[:255],
            'observation_source': o.source,
            'observed_at': o.observed_at}


class _Change(object):
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


class Tracker(object):
    """Thread-safe index of watched servers and their targets' states.

    :param engine_id: this engine: its writes are fenced by its leases.
    :param host: this engine's host, for the notifications' publisher id.
    :param fresh_resolution: policy id -> Resolution (or None), asked
        before a failure is stored, so a stack action that just started
        (and may be replacing servers) is never taken for a failure. It
        runs outside the tracker's lock; the monitor answers it from Heat's
        database at most once per policy per tick.
    :param notifier: an oslo.messaging Notifier; Heat's by default.
    """

    def __init__(self, engine_id, host, fresh_resolution=None,
                 notifier=None, clock=timeutils.utcnow, rnd=None):
        self.engine_id = engine_id
        self._rnd = rnd or random.Random()
        self._lock = threading.RLock()
        self._publisher = 'heat-health-engine.%s' % host
        self._notifier = notifier
        self._fresh_resolution = fresh_resolution
        self._clock = clock
        self._policies = {}
        self._targets = {}      # target id -> WatchedTarget
        self._by_server = {}    # server id -> (WatchedTarget, ...)
        self._unsettled = set()  # target ids waiting for a decision
        # Rows this engine wrote: a row read before may since have been
        # written back to what was read (the same state, the same second).
        self.writes = 0
        self._inflight = set()  # target ids whose change is being stored
        self._dirty = {}        # target id -> Observation to store
        # Called after a target was stored UNHEALTHY (recovery wakes up).
        self.on_failure = None
        # Called with a server id whose detectors must report it again
        # (those that report only news): its recovery started, or what
        # was seen of it while its policy was frozen was dropped.
        self.on_look_again = None

    # The index

    def load(self, policies, targets_by_policy, generations,
             resolutions=None):
        """Watch exactly these policies' targets from now on.

        :param generations: {policy id: the generation this engine owns
            it under}; a target of a policy another engine held meanwhile
            (new generation) or whose place has a new server starts afresh
            from its row, others keep their verdicts and state, also when
            this engine took its policy back right after its own lease ran
            out (a database away longer than the lease): then nobody held
            it in between, and what was seen but not yet stored is kept.
        :param resolutions: {policy id: Resolution} for what suppresses
            targets (stack actions, a suspended stack).
        :returns: the verdicts held on the targets of the policies no longer
            watched, for their new owner: what this engine saw after that
            engine looked its servers up is known nowhere else.
        """
        resolutions = resolutions or {}
        looked_away, differing = [], []
        with self._lock:
            new_policies = {}
            for policy in policies:
                new_policies[policy.id] = watched.WatchedPolicy(
                    policy, generations.get(policy.id),
                    resolutions.get(policy.id))
            new_targets = {}
            by_server = {}
            for policy_id, rows in targets_by_policy.items():
                policy = new_policies.get(policy_id)
                if policy is None:
                    continue
                old_policy = self._policies.get(policy_id)
                for row in rows:
                    target = self._targets.get(row.id)
                    if (target is None or target.server_id != row.server_id
                            or old_policy is None or
                            (old_policy.generation != policy.generation and
                             not _taken_back(old_policy, policy))):
                        target = watched.WatchedTarget(row, policy)
                        self._unsettled.add(row.id)
                    else:
                        if (target.policy.generation != policy.generation or
                                target.policy.spec.detection_key() !=
                                policy.spec.detection_key() or
                                target.policy.frozen() != policy.frozen() or
                                target.policy.busy != policy.busy):
                            self._unsettled.add(row.id)
                        if target.follow(row, policy):
                            looked_away.append(row.server_id)
                        if target.differs(row):
                            # Written by someone else, or read before this
                            # engine's own write: a fresh read tells (also
                            # when following dropped the verdicts).
                            differing.append(target)
                    new_targets[row.id] = target
                    by_server.setdefault(row.server_id, []).append(target)
            let_go = [observation for target in self._targets.values()
                      if target.policy.id not in new_policies
                      for observation in target.verdicts.values()]
            self._policies = new_policies
            self._targets = new_targets
            self._by_server = {k: tuple(v) for k, v in by_server.items()}
            self._unsettled &= set(new_targets)
            for target_id in set(self._dirty) - set(new_targets):
                del self._dirty[target_id]
        # Their verdicts were dropped: detectors that report only news
        # must look again, or a healed server is never seen as such.
        for server_id in looked_away:
            self._look_again(server_id)
        if differing:
            self._follow_stored(differing)
        return let_go

    def _look_again(self, server_id):
        if self.on_look_again is not None:
            self.on_look_again(server_id)

    def is_watched(self, server_id):
        """Cheap: called for every notification about any server."""
        return server_id in self._by_server

    def servers(self, modes=None):
        """Ids of the servers watched (with one of ``modes`` if given).

        :param modes: a mode, or a collection of modes.
        """
        with self._lock:
            if modes is None:
                return set(self._by_server)
            modes = {modes} if isinstance(modes, str) else set(modes)
            return {server_id for server_id, targets in self._by_server.items()
                    if any(modes.intersection(t.policy.modes)
                           for t in targets)}

    def stuck_after(self, server_id):
        """Seconds a Nova task of the server may last before it is stuck.

        The shortest node_update_timeout of its policies, at least
        STUCK_MIN_SECONDS.
        """
        targets = self._by_server.get(server_id, ())
        if not targets:
            return None
        return max(STUCK_MIN_SECONDS,
                   min(t.policy.spec.grace for t in targets))

    def policies(self):
        with self._lock:
            return list(self._policies.values())

    def states(self):
        """{target id: state}, for tests and the benchmark."""
        with self._lock:
            return {t.id: t.state for t in self._targets.values()}

    # Observations and decisions

    def observe(self, observation):
        """Take one detector's verdict on one server (any thread)."""
        if observation.server_id in self._by_server:
            self.observe_all([observation])

    def observe_all(self, observations):
        """Take many verdicts at once (any thread).

        Their changes are stored in one transaction: a poll or a takeover
        that brings news of a thousand servers costs one, not a thousand,
        and the monitor tick that hands them over (and sends the engine's
        heartbeat) stays short.
        """
        changes = []
        with self._lock:
            now = self._clock()
            taken = {}
            for observation in observations:
                for target in self._by_server.get(observation.server_id,
                                                  ()):
                    if (observation.policy_id is not None and
                            observation.policy_id != target.policy.id):
                        # Another policy's own check (its URL, its
                        # pools): says nothing about this target.
                        continue
                    if self._take(target, observation):
                        taken[target.id] = target
            # Each target decided once, on all the verdicts just taken.
            for target in taken.values():
                change = self._decide(target, now)
                if change is not None:
                    changes.append(change)
        self._commit(changes)

    def _take(self, target, observation):
        """Note one verdict on one target; True if it may change it."""
        if observation.source not in target.policy.modes:
            return False
        if (target.verdicts_after is not None and
                observation.observed_at < target.verdicts_after):
            # Seen before the recovery's action: says nothing of it.
            return False
        previous = target.verdicts.get(observation.source)
        if (previous is not None and
                previous.observed_at > observation.observed_at):
            # Delivered late (listener threads, batches): older news never
            # overrides newer news of the same source.
            return False
        self._note(target, observation)
        if observation.verdict == obs.UNKNOWN:
            return False
        target.verdicts[observation.source] = observation
        target.streak = (target.streak + 1 if observation.verdict ==
                         obs.HEALTHY else 0)
        return True

    def settle(self):
        """Decide the targets held back or whose write failed."""
        with self._lock:
            if not self._unsettled:
                return
            now = self._clock()
            changes = []
            for target_id in list(self._unsettled):
                self._unsettled.discard(target_id)
                target = self._targets.get(target_id)
                if target is None:
                    continue
                change = self._decide(target, now)
                if change is not None:
                    changes.append(change)
        self._commit(changes)

    def flush(self):
        """Store the observations that changed (one transaction)."""
        with self._lock:
            if not self._dirty:
                return
            dirty, self._dirty = self._dirty, {}
            rows = [dict(_observation_columns(o), id=target_id,
                         server_id=o.server_id,
                         generation=self._targets[target_id].policy
                         .generation)
                    for target_id, o in dirty.items()]
        try:
            db_api.target_observations_store(self.engine_id, rows)
        except Exception:
            LOG.exception('Could not store %d observations; retrying',
                          len(rows))
            with self._lock:
                for target_id, o in dirty.items():
                    if target_id in self._targets:
                        self._dirty.setdefault(target_id, o)

    def _note(self, target, observation):
        stored = target.stored
        if (stored is None or stored.verdict != observation.verdict or
                stored.reason != observation.reason or
                stored.source != observation.source or
                observation.observed_at - stored.observed_at >=
                OBSERVATION_REFRESH):
            target.stored = observation
            self._dirty[target.id] = observation

    def _decide(self, target, now):
        """A _Change to store, or None; under the lock, no I/O."""
        if target.id in self._inflight:
            # Its previous change is being stored: look again after.
            self._unsettled.add(target.id)
            return None
        result = states.transition(target.state, target.verdicts, now,
                                   target.policy.spec, target.suppression(),
                                   target.streak)
        if result.held:
            self._unsettled.add(target.id)
        if result.decision is None:
            return None
        self._inflight.add(target.id)
        return _Change(target, result.decision, now,
                       self._dirty.get(target.id), self._rnd)

    # Recovery: the planner reads, the recovery loop writes through here

    def targets_of(self, policy_id):
        """The watched targets of one policy (live objects: read only)."""
        with self._lock:
            return [t for t in self._targets.values()
                    if t.policy.id == policy_id]

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
        with self._lock:
            if target.id in self._inflight or target.state != expect:
                return False
            if self._targets.get(target.id) is not target:
                return False
            self._inflight.add(target.id)
            change = _Change(target, states.Decision(state, reason, source),
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
            if target.id in done:
                target.changes += 1
                self.writes += 1
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
            if written:
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
            if done:
                target.changes += 1
                self.writes += 1
                for name, value in columns.items():
                    setattr(target, name, value)
        if done is False:
            self._follow_stored([target])
        return bool(done)

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
                    # Not stored: memory stays as it was, and it is
                    # decided again (a lost lease drops it at the next
                    # claim).
                    self._unsettled.add(target.id)
                    if written:
                        mismatched.append(target)
                    continue
                target.changes += 1
                self.writes += 1
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
        for change in applied:
            self._announce(change)
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
        next load.
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
            values.update(_observation_columns(change.observation))
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

    def _announce(self, change):
        target = change.target
        decision = change.decision
        LOG.info('Target %(server)s (%(path)s) of policy %(policy)s: '
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
            notifier.info(heat_context.get_admin_context(), EVENT_TYPE,
                          payload)
        except Exception:
            LOG.exception('Could not send %s for %s', EVENT_TYPE,
                          target.server_id)
