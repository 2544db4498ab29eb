"""Poll URL forms that try to reach anything but the server's own address.

Every row goes through the real checker with real sockets.  The server's
own fixed IP is ``OWN_IP``, where its health endpoint answers on one port,
the only entry of ``poll_url_allowed_networks``.  Recorders listen on
another loopback address (same port and another), on the own address's
other port, and on 127.0.0.1 at the same port: none may ever see a
connection.  Each row says what the user sees: the check refused, and
why, or the answer of the server's own endpoint.
"""

import pytest

from heat_health.engine.monitor import poll_url
from heat_health.policy import observation as obs
from heat_health.policy import poll_url_rules
from tests.unit.security import poll_listeners as listeners

SERVER = '6f1d3e52-93a4-4f0e-9a51-8d9b1b3c4e21'
FETCHED = 'fetched'


def _answer(path):
    if path.startswith('/redirect'):
        return 302, b'', [('Location', 'http://%s:%d/' % (
            listeners.OTHER_IP, _PLACES['port']))]
    return 200, b'ok', []


# Filled in by the fixture: the listeners' ports, for the rows' templates.
_PLACES = {}


@pytest.fixture(scope='module')
def places():
    server = listeners.Server(listeners.OWN_IP, _answer)
    port = server.port
    recorders = [listeners.Recorder(listeners.OTHER_IP, port),
                 listeners.Recorder(listeners.OTHER_IP),
                 listeners.Recorder(listeners.OWN_IP),
                 listeners.Recorder('127.0.0.1', port)]
    _PLACES.update(own=listeners.OWN_IP, port=port,
                   other=listeners.OTHER_IP, other_port=recorders[1].port,
                   own_other_port=recorders[2].port)
    yield server, recorders
    server.close()
    for recorder in recorders:
        recorder.close()


OWN = None  # the target's addresses: just its own fixed IP

