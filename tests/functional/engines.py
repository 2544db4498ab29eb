"""A heat-health-engine of a test's own, next to the deployment's.

It reads the deployment's heat.conf, plus the extra options given, and runs
in a process group of its own so that killing it ends its listener workers.
"""

import contextlib
import os
import pathlib
import signal
import subprocess
import sys

from tests.functional import cloud

HEAT_CONF = cloud.STATE_DIR / 'etc' / 'heat.conf'


def localcloud(*args):
    """tools/localcloud with these arguments; its output."""
    result = subprocess.run([str(cloud.REPO / 'tools' / 'localcloud')] +
                            list(args), capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def deployment_engine_pid():
    """The pid (and process group) of the deployment's engine."""
    return int((cloud.STATE_DIR / 'run' / 'heat-health-engine.pid')
               .read_text().split()[0])


@contextlib.contextmanager
def own_engine(user, workdir, extra_options=''):
    """Run a heat-health-engine until the block ends; yields its log path.

    :param user: a Cloud, for its wait_for.
    :param extra_options: heat.conf sections read after the deployment's.
    """
    log = pathlib.Path(workdir) / 'own-engine.log'
    extra = pathlib.Path(workdir) / 'own-engine.conf'
    # In a file, not on the command line: the listener workers read it too.
    extra.write_text('[DEFAULT]\nlog_file = %s\n%s' % (log, extra_options))
    args = [str(pathlib.Path(sys.executable).parent / 'heat-health-engine'),
            '--config-file', str(HEAT_CONF), '--config-file', str(extra)]
    engine = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        user.wait_for(lambda: log.exists() and 'serving topic' in
                      log.read_text(), 'the test\'s engine to serve',
                      timeout=60)
        yield log
    finally:
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()
