"""OS::Heat::HealthPolicy through Heat, as the demo user."""

import subprocess
import time

from tests.functional import cloud


def _localcloud(*args):
    result = subprocess.run([str(cloud.REPO / 'tools' / 'localcloud')] +
                            list(args), capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _policy(demo, stack_name):
    return demo.resource(stack_name, 'policy')['attributes']


def _servers(demo, stack_name):
    return {r['physical_resource_id']: r for r in
            demo.nested_resources(stack_name)
            if r['resource_type'] == 'OS::Nova::Server'}


def test_policy_watches_servers_and_group_members(demo, stacks):
    stack = stacks('policy', 'policy.yaml')
    name = stack['stack_name']
    servers = _servers(demo, name)
    assert len(servers) == 3
    attributes = demo.wait_for(
        lambda: (lambda a: a if a['status']['states'].get('HEALTHY') == 3
                 else None)(_policy(demo, name)),
        'all three servers HEALTHY', timeout=60)
    members = {m['server_id']: m for m in attributes['members']}
    assert set(members) == set(servers)
    assert sorted(m['path'] for m in members.values()) == [
        'web', 'workers/0', 'workers/1']
    assert attributes['status']['enabled'] is True
    assert attributes['status']['engine_id']


def test_invalid_policy_is_rejected_naming_the_property(demo):
    error = demo.fails('stack', 'create', '-t',
                       str(cloud.TEMPLATES / 'policy_bad_poll_url.yaml'),
                       'bad-policy-%d' % time.time())
    assert 'poll_url is required' in error, error


def test_create_fails_clearly_without_an_engine(demo):
    name = 'orphan-policy-%d' % time.time()
    _localcloud('stop', 'heat-health-engine')
    try:
        demo.run('stack', 'create', '--wait', '-t',
                 str(cloud.TEMPLATES / 'policy.yaml'), name, check=False)
        stack = demo.json('stack', 'show', name)
        assert stack['stack_status'] == 'CREATE_FAILED', stack
        assert 'no heat-health-engine confirmed' in (
            stack['stack_status_reason']), stack['stack_status_reason']
    finally:
        _localcloud('up')
        demo.delete_stack(name)
