"""Nova notification listeners in worker processes: protocol and care.

The workers here are small Python programs speaking the workers' protocol,
so what is tested is the engine's side: what it sends, what it makes of
what it receives, and what it does when a worker dies or must stop.
"""

import datetime
import json
import sys
import textwrap
import threading
import time

from heat_health.engine.monitor import listener_workers as lw
from heat_health.policy import observation as obs

SERVER = '0b0a6c7e-4a4c-4d53-9a2c-2a1e4c51f0d1'
WHEN = datetime.datetime(2026, 11, 22, 12, 0, 1, 250000)


def program(body):
    return [sys.executable, '-c', textwrap.dedent(body)]


# Echoes each watch set back as one observation per server, reports a
# count, and exits at EOF.
ECHO = program('''
    import json, sys
    for line in sys.stdin:
        for server in json.loads(line)['watch']:
            print(json.dumps({'o': [server, 'UNHEALTHY', 'seen',
                                    'LIFECYCLE_EVENTS',
                                    '2026-11-22T12:00:01.250000']}),
                  flush=True)
        print(json.dumps({'handled': 7}), flush=True)
''')


class Collected(object):
    def __init__(self):
        self.items = []
        self.changed = threading.Condition()

    def __call__(self, observation):
        with self.changed:
            self.items.append(observation)
            self.changed.notify_all()

    def wait(self, count, timeout=10):
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.items) >= count,
                                         timeout), self.items
            return list(self.items)


def test_observation_survives_the_trip_between_processes():
    sent = obs.Observation(SERVER, obs.UNHEALTHY, 'Nova notification x',
                           obs.LIFECYCLE_EVENTS, WHEN)
    line = json.dumps({'o': obs.to_wire(sent)})
    assert obs.from_wire(json.loads(line)['o']) == sent


def test_watched_servers_reach_every_worker_and_observations_come_back():
    seen = Collected()
    workers = lw.ListenerWorkers(seen, 2, command=ECHO)
    workers.start()
    try:
        # Each new worker is sent the current set (empty here) first.
        workers.watch({SERVER})
        items = seen.wait(2)
        assert items[0] == obs.Observation(SERVER, obs.UNHEALTHY, 'seen',
                                           obs.LIFECYCLE_EVENTS, WHEN)
        deadline = time.monotonic() + 5
        while workers.handled != 14 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert workers.handled == 14
    finally:
        workers.stop()


def test_a_worker_that_dies_is_started_again_and_told_what_is_watched(
        caplog):
    seen = Collected()
    # Reports what it was told, then dies at once.
    dying = program('''
        import json, sys
        for server in json.loads(sys.stdin.readline())['watch']:
            print(json.dumps({'o': [server, 'HEALTHY', 'up',
                                    'LIFECYCLE_EVENTS',
                                    '2026-11-22T12:00:01']}), flush=True)
        sys.exit(3)
    ''')
    workers = lw.ListenerWorkers(seen, 1, command=dying)
    workers.watch({SERVER})
    workers.start()
    try:
        items = seen.wait(2, timeout=15)
        assert [o.server_id for o in items[:2]] == [SERVER, SERVER]
    finally:
        workers.stop()
    assert 'exited with status 3; starting it again' in caplog.text


def test_stop_ends_workers_through_end_of_input():
    workers = lw.ListenerWorkers(Collected(), 2, command=ECHO)
    workers.start()
    deadline = time.monotonic() + 10
    while (any(w._proc is None for w in workers._workers) and
           time.monotonic() < deadline):
        time.sleep(0.01)
    procs = [w._proc for w in workers._workers]
    started = time.monotonic()
    workers.stop()
    assert all(p.poll() == 0 for p in procs)
    assert time.monotonic() - started < 5


def test_a_worker_deaf_to_its_input_is_killed_at_stop():
    deaf = program('''
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
    ''')
    workers = lw.ListenerWorkers(Collected(), 1, command=deaf)
    workers.start()
    deadline = time.monotonic() + 10
    while workers._workers[0]._proc is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc = workers._workers[0]._proc
    workers.stop(timeout=1)
    assert proc.poll() is not None


def test_garbage_from_a_worker_is_logged_not_fatal(caplog):
    seen = Collected()
    noisy = program('''
        import json, sys
        print('not json', flush=True)
        print(json.dumps({'o': ['s', 'HEALTHY', 'r', 'LIFECYCLE_EVENTS',
                                '2026-11-22T12:00:01']}), flush=True)
        sys.stdin.read()
    ''')
    workers = lw.ListenerWorkers(seen, 1, command=noisy)
    workers.start()
    try:
        assert seen.wait(1)[0].server_id == 's'
    finally:
        workers.stop()
    assert 'Bad message from listener worker 0' in caplog.text


def test_config_args_name_the_engine_configuration():
    class Conf(object):
        config_file = ['/etc/heat/heat.conf']
        config_dir = ['/etc/heat/heat.conf.d']
    assert lw.config_args(Conf()) == [
        '--config-file', '/etc/heat/heat.conf',
        '--config-dir', '/etc/heat/heat.conf.d']


def test_no_worker_is_started_once_stopping(tmp_path):
    starts = tmp_path / 'starts'
    # Notes each start, then dies at once: the engine keeps restarting it.
    dying = program('''
        import sys
        with open(%r, 'a') as f:
            f.write('started\\n')
        sys.exit(1)
    ''' % str(starts))
    workers = lw.ListenerWorkers(Collected(), 1, command=dying)
    workers.start()
    deadline = time.monotonic() + 10
    while not starts.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    workers.stop(timeout=5)
    count = len(starts.read_text().splitlines())
    time.sleep(2.5)   # longer than the first restart delays
    assert len(starts.read_text().splitlines()) == count
    assert not workers._workers[0]._thread.is_alive()
