"""An engine killed between the marks and the update: one update after all.

Two engines of the test's own share the policy (the deployment's is
stopped meanwhile), each waiting up to 30 s for the RECREATEs of a stack
still on their way to their mark. Three servers of a group are lost at
once; Nova holds the third one's fencing stop for 12 s, so the other two
are marked and wait for it. The owner is killed then, well before the
third stops; the other engine takes the policy over (within the group's
membership timeout, 10 s), finishes the third and asks for one update that
replaces all three, before the first marks have waited their 30 s.
"""

import pytest

from tests.functional import engines
from tests.functional import healing as h

# fakecloud's faults and timeline; engines of the local deployment.
pytestmark = pytest.mark.fakecloud

RECOVERY = {'actions': [{'name': 'RECREATE'}], 'max_concurrent': 3,
            'fencing': ['COMPUTE']}
GATHER = '[heat_health]\nreplacement_gather_seconds = 30\n'


def _reasons(demo, stack, server_id, prefix):
    return [e for e in h.all_events(demo, stack)
            if e['server_id'] == server_id and
            (e['reason'] or '').startswith(prefix)]


def test_an_engine_killed_between_marks_and_update_updates_once(
        demo, admin, stacks, tmp_path):
    with engines.deployment_engine_stopped():
        pair = [engines.Engine(tmp_path, 'gather-%d' % i, GATHER).start(demo)
                for i in range(2)]
        try:
            stack, targets = h.heal_stack(stacks, demo, 'batch-kill',
                                          count=7, recovery=RECOVERY)
            lost = [targets['workers/%d' % i]['server_id'] for i in range(3)]
            since = h.timeline(admin)[-1]['seq']
            assert admin.inject_fault(lost[2], 'slow_actions', delay=12,
                                      duration=60).status_code == 200
            for server_id in lost:
                assert admin.inject_fault(
                    server_id, 'crash_to_error').status_code == 200
            demo.wait_for(
                lambda: all(_reasons(demo, stack, s, 'marked CHECK_FAILED')
                            for s in lost[:2]),
                'two servers marked, waiting for the third', timeout=60,
                interval=0.2)
            owner = h.policy(demo, stack)['engine_id']
            assert not any(_reasons(demo, stack, s, 'stack update')
                           for s in lost)
            [killed] = [e for e in pair if e.engine_id == owner]
            killed.kill()
            group = h.holder(demo, stack, 'workers/0')
            healed = demo.wait_for(
                lambda: (lambda f: f if f and not set(lost) & {
                    t['server_id'] for t in f.values()} and
                    h.stack_status(demo, group) == 'UPDATE_COMPLETE'
                    else None)(h.all_healthy(demo, stack, 7)),
                'the three replaced after the takeover', timeout=180)
        finally:
            for engine in pair:
                engine.kill()
    assert h.policy(demo, stack)['engine_id'] != owner
    # One update of the group's stack, asked for once for each server.
    updates = [e for e in demo.events(group['id'])
               if e['resource_name'] == group['stack_name'] and
               e['resource_status'] == 'UPDATE_IN_PROGRESS']
    assert len(updates) == 1, updates
    for server_id in lost:
        asked = _reasons(demo, stack, server_id, 'stack update (existing)')
        assert len(asked) == 1, asked
        assert 'with 2 others' in asked[0]['reason'], asked
    # Three new servers, none made twice.
    created = [e['server_id'] for e in h.timeline(admin)
               if e['seq'] > since and e['event'] == 'created']
    now = {t['server_id'] for t in healed.values()}
    assert sorted(created) == sorted(now - {
        t['server_id'] for t in targets.values()})
    assert len(created) == 3
