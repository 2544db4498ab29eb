"""No lost news: each observation reaches the engine that owns its server.

All engines' listeners consume Nova's notifications from one pool, so the
broker hands a notification about a server to any engine. Every engine
keeps the deployment-wide index of watched servers and their owners (read
from the database each monitor tick); a listener keeps the notifications
of every watched server, and the router hands each observation to the
local tracker when this engine owns the server and casts it to the owner's
own RPC server (topic ``[heat_health] topic``, server = its engine id)
otherwise. An engine that receives news of a server it no longer owns
(ownership moved in between) looks the owner up in the database and passes
it on once more.
"""

import threading

from heat.common import context as heat_context
from heat.common import messaging
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from heat_health.db import api as db_api
from heat_health.engine.monitor import observation as obs
from heat_health.rpc import api as rpc_api

LOG = logging.getLogger(__name__)

# Forwarded news is passed on at most this many more times.
MAX_HOPS = 1


def engine_target(engine_id, conf=cfg.CONF):
    """The RPC target only this engine serves."""
    return oslo_messaging.Target(version=rpc_api.RPC_API_VERSION,
                                 topic=conf.heat_health.topic,
                                 server=engine_id)


class Forwarder(object):
    """Casts observations to another engine's own RPC server."""

    def __init__(self, conf=cfg.CONF):
        self._client = messaging.get_rpc_client(
            topic=conf.heat_health.topic, version=rpc_api.RPC_API_VERSION)

    def forward(self, engine_id, observations, hops):
        cctxt = self._client.prepare(server=engine_id)
        cctxt.cast(heat_context.get_admin_context(), rpc_api.OBSERVE,
                   observations=[obs.to_wire(o) for o in observations],
                   hops=hops)


class Router(object):
    """Where observations of a server go: here, or to its owner.

    :param engine_id: this engine.
    :param tracker: this engine's Tracker.
    :param forwarder: has ``forward(engine_id, observations, hops)``.
    """

    def __init__(self, engine_id, tracker, forwarder=None):
        self.engine_id = engine_id
        self.tracker = tracker
        self._forwarder = forwarder
        self._index = {}          # server id -> frozenset of engine ids
        self._lock = threading.Lock()
        self.forwarded = 0

    def refresh(self):
        """Read the deployment-wide index; True if it changed."""
        index = {server_id: frozenset(engines) for server_id, engines in
                 db_api.owner_index().items()}
        with self._lock:
            changed = index != self._index
            self._index = index
        return changed

    def is_watched(self, server_id):
        """Cheap: asked for every notification about any server."""
        return (server_id in self._index or
                self.tracker.is_watched(server_id))

    def watched(self):
        """Every server some engine watches (this one's included)."""
        return set(self._index) | self.tracker.servers()

    def route(self, observation):
        """Hand one observation to every engine that owns its server."""
        if self.tracker.is_watched(observation.server_id):
            self.tracker.observe(observation)
        for engine in self._index.get(observation.server_id, ()):
            if engine != self.engine_id:
                self._forward(engine, [observation], MAX_HOPS)

    def receive(self, observations, hops):
        """News another engine forwarded: keep it or pass it on."""
        lost = []
        for observation in observations:
            if self.tracker.is_watched(observation.server_id):
                self.tracker.observe(observation)
            elif hops > 0:
                lost.append(observation)
        if not lost:
            return
        owners = db_api.owner_index({o.server_id for o in lost})
        for observation in lost:
            for engine in owners.get(observation.server_id, ()):
                if engine != self.engine_id:
                    self._forward(engine, [observation], hops - 1)

    def _forward(self, engine, observations, hops):
        if self._forwarder is None:
            return
        try:
            self._forwarder.forward(engine, observations, hops)
            self.forwarded += len(observations)
        except Exception:
            LOG.exception('Could not forward news of %s to engine %s',
                          observations[0].server_id, engine)
