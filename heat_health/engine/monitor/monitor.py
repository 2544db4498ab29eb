"""The monitor loop of heat-health-engine: the harmonizer.

Every tick it sends this engine's heartbeat to the coordination group and
claims its policies (renewing the leases: a loop that hangs loses them),
re-resolves the targets of the policies that are due, hands the index to
the tracker when it changed, looks up in Nova the servers that just became
watched, refreshes the deployment-wide index of who owns which server (for
the notification listeners), runs the status poller when some policy's
interval has passed (one Nova query serves every policy due), decides what
was held, and stores what was observed. Each step is level-triggered: a
tick repeats safely, and an engine that restarts picks everything up from
the database on its first tick.
"""

import contextlib
import random
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from heat.common import context as heat_context

from heat_health.common import nova_adapter
from heat_health.common import octavia_adapter
from heat_health.db import api as db_api
from heat_health.engine.monitor import blind_modes
from heat_health.engine.monitor import compute_hosts
from heat_health.engine.monitor import lb_status
from heat_health.engine.monitor import lifecycle_events
from heat_health.engine.monitor import listener_workers
from heat_health.engine.monitor import nova_status
from heat_health.engine.monitor import poll_costs
from heat_health.engine.monitor import poll_url
from heat_health.engine.monitor import routing
from heat_health.engine.monitor import tracker as tracker_mod
from heat_health.engine.ownership import registry as registry_mod
from heat_health.objects import target as target_object
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec

LOG = logging.getLogger(__name__)

# Seconds between two resolutions of a policy's targets in Heat's database
# (at most: a policy checked more often is resolved at its interval).
REFRESH_SECONDS = 5.0

# Seconds between two reads of a policy's target rows when nothing said
# they changed (a new owner, their servers' version, a resolution that
# stored new places): a safety net, not the way changes are found. Each
# policy's is lengthened by up to a half at random, so that the rows a
# takeover read together are not all read again in the same tick.
ROWS_SECONDS = 300.0

# Seconds between two claims of this engine's policies, and two looks at
# the deployment-wide index of who watches which server, while nothing
# calls for one sooner (the group's members changed, a policy was just
# registered here). Each costs little, but every tick of every engine
# paying it is the largest fixed cost of a quiet engine; a lease is
# renewed a third of the way through anyway, a dead engine's policies are
# taken when the group drops it, and a policy switched off is read again
# before every action.
CLAIM_SECONDS = 3.0

# Seconds a pool's admin state is taken as last read.
POOL_STATE_SECONDS = 60.0

# Most observations of the poller the tracker decides and stores at once;
# the tick sends a heartbeat between two such batches.
POLLED_BATCH = 200


def _lifecycle_listener(router, conf=cfg.CONF):
    """The engine's Nova notification listener (LIFECYCLE_EVENTS).

    In worker processes (told what is watched through ``watch``), or in
    this process with ``[heat_health] notification_workers = 0``.
    """
    workers = conf.heat_health.notification_workers
    if workers:
        return listener_workers.ListenerWorkers(router.route, workers,
                                                conf=conf)
    return lifecycle_events.LifecycleListener(router.route,
                                              router.is_watched)


def _url_checker(tracker):
    """The engine's bounded poll URL checker (NODE_STATUS_POLL_URL)."""
    return poll_url.PollUrlChecker(tracker.observe)


