"""The deployment's errors logged while a failed test ran.

A functional test that fails on another service's answer ("Internal Error")
says nothing of the cause; the service's own log does. The lines logged at
ERROR (and uwsgi's 5xx request lines) during the test are attached to the
failure report.
"""

import datetime
import re

from tests.functional import cloud

SERVICES = ('heat-api', 'heat-engine', 'heat-health-engine', 'octavia-api',
            'octavia-worker', 'keystone', 'fakecloud')
MAX_LINES = 40
_STAMP = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)')
_UWSGI_5XX = re.compile(r'\(HTTP/1\.1 5\d\d\)')


def _stamp(line):
    match = _STAMP.match(line)
    if match:
        return datetime.datetime.strptime(match.group(1),
                                          '%Y-%m-%d %H:%M:%S')
    return None


def errors_since(started):
    """ERROR lines and 5xx answers logged at or after ``started``."""
    since = started.replace(microsecond=0)
    found = []
    for service in SERVICES:
        path = cloud.STATE_DIR / 'logs' / ('%s.log' % service)
        if not path.exists():
            continue
        current = None
        with path.open(errors='replace') as log:
            for line in log:
                current = _stamp(line) or current
                if current is None or current < since:
                    continue
                if ' ERROR ' in line or _UWSGI_5XX.search(line):
                    found.append('%s: %s' % (service, line.rstrip()[:300]))
    if len(found) > MAX_LINES:
        more = len(found) - MAX_LINES
        found = found[:MAX_LINES] + ['... %d more' % more]
    return '\n'.join(found)
