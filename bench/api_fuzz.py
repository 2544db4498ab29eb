"""Fuzz heat-health's API: 10,000 random requests, the 5xx counted.

The requests of tests/unit/security/test_api_fuzz.py (Heat's pipeline, the
real engine over oslo.messaging's fake driver, sqlite databases), more of
them: prints how many were sent, the statuses answered, every 5xx or
traceback, and the time taken. ``--requests N`` sets how many.

    python bench/api_fuzz.py [--requests 10000]
"""

import argparse
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from tests.unit.security import test_api_fuzz  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--requests', type=int, default=10000)
    args = parser.parse_args()
    outcome = {}

    class Bench(test_api_fuzz.TestApiFuzz):
        def test_bench(self):
            started = time.monotonic()
            statuses, failures = self.fuzz(args.requests)
            outcome.update(statuses=statuses, failures=failures,
                           seconds=time.monotonic() - started)

    result = unittest.TextTestRunner(stream=open(os.devnull, 'w')).run(
        unittest.TestSuite([Bench('test_bench')]))
    if not outcome:
        for _test, error in result.errors + result.failures:
            print(error)
        return 2
    statuses, failures = outcome['statuses'], outcome['failures']
    print('requests: %d in %.1f s' % (sum(statuses.values()),
                                      outcome['seconds']))
    print('statuses: %s' % ', '.join('%d: %d' % item
                                     for item in sorted(statuses.items())))
    print('5xx or traceback: %d' % len(failures))
    for failure in failures:
        print('  %r' % (failure,))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
