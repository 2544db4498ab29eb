"""Compute hosts failing under real Nova: a nova-compute killed, a host lost.

While a host's nova-compute does not report, Nova's word on its servers
is stale, and once it is started again its own restart handling
(``_init_instance``) finishes what it was doing: heat-health waits for it
rather than act twice. A host the operator fences (``openstack compute
service set --down``) has lost its servers: they are replaced elsewhere,
the dead host's servers deleted (Nova does it at once) rather than
stopped. Two engines share the policies.
"""

import calendar
import time

import pytest

from tests.functional import computes
from tests.functional import engines
from tests.functional import healing as h

pytestmark = [pytest.mark.real_nova, pytest.mark.guest_operation_faults]

HOST = 'OS-EXT-SRV-ATTR:host'
POLLING = [{'type': 'NODE_STATUS_POLLING'}]
WAITS = 'verification waits: nova-compute on host'


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    with engines.peer(demo, tmp_path_factory, 'hosts-peer') as engine:
        yield engine


@pytest.fixture
def computes_back(admin):
    """Every compute up and reporting after the test, as before it."""
    yield
    for host in computes.hosts():
        if computes.service(admin, host).get('forced_down'):
            computes.force_down(admin, host, False)
    computes.start()
    for host in computes.hosts():
        computes.wait_state(admin, host, 'up', timeout=120)


def _reasons(demo, stack, server_id=None):
    return [e['reason'] or '' for e in h.events(demo, stack)
            if server_id is None or e['server_id'] == server_id]


def test_nova_compute_killed_mid_reboot_gets_one_recovery(
        demo, admin, stacks, admin_nova, computes_back):
    """No action while Nova's own restart handling may still run.

    heat-health's hard reboot is under way in nova-compute when it is
    killed: that one recovery is verified across the restart, with no next
    rung while the host does not report. Nova's restart handling retries
    the reboot; should the guest still not run once the host reports
    again, the next attempt comes only then.
    """
    stack, targets = h.heal_stack(stacks, demo, 'real-killed', count=2,
                                  modes=POLLING)
    victim = targets['workers/0']['server_id']
    host = getattr(admin_nova.servers.get(victim), HOST)
    admin.guest_fault(victim, 'hang_next', operation='reboot', seconds=3600)
    admin.guest_fault(victim, 'pause')
    # heat-health's hard reboot reaches nova-compute and hangs there.
    admin.wait_for(lambda: getattr(admin_nova.servers.get(victim),
                                   'OS-EXT-STS:task_state') ==
                   'reboot_started_hard', 'the reboot under way')
    computes.kill(host)
    killed = time.time()
    computes.wait_state(admin, host, 'down')
    # The action's deadline passes while the host does not report: no
    # next rung, only a wait.
    demo.wait_for(lambda: any(WAITS in r for r in _reasons(
        demo, stack, victim)), 'the verification to wait', timeout=60)
    computes.start()
    computes.wait_state(admin, host, 'up', timeout=60)
    back = time.time()
    healed = demo.wait_for(lambda: h.all_healthy(demo, stack, 2),
                           'the server healed', timeout=120)
    assert healed['workers/0']['server_id'] == victim
    started = h.started(h.all_events(demo, stack), victim)
    assert started[0]['reason'].startswith('REBOOT HARD'), started
    assert _epoch(started[0]['time']) < killed
    # Nothing started, nothing escalated, while the host was silent
    # (event times are whole seconds).
    for event in h.all_events(demo, stack):
        if event['server_id'] != victim or _epoch(
                event['time']) + 1 < killed:
            continue
        if event in started and _epoch(event['time']) < killed:
            # The one recovery, started (as asserted) before the kill, in
            # the same second.
            continue
        if (event in started or 'escalated' in (event['reason'] or '')):
            assert _epoch(event['time']) + 1 >= back, event
    server = admin_nova.servers.get(victim).to_dict()
    assert (server['status'], server['OS-EXT-STS:power_state']) == (
        'ACTIVE', 1)


def _epoch(stamp):
    return calendar.timegm(time.strptime(stamp[:19], '%Y-%m-%dT%H:%M:%S'))


def test_servers_of_a_host_forced_down_are_replaced_elsewhere(
        demo, admin, stacks, admin_nova, computes_back):
    """The operator fences a dead host: its servers are recreated."""
    recovery = {'max_concurrent': 4, 'max_unhealthy_fraction': 0.9,
                'fencing': ['COMPUTE']}
    stack, targets = h.heal_stack(stacks, demo, 'real-host', count=4,
                                  modes=POLLING, recovery=recovery)
    placed = {path: getattr(admin_nova.servers.get(t['server_id']), HOST)
              for path, t in targets.items()}
    host = placed['workers/0']
    lost = {path for path, on in placed.items() if on == host}
    computes.kill(host)
    computes.lose_guests(host)
    computes.force_down(admin, host)

    def replaced():
        found = h.all_healthy(demo, stack, 4)
        if found and all(found[p]['server_id'] != targets[p]['server_id']
                         for p in lost):
            return found
        return None
    healed = demo.wait_for(replaced, 'the lost servers replaced',
                           timeout=180)
    # The group keeps its size; the servers elsewhere are the same.
    assert sorted(healed) == sorted(targets)
    for path in set(targets) - lost:
        assert healed[path]['server_id'] == targets[path]['server_id']
    for path in lost:
        new = admin_nova.servers.get(healed[path]['server_id']).to_dict()
        assert new[HOST] != host
        assert (new['status'], new['OS-EXT-STS:power_state']) == (
            'ACTIVE', 1)
    reasons = _reasons(demo, stack)
    assert [r for r in reasons if 'is down (its nova-compute is forced '
            'down)' in r], reasons
    # Fenced with its host: no stop sent to it, the server deleted (at
    # once: its compute is down), so Heat gives the new one new ports.
    assert not [r for r in reasons if r.startswith('fencing: stopping')]
    deleted = [r for r in reasons if r.startswith('fencing: deleting')]
    assert len(deleted) == len(lost), reasons
    replacements = [r for r in reasons if 'replaced by' in r]
    assert len(replacements) == len(lost), replacements
