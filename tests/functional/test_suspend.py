"""A suspended stack is not a fleet of failures."""

import json

EVENTS_AND_POLLING = [{'type': 'LIFECYCLE_EVENTS'},
                      {'type': 'NODE_STATUS_POLLING'}]


def _targets(demo, stack):
    policy, = demo.health_report(stack)['policies']
    return policy, {t['path']: t for t in policy['targets']}


def test_suspend_and_resume_decide_no_failure(demo, demo_nova, stacks):
    stack = stacks('suspend', 'health_modes.yaml', 'count=2',
                   'modes=%s' % json.dumps(EVENTS_AND_POLLING))
    name = stack['stack_name']
    demo.wait_for(lambda: all(
        t['state'] == 'HEALTHY' for t in _targets(demo, stack)[1].values()),
        'both servers HEALTHY')
    servers = {p: t['server_id'] for p, t in _targets(demo, stack)[1].items()}

    demo.run('stack', 'suspend', '--wait', name)
    assert demo.json('stack', 'show', name)['stack_status'] == (
        'SUSPEND_COMPLETE')
    assert {demo_nova.servers.get(s).status for s in servers.values()} == {
        'SUSPENDED'}
    # Two status polls (interval 5 s) and the notifications of the
    # suspend have come and gone: nothing is judged.
    policy = demo.wait_for(
        lambda: (lambda p: p if p['suspended'] else None)(
            _targets(demo, stack)[0]), 'the policy to be suspended')
    demo.wait_for(lambda: all(
        (t['last_observation'] or {}).get('verdict') == 'UNHEALTHY'
        for t in _targets(demo, stack)[1].values()),
        'the suspended servers to be seen stopped', timeout=30)
    policy, targets = _targets(demo, stack)
    assert {t['state'] for t in targets.values()} == {'HEALTHY'}, targets

    demo.run('stack', 'resume', '--wait', name)
    assert demo.json('stack', 'show', name)['stack_status'] == (
        'RESUME_COMPLETE')
    demo.wait_for(lambda: not _targets(demo, stack)[0]['suspended'],
                  'the policy to be resumed')
    demo.wait_for(lambda: all(
        (t['last_observation'] or {}).get('verdict') == 'HEALTHY'
        for t in _targets(demo, stack)[1].values()),
        'the resumed servers to be seen running', timeout=30)
    report = demo.health_report(stack)
    assert {t['state'] for t in report['policies'][0]['targets']} == {
        'HEALTHY'}
    assert not [e for e in report['events']
                if e['new_state'] in ('SUSPECT', 'UNHEALTHY')], report
