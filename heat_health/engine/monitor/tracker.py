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
while the policy is disabled or its stack suspended. Observations are
written in bulk by ``flush`` and only when they differ from what is
stored, so tens of thousands of healthy servers cost no write; when each
policy's detectors last confirmed what is stored goes with its owner's
leases (``observed_through``).
"""

import collections
import random
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.engine.monitor import state_writes
from heat_health.engine.monitor import states
from heat_health.engine.monitor import watched
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

# A Nova task is never taken for stuck sooner: reboots and rebuilds take
# this long on a busy host.
STUCK_MIN_SECONDS = 30
# Targets a blind mode of a policy names in its report (the rest counted).
BLIND_TARGETS_SHOWN = 20


# Modes whose every check gives each target a verdict, news or not.
CHECKED_EACH = frozenset([obs.NODE_STATUS_POLL_URL, obs.LB_STATUS_POLLING])


def _verdict_time(target, mode):
    found = target.verdicts.get(mode)
    return found and found.observed_at


def _taken_back(old, new):
    """This engine took the policy again after its own lease ran out.

    Every take adds one to the generation: one more than the generation
    held means nobody else held the policy in between.
    """
    return (old.generation is not None and new.generation is not None and
            new.generation == old.generation + 1)


class Tracker(state_writes.StateWrites):
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
        self._by_policy = {}    # policy id -> [WatchedTarget, ...]
        # (index before the last load, after it, servers it let go,
        # servers it added)
        self._moves = None
        self._unsettled = set()  # target ids waiting for a decision
        # Rows this engine wrote: a row read before may since have been
        # written back to what was read (the same state, the same second).
        self.writes = 0
        # The same, per policy: a policy this engine wrote nothing of, and
        # whose rows and spec did not change, need not be loaded again.
        self.written = collections.Counter()
        self._inflight = set()  # target ids whose change is being stored
        # Target ids whose last write raised: it may have committed, so
        # memory is believed neither way until the row is read again.
        self._unknown = set()
        self._dirty = {}        # target id -> Observation to store
        # Called after a target was stored UNHEALTHY (recovery wakes up).
        self.on_failure = None
        # Called with a server id whose detectors must report it again
        # (those that report only news): its recovery started, or what
        # was seen of it while its policy was frozen was dropped.
        self.on_look_again = None

    # The index

    def load(self, policies, targets_by_policy, generations,
             resolutions=None, unchanged=()):
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
        :param unchanged: ids of policies whose policy, generation,
            resolution and rows are those of the last load, and which this
            engine wrote nothing of since (``written``): their targets are
            kept as they are, not taken row by row again, so that a load
            costs what changed, not the size of the fleet.
        :returns: the verdicts held on the targets of the policies no longer
            watched, for their new owner: what this engine saw after that
            engine looked its servers up is known nowhere else.
        """
        resolutions = resolutions or {}
        looked_away, differing = [], []
        with self._lock:
            kept = {pid for pid in unchanged
                    if pid in self._policies and pid in self._by_policy}
            new_policies = {}
            for policy in policies:
                if policy.id in kept:
                    new_policies[policy.id] = self._policies[policy.id]
                    continue
                new_policies[policy.id] = watched.WatchedPolicy(
                    policy, generations.get(policy.id),
                    resolutions.get(policy.id))
            # The targets of kept policies stay where they are: the index
            # is copied, and only what changed is taken out and put in.
            kept &= set(targets_by_policy) & set(new_policies)
            dropped = [target for pid, targets in self._by_policy.items()
                       if pid not in kept for target in targets]
            new_targets = dict(self._targets)
            by_server = dict(self._by_server)
            gone_ids = {target.id for target in dropped}
            for target in dropped:
                del new_targets[target.id]
            for server_id in {target.server_id for target in dropped}:
                left = tuple(t for t in by_server[server_id]
                             if t.id not in gone_ids)
                if left:
                    by_server[server_id] = left
                else:
                    del by_server[server_id]
            added = []
            for policy_id, rows in targets_by_policy.items():
                policy = new_policies.get(policy_id)
                if policy is None or policy_id in kept:
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
                        self._unknown.discard(row.id)
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
                    added.append(target)
            by_policy = {pid: self._by_policy[pid] for pid in kept}
            for target in added:
                by_server[target.server_id] = by_server.get(
                    target.server_id, ()) + (target,)
                by_policy.setdefault(target.policy.id, []).append(target)
            gone_servers = {target.server_id for target in dropped
                            if target.server_id not in by_server}
            new_servers = {target.server_id for target in added
                           if target.server_id not in self._by_server}
            self._moves = (self._by_server, by_server, gone_servers,
                           new_servers)
            let_go = [observation
                      for pid in set(self._by_policy) - set(new_policies)
                      for target in self._by_policy[pid]
                      for observation in target.verdicts.values()]
            self._policies = new_policies
            self._targets = new_targets
            self._by_server = by_server
            self._by_policy = by_policy
            for gone in set(self.written) - set(new_policies):
                del self.written[gone]
            # In place (other threads add to them), over what they hold.
            for ids in (self._unsettled, self._unknown):
                ids.difference_update([i for i in ids
                                       if i not in new_targets])
            for target_id in [i for i in self._dirty if i not in new_targets]:
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

    def look_again(self, server_id):
        """Have the detectors report on the server at their next look."""
        self._look_again(server_id)

    def is_watched(self, server_id):
        """Cheap: called for every notification about any server."""
        return server_id in self._by_server

    def watching(self):
        """{server id: its targets} as loaded last: never changed in place.

        A load makes a new one, so that whether the watched servers
        changed is told by identity, without copying the fleet's ids.
        """
        return self._by_server

    def moved(self, before):
        """(servers no longer watched, servers newly watched) since before.

        ``before`` is what ``watching()`` returned. Told by the last load
        when it was the only one since: two differences of the fleet's ids
        at every load would cost more than the load itself.
        """
        moves, after = self._moves, self._by_server
        if moves is not None and moves[0] is before and moves[1] is after:
            return moves[2], moves[3]
        return before.keys() - after.keys(), after.keys() - before.keys()

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

    def projects_of(self, server_ids):
        """The projects of the policies watching these servers."""
        with self._lock:
            return {t.policy.project_id for server_id in server_ids
                    for t in self._by_server.get(server_id, ())
                    if t.policy.project_id}

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
        if obs.is_blind(observation):
            # A mode gone blind may change what is decided (verification
            # no longer waits for it).
            new = observation.source not in target.blind
            target.blind[observation.source] = observation.reason
            return new
        if observation.verdict == obs.UNKNOWN:
            return False
        target.blind.pop(observation.source, None)
        target.verdicts[observation.source] = observation
        target.streak = (target.streak + 1 if observation.verdict ==
                         obs.HEALTHY else 0)
        return True

    def settle(self):
        """Decide the targets held back or whose write failed.

        Those whose write raised are read again first: decided from stale
        memory, a change could write back what that write replaced.
        """
        self.reread_unknown()
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
            rows = [dict(state_writes.observation_columns(o), id=target_id,
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
        target.seen = observation.observed_at
        if (stored is None or stored.verdict != observation.verdict or
                stored.reason != observation.reason or
                stored.source != observation.source):
            target.stored = observation
            self._dirty[target.id] = observation

    def observed_through(self, polled_at=None):
        """{policy id: when its detectors last confirmed what is stored}.

        A target's observation is stored only when it changes; the report
        tells that detectors are alive by this, written with the leases:
        one value per policy, none per target. Nova's status poll reports
        only news, so its last poll that succeeded (``polled_at``)
        confirms every server it watches; a poll URL and a pool confirm
        each target at each check. The policy's value is the oldest of
        its modes'. Notifications are only news: a policy watching by
        them alone has none, nor has one with a target not seen since
        this engine loaded it, or an observation not stored yet.
        """
        with self._lock:
            dirty = self._dirty
            result = {}
            for policy_id, targets in self._by_policy.items():
                if not targets or any(t.seen is None or t.id in dirty
                                      for t in targets):
                    continue
                times = []
                for mode in targets[0].policy.modes:
                    if mode == obs.NODE_STATUS_POLLING:
                        times.append(polled_at)
                    elif mode in CHECKED_EACH:
                        times.extend(_verdict_time(t, mode)
                                     for t in targets)
                if times and None not in times:
                    result[policy_id] = min(times)
            return result

    def _decide(self, target, now):
        """A _Change to store, or None; under the lock, no I/O."""
        if target.id in self._inflight or target.id in self._unknown:
            # Its previous change is being stored, or its outcome is not
            # known until the row is read again: look again after.
            self._unsettled.add(target.id)
            return None
        result = states.transition(target.state, target.verdicts, now,
                                   target.policy.spec, target.suppression(),
                                   target.streak, frozenset(target.blind))
        if result.held:
            self._unsettled.add(target.id)
        if result.decision is None:
            return None
        self._inflight.add(target.id)
        return state_writes.Change(target, result.decision, now,
                                   self._dirty.get(target.id), self._rnd)

    # Recovery: the planner reads here, the recovery loop writes through
    # state_writes

    def holds(self, policy_id, rows):
        """Whether memory holds what these rows of the policy store.

        The same targets, each with its server, place, grace, state and
        recovery: rows that differ only by this engine's own writes since
        they were last read need no new load.
        """
        with self._lock:
            known = {t.id: t for t in self._by_policy.get(policy_id, ())}
            if len(known) != len(rows):
                return False
            for row in rows:
                target = known.get(row.id)
                if (target is None or target.server_id != row.server_id or
                        target.path != row.path or
                        target.grace_until != watched.naive(
                            row.grace_until) or target.differs(row)):
                    return False
            return True

    def blind_of(self, policy_id, shown=BLIND_TARGETS_SHOWN):
        """{mode: {reason, targets, count}}: modes blind for some targets.

        ``targets`` names the first ``shown`` of them by path; ``reason``
        is the first target's (the rule that refused its check).
        """
        with self._lock:
            found = {}
            for target in sorted(self._by_policy.get(policy_id, ()),
                                 key=lambda t: t.path):
                for mode, reason in target.blind.items():
                    entry = found.setdefault(mode, {
                        'reason': reason, 'targets': [], 'count': 0})
                    entry['count'] += 1
                    if len(entry['targets']) < shown:
                        entry['targets'].append(target.path)
            return found

    def targets_of(self, policy_id):
        """The watched targets of one policy (live objects: read only)."""
        with self._lock:
            return list(self._by_policy.get(policy_id, ()))
