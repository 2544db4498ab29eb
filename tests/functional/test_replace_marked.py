"""A marked resource, and a marked group member named only by its physical
id through the top-level stack, are replaced by the next stack update."""


def _member(demo, stack_name, physical_id):
    """The group member with that physical id, shown from its own stack."""
    for res in demo.nested_resources(stack_name):
        if res['physical_resource_id'] == physical_id:
            return demo.resource(res['stack_name'], res['resource_name'])
    return None


def test_update_replaces_marked_resource_and_group_member(demo, stacks):
    heal = stacks('heal', 'heal.yaml')
    name = heal['stack_name']
    server_id = demo.resource(name, 'server')['physical_resource_id']
    members = [r for r in demo.nested_resources(name)
               if r['resource_type'] == 'OS::Heat::TestResource' and
               r.get('stack_name', name) != name]
    assert len(members) == 2, members
    member_id = members[0]['physical_resource_id']
    other_id = members[1]['physical_resource_id']

    demo.run('stack', 'resource', 'mark', 'unhealthy', name, 'server',
             'application stopped answering')
    demo.run('stack', 'resource', 'mark', 'unhealthy', name, member_id,
             'member wedged')

    assert demo.resource(name, 'server')['resource_status'] == 'CHECK_FAILED'
    member = _member(demo, name, member_id)
    assert (member['resource_status'], member['resource_status_reason']) == (
        'CHECK_FAILED', 'member wedged'), member
    events = demo.events(name, nested_depth=2)
    assert any(e['resource_status'] == 'CHECK_FAILED' and
               e['resource_status_reason'] == 'member wedged'
               for e in events), events

    demo.run('stack', 'update', '--existing', '--wait', name)
    assert demo.json('stack', 'show', name)['stack_status'] == (
        'UPDATE_COMPLETE')

    server = demo.resource(name, 'server')
    assert server['physical_resource_id'] != server_id
    assert server['resource_status'] != 'CHECK_FAILED'
    assert _member(demo, name, member_id) is None
    after = [r for r in demo.nested_resources(name)
             if r['resource_type'] == 'OS::Heat::TestResource' and
             r.get('stack_name', name) != name]
    assert len(after) == 2, after
    assert other_id in [r['physical_resource_id'] for r in after]
    assert all(r['resource_status'] != 'CHECK_FAILED' for r in after)
