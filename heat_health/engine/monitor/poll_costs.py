"""What the engine spends per status poll cycle, logged for sizing.

With ``[heat_health] log_poll_costs`` each poll cycle logs one line with
what the whole engine spent since the previous cycle: Nova requests (and
how many of them listed servers), CPU seconds of the monitor loop and of
the process, database statements and rows written (every thread: the
listener, the recovery loop and RPC calls write too), resident memory, and
the poll URL checks started with their lateness, the full garbage
collections and their seconds (the whole heap: a large engine's longest
pause), and the monitor loop's CPU seconds per step. The capacity model
in the docs is made of these figures; an operator reads the same lines
to size a deployment.
"""

import collections
import contextlib
import gc
import resource
import threading
import time

from oslo_log import log as logging
import sqlalchemy as sa

LOG = logging.getLogger(__name__)

_WRITES = ('INSERT', 'UPDATE', 'DELETE')
# The table of heat-health's targets, whose rows are counted apart.
TARGETS = 'heat_health_target'


class _ProcessWide(object):
    """A count hooked once into the process, read by every PollCosts."""

    def __init__(self):
        self._lock = threading.Lock()
        self._installed = False

    def install(self):
        """Count from now on (once per process)."""
        with self._lock:
            if self._installed:
                return
            self._installed = True
        self._hook()


class StatementCounter(_ProcessWide):
    """Statements run and rows written through SQLAlchemy, process-wide."""

    def __init__(self):
        super(StatementCounter, self).__init__()
        self.statements = 0
        self.rows_written = 0
        self.target_rows_written = 0

    def _hook(self):
        # Every engine of the process.
        sa.event.listen(sa.engine.Engine, 'after_cursor_execute',
                        self._executed)

    def _executed(self, conn, cursor, statement, parameters, context,
                  executemany):
        written = targets = 0
        head = statement.lstrip()[:40]
        if head[:6].upper() in _WRITES:
            written = max(getattr(cursor, 'rowcount', 0) or 0, 0)
            if TARGETS in head:
                targets = written
        with self._lock:
            self.statements += 1
            self.rows_written += written
            self.target_rows_written += targets

    def read(self):
        with self._lock:
            return (self.statements, self.rows_written,
                    self.target_rows_written)


COUNTER = StatementCounter()


class FullCollections(_ProcessWide):
    """Full garbage collections and their seconds, process-wide.

    A full collection goes over every object of the heap, in whichever
    thread set it off: with a fleet's index in memory it is the longest
    pause of the engine, counted in the step it fell in.
    """

    def __init__(self):
        super(FullCollections, self).__init__()
        self.count = 0
        self.seconds = 0.0
        self._started = None

    def _hook(self):
        gc.callbacks.append(self._callback)

    def _callback(self, phase, info):
        if info.get('generation') != 2:
            return
        if phase == 'start':
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.count += 1
            self._started = None

    def read(self):
        return self.count, self.seconds


COLLECTIONS = FullCollections()


def rss_mb():
    """Peak resident memory of this process, in MB (Linux: KB units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb():
    """Resident memory now, in MB; the peak where /proc cannot be read."""
    try:
        with open('/proc/self/statm') as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return rss_mb()
    return pages * resource.getpagesize() / (1024.0 * 1024.0)


class PollCosts(object):
    """Differences between two poll cycles, as one log line.

    :param adapter: the monitor's NovaAdapter (its request counts).
    :param url_checker: the PollUrlChecker, or None.
    """

    def __init__(self, adapter, url_checker=None, counter=COUNTER,
                 full_collections=COLLECTIONS):
        self._adapter = adapter
        self._url_checker = url_checker
        self._counter = counter
        counter.install()
        self._collections = full_collections
        full_collections.install()
        self._last = None
        self._steps = collections.Counter()   # step -> CPU s this cycle

    @contextlib.contextmanager
    def step(self, name):
        """Count the CPU the monitor loop spends within, as ``name``."""
        start = time.thread_time()
        try:
            yield
        finally:
            self._steps[name] += time.thread_time() - start

    def _now(self):
        statements, rows, target_rows = self._counter.read()
        full, full_seconds = self._collections.read()
        return {'time': time.monotonic(), 'gc_full': full,
                'gc_seconds': full_seconds,
                'monitor_cpu': time.thread_time(),
                'cpu': time.process_time(),
                'requests': self._adapter.requests,
                'lists': getattr(self._adapter, 'server_lists', 0),
                'statements': statements, 'rows': rows,
                'target_rows': target_rows}

    def cycle(self, watched, observations):
        """Log what was spent since the last call (the first only starts)."""
        now = self._now()
        last, self._last = self._last, now
        if last is None:
            return None
        spent = {key: now[key] - last[key] for key in now}
        steps, self._steps = self._steps, collections.Counter()
        urls = (self._url_checker.take_stats() if self._url_checker
                else None) or {}
        spent.update(watched=watched, observations=observations,
                     rss=current_rss_mb(),
                     url_started=urls.get('started', 0),
                     url_skipped=urls.get('skipped', 0),
                     url_late_max=urls.get('late_max', 0.0),
                     url_late_p99=urls.get('late_p99', 0.0),
                     steps=', '.join('%s %.3f' % (name, seconds) for
                                     name, seconds in steps.most_common()))
        LOG.info('Poll costs: %(time).1f s since the last poll, '
                 '%(watched)d servers watched, %(observations)d news; '
                 '%(requests)d Nova requests (%(lists)d server lists); '
                 'CPU %(monitor_cpu).3f s monitor, %(cpu).3f s process; '
                 '%(statements)d database statements, %(rows)d rows '
                 'written (%(target_rows)d of targets); RSS %(rss).0f MB; '
                 'poll URL checks %(url_started)d started, '
                 '%(url_skipped)d skipped (previous still running), '
                 'late p99 %(url_late_p99).2f s, max %(url_late_max).2f s; '
                 'full garbage collections %(gc_full)d, %(gc_seconds).3f s; '
                 'monitor CPU s by step: %(steps)s', spent)
        return spent
