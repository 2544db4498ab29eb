"""A workflow's or a webhook's rung, from its params to its end.

A mixin of the recovery loop, beside ``attempts``: the rung's params are
expanded from the target when the attempt is decided and stored with it,
so an engine that takes the attempt over sends the same. The stage
``issuing`` is stored before the execution is started or the webhook
POSTed, and never sent again: an engine that finds it looks the
execution up by the description it was started with, and follows it.
So does the engine whose start got no answer (a timeout, a lost
connection, a 5xx): Mistral may have started it; only a refusal, or a
lookup that finds none, fails the rung.

A workflow's execution is followed while the server is verified: its
ERROR (or a cancel) escalates at once, its SUCCESS leaves the verdict to
the detectors, as after any action; one still running at the deadline
is cancelled before the next rung. A webhook's 2xx answer means it was
taken; then the detectors judge too.
"""

import datetime

from oslo_log import log as logging

from heat_health.db import api as db_api
from heat_health.engine.monitor import states
from heat_health.engine.recovery import outside_rungs
from heat_health.engine.recovery import planner
from heat_health.policy import rung_params
from heat_health.policy import spec as policy_spec
from heat_health.policy import webhook_signature

LOG = logging.getLogger(__name__)

MISTRAL_WORKFLOW = policy_spec.MISTRAL_WORKFLOW
WEBHOOK = policy_spec.WEBHOOK
# Seconds between two reads of a followed execution's state.
FOLLOW_SECONDS = 2.0


def _description(target, recovery):
    """What an attempt's execution is started with, and found again by."""
    return 'heat-health recovery of server %s (target %s, attempt %s, ' \
        'started %s)' % (target.server_id, target.id,
                         recovery.get('attempt'), recovery.get('started_at'))


# Set before an execution is started, dropped once it is seen ended.
RUNNING = db_api.RUNNING_WORKFLOW


def note_issuing(target, recovery):
    """Record the execution a workflow rung is about to start."""
    if recovery.get('action') == MISTRAL_WORKFLOW:
        recovery[RUNNING] = {'description': _description(target, recovery)}


