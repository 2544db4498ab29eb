"""An attempt's steps: started, carried on stage by stage, ended, undone.

A mixin of the recovery loop (``loop.RecoveryLoop``), which provides the
tracker, the timeline, the drainer and the checks of whether an effect may
start now. Each step stores the stage it reaches before the effect that
follows it (see ``loop``); RECREATE's own stages are in ``recreate``.
"""

import datetime

from oslo_log import log as logging

from heat_health.common import power_states
from heat_health.db import api as db_api
from heat_health.engine.monitor import compute_hosts
from heat_health.engine.monitor import states
from heat_health.engine.pools import lb_drain
from heat_health.engine.recovery import evidence
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import outside_stages
from heat_health.engine.recovery import planner
from heat_health.engine.recovery import recreate
from heat_health.engine.recovery import settled_state
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec

LOG = logging.getLogger(__name__)

RECREATE = 'RECREATE'
EVACUATE = settled_state.EVACUATE
# Detection modes that report what Nova shows.
NOVA_SOURCES = evidence.NOVA_SOURCES
INTENT, FENCED = recreate.INTENT, recreate.FENCED
ISSUING, ISSUED, ESCALATE = 'issuing', 'issued', 'escalate'
# Seconds before a restore put off (the pool follower has not swapped the
# replaced server's member yet) is tried again: not at every pass.
RESTORE_RETRY_SECONDS = 1.0
# Shortest time an action is given to heal before the next rung.
MIN_VERIFY_SECONDS = 15
# A verification waits for a host that does not report at most this many
# times the action's deadline (its ``verify_seconds``).
HOST_WAIT_DEADLINES = 10
# Actions after which an ACTIVE server needs nothing more: Nova refuses
# them once the server is running (it may have healed by itself).
_TO_ACTIVE = frozenset([settled_state.START, settled_state.UNPAUSE,
                        settled_state.RESUME])
# Actions that do not heal an ACTIVE server whose guest is not running:
# Nova refuses the first three, a soft reboot needs a running guest.
_NOT_FOR_A_DOWN_GUEST = _TO_ACTIVE | {settled_state.REBOOT}


def _iso(when):
    return when.isoformat()


def _label(action):
    return policy_spec.rung_label(*action)


def _members_text(members):
    return ', '.join('%s in pool %s' % (address, pool)
                     for pool, (address, _w) in sorted(members.items()))


# A user's action on a server, as its state's reason says it.
_DONE = {'stop': 'stopped', 'pause': 'paused', 'suspend': 'suspended',
         'shelve': 'shelved', 'shelveOffload': 'shelved',
         'delete': 'deleted'}
# Stands for "Nova not read yet" (None is a server Nova no longer has).
_UNREAD = object()


def _server_now(nova, server_id):
    """The server as Nova shows it now, or None once Nova has it no more.

    :raises NovaActionFailed: Nova could not tell.
    """
    try:
        return nova.status(server_id)
    except nova_actions.ServerGone:
        return None


def _seen(found):
    """What of Nova's view a decision rests on, as stored with it."""
    if found is None:
        return None
    return [found.status, found.vm_state, found.task_state,
            found.power_state]


def _evidence_of(verdicts, now, max_age):
    """The fresh verdicts a decision rests on, to store with it.

    Entering RECOVERING starts the target's verdicts again (only what is
    seen after the action judges it); what justified the decision is
    kept with the attempt, so its effects can still be weighed on it.
    """
    return {mode: [o.verdict, o.reason, o.observed_at.isoformat()]
            for mode, o in verdicts.items()
            if mode not in NOVA_SOURCES and o.verdict == obs.UNHEALTHY and
            (now - o.observed_at).total_seconds() <= max_age}


