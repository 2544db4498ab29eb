"""OS::Heat::LoadBalancer on the local deployment's real Octavia.

The pool follows its group through create, scaling, resize, replacement
and delete; reused load balancers and pools are left as found; members in
ERROR are detected (LB_STATUS_POLLING), drained and swapped; a pool whose
every member is ERROR brakes instead of recreating the fleet. Two engines
run, as in a deployment: either may follow a pool or own the policy.
"""

import time

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import load_balancing as lb

# A second engine of the local deployment, fakecloud's timeline and
# Octavia's simulated member status.
pytestmark = pytest.mark.fakecloud


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    with engines.peer(demo, tmp_path_factory, 'lb-peer') as engine:
        yield engine


@pytest.fixture(scope='module')
def octavia(demo):
    return lb.octavia(demo)


def test_members_follow_the_group_and_go_with_the_stack(
        demo, octavia, admin_nova, stacks):
    stack = stacks('lb-follow', 'lb_group.yaml', 'capacity=2')
    name = stack['stack_name']
    lb_id, pool_id = lb.lb_ids(demo, name)
    found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                             pool_id, 2), 'two members')
    assert all(m['name'].startswith('web/') for m in found.values())
    attribute = demo.json('stack', 'resource', 'show', name, 'lb', '-c',
                          'attributes')['attributes']
    assert attribute['provisioning_status'] == 'ACTIVE'

    # An operator weights one member by hand: kept through the changes.
    kept = sorted(found)[0]
    octavia.member_set(pool_id, found[kept]['id'],
                       json={'member': {'weight': 5}})
    lb.wait_active(octavia, lb_id)

    lb.signal_scaling(demo, stack, 'scale_out')
    found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                             pool_id, 4),
                          'four members after the scale-out', timeout=60)
    assert found[kept]['weight'] == 5
    assert {m['weight'] for a, m in found.items() if a != kept} == {1}

    before = lb.servers(demo, name)
    lb.signal_scaling(demo, stack, 'scale_in')
    found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                             pool_id, 2),
                          'two members after the scale-in', timeout=60)
    # The members that went are those of the servers Heat deleted.
    after = lb.servers(demo, name)
    assert set(after) < set(before)
    assert set(found) == set(lb.addresses(admin_nova, after).values())

    demo.run('stack', 'update', '--wait', '--existing', '--parameter',
             'capacity=3', name)
    demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                     pool_id, 3), 'three members after resize',
                  timeout=60)

    demo.delete_stack(name)
    demo.wait_for(lambda: not demo.run('stack', 'show', name,
                                       check=False).returncode == 0,
                  'the stack deleted', timeout=120)
    assert lb.gone(octavia, lb_id)


def test_departing_members_leave_the_pool_before_nova_deletes_them(
        demo, admin, octavia, admin_nova, stacks):
    stack = stacks('lb-depart', 'lb_departure.yaml', 'capacity=4')
    name = stack['stack_name']
    _lb_id, pool_id = lb.lb_ids(demo, name)
    demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                     pool_id, 4), 'four members')
    before = lb.addresses(admin_nova, lb.servers(demo, name))
    with lb.Watch(octavia, pool_id) as watch:
        lb.signal_scaling(demo, stack, 'scale_in')
        found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova,
                                                 name, pool_id, 2),
                              'two members after the scale-in', timeout=90)
    gone = set(before) - set(lb.servers(demo, name))
    assert len(gone) == 2 and set(found) == {
        a for s, a in before.items() if s not in gone}
    for server_id in gone:
        address = before[server_id]
        left = watch.first(lambda w: w and address not in w)
        deleted = [e['time'] for e in h.timeline(admin, server_id)
                   if e['event'] == 'action:delete']
        assert left is not None and deleted, (watch.seen, deleted)
        # Out of the pool (as Octavia lists it) before Nova was asked.
        assert left < deleted[0], (server_id, left, deleted[0])

    # Down to the minimum size (1): one member goes, not two; at the
    # minimum, a scale-in deletes nothing and the pool keeps its member.
    lb.signal_scaling(demo, stack, 'scale_in')
    last = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                            pool_id, 1),
                         'one member at the minimum size', timeout=90)
    lb.signal_scaling(demo, stack, 'scale_in')
    time.sleep(6)
    assert lb.follows(demo, octavia, admin_nova, name, pool_id, 1) == last


def test_reused_load_balancer_and_pool_are_left_as_found(
        demo, octavia, admin_nova, stacks):
    subnet = demo.json('subnet', 'show', 'private-subnet')['id']
    made = octavia.load_balancer_create(json={'loadbalancer': {
        'name': 'shared-lb', 'vip_subnet_id': subnet}})['loadbalancer']
    try:
        lb.wait_active(octavia, made['id'])
        listener = octavia.listener_create(json={'listener': {
            'loadbalancer_id': made['id'], 'protocol': 'HTTP',
            'protocol_port': 80}})['listener']
        lb.wait_active(octavia, made['id'])
        pool = octavia.pool_create(json={'pool': {
            'listener_id': listener['id'], 'protocol': 'HTTP',
            'lb_algorithm': 'ROUND_ROBIN'}})['pool']
        lb.wait_active(octavia, made['id'])
        theirs = octavia.member_create(pool['id'], json={'member': {
            'address': '10.0.0.250', 'protocol_port': 8080,
            'weight': 3}})['member']
        lb.wait_active(octavia, made['id'])

        stack = stacks('lb-reuse', 'lb_reuse.yaml',
                       'loadbalancer=%s' % made['id'],
                       'pool=%s' % pool['id'])
        name = stack['stack_name']
        servers = lb.servers(demo, name)
        found = lb.members(octavia, pool['id'])
        assert set(found) == set(
            lb.addresses(admin_nova, servers).values()) | {'10.0.0.250'}
        assert found['10.0.0.250']['weight'] == 3

        demo.delete_stack(name)
        demo.wait_for(lambda: demo.run('stack', 'show', name,
                                       check=False).returncode != 0,
                      'the stack deleted', timeout=120)
        lb.wait_active(octavia, made['id'])
        found = lb.members(octavia, pool['id'])
        assert list(found) == ['10.0.0.250']
        assert found['10.0.0.250']['id'] == theirs['id']
        assert octavia.pool_show(pool['id'])['id'] == pool['id']
    finally:
        octavia.load_balancer_delete(made['id'], cascade=True)