class LoadSignatures(object):
    """What each policy's part of the tracker's index is made of.

    The tracker is loaded when any part changed, with the policies whose
    part did not change named, so that it keeps their targets as they are:
    a load costs what changed, not the size of the fleet. A part is the
    policy (spec, switches, generation), its stack's state, its target
    rows as last read (their tuple made once per read, not per tick), and
    the count of this engine's own writes of its targets (a user's reset
    in the second of such a write can restore what was read before it:
    the rows alone would not tell that memory is stale).
    """

    def __init__(self):
        self._parts = {}   # policy id -> its part at the last load
        self._rows = {}    # policy id -> (the rows list read, its tuple)
        self._heads = {}   # policy id -> (the Policy read, its values)

    def _head_of(self, policy):
        """What of the policy's row a load depends on, once per read.

        The registry keeps the same Policy until its row changes: a spec
        turned into text for every policy at every tick would cost more
        than the rest of a quiet comparison.
        """
        known = self._heads.get(policy.id)
        if known is None or known[0] is not policy:
            known = self._heads[policy.id] = (policy, (
                repr(policy.spec), policy.enabled, policy.suspended,
                repr(policy.paused),
                repr(getattr(policy, 'braked', None))))
        return known[1]

    def _rows_of(self, policy_id, rows):
        known = self._rows.get(policy_id)
        if known is None or known[0] is not rows:
            known = self._rows[policy_id] = (rows, tuple(sorted(
                (t.id, t.server_id, str(t.grace_until), t.path, t.state,
                 str(t.state_since)) for t in rows)))
        return known[1]

    def compare(self, policies, generation, resolutions, targets, written):
        """(whether anything changed, ids of the policies unchanged)."""
        parts = {}
        for pid, p in policies.items():
            resolution = resolutions.get(pid)
            parts[pid] = (
                self._head_of(p), generation(pid),
                (resolution.busy, resolution.suspended) if resolution
                else None,
                self._rows_of(pid, targets.get(pid, ())),
                written.get(pid, 0))
        for gone in set(self._rows) - set(policies):
            del self._rows[gone]
        for gone in set(self._heads) - set(policies):
            del self._heads[gone]
        unchanged = {pid for pid, part in parts.items()
                     if self._parts.get(pid) == part}
        changed = (len(unchanged) != len(parts) or
                   set(self._parts) != set(parts))
        return changed, unchanged, parts

    def loaded(self, parts):
        self._parts = parts


def load_and_follow(tracker, poller, load):
    """``load()`` the tracker's index; the Nova poller follows its servers.

    Servers no longer watched are forgotten, new ones looked up at once
    (by id, or by their projects when there are many).
    """
    before = tracker.watching()
    load()
    after = tracker.watching()
    if after is before:
        return
    gone, new = tracker.moved(before)
    poller.forget(gone)
    poller.lookup(new, projects=tracker.projects_of(new) if new else None)


def read_unless_held(tracker, policy_ids):
    """{policy id: [Target]} of the policies whose rows memory lacks.

    The safety re-read of rows nothing said changed: their plain columns
    are compared with the tracker's memory, and only a policy whose rows
    hold something memory does not (a write nobody announced) is read as
    objects and loaded again. The others' rows differ from those last
    read only by this engine's own writes.
    """
    if not policy_ids:
        return {}
    stored = db_api.target_held_columns(policy_ids)
    lacking = [pid for pid, rows in stored.items()
               if not tracker.holds(pid, rows)]
    if lacking:
        LOG.info('Target rows of %d policies hold what this engine did not '
                 'know; reading them again', len(lacking))
    return target_object.Target.get_all_by_policies(lacking)


