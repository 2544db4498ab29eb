"""The recovery loop: carries out what the planner decides, safely.

Fed by stored states (the tracker's memory follows the database), it asks
``planner.plan`` what each policy's targets need and runs each step in a
small pool of threads, one step per target at a time, so the monitor's
tick and heartbeat never wait for Nova or Heat. Every step follows the
same order: store the intent, act, store the outcome. A target's
RECOVERING row says which action was decided and how far it went
(``stage``), so an engine that restarts, or takes the policy over,
finishes it without repeating what was done: a RECREATE compares the
resource's physical id with the old server and waits for a stack update
in progress instead of starting another one.

Nova actions run with the stack's stored trust context (the owner's
rights) through Heat's nova client plugin; a RECREATE marks the resource
CHECK_FAILED through the API's code path and has heat-engine update the
stack with ``existing`` (see heat_replace).
"""

import concurrent.futures
import datetime
import random
import threading

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.db import api as db_api
from heat_health.engine.monitor import states
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import planner
from heat_health.engine.recovery import settled_state
from heat_health.objects import policy as policy_object

LOG = logging.getLogger(__name__)

RECREATE = 'RECREATE'
# Stack states in which an action may be taken (heat-internals §8).
_ACTIONABLE = ('COMPLETE',)
# A Nova error is believed for this long: the policy stays braked.
BLIND_SECONDS = 30
# Seconds the loop waits after news of a failure before deciding, so
# failures that happen together are decided together (the brake sees
# them all).
GATHER_SECONDS = 0.2
# Seconds a stack's Nova client (and its token) is kept.
CLIENT_SECONDS = 600
# Shortest time an action is given to heal before the next rung.
MIN_VERIFY_SECONDS = 15
# Updates tried for one RECREATE whose update was superseded.
MAX_UPDATES = 3


def _iso(when):
    return when.isoformat()


def _label(action):
    name, params = action
    kind = (params or {}).get('type')
    return '%s %s' % (name, kind) if kind else name


def _brake_kind(reason):
    """What a brake's reason says, without the details that change."""
    if reason and reason.startswith(planner.BLIND):
        return planner.BLIND
    return reason


class StepFailed(Exception):
    """The step could not be carried out; the message says why."""


