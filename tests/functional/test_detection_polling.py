"""NODE_STATUS_POLLING in heat-health-engine, seen through the health report.

The policy has no other detection mode, so whatever is found here was found
by polling Nova (the notification listener plays no part). The failures are
real Nova's: a server an admin deleted, one a failed suspend left in ERROR.
"""

import time
import uuid

import pytest

from tests.functional import server_faults as faults

INTERVAL = 5


def _report(cloud, stack, path_cloud=None):
    """GET .../health as ``cloud``, in the path of ``path_cloud``'s project."""
    endpoint = (path_cloud or cloud).endpoint('orchestration')
    return cloud.session.get('%s/stacks/%s/%s/health' % (
        endpoint, stack['stack_name'], stack['id']), raise_exc=False)


def _targets(demo, stack):
    resp = _report(demo, stack)
    assert resp.status_code == 200, resp.text
    policy, = resp.json()['health']['policies']
    return {t['path'].split('/')[-1]: t for t in policy['targets']}, resp


def _server_id(demo, stack, resource):
    return demo.json('stack', 'resource', 'show', stack['stack_name'],
                     resource)['physical_resource_id']


def _wait_state(demo, stack, resource, state, timeout=6 * INTERVAL):
    deadline = time.monotonic() + timeout
    while True:
        targets, _resp = _targets(demo, stack)
        target = targets.get(resource)
        if target and target['state'] == state:
            return target
        if time.monotonic() > deadline:
            raise AssertionError('%s is not %s after %ss: %s'
                                 % (resource, state, timeout, target))
        time.sleep(1)


@pytest.fixture(scope='module')
def outsider(admin):
    """A member of another project (not an admin)."""
    password = 'outsider-%s' % uuid.uuid4().hex
    admin.run('project', 'create', '--or-show', 'health-outsider')
    admin.run('user', 'create', '--or-show', '--password', password,
              'health-outsider')
    admin.run('user', 'set', '--password', password, 'health-outsider')
    for role in ('member', 'reader'):
        admin.run('role', 'add', '--user', 'health-outsider', '--project',
                  'health-outsider', role)
    return admin.other_user('health-outsider', password, 'health-outsider')


@pytest.fixture
def watched(demo, stacks):
    stack = stacks('polled', 'health_polling.yaml')
    for resource in ('web', 'db'):
        _wait_state(demo, stack, resource, 'HEALTHY')
    return stack


@pytest.mark.real_nova
@pytest.mark.parametrize('fault,reason', [
    ('delete', 'Nova status DELETED'),
    # A suspend that fails in the hypervisor: Nova sets ERROR.
    pytest.param('error', 'Nova status ERROR',
                 marks=pytest.mark.guest_operation_faults),
])
def test_failure_seen_by_polling(admin, demo, watched, fault, reason):
    server_id = _server_id(demo, watched, 'web')
    faults.break_server(admin, server_id, fault)
    target = _wait_state(demo, watched, 'web', 'UNHEALTHY')
    assert target['reason'] in (reason, "Not in Nova's server list")
    assert target['last_observation']['source'] == 'NODE_STATUS_POLLING'
    targets, resp = _targets(demo, watched)
    assert targets['db']['state'] == 'HEALTHY'
    events = resp.json()['health']['events']
    assert [(e['old_state'], e['new_state'], e['source'])
            for e in events if e['server_id'] == server_id][0] == (
        'HEALTHY', 'UNHEALTHY', 'NODE_STATUS_POLLING')


# Nova's API made to fail for a while: only fakecloud's does on demand.
@pytest.mark.fakecloud
def test_api_errors_are_never_a_failure(admin, demo, watched):
    resp = admin.inject_api_fault('api_errors', duration=2 * INTERVAL)
    assert resp.status_code == 200, resp.text
    deadline = time.monotonic() + 3 * INTERVAL
    unknown_seen = False
    while time.monotonic() < deadline:
        targets, resp = _targets(demo, watched)
        assert {t['state'] for t in targets.values()} == {'HEALTHY'}, targets
        unknown_seen |= any(
            (t['last_observation'] or {}).get('verdict') == 'UNKNOWN'
            for t in targets.values())
        time.sleep(1)
    assert unknown_seen, 'the Nova API errors were not observed'
    events = resp.json()['health']['events']
    assert not [e for e in events if e['new_state'] != 'HEALTHY'], events


def test_report_is_for_the_stack_project_only(demo, reader, outsider,
                                              watched):
    # A reader of the project may read it.
    _targets(reader, watched)
    # A user of another project: 403 in the stack's project path, 404 (as
    # Heat answers for stacks of other projects) in the user's own.
    assert _report(outsider, watched, path_cloud=demo).status_code == 403
    assert _report(outsider, watched).status_code == 404
    # An unknown stack: 404.
    missing = dict(watched, id='00000000-0000-0000-0000-000000000000')
    assert _report(demo, missing).status_code == 404


# The poll URL is the local deployment's health endpoint of each guest;
# the ERROR a suspend that fails in the hypervisor.
@pytest.mark.real_nova
@pytest.mark.guest_operation_faults
def test_all_failed_versus_any_failed(admin, demo, stacks):
    """The poll URL always fails; polling fails only once Nova sets ERROR."""
    any_failed = stacks('any', 'health_two_modes.yaml',
                        'conditional=ANY_FAILED')
    all_failed = stacks('all', 'health_two_modes.yaml',
                        'conditional=ALL_FAILED')
    target = _wait_state(demo, any_failed, 'web', 'UNHEALTHY')
    assert target['last_observation']['source'] == 'NODE_STATUS_POLL_URL'
    _wait_state(demo, all_failed, 'web', 'SUSPECT')
    server_id = _server_id(demo, all_failed, 'web')
    faults.break_server(admin, server_id, 'error')
    target = _wait_state(demo, all_failed, 'web', 'UNHEALTHY')
    assert target['reason'] == 'Nova status ERROR'