class RefreshSchedule(object):
    """When each held policy's targets are resolved and read again.

    Every ``REFRESH_SECONDS`` (or the policy's interval, when shorter), and
    at once under a new generation: another engine may have held the
    policy since the last read without this engine noticing, and rows read
    before that are stale (acting on them would repeat a finished step).
    """

    def __init__(self, rnd=None, rows_seconds=ROWS_SECONDS):
        self._next = {}    # policy id -> clock time
        self._under = {}   # policy id -> generation the rows were read under
        # policy id -> (generation, targets version, clock time) of the
        # last read of its target rows, plus its share of the lengthening.
        self._rows = {}
        self._rnd = rnd or random.Random()
        self._rows_seconds = rows_seconds

    def due(self, policies, now, generation):
        """The policies to read now; ``generation(id)`` is the held one.

        When some are due, those due within half a period come along: a
        takeover's policies, read when taken, join the others' reads
        instead of keeping a tick of their own, and the fixed cost of a
        resolution (its transaction, the stack rows' query, the tick's
        share of cold caches) is paid once a period, not at every tick.
        """
        held = {p.id for p in policies}
        for gone in (set(self._next) | set(self._rows)) - held:
            self._next.pop(gone, None)
            self._under.pop(gone, None)
            self._rows.pop(gone, None)
        due = [p for p in policies
               if self._next.get(p.id, 0) <= now or self._stale(p, generation)]
        if not due:
            return due
        soon = now + REFRESH_SECONDS / 2
        return [p for p in policies
                if self._next.get(p.id, 0) <= min(
                    soon, now + p.parsed.interval / 2.0) or
                self._stale(p, generation)]

    def _stale(self, policy, generation):
        """Held under a new generation, or its servers' version grew.

        Either way the rows read are not what is stored: a policy enabled
        again, say, gave its targets a grace that the planner must see in
        the tick its switch is seen, not a resolution later.
        """
        known = self._rows.get(policy.id)
        return (self._under.get(policy.id) != generation(policy.id) or
                (known is not None and
                 known[1] != getattr(policy, 'targets_version', None)))

    def read(self, policies, now, generation):
        """Record that these policies' targets were just resolved."""
        for policy in policies:
            self._next[policy.id] = now + min(REFRESH_SECONDS,
                                              policy.parsed.interval)
            self._under[policy.id] = generation(policy.id)

    def rows_due(self, policies, now, generation):
        """Ids of the policies whose target rows are to be read again.

        Those held under a new generation, whose servers' version grew (a
        sync, a user's reset: every write but this engine's own), or not
        read for ``ROWS_SECONDS`` (to half as long again); the rows of the
        others are as this engine last read and wrote them.
        """
        due = set()
        for policy in policies:
            known = self._rows.get(policy.id)
            if (known is None or known[0] != generation(policy.id) or
                    known[1] != getattr(policy, 'targets_version', None) or
                    now - known[2] >= self._rows_seconds):
                due.add(policy.id)
        return due

    def aged(self, policies, generation):
        """Ids of the policies whose rows are due only by their age.

        Read under the generation held and at the servers' version they
        have: their rows are checked against memory, not loaded again.
        """
        aged = set()
        for policy in policies:
            known = self._rows.get(policy.id)
            if (known is not None and known[0] == generation(policy.id) and
                    known[1] == getattr(policy, 'targets_version', None)):
                aged.add(policy.id)
        return aged

    def rows_read(self, policies, now, generation):
        for policy in policies:
            self._rows[policy.id] = (
                generation(policy.id),
                getattr(policy, 'targets_version', None),
                now + self._rnd.uniform(0, self._rows_seconds / 2))


