"""One heat-health-engine of the world: the real acting core, driven.

An Engine holds a real Tracker, a real RecoveryLoop (its steps queued by a
deferred executor, so the world runs them one at a time, interleaved with
anything else), a real Drainer and the real Nova status poller over the
Nova double's listings. ``tick`` does what ``Monitor.tick`` does for the
acting core: claim (the world's ring and members), resolve and sync the
targets when due, load the tracker when something changed, look up newly
watched servers, poll Nova and check each policy's own poll URLs (the
world's ``urls``) when due, settle and flush. As ``Monitor`` and the
service do, the poller lists Nova's compute hosts at each poll and the
recovery loop asks where a server is (``ComputeHosts``), over the same
listing and on the world's clock (where the acting core has them).

Product code that fails with an ``Exception`` is logged and retried by
the real engine's loops; here it is recorded in ``errors`` and the call
returns. A ``Crash`` (kill -9) drops the engine where it stood.
"""

import inspect
import random

from oslo_config import cfg

from heat_health.common import config  # noqa: F401  (registers options)
try:
    from heat_health.engine.monitor import compute_hosts
except ImportError:     # an acting core from before compute hosts
    compute_hosts = None
try:
    from heat_health.engine import leftovers
except ImportError:     # an acting core that drops rows with leftovers
    leftovers = None
from heat_health.engine.monitor import monitor as monitor_mod
from heat_health.engine.monitor import nova_status
from heat_health.engine.monitor import tracker as tracker_mod
from heat_health.engine.ownership import registry as registry_mod
from heat_health.engine.pools import lb_drain
from heat_health.engine.recovery import loop as loop_mod
from heat_health.objects import policy as policy_object
from heat_health.objects import target as target_object
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec
from tests.simulation import faults as faults_mod
from tests.simulation import nova_double

# Seconds between two safety re-reads of a policy's target rows: much
# shorter than the deployment's, so that runs go through them often.
SAFETY_ROWS_SECONDS = 20.0
# Keystone's names of the world's users.
_USER_NAMES = {nova_double.OWNER[0]: 'demo'}


def _user_name(user_id):
    return _USER_NAMES.get(user_id, user_id)


def _takes(cls, parameter):
    """Whether the acting core's class takes this keyword (older don't)."""
    return parameter in inspect.signature(cls).parameters


class RecordingNotifier(object):
    """An oslo.messaging Notifier that keeps what it was asked to send."""

    def __init__(self):
        self.sent = []

    def info(self, ctxt, event_type, payload):
        self.sent.append((event_type, payload))


class DeferredExecutor(object):
    """Queues the recovery loop's steps instead of running them."""

    def __init__(self):
        self.queue = []   # [(fn, args, kwargs)]

    def submit(self, fn, *args, **kwargs):
        self.queue.append((fn, args, kwargs))

    def shutdown(self, wait=True, cancel_futures=False):
        del self.queue[:]


def step_label(args):
    """'Start srv-0001' for a queued _carry_out(policy, step)."""
    if len(args) == 2 and hasattr(args[1], 'target'):
        return '%s %s' % (type(args[1]).__name__, args[1].target.server_id)
    if len(args) == 2 and hasattr(args[1], 'targets'):
        return '%s %s' % (type(args[1]).__name__, '+'.join(
            t.server_id for t in args[1].targets))
    return repr(args)


