"""Batch member updates through a real OctaviaAPI whose HTTP is answered
by a small fake Octavia with the batch semantics octavia.md records: the
request body Octavia gets, and what a busy or failed load balancer means."""

import json
from urllib import parse

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from octaviaclient.api.v2 import octavia as octavia_api
import pytest
import requests
from requests import adapters
from requests import structures

from heat_health.common import lb_members

OCTAVIA = 'http://octavia.test'
POOL = 'b6a5d4c3-0000-4000-8000-000000000001'
LB = 'b6a5d4c3-0000-4000-8000-000000000002'
MEMBERS_PATH = '/v2.0/lbaas/pools/%s/members' % POOL
LB_PATH = '/v2.0/lbaas/loadbalancers/%s' % LB


class FakeOctavia(adapters.BaseAdapter):
    """One pool of a fake Octavia.

    A batch PUT replaces its members, resetting left-out fields as Octavia
    does; ``busy`` answers 409 "immutable".
    """

    def __init__(self):
        super(FakeOctavia, self).__init__()
        self.members = []
        self.lb_status = 'ACTIVE'
        self.busy = False
        self.requests = []

    def _answer(self, method, path, body):
        if method == 'GET' and path == MEMBERS_PATH:
            return 200, {'members': self.members, 'links': []}
        if method == 'GET' and path == LB_PATH:
            return 200, {'loadbalancer': {
                'id': LB, 'provisioning_status': self.lb_status}}
        if method == 'PUT' and path == MEMBERS_PATH:
            if self.busy:
                return 409, {'faultstring': 'Load Balancer %s is immutable '
                             'and cannot be updated.' % LB}
            old = {(m['address'], m['protocol_port']): m
                   for m in self.members}
            self.members = [dict(
                id=old.get((m['address'], m['protocol_port']), {}).get(
                    'id', 'member-%s' % m['address']),
                weight=m.get('weight', 1),
                admin_state_up=m.get('admin_state_up', True),
                backup=m.get('backup', False),
                provisioning_status='ACTIVE',
                **{k: v for k, v in m.items() if k not in (
                    'weight', 'admin_state_up', 'backup')})
                for m in body['members']]
            return 202, None
        return 404, {'faultstring': 'no such route'}

    def send(self, request, **kwargs):
        url = parse.urlsplit(request.url)
        body = json.loads(request.body) if request.body else None
        self.requests.append((request.method, url.path, body))
        status, data = self._answer(request.method, url.path, body)
        response = requests.Response()
        response.status_code = status
        response.reason = 'fake'
        response.url = request.url
        response.request = request
        response.headers = structures.CaseInsensitiveDict()
        response._content = b''
        if data is not None:
            response.headers['Content-Type'] = 'application/json'
            response._content = json.dumps(data).encode('utf-8')
        response.encoding = 'utf-8'
        return response

    def close(self):
        pass


@pytest.fixture
def fake():
    return FakeOctavia()


@pytest.fixture
def pool(fake):
    http = requests.Session()
    http.mount('http://', fake)
    session = ks_session.Session(
        auth=token_endpoint.Token(OCTAVIA, 'a-token'), session=http)
    return lb_members.PoolMembers(
        octavia_api.OctaviaAPI(endpoint=OCTAVIA, session=session), POOL)


def _member(address, weight=1, admin_state_up=True, backup=False):
    return {'address': address, 'protocol_port': 80, 'weight': weight,
            'admin_state_up': admin_state_up, 'backup': backup}


def test_address_on_the_pool_subnet_with_its_ip_version():
    addresses = ['2001:db8::5', '192.168.7.5', '10.0.0.5']
    assert lb_members.address_on('10.0.0.0/24', addresses) == '10.0.0.5'
    assert lb_members.address_on('2001:db8::/64', addresses) == (
        '2001:db8::5')
    assert lb_members.address_on('172.16.0.0/16', addresses) is None
    assert lb_members.address_on('10.0.0.0/24', ['not-an-ip']) is None


def test_full_state_keeps_what_staying_members_have():
    current = [dict(_member('10.0.0.5', weight=5, backup=True), id='a'),
               dict(_member('10.0.0.6', admin_state_up=False), id='b'),
               dict(_member('10.0.0.9'), id='gone')]
    members = lb_members.full_state(
        current, {'10.0.0.5': 'web-0', '10.0.0.6': 'web-1',
                  '10.0.0.7': 'web-2'}, 80, subnet_id='subnet-1')
    assert members == [
        dict(_member('10.0.0.5', weight=5, backup=True), name='web-0',
             subnet_id='subnet-1'),
        dict(_member('10.0.0.6', admin_state_up=False), name='web-1',
             subnet_id='subnet-1'),
        dict(_member('10.0.0.7'), name='web-2', subnet_id='subnet-1')]


