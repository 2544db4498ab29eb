"""A tenant's poll URL against the engine: the attacks of the review.

Through the real checker and real sockets on loopback addresses of the
tests' own (see ``poll_listeners``).
"""

import logging
import os
import socket
import threading
import time

import pytest

from heat_health.engine.monitor import poll_url
from heat_health.policy import observation as obs
from heat_health.policy import poll_url_rules
from tests.unit.security import poll_listeners as listeners

SERVER = '0c2b7d0e-5b8e-4c4a-9b61-3f2c1e0d9a77'


def _ok(path):
    return 200, b'ok', []


@pytest.fixture
def server():
    served = listeners.Server(listeners.OWN_IP, _ok)
    yield served
    served.close()


@pytest.fixture
def elsewhere():
    """Where an attacker would send the engine: another address."""
    recorder = listeners.Recorder(listeners.OTHER_IP)
    yield recorder
    recorder.close()


def _checker(server, observe=None, **kwargs):
    kwargs.setdefault('allowed_hosts', [])
    kwargs.setdefault('allowed_networks',
                      ['%s:%d' % (server.host, server.port)])
    kwargs.setdefault('max_workers', 2)
    return poll_url.PollUrlChecker(observe or (lambda o: None), **kwargs)


def _target(ip=listeners.OWN_IP, policy='policy-1', project='project-1',
            server_id=SERVER):
    return poll_url.Target(server_id, 'web-0', [ip], policy, project)


def _options(url, **extra):
    options = {poll_url_rules.POLL_URL: url, poll_url_rules.RETRY_LIMIT: 0,
               poll_url_rules.TIMEOUT: 1}
    options.update(extra)
    return options


def _wait(condition, seconds=10):
    ends = time.monotonic() + seconds
    while not condition() and time.monotonic() < ends:
        time.sleep(0.02)
    return condition()


# 1. Two parsers, two hosts: the backslash trick.

def test_backslash_never_reaches_the_address_before_it(server, elsewhere):
    checker = _checker(server)
    try:
        found = checker.check(_target(), _options(
            'http://%s:%d\\@{ip}:%d/latest/meta-data' % (
                elsewhere.host, elsewhere.port, server.port)))
    finally:
        checker.stop()
    assert found.verdict == obs.UNKNOWN
    assert 'backslash' in found.reason
    assert elsewhere.connections == []
    assert server.requests == []


def test_fetch_connects_to_the_checked_address_with_the_urls_host(
        server, elsewhere, monkeypatch):
    """A name the operator allows is resolved once, by the check."""
    answers = iter([listeners.OWN_IP, elsewhere.host])

    def resolve(host, port, *args, **kwargs):
        # A rebinding resolver: a second lookup would give another host.
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, '',
                 (next(answers), port))]

    monkeypatch.setattr(socket, 'getaddrinfo', resolve)
    checker = _checker(server, allowed_hosts=['health.example'])
    try:
        found = checker.check(_target(), _options(
            'http://health.example:%d/h' % server.port))
    finally:
        checker.stop()
    assert found.verdict == obs.HEALTHY, found.reason
    (path, headers), = server.requests
    assert headers['Host'] == 'health.example:%d' % server.port
    assert elsewhere.connections == []


# 5. A trickling server holds a worker no longer than the timeout.

class _Trickler(object):
    """Answers 200 with a body it sends one byte at a time.

    With a timeout per socket read the check would wait for all of it and
    find the server healthy; it stops by itself.
    """

    def __init__(self, host, in_headers=False, length=40, every=0.1):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.in_headers = in_headers
        self.length, self.every = length, every
        self.sent = []
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        ends = time.monotonic() + listeners.LIFETIME
        while not self.done.is_set() and time.monotonic() < ends:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.recv(4096)
            head = b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n' % self.length
            body = b'o' * (self.length - 1) + b'k'
            slow = head + b'\r\n' + body if self.in_headers else body
            if not self.in_headers:
                conn.sendall(head + b'\r\n')
            count = 0
            try:
                for byte in slow:
                    conn.sendall(bytes([byte]))
                    count += 1
                    time.sleep(self.every)
            except OSError:
                pass
            self.sent.append(count)
            conn.close()
        self.sock.close()

    def close(self):
        self.done.set()


