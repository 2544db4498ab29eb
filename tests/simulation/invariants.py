"""What users depend on, checked after every step of a simulated world.

``Checker.after(step)`` returns the invariants the step broke, each a
one-line message. It reads the stored rows straight from the world's
sqlite connection (only when something was written since the last read)
and what the doubles recorded since the previous step:

* one Nova action sent (accepted or refused; fencing STOP included), one
  workflow execution started or one webhook POSTed, and one
  replacement per attempt of a place (of its server, or of the group
  member holding it, replaced whole); an attempt is a stored ``(attempt,
  started_at)`` of the place's recovery (the ``replaced`` stage keeps its
  attempt); across a compute host that stops reporting and comes back
  too: what nova-compute's restart retries by itself (an interrupted
  reboot) is Nova's doing, not a second action of ours;
* no Nova action of recovery (accepted or refused) on a server whose
  compute host had been UNKNOWN (not reporting) for longer than
  ``compute_hosts.FRESH_SECONDS`` (how long the engine believes a listing
  of the hosts) plus a second when Nova took it: Nova finishes or undoes
  that host's operations itself once it is back;
* no recovery action (Nova action, mark, stack update) while the policy
  is disabled, paused, OBSERVE, its stack suspended or under a user's
  update, as stored before the step began, nor one the policy does not
  allow (STOP and deletes belong to RECREATE);
* the concurrency limits, of a policy and of an engine;
* a target in recovery keeps its row, also when its group member is
  replaced whole and its server comes back in another stack; a member
  is marked only by a policy whose RECREATE replaces members;
* what an engine believes equals what is stored, after its own step;
  except targets in flight, targets another writer changed since the
  engine last read its rows, and targets whose last write by the engine
  raised (it may have been committed) until the engine writes them again;
* a write the tracker reported stored is stored (checked at the call);
* the stored brake has the kind computed from the stored rows, after the
  owner's recovery pass (a pass whose writes did not fail), unless a row
  of the policy changed since the owner last read them (a user's reset, a
  new server synced by a tick that failed before it read the rows);
* nothing says "issued" unless Nova accepted an action in that step;
* an attempt is not escalated while Nova still carries out a task on its
  server, less than the stuck deadline (``STUCK_MIN_SECONDS`` at the
  least) after the last action its policy's recovery sent, unless its host is
  forced down: the task may yet heal it, or belong to a nova-compute that
  stopped and that Nova does not show down yet;
* an attempt starts no sooner than its back-off (at its least jitter)
  after the place's previous attempt ended, healed or failed;
* a target takes no other policy's own verdict (a poll URL's, a pool's:
  ``policy_id`` set), not even into its stored observation (checked at
  the call);
* a Nova action of recovery is sent only for the policy whose stack's
  trust sends it, on a server that policy's own evidence said failed: an
  UNHEALTHY verdict, Nova's or its own, taken by its target of that server
  since that target last turned HEALTHY (then every verdict it held said
  so);
* a Nova action (or a RECREATE's mark) on a server whose recovery records
  members to drain comes after the drain: the members are at weight 0 (or
  left the pool), or the drain gave up: its ``lb_status_timeout`` passed
  since its stored start, or Octavia failed in the step;
* a member recovery drained is never given weight back once its server
  was replaced (the pool follower may not have removed it yet);
* liveness with a bound: a member recovery drained gets its weight back
  (or leaves the pool) and a CHECK_FAILED recovery set is cleared once
  the target is HEALTHY (or GAVE_UP, for members), or its policy
  observes and no recovery carries it on (a verification runs to its
  deadline), within ``BOUND_PASSES`` clean recovery passes of the owner
  (its queue empty before the pass, no fault pending) and
  ``BOUND_SECONDS``; a fault starts the count again.
"""

import datetime
import json
import sys

from oslo_config import cfg

from heat_health.db import api as db_api
try:
    from heat_health.engine.monitor import compute_hosts
except ImportError:     # an acting core from before compute hosts
    compute_hosts = None
from heat_health.engine.monitor import tracker
from heat_health.engine.recovery import attempts as attempts_mod
from heat_health.engine.recovery import loop as loop_mod
from heat_health.engine.recovery import planner
from heat_health.engine.recovery import recreate
from heat_health.engine.recovery import timeline
from heat_health.policy import spec as policy_spec
from tests.simulation import heat_double
from tests.simulation import truth as truth_mod

IN_RECOVERY = frozenset(['RECOVERING', 'VERIFYING'])
FAILING = frozenset(['SUSPECT', 'UNHEALTHY', 'RECOVERING', 'VERIFYING',
                     'GAVE_UP'])
# States in which recovery may still replace a server it marked.
MAY_REPLACE = FAILING - {'GAVE_UP'}
BOUND_PASSES = 3
# Seconds what a deleted policy left (a drain, a mark) may stay: nothing
# owns it any more, so no pass of an owner will undo it.
DELETED_SECONDS = 30
# Nova calls of a RECREATE that forces out a server that will not stop.
FORCED = frozenset(['delete', 'force_delete'])
# Seconds of slack over the sum of a recovery's own deadlines.
RECOVERY_SLACK_SECONDS = 30
# Seconds a task Nova carries out is waited for, at the least.
STUCK_MIN_SECONDS = tracker.STUCK_MIN_SECONDS
BOUND_SECONDS = 5
# Seconds a server's host may have been UNKNOWN when recovery acts on it:
# the engine's listing of the hosts may be that old, and a second more.
NOT_REPORTING_SECONDS = getattr(compute_hosts, 'FRESH_SECONDS', 1.0) + 1
# The policy action a Nova action of recovery belongs to.
ACTION_OF = {'start': 'START', 'reboot': 'REBOOT', 'rebuild': 'REBUILD',
             'unpause': 'UNPAUSE', 'resume': 'RESUME', 'stop': 'RECREATE',
             'evacuate': 'EVACUATE',
             'delete': 'RECREATE', 'force_delete': 'RECREATE'}
# What is owed, by kind: (pool or stack, address or resource, weight or
# server), seconds late, the target, the clean passes.
_OWED = {
    'weight': ('member %(1)s of pool %(0)s still not at weight %(2)s %(3)ds '
               'after recovery stopped needing it drained: target %(4)s '
               '(%(5)d clean passes of its owner)'),
    'mark': ('resource %(0)s/%(1)s (%(2)s) still CHECK_FAILED %(3)ds after '
             'recovery stopped intending to replace it: target %(4)s '
             '(%(5)d clean passes of its owner)'),
    'stuck': ('target %(0)s (%(1)s) still %(2)s %(3)ds past its bound of '
              '%(4)ss (%(5)d clean passes of its owner)'),
}
_TARGET_SQL = ('SELECT id, policy_id, server_id, stack_id, resource_name, '
               'state, state_since, recovery, attempts FROM '
               'heat_health_target')