class Monitor(object):

    def __init__(self, engine_id, host, registry=None, adapter=None,
                 listener_factory=_lifecycle_listener,
                 url_checker_factory=_url_checker, forwarder=None,
                 octavia=None, conf=cfg.CONF, clock=time.monotonic):
        if registry is None:
            registry = registry_mod.Registry(engine_id)
        self.registry = registry
        self.tracker = tracker_mod.Tracker(
            engine_id, host, fresh_resolution=self._fresh_resolution)
        self._blind_modes = blind_modes.BlindModes(engine_id)
        # The leases carry when the detectors last confirmed what is
        # stored.
        registry.observed = lambda: self.tracker.observed_through(
            self.poller.polled_at)
        self.router = routing.Router(
            engine_id, self.tracker, forwarder,
            live=lambda: getattr(registry.partition, 'members', None))
        # What the poller saw this tick, handed to the tracker at once.
        self._polled = []
        adapter = adapter or nova_adapter.NovaAdapter(conf)
        # Whether each server's compute reports: listed once per poll,
        # and at most once a second for recovery (``place``).
        self.hosts = compute_hosts.ComputeHosts(adapter)
        self.poller = nova_status.StatusPoller(
            adapter, self._polled.append,
            # Servers checked by URL are listed too, for their addresses.
            lambda: self.tracker.servers(policy_spec.POLLED),
            conf.heat_health.node_status_resync_cycles,
            stuck_after=self.tracker.stuck_after,
            power_grace=conf.heat_health.node_power_state_grace,
            hosts=self.hosts,
            host_return_grace=conf.heat_health.node_host_return_grace)
        self.hosts.listed = self.poller.listed
        self.tracker.on_look_again = lambda server_id: self.poller.recheck(
            [server_id])
        self._octavia = octavia or octavia_adapter.OctaviaAdapter(conf)
        self.lb_poller = lb_status.MemberStatusPoller(
            self._octavia.members, self.tracker.observe_all, clock=clock)
        self._pool_states = {}   # pool id -> (admin state up, until)
        self._listener_factory = listener_factory
        self._listener = None
        self._url_checker = (url_checker_factory(self.tracker)
                             if url_checker_factory else None)
        self._costs = (poll_costs.PollCosts(adapter, self._url_checker)
                       if conf.heat_health.log_poll_costs else None)
        self._tick = conf.heat_health.monitor_tick
        self._clock = clock
        self._policies = {}      # id -> Policy
        self._next_claim = 0     # clock time of the next claim
        # (group members, registrations) as of the last claim
        self._claimed_at = None
        # What the tracker's last load was compared from (``_load_mark``).
        self._loaded_mark = None
        self._targets = {}       # policy id -> [Target]
        self._targets_read = 0   # reads that brought target rows
        self._refresh = RefreshSchedule()
        self._next_poll = {}     # policy id -> clock time
        self._next_url_check = {}  # policy id -> clock time
        self._next_lb_poll = {}  # policy id -> clock time
        self._next_probe = 0     # clock time of the next liveness probe
        self._fresh = {}         # policy id -> Resolution, this tick's
        self._learnt = {}        # target id -> (server name, addresses)
        self._signatures = LoadSignatures()
        self._watched_sent = None
        self._stopping = threading.Event()
        self._thread = None
        self._ticking = None     # the thread running a tick now
        # Long steps of a tick (a takeover's refresh, a listing of many
        # pages) say they progress: heartbeats and leases go on.
        self.registry.on_progress = self._keep_alive
        if hasattr(adapter, 'on_request'):
            adapter.on_request = self._keep_alive

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='heat-health-monitor')
        self._thread.start()

    def _start_listener(self):
        """Once the first tick knows what is watched (deployment-wide)."""
        if self._listener is None and self._listener_factory is not None:
            self._listener = self._listener_factory(self.router)
            self._send_watched()
            self._listener.start()

    def stop(self):
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._listener is not None:
            self._listener.stop()
        if self._url_checker is not None:
            self._url_checker.stop()
        try:
            self.registry.release()
        except Exception:
            LOG.exception('Could not release the policies of this engine')

    def _run(self):
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception:
                LOG.exception('Monitor tick failed; retrying next tick')
            self._stopping.wait(self._tick)

    def tick(self):
        self._ticking = threading.current_thread()
        try:
            self._one_tick()
        finally:
            self._ticking = None

    def _one_tick(self):
        now = self._clock()
        self._fresh = {}
        with self._step('claim'):
            if not self._heartbeat() and now >= self._next_probe:
                self._next_probe = now + max(
                    1.0, self.registry.lease_seconds / 3.0)
                self.registry.free_dead_owners()
            claimed = self._claim_if_due(now)
        with self._step('resolve'):
            self._resolve_due(now)
        with self._step('load'):
            load_and_follow(self.tracker, self.poller, self._load_if_changed)
            self._keep_alive()
            self._observe_polled()
        with self._step('index'):
            if claimed and self.router.refresh() or self._listener is None:
                self._send_watched()
            self._start_listener()
        with self._step('poll'):
            self._poll_if_due(now)
            self._keep_alive()
            self._observe_polled()
        with self._step('urls'):
            self._check_urls_if_due(now)
        with self._step('pools'):
            self._read_pools_if_due(now)
        with self._step('settle'):
            self.tracker.settle()
            self.tracker.flush()
            self._blind_modes.store(self.tracker)

    def _claim_due(self, now):
        """Whether this tick claims: ``CLAIM_SECONDS`` passed, or sooner.

        Sooner when the group's members changed (policies move) or a
        policy was registered here since the last claim.
        """
        partition = self.registry.partition
        members = getattr(partition, 'members', None)
        return (now >= self._next_claim or
                (members, self.registry.registrations) != self._claimed_at)

    def _claim_if_due(self, now):
        """Claim the policies when due; True if it did."""
        if not self._claim_due(now):
            return False
        partition = self.registry.partition
        self._claimed_at = (getattr(partition, 'members', None),
                            self.registry.registrations)
        self._next_claim = now + CLAIM_SECONDS
        policies = {p.id: p for p in self.registry.claim()}
        for gone in set(self._policies) - set(policies):
            for cache in (self._targets, self._next_poll,
                          self._next_url_check, self._next_lb_poll):
                cache.pop(gone, None)
        self.lb_poller.forget(set(self._policies) - set(policies))
        self._policies = policies
        return True

    def _step(self, name):
        """A step of the tick, its CPU counted when poll costs are logged."""
        if self._costs is None:
            return contextlib.nullcontext()
        return self._costs.step(name)

    def _resolve_due(self, now):
        """Resolve the targets of the policies due; read their rows if due."""
        due = self._refresh.due(self._policies.values(), now,
                                self.registry.generation)
        if due:
            generation = self.registry.generation
            read = self._refresh.rows_due(due, now, generation)
            aged = read & self._refresh.aged(due, generation)
            found = self.registry.refresh_all(due, read=read - aged)
            found.update(read_unless_held(self.tracker, aged - set(found)))
            self._targets.update(found)
            self._targets_read += bool(found)
            self._refresh.rows_read(
                [p for p in due if p.id in found or p.id in aged], now,
                generation)
            self._heartbeat()
        self._refresh.read(due, now, self.registry.generation)

    def _load_mark(self):
        """What a load depends on, told without going over the policies.

        The policies claimed (a new dict at each claim), the target rows
        read (a new list per policy read), the registry's Resolutions and
        this engine's own writes: while these stay, the last comparison
        stands and the tick goes over no policy.
        """
        return (self._policies, self._targets_read,
                self.registry.resolutions_changed, self.tracker.writes)

    def _load_if_changed(self):
        mark = self._load_mark()
        if mark == self._loaded_mark:
            self.router.replay()
            return
        self._loaded_mark = mark
        resolutions = {pid: self.registry.resolution(p)
                       for pid, p in self._policies.items()}
        changed, unchanged, parts = self._signatures.compare(
            self._policies, self.registry.generation, resolutions,
            self._targets, self.tracker.written)
        if changed:
            generations = {pid: self.registry.generation(pid)
                           for pid in self._policies}
            let_go = self.tracker.load(list(self._policies.values()),
                                       self._targets, generations,
                                       resolutions, unchanged=unchanged)
            self._signatures.loaded(parts)
            self.router.hand_on(let_go)
        self.router.replay()

    def _heartbeat(self):
        """Tell the group this loop is alive; False without a group.

        Told when a tick starts and again after each long step of it; the
        partition's heartbeats go on for a lease after the last call, so
        that a takeover (targets stored, servers looked up, their states
        stored) that outlasts the group's membership timeout on a busy
        host does not drop the engine and hand its policies on.
        """
        partition = self.registry.partition
        if partition is None or not partition.enabled:
            return False
        partition.refresh()
        return True

    def _keep_alive(self):
        """This tick progresses: heartbeats go on and leases are kept.

        Cheap (the heartbeat is sent by the partition's own thread, leases
        are renewed at most once a sixth of a lease), so that a long step
        says it at each page or policy. Only from the tick itself: a
        recovery thread that progresses while the loop hangs keeps
        nothing.
        """
        if self._ticking is not threading.current_thread():
            return
        partition = self.registry.partition
        if partition is not None and partition.enabled:
            partition.progress()
        try:
            self.registry.renew()
        except Exception as error:
            # The next claim renews them, or they run out: both safe.
            LOG.warning('Could not renew the leases of this engine: %s',
                        (str(error).splitlines() or [error])[0])

    def _observe_polled(self):
        """Hand what the poller saw to the tracker, in batches.

        A takeover looks up hundreds of servers, a poll may find many
        changed: each batch is stored in one transaction, not one per
        server, and a heartbeat goes between two batches.
        """
        polled = list(self._polled)
        del self._polled[:]
        for start in range(0, len(polled), POLLED_BATCH):
            if start:
                self._heartbeat()
                self._keep_alive()
            self.tracker.observe_all(polled[start:start + POLLED_BATCH])

    def _send_watched(self):
        """Tell the listener what is watched now.

        Its workers filter with the set; every listener handles then the
        news it set aside about servers it did not know to be watched.
        """
        watch = getattr(self._listener, 'watch', None)
        if watch is None:
            return
        watched = self.router.watched()
        if watched != self._watched_sent:
            watch(watched)
            self._watched_sent = watched

    def _poll_if_due(self, now):
        """One listing for every polled policy, when any of them is due.

        All are then due again from now: a policy that came later (a
        takeover, a new stack) joins the next poll of the others instead
        of adding a listing in between (its servers were looked up by id
        when they became watched).
        """
        polled = [p for p in self._policies.values() if p.parsed.polled]
        upcoming = min([self._next_poll[p.id] for p in polled
                        if p.id in self._next_poll] or [now])
        for policy in polled:
            self._next_poll.setdefault(
                policy.id, min(upcoming, now + policy.parsed.interval))
        if not any(self._next_poll[p.id] <= now for p in polled):
            return
        news = self.poller.poll()
        for policy in polled:
            self._next_poll[policy.id] = now + policy.parsed.interval
        if self._costs is not None:
            self._costs.cycle(len(self.poller.listed), news)

    def blind(self, policy_id):
        """Why the policy's observers cannot be trusted now, or None."""
        return self.poller.failure or self.lb_poller.blind(policy_id)

    def _read_pools_if_due(self, now):
        """LB_STATUS_POLLING: read each pool of the policies due once."""
        due = [p for p in self._policies.values()
               if p.parsed.options(obs.LB_STATUS_POLLING) is not None and
               self._next_lb_poll.get(p.id, 0) <= now]
        if not due:
            return
        for policy in due:
            self._next_lb_poll[policy.id] = now + policy.parsed.interval
        watched = {p.id: {t.server_id for t in self._targets.get(p.id, ())}
                   for p in due}
        try:
            pools = lb_status.pools(heat_context.get_admin_context(), due,
                                    watched, self._pool_enabled)
        except Exception:
            LOG.exception('Could not read the load balancers of %d '
                          'policies', len(due))
            return
        self.lb_poller.poll(pools)

    def _pool_enabled(self, pool_id):
        """The pool's admin state, read again every minute."""
        now = self._clock()
        known = self._pool_states.get(pool_id)
        if known is None or known[1] <= now:
            try:
                enabled = self._octavia.pool_enabled(pool_id)
            except octavia_adapter.OctaviaUnavailable:
                # The member listing will say Octavia cannot be read.
                return True
            known = self._pool_states[pool_id] = (
                enabled, now + POOL_STATE_SECONDS)
        return known[0]

    def _check_urls_if_due(self, now):
        """Start the poll URL checks of every policy due (non-blocking).

        Each check is the policy's own (its verdict is for that policy's
        target only) and counts in its project's share of the workers.
        """
        if self._url_checker is None:
            return
        for policy in self._policies.values():
            options = policy.parsed.options(obs.NODE_STATUS_POLL_URL)
            due = self._next_url_check.get(policy.id)
            if options is None or (due or 0) > now:
                continue
            # The next one is due an interval after this one was, so
            # that a late tick does not push every later check back.
            due = now if due is None or due < now - policy.parsed.interval \
                else due
            self._next_url_check[policy.id] = due + policy.parsed.interval
            due_at = time.monotonic() - (self._clock() - due)
            for target in self._targets.get(policy.id, ()):
                self._learn(target)
                self._url_checker.submit(poll_url.Target(
                    target.server_id, target.server_name,
                    list(target.addresses or ()), policy.id,
                    policy.project_id, due_at), options)
        self._store_learnt()

    def _learn(self, target):
        """Take the name and addresses Nova last listed for the server.

        Changes are stored (by ``_store_learnt``), so that an engine that
        starts again can check poll URLs before it has listed anything.
        """
        listed = self.poller.listed.get(target.server_id)
        if listed is None:
            return
        addresses = list(listed.addresses or ())
        if (listed.name, addresses) != (target.server_name,
                                        list(target.addresses or ())):
            target.server_name = listed.name
            target.addresses = addresses
            self._learnt[target.id] = (listed.name, addresses)

    def _store_learnt(self):
        learnt, self._learnt = self._learnt, {}
        try:
            target_object.Target.record_details(learnt)
        except Exception:
            LOG.exception('Could not store the names and addresses of %d '
                          'servers', len(learnt))

    def _fresh_resolution(self, policy_id):
        """Fresh from Heat, at most once per policy per tick.

        Asked before a target is declared failed (outside the tracker's
        lock).
        """
        if policy_id in self._fresh:
            return self._fresh[policy_id]
        policy = self._policies.get(policy_id)
        if policy is None:
            return None
        try:
            found = self.registry.resolve_now(policy)
        except Exception as error:
            # Its stack cannot be read now (the database is away, or the
            # stack's data is bad, which the refresh reports): this
            # policy's failures wait, the others' do not.
            LOG.error('Could not tell whether a stack action works on the '
                      'targets of policy %(p)s: deciding them later (%(e)s)',
                      {'p': policy_id, 'e': (str(error).splitlines() or
                                             [type(error).__name__])[0]})
            # Not kept: the next failure found asks again.
            return registry_mod.HELD
        self._fresh[policy_id] = found
        return found