# (poll URL template, the server's addresses or OWN, allowed hosts,
#  FETCHED or what the refusal says).
ROWS = [
    ('http://{ip}:%(port)d/health', OWN, [], FETCHED),
    ('http://%(own)s:%(port)d/health', OWN, [], FETCHED),
    ('HTTP://%(own)s:%(port)d/health', OWN, [], FETCHED),
    ('hTtP://{ip}:%(port)d', OWN, [], FETCHED),
    ('http://[::ffff:%(own)s]:%(port)d/', OWN, [], FETCHED),
    ('http://{ip}:%(port)d/x#@%(other)s:%(port)d/', OWN, [], FETCHED),
    ('http://{ip}:%(port)d/redirect', OWN, [], 'answered 302'),
    ('https://{ip}:%(port)d/', OWN, [], 'connection failed'),
    ('http://169.254.169.254\\@{ip}:%(port)d/latest/meta-data', OWN, [],
     'backslash'),
    ('http://%(other)s:%(port)d\\@{ip}:%(port)d/', OWN, [], 'backslash'),
    ('http://{ip}:%(port)d\\%(other)s/', OWN, [], 'backslash'),
    ('http://user:secret@{ip}:%(port)d/', OWN, [], 'credentials'),
    ('http://{ip}:%(port)d@%(other)s:%(port)d/', OWN, [], 'credentials'),
    ('http://%(other)s:%(port)d#@{ip}:%(port)d/', OWN, [], 'neither'),
    ('http://%(other)s:%(port)d?@{ip}:%(port)d/', OWN, [], 'neither'),
    ('http://%(other)s:%(port)d/', OWN, [], 'neither'),
    ('http://[fe80::1%%25lo]:%(port)d/', OWN, [], 'zone'),
    ('http://[::ffff:%(other)s]:%(port)d/', OWN, [], 'neither'),
    ('http://[::ffff:7f00:3e]:%(port)d/', OWN, [], 'neither'),
    ('http://[::1]:%(port)d/', OWN, [], 'neither'),
    ('http://2130706494:%(port)d/', OWN, [], 'dotted decimal'),
    ('http://0177.0.0.62:%(port)d/', OWN, [], 'dotted decimal'),
    ('http://0x7f.0.0.62:%(port)d/', OWN, [], 'dotted decimal'),
    ('http://0x7f00003e:%(port)d/', OWN, [], 'dotted decimal'),
    ('http://127.62:%(port)d/', OWN, [], 'dotted decimal'),
    ('http://%(own)s.:%(port)d/', OWN, [], 'dotted decimal'),
    ('http://localhost:%(port)d/', OWN, [], 'not in [heat_health] '
     'poll_url_allowed_hosts'),
    ('http://localhost.:%(port)d/', OWN, [], 'poll_url_allowed_hosts'),
    ('http://%(other)s.nip.io:%(port)d/', OWN, [], 'poll_url_allowed_hosts'),
    ('http://localhost:%(port)d/', OWN, ['localhost'],
     'not in [heat_health] poll_url_allowed_networks'),
    ('http://127\u30020\u30020\u300262:%(port)d/', OWN, [], 'non-ASCII'),
    ('http://\u24dbocalhost:%(port)d/', OWN, [], 'non-ASCII'),
    ('http://xn--ocalhost-wv3c:%(port)d/', OWN, [], 'poll_url_allowed_hosts'),
    ('http:/{ip}:%(port)d/', OWN, [], 'scheme://host'),
    ('http:{ip}:%(port)d/', OWN, [], 'scheme://host'),
    ('http:\\\\{ip}:%(port)d/', OWN, [], 'backslash'),
    ('file:///etc/passwd', OWN, [], 'not http or https'),
    ('gopher://{ip}:%(port)d/', OWN, [], 'not http or https'),
    ('http://{ip}:%(own_other_port)d/', OWN, [],
     'port %(own_other_port)d is not in'),
    ('http://{ip}:%(port)d:%(other_port)d/', OWN, [], 'malformed host'),
    ('http://[{ip}]:%(port)d/', OWN, [], 'IPv6'),
    ('http://{ip}:+%(port)d/', OWN, [], 'not a number'),
    ('http://{ip}:%(port)d /x', OWN, [], 'whitespace'),
    ('http://{ip}:%(port)d/\r\nHost: %(other)s', OWN, [], 'control'),
    ('http://[::ffff:169.254.169.254]/', OWN, [], 'neither'),
    # {ip} where the server's own address list is hostile: its first
    # IPv4 address is what {ip} expands to.
    ('http://{ip}:%(port)d/', ['127.0.0.1', '%(own)s'], [],
     'not in [heat_health] poll_url_allowed_networks'),
    ('http://{ip}:%(port)d/', ['%(other)s'], [],
     'not in [heat_health] poll_url_allowed_networks'),
    ('http://{ip}/latest/meta-data', ['169.254.169.254'], [],
     'not in [heat_health] poll_url_allowed_networks'),
    ('http://{ip}:%(port)d/', ['0.0.0.0'], [], 'never polled'),
    ('http://{ip}:%(port)d/', ['fe80::1%%lo'], [], 'zone'),
    ('http://{ip}:%(port)d/', ['%(own)s\\@%(other)s'], [], 'no host'),
]


def _fill(text, places):
    return text % places if isinstance(text, str) else text


@pytest.mark.parametrize('template,addresses,hosts,expected', ROWS,
                         ids=[r[0] for r in ROWS])
def test_poll_url_reaches_only_the_servers_own_address(
        places, template, addresses, hosts, expected):
    server, recorders = places
    addresses = [_fill(a, _PLACES) for a in (addresses or ['%(own)s'])]
    target = poll_url.Target(SERVER, 'web-0', addresses, 'policy-1',
                             'project-1')
    checker = poll_url.PollUrlChecker(
        lambda o: None, max_workers=1, allowed_hosts=hosts,
        allowed_networks=['%(own)s:%(port)d' % _PLACES])
    del server.requests[:]
    try:
        found = checker.check(target, {
            poll_url_rules.POLL_URL: _fill(template, _PLACES),
            poll_url_rules.RETRY_LIMIT: 0, poll_url_rules.TIMEOUT: 2})
    finally:
        checker.stop()

    assert [r.connections for r in recorders] == [[], [], [], []]
    assert found.policy_id == 'policy-1'
    assert 'secret' not in found.reason
    if expected == FETCHED:
        assert found.verdict == obs.HEALTHY, found.reason
        assert 'answered 200' in found.reason
        (path, headers), = server.requests
        assert headers['Host'].endswith(':%d' % _PLACES['port'])
        assert 'Authorization' not in headers
    else:
        expected = _fill(expected, _PLACES)
        assert expected in found.reason
        if 'refused' in found.reason:
            assert found.verdict == obs.UNKNOWN
            assert server.requests == []


def test_the_table_is_wide():
    assert len(ROWS) >= 30
