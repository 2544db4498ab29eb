"""Heat's OS::Octavia::* resources against the real Octavia, as demo."""

import subprocess

from tests.functional import cloud


def _fault_member(member_id, status):
    result = subprocess.run(
        [str(cloud.REPO / 'tools' / 'localcloud'), 'fault', 'member',
         member_id, status], capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_load_balancer_stack_lifecycle_and_member_status(demo, stacks):
    stack = stacks('lb', 'loadbalancer.yaml')
    name = stack['stack_name']
    resources = {r['resource_name']: r for r in
                 demo.json('stack', 'resource', 'list', name)}
    assert {r['resource_status'] for r in resources.values()} == {
        'CREATE_COMPLETE'}, resources
    lb_id = resources['lb']['physical_resource_id']
    pool_id = resources['pool']['physical_resource_id']
    member_id = resources['member']['physical_resource_id']

    lb = demo.json('loadbalancer', 'show', lb_id)
    assert lb['provisioning_status'] == 'ACTIVE'
    member = demo.json('loadbalancer', 'member', 'show', pool_id, member_id)
    assert (member['provisioning_status'], member['address']) == (
        'ACTIVE', '10.0.0.7')

    _fault_member(member_id, 'ERROR')
    member = demo.json('loadbalancer', 'member', 'show', pool_id, member_id)
    assert member['operating_status'] == 'ERROR'
    pool = demo.json('loadbalancer', 'pool', 'show', pool_id)
    assert pool['operating_status'] == 'ERROR'
    _fault_member(member_id, 'ONLINE')
    member = demo.json('loadbalancer', 'member', 'show', pool_id, member_id)
    assert member['operating_status'] == 'ONLINE'

    demo.run('stack', 'delete', '--yes', '--wait', name)
    listed = demo.json('loadbalancer', 'list')
    assert lb_id not in [lb['id'] for lb in listed
                         if lb['provisioning_status'] != 'DELETED']
