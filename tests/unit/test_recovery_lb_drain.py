"""Draining a server's members before recovery, through a real OctaviaAPI
answered by the fake Octavia of the batch update tests."""

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from octaviaclient.api.v2 import octavia as octavia_api
import pytest
import requests

from heat_health.common import lb_members
from heat_health.engine.recovery import lb_drain
from tests.unit import test_lb_members as fake_octavia

SPEC = {'pool_id': fake_octavia.POOL, 'loadbalancer_id': fake_octavia.LB,
        'protocol_port': 80, 'subnet_id': None, 'lb_status_timeout': 5,
        'members': {'s1': {'address': '10.0.0.5', 'member_id': 'a'},
                    's2': {'address': '10.0.0.6', 'member_id': 'b'}}}


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def fake():
    octavia = fake_octavia.FakeOctavia()
    octavia.members = [
        dict(fake_octavia._member('10.0.0.5', weight=5), id='a', name='s1'),
        dict(fake_octavia._member('10.0.0.6'), id='b', name='s2')]
    return octavia


@pytest.fixture
def drainer(fake, monkeypatch):
    http = requests.Session()
    http.mount('http://', fake)
    session = ks_session.Session(
        auth=token_endpoint.Token(fake_octavia.OCTAVIA, 't'), session=http)
    api = octavia_api.OctaviaAPI(endpoint=fake_octavia.OCTAVIA,
                                 session=session)
    clock = Clock()
    return lb_drain.Drainer(lambda stack_id: api, clock=clock,
                            sleep=clock.sleep, specs=lambda stack_id: [SPEC])


def _drain(drainer, server='s1'):
    """As recovery does: read the members, then drain what was read."""
    drained = drainer.members('stack', server)
    drainer.drain('stack', drained)
    return drained


def _weights(fake):
    return {m['address']: m['weight'] for m in fake.members}


def test_drain_sets_weight_zero_in_one_batch_keeping_the_others(fake,
                                                                drainer):
    drained = _drain(drainer)
    assert drained == {fake_octavia.POOL: ['10.0.0.5', 5]}
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.6': 1}
    assert [r[0] for r in fake.requests].count('PUT') == 1
    # Carried on after a restart: the same batch again; a drained member
    # reads as nothing to give back, so the weight recorded first stays.
    assert drainer.members('stack', 's1') == {}
    drainer.drain('stack', drained)
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.6': 1}


def test_restore_gives_the_weight_back(fake, drainer):
    drained = _drain(drainer)
    assert drainer.restore('stack', drained) == drained
    assert _weights(fake) == {'10.0.0.5': 5, '10.0.0.6': 1}


def test_a_replaced_servers_member_is_not_restored(fake, drainer):
    drained = _drain(drainer)
    fake.members = [m for m in fake.members if m['address'] != '10.0.0.5']
    assert drainer.restore('stack', drained) == {}


def test_a_server_outside_every_pool_drains_nothing(fake, drainer):
    assert drainer.members('stack', 's9') == {}
    assert fake.requests == []


def test_a_busy_load_balancer_gives_up_after_its_timeout(fake, drainer):
    fake.busy = True
    with pytest.raises(lb_members.Busy):
        drainer.drain('stack', drainer.members('stack', 's1'))
    assert _weights(fake) == {'10.0.0.5': 5, '10.0.0.6': 1}
