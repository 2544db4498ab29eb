"""Heat's OS::Octavia::* resources against the real Octavia, as demo.

Member status follows what Octavia's health manager concludes, which only
the local deployment lets a test set (tools/localcloud fault member).
"""

import pytest

from tests.functional import load_balancing as lb


def _resources(demo, name):
    resources = {r['resource_name']: r for r in
                 demo.json('stack', 'resource', 'list', name)}
    assert {r['resource_status'] for r in resources.values()} == {
        'CREATE_COMPLETE'}, resources
    return {key: resources[key]['physical_resource_id']
            for key in ('lb', 'pool', 'member')}


def test_load_balancer_stack_lifecycle(demo, stacks):
    stack = stacks('lb', 'loadbalancer.yaml')
    name = stack['stack_name']
    ids = _resources(demo, name)

    lb_show = demo.json('loadbalancer', 'show', ids['lb'])
    assert lb_show['provisioning_status'] == 'ACTIVE'
    member = demo.json('loadbalancer', 'member', 'show', ids['pool'],
                       ids['member'])
    assert (member['provisioning_status'], member['address']) == (
        'ACTIVE', '10.0.0.7')

    demo.run('stack', 'delete', '--yes', '--wait', name)
    listed = demo.json('loadbalancer', 'list')
    assert ids['lb'] not in [found['id'] for found in listed
                             if found['provisioning_status'] != 'DELETED']


@pytest.mark.fakecloud
def test_member_status_as_the_health_manager_sets_it(demo, stacks):
    stack = stacks('lb-status', 'loadbalancer.yaml')
    ids = _resources(demo, stack['stack_name'])

    lb.set_status(ids['member'], 'ERROR')
    member = demo.json('loadbalancer', 'member', 'show', ids['pool'],
                       ids['member'])
    assert member['operating_status'] == 'ERROR'
    pool = demo.json('loadbalancer', 'pool', 'show', ids['pool'])
    assert pool['operating_status'] == 'ERROR'
    lb.set_status(ids['member'], 'ONLINE')
    member = demo.json('loadbalancer', 'member', 'show', ids['pool'],
                       ids['member'])
    assert member['operating_status'] == 'ONLINE'
