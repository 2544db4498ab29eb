"""RECREATE with replace: MEMBER: a group member is replaced whole.

An AutoScalingGroup of provider-template members (a port, a server on it,
a volume attached to it) behind an OS::Heat::LoadBalancer; one server
fails. Its member is marked, not the server: Heat replaces the member's
nested stack, so the member comes back with a new server, a new port (a
new address) and a new volume; the group keeps its size, with or without
a desired capacity; the pool's member is swapped for the new address;
the other members are untouched; and, with two engines sharing the
policy, it is replaced exactly once: one mark, one update of the group's
stack, one new member, one new server, one recovery attempt.
"""

import json
import time

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import load_balancing as lb

# fakecloud's faults, volumes and timeline; a second engine of the local
# deployment.
pytestmark = pytest.mark.fakecloud

COUNT = 3
RECOVERY = {'actions': [{'name': 'RECREATE'}], 'replace': 'MEMBER'}
PARTS = ('port', 'server', 'volume', 'attachment')


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    with engines.peer(demo, tmp_path_factory, 'member-peer') as engine:
        yield engine


def _parts(demo, stack, path):
    """(member stack id, {resource name: physical id}) of a member."""
    member = h.holder(demo, stack, path)
    return member['id'], {
        r['resource_name']: r['physical_resource_id']
        for r in demo.json('stack', 'resource', 'list', member['id'])}


def _volume(demo, volume_id):
    """The volume as Cinder shows it to the stack's owner, or None."""
    resp = demo.session.get('%s/volumes/%s' % (
        demo.endpoint('volumev3'), volume_id), raise_exc=False)
    if resp.status_code == 404:
        return None
    assert resp.status_code == 200, resp.text
    return resp.json()['volume']


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


def _after_mark(events, member):
    """The group stack's events from the member's CHECK_FAILED on."""
    marks = [i for i, e in enumerate(events)
             if e['resource_name'] == member and
             e['resource_status'] == 'CHECK_FAILED']
    assert len(marks) == 1, events
    return events[marks[0]:]


@pytest.mark.parametrize('sized', [True, False],
                         ids=['desired_capacity', 'sized_by_members'])
def test_a_failed_server_is_replaced_with_its_whole_member(
        demo, admin, admin_nova, stacks, sized):
    octavia = lb.octavia(demo)
    stack = stacks('member', 'member_replace.yaml' if sized else
                   'member_replace_free.yaml', 'count=%d' % COUNT,
                   'recovery=%s' % json.dumps(RECOVERY))
    if not sized:
        # Without a desired capacity the group starts at min_size: a
        # signal takes it to its size, which it then keeps only because
        # recovery updates its own nested stack.
        lb.signal_scaling(demo, stack, 'grow')
    _lb_id, pool_id = lb.lb_ids(demo, stack['stack_name'])
    targets = demo.wait_for(
        lambda: lb.ready(demo, admin_nova, octavia, stack, pool_id, COUNT),
        'every server HEALTHY and in the pool', timeout=240)
    before = {path: _parts(demo, stack, path) for path in targets}
    lost = sorted(targets)[1]
    member = lost.split('/')[1]
    old_stack, old = before[lost]
    old_address = targets[lost]['address']
    group = h.holder(demo, stack, 'web/%s' % member)
    since = h.timeline(admin)[-1]['seq']
    started = time.time()

    with lb.Watch(octavia, pool_id) as watch:
        assert admin.inject_fault(old['server'],
                                  'crash_to_error').status_code == 200

        def replaced():
            found = lb.ready(demo, admin_nova, octavia, stack, pool_id, COUNT)
            if (not found or found[lost]['server_id'] == old['server'] or
                    h.stack_status(demo, group) != 'UPDATE_COMPLETE' or
                    _volume(demo, old['volume']) is not None):
                return None
            return found
        targets = demo.wait_for(replaced, 'the member replaced whole, the '
                                'old one deleted, the pool swapped',
                                timeout=240)
    healed = time.time() - started

    # A new member: a new stack, server, port, volume and attachment.
    new_stack, new = _parts(demo, stack, lost)
    assert new_stack != old_stack
    assert set(new) == set(PARTS)
    assert all(new[part] != old[part] for part in PARTS), (old, new)
    assert targets[lost]['server_id'] == new['server']
    volume = _volume(demo, new['volume'])
    assert volume['status'] == 'in-use'
    assert [a['server_id'] for a in volume['attachments']] == [
        new['server']]
    # The group's size kept; the other members untouched.
    assert sorted(targets) == sorted(before)
    members = demo.json('stack', 'resource', 'list', group['id'])
    assert len(members) == COUNT, members
    for path in before:
        if path != lost:
            assert _parts(demo, stack, path) == before[path], path
    # The pool's member swapped: the new address in, the old one out,
    # drained before the replacement and never given weight again.
    new_address = targets[lost]['address']
    assert new_address != old_address
    weights = lb.weights(octavia, pool_id)
    assert old_address not in weights and weights[new_address] > 0
    assert any(w.get(old_address) == 0 for _t, w in watch.seen), watch.seen
    assert _regained(watch.seen, old_address) == []
    # Exactly once, with two engines: one mark of the member, one update
    # of the group's stack (none of the root), one new member, one new
    # server, one attempt.
    events = _after_mark(demo.events(group['id']), member)
    updates = [e for e in events if e['resource_name'] ==
               group['stack_name'] and
               e['resource_status'] == 'UPDATE_IN_PROGRESS']
    assert len(updates) == 1, events
    created = [e for e in events if e['resource_name'] == member and
               e['resource_status'] == 'CREATE_COMPLETE']
    deleted = [e for e in events if e['resource_name'] == member and
               e['resource_status'] == 'DELETE_COMPLETE']
    assert (len(created), len(deleted)) == (1, 1), events
    root_updates = [e for e in demo.events(stack['id'])
                    if e['resource_name'] == stack['stack_name'] and
                    e['resource_status'].startswith('UPDATE_')]
    assert root_updates == []
    # Heat names a member's server after its stack, that after the
    # group's: "<group's>-<member's>-server-<id>".
    prefix = admin_nova.servers.get(new['server']).name.rsplit('-', 3)[0]
    new_servers = [e['server_id'] for e in h.timeline(admin)
                   if e['seq'] > since and e['event'] == 'created' and
                   (e['name'] or '').startswith(prefix + '-')]
    assert new_servers == [new['server']]
    timeline = [e for e in h.all_events(demo, stack)
                if e['path'] == lost and e['server_id'] in (
                    old['server'], new['server'])]
    assert len(h.started(timeline, old['server'])) == 1, timeline
    requested = [e for e in timeline if (e['reason'] or '').startswith(
        'stack update (existing) requested')]
    assert [e['reason'] for e in requested] == [
        'stack update (existing) requested to replace server %s with its '
        'member %s' % (old['server'], member)]
    assert targets[lost]['attempts'] == 1
    print('\n%s: replaced in %.0fs' % (
        'desired capacity' if sized else 'sized by its members', healed))
    for event in timeline:
        print('  %s -> %s: %s' % (event['old_state'], event['new_state'],
                                  event['reason']))
    for event in events:
        print('  %-14s %-20s %s' % (event['resource_name'][:14],
                                    event['resource_status'],
                                    event['resource_status_reason'][:60]))