class Engine(object):

    def __init__(self, world, engine_id, seed=0):
        self.world = world
        self.id = engine_id
        self.seed = seed
        self.alive = False
        self.errors = []      # (virtual seconds, where, repr)
        self.start()

    # Life

    def start(self):
        """Start with an empty memory, as a process does."""
        world = self.world
        conf = cfg.CONF
        self.notifier = RecordingNotifier()
        self.executor = DeferredExecutor()
        self.tracker = tracker_mod.Tracker(
            self.id, 'host-%s' % self.id,
            fresh_resolution=self._fresh_resolution,
            notifier=self.notifier, clock=world.clock.now,
            rnd=random.Random(self.seed))
        self._polled = []
        listing = world.nova.listing()
        hosts = {}
        self.hosts = None
        if compute_hosts is not None and _takes(nova_status.StatusPoller,
                                                'hosts'):
            # Whether each server's compute reports: listed once per
            # poll, and at most once a second for recovery (``place``).
            self.hosts = compute_hosts.ComputeHosts(
                listing, clock=world.clock.seconds)
            hosts['hosts'] = self.hosts
        self.poller = nova_status.StatusPoller(
            listing, self._polled.append,
            lambda: self.tracker.servers(policy_spec.POLLED),
            conf.heat_health.node_status_resync_cycles,
            clock=world.clock.now, stuck_after=self.tracker.stuck_after,
            **hosts)
        if self.hosts is not None:
            self.hosts.listed = self.poller.listed
        for hook in ('on_look_again', 'on_recovery'):
            # on_recovery: the hook's name in older versions of the tracker.
            if hasattr(self.tracker, hook):
                setattr(self.tracker, hook, self._recheck)
        self.drainer = lb_drain.Drainer(
            world.heat.octavia_client, clock=world.clock.seconds,
            sleep=world.sleep, specs=world.heat.lb_specs)
        place = {}
        if self.hosts is not None and _takes(loop_mod.RecoveryLoop,
                                             'place'):
            place['place'] = self.hosts.place
        if _takes(loop_mod.RecoveryLoop, 'webhooks'):
            place['webhooks'] = world.hooks
        if _takes(loop_mod.RecoveryLoop, 'user_names'):
            place['user_names'] = _user_name
        # What the service gives the registry and the RPC endpoint.
        self.undoer = (leftovers.Undoer(self.drainer, world.heat)
                       if leftovers is not None else None)
        self.loop = loop_mod.RecoveryLoop(
            self.id, self.tracker, world.heat, blind=self._blind,
            drainer=self.drainer, conf=conf, clock=world.clock.now,
            executor=self.executor, **place)
        self._policies = {}      # id -> Policy
        self._next_claim = 0     # clock time of the next claim
        self._claimed_group = None
        self._generations = {}   # id -> generation
        self._targets = {}       # policy id -> [Target]
        self._resolutions = {}   # policy id -> Resolution
        self._kept = {}          # policy id -> places kept (leftovers)
        # Seeded where the acting core draws its safety re-reads at
        # random: a run is the same every time.
        # Its safety re-read of target rows comes every 20 s or so, so
        # that a run of a few minutes goes through it many times.
        self._schedule = (
            monitor_mod.RefreshSchedule(rnd=random.Random(self.seed),
                                        rows_seconds=SAFETY_ROWS_SECONDS)
            if _takes(monitor_mod.RefreshSchedule, 'rows_seconds') else
            monitor_mod.RefreshSchedule(rnd=random.Random(self.seed))
            if _takes(monitor_mod.RefreshSchedule, 'rnd') else
            monitor_mod.RefreshSchedule())
        # The registry's claims, reading only what changed (where the
        # acting core has them).
        self._held = (registry_mod.HeldRows(clock=world.clock.seconds)
                      if hasattr(registry_mod, 'HeldRows') else None)
        self._next_poll = {}
        self._next_url = {}
        self._fresh = {}
        self._signature = None
        self._signatures = None
        self.alive = True

    def kill(self):
        """kill -9: memory and queued steps gone, leases left to expire."""
        self.alive = False
        self.executor.queue = []
        self.world.note('%s killed' % self.id)

    def restart(self, engine_id=None):
        """A new process, under the same id or ``engine_id``."""
        if engine_id is not None:
            self.id = engine_id
        self.start()
        self.world.note('%s started' % self.id)

    def release(self):
        """A graceful stop: policies released, the process gone."""
        self._guard('release', policy_object.Policy.release, self.id)
        self.alive = False
        self.executor.queue = []

    def _guard(self, where, func, *args):
        if not self.alive:
            raise RuntimeError('engine %s is not running' % self.id)
        try:
            func(*args)
            return True
        except faults_mod.Crash:
            self.world.note('%s crashed in %s' % (self.id, where))
            self.kill()
            return False
        except Exception as e:
            self.errors.append((self.world.clock.seconds(), where, repr(e)))
            return False

    # What the world drives

    def tick(self):
        """One monitor tick; False if it failed or the engine died."""
        return self._guard('tick', self._tick)

    def observe(self, observation):
        """A verdict handed to the tracker; False if that failed.

        As a listener thread or a late batch hands it over: the engine
        may die in the call (its write crashes), as in a tick.
        """
        return self._guard('observe', self.tracker.observe, observation)

    def recovery_pass(self):
        """One pass of the recovery loop: its steps are queued."""
        return self._guard('recovery pass', self.loop.run_once)

    @property
    def steps(self):
        """Labels of the queued steps, in order."""
        return [step_label(args) for _f, args, _k in self.executor.queue]

    def run_step(self, index=0):
        """Run one queued step; returns its label."""
        fn, args, kwargs = self.executor.queue.pop(index)
        label = step_label(args)
        self._guard('step %s' % label, lambda: fn(*args, **kwargs))
        return label

    def run_steps(self):
        """Run the queued steps in order (those queued meanwhile too)."""
        labels = []
        while self.alive and self.executor.queue:
            labels.append(self.run_step(0))
        return labels

    def states(self):
        return self.tracker.states() if self.alive else {}

    @property
    def owned(self):
        """{policy id: generation} this engine holds, as of its last claim."""
        return dict(self._generations)

    # The monitor's tick, for the acting core

    def _recheck(self, server_id):
        self.poller.recheck([server_id])

    def _blind(self, policy_id):
        return self.poller.failure

    def _fresh_resolution(self, policy_id):
        if policy_id not in self._fresh:
            policy = self._policies.get(policy_id)
            self._fresh[policy_id] = (
                None if policy is None else
                self.world.heat.resolution(policy.stack_id,
                                           policy.parsed.targets))
        return self._fresh[policy_id]

    def _tick(self):
        world = self.world
        now = world.clock.seconds()
        self._fresh = {}
        claim, ring = policy_object.Policy.claim, {}
        if self._held is not None:
            claim = self._held.claim
            ring = {'ring': (world.members,
                             tuple(sorted(world.ring.items())))}
        # As the monitor: a claim every CLAIM_SECONDS (where the acting
        # core has it), and at once when the group changed.
        group = (world.members, tuple(sorted(world.ring.items())))
        if now >= self._next_claim or group != self._claimed_group:
            self._next_claim = now + getattr(monitor_mod, 'CLAIM_SECONDS',
                                             0)
            self._claimed_group = group
            policies = claim(
                self.id, world.lease_seconds,
                ring_owner=world.ring_owner(self.id), members=world.members,
                take_limit=world.take_limit, **ring)
        else:
            policies = list(self._policies.values())
        self._generations = {p.id: p.generation for p in policies}
        self._policies = {p.id: p for p in policies}
        for cache in (self._targets, self._next_poll, self._next_url,
                      self._resolutions):
            for gone in set(cache) - set(self._policies):
                del cache[gone]
        due = self._schedule.due(policies, now, self._generations.get)
        if due:
            self._refresh(due, now)
        self._schedule.read(due, now, self._generations.get)
        monitor_mod.load_and_follow(self.tracker, self.poller,
                                    self._load_if_changed)
        # As the monitor between long steps: only live leases are kept.
        policy_object.Policy.renew(self.id, world.lease_seconds)
        self._observe_polled()
        polled = [p for p in policies if p.parsed.polled and
                  self._next_poll.get(p.id, 0) <= now]
        if polled:
            self.poller.poll()
            for policy in polled:
                self._next_poll[policy.id] = now + policy.parsed.interval
        self._check_urls(policies, now)
        self._observe_polled()
        self.tracker.settle()
        self.tracker.flush()

    def _check_urls(self, policies, now):
        """Each policy's own poll URL checks, when due (the world's)."""
        for policy in policies:
            if (policy.parsed.options(obs.NODE_STATUS_POLL_URL) is None or
                    self._next_url.get(policy.id, 0) > now):
                continue
            self._next_url[policy.id] = now + policy.parsed.interval
            for target in self._targets.get(policy.id, ()):
                self._polled.append(self.world.urls.check(
                    policy.id, target.server_id))

    def _refresh(self, policies, now):
        """Registry.refresh_all, with the Heat double as Heat's database.

        The rows read are those Monitor.tick reads: of the policies whose
        rows are due (``RefreshSchedule.rows_due``, where the acting core
        has it) and of those whose places were just stored. Returns the
        ids of the policies whose rows were read.
        """
        rows_due = getattr(self._schedule, 'rows_due', None)
        read = (rows_due(policies, now, self._generations.get)
                if rows_due else {p.id for p in policies})
        synced = set()
        undo = getattr(leftovers, 'undo_deleted', None)
        for policy in [p for p in policies
                       if undo and getattr(p, 'deleted', False)]:
            # Registry._undo_deleted: kept only for what its rows owe.
            self._resolutions[policy.id] = registry_mod.HELD
            self._targets[policy.id] = []
            try:
                undo(self.undoer, policy)
            except faults_mod.Crash:
                raise
            except Exception:
                pass
        policies = [p for p in policies
                    if not (undo and getattr(p, 'deleted', False))]
        for policy in policies:
            resolution = self.world.heat.resolution(policy.stack_id,
                                                    policy.parsed.targets)
            previous = self._resolutions.get(policy.id)
            graced = (previous.busy - resolution.busy) if previous else ()
            if (previous is None or graced or
                    previous.places != resolution.places or
                    self._kept.get(policy.id)):
                self._sync(policy, resolution, graced)
                read.add(policy.id)
                synced.add(policy.id)
            self._resolutions[policy.id] = resolution
        aged = set()
        if hasattr(self._schedule, 'aged'):
            # Rows due only by age are checked against memory first.
            aged = (read & self._schedule.aged(policies,
                                               self._generations.get)) - {
                p.id for p in policies if p.id in synced}
        found = target_object.Target.get_all_by_policies(
            [p.id for p in policies if p.id in read - aged])
        if aged:
            found.update(monitor_mod.read_unless_held(self.tracker, aged))
        self._targets.update(found)
        if rows_due:
            self._schedule.rows_read(
                [p for p in policies if p.id in found or p.id in aged],
                now, self._generations.get)
        return set(found)

    def _sync(self, policy, resolution, graced):
        """Registry._sync's store of the places, leftovers undone first."""
        if leftovers is None:
            target_object.Target.sync(policy.id, resolution.places,
                                      policy.parsed.grace, graced)
            return
        _synced, self._kept[policy.id] = leftovers.sync(
            self.undoer, policy.id, policy.stack_id, resolution.places,
            policy.parsed.grace, graced)

    def _load_if_changed(self):
        """Monitor._load_if_changed: the tracker loads what changed."""
        resolutions = {pid: self._resolutions.get(pid) or
                       self.world.heat.resolution(p.stack_id,
                                                  p.parsed.targets)
                       for pid, p in self._policies.items()}
        signatures = getattr(monitor_mod, 'LoadSignatures', None)
        if signatures is None:
            # An acting core from before policies were loaded apart.
            signature = monitor_mod.load_signature(
                self._policies, self._generations.get, resolutions,
                self._targets, self.tracker.writes)
            if signature != self._signature:
                self.tracker.load(list(self._policies.values()),
                                  self._targets, dict(self._generations),
                                  resolutions)
                self._signature = signature
            return
        if self._signatures is None:
            self._signatures = signatures()
        changed, unchanged, parts = self._signatures.compare(
            self._policies, self._generations.get, resolutions,
            self._targets, self.tracker.written)
        if changed:
            self.tracker.load(list(self._policies.values()), self._targets,
                              dict(self._generations), resolutions,
                              unchanged=unchanged)
            self._signatures.loaded(parts)

    def _observe_polled(self):
        polled, self._polled[:] = list(self._polled), []
        if polled:
            self.tracker.observe_all(polled)
