"""Rungs beyond Nova: a Mistral workflow, a signed webhook.

Two engines run, either of which may own the policy. The workflows run
on the local deployment's real Mistral, as the stack's owner: they call
a repair service this test runs on 127.0.0.1, which puts the server
right through fakecloud's fault API as an operator's tool would. The
webhook receiver is the test's too, on the port the local deployment's
network rules open to webhooks.
"""

import contextlib
import http.server
import json
import threading
import uuid

from heatclient.common import template_utils
from mistralclient.api import client as mistral_client
import pytest

from heat_health.policy import webhook_signature
from tests.functional import cloud
from tests.functional import engines
from tests.functional import healing as h

pytestmark = pytest.mark.fakecloud

# The port tools/localcloud opens to webhook rungs (with fakecloud's
# health port) in [heat_health] poll_url_allowed_networks.
WEBHOOK_PORT = 8779
SOFT_REBOOT = {'name': 'REBOOT', 'params': {'type': 'SOFT'}}

REPAIR = '''
version: '2.0'
%(name)s:
  description: Asks the repair service to put a server right.
  input: [server, path, reason, ip, repair_url]
  tasks:
    repair:
      action: std.http
      input:
        url: <%% $.repair_url %%>
        method: POST
        json:
          server: <%% $.server %%>
          path: <%% $.path %%>
          reason: <%% $.reason %%>
'''

FAILS = '''
version: '2.0'
%(name)s:
  description: Fails, as a workflow whose storage step breaks.
  input: [server]
  tasks:
    give_up:
      action: std.fail
'''


@pytest.fixture
def peer(demo, tmp_path):
    """The second engine: either may own the policy."""
    engine = engines.Engine(tmp_path, 'rungs-peer').start(demo)
    yield engine
    engine.kill()


def _mistral(user):
    return mistral_client.client(session=user.session,
                                 mistral_url=user.endpoint('workflowv2'))


@pytest.fixture
def workflows(demo):
    """Create workflows as demo (or another user); delete them after."""
    made = []

    def create(template, user=None, scope='private'):
        client = _mistral(user or demo)
        name = 'heal-%s' % uuid.uuid4().hex[:8]
        client.workflows.create(template % {'name': name}, scope=scope)
        made.append((client, name))
        return name
    yield create
    for client, name in made:
        with contextlib.suppress(Exception):
            for execution in client.executions.list(workflow_name=name):
                client.executions.delete(execution.id, force=True)
        with contextlib.suppress(Exception):
            client.workflows.delete(name)


class Receiver(object):
    """An HTTP service on 127.0.0.1 that resets the servers it is sent.

    What an operator's repair tool would do: the server is put right
    through fakecloud's fault API (``reset``), as the admin.
    """

    def __init__(self, admin, port=0, status=200):
        self.got = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers['Content-Length']))
                receiver.got.append((dict(self.headers), body))
                sent = json.loads(body)
                # A workflow's repair task sends the server's id; a
                # webhook its params.
                server_id = (sent.get('params') or sent)['server']
                admin.inject_fault(server_id, 'reset')
                self.send_response(status)
                self.send_header('Content-Length', '0')
                self.end_headers()

            def log_message(self, *args):
                pass
        self._http = http.server.ThreadingHTTPServer(('127.0.0.1', port),
                                                     Handler)
        self.url = 'http://127.0.0.1:%d/repair' % self._http.server_port
        threading.Thread(target=self._http.serve_forever, daemon=True,
                         name='repair-service').start()

    def close(self):
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture
def receiver(admin):
    found = Receiver(admin)
    yield found
    found.close()


def _executions(demo, workflow):
    return list(_mistral(demo).executions.list(workflow_name=workflow))


def _reasons(demo, stack, server_id):
    return [e['reason'] for e in h.all_events(demo, stack)
            if e['server_id'] == server_id]


def test_a_workflow_heals_what_a_reboot_did_not(
        demo, admin, stacks, workflows, receiver, peer):
    name = workflows(REPAIR)
    recovery = {'actions': [SOFT_REBOOT, {
        'name': name, 'type': 'MISTRAL_WORKFLOW', 'params': {
            'server': '{{ server.id }}', 'path': '{{ resource.path }}',
            'reason': '{{ reason }}', 'ip': '{{ server.ip }}',
            'repair_url': receiver.url}}, {'name': 'RECREATE'}]}
    stack, targets = h.heal_stack(stacks, demo, 'rung-workflow', count=2,
                                  modes=h.POLL_URL, recovery=recovery,
                                  verify_timeout=15)
    victim = targets['workers/0']['server_id']
    # Hung, and the next reboot fails in the hypervisor: the reboot does
    # not heal it, the workflow's repair does.
    assert admin.inject_fault(victim, 'broken').status_code == 200
    demo.wait_for(lambda: receiver.got, 'the workflow to call the repair '
                  'service', timeout=120)
    healed = demo.wait_for(lambda: h.all_healthy(demo, stack, 2),
                           'the server HEALTHY again', timeout=90)
    assert healed['workers/0']['server_id'] == victim
    [execution] = _executions(demo, name)
    assert execution.state == 'SUCCESS'
    sent = json.loads(execution.input)
    assert sent['server'] == victim
    assert sent['path'] == 'workers/0'
    assert sent['repair_url'] == receiver.url
    # What was detected, not what the reboot's rung said of itself.
    assert sent['reason'].startswith('poll URL '), sent
    assert sent['ip'], sent
    assert json.loads(receiver.got[0][1])['server'] == victim
    reasons = _reasons(demo, stack, victim)
    assert any('workflow %s started: execution %s' % (name, execution.id)
               in r for r in reasons), reasons
    actions = [e['event'] for e in h.timeline(admin, victim)
               if e['event'].startswith('action:')]
    assert actions == ['action:reboot'], actions


