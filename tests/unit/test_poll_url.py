"""Poll URL checks against an HTTP server of the test's own on 127.0.0.1."""

from http import server as http_server
import socket
import threading
import time

import pytest

from heat_health.engine.monitor import poll_url
from heat_health.policy import observation as obs
from heat_health.policy import poll_url_guard
from heat_health.policy import poll_url_rules

SERVER = '0b0a6c7e-4a4c-4d53-9a2c-2a1e4c51f0d1'


class _Handler(http_server.BaseHTTPRequestHandler):
    # path -> (status, body); '/hang' holds the request.
    answers = {}
    release = threading.Event()
    requests = []

    def do_GET(self):
        self.requests.append(self.path)
        if self.path.startswith('/hang'):
            self.release.wait(10)
            return
        status, body = self.answers.get(self.path, (404, b'no such page'))
        self.send_response(status)
        self.send_header('Content-Length', str(len(body)))
        if status == 302:
            self.send_header('Location', 'http://192.0.2.1/health')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope='module')
def web():
    httpd = http_server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.answers.update({
        '/health': (200, b'status: ok\n'),
        '/wrong': (200, b'status: degraded\n'),
        '/broken': (500, b'ok'),
        '/moved': (302, b'ok'),
        '/%s/web-0/health' % SERVER: (200, b'ok'),
        '/created': (201, b''),
        # Within MAX_BODY, so the 'b' is read and (a+)+$ cannot match.
        '/aaa': (200, b'a' * 60000 + b'b'),
    })
    yield 'http://127.0.0.1:%d' % httpd.server_address[1]
    _Handler.release.set()
    httpd.shutdown()
    httpd.server_close()


def _free_port():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


TARGET = poll_url.Target(SERVER, 'web-0', ['10.0.0.5', 'fd00::5'])


def _options(url, **extra):
    options = {poll_url_rules.POLL_URL: url,
               poll_url_rules.HEALTHY_RESPONSE: r'status: ok|^ok$',
               poll_url_rules.RETRY_LIMIT: 0, poll_url_rules.RETRY_INTERVAL: 0,
               poll_url_rules.TIMEOUT: 1}
    options.update(extra)
    return options


@pytest.fixture
def checker():
    seen = []
    checker = poll_url.PollUrlChecker(seen.append, max_workers=2,
                                      allowed_hosts=['127.0.0.1'],
                                      allowed_networks=['127.0.0.1'])
    checker.seen = seen
    yield checker
    checker.stop()


def test_healthy_answer(web, checker):
    found = checker.check(TARGET, _options(web + '/health'))
    assert found.verdict == obs.HEALTHY
    assert found.source == obs.NODE_STATUS_POLL_URL
    assert found.server_id == SERVER


@pytest.mark.parametrize('path,reason', [
    ('/wrong', "answered 200 without 'status: ok|^ok$'"),
    ('/broken', 'answered 500'),
    ('/missing', 'answered 404'),
    ('/moved', 'answered 302'),
])
def test_bad_answers_are_unhealthy(web, checker, path, reason):
    found = checker.check(TARGET, _options(web + path))
    assert found.verdict == obs.UNHEALTHY
    assert reason in found.reason


def test_redirect_is_not_followed(web, checker):
    del _Handler.requests[:]
    checker.check(TARGET, _options(web + '/moved'))
    assert _Handler.requests == ['/moved']


def test_retries_then_unhealthy(web, checker):
    del _Handler.requests[:]
    started = time.monotonic()
    found = checker.check(TARGET, _options(
        web + '/broken', **{poll_url_rules.RETRY_LIMIT: 2,
                            poll_url_rules.RETRY_INTERVAL: 0.2}))
    assert found.verdict == obs.UNHEALTHY
    assert '(3 attempts)' in found.reason
    assert _Handler.requests == ['/broken'] * 3
    assert time.monotonic() - started >= 0.4


def test_hang_times_out_as_unhealthy(web, checker):
    started = time.monotonic()
    found = checker.check(TARGET, _options(
        web + '/hang', **{poll_url_rules.TIMEOUT: 0.3}))
    assert found.verdict == obs.UNHEALTHY
    assert 'no answer within 0.3s' in found.reason
    assert time.monotonic() - started < 2


