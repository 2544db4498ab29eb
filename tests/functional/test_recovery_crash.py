"""An engine killed in the middle of a RECREATE: exactly one replacement.

The owner has marked the server's resource CHECK_FAILED and asked
heat-engine for the stack update (heat-engine is paused, so the request
waits in its queue) when it is killed with SIGKILL. The request is still
delivered, and the engine that takes the policy over (or the restarted
one) finds the recovery stored at that stage: it waits for the update
instead of starting another, and verifies the one new server.

On real Nova: the guest crashes behind Nova's back.
"""

import datetime
import os
import signal

import pytest

from tests.functional import engines
from tests.functional import healing as h
from tests.functional import server_faults as faults

pytestmark = pytest.mark.real_nova


def _heat_engine_group():
    return os.getpgid(engines.deployment_pid('heat-engine'))


def _created_since(nova, since):
    """The project's servers Nova created since then, deleted ones too."""
    stamp = since.strftime('%Y-%m-%dT%H:%M:%SZ')
    # changes-since lists the deleted servers as well.
    return [s.id for s in nova.servers.list(
        search_opts={'changes-since': stamp}) if s.created >= stamp]


@pytest.fixture
def peer(demo, tmp_path):
    if not h.local_deployment():
        pytest.skip("stops the local deployment's heat-engine and kills "
                    "its engines (tools/localcloud)")
    engine = engines.Engine(tmp_path, 'crash-peer').start(demo)
    yield engine
    engine.kill()


def test_kill_between_marking_and_update_replaces_once(
        demo, admin, stacks, peer, demo_nova):
    stack, targets = h.heal_stack(stacks, demo, 'heal-crash', count=2,
                                  recovery=h.RECREATE_ONLY)
    victim = targets['workers/0']['server_id']
    owner = h.policy(demo, stack)['engine_id']
    since = datetime.datetime.utcnow()
    heat_engine = _heat_engine_group()
    os.killpg(heat_engine, signal.SIGSTOP)
    try:
        faults.break_server(admin, victim, 'crash')
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
    assert _created_since(demo_nova, since) == [
        healed['workers/0']['server_id']]
    assert healed['workers/1']['server_id'] == targets['workers/1'][
        'server_id']