def _decided_on(target):
    """{mode: Observation}: the stored evidence, then what came since."""
    recovery = target.recovery or {}
    found = {}
    for mode, (verdict, reason, when) in (
            recovery.get('evidence') or {}).items():
        found[mode] = obs.Observation(target.server_id, verdict, reason,
                                      mode, planner.parse_time(when))
    for mode, o in target.verdicts.items():
        if mode not in found or o.observed_at >= found[mode].observed_at:
            found[mode] = o
    return found


def _fenced_since(target):
    """When this incident's recovery first began to fence the server."""
    recovery = target.recovery or {}
    times = [planner.parse_time(recovery.get(key))
             for key in ('fenced_since', 'fence_started_at')]
    times = [t for t in times if t is not None]
    return min(times) if times else None


def _escalated_from(target):
    """When the action of the attempt that escalated was issued, or None.

    A task it left is waited for up to the stuck deadline from then, not
    from the escalation: the escalation already waited for it.
    """
    recovery = target.recovery or {}
    if recovery.get('stage') != ESCALATE:
        return None
    return _acting_since(recovery)


def _acting_since(recovery):
    """Since when Nova may be carrying out the action, or None.

    From its issue, or from when its host reported again: Nova's restart
    handling may then still be finishing it.
    """
    found = [planner.parse_time(recovery.get(key))
             for key in ('issued_at', 'host_back_at')]
    found = [when for when in found if when is not None]
    return max(found) if found else None