@pytest.mark.parametrize('as_unhealthy,verdict', [
    (True, obs.UNHEALTHY), (False, obs.UNKNOWN)])
def test_connection_refused(checker, as_unhealthy, verdict):
    url = 'http://127.0.0.1:%d/health' % _free_port()
    found = checker.check(TARGET, _options(
        url, **{poll_url_rules.CONN_ERROR_AS_UNHEALTHY: as_unhealthy}))
    assert found.verdict == verdict
    assert 'connection failed' in found.reason


@pytest.mark.parametrize('url', [
    'http://192.0.2.10/health', 'http://metadata.internal/{id}',
    'http://10.0.0.5.example.com/', 'file:///etc/passwd',
    'http://[fd00::6]/health',
])
def test_hosts_other_than_the_servers_are_refused(url):
    seen = []
    checker = poll_url.PollUrlChecker(seen.append, max_workers=1,
                                      allowed_hosts=[])
    try:
        found = checker.check(TARGET, _options(url))
    finally:
        checker.stop()
    assert found.verdict == obs.UNKNOWN
    assert found.reason.startswith('check refused')


def _destination(url, allowed_hosts, networks):
    return poll_url_guard.destination(
        url, TARGET.addresses, allowed_hosts,
        poll_url_guard.allowed_networks(networks))


def _refusal(url, allowed_hosts, networks):
    try:
        _destination(url, allowed_hosts, networks)
    except poll_url_guard.Refused as error:
        return str(error)
    return None


TENANT = ['10.0.0.0/16', 'fd00::/64']


def test_servers_own_addresses_are_allowed():
    assert _refusal('http://10.0.0.5:8080/h', [], TENANT) is None
    assert _refusal('http://[fd00::5]/h', [], TENANT) is None
    assert _refusal('https://10.0.0.5/h', [], TENANT) is None
    found = _destination('https://10.0.0.5:8443/h?a=1', [], TENANT)
    assert (str(found.ip), found.port, found.target, found.host_header) == (
        '10.0.0.5', 8443, '/h?a=1', '10.0.0.5:8443')


def test_without_allowed_networks_nothing_is_polled():
    assert 'no [heat_health] poll_url_allowed_networks' in _refusal(
        'http://10.0.0.5:8080/h', [], [])


def test_allowed_networks_bound_every_host():
    loopback = ['127.0.0.0/8']
    # The server's own address no longer suffices.
    assert 'poll_url_allowed_networks' in _refusal(
        'http://10.0.0.5:8080/h', [], loopback)
    assert _refusal('http://127.0.0.1:8775/h', ['127.0.0.1'],
                    loopback) is None
    # Within the networks, the other rules still hold.
    assert _refusal('http://127.0.0.2/h', ['127.0.0.1'],
                    loopback) is not None
    # A port in the entry: that port only.
    assert _refusal('http://127.0.0.1:8775/h', ['127.0.0.1'],
                    ['127.0.0.1:8775']) is None
    assert 'port 5000' in _refusal('http://127.0.0.1:5000/h', ['127.0.0.1'],
                                   ['127.0.0.1:8775'])


def test_special_addresses_need_an_entry_of_their_own():
    everything = ['0.0.0.0/0', '::/0']
    for url in ('http://127.0.0.1/', 'http://169.254.169.254/',
                'http://[::1]/', 'http://[fe80::a9fe:a9fe]/',
                'http://[::ffff:169.254.169.254]/', 'http://0.1.2.3/'):
        assert 'specifically' in _refusal(url, [url.split('/')[2]],
                                          everything), url
    for url in ('http://0.0.0.0/', 'http://224.0.0.1/',
                'http://255.255.255.255/', 'http://[ff02::1]/'):
        assert 'never polled' in _refusal(url, [url.split('/')[2]],
                                          everything + [url.split('/')[2]])


