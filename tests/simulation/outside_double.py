"""Mistral and webhook receivers, as a workflow or webhook rung meets them.

A workflow's behaviour is in its name: ``wf-heal`` puts the server right
(Nova shows it running) and ends in SUCCESS a few seconds after it
starts, ``wf-fail`` ends in ERROR, ``wf-hang`` runs until cancelled. The
server is the one the execution's description names, as the engine
starts it. A webhook whose URL ends in ``/heal`` puts the server right
and answers 204; one ending in ``/500`` answers 500. Every execution
started and every POST answered is recorded, for the one effect per
attempt the checker counts. ``lose_answers`` makes Mistral create an
execution and its answer never come back (a read timeout).
"""

import collections
import re

from keystoneauth1 import exceptions as ks_exc
from mistralclient.api import base as mistral_base

from heat_health.engine.recovery import outside_rungs
from tests.simulation import faults as faults_mod

# Virtual seconds an execution runs before it ends (wf-hang: never).
RUN_SECONDS = {'wf-heal': 3, 'wf-fail': 1}
_SERVER = re.compile(r'of server (\S+) ')

Started = collections.namedtuple('Started', [
    'at', 'stack_id', 'server_id', 'workflow', 'execution_id'])
Posted = collections.namedtuple('Posted', [
    'at', 'stack_id', 'server_id', 'url', 'status', 'delivery'],
    defaults=(None,))


class _Execution(object):
    def __init__(self, execution_id, workflow, workflow_input, description,
                 started):
        self.id = execution_id
        self.workflow_name = workflow
        self.input = workflow_input
        self.description = description
        self.state = 'RUNNING'
        self.state_info = None
        self.started = started


class _Executions(object):
    """mistralclient's ExecutionManager, for one stack's owner."""

    def __init__(self, double, stack_id):
        self._double = double
        self._stack_id = stack_id

    def create(self, workflow, workflow_input=None, description=''):
        return self._double.create(self._stack_id, workflow, workflow_input,
                                   description)

    def get(self, execution_id):
        return self._double.get(execution_id)

    def list(self, description=None):
        return self._double.list(self._stack_id, description)

    def update(self, execution_id, state):
        return self._double.update(execution_id, state)


class MistralDouble(object):

    def __init__(self, clock, nova):
        self._clock = clock
        self._nova = nova
        self.faults = faults_mod.Faults()
        self.executions = {}
        self.started = []       # Started, in order
        self._owner = {}        # execution id -> stack id

    def client(self, stack_id):
        return type('Mistral', (), {'executions': _Executions(self,
                                                              stack_id)})()

    def lose_answers(self, count=1):
        """The next ``count`` starts are made; their answers are lost."""
        self.faults.add('create', ks_exc.ConnectTimeout(
            'Request to mistral timed out'), count, phase=faults_mod.AFTER)

    def _call(self, call, key, func):
        self.faults.check(faults_mod.BEFORE, call, key)
        result = func()
        self.faults.check(faults_mod.AFTER, call, key)
        return result

    def _settle(self, execution):
        ends = RUN_SECONDS.get(execution.workflow_name)
        if execution.state != 'RUNNING' or ends is None or (
                self._clock.seconds() < execution.started + ends):
            return
        if execution.workflow_name == 'wf-fail':
            execution.state, execution.state_info = 'ERROR', 'std.fail'
            return
        found = _SERVER.search(execution.description)
        try:
            self._nova.heal(found.group(1))
        except Exception as e:
            # A host that does not report, a server gone: it fails.
            execution.state, execution.state_info = 'ERROR', str(e)
            return
        execution.state = 'SUCCESS'

    def create(self, stack_id, workflow, workflow_input, description):
        def start():
            execution = _Execution('x-%d' % (len(self.executions) + 1),
                                   workflow, workflow_input, description,
                                   self._clock.seconds())
            self.executions[execution.id] = execution
            self._owner[execution.id] = stack_id
            found = _SERVER.search(description)
            self.started.append(Started(
                self._clock.seconds(), stack_id,
                found.group(1) if found else None, workflow, execution.id))
            return execution
        return self._call('create', workflow, start)

    def _get(self, execution_id):
        execution = self.executions.get(execution_id)
        if execution is None:
            raise mistral_base.APIException(404, 'Execution not found')
        self._settle(execution)
        return execution

    def get(self, execution_id):
        return self._call('get', execution_id,
                          lambda: self._get(execution_id))

    def list(self, stack_id, description):
        def found():
            return [self._get(i) for i, e in sorted(self.executions.items())
                    if self._owner[i] == stack_id and
                    (description is None or e.description == description)]
        return self._call('list', stack_id, found)

    def update(self, execution_id, state):
        def cancel():
            execution = self._get(execution_id)
            if execution.state == 'RUNNING':
                execution.state = state
            return execution
        return self._call('update', execution_id, cancel)


class WebhookDouble(object):
    """Receivers of WEBHOOK rungs, as outside_rungs.Webhooks reaches them."""

    def __init__(self, clock, nova):
        self._clock = clock
        self._nova = nova
        self.faults = faults_mod.Faults()
        self.posted = []        # Posted, in order

    def stop(self):
        pass

    def post(self, url, payload, secret):
        server_id = payload['server']['id']
        self.faults.check(faults_mod.BEFORE, 'post', server_id)
        status = 204 if url.endswith('/heal') else 500
        if status == 204:
            try:
                self._nova.heal(server_id)
            except Exception:
                # A host that does not report, a server gone.
                status = 503
        self.posted.append(Posted(self._clock.seconds(),
                                  payload['stack_id'], server_id, url,
                                  status, payload.get('delivery')))
        self.faults.check(faults_mod.AFTER, 'post', server_id)
        if status >= 300:
            raise outside_rungs.RungFailed('webhook %s answered HTTP %s' %
                                           (url, status))
        return status