class AttemptStages(object):
    """The steps of one recovery attempt, from its start to its undoing."""

    # Starting an attempt

    @staticmethod
    def _allowed(policy, name):
        """Whether the policy lets recovery use the action.

        EVACUATE only where the policy names it: it needs rights the
        stack's owner may not have, and a host down.
        """
        actions = policy.spec.recovery.actions
        if not actions:
            return name != EVACUATE
        return name in {a[0] for a in actions}

    def _choose(self, policy, found, step, host_down=None):
        """(ladder, index, action) for this attempt.

        A server stuck in a task gets what works from the state Nova
        settles in, if the policy allows that action; otherwise its own
        rung, which Nova may refuse (and the attempt then fails at once).
        So does an ACTIVE server whose guest is not running: a hard reboot
        instead of a soft one (which needs a running guest) or of a start,
        unpause or resume (which Nova refuses on an ACTIVE server). A
        server on a host forced down (``host_down``) is EVACUATEd where the
        ladder has not passed that rung, else RECREATEd, if the policy
        allows it: no action on that host can heal it. Elsewhere EVACUATE
        is passed over: Nova evacuates only from a host that is down.
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
        while (not host_down and ladder[index][0] == EVACUATE and
               index < len(ladder) - 1):
            index += 1
        action = ladder[index]
        if found is not None and found.task_state:
            stuck = tuple(settled_state.stuck_action(
                found.task_state, found.vm_state, found.power_state)[1])
            if self._allowed(policy, stuck[0]):
                action = stuck
        elif (found is not None and action[0] in _NOT_FOR_A_DOWN_GUEST and
              settled_state.guest_down(found.vm_state, found.task_state,
                                       found.power_state) and
              self._allowed(policy, settled_state.REBOOT)):
            action = (settled_state.REBOOT, {'type': settled_state.HARD})
        names = [a[0] for a in ladder]
        if (host_down and EVACUATE in names and
                step <= names.index(EVACUATE)):
            index = names.index(EVACUATE)
            action = ladder[index]
        elif (host_down and action[0] != RECREATE and
                self._allowed(policy, RECREATE)):
            if RECREATE not in names:
                ladder.append((RECREATE, {}))
                names.append(RECREATE)
            index = names.index(RECREATE)
            action = ladder[index]
        return ladder, index, action

    def _nova_busy(self, target, found, since=None):
        """Why to wait for a task Nova is carrying out, or None.

        Nova's own power sync stops a guest that shut down behind its back
        (task powering-off) a moment after the news of it; a user's action
        may be under way too. Such a task ends by itself: taken for stuck,
        the attempt would pick what Nova accepts over a task (a hard
        reboot, a RECREATE) for a server a START heals. A task still there
        once the server has been failing (or, with ``since``, the action
        has been under way) for the stuck deadline is stuck.
        """
        if found is None or not found.task_state:
            return None
        limit = self.tracker.stuck_after(target.server_id)
        since = since or planner.parse_time(target.since)
        if limit is None or since is None or (
                self._clock() - since >= datetime.timedelta(seconds=limit)):
            return None
        return 'Nova is carrying out task %s on the server' % (
            found.task_state)

    def _not_failing(self, policy, target, found, verdicts=None):
        """Why the server is no longer failing, by fresh evidence, or None.

        Nova's view now and the verdicts of the detectors that do not read
        Nova, no older than the policy's evidence bound. A failure only
        Nova's news showed, that Nova now denies (someone started the
        server meanwhile), is over; a poll URL or a load balancer that
        still sees it failing keeps it.
        """
        judged = evidence.judge(
            found, target.verdicts if verdicts is None else verdicts,
            self._clock(), policy.spec.evidence_seconds, stuck=True)
        return None if judged.failing else judged.why

    def _intent(self, policy, target, nova, found):
        """Why the server's state is its user's doing, or None.

        Only for a server Nova shows stopped, paused, suspended, shelved
        or deleted (or ACTIVE, after such a request Nova could not carry
        out), and a policy that respects its users' actions: Nova's
        instance actions say who asked. Unread (Nova errors) is no
        intent: the server is judged as any other.
        """
        if not policy.spec.recovery.respect_user_actions:
            return None
        vm_state = None if found is None else found.vm_state
        if found is not None and (found.task_state or vm_state not in
                                  evidence.DELIBERATE_STATES):
            return None
        try:
            actions = nova.instance_actions(target.server_id)
        except (nova_actions.NovaActionFailed,
                nova_actions.ServerGone) as e:
            LOG.info('Instance actions of %(s)s not read: %(e)s',
                     {'s': target.server_id, 'e': e})
            return None
        found = evidence.deliberate(vm_state, actions, _fenced_since(target))
        if found is None:
            return None
        return '%s by user %s at %s%s: not healed until it runs again' % (
            _DONE.get(found.action, found.action),
            self._user_name(found.user_id), evidence.since(found.at),
            ' (request %s)' % found.request_id if found.request_id else '')

    def _suppress(self, target, expect, why):
        """Its user's intent: SUPPRESSED, what was drained or marked undone."""
        recovery = db_api.leftovers(target.recovery) or {}
        columns = {'recovery': recovery or None}
        if expect == states.RECOVERING:
            columns.update(self._attempt_not_counted(target))
        if self.tracker.store_step(target, expect, states.SUPPRESSED, why,
                                   columns):
            self.timeline.heat_event(target, 'COMPLETE', why)

    @staticmethod
    def _attempt_not_counted(target):
        """Columns taking back the attempt of an abandoned decision."""
        attempts = max(((target.recovery or {}).get('attempt') or
                        target.attempts or 1) - 1, 0)
        return {'attempts': attempts, 'next_attempt_at': None,
                'first_attempt_at': (target.first_attempt_at if attempts
                                     else None)}

    def _justified(self, policy, target, nova, effect, found=_UNREAD):
        """Whether the stored decision may have its effect now.

        The one check before an attempt's first effect on its server
        (drain, Nova action, fence, mark, workflow, webhook) and before
        the stack update of a server not fenced: Nova's view now and the
        fresh verdicts must still show the server failing and not stopped
        by its user. Otherwise the attempt is abandoned with a timeline
        row (its drains given back, its mark cleared by the planner's
        undo), or decided again when Nova shows the server otherwise than
        when it was decided, longer ago than the evidence bound. False
        also while Nova cannot tell or carries out a task: nothing is
        done, the next pass asks again.
        """
        recovery = target.recovery or {}
        held = self._switched_off(policy)
        if held:
            # An operator's switch is an intent too, read as stored now.
            LOG.info('%(e)s of %(p)s waits: %(h)s',
                     {'e': effect, 'p': target.path, 'h': held})
            return False
        host = recovery.get('host_down')
        place = self._place(target.server_id) if host else None
        if place is not None and place[1] == compute_hosts.DOWN:
            # Its host is forced down: that is the evidence, whatever Nova
            # still shows of the server.
            return True
        if found is _UNREAD:
            try:
                found = _server_now(nova, target.server_id)
            except nova_actions.NovaActionFailed as e:
                self._saw_nova_error(policy, e)
                LOG.info('%(e)s of %(p)s waits: Nova error: %(x)s',
                         {'e': effect, 'p': target.path, 'x': e})
                return False
        started = planner.parse_time(recovery.get('started_at'))
        busy = self._nova_busy(target, found, since=started)
        if busy:
            LOG.info('%(e)s of %(p)s waits: %(b)s',
                     {'e': effect, 'p': target.path, 'b': busy})
            return False
        intent = self._intent(policy, target, nova, found)
        if intent:
            self._suppress(target, states.RECOVERING, intent)
            return False
        why = self._not_failing(policy, target, found, _decided_on(target))
        if why:
            self._abandon(policy, target, states.HEALTHY,
                          'recovery abandoned before %s: %s' % (effect, why))
            return False
        now = self._clock()
        bound = policy.spec.evidence_seconds
        if (started is not None and 'seen' in recovery and
                (now - started).total_seconds() > bound and
                _seen(found) != recovery['seen']):
            self._abandon(policy, target, states.UNHEALTHY, (
                'decision of %s is older than %ds and Nova shows the '
                'server otherwise now (%s): decided again' % (
                    _iso(started), bound, found and found.status or
                    'gone')))
            return False
        return True

    def _abandon(self, policy, target, state, reason):
        """The attempt is not carried out: HEALTHY, or UNHEALTHY anew.

        Its attempt is not counted; what it drained or marked is undone
        by the planner's next steps (HEALTHY), or kept for the attempt
        decided again (UNHEALTHY).
        """
        recovery = db_api.leftovers(target.recovery) or {}
        if state == states.UNHEALTHY:
            previous = target.recovery or {}
            recovery.update(stage=ESCALATE, next_step=previous.get('step', 0),
                            detected=previous.get('detected'))
        columns = dict(self._attempt_not_counted(target),
                       recovery=recovery or None)
        if self.tracker.store_step(target, target.state, state, reason,
                                   columns):
            self.timeline.heat_event(target, 'COMPLETE', reason)
            self.tracker.look_again(target.server_id)
            self.wake(gather=False)

    def _start(self, policy, target, step):
        spec = policy.spec.recovery
        held = self._not_now(policy, before_mark=True)
        if held:
            self.timeline.hold(policy, target, held, self._clock())
            return
        nova = self._actions(policy.stack_id)
        try:
            found = _server_now(nova, target.server_id)
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)
            self.timeline.hold(policy, target,
                               'braked: Nova error: %s' % e, self._clock())
            return
        place = self._place(target.server_id)
        if place is not None and place[1] == compute_hosts.UNKNOWN:
            self.timeline.hold(policy, target, 'not now: %s' % (
                compute_hosts.not_reporting(place[0])), self._clock())
            return
        host_down = (place[0] if place is not None and
                     place[1] == compute_hosts.DOWN else None)
        busy = None if host_down else self._nova_busy(
            target, found, since=_escalated_from(target))
        if busy:
            self.timeline.hold(policy, target, 'not now: %s' % busy,
                               self._clock())
            return
        # On a host forced down the server is lost with it, whatever its
        # user asked before.
        intent = None if host_down else self._intent(policy, target, nova,
                                                     found)
        if intent:
            return self._suppress(target, states.UNHEALTHY, intent)
        gone = None if host_down else self._not_failing(policy, target,
                                                        found)
        if gone:
            # The detectors are asked to look again: news of the server
            # may not have reached the target yet.
            self.tracker.look_again(target.server_id)
            self.timeline.hold(policy, target, 'not now: %s' % gone,
                               self._clock())
            return
        # A workflow an earlier attempt started, left running by its
        # user's reset: stopped first, never acted beside.
        ended, why = self._stop_workflow(policy, target)
        if not ended:
            self.timeline.hold(policy, target, 'not now: %s' % why,
                               self._clock())
            return
        ladder, index, action = self._choose(policy, found, step.step,
                                             host_down)
        # What was detected, not what the last rung said of itself.
        previous = target.recovery or {}
        detected = ((previous.get('stage') == ESCALATE and
                     previous.get('detected')) or target.reason or '')[:200]
        action = self._expanded(action, target, found, detected)
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
        recovery.pop(outside_stages.RUNNING, None)
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
            'detected': detected, 'seen': _seen(found),
            'evidence': _evidence_of(target.verdicts, now,
                                     policy.spec.evidence_seconds)})
        if host_down:
            recovery['host_down'] = host_down
        fenced = _fenced_since(target)
        if fenced is not None:
            # An earlier attempt stopped the server: not its user.
            recovery['fenced_since'] = _iso(fenced)
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
            outside_stages.note_issuing(target, recovery)
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
        self._carry_on(policy, target, nova, found)

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
            # A workflow it started is found again and followed.
            found = self._sent_before(policy, target)
            return self._verifying(policy, target, '%s may have been sent '
                                   'before a restart or takeover: verifying, '
                                   'not sent again%s' % (_label((
                                       recovery.get('action'),
                                       recovery.get('params'))),
                                       ': execution %s %s' % (
                                           found['execution'],
                                           found['execution_state'])
                                       if found else ''), extra=found)
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

    def _carry_on(self, policy, target, nova, found=_UNREAD):
        """Take the stored attempt as far as it goes now.

        :param found: Nova's view of the server read this moment by the
            caller, if any: the evidence is not read twice.
        """
        recovery = dict(target.recovery or {})
        stage = recovery.get('stage')
        if stage == INTENT and self._not_reporting(policy, target):
            return
        if stage == INTENT and not self._justified(
                policy, target, nova, _label((recovery.get('action'),
                                              recovery.get('params'))),
                found):
            return
        if stage == INTENT and not self._drain(policy, target, recovery):
            return
        if stage == INTENT and recovery.get('drained') and not (
                self._justified(policy, target, nova, _label((
                    recovery.get('action'), recovery.get('params'))))):
            # The drain may have waited: the evidence is read again.
            return
        if recovery.get('action') == RECREATE:
            return self._recreate(policy, target, recovery, nova)
        if stage == INTENT:
            recovery['stage'] = ISSUING
            outside_stages.note_issuing(target, recovery)
            if not self._store_stage(target, recovery, None):
                return
        if recovery.get('stage') == ISSUING:
            if recovery.get('action') in policy_spec.OUTSIDE:
                return self._issue_outside(policy, target, recovery)
            if recovery.get('action') == EVACUATE:
                nova = nova_actions.NovaActions(
                    self.replacer.admin_nova_client(policy.stack_id))
            self._issue(policy, target, nova, recovery)

    def _not_reporting(self, policy, target):
        """Whether the server's host does not report now: held, said once.

        Asked again before anything of an attempt is done: one whose
        drain was carried over passes may find its host stopped since it
        started. It waits in ``intent``, nothing drained nor sent.
        """
        place = self._place(target.server_id)
        if place is None or place[1] != compute_hosts.UNKNOWN:
            return False
        self.timeline.hold(policy, target, 'not now: %s' % (
            compute_hosts.not_reporting(place[0])), self._clock())
        return True

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
            # Every action waits until the load balancer took the weight:
            # Octavia's worker stores a batch's weights only once it has
            # applied them, a second or more after the API accepted it,
            # and a server replaced meanwhile still gets new connections.
            self._drainer.drain(policy.stack_id, drained,
                                (now - started).total_seconds(),
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
        # ACTIVE is not enough: a guest paused or lost behind Nova's back
        # leaves its server ACTIVE.
        return (found.vm_state == 'active' and not found.task_state and
                power_states.not_running(found.power_state) is None)

    def _verifying(self, policy, target, reason, extra=None):
        now = self._clock()
        recovery = dict(target.recovery or {}, **(extra or {}))
        recovery.update(stage=ISSUED, issued_at=_iso(now),
                        deadline=_iso(now + datetime.timedelta(
                            seconds=recovery.get('verify_seconds') or 0)))
        if self.tracker.store_step(target, states.RECOVERING,
                                   states.VERIFYING, reason,
                                   {'recovery': recovery}, at=now):
            self.timeline.heat_event(target, 'IN_PROGRESS', reason)

    def _verify_later(self, target, why, recovery=None):
        """Not healthy yet, but Nova cannot tell now: a new deadline.

        The action's outcome is Nova's to finish (its compute's restart
        handling), so the next rung would act twice. Said once while the
        reason stays the same, not at every deadline.
        """
        now = self._clock()
        recovery = dict(recovery or target.recovery or {})
        recovery['deadline'] = _iso(now + datetime.timedelta(
            seconds=recovery.get('verify_seconds') or MIN_VERIFY_SECONDS))
        reason = 'verification waits: %s' % why
        said = recovery.get('waits') == reason
        recovery['waits'] = reason
        if self.tracker.store_step(target, states.VERIFYING,
                                   states.VERIFYING, reason,
                                   {'recovery': recovery}, at=now,
                                   announce=not said) and not said:
            self.timeline.heat_event(target, 'IN_PROGRESS', reason)

    def _wait_for_host(self, policy, target, host):
        """The host does not report: wait for it, within a bound.

        At most HOST_WAIT_DEADLINES times the action's deadline from the
        first wait; then the attempt ends, and the next one starts only
        once the host reports again or is forced down.
        """
        recovery = dict(target.recovery or {})
        now = self._clock()
        since = planner.parse_time((recovery.get('host_silent') or {}).get(
            'since')) or now
        bound = HOST_WAIT_DEADLINES * (recovery.get('verify_seconds') or
                                       MIN_VERIFY_SECONDS)
        if now - since >= datetime.timedelta(seconds=bound):
            return self._failed(policy, target, 'nova-compute on host %s '
                                'did not report within %ss of the action\'s '
                                'deadline: its outcome is unknown' % (
                                    host, bound), retry_same=True)
        recovery['host_silent'] = {'host': host, 'since': _iso(since)}
        self._verify_later(target, compute_hosts.not_reporting(host),
                           recovery)

    def _verify_again(self, target):
        """The host reports again: the verification starts afresh.

        Nova's restart handling finished or undid the action just now,
        and the detectors have not seen the server since: judged at the
        deadline that passed while the host was silent, a healed server
        would be escalated.
        """
        now = self._clock()
        recovery = dict(target.recovery or {})
        silent = recovery.pop('host_silent')
        recovery['host_back_at'] = _iso(now)
        self._verify_later(target, 'nova-compute on host %s reports again: '
                           'verifying afresh' % silent['host'], recovery)

    def _still_acting(self, policy, target, place):
        """Why the action's deadline is no failure yet, or None.

        Nova still carrying out a task on the server (the action's own, a
        hard reboot hanging in the hypervisor, say) may yet heal it, and a
        nova-compute that stopped mid-task shows as not reporting only
        Nova's service_down_time later; the next rung now would act over
        it. So does a Nova that does not say. A task that outlasts the
        stuck deadline, counted from the action's issue, is stuck: then
        the ladder goes on.
        """
        if place is not None and place[1] == compute_hosts.DOWN:
            return None
        issued = _acting_since(target.recovery or {})
        if issued is None:
            return None
        try:
            found = self._actions(policy.stack_id).status(target.server_id)
        except nova_actions.ServerGone:
            return None
        except nova_actions.NovaActionFailed as e:
            # Not known to be done: as for a task, up to the deadline.
            limit = self.tracker.stuck_after(target.server_id)
            if limit is not None and self._clock() - issued < (
                    datetime.timedelta(seconds=limit)):
                return 'Nova did not answer: %s' % e
            return None
        return self._nova_busy(target, found, since=issued)

    # Ending an attempt

    def _failed(self, policy, target, why, force_recreate=False,
                retry_same=False, recovery=None):
        """The action did not go through: back to UNHEALTHY to escalate.

        :param recovery: the target's recovery record as it is to be
            stored, if it differs from memory's.
        """
        recovery = dict(recovery or target.recovery or {})
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
        place = self._place(target.server_id)
        if place is not None and place[1] == compute_hosts.UNKNOWN:
            return self._wait_for_host(policy, target, place[0])
        if (target.recovery or {}).get('host_silent'):
            return self._verify_again(target)
        busy = self._still_acting(policy, target, place)
        if busy:
            return self._verify_later(target, busy)
        ended, stopped = self._stop_workflow(policy, target)
        if not ended:
            return self._verify_later(target, stopped)
        recovery = dict(target.recovery or {})
        recovery.pop(outside_stages.RUNNING, None)
        ladder = recovery.get('ladder') or []
        nxt = ladder[min(step.next_step, len(ladder) - 1)] if ladder else None
        recovery.update(stage=ESCALATE, next_step=step.next_step)
        reason = 'escalated: %s%s%s' % (
            step.reason, stopped, ', next %s' % _label(nxt) if nxt else '')
        now = self._clock()
        if self.tracker.store_step(target, states.VERIFYING,
                                   states.UNHEALTHY, reason,
                                   {'recovery': recovery}, at=now):
            self.timeline.heat_event(target, 'FAILED', reason)
            self.wake()

    def _give_up(self, policy, target, step):
        """GAVE_UP, said in the stack's events; the resource is not marked.

        A CHECK_FAILED would have any stack update, the policy's own for
        a sibling's RECREATE too, replace the server unfenced and
        undrained: replacing it is its user's to ask for.
        """
        if self._switched_off(policy):
            return
        reason = ('%s: %s; nothing more is done until the server is healthy '
                  'again or marked healthy' % (
                      step.reason, target.reason or 'unhealthy'))
        if self.tracker.store_step(target, states.UNHEALTHY, states.GAVE_UP,
                                   reason, {}):
            self.timeline.heat_event(target, 'FAILED', reason)
            self._keep_evidence(policy, target, 'at GAVE_UP')

    def _reset(self, policy, target, step):
        self.tracker.store_columns(target, {
            'attempts': 0, 'first_attempt_at': None,
            'next_attempt_at': None})

    def _abandon_step(self, policy, target, step):
        self._abandon(policy, target, states.UNHEALTHY,
                      'recovery abandoned: %s' % step.reason)

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
        """Clear the CHECK_FAILED of a server healed, given up on or reset."""
        recovery = dict(target.recovery or {})
        server_id = recovery.pop('marked_failed')
        reason = 'heat-health: server %s is %s' % (server_id, {
            states.GAVE_UP: 'given up on',
            states.NO_DATA: 'marked healthy by a user'}.get(
                target.state, 'healthy again'))
        cleared = self.replacer.clear_mark(target.stack_id,
                                           target.resource_name, server_id,
                                           reason)
        stored = self.tracker.store_columns(target,
                                            {'recovery': recovery or None})
        if stored and cleared:
            self.timeline.record(policy, target, 'UNMARKED',
                                 reason + ': CHECK_FAILED cleared')
