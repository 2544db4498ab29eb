"""Which compute hosts Nova hears from, and which host each server is on.

Nova's view of a server is only as fresh as its nova-compute's reports.
While a compute is not reporting (its service down but not forced down:
host_status UNKNOWN), its servers' status and task are what they were when
it stopped: the guests may run on, and when nova-compute starts again its
own restart handling (``_init_instance``) finishes or undoes the operations
it was running. Judging or acting on such a server then would act twice,
so its verdict is UNKNOWN and recovery waits for the host.

A host forced down (host_status DOWN, ``openstack compute service set
--down``: an operator or a fencing agent has said it is dead and its
guests stopped) is fenced: its servers are failures no Nova action on the
host can heal, so recovery replaces them and needs to stop nothing first.

Nova shows this to an admin only (the services API, and a server's host);
a Nova that shows no services (an older one, or no right to list them) is
taken as having every host UP: recovery then acts as it did without this.
"""

import threading
import time

from oslo_log import log as logging

from heat_health.common import nova_adapter

LOG = logging.getLogger(__name__)

UP, DOWN, MAINTENANCE, UNKNOWN = nova_adapter.HOST_STATES
# Seconds a listing of the hosts is believed before recovery asks again.
FRESH_SECONDS = 1.0
# Seconds a server's host, looked up by id, is believed.
PLACE_SECONDS = 10.0
# Seconds before a Nova that showed no hosts is asked again.
UNAVAILABLE_SECONDS = 300.0
# Answers that say Nova shows no hosts to this user (no API, no right).
NOT_SHOWN = frozenset([403, 404])


def not_reporting(host):
    """Why a server on a host that does not report gets no verdict."""
    return ('nova-compute on host %s is not reporting (stopped, cut off or '
            'restarting): Nova finishes or undoes its own operations once '
            'it is back' % host)


def forced_down(host):
    """Why a server on a host forced down is a failure."""
    return 'host %s is down (its nova-compute is forced down)' % host


class ComputeHosts(object):
    """Nova's word on each compute host, read at most once a second.

    :param adapter: a NovaAdapter (list_compute_hosts, list_by_ids).
    :param listed: server id -> Server as the status poller last listed
        it; a server not in it is looked up by id.
    """

    def __init__(self, adapter, listed=None, clock=time.monotonic):
        self._adapter = adapter
        self.listed = listed if listed is not None else {}
        self._clock = clock
        self._lock = threading.Lock()
        self._states = {}        # host -> state
        self._read_at = None     # clock time of the last listing
        self._placed = {}        # server id -> (host, clock time)
        self.unavailable = None  # why Nova shows no hosts, or None

    def refresh(self):
        """{host: state} as Nova shows it now ({} if it shows none).

        A Nova that showed none is asked again only after a while: it
        may not have the services API, or not for this user.
        """
        now = self._clock()
        with self._lock:
            if self.unavailable is not None and (
                    now - self._read_at < UNAVAILABLE_SECONDS):
                return {}
        try:
            states = self._adapter.list_compute_hosts()
        except nova_adapter.NovaUnavailable as e:
            if e.code not in NOT_SHOWN:
                # Nova did not answer: what it last said holds (the
                # status poll that failed too makes recovery wait).
                LOG.warning('Could not list the compute hosts: %s', e)
                with self._lock:
                    return dict(self._states)
            LOG.warning('Nova shows no compute hosts (%s): servers are '
                        'judged and acted on as if every host were up', e)
            states, unavailable = {}, str(e)
        else:
            unavailable = None
        with self._lock:
            self._states = states
            self._read_at = now
            self.unavailable = unavailable
        return dict(states)

    def states(self, max_age=FRESH_SECONDS):
        """{host: state}, listed again if older than ``max_age``."""
        with self._lock:
            fresh = (self._read_at is not None and
                     self._clock() - self._read_at < max_age)
            if fresh:
                return dict(self._states)
        return self.refresh()

    def host_of(self, server_id):
        """The host the server is on, or None when Nova does not say."""
        server = self.listed.get(server_id)
        if server is not None and server.host:
            return server.host
        now = self._clock()
        with self._lock:
            found = self._placed.get(server_id)
        if found is not None and now - found[1] < PLACE_SECONDS:
            return found[0]
        try:
            server = self._adapter.list_by_ids([server_id]).get(server_id)
        except nova_adapter.NovaUnavailable:
            return None
        host = server.host if server is not None else None
        with self._lock:
            self._placed[server_id] = (host, now)
        return host

    def place(self, server_id):
        """(host, state) of the server's host, or None when unknown.

        For recovery: the hosts are listed again if older than a second.
        If Nova did not answer that listing, the host is UNKNOWN: what
        Nova said before may no longer hold, and recovery waits.
        """
        host = self.host_of(server_id)
        if host is None:
            return None
        state = self.states().get(host)
        if state is None:
            return None
        with self._lock:
            stale = self._clock() - self._read_at >= FRESH_SECONDS
        return (host, UNKNOWN if stale else state)
