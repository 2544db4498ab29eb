"""RECREATE behind a load balancer, again and again: the swap is exact.

Servers of an AutoScalingGroup of template members (a server and its
departure each) behind an OS::Heat::LoadBalancer are lost two at a time;
each is drained, replaced through an update of its member's own stack, and
its member swapped for the new server's. Octavia's pool is read every
0.2 s throughout: a drained member never has weight again. Two engines
run, as in a deployment.
"""

import json

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import load_balancing as lb

# fakecloud's faults; a second engine of the local deployment.
pytestmark = pytest.mark.fakecloud

RECOVERY = {'actions': [{'name': 'RECREATE'}], 'max_concurrent': 2}
SERVERS = 6
ROUNDS = 10      # two servers each: twenty RECREATEs


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    with engines.peer(demo, tmp_path_factory, 'swap-peer') as engine:
        yield engine


def _regained(seen, address):
    """Reads at which a drained member at ``address`` had weight again."""
    drained, found = False, []
    for when, weights in seen:
        weight = weights.get(address)
        if weight == 0:
            drained = True
        elif drained and weight:
            found.append((when, weight))
    return found


def test_twenty_recreates_never_give_a_drained_member_weight(
        demo, admin, admin_nova, stacks):
    octavia = lb.octavia(demo)
    stack = stacks('swap', 'lb_recreate.yaml', 'count=%d' % SERVERS,
                   'recovery=%s' % json.dumps(RECOVERY))
    _lb_id, pool_id = lb.lb_ids(demo, stack['stack_name'])
    targets = demo.wait_for(
        lambda: lb.ready(demo, admin_nova, octavia, stack, pool_id, SERVERS),
        'every server HEALTHY and in the pool', timeout=180)
    replaced = []
    for number in range(ROUNDS):
        paths = sorted(targets)[2 * number % SERVERS:][:2]
        lost = {targets[p]['server_id']: targets[p]['address']
                for p in paths}
        with lb.Watch(octavia, pool_id) as watch:
            for server_id in lost:
                assert admin.inject_fault(
                    server_id, 'crash_to_error').status_code == 200
            targets = demo.wait_for(
                lambda: (lambda t: t if t and not set(lost) & {
                    x['server_id'] for x in t.values()} else None)(
                    lb.ready(demo, admin_nova, octavia, stack, pool_id,
                             SERVERS)),
                'round %d: both servers replaced and swapped in the pool'
                % number, timeout=180)
        for old, address in lost.items():
            assert any(w.get(address) == 0 for _t, w in watch.seen), (
                'round %d: %s never read drained: %s' % (
                    number, address, watch.seen))
            assert _regained(watch.seen, address) == [], (
                'round %d: the drained member of %s had weight again'
                % (number, old))
        replaced += list(lost)
    assert len(replaced) == 2 * ROUNDS
    # Every step of every incident names the server's place.
    events = [e for e in h.all_events(demo, stack)
              if e['server_id'] in replaced]
    assert {e['server_id'] for e in events} == set(replaced)
    assert [e for e in events if not e['path']] == []
    # Each replaced once: one "update requested" per server.
    requested = [e['server_id'] for e in events if (e['reason'] or '')
                 .startswith('stack update (existing) requested')]
    assert sorted(requested) == sorted(replaced)
