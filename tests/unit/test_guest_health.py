"""Health URLs of real Nova's guests: the fault driver's control API
answers for a guest's application, fakecloud's health endpoint asks the
computes for the servers it does not hold.

Servers of the test's own on 127.0.0.1. The fault driver itself (its
``hang`` fault and what cures it) needs Nova: it runs in a process of its
own, so that Nova's options stay out of this one.
"""

import http.client
import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.fakecloud import health_http
from tests.fakecloud import state
from tests.fault_driver import control

REPO = pathlib.Path(__file__).resolve().parents[2]
GUEST = '4d1c2b7e-0f3a-4c55-9e2d-6a8b1f0c3e71'
OTHER = '9a7e3c21-5b6d-4f80-8c1e-2d4f6a8b0c93'
GONE = 'c3f1e2d4-7a8b-4c9d-8e0f-1a2b3c4d5e6f'


class StubDriver(object):
    """What the control API asks a driver: each guest's verdict."""

    def __init__(self, verdicts=None):
        # uuid -> (status, text), or None while its application hangs
        self.verdicts = dict(verdicts or {})

    def health(self, guest):
        return self.verdicts.get(guest, (404, 'no guest %s\n' % guest))


@pytest.fixture
def serve():
    """Starts control APIs of stub drivers; stops them after the test."""
    started = []

    def start(driver, hang_cap=5):
        httpd = control.serve(driver, 0, hang_cap=hang_cap)
        started.append(httpd)
        return 'http://127.0.0.1:%d' % httpd.server_address[1]
    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def _get(url, path, timeout=5):
    """(status, text) of GET; None when closed without an answer."""
    host, port = url[len('http://'):].split(':')
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request('GET', path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    except http.client.RemoteDisconnected:
        return None
    finally:
        conn.close()


def _free_port():
    """A port of 127.0.0.1 nothing listens on (a compute that is down)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


# The control API's health URL

def test_running_guest_answers_ok_and_others_as_the_driver_says(serve):
    url = serve(StubDriver({GUEST: (200, 'ok\n'),
                            OTHER: (503, 'guest is shutdown\n')}))
    assert _get(url, '/%s/health' % GUEST) == (200, 'ok\n')
    assert _get(url, '/%s/health' % OTHER) == (503, 'guest is shutdown\n')
    assert _get(url, '/%s/health' % 'unknown')[0] == 404
    # The control API's own paths are unchanged.
    assert _get(url, '/guests')[0] == 404


def test_hung_application_is_held_then_closed_without_an_answer(serve):
    url = serve(StubDriver({GUEST: None}), hang_cap=0.5)
    start = time.monotonic()
    assert _get(url, '/%s/health' % GUEST) is None
    assert 0.5 <= time.monotonic() - start < 3


def test_held_check_answers_once_the_hang_ends(serve):
    driver = StubDriver({GUEST: None})
    url = serve(driver, hang_cap=10)
    threading.Timer(0.5, driver.verdicts.__setitem__,
                    (GUEST, (200, 'ok\n'))).start()
    start = time.monotonic()
    assert _get(url, '/%s/health' % GUEST) == (200, 'ok\n')
    assert time.monotonic() - start < 3


# fakecloud's health endpoint in front of the computes

def _health(tmp_path, computes, hang_cap=5):
    where = tmp_path / 'fault-driver.json'
    where.write_text(json.dumps(computes))
    store = state.Store('fakecloud-compute', 10)
    return health_http.Health(store, hang_cap,
                              health_http.Computes(str(where), hang_cap))


def test_a_server_fakecloud_does_not_hold_is_asked_of_the_computes(
        serve, tmp_path):
    health = _health(tmp_path, {
        'compute1': serve(StubDriver({OTHER: (200, 'ok\n')})),
        'compute2': serve(StubDriver({GUEST: (503, 'guest is paused\n')}))})
    assert health.answer('/%s/health' % GUEST) == (503, 'guest is paused\n')
    assert health.answer('/%s/health' % OTHER) == (200, 'ok\n')
    assert health.answer('/%s/health' % GONE)[0] == 404


def test_a_hung_guest_on_a_compute_is_closed_without_an_answer(
        serve, tmp_path):
    health = _health(tmp_path, {
        'compute1': serve(StubDriver()),
        'compute2': serve(StubDriver({GUEST: None}), hang_cap=0.3)})
    assert health.answer('/%s/health' % GUEST) == (None, None)


def test_a_compute_that_does_not_answer_makes_an_unknown_server_503(
        serve, tmp_path):
    down = 'http://127.0.0.1:%d' % _free_port()
    health = _health(tmp_path, {'compute1': down,
                                'compute2': serve(StubDriver())})
    code, text = health.answer('/%s/health' % GUEST)
    assert code == 503 and 'compute1' in text, text
    # Only server ids are asked about: what is not a UUID is no server.
    assert health.answer('/probe/health') == (404, 'no such server\n')


def test_no_compute_answering_is_no_real_nova(tmp_path):
    """A file left from real Nova while fakecloud's runs: as without."""
    health = _health(tmp_path, {
        'compute1': 'http://127.0.0.1:%d' % _free_port()})
    assert health.answer('/%s/health' % GUEST) == (404, 'no such server\n')


def test_no_file_no_computes(tmp_path):
    store = state.Store('fakecloud-compute', 10)
    health = health_http.Health(store, 5, health_http.Computes(
        str(tmp_path / 'missing.json'), 5))
    assert health.answer('/%s/health' % GUEST) == (404, 'no such server\n')
    assert health_http.Computes(None, 5).urls() == {}


# The fault driver's hang (needs Nova)

DRIVER_SCRIPT = r'''
import json, sys, tempfile, time, types
from nova import conf
from nova.compute import power_state
from nova.virt import fake
from tests.fault_driver import driver

conf.CONF([], default_config_files=[])
state_path = tempfile.mkdtemp()
conf.CONF.set_override('state_path', state_path)
found = []
drv = driver.FaultDriver(None)
drv.emit_event = lambda event: None
guest = types.SimpleNamespace(
    uuid='g1', name='g1', flavor=types.SimpleNamespace(
        vcpus=1, memory_mb=512, root_gb=1))


def boot():
    drv.instances['g1'] = fake.FakeInstance('g1', power_state.RUNNING, 'g1')


def note(what):
    found.append([what, drv.health('g1')])


boot()
note('running')
made = drv.inject('g1', 'hang')
found.append(['faulted_at', abs(made['faulted_at'] - time.time()) < 5])
note('hang')
# Kept on disk: a nova-compute started again finds the hang.
drv = driver.FaultDriver(None)
drv.emit_event = lambda event: None
note('restarted')
drv.reboot(None, guest, None, 'SOFT')
note('rebooted')
drv.inject('g1', 'hang')
drv.inject('g1', 'pause')
note('paused')
drv.unpause(guest)
note('unpaused')
drv.inject('g1', 'reset')
note('reset')
drv.inject('g1', 'hang')
drv.power_off(guest)
drv.power_on(None, guest, None)
note('power cycled')
drv.inject('g1', 'hang')
drv.inject('g1', 'crash')
note('crashed')
drv.power_on(None, guest, None)
note('started')
drv.inject('g1', 'hang')
drv.destroy(None, guest, None)
drv.spawn(None, guest, None, None, None, None)
note('rebuilt')
drv.inject('g1', 'lose')
note('lost')
try:
    drv.inject('g1', 'hang')
except KeyError:
    found.append(['hang of a lost guest', 'KeyError'])
print(json.dumps(found))
'''


@pytest.mark.skipif(importlib.util.find_spec('nova') is None,
                    reason='needs Nova')
def test_fault_driver_hang_and_what_cures_it():
    result = subprocess.run(
        [sys.executable, '-W', 'ignore', '-c', DRIVER_SCRIPT],
        capture_output=True, text=True, timeout=120, cwd=str(REPO),
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == 0, result.stderr
    found = dict((what, tuple(v) if isinstance(v, list) else v)
                 for what, v in json.loads(result.stdout.splitlines()[-1]))
    ok = (200, 'ok\n')
    assert found == {
        'running': ok,
        'hang': None,
        'restarted': None,
        'rebooted': ok,
        'paused': (503, 'guest is paused\n'),
        # Paused, the guest kept its memory: the application still hangs.
        'unpaused': None,
        'reset': ok,
        'power cycled': ok,
        'crashed': (503, 'guest is crashed\n'),
        'started': ok,
        'rebuilt': ok,
        'lost': (404, 'no guest g1 on this host\n'),
        'hang of a lost guest': 'KeyError',
        'faulted_at': True,
    }
