"""Draining a server's members before recovery, through a real OctaviaAPI
answered by the fake Octavia of the batch update tests."""

import threading
import time

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from octaviaclient.api.v2 import octavia as octavia_api
import pytest
import requests

from heat_health.common import lb_members
from heat_health.engine.pools import lb_drain
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


def test_only_the_members_of_the_server_held_now_are_restored(
        fake, drainer):
    drained = _drain(drainer)
    # The same server, healed: its member gets its weight back.
    assert drainer.restore('stack', drained, 's1') == drained
    _drain(drainer)
    # Replaced, the follower not caught up: the old server's member is
    # still recorded at that address, so the restore is put off.
    with pytest.raises(lb_drain.NotYet):
        drainer.restore('stack', drained, 's3')
    assert _weights(fake)['10.0.0.5'] == 0
    # Swapped for the replacement's member at another address: the old
    # one gets nothing (it leaves with its server).
    SPEC['members'] = {'s3': {'address': '10.0.0.7', 'member_id': 'c'},
                       's2': SPEC['members']['s2']}
    try:
        assert drainer.restore('stack', drained, 's3') == {}
        assert _weights(fake)['10.0.0.5'] == 0
        # The replacement took the old server's port, and so its address:
        # that member is the replacement's now, and gets the weight.
        SPEC['members']['s3']['address'] = '10.0.0.5'
        assert drainer.restore('stack', drained, 's3') == drained
        assert _weights(fake)['10.0.0.5'] == 5
    finally:
        SPEC['members'] = {'s1': {'address': '10.0.0.5', 'member_id': 'a'},
                           's2': {'address': '10.0.0.6', 'member_id': 'b'}}


def test_a_server_outside_every_pool_drains_nothing(fake, drainer):
    assert drainer.members('stack', 's9') == {}
    assert fake.requests == []


def test_a_busy_load_balancer_gives_up_after_its_timeout(fake, drainer):
    fake.busy = True
    drained = drainer.members('stack', 's1')
    # Each pass waits a little, then frees the worker until the next.
    start = drainer._clock()
    with pytest.raises(lb_drain.NotYet):
        drainer.drain('stack', drained, waited=0)
    assert drainer._clock() - start <= lb_drain.PASS_SECONDS + 1
    # Once lb_status_timeout (5 s) has passed since the first try: Busy,
    # and the recovery goes on without the drain.
    with pytest.raises(lb_members.Busy) as raised:
        drainer.drain('stack', drained, waited=4)
    assert not isinstance(raised.value, lb_drain.NotYet)
    assert _weights(fake) == {'10.0.0.5': 5, '10.0.0.6': 1}


def test_a_drain_carried_on_at_the_next_pass_is_done_then(fake, drainer):
    fake.busy = True
    drained = drainer.members('stack', 's1')
    with pytest.raises(lb_drain.NotYet):
        drainer.drain('stack', drained, waited=0)
    fake.busy = False
    drainer.drain('stack', drained, waited=3)
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.6': 1}


def test_a_drain_put_off_is_not_sent_by_another_server_s_later(fake,
                                                               drainer):
    """A drain the busy load balancer put off, then not asked again.

    Its recovery was paused meanwhile and its server healed: another
    server's drain, much later, sent the old one with its own, taking a
    healthy server out of the pool on a decision nobody checked again.
    """
    fake.busy = True
    first = drainer.members('stack', 's1')
    with pytest.raises(lb_drain.NotYet):
        drainer.drain('stack', first, waited=0)
    fake.busy = False
    drainer.drain('stack', drainer.members('stack', 's2'), waited=0)
    assert _weights(fake) == {'10.0.0.5': 5, '10.0.0.6': 0}


def test_a_restore_is_never_given_up_only_put_off(fake, drainer):
    drained = _drain(drainer)
    fake.busy = True
    for _pass in range(5):
        with pytest.raises(lb_drain.NotYet):
            drainer.restore('stack', drained)
    fake.busy = False
    assert drainer.restore('stack', drained) == drained
    assert _weights(fake) == {'10.0.0.5': 5, '10.0.0.6': 1}