@pytest.mark.parametrize('in_headers', [False, True])
def test_trickling_server_gets_the_whole_check_deadline(in_headers):
    trickler = _Trickler(listeners.OWN_IP, in_headers=in_headers)
    checker = poll_url.PollUrlChecker(
        lambda o: None, max_workers=1, allowed_hosts=[],
        allowed_networks=['%s:%d' % (listeners.OWN_IP, trickler.port)])
    try:
        found = checker.check(_target(), _options(
            'http://{ip}:%d/health' % trickler.port,
            **{poll_url_rules.TIMEOUT: 1,
               poll_url_rules.HEALTHY_RESPONSE: 'ok'}))
        assert _wait(lambda: trickler.sent)
    finally:
        checker.stop()
        trickler.close()
    assert found.verdict == obs.UNHEALTHY
    assert 'no answer within 1.0s' in found.reason
    # The engine hung up long before the answer was whole.
    assert trickler.sent[0] < trickler.length


def test_one_projects_hung_servers_leave_workers_to_the_others(server):
    """Its checks over its share wait their turn; none is lost."""
    release = threading.Event()
    concurrent = []
    active = [0]
    lock = threading.Lock()

    def answer(path):
        if path.startswith('/hang'):
            with lock:
                active[0] += 1
                concurrent.append(active[0])
            release.wait(20)
            with lock:
                active[0] -= 1
        return 200, b'ok', []

    hanging = listeners.Server(listeners.OWN_IP, answer)
    seen = []
    checker = poll_url.PollUrlChecker(
        seen.append, max_workers=4, per_project=2, allowed_hosts=[],
        allowed_networks=['%s:%d' % (listeners.OWN_IP, hanging.port)])
    try:
        hung = _options('http://{ip}:%d/hang' % hanging.port,
                        **{poll_url_rules.TIMEOUT: 30})
        for n in range(6):
            assert checker.submit(_target(server_id='hung-%d' % n,
                                          project='greedy'), hung)
        assert _wait(lambda: len(concurrent) >= 2)
        assert checker.submit(_target(project='other'), _options(
            'http://{ip}:%d/health' % hanging.port))
        assert _wait(lambda: [o for o in seen if o.server_id == SERVER])
        assert [(o.server_id, o.verdict) for o in seen] == [
            (SERVER, obs.HEALTHY)]
        release.set()
        assert _wait(lambda: len(seen) == 7)
    finally:
        release.set()
        checker.stop()
        hanging.close()
    assert max(concurrent) == 2
    assert sorted(o.server_id for o in seen if o.server_id != SERVER) == [
        'hung-%d' % n for n in range(6)]


# 6. Nothing configured: nothing of the engine's own is polled.

@pytest.mark.parametrize('networks', [[], ['0.0.0.0/0', '::/0']])
def test_control_plane_address_as_fixed_ip_is_not_polled(
        server, networks):
    """The server's "own" address is the engine's loopback."""
    checker = _checker(server, allowed_networks=networks)
    try:
        found = checker.check(_target(), _options(
            'http://{ip}:%d/' % server.port))
    finally:
        checker.stop()
    assert found.verdict == obs.UNKNOWN
    assert found.reason.startswith('check refused')
    assert server.requests == []


def test_metadata_address_as_fixed_ip_is_not_polled(server):
    checker = _checker(server, allowed_networks=['0.0.0.0/0'])
    try:
        found = checker.check(_target('169.254.169.254'), _options(
            'http://{ip}/latest/meta-data'))
    finally:
        checker.stop()
    assert found.verdict == obs.UNKNOWN
    assert 'link-local (metadata)' in found.reason


