"""Mistral's API, engine and executor in one process, for tools/localcloud.

    mistral_server.py --config-file MISTRAL_CONF

mistral-server hands each component it is asked for to a process manager
that forks one process per component, next to a parent that only watches
them: four Python processes holding the same libraries for the API, the
engine and the executor.  Here the three are Mistral's own service objects
started one after the other in one process, each then running in threads
of its own.  Nothing else changes: the API still hands executions to the
engine, and the engine its actions to the executor, over RabbitMQ, as
between processes.

Exits 1 if a component fails to start or the API stops serving; SIGTERM or
SIGINT stops the three and ends the process.
"""

import os
import signal
import sys
import threading

# Importing mistral.cmd selects oslo.service's threading backend, as
# Mistral's own commands do; it must come before the services' modules.
from mistral.cmd import launch  # noqa: F401

from oslo_config import cfg
from oslo_log import log as logging

from mistral.api import service as api_service
from mistral import config
from mistral.engine import engine_server
from mistral.executors import executor_server
from mistral.rpc import base as rpc

LOG = logging.getLogger('mistral.localcloud')
# Seconds the components have to stop (the engine takes a few to finish
# what it has taken from RabbitMQ) before the process ends anyway.
STOP_SECONDS = 20


def main():
    cfg.CONF.register_cli_opts(config.CLI_OPTS)
    config.parse_args(sys.argv[1:])
    logging.setup(cfg.CONF, 'Mistral')
    rpc.get_transport()

    stopping = threading.Event()

    def on_signal(signum, _frame):
        LOG.info('signal %d: stopping api, engine and executor', signum)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    # The engine and the executor first: the API hands them its work.
    # Each start() returns once the component's threads run.
    components = []
    try:
        for name, make in (('engine', engine_server.get_oslo_service),
                           ('executor', executor_server.get_oslo_service),
                           ('api', lambda: api_service.WSGIService(
                               'mistral_api'))):
            component = make()
            component.start()
            components.append((name, component))
    except Exception:
        LOG.exception('starting the %s failed', name)
        _stop(components)
        os._exit(1)
    api = components[-1][1]
    LOG.info('api, engine and executor started in process %d', os.getpid())

    status = 0
    while not stopping.wait(1):
        if not api._thread.is_alive():
            LOG.error('the api stopped serving')
            status = 1
            break
    _stop(components)
    LOG.info('stopped')
    os._exit(status)


def _stop(components):
    """Stop the components in reverse order, within STOP_SECONDS."""
    # The RPC servers' threads are not daemons: one that hangs must not
    # keep the process.
    timer = threading.Timer(STOP_SECONDS, os._exit, (1,))
    timer.daemon = True
    timer.start()
    for name, component in reversed(components):
        try:
            if name == 'api':
                component.stop()
            else:
                component.stop(graceful=True)
        except Exception:
            LOG.exception('stopping the %s failed', name)


if __name__ == '__main__':
    main()
