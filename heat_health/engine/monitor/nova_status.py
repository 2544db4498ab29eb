"""NODE_STATUS_POLLING: Nova's view of every watched server, batched.

One poll asks Nova, as admin over all projects, which servers changed since
the previous poll (``changes-since``, deleted servers included): one request
for all watched servers of this engine, whatever the number of policies.
A full listing made at start and then every ``node_status_resync_cycles``
polls catches whatever those queries missed (a server purged from Nova,
a clock skew); it is fetched one page per poll, in id order, so a server
missing from a page's id range is known to be gone, and a poll never costs
more than two requests. Only news reaches the tracker: a server whose status
is the one last reported is skipped, so a listing of ten thousand healthy
servers costs little more than its JSON.

Unlike Senlin, an API error or timeout is not a verdict on the servers: it
makes every watched server UNKNOWN, which leaves their state as it was.

The status is not all: Nova keeps a server ACTIVE when the hypervisor
paused its guest or lost it, and only the power state shows it. An ACTIVE
server with no task whose guest is not running is UNHEALTHY once that has
lasted a short grace, so a mismatch Nova's power sync is settling is not
acted on.

Nor is Nova's word always fresh: a server on a compute host that stopped
reporting is UNKNOWN until the host is back (its nova-compute will finish
or undo what it was doing), and one on a host forced down is UNHEALTHY
(``compute_hosts``). The hosts are listed once per poll.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.common import nova_adapter
from heat_health.common import power_states
from heat_health.engine.monitor import compute_hosts
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

SOURCE = obs.NODE_STATUS_POLLING

UNHEALTHY_STATUSES = frozenset(['ERROR', 'SHUTOFF', 'PAUSED', 'SUSPENDED',
                                'DELETED', 'SOFT_DELETED'])
HEALTHY_STATUSES = frozenset(['ACTIVE'])
# Every other status (BUILD, REBOOT, HARD_REBOOT, REBUILD, MIGRATING,
# RESIZE, VERIFY_RESIZE, ...) is a transition: no verdict until it ends.

# changes-since reaches this far before the previous poll, so a clock skew
# between this host and Nova's database does not lose changes.
OVERLAP = datetime.timedelta(seconds=2)

MISSING_REASON = 'Not in Nova\'s server list'
# Statuses that say all there is, whatever the host's state.
_FINAL = frozenset(['DELETED', 'SOFT_DELETED'])


def _guest_down(status, power_state):
    """The power state of a server ACTIVE with its guest not running.

    None when the server is not ACTIVE, its guest runs, or its power state
    is not known (not listed): the status alone then decides.
    """
    if status in HEALTHY_STATUSES:
        return power_states.not_running(power_state)
    return None


def _seen(status, power_state):
    """What is remembered as last reported of a server listed so."""
    down = _guest_down(status, power_state)
    return status if down is None else '%s, power %s' % (status, down)


def _seen_on_host(found):
    """What is remembered as last reported of a server its host judged."""
    return 'host: %s' % found[1]


def verdict(status, power_state=None):
    """(verdict, reason) for a Nova status, or None for a transition.

    An ACTIVE server whose guest the hypervisor does not run is UNHEALTHY
    (the poller waits out its grace first).
    """
    if status in UNHEALTHY_STATUSES:
        return obs.UNHEALTHY, 'Nova status %s' % status
    if status in HEALTHY_STATUSES:
        down = power_states.active_but_down(power_state)
        if down is not None:
            return obs.UNHEALTHY, down
        return obs.HEALTHY, 'Nova status %s' % status
    return None


class StatusPoller(object):
    """Polls Nova for all servers watched with NODE_STATUS_POLLING.

    :param adapter: a NovaAdapter (list_changed, list_all, list_page).
    :param observe: called with each Observation.
    :param watched: returns the set of server ids to report on now.
    :param resync_cycles: polls between the starts of two full listings.
    :param power_grace: seconds an ACTIVE server's guest may be reported
        not running before the server is UNHEALTHY (0: at once).
    :param hosts: a compute_hosts.ComputeHosts listed at each poll, or
        None to judge servers whatever their host's state.
    :param host_return_grace: seconds after a host reports again during
        which its servers' power state is not believed (Nova's first
        power sync after a restart has not run yet).
    """

    def __init__(self, adapter, observe, watched, resync_cycles,
                 clock=timeutils.utcnow, stuck_after=None, power_grace=0,
                 hosts=None, host_return_grace=0):
        self._adapter = adapter
        self._hosts = hosts
        self._host_states = {}   # host -> state, as of the last poll
        # host -> when it was seen reporting again.
        self._returned = {}
        self._return_grace = datetime.timedelta(seconds=host_return_grace)
        # server id -> seconds a task may last before the server counts
        # as stuck (None: never).
        self._stuck_after = stuck_after or (lambda server_id: None)
        # server id -> (task state, since when) of servers in a task.
        self._tasks = {}
        self._power_grace = datetime.timedelta(seconds=power_grace)
        # server id -> (power state, since when) of ACTIVE servers without
        # a task whose guest is not running.
        self._down = {}
        self._observe = observe
        self._watched = watched
        self._resync_cycles = resync_cycles
        self._clock = clock
        self._since = None       # start of the last successful poll
        self._cycles = 0         # polls since the last full listing began
        self._sweep = None       # marker of the next page, '' for the first
        # What each server was last reported as: a listing repeats what is
        # already known for nearly every server, and only news is passed on.
        self._reported = {}
        # Each watched server as Nova last listed it: poll URLs name its
        # name and may only name its own addresses.
        self.listed = {}
        # Why the last poll failed, None after one that succeeded: no
        # recovery acts on what a blind observer last saw.
        self.failure = None
        # When the last poll that succeeded began: only news is reported,
        # so it confirms what was last reported of every server watched.
        self.polled_at = None
        # Servers to look up by id at the next poll, changed or not.
        self._rechecks = set()

    def poll(self):
        """One poll cycle; returns the number of observations made."""
        watched = self._watched()
        if not watched:
            return 0
        now = self._clock()
        try:
            again = self._hosts_changed(watched, now)
            if self._since is None:
                servers = self._adapter.list_all()
                count = self._report(dict(again, **servers), watched, now)
                count += self._missing(watched - set(servers), now)
                self._since = now
                self._cycles = 0
                self.failure = None
                self.polled_at = now
                return count
            changed = dict(again, **self._adapter.list_changed(
                self._since - OVERLAP))
            self._since = now
            rechecks = (self._rechecks & watched) - set(changed)
            if rechecks:
                changed.update(self._adapter.list_by_ids(sorted(rechecks)))
            self._rechecks = set()
            count = self._report(changed, watched, now)
            self._cycles += 1
            if self._sweep is None and self._cycles >= self._resync_cycles:
                self._sweep = ''
                self._cycles = 0
            if self._sweep is not None:
                count += self._sweep_page(watched, now)
            count += self._stuck(watched, now)
            count += self._down_past_grace(watched, now)
            self.failure = None
            self.polled_at = now
            return count
        except nova_adapter.NovaUnavailable as e:
            self.failure = 'Nova API unavailable: %s' % e
            self._sweep = None
            self._reported = {}
            LOG.warning('Nova status poll failed, %(n)d servers UNKNOWN: '
                        '%(error)s', {'n': len(watched), 'error': e})
            reason = 'Nova API unavailable: %s' % e
            for server_id in watched:
                self._observe(obs.Observation(server_id, obs.UNKNOWN, reason,
                                              SOURCE, now))
            return len(watched)

    def lookup(self, server_ids, projects=None):
        """Nova's word now on servers that just became watched.

        Asked by id, or by the ``projects`` they are in when there are
        many (requests for the servers taken, not for the fleet), in
        the tick they became watched (a new policy, a takeover, a
        scale-out), not at the next full listing: news they missed while
        nobody watched them is seen at once. The verdict is also made the
        LIFECYCLE_EVENTS one (the state those notifications left the
        server in), so an event-only policy has a verdict too. A server
        missing from the answer gets no verdict here: the full listing
        tells whether it is gone.
        """
        server_ids = set(server_ids)
        if not server_ids:
            return 0
        now = self._clock()
        try:
            servers = self._adapter.list_by_ids(sorted(server_ids),
                                                projects=projects)
        except nova_adapter.NovaUnavailable as e:
            LOG.warning('Could not look up %(n)d newly watched servers in '
                        'Nova: %(error)s', {'n': len(server_ids),
                                            'error': e})
            return 0
        count = 0
        for server_id in server_ids.intersection(servers):
            server = servers[server_id]
            self._list(server_id, server)
            found = self._on_host(server_id, server)
            if found is not None:
                self._reported[server_id] = _seen_on_host(found)
            elif self._busy(server_id, server, now):
                # Another owner's action, or the user's, under way: the
                # next poll reports it, changed or not.
                self.recheck([server_id])
                continue
            elif self._within_grace(server_id, server, now):
                # Judged by the poll that finds the grace over.
                continue
            else:
                found = verdict(server.status, server.power_state)
                if found is None:
                    continue
                self._reported[server_id] = _seen(server.status,
                                                  server.power_state)
            for source in (SOURCE, obs.LIFECYCLE_EVENTS):
                self._observe(obs.Observation(server_id, found[0], found[1],
                                              source, now))
            count += 1
        return count

    def _list(self, server_id, server):
        """Keep what Nova listed of the server, when it changed.

        A full listing makes a new object of every server: kept, a tenth
        of the fleet's would outlive a garbage collection every few polls
        and set off a full one over the whole heap.
        """
        if self.listed.get(server_id) != server:
            self.listed[server_id] = server

    def recheck(self, server_ids):
        """Report these servers at the next poll, even unchanged.

        A recovery judges only what is seen after its action, and a policy
        enabled again only what is seen from then on: the status last
        reported may be the one the server is back to. A server that did
        not change is in no listing of changes, so it is looked up by id.
        """
        for server_id in server_ids:
            self._reported.pop(server_id, None)
            self._rechecks.add(server_id)

    def forget(self, server_ids):
        """Drop what was reported of servers no longer watched."""
        for server_id in server_ids:
            self._reported.pop(server_id, None)
            self.listed.pop(server_id, None)
            self._tasks.pop(server_id, None)
            self._down.pop(server_id, None)

    def _report(self, servers, watched, now):
        count = 0
        reported = self._reported
        for server_id in watched.intersection(servers):
            server = servers[server_id]
            self._list(server_id, server)
            found = self._on_host(server_id, server)
            if found is not None:
                seen = _seen_on_host(found)
            elif self._busy(server_id, server, now):
                continue
            elif self._within_grace(server_id, server, now):
                continue
            else:
                seen = _seen(server.status, server.power_state)
                found = verdict(server.status, server.power_state)
            if reported.get(server_id) == seen:
                continue
            if found is not None:
                reported[server_id] = seen
                self._observe(obs.Observation(server_id, found[0], found[1],
                                              SOURCE, now))
                count += 1
        return count

    def _hosts_changed(self, watched, now):
        """The hosts listed anew: servers on one that changed, to judge.

        A host's state is in no listing of changed servers. A watched
        server on a host that stopped reporting or was forced down is
        judged by that, as last listed; one on a host back up is looked
        up by id in this poll: what was listed before may be stale.
        """
        if self._hosts is None:
            return {}
        before, self._host_states = (self._host_states,
                                     self._hosts.refresh())
        changed = {h for h in set(before) | set(self._host_states)
                   if before.get(h) != self._host_states.get(h)}
        for host in changed:
            if before.get(host) in (compute_hosts.UNKNOWN,
                                    compute_hosts.DOWN) and (
                    self._host_states.get(host) == compute_hosts.UP):
                self._returned[host] = now
        again = {}
        for server_id, server in self.listed.items():
            if server_id not in watched or server.host not in changed:
                continue
            self._reported.pop(server_id, None)
            if self._host_states.get(server.host) in (compute_hosts.UNKNOWN,
                                                      compute_hosts.DOWN):
                again[server_id] = server
            else:
                self._rechecks.add(server_id)
        return again

    def _on_host(self, server_id, server):
        """(verdict, reason) of a server its host's state decides, or None.

        Forgets its task and power state meanwhile: they are not Nova's
        news while its compute does not report.
        """
        state = self._host_states.get(server.host) if server.host else None
        if server.status in _FINAL or state not in (compute_hosts.UNKNOWN,
                                                    compute_hosts.DOWN):
            return None
        self._tasks.pop(server_id, None)
        self._down.pop(server_id, None)
        if state == compute_hosts.UNKNOWN:
            return obs.UNKNOWN, compute_hosts.not_reporting(server.host)
        return obs.UNHEALTHY, compute_hosts.forced_down(server.host)

    def _busy(self, server_id, server, now):
        """Whether Nova is working on the server: no verdict then.

        Its status is in flux until the task ends or lasts too long
        (``_stuck``); judging it would act on a server another owner, or
        its user, is already acting on. The power state is in flux too: a
        grace for a guest not running starts anew once the task ends.
        """
        if not server.task_state:
            self._tasks.pop(server_id, None)
            return False
        self._down.pop(server_id, None)
        if self._tasks.get(server_id, (None,))[0] != server.task_state:
            self._tasks[server_id] = (server.task_state,
                                      server.updated or now)
        return True

    def _stuck(self, watched, now):
        """Servers whose task lasts beyond their policies' deadline.

        nova-compute died or lost the operation: Nova will not end the
        task by itself, so the server is a failure (seed 003's case).
        """
        count = 0
        for server_id, (task, since) in list(self._tasks.items()):
            if server_id not in watched:
                del self._tasks[server_id]
                continue
            limit = self._stuck_after(server_id)
            if limit is None or now - since < datetime.timedelta(
                    seconds=limit):
                continue
            key = 'stuck in %s' % task
            if self._reported.get(server_id) == key:
                continue
            self._reported[server_id] = key
            self._observe(obs.Observation(
                server_id, obs.UNHEALTHY, 'Nova task %s stuck since %s' % (
                    task, since.isoformat(timespec='seconds')), SOURCE, now))
            count += 1
        return count

    def _within_grace(self, server_id, server, now):
        """Whether an ACTIVE server's guest is not running, not for long.

        No verdict then, neither healthy nor not: Nova's power sync may be
        settling a change it has just seen. A guest paused or lost behind
        Nova's back stays so, and ``_down_past_grace`` reports it once
        the grace is over.
        """
        down = _guest_down(server.status, server.power_state)
        if down is None:
            self._down.pop(server_id, None)
            return False
        if self._down.get(server_id, (None,))[0] != down:
            # Since Nova saved it, never later than now (Nova's clock may
            # run ahead of this host's).
            self._down[server_id] = (down, min(server.updated or now, now))
        return not self._grace_over(server_id, self._down[server_id][1],
                                    now)

    def _grace_over(self, server_id, since, now):
        """Whether a power state saved ``since`` is to be believed now.

        On a host that has just reported again, only once Nova has had
        time for its first power sync after the restart: until then the
        power state is what nova-compute last saved before it stopped.
        """
        server = self.listed.get(server_id)
        returned = self._returned.get(server.host) if server else None
        if returned is not None:
            if now - returned < self._return_grace:
                return False
            del self._returned[server.host]
        return now - since >= self._power_grace

    def _down_past_grace(self, watched, now):
        """ACTIVE servers whose guest has not run for longer than the grace.

        They are in no listing of changes: Nova saves nothing more of a
        guest that stays paused or lost.
        """
        count = 0
        for server_id, (power, since) in list(self._down.items()):
            if server_id not in watched:
                del self._down[server_id]
                continue
            if not self._grace_over(server_id, since, now):
                continue
            seen = _seen('ACTIVE', power)
            if self._reported.get(server_id) == seen:
                continue
            self._reported[server_id] = seen
            found = verdict('ACTIVE', power)
            self._observe(obs.Observation(server_id, found[0], found[1],
                                          SOURCE, now))
            count += 1
        return count

    def _missing(self, server_ids, now):
        for server_id in server_ids:
            self._tasks.pop(server_id, None)
            self._down.pop(server_id, None)
            if self._reported.get(server_id) == MISSING_REASON:
                continue
            self._reported[server_id] = MISSING_REASON
            self._observe(obs.Observation(server_id, obs.UNHEALTHY,
                                          MISSING_REASON, SOURCE, now))
        return len(server_ids)

    def _sweep_page(self, watched, now):
        low = self._sweep
        page = self._adapter.list_page(low or None)
        ids = list(page.servers)
        if ids != sorted(ids):
            # Nova did not sort by id: a page's range means nothing, so
            # this full listing is made at once instead.
            self._sweep = None
            servers = self._adapter.list_all()
            return (self._report(servers, watched, now) +
                    self._missing(watched - set(servers), now))
        high = page.next_marker
        self._sweep = high
        in_range = {s for s in watched
                    if s > low and (high is None or s <= high)}
        return (self._report(page.servers, in_range, now) +
                self._missing(in_range - set(page.servers), now))
