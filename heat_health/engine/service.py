"""heat-health-engine: serves the heat-health RPC topic.

It also listens under its own engine id on Heat's engine-listener topic,
because it takes Heat's locks under that id.
"""

from heat.common import messaging
from heat.common import service_utils
from heat.engine import resources
from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import service

from heat_health.common import nova_adapter
from heat_health.engine import endpoint
from heat_health.engine import heat_locks
from heat_health.engine import leftovers
from heat_health.engine.monitor import monitor
from heat_health.engine.monitor import routing
from heat_health.engine.ownership import partition
from heat_health.engine.ownership import registry
from heat_health.engine.pools import lb_drain
from heat_health.engine.pools import lb_follow
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import loop as recovery_loop

LOG = logging.getLogger(__name__)


class HealthEngineService(service.Service):

    def __init__(self, host, topic):
        super(HealthEngineService, self).__init__()
        self.host = host
        self.topic = topic
        self.engine_id = None
        self._servers = []

    def start(self):
        super(HealthEngineService, self).start()
        # Stacks are loaded here, so resource types must be known as in
        # heat-engine (plugin_dirs, environment_dir of heat.conf).
        resources.initialise()
        self.engine_id = service_utils.generate_engine_id()
        # Served under the engine's own id: calls to the topic reach any
        # engine, casts to this server (news forwarded by other engines)
        # only this one.
        target = routing.engine_target(self.engine_id)
        # Which policies this engine should own, among the live engines.
        self._partition = partition.Partition(self.engine_id)
        self._partition.start()
        replacer = heat_replace.HeatReplacer(self.engine_id)
        drainer = lb_drain.Drainer(replacer.octavia_client)
        # The policies this engine owns (registration, leases, targets).
        self.registry = registry.Registry(
            self.engine_id, partition=self._partition,
            undoer=leftovers.Undoer(drainer, replacer))
        # The monitor (detectors, tracker, loop): one per engine. Its
        # loop claims and renews the leases.
        self._monitor = monitor.Monitor(self.engine_id, self.host,
                                        registry=self.registry,
                                        forwarder=routing.Forwarder())
        # Recovery acts on what the monitor stored.
        self._recovery = recovery_loop.RecoveryLoop(
            self.engine_id, self._monitor.tracker, replacer,
            blind=self._monitor.blind, drainer=drainer,
            background_events=True, place=self._monitor.hosts.place)
        self._monitor.tracker.on_failure = self._recovery.wake
        # Pools follow their groups between stack updates.
        self._follower = lb_follow.MemberFollower(
            self._recovery.replacer.octavia_client,
            nova_adapter.NovaAdapter().list_by_ids,
            owns=lambda uuid: (
                self._partition.owner(uuid) == self.engine_id),
            forget_client=replacer.forget_clients)
        self._recovery.on_update = self._follower.nudge
        health_endpoint = endpoint.HealthEndpoint(
            self.engine_id, self.registry, router=self._monitor.router)
        for rpc_target, rpc_endpoint in [
                (heat_locks.liveness_target(self.engine_id),
                 heat_locks.LivenessEndpoint()),
                (target, health_endpoint)]:
            server = messaging.get_rpc_server(rpc_target, rpc_endpoint)
            server.start()
            self._servers.append(server)
        self._monitor.start()
        self._recovery.start()
        self._follower.start()
        LOG.info('heat-health-engine %(id)s serving topic %(topic)s on '
                 '%(host)s', {'id': self.engine_id, 'topic': self.topic,
                              'host': self.host})

    def stop(self, graceful=True):
        if getattr(self, '_follower', None) is not None:
            self._follower.stop()
            self._follower = None
        if getattr(self, '_recovery', None) is not None:
            self._recovery.stop()
            self._recovery = None
        if getattr(self, '_monitor', None) is not None:
            self._monitor.stop()
            self._monitor = None
        if getattr(self, '_partition', None) is not None:
            self._partition.stop()
            self._partition = None
        for server in reversed(self._servers):
            server.stop()
            server.wait()
        self._servers = []
        super(HealthEngineService, self).stop(graceful)


def create_service():
    return HealthEngineService(cfg.CONF.host, cfg.CONF.heat_health.topic)
