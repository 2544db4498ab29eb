"""The recovery loop: carries out what the planner decides, safely.

Fed by stored states (the tracker's memory follows the database), it asks
``planner.plan`` what each policy's targets need and runs each step in a
small pool of threads, one step per target at a time, so the monitor's
tick and heartbeat never wait for Nova or Heat.

Every effect follows the same rule: the stage that says what is about to
be done is stored, fenced, before it is done; an effect is only believed
once its outcome is stored. A target's RECOVERING row holds the action
decided for its attempt and its ``stage``:

* ``intent``: decided, and the load balancer members to drain recorded
  (with the weights to give back) before any weight is changed; nothing
  asked of Nova or Heat yet. Carried on by whoever owns the policy.
* ``issuing``: the Nova action is being sent. Never sent again: an engine
  that finds this stage (after a restart, a takeover or a failed write)
  verifies instead, so there is at most one action per attempt.
* ``fencing`` / ``fenced``: RECREATE stops the old server (once) and waits
  until Nova shows it stopped.
* ``marked``: the resource, checked to still hold the old server, is
  marked CHECK_FAILED; it waits for the other RECREATEs of its stack on
  their way to their mark (at most ``replacement_gather_seconds``), and
  for the stack to take an update.
* ``updating``: heat-engine is asked to update the stack, once for every
  target marked; done once the resource holds another server
  (``replaced``), marked for the next update only when one ended without
  replacing it.

Nova actions run with the stack's stored trust context (the owner's
rights) through Heat's nova client plugin; a RECREATE marks the resource
CHECK_FAILED through the API's code path and has heat-engine update the
stack with ``existing`` (see heat_replace). Whatever a recovery leaves to
undo (drained members, a CHECK_FAILED it set) stays recorded with the
target until it is undone, across attempts and give-ups.
"""

import collections
import concurrent.futures
import datetime
import threading

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.engine.monitor import states
from heat_health.engine.pools import lb_drain
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import planner
from heat_health.engine.recovery import recreate
from heat_health.engine.recovery import settled_state
from heat_health.engine.recovery import timeline
from heat_health.objects import policy as policy_object
from heat_health.policy import spec as policy_spec

LOG = logging.getLogger(__name__)

RECREATE = 'RECREATE'
INTENT, FENCED = recreate.INTENT, recreate.FENCED
ISSUING, ISSUED, ESCALATE = 'issuing', 'issued', 'escalate'
# Stack states in which an action may be taken (heat-internals §8).
_ACTIONABLE = ('COMPLETE',)
# A Nova error is believed for this long: the policy stays braked.
BLIND_SECONDS = 30
# Seconds the loop waits after news of a failure before deciding, so
# failures that happen together are decided together (the brake sees
# them all).
GATHER_SECONDS = 0.2
# Seconds between two passes while a stack update of ours runs: a
# failure that waits for it joins the next update as soon as it ends.
UPDATE_WATCH_SECONDS = 0.25
# Seconds a stack's Nova client (and its token) is kept.
CLIENT_SECONDS = 600
# Seconds before a restore put off (the pool follower has not swapped the
# replaced server's member yet) is tried again: not at every pass.
RESTORE_RETRY_SECONDS = 1.0
# Shortest time an action is given to heal before the next rung.
MIN_VERIFY_SECONDS = 15
MAX_UPDATES = recreate.MAX_UPDATES
# Actions after which an ACTIVE server needs nothing more: Nova refuses
# them once the server is running (it may have healed by itself).
_TO_ACTIVE = frozenset([settled_state.START, settled_state.UNPAUSE,
                        settled_state.RESUME])


def _iso(when):
    return when.isoformat()


def _label(action):
    name, params = action
    kind = (params or {}).get('type')
    return '%s %s' % (name, kind) if kind else name


def _members_text(members):
    return ', '.join('%s in pool %s' % (address, pool)
                     for pool, (address, _w) in sorted(members.items()))