class OutsideStages(object):
    """The steps of a MISTRAL_WORKFLOW or WEBHOOK rung.

    The loop provides tracker, timeline, replacer, ``_clock``,
    ``_failed`` and ``_verifying``.
    """

    def _workflows(self, stack_id):
        """Mistral as the stack's owner (its stored trust)."""
        try:
            return outside_rungs.Workflows(
                self.replacer.mistral_client(stack_id))
        except Exception as e:
            raise outside_rungs.RungFailed(
                'Mistral cannot be reached as the stack\'s owner: %s' % e)

    def _webhook_calls(self):
        if self._webhooks is None:
            self._webhooks = outside_rungs.Webhooks(self._conf)
        return self._webhooks

    @staticmethod
    def _expanded(action, target, found, detected):
        """The rung with its params' variables replaced, for this target.

        :param detected: why the server was found failing.
        """
        name, params = action
        if name not in policy_spec.OUTSIDE:
            return action
        known = rung_params.values(
            target.server_id, getattr(found, 'name', None),
            getattr(found, 'addresses', None) or (), target.stack_id,
            target.path, target.resource_name, detected)
        params = dict(params or {})
        params['input'] = rung_params.expand(params.get('input') or {}, known)
        return name, params

    def _issue_outside(self, policy, target, recovery):
        """Start the stored workflow, or POST the webhook: once."""
        name = recovery.get('action')
        params = recovery.get('params') or {}
        label = policy_spec.rung_label(name, params)
        try:
            if name == MISTRAL_WORKFLOW:
                extra, said = self._start_workflow(policy, target, recovery,
                                                   label)
            else:
                status = self._webhook_calls().post(
                    params.get('url'), self._webhook_body(
                        policy, target, recovery),
                    webhook_signature.policy_secret(policy.id))
                extra = {'webhook_status': status}
                said = '%s answered HTTP %s: verifying' % (label, status)
        except outside_rungs.RungFailed as e:
            return self._failed(policy, target, str(e))
        self._verifying(policy, target, said, extra=extra)

    def _start_workflow(self, policy, target, recovery, label):
        """Start the rung's execution: (what to store, what to say).

        :raises RungFailed: Mistral refused it, or did not answer and
            has no execution of this attempt.
        """
        params = recovery.get('params') or {}
        description = _description(target, recovery)
        workflows = self._workflows(policy.stack_id)
        try:
            execution, state = workflows.start(
                params.get('workflow'), params.get('input') or {},
                description)
        except outside_rungs.AnswerLost as e:
            return self._found_unanswered(workflows, description, label, e)
        return ({'execution': execution, 'execution_state': state,
                 RUNNING: {'description': description,
                           'execution': execution}},
                '%s started: execution %s %s: verifying' % (
                    label, execution, state))

    @staticmethod
    def _found_unanswered(workflows, description, label, lost):
        """The execution a start without an answer may have made.

        Looked up before anything else, and followed if found. When
        Mistral cannot be asked either, the detectors verify, and the
        execution is looked up again before the next rung.
        """
        try:
            found = workflows.find(description)
        except outside_rungs.RungFailed as e:
            return {}, '%s may have started (%s), not looked up (%s): ' \
                'verifying' % (label, lost, e)
        if found is None:
            raise outside_rungs.RungFailed('%s; Mistral has no execution '
                                           'of it' % lost)
        return ({'execution': found[0], 'execution_state': found[1],
                 RUNNING: {'description': description,
                           'execution': found[0]}},
                '%s started, its answer lost (%s): execution %s %s: '
                'verifying' % (label, lost, found[0], found[1]))

    def _webhook_body(self, policy, target, recovery):
        """What a webhook is told: the failure, the server, its params.

        Its ``delivery`` id names the attempt by its stored start, the
        same from any engine that carries it on: attempt numbers start
        again at 1 once a server stays healthy.
        """
        return {'policy_id': policy.id, 'stack_id': policy.stack_id,
                'delivery': '%s-%s-%s' % (target.id, recovery.get('attempt'),
                                          recovery.get('started_at')),
                'attempt': recovery.get('attempt'),
                'server': {'id': target.server_id},
                'resource': {'path': target.path,
                             'name': target.resource_name,
                             'stack_id': target.stack_id},
                'reason': recovery.get('detected'),
                'params': (recovery.get('params') or {}).get('input') or {},
                'sent_at': self._clock().isoformat()}

    def _sent_before(self, policy, target):
        """The execution an ``issuing`` workflow rung may have started.

        ({} when it is not a workflow's, or none is found: then only the
        detectors verify.)
        """
        recovery = target.recovery or {}
        if recovery.get('action') != MISTRAL_WORKFLOW:
            return {}
        try:
            found = self._workflows(policy.stack_id).find(
                _description(target, recovery))
        except outside_rungs.RungFailed as e:
            LOG.warning('Execution of %(p)s not looked up: %(e)s',
                        {'p': target.path, 'e': e})
            return {}
        if found is None:
            return {}
        return {'execution': found[0], 'execution_state': found[1]}

    def _follow(self, policy, target, step):
        """Read the execution's state; its ERROR escalates at once."""
        now = self._clock()
        if self._follow_after.get(target.id, now) > now:
            return
        self._follow_after[target.id] = now + datetime.timedelta(
            seconds=FOLLOW_SECONDS)
        recovery = dict(target.recovery or {})
        execution = recovery.get('execution')
        try:
            state, info = self._workflows(policy.stack_id).state(execution)
        except outside_rungs.RungFailed as e:
            LOG.warning('Execution %(x)s of %(p)s not read: %(e)s',
                        {'x': execution, 'p': target.path, 'e': e})
            return
        if state == recovery.get('execution_state'):
            return
        recovery['execution_state'] = state
        if state in planner.EXECUTION_ENDED:
            recovery.pop(RUNNING, None)
        label = policy_spec.rung_label(recovery.get('action'),
                                       recovery.get('params'))
        if state in ('ERROR', outside_rungs.CANCELLED):
            self._follow_after.pop(target.id, None)
            return self._failed(policy, target, '%s: execution %s ended in '
                                '%s%s' % (label, execution, state,
                                          ': %s' % info if info else ''),
                                recovery=recovery)
        reason = '%s: execution %s %s: verifying' % (label, execution, state)
        if state in planner.EXECUTION_ENDED:
            self._follow_after.pop(target.id, None)
        if self.tracker.store_step(target, states.VERIFYING,
                                   states.VERIFYING, reason,
                                   {'recovery': recovery}, at=now):
            self.timeline.heat_event(target, 'IN_PROGRESS', reason)

    def _stop_workflow(self, policy, target, recovery=None):
        """Cancel an execution recovery started that may still run.

        Before the next rung, and before a new attempt: one its user's
        reset left running. Returns (ended, what the timeline says of it);
        not ended while Mistral cannot say the execution is over, as the
        next effect would then act beside a workflow that still does.
        """
        record = (recovery or target.recovery or {}).get(RUNNING)
        if not record:
            return True, ''
        workflows = self._workflows(policy.stack_id)
        execution = record.get('execution')
        try:
            if execution:
                state = workflows.state(execution)[0]
            else:
                # Started without an answer, or taken over: looked up.
                found = workflows.find(record.get('description'))
                if found is None:
                    return True, ''
                execution, state = found
            if state in planner.EXECUTION_ENDED:
                return True, ''
            self._follow_after.pop(target.id, None)
            workflows.cancel(execution)
        except outside_rungs.RungFailed as e:
            return False, '%s may still be running: %s' % (
                'execution %s' % execution if execution else
                'the execution "%s"' % record.get('description'), e)
        return True, ' (execution %s cancelled)' % execution