_POLICY_SQL = ('SELECT id, engine_id, generation, lease_expires_at, '
               'enabled, suspended, paused_at, braked, spec FROM '
               'heat_health_policy')
_EVENT_SQL = ('SELECT id, server_id, new_state, reason, policy_id FROM '
              'heat_health_event WHERE id > ? ORDER BY id')


def _time(text):
    if text is None or isinstance(text, datetime.datetime):
        return text
    return datetime.datetime.fromisoformat(text)


def _json(value):
    """Memory and rows compared as the database would hold them."""
    if isinstance(value, str):
        value = json.loads(value)
    value = json.loads(json.dumps(value, default=str)) if value else None
    return value or None


class Row(object):
    __slots__ = ('id', 'policy_id', 'server_id', 'stack_id',
                 'resource_name', 'state', 'since', 'recovery', 'attempts')

    def __init__(self, values):
        (self.id, self.policy_id, self.server_id, self.stack_id,
         self.resource_name, state, since, recovery, attempts) = values
        self.state = state
        self.since = _time(since)
        self.recovery = _json(recovery)
        self.attempts = attempts or 0

    @property
    def place(self):
        return (self.stack_id, self.resource_name)


class PolicyRow(object):
    __slots__ = ('id', 'engine_id', 'generation', 'lease', 'enabled',
                 'suspended', 'paused', 'braked', 'spec')

    def __init__(self, values):
        (self.id, self.engine_id, self.generation, lease, enabled,
         suspended, paused, self.braked, spec) = values
        self.lease = _time(lease)
        self.enabled = bool(enabled)
        self.suspended = bool(suspended)
        self.paused = paused is not None
        self.spec = json.loads(spec) if isinstance(spec, str) else spec


class Step(object):
    """What the explorer is about to do: an engine's operation or not."""

    def __init__(self, label, engine=None, op=None, fault=False):
        self.label = label
        self.engine = engine     # the Engine acting, or None
        self.op = op             # 'tick', 'pass' or 'run'
        self.fault = fault


