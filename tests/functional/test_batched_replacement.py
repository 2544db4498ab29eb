"""Many servers of one group lost at once: one stack update replaces them.

Two engines share the policies. The update is of the group's own nested
stack, which holds the servers: Heat's event list of that stack tells how
many updates ran (its UPDATE_IN_PROGRESS events), and the root's that it
was not updated at all; fakecloud's timeline, which servers were created.
"""

import concurrent.futures
import datetime

import pytest

from tests.functional import engines
from tests.functional import healing as h

# fakecloud's faults and timeline; a second engine of the local deployment.
pytestmark = pytest.mark.fakecloud

RECREATE = {'actions': [{'name': 'RECREATE'}], 'max_concurrent': 3}
# The status poll's interval where a test tells a join from a poll.
POLL_SECONDS = 20


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    with engines.peer(demo, tmp_path_factory, 'batched-peer') as engine:
        yield engine


def _updates(demo, stack):
    """Heat's events of the stack's own updates, oldest first.

    Heat's order is kept: event times have whole seconds, and one update
    ending and the next starting within a second tie on them.
    """
    name = stack['stack_name']
    return [e for e in demo.events(stack['id'])
            if e['resource_name'] == name and
            e['resource_status'].startswith('UPDATE_')]


def _time(event):
    return datetime.datetime.fromisoformat(event['event_time'].rstrip('Z'))


def _created(admin, since):
    return [e['server_id'] for e in h.timeline(admin)
            if e['seq'] > since and e['event'] == 'created']


def _wait_all_replaced(demo, stack, olds, count):
    group = h.holder(demo, stack, 'workers/0')

    def done():
        found = h.all_healthy(demo, stack, count)
        if not found or set(olds) & {t['server_id'] for t in found.values()}:
            return None
        if h.stack_status(demo, group) != 'UPDATE_COMPLETE':
            return None
        return found
    return demo.wait_for(done, 'every lost server replaced, the group\'s '
                         'stack UPDATE_COMPLETE', timeout=180)


def test_three_servers_lost_at_once_are_replaced_by_one_update(
        demo, admin, stacks):
    stack, targets = h.heal_stack(stacks, demo, 'batch-three', count=7,
                                  recovery=RECREATE)
    lost = [targets['workers/%d' % i]['server_id'] for i in range(3)]
    kept = {t['server_id'] for p, t in targets.items()
            if t['server_id'] not in lost}
    since = h.timeline(admin)[-1]['seq']
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(
            lambda s: admin.inject_fault(s, 'crash_to_error'), lost))
    assert [a.status_code for a in answers] == [200] * 3
    healed = _wait_all_replaced(demo, stack, lost, 7)
    now = {t['server_id'] for t in healed.values()}
    assert kept <= now
    # One update of ours, of the group's stack alone; three new servers,
    # none made twice.
    started = [e for e in _updates(demo, h.holder(demo, stack, 'workers/0'))
               if e['resource_status'] == 'UPDATE_IN_PROGRESS']
    assert len(started) == 1, started
    assert _updates(demo, stack) == []
    created = _created(admin, since)
    assert sorted(created) == sorted(now - kept), created
    requested = [e for e in h.events(demo, stack) if (e['reason'] or '')
                 .startswith('stack update (existing) requested')]
    assert sorted(e['server_id'] for e in requested) == sorted(lost)
    assert all('with 2 others' in e['reason'] for e in requested), requested


def test_a_failure_during_our_update_joins_the_next_at_once(
        demo, admin, stacks):
    # Polls far apart: a join that waited for one would come seconds late.
    stack, targets = h.heal_stack(stacks, demo, 'batch-join', count=5,
                                  recovery=RECREATE, interval=POLL_SECONDS)
    first = targets['workers/0']['server_id']
    second = targets['workers/1']['server_id']
    group = h.holder(demo, stack, 'workers/0')
    assert admin.inject_fault(first, 'crash_to_error').status_code == 200
    demo.wait_for(lambda: h.stack_status(demo, group) ==
                  'UPDATE_IN_PROGRESS', 'our first update running',
                  timeout=60, interval=0.2)
    assert admin.inject_fault(second, 'crash_to_error').status_code == 200
    _wait_all_replaced(demo, stack, [first, second], 5)
    updates = _updates(demo, group)
    assert [e['resource_status'] for e in updates] == [
        'UPDATE_IN_PROGRESS', 'UPDATE_COMPLETE',
        'UPDATE_IN_PROGRESS', 'UPDATE_COMPLETE'], updates
    # Drained and fenced while the first ran; marked and updated in the
    # seconds after it ended, not at the next poll.
    gap = (_time(updates[2]) - _time(updates[1])).total_seconds()
    assert gap < POLL_SECONDS / 2, updates
    requested = [e for e in h.events(demo, stack) if (e['reason'] or '')
                 .startswith('stack update (existing) requested')]
    assert sorted(e['server_id'] for e in requested) == sorted(
        [first, second])
