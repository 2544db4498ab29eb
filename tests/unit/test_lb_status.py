"""LB_STATUS_POLLING: verdicts from Octavia member listings."""

import datetime

from heat_health.common import octavia_adapter
from heat_health.engine.monitor import lb_status
from heat_health.policy import observation as obs

NOW = datetime.datetime(2026, 11, 23, 12, 0, 0)


def _member(address, status, admin_state_up=True, member_id=None):
    return {'id': member_id or 'm-%s' % address, 'address': address,
            'protocol_port': 80, 'operating_status': status,
            'admin_state_up': admin_state_up}


def _servers(*addresses):
    return {(a, 80): 'server-%s' % a for a in addresses}


def _by_server(observations):
    return {o.server_id: (o.verdict, o.source) for o in observations}


def _by_policy(observations):
    return {(o.policy_id, o.server_id): o.verdict for o in observations}


def test_error_with_admin_up_is_unhealthy_online_healthy():
    found, blind = lb_status.verdicts('pool-1', [
        _member('10.0.0.5', 'ERROR'), _member('10.0.0.6', 'ONLINE')],
        _servers('10.0.0.5', '10.0.0.6'), NOW)
    assert blind is None
    assert _by_server(found) == {
        'server-10.0.0.5': (obs.UNHEALTHY, obs.LB_STATUS_POLLING),
        'server-10.0.0.6': (obs.HEALTHY, obs.LB_STATUS_POLLING)}
    unhealthy, = [o for o in found if o.verdict == obs.UNHEALTHY]
    assert 'm-10.0.0.5' in unhealthy.reason
    assert 'pool-1' in unhealthy.reason


def test_statuses_that_say_nothing_of_the_server():
    found, blind = lb_status.verdicts('pool-1', [
        _member('10.0.0.1', 'OFFLINE'), _member('10.0.0.2', 'NO_MONITOR'),
        _member('10.0.0.3', 'DRAINING'),
        _member('10.0.0.4', 'ERROR', admin_state_up=False),
        _member('10.0.0.5', 'ONLINE')],
        _servers('10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4',
                 '10.0.0.5'), NOW)
    assert blind is None
    assert _by_server(found) == {
        'server-10.0.0.5': (obs.HEALTHY, obs.LB_STATUS_POLLING)}


def test_members_of_unwatched_servers_are_ignored():
    found, blind = lb_status.verdicts('pool-1', [
        _member('10.0.0.5', 'ERROR'), _member('10.0.0.9', 'ERROR')],
        _servers('10.0.0.5'), NOW)
    # One watched member in ERROR is that server, not a blind observer.
    assert blind is None
    assert _by_server(found) == {
        'server-10.0.0.5': (obs.UNHEALTHY, obs.LB_STATUS_POLLING)}


def test_every_member_error_at_once_is_the_observer():
    found, blind = lb_status.verdicts('pool-1', [
        _member('10.0.0.5', 'ERROR'), _member('10.0.0.6', 'ERROR'),
        _member('10.0.0.7', 'ERROR')],
        _servers('10.0.0.5', '10.0.0.6', '10.0.0.7'), NOW)
    assert 'every member of pool pool-1 is ERROR' in blind
    assert {o.verdict for o in found} == {obs.UNKNOWN}
    assert len(found) == 3


def test_a_single_member_in_error_is_its_server():
    found, blind = lb_status.verdicts('pool-1', [
        _member('10.0.0.5', 'ERROR')], _servers('10.0.0.5'), NOW)
    assert blind is None
    assert _by_server(found) == {
        'server-10.0.0.5': (obs.UNHEALTHY, obs.LB_STATUS_POLLING)}


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _poller(listings, clock):
    seen, asked = [], []

    def list_members(pool_id):
        asked.append(pool_id)
        answer = listings[pool_id]
        if isinstance(answer, Exception):
            raise answer
        return answer
    poller = lb_status.MemberStatusPoller(list_members, seen.extend,
                                          clock=clock, utcnow=lambda: NOW)
    return poller, seen, asked


def test_poller_reads_each_pool_once_and_hands_verdicts_over():
    clock = Clock()
    poller, seen, asked = _poller({
        'pool-1': [_member('10.0.0.5', 'ERROR')],
        'pool-2': [_member('10.0.1.5', 'ONLINE')]}, clock)
    poller.poll([
        lb_status.Pool('pool-1', True, {'p1': _servers('10.0.0.5'),
                                        'p2': _servers('10.0.0.5')}),
        lb_status.Pool('pool-2', True, {'p1': {('10.0.1.5', 80): 's2'}}),
        lb_status.Pool('pool-3', False, {'p3': {('10.0.2.5', 80): 's3'}})])
    assert asked == ['pool-1', 'pool-2']
    assert _by_server(seen) == {
        'server-10.0.0.5': (obs.UNHEALTHY, obs.LB_STATUS_POLLING),
        's2': (obs.HEALTHY, obs.LB_STATUS_POLLING)}
    # Each policy reading the pool has its own verdict, named after it.
    assert _by_policy(seen) == {
        ('p1', 'server-10.0.0.5'): obs.UNHEALTHY,
        ('p2', 'server-10.0.0.5'): obs.UNHEALTHY,
        ('p1', 's2'): obs.HEALTHY}
    assert poller.blind('p1') is None


def test_a_policy_judges_only_the_members_it_watches():
    clock = Clock()
    poller, seen, asked = _poller({
        'pool-1': [_member('10.0.0.5', 'ERROR'),
                   _member('10.0.0.6', 'ERROR')]}, clock)
    poller.poll([lb_status.Pool('pool-1', True, {
        'p1': _servers('10.0.0.5', '10.0.0.6'),
        'p2': _servers('10.0.0.6')})])
    assert asked == ['pool-1']
    # For p1 every member it watches is ERROR at once: it cannot see.
    # p2 watches one member, whose health checks fail.
    assert _by_policy(seen) == {
        ('p1', 'server-10.0.0.5'): obs.UNKNOWN,
        ('p1', 'server-10.0.0.6'): obs.UNKNOWN,
        ('p2', 'server-10.0.0.6'): obs.UNHEALTHY}
    assert poller.blind('p1').startswith('every member')
    assert poller.blind('p2') is None


def test_octavia_errors_blind_the_pool_policies_for_a_while():
    clock = Clock()
    poller, seen, _asked = _poller({
        'pool-1': octavia_adapter.OctaviaUnavailable('HTTP 503')}, clock)
    pool = lb_status.Pool('pool-1', True, {'p1': _servers('10.0.0.5')})
    poller.poll([pool])
    assert _by_server(seen) == {
        'server-10.0.0.5': (obs.UNKNOWN, obs.LB_STATUS_POLLING)}
    assert [o.policy_id for o in seen] == ['p1']
    assert 'Octavia error: HTTP 503' in poller.blind('p1')
    assert poller.blind('p2') is None
    clock.now += lb_status.BLIND_SECONDS
    assert poller.blind('p1') is None


def test_a_good_reading_of_the_same_pool_clears_the_blindness():
    clock = Clock()
    listings = {'pool-1': [_member('10.0.0.5', 'ERROR'),
                           _member('10.0.0.6', 'ERROR')]}
    poller, _seen, _asked = _poller(listings, clock)
    pool = lb_status.Pool('pool-1', True,
                          {'p1': _servers('10.0.0.5', '10.0.0.6')})
    poller.poll([pool])
    assert poller.blind('p1').startswith('every member')
    listings['pool-1'][0] = _member('10.0.0.5', 'ONLINE')
    poller.poll([pool])
    assert poller.blind('p1') is None