def test_a_name_is_resolved_once_and_every_address_checked():
    def resolve(host, port, type=None):
        return [(None, None, None, '', ('10.0.0.7', port)),
                (None, None, None, '', ('169.254.169.254', port))]

    with pytest.raises(poll_url_guard.Refused) as refused:
        poll_url_guard.destination(
            'http://health.example/h', [], ['health.example'],
            poll_url_guard.allowed_networks(['0.0.0.0/0']), resolve=resolve)
    assert '169.254.169.254' in str(refused.value)
    assert 'not in [heat_health] poll_url_allowed_hosts' in _refusal(
        'http://health.example/h', [], TENANT)


@pytest.mark.parametrize('entry', ['10.0.0.0/33', 'ten', '10.0.0.1:0',
                                   '[::1]:x', '10.0.0.1:99999'])
def test_bad_allowed_networks_entries_are_named(entry):
    with pytest.raises(ValueError) as error:
        poll_url_guard.allowed_networks([entry])
    assert entry in str(error.value)


def test_checker_reads_allowed_networks_and_refuses(web):
    checker = poll_url.PollUrlChecker(lambda o: None, max_workers=1,
                                      allowed_hosts=[],
                                      allowed_networks=['192.0.2.0/24'])
    try:
        found = checker.check(TARGET, _options('http://{ip}/health'))
    finally:
        checker.stop()
    assert found.verdict == obs.UNKNOWN
    assert 'poll_url_allowed_networks' in found.reason


def test_empty_healthy_pattern_is_refused(web, checker):
    found = checker.check(TARGET, _options(
        web + '/health', **{poll_url_rules.HEALTHY_RESPONSE: ''}))
    assert found.verdict == obs.UNKNOWN


def _without_pattern(url):
    options = _options(url)
    del options[poll_url_rules.HEALTHY_RESPONSE]
    return options


@pytest.mark.parametrize('path,verdict', [
    ('/health', obs.HEALTHY), ('/wrong', obs.HEALTHY),
    ('/created', obs.HEALTHY), ('/broken', obs.UNHEALTHY),
    ('/missing', obs.UNHEALTHY), ('/moved', obs.UNHEALTHY),
])
def test_without_pattern_any_2xx_is_healthy(web, checker, path, verdict):
    found = checker.check(TARGET, _without_pattern(web + path))
    assert found.verdict == verdict
    options = dict(_without_pattern(web + path),
                   **{poll_url_rules.HEALTHY_RESPONSE: None})
    assert checker.check(TARGET, options).verdict == verdict


# Python's re backtracks through the 2**n ways of splitting n a's before it
# gives up on the 'b': with these bodies it would never finish.
CATASTROPHIC = r'(a+)+$'


def test_matching_takes_linear_time():
    started = time.monotonic()
    pattern = poll_url_rules.healthy_pattern(CATASTROPHIC)
    assert pattern.search('a' * 100000 + 'b') is None
    assert time.monotonic() - started < 2
    assert pattern.search('a' * 100000) is not None


def test_check_with_catastrophic_pattern_answers_at_once(web, checker):
    started = time.monotonic()
    found = checker.check(TARGET, _options(
        web + '/aaa', **{poll_url_rules.HEALTHY_RESPONSE: CATASTROPHIC}))
    assert time.monotonic() - started < 2
    assert found.verdict == obs.UNHEALTHY
    assert 'without' in found.reason


@pytest.mark.parametrize('pattern', [r'(a)\1', r'ok(?=!)', r'(?<!n)ok'])
def test_patterns_re2_cannot_match_are_errors(pattern):
    with pytest.raises(ValueError):
        poll_url_rules.healthy_pattern(pattern)


def test_stored_pattern_re2_cannot_match_is_refused(web, checker):
    """Never matched with Python's re instead: the check is refused."""
    del _Handler.requests[:]
    found = checker.check(TARGET, _options(
        web + '/health', **{poll_url_rules.HEALTHY_RESPONSE: r'(ok)\1'}))
    assert found.verdict == obs.UNKNOWN
    assert 'not RE2 syntax' in found.reason
    assert _Handler.requests == []