class RecoveryLoop(recreate.RecreateStages):
    """Recovery for the policies this engine owns.

    :param tracker: the monitor's Tracker (targets, store_step).
    :param replacer: a heat_replace.HeatReplacer.
    :param blind: policy id -> why its observers cannot be trusted now
        (the status poller's failure, its load balancer's), or None.
    :param actions: stack id -> NovaActions; by default through the
        replacer's stored-context nova client.
    :param drainer: a lb_drain.Drainer, or None not to drain members.
    :param executor: runs the steps (``submit``); a pool of
        ``max_concurrent_recoveries`` threads by default.
    :param background_events: Heat's events written on a thread of their
        own once started (timeline.EventWriter), not by each step.
    """

    def __init__(self, engine_id, tracker, replacer,
                 blind=lambda policy_id: None,
                 actions=None, drainer=None, conf=cfg.CONF,
                 clock=timeutils.utcnow, executor=None,
                 background_events=False):
        self.engine_id = engine_id
        self.tracker = tracker
        self.replacer = replacer
        self._blind = blind
        self._actions = actions or self._stack_nova
        self._drainer = drainer
        self._clients = {}       # stack id -> (NovaActions, expiry)
        self._clock = clock
        self._limit = conf.heat_health.max_concurrent_recoveries
        self._project_limit = (
            conf.heat_health.max_concurrent_recoveries_per_project)
        self._tick = conf.heat_health.monitor_tick
        self._gather = conf.heat_health.replacement_gather_seconds
        # Each stack's marked servers have an update of their own.
        self._by_stack = (conf.heat_health.replacement_update_stack ==
                          heat_replace.OWN)
        self._pool = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=self._limit,
            thread_name_prefix='heat-health-recovery')
        self._lock = threading.Lock()
        self._running = {}       # target id -> (policy id, step type)
        # Targets whose step reached a stage the next pass carries on.
        self._wake_when_done = set()
        self.timeline = timeline.Timeline(engine_id, replacer, clock)
        self._background_events = background_events
        self._nova_errors = {}   # policy id -> (reason, until)
        self._ours = {}          # stack id -> traversal of our update
        self._cohorts = {}       # target id -> lb_drain.Cohort of its Start
        self._open_cohorts = {}  # policy id -> its latest Cohort
        self._restore_after = {}  # target id -> when to try its restore
        # Called once heat-engine was asked to update a stack (the pool
        # follower looks at once).
        self.on_update = None
        self._wake = threading.Event()
        self._gather_next = False
        self._stopping = threading.Event()
        self._thread = None

    # Running

    def start(self):
        if self._background_events:
            self.timeline.heat_events.start()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='heat-health-recovery-loop')
        self._thread.start()

    def stop(self):
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)
        # After the steps: the events they queued are written.
        self.timeline.heat_events.stop()

    def wake(self, gather=True):
        """A pass soon.

        :param gather: a target failed: pause GATHER_SECONDS first, so
            failures that happen together are decided together; a stage
            reached (a mark) has nothing to gather (the planner waits for
            the marks on their way).
        """
        if gather:
            self._gather_next = True
        self._wake.set()

    def _run(self):
        while not self._stopping.is_set():
            if self._wake.wait(self._pause()):
                self._wake.clear()
                if self._gather_next:
                    self._gather_next = False
                    self._stopping.wait(GATHER_SECONDS)
            if self._stopping.is_set():
                break
            try:
                self.run_once()
            except Exception:
                LOG.exception('Recovery pass failed; retrying')

    def _pause(self):
        """Seconds to the next pass: shorter while an update of ours runs."""
        for policy in self.tracker.policies():
            for target in self.tracker.targets_of(policy.id):
                if (target.recovery or {}).get('stage') == recreate.UPDATING:
                    return min(self._tick, UPDATE_WATCH_SECONDS)
        return self._tick

    def run_once(self):
        """Plan every owned policy and start the steps it needs.

        The engine's limit counts the recoveries it carries out: targets
        RECOVERING and those whose start is under way.
        """
        now = self._clock()
        policies = self.tracker.policies()
        targets = {p.id: self.tracker.targets_of(p.id) for p in policies}
        with self._lock:
            starting = {tid for tid, (_p, kind) in self._running.items()
                        if kind is planner.Start}
        carried = {t.id for found in targets.values() for t in found
                   if t.state == states.RECOVERING}
        engine_room = max(self._limit - len(carried | starting), 0)
        # Each project's share: one project never takes every worker.
        project_cap = min(self._project_limit, self._limit)
        of_project = collections.Counter()
        for policy in policies:
            of_project[policy.project_id] += len(
                {t.id for t in targets[policy.id]
                 if t.state == states.RECOVERING or t.id in starting})
        for policy in policies:
            project_room = max(project_cap - of_project[policy.project_id],
                               0)
            plan = planner.plan(policy, targets[policy.id], now, starting,
                                engine_room, self._blind(policy.id) or
                                self._nova_error(policy.id, now),
                                project_room=project_room,
                                project_cap=project_cap,
                                gather=self._gather,
                                by_stack=self._by_stack)
            self.timeline.brake(policy, plan.brake, now)
            self._form_cohort(policy, plan.steps, now)
            for step in plan.steps:
                if isinstance(step, planner.Hold):
                    with self._lock:
                        busy = step.target.id in self._running
                    if not busy:
                        self.timeline.hold(policy, step.target,
                                           step.reason, now)
                    continue
                if self._submit(policy, step) and isinstance(
                        step, planner.Start):
                    engine_room -= 1
                    of_project[policy.project_id] += 1

    def _form_cohort(self, policy, steps, now):
        """Recoveries started together drain in one batch.

        Those of one pass, and those that start while the cohort's drains
        are still on their way.
        """
        with self._lock:
            ids = [s.target.id for s in steps if isinstance(s, planner.Start)
                   and s.target.id not in self._running]
            if not ids:
                return
            cohort = self._open_cohorts.get(policy.id)
            if cohort is None or not cohort.expect(ids, now):
                cohort = lb_drain.Cohort(ids, now + datetime.timedelta(
                    seconds=lb_drain.COHORT_SECONDS))
                self._open_cohorts[policy.id] = cohort
            self._cohorts.update((i, cohort) for i in ids)

    def _end_steps(self, target_ids):
        """Steps ended (or never ran): their cohorts wait no more."""
        with self._lock:
            left = [(i, self._cohorts.pop(i)) for i in target_ids
                    if i in self._cohorts]
        if any(cohort.leave(i) for i, cohort in left):
            # Drains that joined wait for no one: their next pass sends.
            self.wake(gather=False)

    @staticmethod
    def _targets(step):
        return getattr(step, 'targets', None) or (step.target,)

    def _submit(self, policy, step):
        ids = [t.id for t in self._targets(step)]
        with self._lock:
            busy = any(i in self._running for i in ids)
            if not busy:
                for target_id in ids:
                    self._running[target_id] = (policy.id, type(step))
        if busy:
            # Its own step is under way: neither held nor again (and in
            # no new cohort).
            return False
        for target_id in ids:
            self.timeline.forget(target_id)
        try:
            self._pool.submit(self._carry_out, policy, step)
        except RuntimeError:
            # Shutting down.
            with self._lock:
                for target_id in ids:
                    self._running.pop(target_id, None)
            self._end_steps(ids)
            return False
        return True

    def _carry_out(self, policy, step):
        try:
            if isinstance(step, planner.ReplaceMarked):
                self._replace_marked(policy, step)
            else:
                handler = {planner.Start: self._start,
                           planner.Advance: self._advance,
                           planner.Escalate: self._escalate,
                           planner.GiveUp: self._give_up,
                           planner.ResetAttempts: self._reset,
                           planner.Restore: self._restore,
                           planner.Unmark: self._unmark}[type(step)]
                handler(policy, step.target, step)
        except Exception:
            LOG.exception('Recovery step %(step)s of %(servers)s failed',
                          {'step': type(step).__name__,
                           'servers': ', '.join(
                               t.server_id for t in self._targets(step))})
        finally:
            ids = [t.id for t in self._targets(step)]
            with self._lock:
                for target_id in ids:
                    self._running.pop(target_id, None)
                woken = self._wake_when_done.intersection(ids)
                self._wake_when_done.difference_update(woken)
            self._end_steps(ids)
            if woken:
                self.wake(gather=False)

    def _wake_after_step(self, target):
        """A pass as soon as the target's running step has ended.

        Not before: a pass while the step runs finds the target busy and
        leaves its next step to the pass after, a tick later.
        """
        with self._lock:
            self._wake_when_done.add(target.id)

    def _stack_nova(self, stack_id):
        """Nova as the stack's owner, kept a while for its token.

        A new client means a new trust-scoped token, which Nova has to
        validate: most of a recovery's first second. Dropped after any
        error, so expired tokens or trusts are fetched anew.
        """
        now = self._clock()
        found = self._clients.get(stack_id)
        if found is not None and found[1] > now:
            return found[0]
        client = nova_actions.NovaActions(self.replacer.nova_client(stack_id))
        self._clients[stack_id] = (client, now + datetime.timedelta(
            seconds=CLIENT_SECONDS))
        return client

    # Observers and the brake

    def _nova_error(self, policy_id, now):
        found = self._nova_errors.get(policy_id)
        if found is None:
            return None
        reason, until = found
        if now >= until:
            del self._nova_errors[policy_id]
            return None
        return reason

    def _forget_clients(self, stack_id):
        """After an error: the stack's next clients get a new token."""
        self._clients.pop(stack_id, None)
        forget = getattr(self.replacer, 'forget_clients', None)
        if forget is not None:
            forget(stack_id)

    def _saw_nova_error(self, policy, error):
        self._forget_clients(policy.stack_id)
        self._nova_errors[policy.id] = (
            'Nova error: %s' % error,
            self._clock() + datetime.timedelta(seconds=BLIND_SECONDS))

    # Starting an attempt

    def _not_now(self, policy, before_mark=False):
        """Why no new effect may start on the policy's stack, or None.

        :param before_mark: the effect is a RECREATE's drain or fence,
            which may go on while a stack update of ours runs (its mark
            waits for the update's end, then joins the next one).
        """
        action, status = self.replacer.stack_status(policy.stack_id)
        if before_mark and (action, status) == ('UPDATE', 'IN_PROGRESS') \
                and self._updating(policy):
            return self._switched_off(policy)
        if status not in _ACTIONABLE or action in ('DELETE', 'SUSPEND'):
            return 'not now: stack is %s_%s' % (action, status)
        return self._switched_off(policy)

    def _updating(self, policy):
        """Whether the update running on the policy's stack is ours.

        Ours when its traversal is the one this engine saw start, or the
        one a target of the policy stored as still awaited. Being asked
        lately is not enough: a user's update may have superseded ours.
        """
        current = self.replacer.traversal(policy.stack_id)
        if current is None:
            return False
        if self._ours.get(policy.stack_id) == current:
            return True
        return any((t.recovery or {}).get('stage') == recreate.UPDATING and
                   t.recovery.get('update_traversal') == current
                   for t in self.tracker.targets_of(policy.id))

    @staticmethod
    def _switched_off(policy):
        """Why the policy may not act now, as stored, or None.

        Read again before every effect: the planner's view may be a claim
        old, and a step may have been queued before the switch.
        """
        stored = policy_object.Policy.get(policy.id)
        if stored is None:
            return 'the policy is gone'
        if not stored.enabled:
            return 'the policy is disabled'
        if stored.suspended:
            return 'the stack is suspended'
        if stored.parsed.recovery.mode == policy_spec.OBSERVE:
            return 'the policy only observes'
        return planner.paused_reason(stored.paused)

    @staticmethod
    def _allowed(policy, name):
        actions = policy.spec.recovery.actions
        return not actions or name in {a[0] for a in actions}

    def _choose(self, policy, found, step):
        """(ladder, index, action) for this attempt.

        A server stuck in a task gets what works from the state Nova
        settles in, if the policy allows that action; otherwise its own
        rung, which Nova may refuse (and the attempt then fails at once).
        """
        spec = policy.spec.recovery
        if spec.actions:
            ladder = [tuple(a) for a in spec.actions]
        elif found is None:
            ladder = [(RECREATE, {})]
        else:
            ladder = [tuple(a) for a in settled_state.default_ladder(
                found.vm_state, found.task_state, found.power_state)]
        index = min(step, len(ladder) - 1)
        action = ladder[index]
        if found is not None and found.task_state:
            stuck = tuple(settled_state.stuck_action(
                found.task_state, found.vm_state, found.power_state)[1])
            if self._allowed(policy, stuck[0]):
                action = stuck
        return ladder, index, action

    def _start(self, policy, target, step):
        spec = policy.spec.recovery
        held = self._not_now(policy, before_mark=True)
        if held:
            self.timeline.hold(policy, target, held, self._clock())
            return
        nova = self._actions(policy.stack_id)
        try:
            found = nova.status(target.server_id)
        except nova_actions.ServerGone:
            found = None
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)
            self.timeline.hold(policy, target,
                               'braked: Nova error: %s' % e, self._clock())
            return
        ladder, index, action = self._choose(policy, found, step.step)
        if action[0] != RECREATE:
            held = self._not_now(policy)
            if held:
                self.timeline.hold(policy, target, held, self._clock())
                return
        now = self._clock()
        # The action's deadline: node_update_timeout, never so short that
        # a booting server is taken for a failed action.
        verify = max(policy.spec.grace, MIN_VERIFY_SECONDS)
        attempts = planner.attempts_in_window(target, spec, now)
        attempt = attempts + 1
        recovery = db_api.leftovers(target.recovery) or {}
        if recovery.get('drained_of', target.server_id) != target.server_id:
            # Drained members of a server replaced since left with it.
            recovery.pop('drained', None)
            recovery.pop('drained_of', None)
        recovery.update({
            'action': action[0], 'params': dict(action[1] or {}),
            'step': index, 'ladder': [[n, dict(p or {})] for n, p in ladder],
            'attempt': attempt, 'old_server_id': target.server_id,
            'stage': INTENT, 'started_at': _iso(now),
            'verify_seconds': verify,
            'deadline': _iso(now + datetime.timedelta(seconds=verify)),
            'detected': (target.reason or '')[:200]})
        if action[0] == RECREATE:
            # Recorded before the marking: cleared if the server heals.
            recovery['marked_failed'] = target.server_id
        drained = dict(recovery.get('drained') or {})
        for pool, member in self._members(policy, target, action).items():
            # A member drained by an earlier attempt reads weight 0 now:
            # the weight it had before is the one to give back.
            drained.setdefault(pool, member)
        if drained:
            # The drain's start stored with the decision: one write less
            # before the drain.
            recovery.update(drained=drained, drained_of=target.server_id,
                            drain_started=_iso(now))
        elif action[0] != RECREATE:
            # Nothing to do before the action: it is sent right away.
            recovery['stage'] = ISSUING
        reason = ('%s started (attempt %d of %d, step %d of %d): %s' % (
            _label(action), attempt, spec.max_attempts, index + 1,
            len(ladder), target.reason or 'unhealthy'))
        if not self.tracker.store_step(
                target, states.UNHEALTHY, states.RECOVERING, reason,
                {'recovery': recovery, 'attempts': attempt,
                 'first_attempt_at': target.first_attempt_at if attempts
                 else now, 'next_attempt_at': None}, at=now):
            return
        self.timeline.heat_event(target, 'IN_PROGRESS', reason)
        self._carry_on(policy, target, nova)

    def _members(self, policy, target, action):
        """The server's members to drain now ({} without a drainer)."""
        if self._drainer is None or action[1].get('launch_before_terminate'):
            # Heat makes the new server first: the old one serves until
            # the pool swaps them.
            return {}
        with self._lock:
            cohort = self._cohorts.get(target.id)
        try:
            return self._drainer.members(
                policy.stack_id, target.server_id,
                cohort=cohort and (cohort, self._clock()))
        except Exception as ex:
            self.timeline.lb_event(policy, target, 'DRAINED', (
                'load balancer members not drained before %s: %s' %
                (action[0], ex)))
            return {}

    # Carrying an attempt on, stage by stage

    def _advance(self, policy, target, step):
        recovery = target.recovery or {}
        stage = recovery.get('stage')
        if stage == ISSUING:
            # Sent, or about to be, by whoever stored this: never again.
            return self._verifying(policy, target, '%s may have been sent '
                                   'before a restart or takeover: verifying, '
                                   'not sent again' % _label((
                                       recovery.get('action'),
                                       recovery.get('params'))))
        # Waiting for a stack update of ours: only the switches hold it.
        held = (self._switched_off(policy) if stage == recreate.UPDATING
                else self._not_now(policy, before_mark=(
                    recovery.get('action') == RECREATE and
                    stage in recreate.BEFORE_MARK)))
        if held:
            LOG.info('Recovery of %(p)s waits: %(r)s',
                     {'p': target.path, 'r': held})
            return
        self._carry_on(policy, target, self._actions(policy.stack_id))

    def _carry_on(self, policy, target, nova):
        """Take the stored attempt as far as it goes now."""
        recovery = dict(target.recovery or {})
        stage = recovery.get('stage')
        if stage == INTENT and not self._drain(policy, target, recovery):
            return
        if recovery.get('action') == RECREATE:
            return self._recreate(policy, target, recovery, nova)
        if stage == INTENT:
            recovery['stage'] = ISSUING
            if not self._store_stage(target, recovery, None):
                return
        if recovery.get('stage') == ISSUING:
            self._issue(policy, target, nova, recovery)

    def _drain(self, policy, target, recovery):
        """Weight 0 for the recorded members; False to stop here.

        A busy load balancer is waited for a little at each pass, up to
        its lb_status_timeout counted from the drain's stored start; the
        worker is free in between.
        """
        drained = recovery.get('drained')
        if not drained or self._drainer is None:
            return True
        now = self._clock()
        started = planner.parse_time(recovery.get('drain_started'))
        if started is None:
            recovery['drain_started'] = _iso(now)
            if not self.tracker.store_columns(target,
                                              {'recovery': recovery}):
                return False
            started = now
        with self._lock:
            cohort = self._cohorts.get(target.id)
        try:
            # A server to be replaced is stopped and replaced whether or
            # not the load balancer took the weight yet.
            self._drainer.drain(policy.stack_id, drained,
                                (now - started).total_seconds(),
                                settle=recovery.get('action') != RECREATE,
                                cohort=cohort and (cohort, target.id, now))
        except lb_drain.NotYet as ex:
            LOG.info('Drain of %(p)s goes on at the next pass: %(e)s',
                     {'p': target.path, 'e': ex})
            return False
        except Exception as ex:
            self._forget_clients(policy.stack_id)
            self.timeline.lb_event(policy, target, 'DRAINED', (
                'load balancer members not drained before %s: %s' %
                (recovery.get('action'), ex)))
            return True
        if cohort is not None:
            # The drains it sent with its own are carried on at once.
            self.wake(gather=False)
        self.timeline.lb_event(policy, target, 'DRAINED', (
            'load balancer members drained (weight 0) before %s: %s' %
            (recovery.get('action'), _members_text(drained))))
        return True

    def _issue(self, policy, target, nova, recovery):
        """Send the stored Nova action, once (stage ``issuing`` stored)."""
        name = recovery.get('action')
        params = recovery.get('params') or {}
        label = _label((name, params))
        try:
            nova.run(target.server_id, name, params)
        except nova_actions.ServerGone:
            return self._failed(policy, target, 'the server is gone',
                                force_recreate=True)
        except nova_actions.ActionRefused as e:
            if name in _TO_ACTIVE and self._active(nova, target):
                return self._verifying(policy, target, '%s not needed: the '
                                       'server is ACTIVE: verifying' % label)
            return self._failed(policy, target, '%s refused by Nova: %s' % (
                label, e))
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)
            return self._failed(policy, target, '%s failed: %s' % (label, e),
                                retry_same=True)
        self._verifying(policy, target, '%s issued: verifying' % label)

    @staticmethod
    def _active(nova, target):
        try:
            found = nova.status(target.server_id)
        except Exception:
            return False
        return found.vm_state == 'active' and not found.task_state

    def _verifying(self, policy, target, reason):
        now = self._clock()
        recovery = dict(target.recovery or {})
        recovery.update(stage=ISSUED, issued_at=_iso(now),
                        deadline=_iso(now + datetime.timedelta(
                            seconds=recovery.get('verify_seconds') or 0)))
        if self.tracker.store_step(target, states.RECOVERING,
                                   states.VERIFYING, reason,
                                   {'recovery': recovery}, at=now):
            self.timeline.heat_event(target, 'IN_PROGRESS', reason)

    # Ending an attempt

    def _failed(self, policy, target, why, force_recreate=False,
                retry_same=False):
        """The action did not go through: back to UNHEALTHY to escalate."""
        recovery = dict(target.recovery or {})
        step = recovery.get('step', 0)
        ladder = recovery.get('ladder') or []
        names = [a[0] for a in ladder]
        if force_recreate and self._allowed(policy, RECREATE):
            next_step = (names.index(RECREATE) if RECREATE in names
                         else len(ladder))
            if RECREATE not in names:
                recovery['ladder'] = ladder + [[RECREATE, {}]]
        else:
            next_step = step if retry_same else step + 1
        recovery.update(stage=ESCALATE, next_step=next_step, failed=why)
        reason = 'recovery failed: %s' % why
        now = self._clock()
        if self.tracker.store_step(target, target.state, states.UNHEALTHY,
                                   reason, {'recovery': recovery}, at=now):
            self.timeline.heat_event(target, 'FAILED', reason)

    def _escalate(self, policy, target, step):
        recovery = dict(target.recovery or {})
        ladder = recovery.get('ladder') or []
        nxt = ladder[min(step.next_step, len(ladder) - 1)] if ladder else None
        recovery.update(stage=ESCALATE, next_step=step.next_step)
        reason = 'escalated: %s%s' % (
            step.reason, ', next %s' % _label(nxt) if nxt else '')
        now = self._clock()
        if self.tracker.store_step(target, states.VERIFYING,
                                   states.UNHEALTHY, reason,
                                   {'recovery': recovery}, at=now):
            self.timeline.heat_event(target, 'FAILED', reason)
            self.wake()

    def _give_up(self, policy, target, step):
        if self._switched_off(policy):
            return
        reason = '%s: %s' % (step.reason, target.reason or 'unhealthy')
        recovery = dict(target.recovery or {})
        recovery['marked_failed'] = target.server_id
        if not self.tracker.store_step(target, states.UNHEALTHY,
                                       states.GAVE_UP, reason,
                                       {'recovery': recovery}):
            return
        try:
            self.replacer.mark_failed(
                target.stack_id, target.resource_name,
                'heat-health %s; no further action until the server is '
                'healthy again or marked healthy' % step.reason,
                server_id=target.server_id)
        except Exception as e:
            LOG.warning('Could not mark %(p)s CHECK_FAILED after giving '
                        'up: %(e)s', {'p': target.path, 'e': e})

    def _reset(self, policy, target, step):
        self.tracker.store_columns(target, {
            'attempts': 0, 'first_attempt_at': None,
            'next_attempt_at': None})

    # Undoing what a recovery left

    def _restore(self, policy, target, step):
        recovery = dict(target.recovery or {})
        drained = recovery.get('drained') or {}
        restored = {}
        if drained and not recovery.get('restoring'):
            # Stored first: the pool follower stops holding them at 0.
            recovery['restoring'] = True
            if not self.tracker.store_columns(target,
                                              {'recovery': recovery}):
                return
        if self._drainer is not None:
            now = self._clock()
            if self._restore_after.get(target.id, now) > now:
                return
            try:
                # Only the members of the server the target holds now: a
                # replaced server's drained member gets no traffic again.
                restored = self._drainer.restore(policy.stack_id, drained,
                                                 target.server_id)
            except Exception as ex:
                if isinstance(ex, lb_drain.NotYet):
                    self._restore_after[target.id] = now + (
                        datetime.timedelta(seconds=RESTORE_RETRY_SECONDS))
                LOG.warning('Members of %(s)s not restored yet: %(e)s',
                            {'s': target.server_id, 'e': ex})
                return
            self._restore_after.pop(target.id, None)
        recovery['restored'] = True
        if not self.tracker.store_columns(target, {'recovery': recovery}):
            return
        if restored:
            reason = 'load balancer members given their weight back: %s' % (
                ', '.join('%s in pool %s: weight %s' % (address, pool, w)
                          for pool, (address, w) in sorted(restored.items())))
        else:
            reason = ('drained load balancer members left with the replaced '
                      'server: %s' % _members_text(drained))
        self.timeline.lb_event(policy, target, 'RESTORED', reason)

    def _unmark(self, policy, target, step):
        """Clear the CHECK_FAILED of a server that is healthy again."""
        recovery = dict(target.recovery or {})
        server_id = recovery.pop('marked_failed')
        reason = 'heat-health: server %s is healthy again' % server_id
        cleared = self.replacer.clear_mark(target.stack_id,
                                           target.resource_name, server_id,
                                           reason)
        stored = self.tracker.store_columns(target,
                                            {'recovery': recovery or None})
        if stored and cleared:
            self.timeline.record(policy, target, 'UNMARKED',
                                 reason + ': CHECK_FAILED cleared')
