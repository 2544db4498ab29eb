"""Acting safely across engines, attempts and Heat's marks.

Two engines run, as in a deployment: the deployment's and the test's own,
either of which may own a policy. A recovery whose engine dies with its
Nova action in flight is finished by the other, not repeated; members
drained for a recovery get their weight back however many attempts it
took, also when a replacement keeps the old server's address; a server
given up on is left unmarked, so that no later update replaces it once
it is healthy again.
"""

import contextlib
import os
import signal

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import load_balancing as lb

# fakecloud's faults and timeline; engines of the local deployment.
pytestmark = pytest.mark.fakecloud

SOFT_REBOOT = {'name': 'REBOOT', 'params': {'type': 'SOFT'}}
# What an operator set by hand on the member before the incident.
WEIGHT = 3


@pytest.fixture
def peer(demo, tmp_path):
    """The second engine: either may own the policy."""
    engine = engines.Engine(tmp_path, 'safe-peer').start(demo)
    yield engine
    engine.kill()


@pytest.fixture(scope='module')
def octavia(demo):
    return lb.octavia(demo)


def _lb_stack(stacks, demo, octavia, admin_nova, prefix, recovery):
    """(stack, targets, pool id) once both servers are members."""
    stack, targets = h.heal_stack(stacks, demo, prefix, count=2,
                                  template='lb_heal.yaml', modes=h.POLL_URL,
                                  recovery=recovery)
    name = stack['stack_name']
    _lb_id, pool_id = lb.lb_ids(demo, name)
    demo.wait_for(lambda: lb.follows(demo, octavia, admin_nova, name,
                                     pool_id, 2), 'two members')
    return stack, targets, pool_id


def _reboots(admin, server_id, since):
    return [e for e in h.timeline(admin, server_id)
            if e['seq'] > since and e['event'] == 'action:reboot']


@contextlib.contextmanager
def _killed(owner, peer):
    """kill -9 of the policy's owner; the deployment's is started again."""
    if owner == peer.engine_id:
        peer.kill()
        yield
        return
    assert owner == engines.deployment_engine_id()
    os.killpg(engines.deployment_engine_pid(), signal.SIGKILL)
    try:
        yield
    finally:
        engines.localcloud('up')


def _healed_by_another(demo, stack, path, owner):
    """The target at ``path`` once HEALTHY under another owner, or None."""
    policy = h.policy(demo, stack)
    target = {t['path']: t for t in policy['targets']}[path]
    if policy['engine_id'] not in (None, owner) and \
            target['state'] == 'HEALTHY':
        return target
    return None


def test_reboot_in_flight_when_its_engine_dies_is_issued_once(
        demo, admin, admin_nova, octavia, stacks, peer):
    stack, targets, pool_id = _lb_stack(
        stacks, demo, octavia, admin_nova, 'safe-handover',
        {'actions': [SOFT_REBOOT]})
    path = sorted(targets)[0]
    victim = targets[path]['server_id']
    address = lb.addresses(admin_nova, [victim])[victim]
    found = lb.members(octavia, pool_id)
    octavia.member_set(pool_id, found[address]['id'],
                       json={'member': {'weight': WEIGHT}})
    before = demo.wait_for(
        lambda: (lambda w: w if w[address] == WEIGHT else None)(
            lb.weights(octavia, pool_id)), 'the weight set by hand')
    since = h.timeline(admin)[-1]['seq']
    # Nova holds the reboot before accepting it: the owner dies after the
    # drain, with the request in flight, which Nova then carries out.
    assert admin.inject_fault(victim, 'slow_actions', delay=5,
                              duration=60).status_code == 200
    assert admin.inject_fault(victim, 'hang').status_code == 200
    demo.wait_for(lambda: admin.fakecloud_server(victim)['held_requests'],
                  'the reboot asked for', timeout=60, interval=0.1)
    owner = h.policy(demo, stack)['engine_id']
    with _killed(owner, peer):
        assert lb.weights(octavia, pool_id)[address] == 0
        assert not _reboots(admin, victim, since)
        healed = demo.wait_for(
            lambda: _healed_by_another(demo, stack, path, owner),
            'the other engine to take the policy over and heal %s' % path,
            timeout=120)
        weights = h.last_seen(lambda: lb.weights(octavia, pool_id),
                              lambda w: w == before)
    assert healed['server_id'] == victim
    reboots = _reboots(admin, victim, since)
    assert (len(reboots), weights) == (1, before), (
        'reboots of %s (seq, type): %s; weights %s, before %s' % (
            victim, [(e['seq'], e['type']) for e in reboots], weights,
            before))