def test_delete_after_the_load_balancer_went_out_of_band(demo, octavia,
                                                         stacks):
    stack = stacks('lb-gone', 'lb_group.yaml', 'capacity=1')
    name = stack['stack_name']
    lb_id, _pool = lb.lb_ids(demo, name)
    octavia.load_balancer_delete(lb_id, cascade=True)
    demo.wait_for(lambda: lb.gone(octavia, lb_id), 'the load balancer gone',
                  timeout=60)
    demo.run('stack', 'delete', '--yes', '--wait', name)
    assert demo.run('stack', 'show', name, check=False).returncode != 0


def test_member_in_error_is_drained_then_swapped(demo, admin, octavia,
                                                 admin_nova, stacks):
    stack = stacks('lb-heal', 'lb_group.yaml', 'capacity=2',
                   'recovery_mode=HEAL')
    name = stack['stack_name']
    _lb_id, pool_id = lb.lb_ids(demo, name)
    found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                             pool_id, 2), 'two members')
    victim = sorted(found)[0]
    servers = {a: s for s, a in lb.addresses(
        admin_nova, lb.servers(demo, name)).items()}
    old_server = servers[victim]
    with lb.Watch(octavia, pool_id) as watch:
        lb.set_status(found[victim]['id'], 'ERROR')
        found = demo.wait_for(
            lambda: (lambda f: f if f and victim not in f else None)(
                lb.follows(demo, octavia, admin_nova, name, pool_id, 2)),
            'the member swapped for a new server', timeout=150)
    # Detected from Octavia, recreated, and the pool kept its size.
    events = h.events(demo, stack)
    detected = [e for e in events if e['server_id'] == old_server and
                e['new_state'] == 'UNHEALTHY']
    assert 'Octavia member' in detected[-1]['reason'], detected
    now = lb.servers(demo, name)
    assert old_server not in now
    assert len(found) == 2
    # Drained first: weight 0 in Octavia before the new server existed.
    drained_at = watch.first(lambda w: w.get(victim) == 0)
    assert drained_at is not None, watch.seen
    new = set(now) - set(servers.values())
    created = [e for e in h.timeline(admin, next(iter(new)))
               if e['event'] == 'created']
    assert created, 'no new server in fakecloud'
    assert drained_at < created[0]['time']
    assert [e['new_state'] for e in events
            if e['server_id'] == old_server and
            e['new_state'] == 'DRAINED'] == ['DRAINED']


def test_every_member_in_error_brakes(demo, octavia, admin_nova, stacks):
    stack = stacks('lb-blind', 'lb_group.yaml', 'capacity=3',
                   'recovery_mode=HEAL')
    name = stack['stack_name']
    _lb_id, pool_id = lb.lb_ids(demo, name)
    found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                             pool_id, 3), 'three members')
    servers = set(lb.servers(demo, name))
    # All in one heartbeat, as an amphora that lost its network reports
    # them: one after the other, the first would be a failure of its own.
    lb.set_statuses([m['id'] for m in found.values()], 'ERROR')
    braked = demo.wait_for(lambda: h.policy(demo, stack).get('braked'),
                           'the policy braked', timeout=30)
    assert 'every member of pool %s is ERROR' % pool_id in braked, braked
    time.sleep(15)
    assert set(lb.servers(demo, name)) == servers
    assert not h.started(h.events(demo, stack))
    lb.set_statuses([m['id'] for m in found.values()], 'ONLINE')
    demo.wait_for(lambda: not h.policy(demo, stack).get('braked'),
                  'the brake released', timeout=60)
    assert not h.started(h.events(demo, stack))


def test_launch_before_terminate_keeps_the_pool_full(demo, octavia,
                                                     admin_nova, stacks):
    early = '[{"name": "RECREATE", "params": {"launch_before_terminate": ' \
        'true}}]'
    stack = stacks('lb-early', 'lb_group.yaml', 'capacity=2',
                   'recovery_mode=HEAL', 'actions=%s' % early)
    name = stack['stack_name']
    _lb_id, pool_id = lb.lb_ids(demo, name)
    found = demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                             pool_id, 2), 'two members')
    victim = sorted(found)[0]
    with lb.Watch(octavia, pool_id) as watch:
        lb.set_status(found[victim]['id'], 'ERROR')
        demo.wait_for(
            lambda: (lambda f: f if f and victim not in f else None)(
                lb.follows(demo, octavia, admin_nova, name, pool_id, 2)),
            'the member swapped for a new server', timeout=150)
    assert watch.seen
    # Never drained, never fewer than two members.
    assert all(w.get(victim, 1) != 0 for _t, w in watch.seen), watch.seen
    assert min(len(w) for _t, w in watch.seen) >= 2, watch.seen
    assert not [e for e in h.events(demo, stack)
                if e['new_state'] == 'DRAINED']
