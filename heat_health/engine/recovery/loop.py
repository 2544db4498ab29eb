"""The recovery loop: carries out what the planner decides, safely.

Fed by stored states (the tracker's memory follows the database), it asks
``planner.plan`` what each policy's targets need and runs each step in a
small pool of threads, one step per target at a time, so the monitor's
tick and heartbeat never wait for Nova or Heat. The steps of an attempt
are in ``attempts``, RECREATE's stages in ``recreate``.

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

from heat_health.common import keystone_users
from heat_health.engine.monitor import states
from heat_health.engine.pools import lb_drain
from heat_health.engine.recovery import attempts
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import outside_stages
from heat_health.engine.recovery import planner
from heat_health.engine.recovery import recreate
from heat_health.engine.recovery import timeline
from heat_health.objects import policy as policy_object
from heat_health.policy import spec as policy_spec

LOG = logging.getLogger(__name__)

RECREATE = attempts.RECREATE
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
MAX_UPDATES = recreate.MAX_UPDATES


class RecoveryLoop(attempts.AttemptStages, recreate.RecreateStages,
                   outside_stages.OutsideStages):
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
    :param place: server id -> (its compute host, that host's state) as
        Nova shows it (monitor.compute_hosts), or None when not known.
    :param user_names: user id -> name (keystone_users.UserNames).
    """

    def __init__(self, engine_id, tracker, replacer,
                 blind=lambda policy_id: None,
                 actions=None, drainer=None, conf=cfg.CONF,
                 clock=timeutils.utcnow, executor=None,
                 background_events=False, place=lambda server_id: None,
                 webhooks=None, user_names=None):
        self.engine_id = engine_id
        # user id -> name, for the reason of a SUPPRESSED target.
        self._user_name = user_names or keystone_users.UserNames(conf)
        self._conf = conf
        # Signed POSTs of WEBHOOK rungs (outside_rungs.Webhooks), made
        # when a rung first needs one.
        self._webhooks = webhooks
        self._follow_after = {}  # target id -> next read of its execution
        self._place = place
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
        if self._webhooks is not None:
            self._webhooks.stop()
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
        RECOVERING and those whose start is under way. A target whose write
        raised (it may have committed a RECOVERING) and whose row could
        not be read again counts as recovering, and no step of it runs:
        its memory may be stale.
        """
        unknown = self.tracker.reread_unknown()
        now = self._clock()
        policies = self.tracker.policies()
        targets = {p.id: self.tracker.targets_of(p.id) for p in policies}
        with self._lock:
            starting = {tid for tid, (_p, kind) in self._running.items()
                        if kind is planner.Start}
        starting |= {t.id for found in targets.values() for t in found
                     if t.id in unknown}
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
                if unknown.intersection(t.id for t in self._targets(step)):
                    continue
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
                           planner.Unmark: self._unmark,
                           planner.Follow: self._follow,
                           planner.Abandon: self._abandon_step}[type(step)]
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

    # Whether an effect may start now

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