def test_reboot_then_recreate_leave_the_weights_the_template_set(
        demo, admin, admin_nova, octavia, stacks, peer):
    ladder = {'actions': [SOFT_REBOOT, {'name': 'RECREATE'}],
              'backoff_initial': 1, 'backoff_max': 2}
    stack, targets, pool_id = _lb_stack(stacks, demo, octavia, admin_nova,
                                        'safe-ladder', ladder)
    before = lb.weights(octavia, pool_id)
    assert set(before.values()) == {1}
    path = sorted(targets)[0]
    victim = targets[path]['server_id']
    # Broken for good: the reboot, drained first, does not heal; a new
    # server does, on the old one's port (lb_member_port.yaml), so its
    # member is the drained one.
    assert admin.inject_fault(victim, 'broken').status_code == 200
    healed = h.wait_replaced(demo, stack, path, victim, 2, timeout=150)
    # The new server may be HEALTHY before Heat deleted the old one.
    member = h.holder(demo, stack, path)
    demo.wait_for(lambda: h.stack_status(demo, member) == 'UPDATE_COMPLETE',
                  "Heat's update done", timeout=60)
    actions = [e['event'] for e in h.timeline(admin, victim)
               if e['event'].startswith('action:')]
    assert actions == ['action:reboot', 'action:delete'], actions
    assert [e for e in h.events(demo, stack) if e['server_id'] == victim
            and e['new_state'] == 'DRAINED']
    servers = [t['server_id'] for t in healed.values()]
    addresses = demo.wait_for(
        lambda: (lambda a: a if len(a) == 2 else None)(
            lb.addresses(admin_nova, servers)), 'both servers plugged in')
    assert set(addresses.values()) == set(before)
    weights = h.last_seen(lambda: lb.weights(octavia, pool_id),
                          lambda w: w == before, timeout=60)
    assert weights == before


def test_gave_up_leaves_no_mark_and_keeps_its_server_once_well(
        demo, admin, stacks, peer):
    recovery = {'actions': [SOFT_REBOOT], 'max_attempts': 1}
    stack, targets = h.heal_stack(stacks, demo, 'safe-gave-up', count=2,
                                  modes=h.POLL_URL, recovery=recovery,
                                  verify_timeout=15)
    name = stack['stack_name']
    victim = targets['workers/0']['server_id']
    group = demo.resource(name, 'workers')['physical_resource_id']

    def member():
        return demo.json('stack', 'resource', 'show', group, '0')

    assert admin.inject_fault(victim, 'broken').status_code == 200
    demo.wait_for(lambda: h.targets(demo, stack)['workers/0']['state'] ==
                  'GAVE_UP', 'GAVE_UP', timeout=90)
    # Not marked: no stack update, a sibling's included, replaces it.
    shown = h.last_seen(member,
                        lambda m: m['resource_status'] == 'CHECK_FAILED',
                        timeout=10)
    assert shown['resource_status'] != 'CHECK_FAILED', shown
    # Well again by itself, not through heat-health.
    assert admin.inject_fault(victim, 'reset').status_code == 200
    demo.wait_for(lambda: h.targets(demo, stack)['workers/0']['state'] ==
                  'HEALTHY', 'the server HEALTHY again', timeout=60)
    shown = h.last_seen(member,
                        lambda m: m['resource_status'] != 'CHECK_FAILED')
    assert shown['resource_status'] != 'CHECK_FAILED', (
        shown['resource_status_reason'])
    # An update about something else leaves the healthy server alone.
    demo.run('stack', 'update', '--wait', '--existing', '--parameter',
             'setting=two', name)
    assert member()['physical_resource_id'] == victim
