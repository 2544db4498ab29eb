"""OS::Heat::HealthPolicy through Heat, as the demo user.

The tests marked real_nova break servers behind Nova's back; those that
kill or add engines of the local deployment skip anywhere else.
"""

import os
import signal
import time

import pytest

from tests.functional import cloud
from tests.functional import engines
from tests.functional import healing as h
from tests.functional import server_faults as faults


def _policy(demo, stack_name):
    return demo.resource(stack_name, 'policy')['attributes']


def _servers(demo, stack_name):
    return {r['physical_resource_id']: r for r in
            demo.nested_resources(stack_name)
            if r['resource_type'] == 'OS::Nova::Server'}


def _all_healthy(demo, name, count=3):
    return demo.wait_for(
        lambda: (lambda a: a if a['status']['states'].get('HEALTHY') == count
                 else None)(_policy(demo, name)),
        'all %d servers HEALTHY' % count, timeout=60)


def _member(demo, name, server_id):
    return {m['server_id']: m for m in
            _policy(demo, name)['members']}[server_id]


def _needs_local_deployment():
    if not h.local_deployment():
        pytest.skip("kills or adds the local deployment's engines "
                    "(tools/localcloud)")


def test_policy_watches_servers_and_group_members(demo, stacks):
    stack = stacks('policy', 'policy.yaml')
    name = stack['stack_name']
    servers = _servers(demo, name)
    assert len(servers) == 3
    attributes = _all_healthy(demo, name)
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


@pytest.mark.engine_control
def test_create_fails_clearly_without_an_engine(demo):
    name = 'orphan-policy-%d' % time.time()
    try:
        with engines.deployment_engine_stopped():
            demo.run('stack', 'create', '--wait', '-t',
                     str(cloud.TEMPLATES / 'policy.yaml'), '-e',
                     demo.stack_environment(), name, check=False)
            stack = demo.json('stack', 'show', name)
        assert stack['stack_status'] == 'CREATE_FAILED', stack
        assert 'no heat-health-engine confirmed' in (
            stack['stack_status_reason']), stack['stack_status_reason']
    finally:
        demo.delete_stack(name)


@pytest.mark.real_nova
def test_engine_killed_and_restarted_resumes_watching(admin, demo, stacks):
    _needs_local_deployment()
    name = stacks('policy', 'policy.yaml')['stack_name']
    old_engine = _all_healthy(demo, name)['status']['engine_id']
    pid = engines.deployment_engine_pid()
    os.killpg(pid, signal.SIGKILL)
    demo.wait_for(lambda: not os.path.exists('/proc/%d' % pid),
                  'the killed engine to be gone', timeout=10, interval=0.1)
    engines.localcloud('up')
    status = demo.wait_for(
        lambda: (lambda s: s if s['engine_id'] not in (None, old_engine)
                 else None)(_policy(demo, name)['status']),
        'a new engine to own the policy', timeout=60)
    assert status['targets'] == 3

    web = demo.resource(name, 'web')['physical_resource_id']
    faults.break_server(admin, web, 'power_off')
    member = demo.wait_for(
        lambda: (lambda m: m if m['state'] == 'UNHEALTHY' else None)(
            _member(demo, name, web)),
        'the shut off server to be UNHEALTHY', timeout=30)
    # The power state Nova's sync saved, or its stop that follows: polled
    # (SHUTOFF) or notified (the action or the state).
    assert any(s in member['reason'] for s in (
        'power state SHUTDOWN', 'SHUTOFF', 'stopped', 'power_off')), member


@pytest.mark.real_nova
def test_autoscaling_group_members_followed_through_scale_out(
        admin, demo, stacks):
    name = stacks('asg-policy', 'policy_asg.yaml')['stack_name']
    before = _servers(demo, name)
    assert len(before) == 2
    _all_healthy(demo, name, count=2)

    demo.run('stack', 'resource', 'signal', name, 'scale_out')
    demo.wait_for(lambda: len(_servers(demo, name)) == 3,
                  'the scale-out to add a third server', timeout=120)
    attributes = _all_healthy(demo, name, count=3)
    added, = set(_servers(demo, name)) - set(before)
    members = {m['server_id']: m for m in attributes['members']}
    assert set(members) == set(_servers(demo, name))
    # pool/<member>/0: an ASG member is a nested stack holding the server.
    assert members[added]['path'].startswith('pool/')
    assert members[added]['path'].count('/') == 2, members[added]

    # The hypervisor pauses it: Nova leaves it ACTIVE, power state PAUSED.
    faults.break_server(admin, added, 'pause')
    member = demo.wait_for(
        lambda: (lambda m: m if m['state'] == 'UNHEALTHY' else None)(
            _member(demo, name, added)),
        'the paused new member to be UNHEALTHY', timeout=30)
    assert 'pause' in member['reason'].lower(), member
    others = [m for sid, m in members.items() if sid != added]
    assert all(_member(demo, name, m['server_id'])['state'] == 'HEALTHY'
               for m in others)


@pytest.mark.real_nova
def test_second_engine_never_shares_and_takes_a_dead_ones_policy(
        admin, demo, stacks, tmp_path):
    _needs_local_deployment()
    name = stacks('policy', 'policy.yaml')['stack_name']
    first = _all_healthy(demo, name)['status']['engine_id']
    try:
        with engines.own_engine(demo, tmp_path,
                                '[coordination]\nbackend_url =\n') as log:
            # A live owner keeps its policy: the second engine renews
            # nothing of it through more than one of its lease rounds.
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                assert _policy(demo, name)['status']['engine_id'] == first
                time.sleep(1)

            os.killpg(engines.deployment_engine_pid(), signal.SIGKILL)
            killed = time.monotonic()
            status = demo.wait_for(
                lambda: (lambda s: s if s['engine_id'] not in (None, first)
                         else None)(_policy(demo, name)['status']),
                'the second engine to own the policy', timeout=60)
            # Within twice the lease (2 x 30 s), as the option promises.
            assert time.monotonic() - killed < 60
            assert 'now watched by engine %s' % status['engine_id'] in (
                log.read_text())

            web = demo.resource(name, 'web')['physical_resource_id']
            faults.break_server(admin, web, 'power_off')
            demo.wait_for(
                lambda: _member(demo, name, web)['state'] == 'UNHEALTHY',
                'the second engine to see the shut off server', timeout=30)
    finally:
        engines.localcloud('up')


def test_every_example_creates_and_its_policies_are_watched(demo, stacks):
    examples = sorted((cloud.REPO / 'examples').glob('*.yaml'))
    assert len(examples) >= 3, examples
    for path in examples:
        name = stacks('example', str(path))['stack_name']
        policies = [r['resource_name'] for r in demo.json(
            'stack', 'resource', 'list', name)
            if r['resource_type'] == 'OS::Heat::HealthPolicy']
        for policy in policies:
            status = demo.resource(name, policy)['attributes']['status']
            assert status['engine_id'], (path.name, status)
            assert status['targets'] >= 1, (path.name, status)
