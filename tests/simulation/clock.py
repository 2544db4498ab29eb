"""The world's virtual clock: every reader of time sees the same moment.

Product code reads time through ``oslo_utils.timeutils.utcnow`` (the
database API, the tracker's and the recovery loop's default clocks), so the
clock drives timeutils' override; the Drainer reads seconds. Time moves
only when the world (or a virtual sleep) moves it.
"""

import datetime
import warnings

from oslo_utils import timeutils

EPOCH = datetime.datetime(2026, 1, 1, 0, 0, 0)


def _override(when):
    # The override is deprecated in favour of mock.patch, which cannot
    # reach the clocks bound as default arguments at import time.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        if when is None:
            timeutils.clear_time_override()
        else:
            timeutils.set_time_override(when)


class VirtualClock(object):

    def __init__(self, start=EPOCH):
        self._now = start
        self.start = start
        _override(start)

    def now(self):
        """Naive UTC, as timeutils.utcnow gives it."""
        return self._now

    __call__ = now

    def seconds(self):
        """Seconds since the start (a monotonic clock for the Drainer)."""
        return (self._now - self.start).total_seconds()

    def advance(self, seconds):
        if seconds < 0:
            raise ValueError('time does not go back')
        self._now += datetime.timedelta(seconds=seconds)
        _override(self._now)

    def close(self):
        _override(None)
