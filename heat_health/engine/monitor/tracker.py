"""The actual state: what every watched target's detectors last said.

Every detector hands its observations to ``Tracker.observe``; the tracker
finds the targets of the observed server (a server may be watched by several
policies), keeps each mode's latest verdict per target, and decides the
target's state with ``states.decide``. A change of state is written (target
row and event row in one transaction) and announced as a
``heat_health.target.state_change`` notification.

No state is decided while the target is within its grace, while its policy
is disabled, or while the policy's stack (or a nested stack holding a
target) is in progress; verdicts seen then are kept and decided as soon as
that ends. Observations that change nothing are written in bulk by
``flush`` and only when they differ from what is stored, or the stored one
is old, so tens of thousands of healthy servers cost almost nothing.
"""

import datetime
import threading

from heat.common import context as heat_context
from heat.common import messaging
from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.engine.monitor import observation as obs
from heat_health.engine.monitor import states

LOG = logging.getLogger(__name__)

EVENT_TYPE = 'heat_health.target.state_change'

# A stored observation that still says the same is rewritten after this
# long, so the report shows that detectors are alive.
OBSERVATION_REFRESH = datetime.timedelta(minutes=10)

DEFAULT_INTERVAL = 60


def _naive(value):
    return value and timeutils.normalize_time(value)


class WatchedPolicy(object):
    """What the tracker needs of a policy's spec."""

    __slots__ = ('id', 'stack_id', 'modes', 'conditional', 'interval',
                 'enabled', 'in_progress')

    def __init__(self, policy):
        detection = (policy.spec or {}).get('detection') or {}
        self.id = policy.id
        self.stack_id = policy.stack_id
        self.modes = tuple(m['type'] for m in
                           detection.get('detection_modes') or ())
        self.conditional = detection.get('recovery_conditional',
                                         states.ANY_FAILED)
        self.interval = detection.get('interval') or DEFAULT_INTERVAL
        self.enabled = bool(policy.enabled)
        self.in_progress = False

    def same_spec(self, other):
        return (self.modes, self.conditional, self.interval,
                self.enabled) == (other.modes, other.conditional,
                                  other.interval, other.enabled)


class WatchedTarget(object):
    """One target's decided state and the latest verdict of each mode."""

    __slots__ = ('id', 'policy', 'server_id', 'stack_id', 'resource_name',
                 'path', 'state', 'reason', 'since', 'grace_until',
                 'verdicts', 'stored')

    def __init__(self, row, policy):
        self.id = row.id
        self.policy = policy
        self.server_id = row.server_id
        self.stack_id = row.stack_id
        self.resource_name = row.resource_name
        self.path = row.path
        self.state = row.state
        self.reason = row.state_reason
        self.since = _naive(row.state_since)
        self.grace_until = _naive(row.grace_until)
        # Resume from the database: the last stored verdict still stands.
        self.stored = None
        self.verdicts = {}
        if row.observation and row.observed_at:
            self.stored = obs.Observation(
                row.server_id, row.observation, row.observation_reason,
                row.observation_source, _naive(row.observed_at))
            if (row.observation != obs.UNKNOWN and
                    row.observation_source in policy.modes):
                self.verdicts[row.observation_source] = self.stored

    def suppressed(self, now):
        policy = self.policy
        return (not policy.enabled or policy.in_progress or
                (self.grace_until is not None and now < self.grace_until))


def _observation_columns(o):
    return {'observation': o.verdict,
            'observation_reason': (o.reason or '')[:255],
            'observation_source': o.source,
            'observed_at': o.observed_at}