def test_full_state_weight_override_drains_one_member():
    current = [_member('10.0.0.5', weight=5), _member('10.0.0.6')]
    members = lb_members.full_state(
        current, {'10.0.0.5': None, '10.0.0.6': None}, 80,
        weights={'10.0.0.6': 0})
    assert [(m['address'], m['weight']) for m in members] == [
        ('10.0.0.5', 5), ('10.0.0.6', 0)]
    assert 'name' not in members[0]


def test_same_members_compares_the_kept_fields():
    current = [dict(_member('10.0.0.5', weight=5), id='a', name='x')]
    assert lb_members.same_members(current, [_member('10.0.0.5', weight=5)])
    assert not lb_members.same_members(current, [_member('10.0.0.5')])
    assert not lb_members.same_members(current, [])


def test_one_put_carries_every_member_with_all_kept_fields(fake, pool):
    fake.members = [dict(_member('10.0.0.5', weight=5), id='a')]
    members = lb_members.full_state(
        pool.list(), {'10.0.0.5': 'web-0', '10.0.0.6': 'web-1'}, 80)
    pool.replace(members)
    puts = [r for r in fake.requests if r[0] == 'PUT']
    assert puts == [('PUT', MEMBERS_PATH, {'members': members})]
    for member in puts[0][2]['members']:
        assert {'weight', 'admin_state_up', 'backup'} <= set(member)
    # The member left at weight 5 keeps it; the new one has the default.
    assert [(m['address'], m['weight'], m['id']) for m in fake.members] == [
        ('10.0.0.5', 5, 'a'), ('10.0.0.6', 1, 'member-10.0.0.6')]


def test_immutable_is_busy(fake, pool):
    fake.busy = True
    with pytest.raises(lb_members.Busy) as caught:
        pool.replace([_member('10.0.0.5')])
    assert 'immutable' in str(caught.value)


def test_an_empty_list_is_never_sent(fake, pool):
    with pytest.raises(ValueError):
        pool.replace([])
    assert fake.requests == []


def test_ready_waits_for_the_load_balancer_then_checks_members(fake, pool):
    fake.members = [dict(_member('10.0.0.5'), provisioning_status='ACTIVE')]
    fake.lb_status = 'PENDING_UPDATE'
    assert pool.ready(LB) is False
    fake.lb_status = 'ACTIVE'
    assert pool.ready(LB) is True
    fake.members.append(dict(_member('10.0.0.6'),
                             provisioning_status='ERROR'))
    with pytest.raises(lb_members.MembersFailed) as caught:
        pool.ready(LB)
    assert '10.0.0.6' in str(caught.value)


def test_a_load_balancer_in_error_is_a_failure(fake, pool):
    fake.lb_status = 'ERROR'
    with pytest.raises(lb_members.MembersFailed) as caught:
        pool.ready(LB)
    assert 'is ERROR' in str(caught.value)


def test_plan_adds_removes_and_keeps_what_it_did_not_add():
    current = [dict(_member('10.0.0.5', weight=5), id='a', name='s1'),
               dict(_member('10.0.0.6'), id='b', name='s2'),
               dict(_member('10.0.0.99', backup=True), id='f',
                    name='someone-elses', protocol_port=8080)]
    added = {'s1': {'address': '10.0.0.5'}, 's2': {'address': '10.0.0.6'}}
    members = lb_members.plan(current, added,
                              {'s1': '10.0.0.5', 's3': '10.0.0.7'}, 80,
                              names={'s3': 'web/2'})
    # Without a name a member keeps its own (Octavia keeps names left out).
    assert [(m['address'], m['protocol_port'], m['weight'], m['backup'],
             m.get('name')) for m in members] == [
        ('10.0.0.5', 80, 5, False, None),
        ('10.0.0.7', 80, 1, False, 'web/2'),
        ('10.0.0.99', 8080, 1, True, 'someone-elses')]


def test_plan_is_none_when_the_pool_already_follows():
    current = [dict(_member('10.0.0.5', weight=5), id='a', name='s1')]
    assert lb_members.plan(current, {'s1': {'address': '10.0.0.5'}},
                           {'s1': '10.0.0.5'}, 80) is None
    # A drain is a change.
    drained = lb_members.plan(current, {'s1': {'address': '10.0.0.5'}},
                              {'s1': '10.0.0.5'}, 80,
                              weights={'10.0.0.5': 0})
    assert [m['weight'] for m in drained] == [0]


def test_member_map_once_the_pool_holds_them():
    current = [dict(_member('10.0.0.5'), id='a')]
    assert lb_members.member_map(
        current, {'s1': '10.0.0.5', 's2': '10.0.0.6'}, 80) == {
            's1': {'member_id': 'a', 'address': '10.0.0.5'}}
