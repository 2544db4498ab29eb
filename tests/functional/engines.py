"""A heat-health-engine of a test's own, next to the deployment's.

It reads the deployment's heat.conf, plus the extra options given, and runs
in a process group of its own so that killing it ends its listener workers.
Only the local deployment (tools/localcloud) is reached this way: the tests
using this module are marked fakecloud.
"""

import contextlib
import os
import pathlib
import re
import shlex
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


# Commands that stop and start the deployment's heat-health-engine where
# tools/localcloud does not run it (devstack: systemctl on the
# devstack@heat-health-engine unit).
STOP_VARIABLE, START_VARIABLE = ('HEAT_HEALTH_ENGINE_STOP',
                                 'HEAT_HEALTH_ENGINE_START')


def engine_commands(environ):
    """(stop, start) argument lists from the environment, or None."""
    stop, start = environ.get(STOP_VARIABLE), environ.get(START_VARIABLE)
    if not (stop and start):
        return None
    return shlex.split(stop), shlex.split(start)


def _run(command):
    result = subprocess.run(command, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


@contextlib.contextmanager
def deployment_engine_stopped():
    """The deployment's heat-health-engine stopped, then started again."""
    commands = engine_commands(os.environ)
    if commands is None:
        localcloud('stop', 'heat-health-engine')
    else:
        _run(commands[0])
    try:
        yield
    finally:
        if commands is None:
            localcloud('up')
        else:
            _run(commands[1])


def deployment_pid(service):
    """The pid (and process group) of one of the deployment's services."""
    return int((cloud.STATE_DIR / 'run' / ('%s.pid' % service))
               .read_text().split()[0])


def deployment_engine_pid():
    """The pid (and process group) of the deployment's engine."""
    return deployment_pid('heat-health-engine')


class Engine(object):
    """A heat-health-engine process of a test's own.

    :param workdir: where its log and extra configuration go.
    :param name: tells several engines of one test apart.
    :param extra_options: heat.conf sections read after the deployment's.
    """

    def __init__(self, workdir, name='own-engine', extra_options=''):
        self.log = pathlib.Path(workdir) / ('%s.log' % name)
        self._conf = pathlib.Path(workdir) / ('%s.conf' % name)
        self._extra = extra_options
        self._process = None

    def start(self, user, timeout=60):
        """Start it and wait until it serves; returns self."""
        # In a file, not on the command line: the listener workers read it.
        self._conf.write_text('[DEFAULT]\nlog_file = %s\n%s'
                              % (self.log, self._extra))
        args = [str(pathlib.Path(sys.executable).parent /
                    'heat-health-engine'),
                '--config-file', str(HEAT_CONF),
                '--config-file', str(self._conf)]
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT, start_new_session=True)
        user.wait_for(lambda: self.engine_id, 'the test\'s engine to serve',
                      timeout=timeout)
        return self

    @property
    def engine_id(self):
        """Its engine id, once its log says it serves."""
        if not self.log.exists():
            return None
        found = re.search(r'heat-health-engine (\S+) serving topic',
                          self.log.read_text())
        return found and found.group(1)

    def kill(self):
        """kill -9 of the engine and its listener workers."""
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._process.wait()
        self._process = None


def deployment_engine_id():
    """The engine id of the deployment's own heat-health-engine."""
    log = cloud.STATE_DIR / 'logs' / 'heat-health-engine.log'
    found = re.findall(r'heat-health-engine (\S+) serving topic',
                       log.read_text())
    return found[-1] if found else None


@contextlib.contextmanager
def own_engine(user, workdir, extra_options=''):
    """Run a heat-health-engine until the block ends; yields its log path.

    :param user: a Cloud, for its wait_for.
    :param extra_options: heat.conf sections read after the deployment's.
    """
    engine = Engine(workdir, extra_options=extra_options)
    try:
        engine.start(user)
        yield engine.log
    finally:
        engine.kill()


@contextlib.contextmanager
def peer(user, tmp_path_factory, name):
    """A second heat-health-engine beside the deployment's; yields it.

    Policies are shared between the two, as several engines are normal.
    Only beside the local deployment, whose configuration it reads;
    elsewhere the deployment's own engines are all there are (None).
    """
    if not HEAT_CONF.exists():
        yield None
        return
    engine = Engine(tmp_path_factory.mktemp(name), name).start(user)
    try:
        yield engine
    finally:
        engine.kill()