class RecoveryLoop(object):
    """Recovery for the policies this engine owns.

    :param tracker: the monitor's Tracker (targets, store_step).
    :param replacer: a heat_replace.HeatReplacer.
    :param blind: policy id -> why its observers cannot be trusted now
        (the status poller's failure, its load balancer's), or None.
    :param actions: stack id -> NovaActions; by default through the
        replacer's stored-context nova client.
    :param drainer: a lb_drain.Drainer, or None not to drain members.
    """

    def __init__(self, engine_id, tracker, replacer,
                 blind=lambda policy_id: None,
                 actions=None, drainer=None, conf=cfg.CONF,
                 clock=timeutils.utcnow, rnd=None):
        self.engine_id = engine_id
        self.tracker = tracker
        self.replacer = replacer
        self._blind = blind
        self._actions = actions or self._stack_nova
        self._drainer = drainer
        self._clients = {}       # stack id -> (NovaActions, expiry)
        self._clock = clock
        self._rnd = rnd or random.Random()
        self._limit = conf.heat_health.max_concurrent_recoveries
        self._tick = conf.heat_health.monitor_tick
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._limit,
            thread_name_prefix='heat-health-recovery')
        self._lock = threading.Lock()
        self._running = {}       # target id -> policy id
        self._held = {}          # target id -> reason last recorded
        self._braked = {}        # policy id -> reason stored
        self._nova_errors = {}   # policy id -> (reason, until)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = None

    # Running

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='heat-health-recovery-loop')
        self._thread.start()

    def stop(self):
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def wake(self):
        """A target failed: decide soon (after the gathering pause)."""
        self._wake.set()

    def _run(self):
        while not self._stopping.is_set():
            if self._wake.wait(self._tick):
                self._wake.clear()
                self._stopping.wait(GATHER_SECONDS)
            if self._stopping.is_set():
                break
            try:
                self.run_once()
            except Exception:
                LOG.exception('Recovery pass failed; retrying')

    def run_once(self):
        """Plan every owned policy and start the steps it needs."""
        now = self._clock()
        for policy in self.tracker.policies():
            targets = self.tracker.targets_of(policy.id)
            with self._lock:
                running = sum(1 for p in self._running.values()
                              if p == policy.id)
                room = self._limit - len(self._running)
            plan = planner.plan(policy, targets, now, running, room,
                                self._blind(policy.id) or
                                self._nova_error(policy.id, now))
            self._set_brake(policy, plan.brake, now)
            for step in plan.steps:
                with self._lock:
                    busy = step.target.id in self._running
                if busy:
                    # Its own step is under way: neither held nor again.
                    continue
                if isinstance(step, planner.Hold):
                    self._hold(policy, step.target, step.reason, now)
                else:
                    self._held.pop(step.target.id, None)
                    self._submit(policy, step)

    def _submit(self, policy, step):
        target = step.target
        with self._lock:
            if target.id in self._running:
                return
            self._running[target.id] = policy.id
        try:
            self._pool.submit(self._carry_out, policy, step)
        except RuntimeError:
            # Shutting down.
            with self._lock:
                self._running.pop(target.id, None)

    def _carry_out(self, policy, step):
        try:
            handler = {planner.Start: self._start,
                       planner.Advance: self._advance,
                       planner.Escalate: self._escalate,
                       planner.GiveUp: self._give_up,
                       planner.ResetAttempts: self._reset,
                       planner.Restore: self._restore}[type(step)]
            handler(policy, step)
        except Exception:
            LOG.exception('Recovery step %(step)s of %(server)s failed',
                          {'step': type(step).__name__,
                           'server': step.target.server_id})
        finally:
            with self._lock:
                self._running.pop(step.target.id, None)

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

    def _saw_nova_error(self, policy, error):
        self._clients.pop(policy.stack_id, None)
        self._nova_errors[policy.id] = (
            'Nova error: %s' % error,
            self._clock() + datetime.timedelta(seconds=BLIND_SECONDS))

    def _set_brake(self, policy, reason, now):
        if _brake_kind(self._braked.get(policy.id)) == _brake_kind(reason):
            # The same cause (each Nova error has its own request id).
            return
        try:
            db_api.policy_set_braked(self.engine_id, policy.id,
                                     policy.generation, reason)
            db_api.event_add([{
                'policy_id': policy.id, 'server_id': None,
                'old_state': None, 'new_state': 'BRAKED' if reason
                else 'UNBRAKED',
                'reason': reason or 'brake released: recovery resumes',
                'source': 'recovery', 'created_at': now}])
        except Exception:
            LOG.exception('Could not store the brake of policy %s',
                          policy.id)
            return
        if reason:
            LOG.warning('Policy %(p)s braked: %(r)s',
                        {'p': policy.id, 'r': reason})
        elif policy.id in self._braked:
            LOG.info('Policy %s released its brake', policy.id)
        self._braked[policy.id] = reason

    def _hold(self, policy, target, reason, now):
        """Record once why a failed target is not acted on."""
        kind = reason.split(':')[0]
        if self._held.get(target.id) == kind:
            return
        self._held[target.id] = kind
        LOG.info('Not recovering %(s)s (%(p)s) now: %(r)s',
                 {'s': target.server_id, 'p': target.path, 'r': reason})
        try:
            db_api.event_add([{
                'policy_id': policy.id, 'server_id': target.server_id,
                'old_state': target.state, 'new_state': 'SUPPRESSED',
                'reason': reason, 'source': 'recovery',
                'created_at': now}])
        except Exception:
            LOG.exception('Could not record the hold of %s',
                          target.server_id)

    # Steps

    def _stack_ready(self, policy):
        """Raise StepFailed unless the stack may be acted on now."""
        action, status = self.replacer.stack_status(policy.stack_id)
        if status not in _ACTIONABLE or action in ('DELETE', 'SUSPEND'):
            raise StepFailed('stack is %s_%s' % (action, status))

    @staticmethod
    def _paused_now(policy):
        stored = policy_object.Policy.get(policy.id)
        return stored.paused if stored is not None else None

    def _ladder(self, policy, found):
        """The actions for this incident, cheapest first."""
        spec = policy.spec.recovery
        if found is None:
            return [(RECREATE, {})]
        if spec.actions:
            return [tuple(a) for a in spec.actions]
        return [tuple(a) for a in settled_state.default_ladder(
            found.vm_state, found.task_state, found.power_state)]

    def _start(self, policy, step):
        target = step.target
        spec = policy.spec.recovery
        try:
            self._stack_ready(policy)
        except StepFailed as e:
            self._hold(policy, target, 'not now: %s' % e, self._clock())
            return
        # A pause stored since this engine's last claim holds it too.
        paused = planner.paused_reason(self._paused_now(policy))
        if paused:
            self._hold(policy, target, paused, self._clock())
            return
        nova = self._actions(policy.stack_id)
        try:
            found = nova.status(target.server_id)
        except nova_actions.ServerGone:
            found = None
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)
            self._hold(policy, target, 'braked: Nova error: %s' % e,
                       self._clock())
            return
        ladder = self._ladder(policy, found)
        index = min(step.step, len(ladder) - 1)
        action = ladder[index]
        if found is not None and found.task_state:
            # Stuck in a task: the state Nova settles in says what works.
            action = tuple(settled_state.stuck_action(
                found.task_state, found.vm_state, found.power_state)[1])
        now = self._clock()
        # The action's deadline: node_update_timeout, never so short that
        # a booting server is taken for a failed action.
        verify = max(policy.spec.grace, MIN_VERIFY_SECONDS)
        attempts = planner.attempts_in_window(target, spec, now)
        first = target.first_attempt_at if attempts else now
        attempt = attempts + 1
        delay = planner.backoff(attempt, spec,
                                self._rnd.uniform(-1.0, 1.0))
        recovery = {
            'action': action[0], 'params': dict(action[1] or {}),
            'step': index, 'ladder': [[n, dict(p or {})] for n, p in ladder],
            'attempt': attempt, 'old_server_id': target.server_id,
            'stage': 'intent', 'started_at': _iso(now),
            'verify_seconds': verify,
            'deadline': _iso(now + datetime.timedelta(seconds=verify)),
            'detected': (target.reason or '')[:200]}
        reason = ('%s started (attempt %d of %d, step %d of %d): %s' % (
            _label(action), attempt, spec.max_attempts, index + 1,
            len(ladder), target.reason or 'unhealthy'))
        stored = self.tracker.store_step(
            target, states.UNHEALTHY, states.RECOVERING, reason,
            {'recovery': recovery, 'attempts': attempt,
             'first_attempt_at': first,
             'next_attempt_at': now + datetime.timedelta(seconds=delay)},
            at=now)
        if not stored:
            return
        self._heat_event(target, 'IN_PROGRESS', reason)
        self._drain(policy, target)
        self._issue(policy, target, nova)

    def _advance(self, policy, step):
        target = step.target
        recovery = target.recovery or {}
        if recovery.get('action') == RECREATE:
            self._recreate(policy, target)
        else:
            self._issue(policy, target, self._actions(policy.stack_id))

    def _issue(self, policy, target, nova):
        """Issue the stored Nova action.

        Again after a restart: harmless for these actions, and refused by
        Nova once it took effect.
        """
        recovery = dict(target.recovery or {})
        name = recovery.get('action')
        if name == RECREATE:
            return self._recreate(policy, target)
        params = recovery.get('params') or {}
        try:
            nova.run(target.server_id, name, params)
        except nova_actions.ServerGone:
            return self._failed(policy, target, 'the server is gone',
                                force_recreate=True)
        except nova_actions.ActionRefused as e:
            try:
                found = nova.status(target.server_id)
            except Exception:
                found = None
            if (found is None or found.vm_state != 'active' or
                    found.task_state):
                return self._failed(policy, target, '%s refused by Nova: '
                                    '%s' % (_label((name, params)), e))
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)
            return self._failed(policy, target, '%s failed: %s' % (
                _label((name, params)), e), retry_same=True)
        self._verifying(policy, target, recovery,
                        '%s issued: verifying' % _label((name, params)))

    def _verifying(self, policy, target, recovery, reason):
        now = self._clock()
        recovery.update(stage='issued', issued_at=_iso(now),
                        deadline=_iso(now + datetime.timedelta(
                            seconds=recovery.get('verify_seconds') or 0)))
        if self.tracker.store_step(target, states.RECOVERING,
                                   states.VERIFYING, reason,
                                   {'recovery': recovery}, at=now):
            self._heat_event(target, 'IN_PROGRESS', reason)

    def _failed(self, policy, target, why, force_recreate=False,
                retry_same=False):
        """The action did not go through: back to UNHEALTHY to escalate."""
        recovery = dict(target.recovery or {})
        step = recovery.get('step', 0)
        ladder = recovery.get('ladder') or []
        if force_recreate:
            names = [a[0] for a in ladder]
            next_step = (names.index(RECREATE) if RECREATE in names
                         else len(ladder))
            if RECREATE not in names:
                recovery['ladder'] = ladder + [[RECREATE, {}]]
        else:
            next_step = step if retry_same else step + 1
        recovery.update(stage='escalate', next_step=next_step, failed=why)
        reason = 'recovery failed: %s' % why
        if self.tracker.store_step(target, target.state, states.UNHEALTHY,
                                   reason, {'recovery': recovery}):
            self._heat_event(target, 'FAILED', reason)

    def _escalate(self, policy, step):
        target = step.target
        recovery = dict(target.recovery or {})
        ladder = recovery.get('ladder') or []
        nxt = ladder[min(step.next_step, len(ladder) - 1)] if ladder else None
        recovery.update(stage='escalate', next_step=step.next_step)
        reason = 'escalated: %s%s' % (
            step.reason, ', next %s' % _label(nxt) if nxt else '')
        if self.tracker.store_step(target, states.VERIFYING,
                                   states.UNHEALTHY, reason,
                                   {'recovery': recovery}):
            self._heat_event(target, 'FAILED', reason)
            self.wake()

    def _give_up(self, policy, step):
        target = step.target
        reason = '%s: %s' % (step.reason, target.reason or 'unhealthy')
        if not self.tracker.store_step(target, states.UNHEALTHY,
                                       states.GAVE_UP, reason):
            return
        try:
            self.replacer.mark_failed(
                target.stack_id, target.resource_name,
                'heat-health %s; no further action until the server is '
                'healthy again or marked healthy' % step.reason)
        except Exception as e:
            LOG.warning('Could not mark %(p)s CHECK_FAILED after giving '
                        'up: %(e)s', {'p': target.path, 'e': e})

    def _reset(self, policy, step):
        self.tracker.store_columns(step.target, {
            'attempts': 0, 'first_attempt_at': None,
            'next_attempt_at': None})

    # Load balancer members

    def _lb_event(self, policy, target, new_state, reason):
        LOG.info('%(s)s (%(p)s): %(r)s', {'s': target.server_id,
                                          'p': target.path, 'r': reason})
        try:
            db_api.event_add([{
                'policy_id': policy.id, 'server_id': target.server_id,
                'old_state': target.state, 'new_state': new_state,
                'reason': reason, 'source': 'recovery',
                'created_at': self._clock()}])
        except Exception:
            LOG.exception('Could not record %s', reason)
        self._heat_event(target, 'IN_PROGRESS', reason)

    def _drain(self, policy, target):
        """Weight 0 for the server's members before it is acted on."""
        recovery = dict(target.recovery or {})
        if self._drainer is None or (recovery.get('params') or {}).get(
                'launch_before_terminate'):
            # Heat makes the new server first: the old one serves until
            # the pool swaps them.
            return
        try:
            drained = self._drainer.drain(policy.stack_id, target.server_id)
            failed = None
        except Exception as ex:
            drained = getattr(ex, 'drained', {})
            failed = ex
        if drained:
            recovery['drained'] = drained
            self.tracker.store_columns(target, {'recovery': recovery})
            self._lb_event(policy, target, 'DRAINED', (
                'load balancer members drained (weight 0) before %s: %s' %
                (recovery.get('action'), ', '.join(
                    '%s in pool %s' % (address, pool) for pool, (
                        address, _w) in sorted(drained.items())))))
        if failed is not None:
            self._lb_event(policy, target, 'DRAINED', (
                'load balancer members not drained before %s: %s' %
                (recovery.get('action'), failed)))

    def _restore(self, policy, step):
        target = step.target
        recovery = dict(target.recovery or {})
        drained = recovery.get('drained') or {}
        restored = {}
        if self._drainer is not None:
            try:
                restored = self._drainer.restore(policy.stack_id, drained)
            except Exception as ex:
                LOG.warning('Members of %(s)s not restored yet: %(e)s',
                            {'s': target.server_id, 'e': ex})
                return
        recovery['restored'] = True
        if not self.tracker.store_columns(target, {'recovery': recovery}):
            return
        if restored:
            reason = 'load balancer members given their weight back: %s' % (
                ', '.join('%s in pool %s: weight %s' % (address, pool, w)
                          for pool, (address, w) in sorted(restored.items())))
        else:
            reason = ('drained load balancer members left with the replaced '
                      'server: %s' % ', '.join(
                          '%s in pool %s' % (address, pool)
                          for pool, (address, _w) in sorted(drained.items())))
        self._lb_event(policy, target, 'RESTORED', reason)

    # RECREATE, stage by stage

    def _store_stage(self, target, recovery, reason):
        if self.tracker.store_step(target, states.RECOVERING,
                                   states.RECOVERING, reason,
                                   {'recovery': recovery}):
            self._heat_event(target, 'IN_PROGRESS', reason)
            return True
        return False

    def _recreate(self, policy, target):
        recovery = dict(target.recovery or {})
        stage = recovery.get('stage')
        spec = policy.spec.recovery
        old = recovery.get('old_server_id') or target.server_id
        if stage in ('marked', 'updating'):
            return self._recreate_update(policy, target, recovery)
        try:
            self._stack_ready(policy)
        except StepFailed as e:
            LOG.info('RECREATE of %(p)s waits: %(e)s',
                     {'p': target.path, 'e': e})
            return
        if spec.fence_compute and stage in ('intent', 'fencing'):
            if not self._fence(policy, target, recovery, old):
                return
        reason = 'RECREATE: %s' % (recovery.get('detected') or 'unhealthy')
        try:
            self.replacer.mark_failed(target.stack_id, target.resource_name,
                                      reason[:255])
        except Exception as e:
            return self._failed(policy, target, 'could not mark the '
                                'resource CHECK_FAILED: %s' % e)
        recovery['stage'] = 'marked'
        if self._store_stage(target, recovery,
                             'marked CHECK_FAILED for replacement'):
            self._recreate_update(policy, target, recovery)

    def _fence(self, policy, target, recovery, old):
        """Stop the old server and confirm it; True once fenced.

        Before Heat makes the new one: Heat creates the replacement first.
        """
        nova = self._actions(policy.stack_id)
        spec = policy.spec.recovery
        now = self._clock()
        if recovery.get('stage') == 'intent':
            try:
                nova.run(old, 'STOP')
            except (nova_actions.ServerGone, nova_actions.ActionRefused):
                pass
            except nova_actions.NovaActionFailed as e:
                self._saw_nova_error(policy, e)
                self._failed(policy, target, 'fencing failed: %s' % e,
                             retry_same=True)
                return False
            recovery.update(stage='fencing', fence_started_at=_iso(now))
            if not self._store_stage(target, recovery,
                                     'fencing: stopping server %s' % old):
                return False
        started = planner.parse_time(recovery.get('fence_started_at')) or now
        deadline = started + datetime.timedelta(
            seconds=spec.node_delete_timeout)
        while True:
            try:
                found = nova.status(old)
            except nova_actions.ServerGone:
                found = None
            except nova_actions.NovaActionFailed as e:
                self._saw_nova_error(policy, e)
                return False
            if found is None or (found.vm_state in ('stopped', 'deleted',
                                                    'soft-delete') and
                                 not found.task_state):
                break
            if self._clock() >= deadline:
                if not spec.node_force_recreate:
                    self._failed(policy, target, 'server %s did not stop '
                                 'within %ss (node_force_recreate is off)'
                                 % (old, spec.node_delete_timeout))
                    return False
                try:
                    nova.force_delete(old)
                except nova_actions.ServerGone:
                    break
                except nova_actions.ActionRefused as e:
                    self._failed(policy, target, 'server %s could not be '
                                 'deleted: %s' % (old, e))
                    return False
                except nova_actions.NovaActionFailed as e:
                    self._saw_nova_error(policy, e)
                    return False
                deadline = self._clock() + datetime.timedelta(
                    seconds=spec.node_delete_timeout)
            if self._stopping.wait(0.5):
                return False
        recovery['stage'] = 'fenced'
        return self._store_stage(target, recovery,
                                 'fenced: server %s is stopped' % old)

    def _recreate_update(self, policy, target, recovery):
        old = recovery.get('old_server_id') or target.server_id
        if self.replacer.replaced(target.stack_id, target.resource_name,
                                  old):
            # Done: the registry's next sync verifies the new server.
            return
        updated = recovery.get('updated_stack') or policy.stack_id
        action, status = self.replacer.stack_status(updated)
        if status == 'IN_PROGRESS':
            return
        if recovery.get('stage') == 'updating':
            if status == 'FAILED':
                return self._failed(policy, target, 'the stack update '
                                    'failed: %s_%s' % (action, status))
            resource = self.replacer.resource(target.stack_id,
                                              target.resource_name)
            if (resource.action, resource.status) != ('CHECK', 'FAILED'):
                return self._failed(policy, target, 'the resource is %s_%s '
                                    'and was not replaced' % (
                                        resource.action, resource.status))
            if recovery.get('updates', 0) >= MAX_UPDATES:
                return self._failed(policy, target, 'the update was '
                                    'superseded %d times' % MAX_UPDATES)
        try:
            stack_id = self.replacer.update_target(
                policy.stack_id, target.stack_id, target.resource_name)
        except Exception as e:
            return self._failed(policy, target, 'heat-engine did not '
                                'update the stack: %s' % e)
        recovery.update(stage='updating', updated_stack=stack_id,
                        updates=recovery.get('updates', 0) + 1,
                        update_at=_iso(self._clock()))
        self._store_stage(target, recovery,
                          'stack update (existing) requested to replace '
                          'server %s' % old)

    def _heat_event(self, target, status, reason):
        """The step in Heat's own event list of the server's resource."""
        try:
            self.replacer.record_event(target.stack_id, target.resource_name,
                                       reason[:255], status=status)
        except Exception as e:
            LOG.debug('No Heat event for %(p)s: %(e)s',
                      {'p': target.path, 'e': e})
