"""One thread that runs callbacks at given times.

Servers move through intermediate states over seconds; one timer thread with
a heap serves 10,000 servers where a thread or a threading.Timer per step
would not.
"""

import heapq
import itertools
import logging
import threading
import time

LOG = logging.getLogger(__name__)


class Scheduler(object):

    def __init__(self):
        self._heap = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name='scheduler',
                                        daemon=True)
        self._thread.start()

    def call_later(self, delay, func, *args):
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay,
                                        next(self._order), func, args))
            self._cond.notify()

    def _run(self):
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    timeout = (self._heap[0][0] - time.monotonic()
                               if self._heap else None)
                    self._cond.wait(timeout)
                _, _, func, args = heapq.heappop(self._heap)
            try:
                func(*args)
            except Exception:
                LOG.exception('scheduled %s failed', func)
