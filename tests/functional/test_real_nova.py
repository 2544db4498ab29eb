"""Detection and healing on real Nova, with faults made in the hypervisor.

Each fault is made by the fault driver of the compute holding the server,
behind Nova's back, as a hypervisor or a guest makes it; Nova's own handling
then runs (its power state sync, its stop API), and heat-health sees only
what real Nova shows. Two engines share the policies.
"""

import json

import pytest
import requests

from tests.functional import engines
from tests.functional import healing as h

pytestmark = pytest.mark.real_nova

POWER_STATE = 'OS-EXT-STS:power_state'
RUNNING = 1
EVENTS = [{'type': 'LIFECYCLE_EVENTS'}]
POLLING = [{'type': 'NODE_STATUS_POLLING'}]


@pytest.fixture(scope='module', autouse=True)
def second_engine(demo, tmp_path_factory):
    with engines.peer(demo, tmp_path_factory, 'real-nova-peer') as engine:
        yield engine


def _detected(demo, stack, server_id):
    """The event that made the server UNHEALTHY (the first one)."""
    found = [e for e in h.events(demo, stack)
             if e['server_id'] == server_id and
             e['new_state'] == 'UNHEALTHY']
    return found[-1] if found else None


def _healed(demo, stack, server_id, count):
    """Every target HEALTHY once recovery acted on the server."""
    return demo.wait_for(
        lambda: h.all_healthy(demo, stack, count) if h.started(
            h.events(demo, stack), server_id) else None,
        'server %s healed' % server_id, timeout=90)


def test_guest_shut_down_behind_novas_back_is_started(demo, admin, stacks,
                                                      admin_nova):
    stack, targets = h.heal_stack(stacks, demo, 'real-off', count=2,
                                  modes=EVENTS)
    victim = targets['workers/0']['server_id']
    admin.guest_fault(victim, 'power_off')
    healed = _healed(demo, stack, victim, 2)
    # The same server, started: Nova stopped it and said so.
    assert healed['workers/0']['server_id'] == victim
    assert _detected(demo, stack, victim)['source'] == 'LIFECYCLE_EVENTS'
    started = h.started(h.events(demo, stack), victim)
    assert started[-1]['reason'].startswith('START'), started
    _running(admin_nova, victim)


def _polled_and_healed(demo, admin, stacks, prefix, path, fault, power):
    """A guest fault Nova leaves ACTIVE: found by polling, then healed.

    Returns the targets once healed; the detection names the power state.
    """
    stack, targets = h.heal_stack(stacks, demo, prefix, count=2,
                                  modes=POLLING)
    victim = targets[path]['server_id']
    found = admin.guest_fault(victim, fault)
    healed = _healed(demo, stack, victim, 2)
    detected = _detected(demo, stack, victim)
    assert detected['source'] == 'NODE_STATUS_POLLING', detected
    assert power in detected['reason'], detected
    return victim, found, healed


def _running(admin_nova, server_id):
    server = admin_nova.servers.get(server_id).to_dict()
    assert (server['status'], server[POWER_STATE]) == ('ACTIVE', RUNNING)


def test_guest_paused_by_the_hypervisor_is_seen_and_healed(
        demo, admin, stacks, admin_nova):
    """ACTIVE with power state PAUSED: Nova ignores it, heat-health not."""
    victim, _found, healed = _polled_and_healed(
        demo, admin, stacks, 'real-paused', 'workers/1', 'pause', 'PAUSED')
    assert healed['workers/1']['server_id'] == victim
    _running(admin_nova, victim)


def test_guest_lost_from_the_hypervisor_is_seen_and_healed(
        demo, admin, stacks, admin_nova):
    """ACTIVE with no power state once Nova's sync ran: healed anyway."""
    _victim, found, healed = _polled_and_healed(
        demo, admin, stacks, 'real-lost', 'workers/0', 'lose', 'NOSTATE')
    assert found['power_state'] is None
    server_id = healed['workers/0']['server_id']
    _running(admin_nova, server_id)
    assert admin.guest_fault(server_id, 'reset')['power_state'] == RUNNING


def test_crashed_guest_is_recreated_through_heat(demo, admin, stacks,
                                                 admin_nova):
    """A ResourceGroup member replaced by Heat, on real Nova's computes."""
    stack, targets = h.heal_stack(stacks, demo, 'real-recreate', count=2,
                                  recovery=h.RECREATE_ONLY)
    victim = targets['workers/1']['server_id']
    admin.guest_fault(victim, 'crash')
    healed = h.wait_replaced(demo, stack, 'workers/1', victim, 2,
                             timeout=150)
    assert healed['workers/0']['server_id'] == targets['workers/0'][
        'server_id']
    new = admin_nova.servers.get(healed['workers/1']['server_id']).to_dict()
    assert (new['status'], new[POWER_STATE]) == ('ACTIVE', RUNNING)
    assert new['OS-EXT-SRV-ATTR:host'] in ('compute1', 'compute2')
    replaced = [e for e in h.events(demo, stack)
                if e['reason'] and 'replaced by' in e['reason']]
    assert len(replaced) == 1, replaced


def test_lost_guest_of_an_autoscaling_group_is_recreated(demo, admin,
                                                         stacks):
    """The group keeps its size; the lost guest's server is replaced."""
    stack = stacks('real-asg', 'heal_asg.yaml',
                   'recovery=%s' % json.dumps(h.RECREATE_ONLY))
    targets = demo.wait_for(lambda: h.all_healthy(demo, stack, 1),
                            'the member HEALTHY')
    [victim] = [t['server_id'] for t in targets.values()]
    admin.guest_fault(victim, 'lose')
    healed = h.wait_member_recreated(demo, stack, victim, timeout=180)
    assert len(healed) == 1


def _health(url):
    """What the server's health URL answers: (status, text)."""
    resp = requests.get(url, timeout=10)
    return resp.status_code, resp.text.strip()


# The application's hang and its health URL are the fault driver's.
@pytest.mark.guest_operation_faults
def test_hung_application_is_found_by_its_url_and_rebooted(
        demo, admin, stacks, admin_nova):
    """Nova sees nothing wrong; the health URL of the application is silent.

    The URL is the one the templates use on fakecloud: for real Nova's
    servers fakecloud asks the fault driver of the compute holding the
    guest. A reboot cures the hung application.
    """
    stack, targets = h.heal_stack(stacks, demo, 'real-hang', count=2,
                                  modes=h.POLL_URL)
    victim = targets['workers/1']['server_id']
    url = h.FAKECLOUD_HEALTH_URL.format(id=victim)
    assert _health(url) == (200, 'ok')
    assert admin.guest_fault(victim, 'hang')['hung'] is True
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(url, timeout=2)
    detected = demo.wait_for(lambda: _detected(demo, stack, victim),
                             'the hung application detected', timeout=60)
    assert detected['source'] == 'NODE_STATUS_POLL_URL', detected
    healed = _healed(demo, stack, victim, 2)
    # The same server, rebooted where it is.
    assert healed['workers/1']['server_id'] == victim
    started = h.started(h.events(demo, stack), victim)
    assert started[-1]['reason'].startswith('REBOOT'), started
    assert _health(url) == (200, 'ok')
    _running(admin_nova, victim)