class Tracker(object):
    """Thread-safe index of watched servers and their targets' states.

    :param host: this engine's host, for the notifications' publisher id.
    :param in_progress: policy id -> bool, asked right before a target is
        declared failed, so a stack action that just started (and may be
        replacing servers) is never taken for a failure.
    :param notifier: an oslo.messaging Notifier; Heat's by default.
    """

    def __init__(self, host, in_progress=None, notifier=None,
                 clock=timeutils.utcnow):
        self._lock = threading.RLock()
        self._publisher = 'heat-health-engine.%s' % host
        self._notifier = notifier
        self._in_progress = in_progress
        self._clock = clock
        self._policies = {}
        self._targets = {}      # target id -> WatchedTarget
        self._by_server = {}    # server id -> (WatchedTarget, ...)
        self._unsettled = set()  # target ids waiting for a decision
        self._dirty = {}        # target id -> Observation to store

    # The index

    def load(self, policies, targets_by_policy):
        """Watch exactly these policies' targets from now on.

        Targets already watched keep their verdicts and state; new ones
        start from their rows (so an engine resumes from the database).
        """
        with self._lock:
            now = self._clock()
            new_policies = {}
            for policy in policies:
                view = WatchedPolicy(policy)
                old = self._policies.get(policy.id)
                if old is not None:
                    view.in_progress = old.in_progress
                new_policies[policy.id] = view
            new_targets = {}
            by_server = {}
            for policy_id, rows in targets_by_policy.items():
                policy = new_policies.get(policy_id)
                if policy is None:
                    continue
                for row in rows:
                    target = self._targets.get(row.id)
                    if (target is None or target.server_id != row.server_id
                            or not target.policy.same_spec(policy)):
                        target = WatchedTarget(row, policy)
                        self._unsettled.add(row.id)
                    else:
                        target.policy = policy
                        target.grace_until = _naive(row.grace_until)
                        target.path = row.path
                        target.stack_id = row.stack_id
                        target.resource_name = row.resource_name
                    if target.state == states.INIT or (
                            target.grace_until is not None and
                            target.grace_until > now):
                        self._unsettled.add(row.id)
                    new_targets[row.id] = target
                    by_server.setdefault(row.server_id, []).append(target)
            self._policies = new_policies
            self._targets = new_targets
            self._by_server = {k: tuple(v) for k, v in by_server.items()}
            self._unsettled &= set(new_targets)
            for target_id in set(self._dirty) - set(new_targets):
                del self._dirty[target_id]

    def set_in_progress(self, policy_id, in_progress):
        with self._lock:
            policy = self._policies.get(policy_id)
            if policy is None or policy.in_progress == in_progress:
                return
            policy.in_progress = in_progress
            if not in_progress:
                self._unsettled.update(
                    t.id for t in self._targets.values()
                    if t.policy is policy)

    def is_watched(self, server_id):
        """Cheap: called for every notification about any server."""
        return server_id in self._by_server

    def servers(self, mode):
        """Ids of the servers some policy watches with ``mode``."""
        with self._lock:
            return {server_id for server_id, targets in self._by_server.items()
                    if any(mode in t.policy.modes for t in targets)}

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
        targets = self._by_server.get(observation.server_id)
        if not targets:
            return
        changes = []
        with self._lock:
            now = self._clock()
            for target in self._by_server.get(observation.server_id, ()):
                if observation.source not in target.policy.modes:
                    continue
                previous = target.verdicts.get(observation.source)
                if (previous is not None and
                        previous.observed_at > observation.observed_at):
                    # Delivered late (listener threads, batches): older
                    # news never overrides newer news of the same source.
                    continue
                self._note(target, observation)
                if observation.verdict == obs.UNKNOWN:
                    continue
                target.verdicts[observation.source] = observation
                if target.suppressed(now):
                    self._unsettled.add(target.id)
                    continue
                change = self._decide(target, now)
                if change:
                    changes.append(change)
            if changes:
                self._record(changes)

    def settle(self):
        """Decide the targets whose grace or stack action has ended."""
        with self._lock:
            if not self._unsettled:
                return
            now = self._clock()
            changes = []
            for target_id in list(self._unsettled):
                target = self._targets.get(target_id)
                if target is None:
                    self._unsettled.discard(target_id)
                    continue
                if target.suppressed(now):
                    continue
                self._unsettled.discard(target_id)
                change = self._decide(target, now)
                if change:
                    changes.append(change)
            if changes:
                self._record(changes)

    def flush(self):
        """Store the observations that changed (one transaction)."""
        with self._lock:
            if not self._dirty:
                return
            rows = [dict(_observation_columns(o), id=target_id)
                    for target_id, o in self._dirty.items()]
            self._dirty = {}
        try:
            db_api.target_health_record(rows, [])
        except Exception:
            LOG.exception('Could not store %d observations', len(rows))

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
        decision = states.decide(target.verdicts, target.policy.modes,
                                 target.policy.conditional)
        if decision.state == target.state:
            return None
        if (decision.state in (states.SUSPECT, states.UNHEALTHY) and
                self._in_progress is not None and
                self._in_progress(target.policy.id)):
            target.policy.in_progress = True
            self._unsettled.add(target.id)
            return None
        change = {'target': target, 'old': target.state,
                  'new': decision.state, 'reason': decision.reason,
                  'source': decision.source, 'at': now}
        target.state = decision.state
        target.reason = decision.reason
        target.since = now
        return change

    def _record(self, changes):
        rows = []
        events = []
        for change in changes:
            target = change['target']
            row = {'id': target.id, 'state': change['new'],
                   'state_reason': (change['reason'] or '')[:255],
                   'state_since': change['at']}
            observation = self._dirty.pop(target.id, None)
            if observation is not None:
                row.update(_observation_columns(observation))
            rows.append(row)
            events.append({'policy_id': target.policy.id,
                           'server_id': target.server_id,
                           'old_state': change['old'],
                           'new_state': change['new'],
                           'reason': (change['reason'] or '')[:255],
                           'source': change['source'],
                           'created_at': change['at']})
        try:
            db_api.target_health_record(rows, events)
        except Exception:
            LOG.exception('Could not store %d state changes', len(rows))
        for change in changes:
            self._announce(change)

    def _announce(self, change):
        target = change['target']
        LOG.info('Target %(server)s (%(path)s) of policy %(policy)s: '
                 '%(old)s -> %(new)s (%(reason)s, by %(source)s)',
                 {'server': target.server_id, 'path': target.path,
                  'policy': target.policy.id, 'old': change['old'],
                  'new': change['new'], 'reason': change['reason'],
                  'source': change['source']})
        payload = {'policy_id': target.policy.id,
                   'stack_id': target.policy.stack_id,
                   'target_stack_id': target.stack_id,
                   'server_id': target.server_id,
                   'resource_name': target.resource_name,
                   'path': target.path,
                   'old_state': change['old'],
                   'new_state': change['new'],
                   'reason': change['reason'],
                   'source': change['source'],
                   'time': change['at'].isoformat()}
        try:
            notifier = self._notifier or messaging.get_notifier(
                self._publisher)
            notifier.info(heat_context.get_admin_context(), EVENT_TYPE,
                          payload)
        except Exception:
            LOG.exception('Could not send %s for %s', EVENT_TYPE,
                          target.server_id)
