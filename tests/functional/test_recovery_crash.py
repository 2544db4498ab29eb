"""An engine killed in the middle of a RECREATE: exactly one replacement.

The owner has marked the server's resource CHECK_FAILED and asked
heat-engine for the stack update (heat-engine is paused, so the request
waits in its queue) when it is killed with SIGKILL. The request is still
delivered, and the engine that takes the policy over (or the restarted
one) finds the recovery stored at that stage: it waits for the update
instead of starting another, and verifies the one new server.
"""

import json
import os
import signal

import pytest

from tests.functional import engines
from tests.functional import healing as h

# The local deployment's heat-engine and engines; fakecloud's faults.
pytestmark = pytest.mark.fakecloud


def _heat_engine_group():
    return os.getpgid(engines.deployment_pid('heat-engine'))


@pytest.fixture
def peer(demo, tmp_path):
    engine = engines.Engine(tmp_path, 'crash-peer').start(demo)
    yield engine
    engine.kill()


def test_kill_between_marking_and_update_replaces_once(
        demo, admin, stacks, peer):
    stack, targets = h.heal_stack(stacks, demo, 'heal-crash', count=2,
                                  recovery=h.RECREATE_ONLY)
    victim = targets['workers/0']['server_id']
    owner = h.policy(demo, stack)['engine_id']
    since = h.timeline(admin)[-1]['seq']
    heat_engine = _heat_engine_group()
    os.killpg(heat_engine, signal.SIGSTOP)
    try:
        assert admin.inject_fault(victim, 'crash_to_error').status_code == \
            200
        demo.wait_for(
            lambda: (h.targets(demo, stack)['workers/0'].get(
                'recovery') or {}).get('stage') == 'updating',
            'the resource marked, the update asked for', timeout=60,
            interval=0.2)
        if owner == peer.engine_id:
            peer.kill()
        else:
            assert owner == engines.deployment_engine_id()
            os.killpg(engines.deployment_engine_pid(), signal.SIGKILL)
    finally:
        os.killpg(heat_engine, signal.SIGCONT)
    try:
        healed = h.wait_replaced(demo, stack, 'workers/0', victim, 2,
                                 timeout=180)
        new_owner = h.policy(demo, stack)['engine_id']
        assert new_owner != owner
    finally:
        if owner != peer.engine_id:
            engines.localcloud('up')
    created = [e for e in h.timeline(admin)
               if e['seq'] > since and e['event'] == 'created']
    assert [e['server_id'] for e in created] == [
        healed['workers/0']['server_id']], json.dumps(created)
    assert healed['workers/1']['server_id'] == targets['workers/1'][
        'server_id']
