"""heat-health-engine: serves the heat-health RPC topic."""

from heat.common import messaging
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_service import service

from heat_health.engine import endpoint
from heat_health.rpc import api as rpc_api

LOG = logging.getLogger(__name__)


class HealthEngineService(service.Service):

    def __init__(self, host, topic):
        super(HealthEngineService, self).__init__()
        self.host = host
        self.topic = topic
        self._rpc_server = None

    def start(self):
        super(HealthEngineService, self).start()
        target = oslo_messaging.Target(version=rpc_api.RPC_API_VERSION,
                                       server=self.host, topic=self.topic)
        self._rpc_server = messaging.get_rpc_server(
            target, endpoint.HealthEndpoint())
        self._rpc_server.start()
        LOG.info('heat-health-engine serving topic %(topic)s on %(host)s',
                 {'topic': self.topic, 'host': self.host})

    def stop(self, graceful=True):
        if self._rpc_server is not None:
            self._rpc_server.stop()
            self._rpc_server.wait()
            self._rpc_server = None
        super(HealthEngineService, self).stop(graceful)


def create_service():
    return HealthEngineService(cfg.CONF.host, cfg.CONF.heat_health.topic)
