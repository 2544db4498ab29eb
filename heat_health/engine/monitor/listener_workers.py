"""LIFECYCLE_EVENTS in worker processes of the engine.

One Python process drains a few thousand notifications a second: nearly all
of that time is spent inside oslo.messaging and the AMQP client, for
notifications about servers nobody watches. ``[heat_health]
notification_workers`` processes each run the one LifecycleListener of
lifecycle_events in the engine's pool, so the broker spreads Nova's
notifications over them and each is still handled once across all engines.

The engine (``ListenerWorkers``) tells its workers which servers are watched
and receives their observations; a worker that dies is started again.
Both directions are JSON lines: on the worker's stdin, ``{"watch": [ids]}``
(the whole set, each time it changes); on its stdout, ``{"o": [server_id,
verdict, reason, source, observed_at]}`` and ``{"handled": n}`` (how many
notifications it has handled so far). A worker takes nothing off the queue
before its first watch set has arrived, and EOF on stdin stops it, so a
worker never outlives its engine.
"""

import json
import os
import subprocess
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from heat_health.engine.monitor import lifecycle_events
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

# How often a worker reports its count of handled notifications.
REPORT_INTERVAL = 0.25
# Longest pause before a worker that keeps dying is started again.
MAX_RESTART_DELAY = 30


def config_args(conf=cfg.CONF):
    """The command-line arguments that make a worker read our config."""
    args = []
    for option, flag in (('config_file', '--config-file'),
                         ('config_dir', '--config-dir')):
        try:
            paths = getattr(conf, option) or ()
        except cfg.NoSuchOptError:
            # The configuration was not read from a command line.
            paths = ()
        for path in paths:
            args += [flag, path]
    return args


class _Worker(object):
    """One worker process, started again whenever it dies."""

    def __init__(self, number, command, owner):
        self.number = number
        self.handled = 0
        self._command = command
        self._owner = owner
        self._proc = None
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name='heat-health-listener-worker-%d' % number)

    def start(self):
        self._thread.start()

    def tell(self):
        """Send the servers watched now to the process.

        Read under the send lock, so the last set sent is the latest.
        """
        with self._send_lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return
            try:
                proc.stdin.write(self._owner.watch_line() + '\n')
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                # It died: its reader starts it again and sends the set.
                pass

    def stop(self, timeout):
        with self._send_lock:
            proc = self._proc
            if proc is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                LOG.warning('Listener worker %d (pid %d) did not stop in '
                            '%ss: killing it', self.number, proc.pid,
                            timeout)
                proc.kill()
                proc.wait()
        self._thread.join(timeout)

    def _run(self):
        failures = 0
        while True:
            started = time.monotonic()
            proc = self._spawn()
            if proc is None:
                break
            for line in proc.stdout:
                self._receive(line)
            code = proc.wait()
            if self._owner.stopping.is_set():
                break
            failures = failures + 1 if time.monotonic() - started < 60 else 1
            delay = min(MAX_RESTART_DELAY, 2 ** (failures - 1))
            LOG.error('Nova notification listener worker %(n)d (pid %(pid)d)'
                      ' exited with status %(code)s; starting it again in '
                      '%(delay)ss', {'n': self.number, 'pid': proc.pid,
                                     'code': code, 'delay': delay})
            self._owner.stopping.wait(delay)

    def _spawn(self):
        """A new process, or None once stopping.

        Checked under the lock ``stop`` takes: no process is started that
        ``stop`` would miss.
        """
        with self._send_lock:
            if self._owner.stopping.is_set():
                return None
            self._proc = subprocess.Popen(
                self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, bufsize=1, close_fds=True)
        LOG.info('Nova notification listener worker %(n)d started, pid '
                 '%(pid)d', {'n': self.number, 'pid': self._proc.pid})
        self.tell()
        return self._proc

    def _receive(self, line):
        try:
            message = json.loads(line)
            if 'o' in message:
                self._owner.observe(obs.from_wire(message['o']))
            elif 'handled' in message:
                self.handled = message['handled']
        except Exception:
            LOG.exception('Bad message from listener worker %d: %r',
                          self.number, line[:200])


class ListenerWorkers(object):
    """The engine's Nova notification listeners, in ``count`` processes.

    Same use as LifecycleListener (start, stop), plus ``watch``: the
    servers whose notifications are wanted, given whenever they change.

    :param observe: called with each Observation, from reader threads.
    :param args: the workers' command-line arguments; by default the
        engine's own configuration files.
    :param command: the whole command of a worker; by default this module
        run by this Python with ``args``.
    """

    def __init__(self, observe, count, args=None, conf=cfg.CONF,
                 command=None):
        self.observe = observe
        self.stopping = threading.Event()
        self._watched = []
        self._lock = threading.Lock()
        if command is None:
            command = [sys.executable, '-m', __name__] + (
                config_args(conf) if args is None else list(args))
        self._workers = [_Worker(n, command, self) for n in range(count)]

    @property
    def handled(self):
        """Notifications handled by all workers, as last reported."""
        return sum(w.handled for w in self._workers)

    def watch_line(self):
        with self._lock:
            return json.dumps({'watch': self._watched})

    def watch(self, server_ids):
        with self._lock:
            self._watched = sorted(server_ids)
        for worker in self._workers:
            worker.tell()

    def start(self):
        for worker in self._workers:
            worker.start()

    def stop(self, timeout=10):
        self.stopping.set()
        for worker in self._workers:
            worker.stop(timeout)


def worker_main(argv):
    """A worker: the LifecycleListener, steered over stdin and stdout."""
    # The protocol owns stdout: anything else printed goes to stderr.
    out = os.fdopen(os.dup(1), 'w', buffering=1)
    os.dup2(2, 1)
    logging.register_options(cfg.CONF)
    cfg.CONF(argv, project='heat', prog='heat-health-engine')
    logging.setup(cfg.CONF, 'heat-health-engine')

    out_lock = threading.Lock()
    watched = [frozenset()]
    listener = None

    def write(line):
        with out_lock:
            out.write(line + '\n')

    def observe(observation):
        write(json.dumps({'o': obs.to_wire(observation)}))

    def take(line):
        message = json.loads(line)
        if 'watch' in message:
            watched[0] = frozenset(message['watch'])
            if listener is not None:
                listener.watch()

    # The engine sends what is watched first: nothing is taken off the
    # queue before that is known.
    first = sys.stdin.readline()
    if not first:
        return
    take(first)
    listener = lifecycle_events.LifecycleListener(
        observe, lambda server_id: server_id in watched[0])
    listener.start()
    done = threading.Event()

    def report():
        last = None
        while not done.wait(REPORT_INTERVAL):
            if listener.handled != last:
                last = listener.handled
                write(json.dumps({'handled': last}))

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        for line in sys.stdin:
            take(line)
    finally:
        # EOF: the engine is stopping, or gone.
        listener.stop()
        done.set()
        reporter.join()
        write(json.dumps({'handled': listener.handled}))


if __name__ == '__main__':
    worker_main(sys.argv[1:])