def test_default_configuration_polls_nothing(server):
    checker = poll_url.PollUrlChecker(lambda o: None, max_workers=1)
    try:
        found = checker.check(_target(), _options(
            'http://{ip}:%d/' % server.port))
    finally:
        checker.stop()
    assert 'no [heat_health] poll_url_allowed_networks' in found.reason
    assert server.requests == []


# 11. Credentials in a poll URL are never copied.

def test_credentials_are_not_in_reasons_or_logs(server, caplog):
    caplog.set_level(logging.DEBUG, logger='heat_health')
    checker = _checker(server)
    try:
        with_user = checker.check(_target(), _options(
            'http://admin:hunter2@{ip}:%d/' % server.port))
        with_token = checker.check(_target(), _options(
            'http://{ip}:%d/health?token=hunter2&key=k3y#s3cret'
            % server.port, **{poll_url_rules.HEALTHY_RESPONSE: 'nope'}))
    finally:
        checker.stop()
    assert with_user.verdict == obs.UNKNOWN
    assert 'credentials' in with_user.reason
    # The tenant's own server gets its token; nothing else keeps it.
    assert server.requests[0][0] == '/health?token=hunter2&key=k3y'
    assert with_token.verdict == obs.UNHEALTHY
    assert '?token=***&key=***' in with_token.reason
    for text in [with_user.reason, with_token.reason] + [
            r.getMessage() for r in caplog.records]:
        for secret in ('hunter2', 'admin', 'k3y', 's3cret'):
            assert secret not in text, text


# 12. A malformed URL, and the engine host's environment.

def test_malformed_url_is_one_warning_and_no_traceback(server, caplog):
    caplog.set_level(logging.DEBUG, logger='heat_health')
    seen = []
    checker = _checker(server, observe=seen.append)
    try:
        for n in range(3):
            assert checker.submit(_target(), _options('http://[::1/'))
            assert _wait(lambda: len(seen) == n + 1)
    finally:
        checker.stop()
    assert {(o.verdict, o.reason) for o in seen} == {
        (obs.UNKNOWN, 'check refused: poll URL http://[::1/ has a '
                      'malformed host')}
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert not [r for r in caplog.records if r.exc_info]


def test_proxy_variables_and_netrc_are_ignored(server, tmp_path,
                                               monkeypatch):
    proxy = listeners.Recorder(listeners.PROXY_IP)
    (tmp_path / '.netrc').write_text(
        'machine %s login engine password leaked\n' % server.host)
    os.chmod(tmp_path / '.netrc', 0o600)
    monkeypatch.setenv('HOME', str(tmp_path))
    for name in ('HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'ALL_PROXY'):
        monkeypatch.setenv(name, 'http://%s:%d' % (proxy.host, proxy.port))
    monkeypatch.delenv('NO_PROXY', raising=False)
    monkeypatch.delenv('no_proxy', raising=False)
    checker = _checker(server)
    try:
        found = checker.check(_target(), _options(
            'http://{ip}:%d/h' % server.port))
    finally:
        checker.stop()
        proxy.close()
    assert found.verdict == obs.HEALTHY, found.reason
    assert proxy.connections == []
    (path, headers), = server.requests
    assert 'Authorization' not in headers


# Verdicts are one policy's own.

def test_two_policies_watching_one_server_keep_their_own_verdicts(server):
    seen = []
    checker = _checker(server, observe=seen.append)
    good = _options('http://{ip}:%d/' % server.port)
    bad = _options('http://{ip}:%d/' % server.port,
                   **{poll_url_rules.HEALTHY_RESPONSE: 'never there'})
    try:
        assert checker.submit(_target(policy='mine'), good)
        assert checker.submit(_target(policy='theirs'), bad)
        assert _wait(lambda: len(seen) == 2)
    finally:
        checker.stop()
    assert {(o.policy_id, o.server_id, o.verdict) for o in seen} == {
        ('mine', SERVER, obs.HEALTHY), ('theirs', SERVER, obs.UNHEALTHY)}