def _real_time_drainer(fake):
    http = requests.Session()
    http.mount('http://', fake)
    session = ks_session.Session(
        auth=token_endpoint.Token(fake_octavia.OCTAVIA, 't'), session=http)
    api = octavia_api.OctaviaAPI(endpoint=fake_octavia.OCTAVIA,
                                 session=session)
    return lb_drain.Drainer(lambda stack_id: api,
                            specs=lambda stack_id: [SPEC])


def _puts(fake):
    return [body for method, _path, body in fake.requests if method == 'PUT']


def test_drains_asked_together_go_in_one_batch(fake):
    """Servers that failed together: one update and one wait, not two."""
    drainer = _real_time_drainer(fake)
    fake.lb_status = 'PENDING_UPDATE'   # busy with an earlier change
    found = {}
    workers = [threading.Thread(target=lambda s=s: found.update(
        {s: drainer.drain('stack', drainer.members('stack', s))}))
        for s in ('s1', 's2')]
    for worker in workers:
        worker.start()
    time.sleep(0.5)
    fake.lb_status = 'ACTIVE'
    for worker in workers:
        worker.join(10)
    assert len(_puts(fake)) == 1, _puts(fake)
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.6': 0}
    assert found == {'s1': {fake_octavia.POOL: ['10.0.0.5', 0]},
                     's2': {fake_octavia.POOL: ['10.0.0.6', 0]}}


def test_a_drain_before_a_replacement_does_not_wait_for_the_lb(fake,
                                                               drainer):
    drained = drainer.members('stack', 's1')
    put = fake._answer

    def stays_busy(method, path, body):
        answer = put(method, path, body)
        if method == 'PUT':
            fake.lb_status = 'PENDING_UPDATE'
        return answer
    fake._answer = stays_busy
    start = drainer._clock()
    drainer.drain('stack', drained, settle=False)
    assert drainer._clock() == start
    assert _weights(fake)['10.0.0.5'] == 0
    # A drain before a reboot waits until the load balancer took it.
    fake.lb_status = 'ACTIVE'
    with pytest.raises(lb_drain.NotYet):
        drainer.drain('stack', drainer.members('stack', 's2'))


def test_a_drain_leaves_the_member_list_as_the_pool_holds_it(fake, drainer):
    # The pool follower swapped s2's member for its replacement's (at
    # 10.0.0.8) and has not stored the swap yet: the stored members still
    # name 10.0.0.6. A drain of s1 changes s1's weight and nothing else:
    # the removed member is not sent back, the new one not dropped.
    fake.members = [
        m for m in fake.members if m['address'] != '10.0.0.6'] + [
        dict(fake_octavia._member('10.0.0.8'), id='c', name='s2')]
    drained = _drain(drainer)
    assert drained == {fake_octavia.POOL: ['10.0.0.5', 5]}
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.8': 1}
    assert drainer.restore('stack', drained, 's1') == drained
    assert _weights(fake) == {'10.0.0.5': 5, '10.0.0.8': 1}


def test_recoveries_started_together_drain_in_one_batch(fake, drainer):
    """The last drain of a cohort sends the others' with its own."""
    cohort = lb_drain.Cohort(['t1', 't2', 't3'], deadline=10)
    first = drainer.members('stack', 's1')
    second = drainer.members('stack', 's2')
    with pytest.raises(lb_drain.Gathering):
        drainer.drain('stack', first, settle=False, cohort=(cohort, 't1', 0))
    assert fake.requests[-1][0] == 'GET' and _puts(fake) == []
    # t3 ends without a drain; t2 is the last on its way and sends both.
    assert not cohort.leave('t3')
    assert drainer.drain('stack', second, settle=False,
                         cohort=(cohort, 't2', 0)) == {
        fake_octavia.POOL: ['10.0.0.6', 0]}
    assert len(_puts(fake)) == 1
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.6': 0}
    # t1 carried on at its next pass: found sent, nothing asked again.
    asked = len(fake.requests)
    assert drainer.drain('stack', first, settle=False) == {
        fake_octavia.POOL: ['10.0.0.5', 0]}
    assert len(fake.requests) == asked


