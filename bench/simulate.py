"""Seeded simulation runs of the acting core, checked at every step.

Runs ``tests/simulation/explore.py`` seed after seed (from --seed, each
run --run-steps steps long) until --steps steps were taken in all, with
--engines engines (2 or 3 drawn from each seed when not given). Prints the
steps per second and the number of runs that broke an invariant, and the
first one's seed and trace, which ``explore(seed, steps)`` replays; exits
1 on any violation. Re-executes itself with PYTHONHASHSEED=0 so a trace
replays in another process too.

    python bench/simulate.py --steps 40000 [--seed 0] [--engines 2]
        [--run-steps 200]
"""

import argparse
import logging
import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.simulation import explore  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, required=True,
                        help='steps in all, over consecutive seeds')
    parser.add_argument('--seed', type=int, default=0,
                        help='the first seed')
    parser.add_argument('--engines', type=int, default=None,
                        help='engines of each world (default: 2-3 by seed)')
    parser.add_argument('--run-steps', type=int, default=200,
                        help='steps of each seed')
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    taken, runs, failed = 0, 0, []
    seed = args.seed
    started = time.monotonic()
    crashed = []
    while taken < args.steps:
        steps = min(args.run_steps, args.steps - taken)
        try:
            result = explore.explore(seed, steps, engines=args.engines)
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            # The explorer itself broke: named by its seed, never the end
            # of a long run.
            crashed.append((seed, repr(error)))
            taken += steps
            runs += 1
            seed += 1
            continue
        taken += result.steps
        runs += 1
        if result.violation:
            failed.append(result)
        seed += 1
    spent = time.monotonic() - started
    print('%d steps in %d runs (seeds %d-%d) in %.1fs: %.0f steps/s' % (
        taken, runs, args.seed, seed - 1, spent, taken / spent))
    print('%d runs broke an invariant' % len(failed))
    for crashed_seed, error in crashed:
        print('  seed %d: the explorer raised %s' % (crashed_seed, error))
    for result in failed:
        print('  seed %d, step %d: %s' % (result.seed, result.steps,
                                          result.violation))
    if failed:
        print('first violation:')
        print(failed[0].report())
        return 1
    return 1 if crashed else 0


if __name__ == '__main__':
    if os.environ.get('PYTHONHASHSEED') != '0':
        env = dict(os.environ, PYTHONHASHSEED='0')
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    sys.exit(main())
