"""Mistral in the deployment, as a project's member uses it.

The workflow rungs of a health policy run Mistral workflows as the stack's
owner: the deployment must list Mistral (workflowv2) in its catalog, and a
member of a project must be able to define a workflow and run it. The
local deployment runs Mistral when LOCALCLOUD_MISTRAL=1 (tools/run-tests
sets it); without it these tests fail.
"""

import json
import uuid

from keystoneauth1 import exceptions as ks_exceptions
import pytest

# Seconds an echo workflow has to finish.
EXECUTION_TIMEOUT = 60

ECHO_WORKFLOW = """\
version: '2.0'
%(name)s:
  input:
    - message
  output:
    said: <%% $.said %%>
  tasks:
    say:
      action: std.echo output=<%% $.message %%>
      publish:
        said: <%% task().result %%>
"""


def _mistral_url(user):
    try:
        return user.endpoint('workflowv2')
    except ks_exceptions.EndpointNotFound:
        pytest.fail('Mistral (workflowv2) is not in the catalog of %s; '
                    'the local deployment runs it with LOCALCLOUD_MISTRAL=1'
                    % user.name)


def test_mistral_in_the_catalog(admin):
    types = sorted(service['Type'] for service in admin.json('catalog',
                                                             'list'))
    assert 'workflowv2' in types, (
        'Mistral (workflowv2) is not in the catalog: %s' % ', '.join(types))
    url = _mistral_url(admin)
    assert url.rstrip('/').endswith('/v2'), url


@pytest.fixture
def echo_workflow(demo):
    url = _mistral_url(demo)
    name = 'heat_health_echo_%s' % uuid.uuid4().hex[:8]
    resp = demo.session.post(
        url + '/workflows', data=ECHO_WORKFLOW % {'name': name},
        headers={'Content-Type': 'text/plain'}, raise_exc=False)
    assert resp.status_code == 201, (resp.status_code, resp.text)
    yield url, name
    demo.session.delete('%s/workflows/%s' % (url, name), raise_exc=False)


def test_member_runs_an_echo_workflow(demo, echo_workflow):
    url, name = echo_workflow
    message = 'hello %s' % uuid.uuid4().hex[:8]
    resp = demo.session.post(
        url + '/executions', raise_exc=False,
        json={'workflow_name': name,
              'input': json.dumps({'message': message})})
    assert resp.status_code == 201, (resp.status_code, resp.text)
    execution_url = '%s/executions/%s' % (url, resp.json()['id'])
    try:
        def finished():
            found = demo.session.get(execution_url).json()
            if found['state'] not in ('IDLE', 'RUNNING', 'PAUSED'):
                return found
        execution = demo.wait_for(
            finished, 'execution of %s finished' % name,
            timeout=EXECUTION_TIMEOUT, interval=0.5)
        assert execution['state'] == 'SUCCESS', execution
        assert json.loads(execution['input']) == {'message': message}
        assert json.loads(execution['output']) == {'said': message}
        assert execution['project_id'] == demo.session.get_project_id()
    finally:
        demo.session.delete(execution_url, raise_exc=False)