def test_a_workflow_in_error_escalates_at_once(
        demo, admin, stacks, workflows, peer):
    name = workflows(FAILS)
    recovery = {'actions': [
        {'name': name, 'type': 'MISTRAL_WORKFLOW',
         'params': {'server': '{{ server.id }}'}}, SOFT_REBOOT]}
    stack, targets = h.heal_stack(stacks, demo, 'rung-error', count=2,
                                  modes=h.POLL_URL, recovery=recovery,
                                  verify_timeout=15)
    victim = targets['workers/0']['server_id']
    assert admin.inject_fault(victim, 'hang').status_code == 200
    healed = demo.wait_for(
        lambda: (lambda t: t if t and t['workers/0']['attempts'] else None)(
            h.all_healthy(demo, stack, 2)),
        'the reboot after the workflow to heal the server', timeout=150)
    assert healed['workers/0']['server_id'] == victim
    [execution] = _executions(demo, name)
    assert execution.state == 'ERROR'
    reasons = _reasons(demo, stack, victim)
    assert any('execution %s ended in ERROR' % execution.id in r
               for r in reasons), reasons
    # Escalated by the execution's end, not by the rung's deadline.
    assert not any('not healthy 15s after workflow' in r
                   for r in reasons), reasons
    actions = [e['event'] for e in h.timeline(admin, victim)
               if e['event'].startswith('action:')]
    assert actions == ['action:reboot'], actions


def _create_answer(demo, prefix, recovery):
    """Heat's answer to a stack create (its validation is synchronous)."""
    files, body = template_utils.get_template_contents(
        template_file=str(cloud.TEMPLATES / 'heal_group.yaml'))
    _env_files, environment = (
        template_utils.process_multiple_environments_and_files(
            env_paths=[demo.stack_environment()]))
    return demo.session.post(
        '%s/stacks' % demo.endpoint('orchestration'), raise_exc=False,
        json={'stack_name': '%s-%s' % (prefix, uuid.uuid4().hex[:8]),
              'template': body, 'files': files, 'environment': environment,
              'parameters': {'count': 1, 'recovery': json.dumps(recovery)}})


def test_a_workflow_the_user_cannot_run_is_refused_at_create(
        demo, alt_demo, admin, stacks, workflows):
    theirs = workflows(REPAIR, user=alt_demo)
    recovery = {'actions': [{'name': theirs, 'type': 'MISTRAL_WORKFLOW',
                             'params': {'server': '{{ server.id }}'}}]}
    answer = _create_answer(demo, 'rung-refused', recovery)
    assert answer.status_code == 400, answer.text
    message = answer.json()['error']['message']
    assert 'workflow "%s" cannot be run by project' % theirs in message, (
        message)
    # A public workflow of another project (an admin publishes it) can
    # be run, and is accepted.
    public = workflows(REPAIR, user=admin, scope='public')
    recovery['actions'][0]['name'] = public
    stacks('rung-public', 'heal_group.yaml', 'count=1',
           'recovery=%s' % json.dumps(recovery))


def test_a_webhook_rung_posts_a_signed_body(demo, admin, stacks, peer):
    hook = Receiver(admin, port=WEBHOOK_PORT, status=202)
    try:
        recovery = {'actions': [{
            'type': 'WEBHOOK', 'url': 'http://127.0.0.1:%d/heal?k=v' %
            WEBHOOK_PORT, 'params': {'server': '{{ server.id }}',
                                     'name': '{{ server.name }}'}}]}
        stack, targets = h.heal_stack(stacks, demo, 'rung-webhook',
                                      count=2, modes=h.POLL_URL,
                                      recovery=recovery, verify_timeout=15)
        victim = targets['workers/0']['server_id']
        secret = demo.json('stack', 'resource', 'show', stack['stack_name'],
                           'health')['attributes']['webhook_secret']
        assert admin.inject_fault(victim, 'hang').status_code == 200
        demo.wait_for(lambda: hook.got, 'the webhook', timeout=90)
        healed = demo.wait_for(lambda: h.all_healthy(demo, stack, 2),
                               'the server HEALTHY again', timeout=90)
    finally:
        hook.close()
    assert healed['workers/0']['server_id'] == victim
    [(headers, body)] = hook.got
    assert webhook_signature.verify(
        secret, body, headers[webhook_signature.HEADER]), headers
    sent = json.loads(body)
    assert sent['params']['server'] == victim
    assert sent['params']['name']
    assert sent['server']['id'] == victim
    assert sent['resource']['path'] == 'workers/0'
    reasons = _reasons(demo, stack, victim)
    assert any('answered HTTP 202: verifying' in r for r in reasons), reasons
    assert not [e for e in h.timeline(admin, victim)
                if e['event'].startswith('action:')]
