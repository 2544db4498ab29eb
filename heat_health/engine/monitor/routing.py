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
it on once more. An owner the coordination group no longer counts live
(killed, its policies about to move or just moved) is not sent news from
the index: the database tells who holds the server now.

A policy changing hands has two windows no index covers: the old owner
still watches it until its next claim (its writes are fenced by then), and
the new owner holds it before its tracker has loaded it. So the old owner
hands on the verdicts of the targets it let go, and the new owner keeps the
news of servers it holds but has not loaded yet until its next tick.
"""

import collections
import threading
import time

from heat.common import context as heat_context
from heat.common import messaging
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging

from heat_health.db import api as db_api
from heat_health.policy import observation as obs
from heat_health.rpc import api as rpc_api

LOG = logging.getLogger(__name__)

# Forwarded news is passed on at most this many more times.
MAX_HOPS = 1

# Most observations forwarded to an engine in one message.
FORWARD_BATCH = 500

# Seconds news of a server held but not yet loaded here is kept for.
KEEP_SECONDS = 60.0

# Seconds between two reads of the whole index when its digest says
# nothing changed: a safety net, not the way changes are found.
INDEX_SECONDS = 30.0


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
    :param live: returns the engine ids the group counts live, or None
        (no group: every holder counts live).
    """

    def __init__(self, engine_id, tracker, forwarder=None,
                 clock=time.monotonic, live=None):
        self.engine_id = engine_id
        self.tracker = tracker
        self._forwarder = forwarder
        self._clock = clock
        self._live = live or (lambda: None)
        self._index = {}          # server id -> frozenset of engine ids
        # What the index is made of: policy id -> (targets version, its
        # servers), and policy id -> the engine holding it.
        self._servers = {}
        self._held = None
        self._digest = None       # (digest of the rows read, clock time)
        self._lock = threading.Lock()
        self._kept = []           # (kept at, Observation) not yet loaded
        self.forwarded = 0

    def refresh(self):
        """Read the deployment-wide index; True if it changed.

        One row per policy (its live owner and the version of its set of
        servers), and the servers only of the policies whose version
        changed since the last read: a tick that finds nothing changed
        reads no target, whatever the size of the fleet. And it reads not
        even those rows while their digest is as when they were read (for
        ``INDEX_SECONDS`` at most).
        """
        now = self._clock()
        digest = db_api.policy_owners_digest()
        if (self._digest is not None and self._digest[0] == digest and
                now - self._digest[1] < INDEX_SECONDS):
            return False
        owners = db_api.policy_owners()
        self._digest = (digest, now)
        stale = sorted(pid for pid, (engine, version) in owners.items()
                       if engine is not None and
                       self._servers.get(pid, (None,))[0] != version)
        if stale:
            found = db_api.policy_servers(stale)
            for pid in stale:
                self._servers[pid] = (owners[pid][1],
                                      frozenset(found.get(pid, ())))
        for gone in set(self._servers) - set(owners):
            del self._servers[gone]
        held = {pid: engine for pid, (engine, _v) in owners.items()
                if engine is not None}
        if not stale and held == self._held:
            return False
        self._held = held
        index = {}
        for pid, engine in held.items():
            for server_id in self._servers[pid][1]:
                index.setdefault(server_id, set()).add(engine)
        index = {server_id: frozenset(engines)
                 for server_id, engines in index.items()}
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
        watched = self.tracker.is_watched(observation.server_id)
        if watched:
            self.tracker.observe(observation)
        owners = self._index.get(observation.server_id, ())
        live = self._live()
        others = [e for e in owners if e != self.engine_id]
        gone = [e for e in others if live is not None and e not in live]
        for engine in others:
            if engine not in gone:
                self._forward(engine, [observation], MAX_HOPS)
        if gone or (owners and not others and not watched):
            # The index names a dead engine, or this one while the tracker
            # let the server go since: the database says who holds it now.
            self.hand_on([observation], MAX_HOPS)

    def receive(self, observations, hops):
        """News another engine forwarded: keep it or pass it on."""
        rest = []
        for observation in observations:
            if self.tracker.is_watched(observation.server_id):
                self.tracker.observe(observation)
            else:
                rest.append(observation)
        if rest:
            self.hand_on(rest, hops - 1)

    def hand_on(self, observations, hops=MAX_HOPS):
        """News of servers not watched here: to the engines holding them.

        The holders are read from the database. News of a server this
        engine holds but has not loaded yet is kept for ``replay``; news
        for another engine is sent when ``hops`` is not negative, and may
        be passed on ``hops`` more times.
        """
        if not observations:
            return
        owners = db_api.owner_index({o.server_id for o in observations})
        now = self._clock()
        sent = collections.defaultdict(list)   # engine id -> its news
        for observation in observations:
            for engine in owners.get(observation.server_id, ()):
                if engine == self.engine_id:
                    if self.tracker.is_watched(observation.server_id):
                        continue        # the tracker has it already
                    with self._lock:
                        self._kept.append((now, observation))
                elif hops >= 0:
                    sent[engine].append(observation)
        # A load that lets thousands of servers go (policies moved to
        # engines that joined) sends a few messages, not one per server.
        for engine, news in sent.items():
            for start in range(0, len(news), FORWARD_BATCH):
                self._forward(engine, news[start:start + FORWARD_BATCH],
                              hops)

    def replay(self):
        """Give the tracker the news kept for servers it loaded since.

        Called by the monitor after each load; news still not loaded after
        ``KEEP_SECONDS`` is dropped (the holder let the server go again).
        """
        now = self._clock()
        with self._lock:
            kept, self._kept = self._kept, []
        ready, waiting = [], []
        for at, observation in kept:
            if self.tracker.is_watched(observation.server_id):
                ready.append(observation)
            elif now - at < KEEP_SECONDS:
                waiting.append((at, observation))
            else:
                LOG.warning('Dropped news of server %s: this engine held '
                            'it but never loaded it', observation.server_id)
        with self._lock:
            self._kept.extend(waiting)
        if ready:
            self.tracker.observe_all(ready)
        return len(ready)

    def _forward(self, engine, observations, hops):
        if self._forwarder is None:
            return
        try:
            self._forwarder.forward(engine, observations, hops)
            self.forwarded += len(observations)
        except Exception:
            LOG.exception('Could not forward news of %s to engine %s',
                          observations[0].server_id, engine)