def test_a_cohort_whose_last_recovery_ends_without_a_drain(fake, drainer):
    """Nobody is left to send: the drains that joined send their own."""
    cohort = lb_drain.Cohort(['t1', 't2'], deadline=10)
    drained = drainer.members('stack', 's1')
    with pytest.raises(lb_drain.Gathering):
        drainer.drain('stack', drained, cohort=(cohort, 't1', 0))
    assert cohort.leave('t2')
    assert _weights(fake)['10.0.0.5'] == 5
    drainer.drain('stack', drained, cohort=(cohort, 't1', 1))
    assert _weights(fake)['10.0.0.5'] == 0


def test_a_cohort_waits_for_no_one_past_its_deadline(fake, drainer):
    cohort = lb_drain.Cohort(['t1', 't2'], deadline=1)
    drained = drainer.members('stack', 's1')
    drainer.drain('stack', drained, cohort=(cohort, 't1', 2))
    assert _weights(fake)['10.0.0.5'] == 0
    assert not cohort.leave('t2')


def test_a_recovery_started_a_pass_later_joins_an_open_cohort(fake,
                                                              drainer):
    cohort = lb_drain.Cohort(['t1'], deadline=10)
    with pytest.raises(lb_drain.Gathering):
        assert cohort.expect(['t2'], now=0.2)
        drainer.drain('stack', drainer.members('stack', 's1'),
                      cohort=(cohort, 't1', 0.5))
    drainer.drain('stack', drainer.members('stack', 's2'),
                  cohort=(cohort, 't2', 0.7))
    assert len(_puts(fake)) == 1
    assert _weights(fake) == {'10.0.0.5': 0, '10.0.0.6': 0}
    # Sent: a later recovery starts a cohort of its own.
    assert not cohort.expect(['t3'], now=0.8)


def _member_reads(fake):
    return [r for r in fake.requests if r[0] == 'GET' and
            r[1].endswith('/members')]


def test_a_cohort_reads_each_pool_once_for_all_its_servers(fake, drainer):
    """Servers that failed together: one read of the pool, not one each."""
    cohort = lb_drain.Cohort(['t1', 't2'], deadline=10)
    assert drainer.members('stack', 's1', cohort=(cohort, 0)) == {
        fake_octavia.POOL: ['10.0.0.5', 5]}
    assert drainer.members('stack', 's2', cohort=(cohort, 0.3)) == {
        fake_octavia.POOL: ['10.0.0.6', 1]}
    assert len(_member_reads(fake)) == 1


def test_a_cohort_shares_no_read_once_its_drains_were_sent(fake, drainer):
    """After the batch, or past the deadline, each weight is read anew."""
    cohort = lb_drain.Cohort(['t1'], deadline=10)
    drained = drainer.members('stack', 's1', cohort=(cohort, 0))
    drainer.drain('stack', drained, settle=False, cohort=(cohort, 't1', 0))
    reads = len(_member_reads(fake))
    # s1 drained: read anew, its weight is 0 now and nothing to give back.
    assert drainer.members('stack', 's1', cohort=(cohort, 0.5)) == {}
    assert len(_member_reads(fake)) == reads + 1
    late = lb_drain.Cohort(['t2'], deadline=1)
    late_reads = len(_member_reads(fake))
    drainer.members('stack', 's2', cohort=(late, 2))
    drainer.members('stack', 's2', cohort=(late, 2))
    assert len(_member_reads(fake)) == late_reads + 2


def test_a_failed_cohort_read_is_tried_again_by_the_next(fake, drainer):
    cohort = lb_drain.Cohort(['t1', 't2'], deadline=10)
    calls = []

    def failing():
        calls.append(1)
        raise lb_members.Busy('no answer')

    with pytest.raises(lb_members.Busy):
        cohort.listing('pool', failing, 0)
    assert cohort.listing('pool', lambda: ['read again'], 0) == [
        'read again']
    assert cohort.listing('pool', failing, 0) == ['read again']
    assert calls == [1]
