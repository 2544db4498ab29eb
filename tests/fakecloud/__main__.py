"""Run fakecloud: python -m tests.fakecloud --config-file <file>."""

import logging
import signal
import sys
import threading

from tests.fakecloud import app
from tests.fakecloud import compute
from tests.fakecloud import config
from tests.fakecloud import faults
from tests.fakecloud import health_http
from tests.fakecloud import image
from tests.fakecloud import lifecycle
from tests.fakecloud import network
from tests.fakecloud import notifier
from tests.fakecloud import scheduler
from tests.fakecloud import state
from tests.fakecloud import volume
from tests.fakecloud import wsgi_server

LOG = logging.getLogger('fakecloud')


def build(conf):
    """The API and health servers, wired to one store."""
    store = state.Store(conf.compute_host, conf.deleted_servers_kept,
                        conf.timeline_kept)
    timer = scheduler.Scheduler()
    store.volumes = volume.Volumes(store, timer, conf.task_delay)
    publisher = notifier.Notifier(conf, store)
    life = lifecycle.Lifecycle(store, timer, publisher, conf)
    fault_api = faults.Faults(store, life, timer, publisher, conf)
    application = app.Application(
        conf, compute.ComputeAPI(store, life, fault_api, conf),
        image.ImageAPI(store, conf), network.NetworkAPI(store, conf),
        fault_api, volume.VolumeAPI(store, store.volumes, conf))
    return (wsgi_server.make_server(config.BIND_HOST, conf.api_port,
                                    application),
            health_http.make_server(config.BIND_HOST, conf.health_port,
                                    store, conf.hang_cap,
                                    conf.fault_driver_file))


def main(argv=None):
    conf = config.load(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if conf.debug else logging.INFO,
        format='%(asctime)s %(levelname)s %(name)s %(message)s',
        stream=sys.stderr)
    # The AMQP driver logs every connection at INFO.
    logging.getLogger('oslo.messaging').setLevel(logging.WARNING)
    api_server, health_server = build(conf)
    threading.Thread(target=health_server.serve_forever, name='health',
                     daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    LOG.info('serving the APIs on %s (compute %s/compute/v2.1, image '
             '%s/image, network %s/network, volume %s/volume), health on '
             'http://%s:%d/<id>/health', conf.public_url, conf.public_url,
             conf.public_url, conf.public_url, conf.public_url,
             config.BIND_HOST, conf.health_port)
    try:
        api_server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        LOG.info('stopping')
    return 0


if __name__ == '__main__':
    sys.exit(main())