def test_template_expands_only_its_variables():
    assert poll_url_rules.expand('http://{ip}:80/{id}/{name}', TARGET) == (
        'http://10.0.0.5:80/%s/web-0' % SERVER)
    six = poll_url.Target('s', 'a b/c', ['fd00::5'])
    assert poll_url_rules.expand('http://{ip}/{name}', six) == (
        'http://[fd00::5]/a%20b%2Fc')
    assert poll_url_rules.expand('http://{ip}/{host}{id.__class__}',
                                 TARGET) == (
        'http://10.0.0.5/{host}{id.__class__}')


@pytest.mark.parametrize('template,missing', [
    ('http://127.0.0.1:9/{name}', "server's name is not known"),
    ('http://{ip}:9/health', 'no known IP address'),
])
def test_unknown_variables_are_not_guessed(checker, template, missing):
    """Before Nova has listed a server: no check, no verdict either way."""
    found = checker.check(poll_url.Target(SERVER, None, []),
                          _options(template))
    assert found.verdict == obs.UNKNOWN
    assert missing in found.reason


def test_template_against_the_server(web, checker):
    template = web + '/{id}/{name}/health'
    assert checker.check(TARGET, _options(template)).verdict == obs.HEALTHY


def test_submit_returns_at_once_and_skips_a_running_check(web, checker):
    options = _options(web + '/hang', **{poll_url_rules.TIMEOUT: 0.5,
                                         poll_url_rules.RETRY_LIMIT: 1,
                                         poll_url_rules.RETRY_INTERVAL: 0.2})
    started = time.monotonic()
    assert checker.submit(TARGET, options)
    assert time.monotonic() - started < 0.1
    assert checker.running(SERVER)
    assert not checker.submit(TARGET, options)
    deadline = time.monotonic() + 5
    while not checker.seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [o.verdict for o in checker.seen] == [obs.UNHEALTHY]
    assert '(2 attempts)' in checker.seen[0].reason
    assert not checker.running(SERVER)
    assert checker.submit(TARGET, _options(web + '/health'))
    deadline = time.monotonic() + 5
    while len(checker.seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert checker.seen[1].verdict == obs.HEALTHY


def test_hung_servers_do_not_starve_the_others(web, checker):
    """A healthy server gets its answer while hung ones wait to retry.

    Two workers, both hung servers between attempts.
    """
    hung = _options(web + '/hang', **{poll_url_rules.TIMEOUT: 0.3,
                                      poll_url_rules.RETRY_LIMIT: 3,
                                      poll_url_rules.RETRY_INTERVAL: 0.5})
    for n in range(2):
        checker.submit(poll_url.Target('hung-%d' % n, 'h', []), hung)
    time.sleep(0.4)
    checker.submit(TARGET, _options(web + '/health'))
    deadline = time.monotonic() + 1.5
    while not checker.seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [(o.server_id, o.verdict) for o in checker.seen] == [
        (SERVER, obs.HEALTHY)]


def test_errors_in_observe_are_contained(web):
    calls = []

    def observe(observation):
        calls.append(observation)
        raise RuntimeError('tracker gone')

    checker = poll_url.PollUrlChecker(observe, max_workers=1,
                                      allowed_hosts=['127.0.0.1'],
                                      allowed_networks=['127.0.0.1'])
    try:
        for _ in range(2):
            assert checker.submit(TARGET, _options(web + '/health'))
            deadline = time.monotonic() + 5
            while checker.running(SERVER) and time.monotonic() < deadline:
                time.sleep(0.02)
    finally:
        checker.stop()
    assert len(calls) == 2


@pytest.mark.parametrize('template,refusal', [
    ('http://{ip}:8080/{name}?id={id}', None),
    ('https://[fd00::5]/health', None),
    ('http://[::1/', 'malformed host'),
    ('http://user:secret@{ip}/', 'credentials'),
    ('http://169.254.169.254\\@{ip}/', 'backslash'),
    ('http://0x7f.1/', 'dotted decimal'),
    ('ftp://{ip}/', 'not http or https'),
])
def test_templates_refused_at_validation(template, refusal):
    found = poll_url_rules.poll_url_refusal_at_validation(template)
    if refusal is None:
        assert found is None
    else:
        assert refusal in found
        assert 'secret' not in found