class Checker(object):
    """The invariants of one world (see the module's docstring)."""

    def __init__(self, world, conf=cfg.CONF):
        self.w = world
        self.limit = conf.heat_health.max_concurrent_recoveries
        self._conn_fairy = world.db._facade.writer.get_engine() \
            .raw_connection()
        self._conn = self._conn_fairy.dbapi_connection
        self._changes = None
        self.rows = {}           # target id -> Row
        self.policies = {}       # policy id -> PolicyRow
        self._event_marker = 0
        self._seen = dict(accepted=0, refused=0, marks=0, updates=0,
                          replacements=0, heat_events=0, batches=0,
                          executions=0, posts=0)
        self._places = {}        # server id -> {policy id: place}
        self._evidence = {}      # (policy, server) -> {scope: step}
        self._given_up = set()   # (policy, place, drain start) not drained
        self._step = 0           # steps checked
        self._epoch = {}         # place -> (attempt, started_at)
        self._actions = {}       # (place, epoch) -> [labels]
        self._replaced = {}      # (place, epoch) -> count
        self._ended = {}         # place -> (attempt, ended at)
        self._drained = {}       # (pool, address) -> weight before
        self._weights = {}       # pool -> {address: weight} last seen
        self._passes = {}        # policy id -> clean owner passes
        self._last_action = {}   # (policy, server) -> last recovery Accepted
        self._owed = {}          # obligation -> (passes, since)
        self._foreign = {}       # engine id -> target ids others wrote
        self._ambiguous = {}     # engine id -> target ids, raising write
        self._user_busy = set()  # root stack ids under a user's update
        self.pending = []        # violations found inside a step
        self._writing = None     # engine whose step runs
        self._write_raised = False
        self._refreshed = set()
        self._retargeted = set()  # policies deleted or given new targets
        self._owners = {}        # target id -> policy id, before the step
        self._free_since = {}    # policy id -> when it may act again
        self._fault_at = None    # when the last fault was injected
        self._swallowed = []     # (where, error) a loop logged and went on
        self._errors_seen = {}   # engine id -> errors already judged
        self._wrap_database()
        self._wrap_loop_log()
        for pool_id in world.octavia.pools:
            self._weights[pool_id] = world.octavia.weights(pool_id)
        self._read()
        self._map_places()
        self.truth = truth_mod.Truth(world, self._places, self._spec)
        self._flags = self._policy_flags()
        for engine in world.engines:
            if engine.alive:
                self.attach(engine)

    def close(self):
        for name, original in self._originals.items():
            setattr(db_api, name, original)
        del loop_mod.LOG.exception
        self.truth.close()
        self._conn_fairy.close()

    def _spec(self, policy_id):
        """The policy's spec as stored (as registered, once deleted)."""
        row = self.policies.get(policy_id)
        return row.spec if row is not None else \
            self.w._policy(policy_id).spec

    def _wrap_loop_log(self):
        """What the recovery loop's steps log and go on from is seen.

        ``_carry_out`` catches every error of a step; the world's engine
        records those that reach it (``Engine.errors``).
        """
        log = loop_mod.LOG
        original = log.exception

        def exception(msg, *args, **kwargs):
            error = sys.exc_info()[1]
            self._swallowed.append(('recovery loop', '%s: %r' % (
                msg % args[0] if args and isinstance(args[0], dict)
                else msg, error)))
            return original(msg, *args, **kwargs)
        log.exception = exception

    # Hooks into the engines and the database API

    def attach(self, engine):
        """Check what this engine's tracker reports stored.

        Again after a restart: a new tracker.
        """
        tracker = engine.tracker
        if getattr(tracker, '_checked', False):
            return
        tracker._checked = True
        step, columns = tracker.store_step, tracker.store_columns

        def store_step(target, expect, state, reason, columns=None,
                       **kwargs):
            done = step(target, expect, state, reason, columns, **kwargs)
            if done:
                self._stored(engine, target, dict(columns or {},
                                                  state=state))
                if state == 'UNHEALTHY':
                    # The recovery's own finding: its attempt did not heal
                    # the server (verified, refused, gone). Evidence of
                    # the place for its next rung.
                    self._evidence.setdefault(
                        (target.policy.id, target.server_id),
                        {})[target.policy.id] = self._step
            return done

        def store_columns(target, values):
            done = columns(target, values)
            if done:
                self._stored(engine, target, dict(values))
            return done
        tracker.store_step = store_step
        tracker.store_columns = store_columns
        timeline = engine.loop.timeline
        lb_event = timeline.lb_event

        def _lb_event(policy, target, kind, reason):
            if kind == 'DRAINED' and 'not drained' in reason:
                # The drain failed (Octavia's error): given up, as designed.
                self._given_up.add((policy.id, target.place, (
                    target.recovery or {}).get('drain_started')))
            return lb_event(policy, target, kind, reason)
        timeline.lb_event = _lb_event
        take = tracker._take

        def _take(target, observation):
            stored = target.stored
            taken = take(target, observation)
            self._took(engine, target, observation, taken,
                       target.stored is not stored)
            return taken
        tracker._take = _take
        refresh = engine._refresh

        def _refresh(policies, *args):
            read = refresh(policies, *args)
            # The policies whose rows were read (all, in older cores).
            self._refreshed.update(p.id for p in policies
                                   if read is None or p.id in read)
            # Passed on: after a restart the engine (a new tracker) is
            # attached again and this wrapper wrapped once more; a None
            # from here would tell the outer one every policy was read.
            return read
        engine._refresh = _refresh

    def _took(self, engine, target, observation, taken, noted):
        scope = observation.policy_id
        if scope is not None and scope != target.policy.id and (
                taken or noted):
            self.pending.append(
                'target %s (%s) of %s took %s\'s own verdict: %s %s (%s)' % (
                    target.id, target.server_id, target.policy.id, scope,
                    observation.source, observation.verdict,
                    observation.reason))
        if taken and observation.verdict == 'UNHEALTHY':
            self._evidence.setdefault(
                (target.policy.id, target.server_id), {})[scope] = self._step

    def _check_evidence(self, policy_id, server_id, label):
        """The acting policy's own evidence said the server failed."""
        scopes = self._evidence.get((policy_id, server_id)) or {}
        if None in scopes or policy_id in scopes:
            return []
        return ['recovery action %s for %s, whose own evidence never said '
                'the server failed (UNHEALTHY taken from: %s)' % (
                    label, policy_id, ', '.join(sorted(
                        map(str, scopes))) or 'nothing')]

    def _forget_evidence(self, before):
        """A target that turned HEALTHY starts its evidence afresh.

        It was decided HEALTHY on verdicts none of which said otherwise;
        only what was taken before this step is forgotten: a failure seen
        in the step after that decision is still to be decided.
        """
        for key, row in self.rows.items():
            if row.state != 'HEALTHY' or before.get(key, (None,))[0] == \
                    'HEALTHY':
                continue
            scopes = self._evidence.get((row.policy_id, row.server_id))
            if scopes:
                for scope in [k for k, v in scopes.items()
                              if v < self._step]:
                    del scopes[scope]

    def _check_drained(self, policy_id, place, label):
        """The recovery acts only once its drain is done or given up."""
        row = [r for r in self.rows.values()
               if r.policy_id == policy_id and r.place == place]
        recovery = (row[0].recovery or {}) if row else {}
        drained = recovery.get('drained') or {}
        if not drained or self._octavia_failed or (
                policy_id, place,
                recovery.get('drain_started')) in self._given_up:
            return []
        specs = {s['pool_id']: s for s in self.w.heat.lb_specs(
            self.w._policy(policy_id).stack_id)}
        now = self.w.clock.now()
        started = _time(recovery.get('drain_started'))
        found = []
        for pool_id, (address, _weight) in sorted(drained.items()):
            spec = specs.get(pool_id)
            if spec is None or pool_id not in self.w.octavia.pools:
                continue
            weight = self.w.octavia.weights(pool_id).get(address)
            if not weight:
                continue
            timeout = datetime.timedelta(
                seconds=int(spec.get('lb_status_timeout') or 60))
            if started is not None and now - started >= timeout:
                continue
            found.append(
                '%s while member %s of pool %s is at weight %s: its drain '
                'is neither done nor given up (started %s, %ss ago)' % (
                    label, address, pool_id, weight,
                    recovery.get('drain_started'),
                    'never' if started is None else
                    '%.1f' % (now - started).total_seconds()))
        return found

    def _stored(self, engine, target, columns):
        row = self.w.db.real['target_get_rows']([target.id]).get(
            target.id)
        wrong = []
        for name, value in sorted(columns.items()):
            held = getattr(row, name, None) if row is not None else None
            if name == 'recovery':
                same = _json(held) == _json(value)
            elif isinstance(value, datetime.datetime) or value is None:
                same = _time(held) == value or (not held and not value)
            else:
                same = held == value
            if not same:
                wrong.append(name)
        if row is None or wrong:
            self.pending.append(
                'write reported stored is not: %s stored %s of target %s '
                '(%s) but the row holds otherwise' % (
                    engine.id, ', '.join(wrong) or 'a row', target.id,
                    target.server_id))

    def _wrap_database(self):
        """Which targets an engine's writes raised on (maybe committed)."""
        self._originals = {}
        for name in ('target_transition', 'target_store_columns'):
            original = getattr(db_api, name)
            self._originals[name] = original
            setattr(db_api, name, self._watch(name, original))

    def _watch(self, name, original):
        def call(engine_id, *args, **kwargs):
            if name == 'target_transition':
                ids = {c['target']['id'] for c in args[0]}
            else:
                ids = {args[0]}
            ambiguous = self._ambiguous.setdefault(engine_id, set())
            try:
                result = original(engine_id, *args, **kwargs)
            except BaseException:
                self._write_raised = True
                ambiguous.update(ids)
                raise
            ambiguous.difference_update(ids)
            return result
        return call

    # Reading the world

    def _read(self):
        changes = self._conn.total_changes
        if changes == self._changes:
            return False
        self._changes = changes
        self.rows = {r[0]: Row(r) for r in
                     self._conn.execute(_TARGET_SQL).fetchall()}
        policies = {r[0]: PolicyRow(r) for r in
                    self._conn.execute(_POLICY_SQL).fetchall()}
        for policy_id, row in self.policies.items():
            now = policies.get(policy_id)
            if now is None or (now.spec or {}).get('targets') != \
                    (row.spec or {}).get('targets'):
                self._retargeted.add(policy_id)
        self.policies = policies
        return True

    def _map_places(self):
        for policy in self.w.policies:
            for place, found in self.w.heat.places(policy.stack_id).items():
                self._places.setdefault(found['server_id'], {})[
                    policy.id] = place

    def _policy_flags(self):
        """Why each policy must not act now, as stored (or None)."""
        flags = {}
        for policy in self.w.policies:
            row = self.policies.get(policy.id)
            if row is None:
                flags[policy.id] = 'deleted'
                continue
            recovery = (row.spec or {}).get('recovery') or {}
            why = None
            if not row.enabled:
                why = 'disabled'
            elif row.paused:
                why = 'paused'
            elif recovery.get('mode') == 'OBSERVE':
                why = 'OBSERVE'
            elif row.suspended:
                why = 'suspended'
            elif policy.stack_id in self._user_busy:
                why = "under a user's stack update"
            flags[policy.id] = why
        return flags

    def _allowed(self, policy_id, name):
        row = self.policies.get(policy_id)
        if row is None:
            return True     # acting at all is what is wrong (_forbidden)
        actions = ((row.spec or {}).get('recovery') or {}).get('actions')
        return not actions or name in {policy_spec.rung(a)[0]
                                       for a in actions}

    def _owner(self, policy_id, engine):
        """The engine holds the policy, by its memory and by the row."""
        row = self.policies.get(policy_id)
        return (engine.alive and row is not None and
                row.engine_id == engine.id and
                engine.owned.get(policy_id) == row.generation and
                row.lease is not None and row.lease >= self.w.clock.now())

    def user_update(self, stack_id):
        self._user_busy.add(stack_id)

    def fault(self):
        """A fault was injected: liveness bounds count from now."""
        now = self.w.clock.now()
        self._fault_at = now
        for key in self._owed:
            self._owed[key] = (self._passes.get(key[1], 0), now)

    # The check

    def before(self, step):
        self._writing = step.engine
        self._write_raised = False
        self._db_hits = len(self.w.db.faults.hits)
        self._octavia_hits = len(self.w.octavia.faults.hits)
        self._fault_hits = self._hits()
        self._step += 1
        self._refreshed = set()
        if step.engine is not None:
            self.attach(step.engine)
            self._queue_empty = not step.engine.executor.queue

    def after(self, step):
        """The violations of the step just taken (one-line messages)."""
        found, self.pending = list(self.pending), []
        before = {k: (r.state, r.recovery) for k, r in self.rows.items()}
        servers = {k: r.server_id for k, r in self.rows.items()}
        self._owners = {k: r.policy_id for k, r in self.rows.items()}
        self._read()
        # A row given a new server (the sync of a stack's replacement) is
        # news to an engine until its ``_refresh`` reads the policy's rows:
        # the tick that synced may have failed before it read them.
        self.foreign_write([k for k, r in self.rows.items()
                            if servers.get(k, r.server_id) != r.server_id])
        w = self.w
        if self._user_busy:
            w.heat._settle()
            self._user_busy = {root for root in self._user_busy
                               if w.heat.stacks[root].status ==
                               'IN_PROGRESS'}
        self._octavia_failed = len(self.w.octavia.faults.hits) != getattr(
            self, '_octavia_hits', 0)
        new = self._news()
        if new['accepted'] or new['refused'] or new['replacements'] or \
                new['marks'] or new['heat_events'] or new['batches']:
            self._map_places()
        self._update_epochs()
        found += self._check_actions(step, new)
        found += self._check_issued(new)
        found += self._check_escalations(new)
        found += self._check_backoff(before)
        found += self._check_kept(before)
        found += self._check_restores(new['batches'])
        found += self._check_follower(new['batches'])
        self._track_drains(new['batches'])
        found += self._check_concurrency(step, before)
        if step.engine is not None and step.engine.alive:
            found += self._check_memory(step.engine)
            if step.op == 'pass':
                found += self._check_brake(step.engine)
        found += self._check_liveness(step)
        found += self._check_given_up_replaced(new['updates'], before)
        found += self._check_recreate_ends(before, new['events'])
        found += self._check_swallowed()
        found += self.truth.pending
        self.truth.pending = []
        self.truth.sample()
        self._forget_evidence(before)
        self._note_free(self._policy_flags())
        return found

    def _note_free(self, flags):
        """Keep the new flags; note when a policy may act again."""
        now = self.w.clock.now()
        for policy_id, why in flags.items():
            if why is None and self._flags.get(policy_id):
                self._free_since[policy_id] = now
        self._flags = flags

    def _hits(self):
        w = self.w
        return sum(len(f.hits) for f in (
            w.db.faults, w.nova.faults, w.nova.list_faults,
            w.nova.host_faults, w.octavia.faults, w.heat.faults,
            w.mistral.faults, w.hooks.faults))

    def _check_swallowed(self):
        """An error a loop logged and went on from is a defect.

        Unless a fault the world injected struck in the step: then it is
        the fault's, as designed.
        """
        errors, self._swallowed = self._swallowed, []
        for engine in self.w.engines:
            seen = self._errors_seen.get(engine.id, 0)
            errors += [(where, error) for _at, where, error in
                       engine.errors[seen:]]
            self._errors_seen[engine.id] = len(engine.errors)
        if not errors or self._hits() != self._fault_hits:
            return []
        return ['%s swallowed an error no fault explains: %s' % (
            where, _cut(error, 200)) for where, error in errors]

    def _check_given_up_replaced(self, updates, before):
        """No update of recovery replaces a server given up on.

        Its mark was recovery's; its target was GAVE_UP before and after
        the step: the README says nothing more is done to it.
        """
        found = []
        for update in updates:
            if update.kind != 'recovery':
                continue
            for stack_id, name in update.marked:
                marks = [m for m in self.w.heat.marks
                         if (m.stack_id, m.resource_name) ==
                         (stack_id, name)]
                if not marks or marks[-1].source != 'recovery':
                    continue
                server_id = marks[-1].server_id or marks[-1].physical_id
                rows = [(key, row) for key, row in self.rows.items()
                        if server_id in (row.server_id, (
                            row.recovery or {}).get('old_server_id'))]
                # Another policy watching the server may replace it by a
                # RECREATE of its own: only the one that gave up stops.
                replacing = {row.policy_id for _key, row in rows
                             if (row.recovery or {}).get('action') ==
                             'RECREATE' and row.state in IN_RECOVERY}
                for key, row in rows:
                    if replacing - {row.policy_id}:
                        continue
                    if row.state == 'GAVE_UP' and \
                            before.get(key, (None,))[0] == 'GAVE_UP':
                        found.append(
                            'stack update by recovery of %s replaces %s '
                            '(%s/%s), whose target %d was given up on' % (
                                update.stack_id, server_id, stack_id,
                                name, key))
        return found

    def _check_recreate_ends(self, before, events):
        """A RECREATE that ends without replacing says why."""
        found = []
        said = {e[1] for e in events if e[3]}
        for key, (state, recovery) in before.items():
            row = self.rows.get(key)
            recovery = recovery or {}
            if (state not in IN_RECOVERY or row is None or
                    row.state in IN_RECOVERY or
                    recovery.get('action') != 'RECREATE' or
                    row.server_id != recovery.get('old_server_id')):
                continue
            if row.server_id not in said:
                found.append('RECREATE of %s (target %d) ended %s without '
                             'replacing it and without a reason' % (
                                 row.server_id, key, row.state))
        return found

    def _news(self):
        w = self.w
        sources = dict(accepted=w.nova.accepted, refused=w.nova.refused,
                       marks=w.heat.marks,
                       updates=w.heat.updates,
                       replacements=w.heat.replacements,
                       heat_events=w.heat.events,
                       batches=w.octavia.batches,
                       executions=w.mistral.started, posts=w.hooks.posted)
        new = {}
        for name, items in sources.items():
            new[name] = items[self._seen[name]:]
            self._seen[name] = len(items)
        new['events'] = []
        if self._changes is not None:
            new['events'] = self._conn.execute(
                _EVENT_SQL, (self._event_marker,)).fetchall()
            if new['events']:
                self._event_marker = new['events'][-1][0]
        return new

    def _update_epochs(self):
        for row in self.rows.values():
            recovery = row.recovery or {}
            if recovery.get('started_at') and recovery.get('stage') != \
                    'replaced':
                self._epoch[row.place] = (recovery.get('attempt'),
                                          recovery['started_at'])

    def _place_of(self, server_id, stack_id=None):
        """(policy id, place) of a server, for the stack's policy if named.

        Without a stack, the first policy by id that watches it.
        """
        places = self._places.get(server_id) or {}
        if stack_id is not None:
            policy = self.w.policy_of_stack(stack_id)
            if policy is None or policy.id not in places:
                return None, None
            return policy.id, places[policy.id]
        for policy_id in sorted(places):
            return policy_id, places[policy_id]
        return None, None

    def _check_actions(self, step, new):
        found = []
        refused = set(map(id, new['refused']))
        for action in new['accepted'] + new['refused']:
            if action.actor != 'recovery':
                continue
            policy_id, place = self._place_of(action.server_id,
                                              action.stack_id)
            label = '%s %s%s' % (action.action, action.server_id,
                                 ' (refused)' if id(action) in refused
                                 else '')
            if policy_id is None:
                found.append('recovery action %s on a server no policy '
                             'of its stack %s watches' % (label,
                                                          action.stack_id))
                continue
            found += self._check_evidence(policy_id, action.server_id,
                                          label)
            found += _check_host(action, label)
            found += self._check_drained(policy_id, place, label)
            key = (place, self._epoch.get(place))
            # The delete of a server its fencing could not stop
            # (node_force_recreate) follows the STOP: counted apart.
            done = self._actions.setdefault(
                key + ((action.action,) if action.action in FORCED else ()),
                [])
            done.append(label)
            if len(done) > 1:
                found.append(
                    'more than one Nova action in attempt %s of %s: %s' % (
                        key[1], '/'.join(place), ', '.join(done)))
            name = ACTION_OF.get(action.action, action.action)
            if not self._allowed(policy_id, name):
                found.append('recovery action %s (%s) is not among the '
                             'actions of %s' % (label, name, policy_id))
            found += self._forbidden(policy_id, 'Nova action ' + label)
        found += self._check_outside(new)
        for mark in new['marks']:
            if mark.source != 'recovery':
                continue
            # A group member's mark is about the server it holds.
            server_id = getattr(mark, 'server_id', None) or mark.physical_id
            policy_id, place = self._place_of(server_id, mark.stack_id)
            found += self._forbidden(policy_id, 'mark CHECK_FAILED of %s' %
                                     mark.physical_id)
            if server_id != mark.physical_id and policy_id is not None and \
                    self._replace(policy_id) != 'MEMBER':
                found.append('member %s/%s marked for server %s by %s, '
                             'whose RECREATE replaces servers alone' % (
                                 mark.stack_id, mark.resource_name,
                                 server_id, policy_id))
            if mark.reason.startswith('RECREATE'):
                found += self._check_drained(policy_id, place, 'mark of %s' %
                                             mark.physical_id)
        for update in new['updates']:
            if update.kind != 'recovery':
                continue
            policy = [p for p in self.w.policies
                      if p.stack_id == update.root_id][0]
            found += self._forbidden(policy.id, 'stack update of %s' %
                                     update.stack_id)
            if not self._allowed(policy.id, 'RECREATE'):
                found.append('stack update by recovery of %s: RECREATE is '
                             'not among its actions' % policy.id)
            if not update.marked:
                found.append('stack update by recovery of %s replaces '
                             'nothing: no resource is CHECK_FAILED' %
                             update.stack_id)
        for replacement in new['replacements']:
            place = (replacement.stack_id, replacement.resource_name)
            # The server's own mark, or its member's (replaced whole).
            marked = getattr(replacement, 'marked', None) or (
                place + (replacement.old,))
            marks = [m for m in self.w.heat.marks if
                     (m.stack_id, m.resource_name, m.physical_id) == marked]
            # A RECREATE's replacement; a server given up on is marked for
            # whatever update comes next to replace it.
            if replacement.outcome != 'replaced' or not marks or \
                    marks[-1].source != 'recovery' or \
                    not marks[-1].reason.startswith('RECREATE'):
                continue
            key = (place, self._epoch.get(place))
            self._replaced[key] = self._replaced.get(key, 0) + 1
            if self._replaced[key] > 1:
                found.append('server %s replaced twice in attempt %s of %s'
                             % (replacement.old, key[1], '/'.join(place)))
        return found

    def _replace(self, policy_id):
        """What the policy's RECREATE replaces, as stored."""
        row = self.policies.get(policy_id)
        return (((row and row.spec) or {}).get('recovery') or {}).get(
            'replace') or 'SERVER'

    def _check_outside(self, new):
        """Workflow executions and webhook POSTs: as Nova actions are.

        One effect per attempt of a place, counted with its Nova actions;
        on the policy's own evidence, after the drain, only where the
        ladder has such a rung, never while the policy may not act.
        """
        found = []
        effects = [('workflow %s' % e.workflow, 'MISTRAL_WORKFLOW', e)
                   for e in new['executions']] + [
            ('webhook %s' % p.url, 'WEBHOOK', p) for p in new['posts']]
        for what, name, effect in effects:
            label = '%s of %s' % (what, effect.server_id)
            policy_id, place = self._place_of(effect.server_id,
                                              effect.stack_id)
            if policy_id is None:
                found.append('%s on a server no policy of its stack %s '
                             'watches' % (label, effect.stack_id))
                continue
            found += self._check_evidence(policy_id, effect.server_id,
                                          label)
            found += self._check_drained(policy_id, place, label)
            key = (place, self._epoch.get(place))
            done = self._actions.setdefault(key, [])
            done.append(label)
            if len(done) > 1:
                found.append('more than one recovery effect in attempt %s '
                             'of %s: %s' % (key[1], '/'.join(place),
                                            ', '.join(done)))
            if not self._allowed(policy_id, name):
                found.append('%s: %s is not among the actions of %s' % (
                    label, name, policy_id))
            found += self._forbidden(policy_id, label)
        return found

    def _forbidden(self, policy_id, what):
        why = self._flags.get(policy_id)
        if why:
            return ['%s while %s was %s (stored before the step)' % (
                what, policy_id, why)]
        return []

    def _check_issued(self, new):
        servers = {a.server_id for a in new['accepted']
                   if a.actor == 'recovery'}
        places = {self._place_of(a.server_id, a.stack_id)[1]
                  for a in new['accepted'] if a.actor == 'recovery'}
        found = []
        for _id, server_id, _state, reason, _policy in new['events']:
            if ' issued' in (reason or '') and server_id not in servers:
                found.append('timeline says "%s" of %s but Nova accepted '
                             'no action of it' % (reason, server_id))
        for event in new['heat_events']:
            place = (event.stack_id, event.resource_name)
            if ' issued' in event.reason and place not in places:
                found.append('Heat event says "%s" on %s but Nova accepted '
                             'no action there' % (event.reason,
                                                  '/'.join(place)))
        return found

    def _check_escalations(self, new):
        """No next rung over a task Nova still runs, before it is stuck.

        The task the attempt's own action set: another policy watching the
        server acts on its own evidence and deadlines.
        """
        found = []
        acted = {a.server_id for a in new['accepted'] + new['refused']
                 if a.actor == 'recovery'}
        now = self.w.clock.now()
        for _id, server_id, _state, reason, policy_id in new['events']:
            last = self._last_action.get((policy_id, server_id))
            server = self.w.nova.servers.get(server_id)
            if (not (reason or '').startswith('escalated:') or
                    last is None or server is None or server.deleted or
                    not server.task_state or server_id in acted):
                continue
            host = self.w.nova.hosts.get(server.host)
            if host is not None and host.shown(now)[0] == 'DOWN':
                continue
            age = (now - last.at).total_seconds()
            if age < STUCK_MIN_SECONDS:
                found.append('%s escalated while Nova still carries out '
                             'task %s, %.0fs after its %s (stuck only '
                             'after %ss)' % (server_id, server.task_state,
                                             age, last.action,
                                             STUCK_MIN_SECONDS))
        for action in new['accepted']:
            policy = self.w.policy_of_stack(action.stack_id)
            if action.actor == 'recovery' and policy is not None:
                self._last_action[(policy.id, action.server_id)] = action
        return found

    def _check_backoff(self, before):
        found = []
        for key, row in self.rows.items():
            old_state, old_recovery = before.get(key, (None, None))
            recovery = row.recovery or {}
            old_recovery = old_recovery or {}
            if row.state not in IN_RECOVERY and (
                    old_state in IN_RECOVERY or
                    recovery.get('started_at') not in (
                        None, old_recovery.get('started_at'))):
                # Ended, or started and ended within the step.
                self._ended[row.place] = (
                    recovery.get('attempt') or old_recovery.get('attempt'),
                    row.since)
            if row.state not in IN_RECOVERY or old_state in IN_RECOVERY:
                continue
            last, ended = self._ended.get(row.place, (None, None))
            if last is None or recovery.get('attempt') != last + 1:
                continue
            spec = policy_spec.RecoverySpec.parse(
                (self.policies[row.policy_id].spec or {}).get('recovery'))
            least = datetime.timedelta(seconds=spec.backoff(last, -1.0))
            started = _time(recovery.get('started_at'))
            if started is not None and started - ended < least:
                found.append(
                    'attempt %d of %s started %.1f s after attempt %d '
                    'ended; its back-off is %.1f s' % (
                        last + 1, '/'.join(row.place),
                        (started - ended).total_seconds(), last,
                        least.total_seconds()))
        return found

    def _check_kept(self, before):
        """A target in recovery keeps its row, wherever its server goes.

        Also a RECREATE's whose group member Heat replaces whole: its
        server moves to another stack, its row follows (attempts, history
        and what the recovery left to undo with it). Unless its policy
        was deleted (also one kept deleted for what other rows still owe)
        or given other targets: what the recovery left then is judged by
        the liveness checks.
        """
        return ['target %d (%s) removed during its recovery' % (
            key, state) for key, (state, _recovery) in before.items()
            if state in IN_RECOVERY and key not in self.rows and
            self._owners.get(key) not in self._retargeted and
            not (self._owners.get(key) is not None and
                 self._deleted(self._owners[key]))]

    def _check_restores(self, batches):
        """A replaced server's drained member never regains weight.

        Replaced by the time of the change: a step's virtual waits (a
        drain's, a restore's) may see a stack update end after it.
        """
        found = []
        replaced = {r.old: r.at for r in self.w.heat.replacements
                    if r.outcome == 'replaced'}
        by_address = {a: server.id for server in self.w.nova.servers.values()
                      for a in server.addresses if server.id in replaced}
        for batch in batches:
            if batch.actor != 'recovery':
                continue
            last = self._weights.get(batch.pool_id, {})
            for address, weight in sorted(batch.weights.items()):
                if (weight and last.get(address) == 0 and
                        address in by_address and
                        replaced[by_address[address]] <= batch.at):
                    found.append(
                        'member %s of pool %s given weight %s back after '
                        'its server %s was replaced' % (
                            address, batch.pool_id, weight,
                            by_address[address]))
        return found

    def _check_follower(self, batches):
        """The pool follower changes members, never a weight by itself.

        It sends drained members at weight 0; any other member it takes to
        weight 0 is a drain nobody asked for (a restore it undid).
        """
        found = []
        for batch in batches:
            if batch.actor != 'follower':
                continue
            drained = {address for address, (state, _w) in
                       db_api.drain_states([batch.pool_id]).get(
                           batch.pool_id, {}).items()
                       if state == db_api.HELD}
            last = self._weights.get(batch.pool_id, {})
            for address, weight in sorted(batch.weights.items()):
                if weight == 0 and last.get(address) and \
                        address not in drained:
                    found.append(
                        'the pool follower set member %s of pool %s to '
                        'weight 0 (was %s), drained by no recovery: a '
                        'restore undone' % (address, batch.pool_id,
                                            last[address]))
        return found

    def _track_drains(self, batches):
        for batch in batches:
            last = self._weights.get(batch.pool_id, {})
            for address, weight in batch.weights.items():
                key = (batch.pool_id, address)
                if (batch.actor == 'recovery' and weight == 0 and
                        last.get(address) and key not in self._drained):
                    self._drained[key] = last[address]
            for key in [k for k in self._drained if k[0] == batch.pool_id]:
                weight = batch.weights.get(key[1])
                if weight is None or weight == self._drained[key]:
                    del self._drained[key]
            self._weights[batch.pool_id] = dict(batch.weights)

    def _check_concurrency(self, step, before):
        found = []
        entered = {k for k, r in self.rows.items()
                   if r.state in ('RECOVERING', 'VERIFYING') and
                   before.get(k, (None,))[0] not in ('RECOVERING',
                                                     'VERIFYING')}
        if not entered:
            return found
        for policy in self.w.policies:
            row = self.policies.get(policy.id)
            if row is None:
                continue
            limit = ((row.spec or {}).get('recovery') or {}).get(
                'max_concurrent', 1)
            active = [r for r in self.rows.values()
                      if r.policy_id == policy.id and
                      r.state in ('RECOVERING', 'VERIFYING')]
            if len(active) > limit and entered & {r.id for r in active}:
                found.append('%d recoveries of %s at once (max_concurrent '
                             '%d)' % (len(active), policy.id, limit))
        engine = step.engine
        if engine is not None:
            recovering = [r for r in self.rows.values()
                          if r.state == 'RECOVERING' and
                          self.policies[r.policy_id].engine_id == engine.id]
            if (len(recovering) > self.limit and
                    entered & {r.id for r in recovering}):
                found.append('%s carries %d recoveries at once '
                             '(max_concurrent_recoveries %d)' % (
                                 engine.id, len(recovering), self.limit))
        return found

    def _excused(self, engine):
        return (self._foreign.get(engine.id, set()) |
                self._ambiguous.get(engine.id, set()))

    def _check_memory(self, engine):
        foreign = self._foreign.setdefault(engine.id, set())
        refreshed = {r.id for r in self.rows.values()
                     if r.policy_id in self._refreshed}
        foreign.difference_update(refreshed)
        excused = self._excused(engine)
        tracker = engine.tracker
        found = []
        with tracker._lock:
            targets = list(tracker._targets.values())
            inflight = set(tracker._inflight)
        for target in targets:
            if (target.id in inflight or target.id in excused or
                    not self._owner(target.policy.id, engine) or
                    target.policy.generation !=
                    self.policies[target.policy.id].generation):
                continue
            row = self.rows.get(target.id)
            if row is None or row.server_id != target.server_id:
                continue
            mine = (target.state, target.attempts, _json(target.recovery))
            stored = (row.state, row.attempts, row.recovery)
            if mine != stored:
                diff = [n for n, a, b in zip(('state', 'attempts',
                                              'recovery'), mine, stored)
                        if a != b]
                found.append(
                    'memory of %s differs from the row of target %d (%s): '
                    '%s; memory %s, stored %s' % (
                        engine.id, target.id, target.server_id,
                        ', '.join(diff), _short(mine), _short(stored)))
        return found

    def foreign_write(self, target_ids):
        """A user (not an engine) wrote these rows, or gave them a server."""
        for engine in self.w.engines:
            self._foreign.setdefault(engine.id, set()).update(target_ids)

    def _check_brake(self, engine):
        if self._write_raised or len(self.w.db.faults.hits) != \
                self._db_hits:
            # A write of the pass failed: it is stored at the next one.
            return []
        found = []
        now = self.w.clock.now()
        excused = self._excused(engine)
        for policy in engine.tracker.policies():
            if not self._owner(policy.id, engine) or \
                    self._deleted(policy.id):
                continue
            rows = [r for r in self.rows.values() if r.policy_id == policy.id]
            if excused & {r.id for r in rows}:
                continue
            spec = policy.spec.recovery
            if spec.mode == 'OBSERVE':
                continue
            blind = engine._blind(policy.id) or engine.loop._nova_error(
                policy.id, now)
            computed = planner.brake(rows, spec, now, blind)
            stored = self.policies[policy.id].braked
            kind = timeline._brake_kind
            if kind(stored) != kind(computed and computed[:255]):
                found.append('stored brake of %s is %r, computed %r' % (
                    policy.id, _cut(stored), _cut(computed)))
        return found

    def _check_liveness(self, step):
        w = self.w
        now = w.clock.now()
        engine = step.engine
        if (step.op == 'pass' and engine is not None and engine.alive and
                self._queue_empty and not self._faults_pending()):
            seen = {p.id: p.spec.recovery.mode
                    for p in engine.tracker.policies()}
            for policy_id in list(engine.owned):
                row = self.policies.get(policy_id)
                mode = ((row.spec or {}).get('recovery') or {}).get(
                    'mode') if row is not None else None
                # A pass on a spec from before OBSERVE was switched does
                # not know what OBSERVE owes: the engine reads it at its
                # next tick.
                if self._owner(policy_id, engine) and (
                        mode != 'OBSERVE' or seen.get(policy_id) == mode):
                    self._passes[policy_id] = \
                        self._passes.get(policy_id, 0) + 1
        owed = set()
        by_server = {}
        for row in self.rows.values():
            by_server.setdefault(row.policy_id, {})[row.server_id] = row
        pools = {spec['pool_id']: root for root, specs in
                 w.heat.load_balancers.items() for spec in specs}
        for (pool_id, address), weight in self._drained.items():
            policy = w.policy_of_stack(pools.get(pool_id))
            if policy is None:
                continue
            row = self._row_at(address, policy.id,
                               by_server.get(policy.id, {}))
            if row is not None and not self._holds(row, address):
                # Its server was replaced: the member leaves with it.
                continue
            if row is None and self._left_by_a_replacement(address):
                # Heat's replacement of its server failed and left it: no
                # longer any policy's target, the failed server's member
                # leaves with it at Heat's next update, owed nothing.
                continue
            done = self._drain_over(policy.id, row)
            if done:
                owed.add(('weight', policy.id, pool_id, address, weight,
                          done))
        for stack in w.heat.stacks.values():
            for rsrc in stack.resources.values():
                if rsrc.state != ('CHECK', 'FAILED'):
                    continue
                marks = [m for m in w.heat.marks if
                         (m.stack_id, m.resource_name) ==
                         (stack.id, rsrc.name)]
                if not marks or marks[-1].source != 'recovery':
                    continue
                policy = w.policy_of_stack(stack.id)
                if policy is None:
                    continue
                row = by_server.get(policy.id, {}).get(
                    getattr(marks[-1], 'server_id', None) or
                    rsrc.physical_id)
                done = self._mark_over(policy.id, row)
                if done:
                    owed.add(('mark', policy.id, stack.id, rsrc.name,
                              rsrc.physical_id, done))
        owed |= self._stuck(now)
        for key in set(self._owed) - owed:
            del self._owed[key]
        found = []
        for key in owed:
            passes, since = self._owed.setdefault(
                key, (self._passes.get(key[1], 0), now))
            deleted = self._deleted(key[1])
            # A policy gone with its rows can give nothing back any more;
            # one kept deleted is undone by its owner's passes, as any.
            gone = key[1] not in self.policies
            if ((gone or self._passes.get(key[1], 0) - passes >=
                 BOUND_PASSES) and
                    now - since >= datetime.timedelta(
                        seconds=DELETED_SECONDS if deleted
                        else BOUND_SECONDS)):
                values = key[2:5] + ((now - since).total_seconds(), key[5],
                                     BOUND_PASSES)
                found.append(_OWED[key[0]] % {
                    str(i): v for i, v in enumerate(values)})
        return found

    def _deleted(self, policy_id):
        """Deleted, or kept deleted only until its leftovers are undone."""
        row = self.policies.get(policy_id)
        return row is None or bool((row.spec or {}).get('deleted'))

    def _acting_mode(self, policy_id, target=None):
        """Why the policy's recovery no longer owns what it did, or None.

        OBSERVE owes only what no recovery carries on: a verification
        runs to its deadline (its action was sent, the server may yet
        heal). A target still in recovery is owed under a key of its own,
        so that what its end (an abandon, an escalation) leaves counts
        from that end: undoing it takes passes of its own.
        """
        row = self.policies.get(policy_id)
        if row is None or self._deleted(policy_id):
            return 'its policy deleted'
        if ((row.spec or {}).get('recovery') or {}).get('mode') != \
                'OBSERVE':
            return None
        if target is None or target.state not in IN_RECOVERY:
            return 'its policy in OBSERVE'
        deadline = _time((target.recovery or {}).get('deadline'))
        if target.state == 'VERIFYING' and deadline is not None and \
                self.w.clock.now() < deadline:
            return None
        return 'its policy in OBSERVE (%d %s)' % (target.id, target.state)

    def _drain_over(self, policy_id, row):
        """Why a member recovery drained is owed its weight, or None.

        Its target ended (HEALTHY, GAVE_UP, reset by a user), left the
        policy's targets, or the policy was deleted or set to OBSERVE.
        """
        why = self._acting_mode(policy_id, row)
        if why:
            return why
        if row is None:
            return 'no longer a target'
        if row.state in ('HEALTHY', 'GAVE_UP', 'NO_DATA'):
            return '%d %s' % (row.id, row.state)
        return None

    def _mark_over(self, policy_id, row):
        """Why a resource recovery marked is owed its mark's end, or None.

        Recovery intends to replace it only while its target fails and
        has not been given up on, in a policy that heals.
        """
        why = self._acting_mode(policy_id, row)
        if why:
            return why
        if row is None:
            return 'no longer a target'
        if row.state not in MAY_REPLACE:
            return '%d %s' % (row.id, row.state)
        return None

    def _stuck(self, now):
        """Targets in recovery past their policy's bound, as owed keys.

        Counted from the attempt's start, from when the policy was last
        allowed to act again and from the last fault, whichever is latest.
        """
        owed = set()
        for row in self.rows.values():
            if row.state not in IN_RECOVERY or \
                    self._flags.get(row.policy_id) or \
                    self._deleted(row.policy_id):
                continue
            started = _time((row.recovery or {}).get('started_at')) or \
                row.since
            start = max(filter(None, [started,
                                      self._free_since.get(row.policy_id),
                                      self._fault_at]))
            bound = self._recovery_bound(row.policy_id)
            if now - start > datetime.timedelta(seconds=bound):
                owed.add(('stuck', row.policy_id, row.id, row.server_id,
                          row.state, bound))
        return owed

    def _recovery_bound(self, policy_id):
        """Seconds an attempt may take, by its policy's own deadlines.

        Its drain (lb_status_timeout), its fencing (node_delete_timeout),
        its stack updates and a member's move, the wait for its action
        (the action's deadline, at least a stuck task's), and verification
        (success_threshold checks within the evidence bound), with slack.
        """
        spec = self.policies[policy_id].spec or {}
        parsed = policy_spec.PolicySpec.parse(spec)
        stack_id = self.w._policy(policy_id).stack_id
        drain = max([int(s.get('lb_status_timeout') or 60)
                     for s in self.w.heat.lb_specs(stack_id)] or [0])
        update = (recreate.MAX_UPDATES * heat_double.UPDATE_SECONDS +
                  recreate.UNMOVED_SECONDS)
        action = max(parsed.grace, attempts_mod.MIN_VERIFY_SECONDS,
                     STUCK_MIN_SECONDS)
        verify = (parsed.recovery.success_threshold * parsed.interval +
                  truth_mod.evidence_seconds(spec))
        return (drain + parsed.recovery.node_delete_timeout + update +
                action + verify + RECOVERY_SLACK_SECONDS)

    def _holds(self, row, address):
        """Whether the row's server now is the one at ``address``."""
        server = self.w.nova.servers.get(row.server_id)
        return server is not None and address in server.addresses

    def _left_by_a_replacement(self, address):
        """Whether the server at ``address`` is one Heat replaced."""
        replaced = {r.old for r in self.w.heat.replacements}
        return any(address in server.addresses and server.id in replaced
                   for server in self.w.nova.servers.values()
                   if not server.deleted)

    def _row_at(self, address, policy_id, by_server):
        """The policy's row of the server at ``address`` (or replacing it).

        Only that policy's: another policy watching the same server (or
        having replaced it) owes nothing to this policy's pool.
        """
        for server in self.w.nova.servers.values():
            if address in server.addresses:
                row = by_server.get(server.id)
                if row is not None:
                    return row
                for candidate in self.rows.values():
                    recovery = candidate.recovery or {}
                    if candidate.policy_id == policy_id and server.id in (
                            recovery.get('old_server_id'),
                            recovery.get('drained_of')):
                        return candidate
        return None

    def _faults_pending(self):
        w = self.w
        return w.octavia.held() or any(
            f.pending for f in (w.db.faults, w.nova.faults,
                                w.nova.list_faults, w.nova.host_faults,
                                w.octavia.faults, w.heat.faults))


def _check_host(action, label):
    """No action on a server whose host has long stopped reporting."""
    since = getattr(action, 'host_since', None)
    if getattr(action, 'host_state', None) != 'UNKNOWN' or since is None:
        return []
    silent = (action.at - since).total_seconds()
    if silent <= NOT_REPORTING_SECONDS:
        return []
    return ['recovery action %s while its host %s had not reported for '
            '%.1fs (UNKNOWN since %s)' % (
                label, action.host, silent, since.isoformat())]


def _cut(text, size=60):
    text = '%s' % (text,)
    return text if len(text) <= size else text[:size] + '...'


def _short(values):
    state, attempts, recovery = values
    recovery = recovery or {}
    return '%s/%s/%s' % (state, attempts, ','.join(
        '%s=%s' % (k, recovery[k]) for k in ('stage', 'attempt', 'action')
        if k in recovery) or '-')
