"""The seeded explorer: random interleavings and faults, checked each step.

``explore(seed, steps)`` builds a World whose policy is drawn from the
seed (its ladder with or without RECREATE, fencing, max_concurrent, a pool
or not, 2-6 servers, thresholds and back-off), then lets a scheduler seeded
the same way pick each step: an engine's tick, its recovery pass or one
of its queued steps (any of them: interleavings), the clock moving a
little or a lot, and now and then a fault (a failed or committed-then-lost
write, a handover, kill -9 now or at a call, Nova/Octavia/Heat errors and
timeouts, an update that times out but happens, a user's update, suspend,
pause, disable, mark healthy (its two writes at once or with steps
between) or unhealthy, servers breaking, healing,
breaking again once healed, locked, a poll's verdict held back and
delivered late, after newer ones; a compute host whose nova-compute stops
reporting, its guests running on or lost, and comes back 5-40 virtual
seconds later, or, rarely, a host forced down and forced up again
10-60 seconds later; a load balancer held busy for
several recovery passes, so that drains are carried over passes, engines
and handovers, and give up after ``lb_status_timeout``). Some worlds
(``shared``) also have each policy check its own poll URLs, and another
project's policy watch policy-0's servers: its URL of a server, or any
policy's, stops answering while Nova says ACTIVE, and such policy-scoped
verdicts are also held back and delivered late. Most steps are progress, so
recoveries also complete.

After each step ``invariants.Checker`` judges the world; the first
violation ends the run. The Result names the seed and the last
``TRACE_STEPS`` steps: the same seed and steps replay it (in a process
with the same PYTHONHASHSEED).
"""

import collections
import random

from mistralclient.api import base as mistral_base
from oslo_config import cfg
from oslo_db.sqlalchemy import engines as db_engines
import requests
import sqlalchemy

from heat_health.engine.monitor import nova_status
from heat_health.engine.recovery import outside_rungs
from heat_health.policy import observation as obs
from tests.simulation import faults as faults_mod
from tests.simulation import heat_double
from tests.simulation import invariants
from tests.simulation import nova_double
from tests.simulation import octavia_double
from tests.simulation import world as world_mod

TRACE_STEPS = 40
GRACE = 20
# Each PHASE steps: faults in the first CHAOS of them, then calm (the
# faults not struck yet dropped: outages end), so that the liveness bounds
# get quiet time to be judged in.
PHASE, CHAOS = 60, 35

LADDERS = (
    None, None,
    [{'name': 'START'}],
    [{'name': 'REBOOT', 'params': {'type': 'SOFT'}},
     {'name': 'REBOOT', 'params': {'type': 'HARD'}}],
    [{'name': 'REBOOT', 'params': {'type': 'HARD'}}, {'name': 'RECREATE'}],
    [{'name': 'START'}, {'name': 'REBOOT', 'params': {'type': 'HARD'}},
     {'name': 'RECREATE'}],
    [{'name': 'REBUILD'}, {'name': 'RECREATE'}],
    [{'name': 'RECREATE'}],
    [{'name': 'REBOOT', 'params': {'type': 'HARD'}}, {'name': 'EVACUATE'},
     {'name': 'RECREATE'}],
    [{'name': 'EVACUATE'}, {'name': 'START'}],
)
NOVA_CALLS = ('get', 'start', 'stop', 'reboot', 'rebuild', 'unpause',
              'resume', 'evacuate')
# The Nova actions are named too: a kill right after Nova accepted one
# (before its outcome is stored) is where an action is most easily sent
# twice.
CRASH_CALLS = (('nova', '*'), ('nova', 'start'), ('nova', 'reboot'),
               ('nova', 'rebuild'), ('nova', 'stop'),
               ('db', 'target_transition'),
               ('db', 'target_store_columns'), ('octavia', 'member_batch'),
               ('heat', 'mark_failed'), ('heat', 'update_target'),
               ('heat', 'clear_mark'), ('db', 'policy_set_braked'),
               ('octavia', 'load_balancer_show'))
# Seconds a load balancer is held PENDING_UPDATE: within a pass's wait,
# over several passes, past the drain's lb_status_timeout (10 s).
HOLD_SECONDS = (2, 5, 8, 15, 30)
# Virtual seconds a compute host stops reporting, and is forced down.
# Nova's service_down_time in the local deployment.
SERVICE_DOWN_SECONDS = 10
HOST_STOP_SECONDS = (5, 40)
HOST_DOWN_SECONDS = (10, 60)


class Result(collections.namedtuple('Result', [
        'seed', 'steps', 'violation', 'trace', 'shape'])):
    """A run: ``violation`` None when every step kept the invariants."""

    __slots__ = ()

    def report(self):
        lines = ['seed %d: %s after %d steps (%s)' % (
            self.seed, self.violation or 'no violation', self.steps,
            self.shape)]
        lines += ['  ' + line for line in self.trace]
        return '\n'.join(lines)


class Violation(AssertionError):
    def __init__(self, result):
        super(Violation, self).__init__(result.report())
        self.result = result


def policy_shape(rnd):
    """(World kwargs, recovery limit of the engines) drawn from ``rnd``."""
    recovery = {
        'max_concurrent': rnd.randint(1, 3),
        'success_threshold': rnd.randint(1, 2),
        'backoff_initial': rnd.choice([2, 5, 10]),
        'backoff_max': rnd.choice([20, 60]),
        'max_attempts': rnd.randint(2, 5),
        'attempt_window': rnd.choice([300, 3600]),
        'healthy_reset': rnd.choice([60, 600]),
    }
    ladder = rnd.choice(LADDERS)
    if ladder:
        recovery['actions'] = ladder
    if rnd.random() < 0.5:
        recovery['fencing'] = ['COMPUTE']
    if rnd.random() < 0.08:
        recovery['mode'] = 'OBSERVE'
    policy = {'detection': {'interval': 5, 'node_update_timeout': GRACE,
                            'recovery_conditional': 'ANY_FAILED',
                            'detection_modes': [
                                {'type': obs.NODE_STATUS_POLLING,
                                 'options': {}}]},
              'recovery': recovery}
    kwargs = dict(policy=policy, servers=rnd.randint(2, 6),
                  pool=rnd.random() < 0.7,
                  policies=1 if rnd.random() < 0.8 else 2)
    # A group of template members (one stack each), a group, flat.
    shape = rnd.random()
    kwargs.update(nested='members' if shape < 0.3 else shape < 0.7,
                  weight=rnd.randint(1, 9))
    limit = rnd.choice([1, 2, 10])
    kwargs['shared'] = rnd.random() < 0.3
    return kwargs, limit


def member_shape(rnd, kwargs):
    """Whether RECREATE replaces whole members; where Heat shows a gap.

    Most worlds of template members (a stack each) whose ladder may
    RECREATE replace the member whole (``replace: MEMBER``): the target's
    stack id changes with each replacement; half of those RECREATE at
    once. In a third of them the place holds no server while a member is
    replaced (legacy Heat). Returns whether there is such a gap; sets
    ``replace`` (and the ladder) in the policy.
    """
    recovery = kwargs['policy']['recovery']
    ladder = recovery.get('actions')
    recreates = not ladder or 'RECREATE' in [a['name'] for a in ladder]
    if kwargs['nested'] != 'members' or not recreates or \
            rnd.random() >= 0.7:
        return False
    recovery['replace'] = 'MEMBER'
    if rnd.random() < 0.5:
        recovery['actions'] = [{'name': 'RECREATE'}]
    return rnd.random() < 0.35


# Rungs outside Nova (see outside_double): how each behaves is in its
# name or URL.
OUTSIDE_RUNGS = (
    {'name': 'wf-heal', 'type': 'MISTRAL_WORKFLOW',
     'params': {'server': '{{ server.id }}'}},
    {'name': 'wf-fail', 'type': 'MISTRAL_WORKFLOW'},
    {'name': 'wf-hang', 'type': 'MISTRAL_WORKFLOW'},
    {'type': 'WEBHOOK', 'url': 'http://hooks.example/heal',
     'params': {'server': '{{ server.id }}'}},
    {'type': 'WEBHOOK', 'url': 'http://hooks.example/500'},
)
# Where an engine may be killed, or a call fail, on its way outside Nova.
OUTSIDE_FAULTS = (('mistral', 'create'), ('mistral', 'get'),
                  ('mistral', 'list'), ('mistral', 'update'),
                  ('hooks', 'post'))


def outside_shape(rnd, kwargs):
    """Whether the ladder has workflow or webhook rungs; adds them.

    A third of the worlds: one or two such rungs, before the ladder's last
    rung (or as the ladder of a state-aware policy, with a RECREATE
    after). Returns the faults to inject: (double, call, phase, count),
    a kill or an error of Mistral or of a receiver, or a start of
    Mistral's whose answer is lost (count ``'lost'``).
    """
    if rnd.random() >= 0.35:
        return []
    recovery = kwargs['policy']['recovery']
    ladder = list(recovery.get('actions') or [{'name': 'RECREATE'}])
    for rung in rnd.sample(OUTSIDE_RUNGS, rnd.randint(1, 2)):
        ladder.insert(rnd.randint(0, len(ladder) - 1), dict(rung))
    recovery['actions'] = ladder
    faults = []
    if rnd.random() < 0.5:
        # Killed once Mistral or the receiver took it, its outcome not
        # stored: the attempt most easily sent twice.
        faults.append(rnd.choice([('mistral', 'create'), ('hooks', 'post')])
                      + (faults_mod.AFTER, 'crash'))
    for _i in range(rnd.randint(0, 2)):
        double, call = rnd.choice(OUTSIDE_FAULTS)
        faults.append((double, call, rnd.choice([faults_mod.BEFORE,
                                                 faults_mod.AFTER]),
                       rnd.choice(['crash', 1, 3])))
    if rnd.random() < 0.3:
        # Mistral makes an execution and its answer is lost on the way.
        faults.append(('mistral', 'create', faults_mod.AFTER, 'lost'))
    return faults


def acting_shape(rnd, kwargs):
    """Rarer options of how the policy acts and sees, drawn apart.

    A fifth of the worlds force-delete a server RECREATE cannot stop
    (``node_force_recreate``); a sixth (of those without shared URLs)
    also poll a URL of each server that the engine may not fetch: a
    blind mode. Returns whether the world is blind.
    """
    recovery = kwargs['policy']['recovery']
    if rnd.random() < 0.2:
        recovery['node_force_recreate'] = True
    if kwargs.get('shared') or rnd.random() >= 0.17:
        return False
    kwargs['policy']['detection']['detection_modes'].append(
        dict(world_mod.URL_MODE))
    return True


def _describe(kwargs, engines, limit):
    recovery = kwargs['policy']['recovery']
    ladder = recovery.get('actions')
    names = ('/'.join(' '.join(filter(None, [
        a.get('name') or a.get('url'), (a.get('params') or {}).get('type')
        if not a.get('type') else a['type'].lower()])) for a in ladder)
        if ladder else 'state-aware')
    return ('%d engines, %d policies of %d servers%s, %s, ladder %s%s, '
            'max_concurrent %d, limit %d%s' % (
                engines, kwargs['policies'], kwargs['servers'],
                ' (a stack each)' if kwargs['nested'] == 'members' else '',
                'pool' if kwargs['pool'] else 'no pool', names,
                (', fencing' if recovery.get('fencing') else '') +
                (', force-delete' if recovery.get('node_force_recreate')
                 else ''),
                recovery['max_concurrent'], limit,
                ', OBSERVE' if recovery.get('mode') else '') +
            (', poll URLs, policy-shared on policy-0\'s servers'
             if kwargs.get('shared') else '') +
            (', %d takeover per claim' % kwargs['take_limit']
             if kwargs.get('take_limit') else '') +
            (', members replaced whole' if recovery.get('replace') ==
             'MEMBER' else ''))


def _outside_error(double):
    """What a failing Mistral or receiver raises into the engine."""
    if double == 'hooks':
        return outside_rungs.RungFailed('webhook: connection failed')
    return mistral_base.APIException(503, 'Service Unavailable')


def _no_yield(world):
    """No sleep(0) at each connection check-in.

    There is no other thread to let run, and it cost a tenth of the time.
    """
    engine = world.db._facade.writer.get_engine()
    if sqlalchemy.event.contains(engine, 'checkin',
                                 db_engines._thread_yield):
        sqlalchemy.event.remove(engine, 'checkin', db_engines._thread_yield)


class Explorer(object):
    """One seeded run; ``hook(world)`` may sabotage it (to test checks)."""

    def __init__(self, seed, engines=None, hook=None):
        self.seed = seed
        self.rnd = random.Random(seed)
        engines = engines or self.rnd.randint(2, 3)
        kwargs, self.limit = policy_shape(self.rnd)
        # Every other run takes over one policy per claim (the random
        # draws of the shape stay as they were for each seed).
        kwargs['take_limit'] = 1 if seed % 2 else None
        # Drawn apart, so that each seed's other draws stay as they were.
        member_gap = member_shape(random.Random(seed * 7919 + 1), kwargs)
        outside = outside_shape(random.Random(seed * 104729 + 3), kwargs)
        blind = acting_shape(random.Random(seed * 15485863 + 5), kwargs)
        self.workflows = any(
            a.get('type') == 'MISTRAL_WORKFLOW'
            for a in kwargs['policy']['recovery'].get('actions') or ())
        self.shape = _describe(kwargs, engines, self.limit) + (
            ' (none shown while one is replaced)' if member_gap else '') + (
            ', a poll URL the engine may not fetch' if blind else '')
        self.all_targets = {}   # policy index -> its targets before a cut
        cfg.CONF.set_override('max_concurrent_recoveries', self.limit,
                              group='heat_health')
        self.trace = collections.deque(maxlen=TRACE_STEPS)
        self.held = []          # verdicts on their way, delivered late
        self.returns = {}       # host -> (virtual seconds, how it returns)
        # Places of users' resets whose clear is done, their reset of our
        # rows not; whether a reset is split drawn apart (each seed's other
        # draws stay as they were).
        self.resets = []
        self.split_rnd = random.Random(seed * 32452843 + 7)
        self.world = None
        self.checker = None
        try:
            self.world = world_mod.World(engines=engines, seed=seed,
                                         **kwargs)
            self.world.heat.member_gap = member_gap
            if blind:
                self.world.urls.blind.update(
                    p.id for p in self.world.policies)
            for double, call, phase, count in outside:
                if count == 'crash':
                    self.world.crash_at(double, call, phase=phase)
                elif count == 'lost':
                    self.world.mistral.lose_answers()
                else:
                    faults = {'mistral': self.world.mistral.faults,
                              'hooks': self.world.hooks.faults}[double]
                    faults.add(call, _outside_error(double), count,
                               phase=phase)
            _no_yield(self.world)
            if hook is not None:
                hook(self.world)
            self.checker = invariants.Checker(self.world)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.checker is not None:
            self.checker.close()
            self.checker = None
        if self.world is not None:
            self.world.close()
            self.world = None
        cfg.CONF.clear_override('max_concurrent_recoveries',
                                group='heat_health')

    # The run

    def run(self, steps):
        done = 0
        for done in range(1, steps + 1):
            calm = done % PHASE >= CHAOS
            if done % PHASE == CHAOS:
                self._calm()
            step = self._choose(calm)
            self.checker.before(step)
            text = self._take(step)
            self.trace.append('%4d %7.1fs %s' % (
                done, self.world.clock.seconds(), text))
            found = self.checker.after(step)
            if found:
                return Result(self.seed, done, found[0], list(self.trace),
                              self.shape)
        return Result(self.seed, done, None, list(self.trace), self.shape)

    def _calm(self):
        w = self.world
        for faults in (w.db.faults, w.nova.faults, w.nova.list_faults,
                       w.nova.host_faults, w.octavia.faults, w.heat.faults):
            faults.clear()
        w.octavia.release()
        w.urls.silent.clear()
        w.heat.follow_lags = False
        w.heat.follow_now()

    def _choose(self, calm=False):
        """The next step, by weights that favour progress."""
        w, rnd = self.world, self.rnd
        live = [e for e in w.engines if e.alive]
        dead = [e for e in w.engines if not e.alive]
        acting = [i for i, p in enumerate(w.policies) if not p.watcher]
        policy = acting[rnd.randrange(len(acting))]
        row = self.checker.policies.get(w.policies[policy].id)
        now = w.clock.seconds()
        if any(at <= now for at, _how in self.returns.values()):
            # A host due back comes back, whatever else would happen.
            return invariants.Step('host_returns', fault=True, op=policy)
        choices = [(30, 'tick'), (18, 'pass'), (16, 'advance'),
                   (1.5, 'advance_long'), (3, 'break'),
                   (0.8, 'break_together'), (0.8, 'heal'),
                   (1, 'relapse'), (1, 'hold_verdict'),
                   (0.3, 'lock'), (1.2, 'db'), (0.5, 'assign'),
                   (0.8, 'kill'), (1, 'nova'), (0.4, 'listing'),
                   (0.5, 'octavia'), (0.6, 'heat'), (0.5, 'user_update'),
                   (5 if row and row.suspended else 0.3, 'suspend'),
                   (5 if row and row.paused else 0.5, 'pause'),
                   (5 if row and not row.enabled else 0.5, 'disable'),
                   (0.3, 'mark_healthy'), (0.2, 'mark_unhealthy'),
                   (0.3, 'reset_mark'),
                   (3 if self._deciding(policy) else 0.2, 'pause_heal'),
                   (0.4, 'user_stop'),
                   (3 if self._observing(policy) else 0.2, 'observe'),
                   (0.1, 'delete_policy')]
        if self.resets:
            choices.append((2, 'reset_rows'))
        if self.checker.truth.intent:
            choices.append((1, 'user_start'))
        if len(w.policies[policy].spec['targets']) > 1 or \
                policy in self.all_targets:
            choices.append((0.2, 'targets'))
        if self.workflows:
            choices.append((0.5, 'mistral_lost'))
        if row is None:
            # Deleted: only what is no operation on it, or its return.
            choices = choices[:4] + [(3, 'delete_policy')]
        if w.octavia.pools:
            # Most often while steps wait to run: a drain meets it.
            choices.append((5 if any(e.executor.queue for e in live)
                            else 2, 'lb_busy'))
            # The pool follower works in passes: it may lag a swap, and
            # it lists the pool a step or more before its PUT.
            choices.append((0.5, 'pool_lag'))
            if w.heat.lagging:
                choices.append((3, 'pool_put' if w.heat.listed
                                else 'pool_follow'))
        if len(acting) < len(w.policies):
            choices += [(1, 'silence_url'), (1, 'hold_url_verdict')]
        states = {h.state for h in w.nova.hosts.values()}
        if nova_double.UP in states:
            choices.append((0.4, 'host_stops'))
        if states - {nova_double.DOWN}:
            choices.append((0.1, 'host_forced_down'))
        if calm:
            choices = choices[:4]
        if self.held:
            choices.append((1, 'late_verdict'))
        if any(e.executor.queue for e in live):
            choices.append((30, 'run'))
        if dead:
            choices.append((8, 'restart'))
        if not live:
            choices = [(1, 'restart')]
        total = sum(weight for weight, _n in choices)
        pick = rnd.uniform(0, total)
        for weight, name in choices:
            pick -= weight
            if pick <= 0:
                break
        if name in ('tick', 'pass', 'run'):
            engines = ([e for e in live if e.executor.queue]
                       if name == 'run' else live)
            engine = rnd.choice(engines)
            return invariants.Step(name, engine, name)
        return invariants.Step(name, fault=name not in (
            'advance', 'advance_long', 'restart', 'pool_follow',
            'pool_put'), op=policy)

    def _take(self, step):
        rnd = self.rnd
        engine = step.engine
        if step.label == 'tick':
            engine.tick()
            return '%s tick' % engine.id
        if step.label == 'pass':
            engine.recovery_pass()
            return '%s pass -> %s' % (engine.id, engine.steps or '[]')
        if step.label == 'run':
            index = rnd.randrange(len(engine.executor.queue))
            label = engine.run_step(index)
            return '%s runs %s%s' % (engine.id, label, '' if engine.alive
                                     else ' (crashed)')
        if step.fault:
            self.checker.fault()
        if step.label in ('advance', 'advance_long') and self.resets:
            # A user's reset split in two: its second write comes as time
            # passes (the scheduler's draws stay as they were).
            return '%s; %s' % (self._user_resets(),
                               getattr(self, '_' + step.label)(step.op))
        try:
            return getattr(self, '_' + step.label)(step.op)
        except Exception as e:
            return '%s: no effect (%s)' % (step.label, type(e).__name__)

    # The world's steps

    def _advance(self, policy):
        seconds = self.rnd.choice([1, 1, 2, 3])
        self.world.advance(seconds)
        return 'advance %ss' % seconds

    def _advance_long(self, policy):
        seconds = self.rnd.choice([10, 20, 35])
        self.world.advance(seconds)
        return 'advance %ss' % seconds

    def _pool_lag(self, policy):
        self.world.heat.follow_lags = not self.world.heat.follow_lags
        return 'pool follower lags: %s' % self.world.heat.follow_lags

    def _pool_follow(self, policy):
        return 'pool follower lists %d pools' % (
            self.world.heat.follow_list())

    def _pool_put(self, policy):
        return 'pool follower sends what it listed: %d members swapped' % (
            self.world.heat.follow_put())

    def _index(self, policy):
        return self.rnd.randrange(len(self.world.places(policy)))

    def _reporting(self, policy):
        """Indexes of the servers whose host reports (Nova sees them)."""
        w = self.world
        return [i for i in range(len(w.places(policy)))
                if w.nova._reporting(w.server(i, policy))]

    def _break(self, policy):
        indexes = self._reporting(policy)
        if not indexes:
            return 'break: no server on a host that reports'
        index = self.rnd.choice(indexes)
        how = self.rnd.choice(nova_double.BREAKS)
        server = self.world.server_id(index, policy)
        self.world.break_server(index, how, policy)
        return 'server %s (p%d/%d) breaks: %s' % (server, policy, index, how)

    def _break_together(self, policy):
        """Several servers of a stack fail at once (a host, a rack)."""
        reporting = self._reporting(policy)
        places = len(reporting)
        if not places:
            return 'break together: no server on a host that reports'
        indexes = self.rnd.sample(reporting,
                                  self.rnd.randint(min(2, places), places))
        how = self.rnd.choice(nova_double.BREAKS)
        servers = [self.world.server_id(i, policy) for i in indexes]
        for index in indexes:
            self.world.break_server(index, how, policy)
        return 'servers %s (p%d) break together: %s' % (
            ', '.join(servers), policy, how)

    def _relapse(self, policy):
        """A server that recovery healed breaks again (flapping)."""
        places = self.world.places(policy)
        reporting = self._reporting(policy)
        healed = [places.index(p) for p in places
                  for row in self.checker.rows.values()
                  if row.place == p and row.state == 'HEALTHY' and
                  row.attempts and places.index(p) in reporting]
        if not healed:
            return 'relapse: no server healed by recovery'
        index = self.rnd.choice(sorted(healed))
        server = self.world.server_id(index, policy)
        self.world.break_server(index, 'SHUTOFF', policy)
        return 'server %s (p%d/%d) healed, breaks again' % (
            server, policy, index)

    def _hold_verdict(self, policy):
        """A poll's verdict on a server is seen now, delivered later."""
        index = self._index(policy)
        server = self.world.server(index, policy)
        found = nova_status.verdict(server.status)
        if found is None:
            return 'hold verdict: %s is in transition' % server.id
        if not self.world.nova._reporting(server):
            return 'hold verdict: the host of %s does not report' % (
                server.id)
        self.held.append(obs.Observation(
            server.id, found[0], found[1], obs.NODE_STATUS_POLLING,
            self.world.clock.now()))
        return 'verdict on %s held back: %s' % (server.id, found[1])

    def _own_url(self, policy):
        """(policy index, server index): policy-shared's mostly."""
        w = self.world
        if self.rnd.random() < 0.7:
            policy = [i for i, p in enumerate(w.policies) if p.watcher][0]
        return policy, self._index(policy)

    def _silence_url(self, policy):
        """A policy's own poll URL of a server stops answering, or again."""
        w = self.world
        policy, index = self._own_url(policy)
        server = w.server_id(index, policy)
        policy_id = w.policies[policy].id
        silent = (policy_id, server) not in w.urls.silent
        w.silence_url(index, policy, silent)
        return 'poll URL of %s for %s: %s' % (
            server, policy_id, 'no answer' if silent else 'answers again')

    def _hold_url_verdict(self, policy):
        """A policy's own check says UNHEALTHY, delivered later."""
        w = self.world
        policy, index = self._own_url(policy)
        server = w.server_id(index, policy)
        policy_id = w.policies[policy].id
        self.held.append(obs.Observation(
            server, obs.UNHEALTHY, 'poll URL of %s: no answer within 5s' %
            server, obs.NODE_STATUS_POLL_URL, w.clock.now(), policy_id))
        self.checker.truth.saw_failing(policy_id, server)
        return '%s\'s own verdict on %s held back: UNHEALTHY' % (
            policy_id, server)

    def _lb_busy(self, policy):
        """A load balancer stays PENDING_UPDATE for a while."""
        w = self.world
        specs = w.heat.lb_specs(w.policies[policy].stack_id) or [
            s for specs in w.heat.load_balancers.values() for s in specs]
        lb_id = self.rnd.choice(specs)['loadbalancer_id']
        seconds = self.rnd.choice(HOLD_SECONDS)
        if self.rnd.random() < 0.5:
            w.octavia.slow_next(seconds)
            return 'the next change by recovery keeps its load balancer ' \
                'busy for %ss' % seconds
        w.octavia.hold(lb_id, seconds)
        w.note('%s held busy %ss' % (lb_id, seconds))
        return 'load balancer %s busy (PENDING_UPDATE) for %ss' % (
            lb_id, seconds)

    def _late_verdict(self, policy):
        """A held verdict reaches an engine, after newer ones perhaps."""
        observation = self.held.pop(self.rnd.randrange(len(self.held)))
        live = [e for e in self.world.engines if e.alive]
        if not live:
            return 'late verdict lost: no engine runs'
        engine = self.rnd.choice(live)
        engine.observe(observation)
        return '%s gets a late verdict%s on %s: %s (seen at %.0fs)' % (
            engine.id, ' of %s' % observation.policy_id
            if observation.policy_id else '', observation.server_id,
            observation.reason,
            (observation.observed_at - self.world.clock.start)
            .total_seconds())

    def _heal(self, policy):
        indexes = self._reporting(policy)
        if not indexes:
            return 'heal: no server on a host that reports'
        index = self.rnd.choice(indexes)
        server = self.world.server_id(index, policy)
        self.world.heal_server(index, policy)
        return 'server %s heals by itself' % server

    def _host_stops(self, policy):
        """A host's nova-compute stops reporting, back in 5-40 s."""
        w, rnd = self.world, self.rnd
        host = rnd.choice([h for h, found in w.nova.hosts.items()
                           if found.state == nova_double.UP])
        lost = rnd.random() < 0.3
        # Nova notices a nova-compute that died only once its last report
        # is service_down_time old; one stopped cleanly at once.
        unnoticed = (rnd.randint(1, SERVICE_DOWN_SECONDS)
                     if rnd.random() < 0.5 else 0)
        w.host_stops(host, guests_lost=lost, unnoticed=unnoticed)
        seconds = rnd.randint(*HOST_STOP_SECONDS)
        self.returns[host] = (w.clock.seconds() + seconds, 'back')
        return 'host %s stops reporting%s%s, back in %ss' % (
            host, ' (its guests lost)' if lost else '',
            ', shown UP for %ss' % unnoticed if unnoticed else '', seconds)

    def _host_forced_down(self, policy):
        """A host is forced down (fenced), forced up in 10-60 s."""
        w, rnd = self.world, self.rnd
        host = rnd.choice([h for h, found in w.nova.hosts.items()
                           if found.state != nova_double.DOWN])
        w.host_forced_down(host)
        seconds = rnd.randint(*HOST_DOWN_SECONDS)
        self.returns[host] = (w.clock.seconds() + seconds, 'forced_up')
        return 'host %s forced down, up in %ss' % (host, seconds)

    def _host_returns(self, policy):
        """The hosts due back come back (by name, in order)."""
        w = self.world
        now = w.clock.seconds()
        done = []
        for host in sorted(self.returns):
            at, how = self.returns[host]
            if at > now:
                continue
            del self.returns[host]
            if how == 'back':
                w.host_back(host)
                done.append('host %s reports again' % host)
            else:
                w.host_forced_up(host)
                done.append('host %s forced up' % host)
        return ', '.join(done)

    def _lock(self, policy):
        index = self._index(policy)
        server = self.world.server(index, policy)
        locked = not server.locked
        self.world.lock_server(index, locked, policy)
        return 'server %s locked: %s' % (server.id, locked)

    def _db(self, policy):
        count = self.rnd.randint(1, 2)
        committed = self.rnd.random() < 0.5
        self.world.fail_writes(count, committed=committed)
        return 'next %d db writes fail%s' % (
            count, ' after committing' if committed else '')

    def _assign(self, policy):
        engine = self.rnd.randrange(len(self.world.engines))
        self.world.assign(policy, engine)
        return 'ring: policy-%d -> engine-%d' % (policy, engine)

    def _kill(self, policy):
        live = [e for e in self.world.engines if e.alive]
        if self.rnd.random() < 0.5 and live:
            engine = self.rnd.choice(live)
            engine.kill()
            return '%s killed' % engine.id
        double, call = self.rnd.choice(CRASH_CALLS)
        phase = self.rnd.choice([faults_mod.BEFORE, faults_mod.AFTER])
        self.world.crash_at(double, call, phase=phase)
        return 'kill -9 at the next %s.%s (%s)' % (double, call, phase)

    def _restart(self, policy):
        engine = self.rnd.choice([e for e in self.world.engines
                                  if not e.alive])
        engine.restart()
        self.checker.attach(engine)
        return '%s restarted' % engine.id

    def _nova(self, policy):
        call = self.rnd.choice(NOVA_CALLS)
        kind = self.rnd.choice(['error', 'unavailable', 'timeout'])
        phase = self.rnd.choice([faults_mod.BEFORE, faults_mod.AFTER])
        self.world.nova.faults.add(call, nova_double.error(kind),
                                   phase=phase)
        return 'nova %s fails: %s (%s)' % (call, kind, phase)

    def _listing(self, policy):
        count = self.rnd.randint(1, 3)
        self.world.nova.list_faults.add('*', nova_double.error('error'),
                                        count)
        if self.rnd.random() < 0.5:
            self.world.nova.host_faults.add(
                '*', nova_double.error('error'), count)
            return 'nova listings of servers and of compute hosts fail ' \
                '%d times' % count
        return 'nova listings fail %d times' % count

    def _octavia(self, policy):
        call = self.rnd.choice(['member_list', 'load_balancer_show',
                                'member_batch'])
        code = self.rnd.choice([500, 503, 409])
        if call == 'member_batch' and self.rnd.random() < 0.4:
            # Applied, the answer lost.
            self.world.octavia.faults.add(call, octavia_double.error(504),
                                          phase=faults_mod.AFTER)
            return 'octavia member_batch applied, its answer lost'
        self.world.octavia.faults.add(call, octavia_double.error(code))
        return 'octavia %s fails: %d' % (call, code)

    def _mistral_lost(self, policy):
        """The next workflow is created; its answer is lost (a timeout)."""
        self.world.mistral.faults.add(
            'create', requests.exceptions.ReadTimeout('read timed out'),
            phase=faults_mod.AFTER)
        return 'the next workflow is created, its answer lost'

    def _observing(self, policy):
        spec = self.world.policies[policy].spec
        return (spec.get('recovery') or {}).get('mode') == 'OBSERVE'

    def _observe(self, policy):
        """OBSERVE switched on, or back to HEAL, mid-run."""
        mode = 'HEAL' if self._observing(policy) else 'OBSERVE'
        self.world.set_mode(mode, policy)
        return 'policy-%d mode: %s' % (policy, mode)

    def _targets(self, policy):
        """The template's targets lose one name, or get them all back."""
        names = self.all_targets.pop(policy, None)
        kept = names
        if names is None:
            names = list(self.world.policies[policy].spec['targets'])
            self.all_targets[policy] = names
            kept = [n for n in names if n != self.rnd.choice(names)]
        self.world.set_targets(kept, policy)
        return 'policy-%d targets: %s' % (policy, ', '.join(kept))

    def _delete_policy(self, policy):
        """The policy deleted with its stack kept, or created again."""
        w = self.world
        if w.policies[policy].deleted:
            w.create_policy_again(policy)
            return 'policy-%d created again' % policy
        w.delete_policy(policy)
        return 'policy-%d deleted' % policy

    def _reset_mark(self, policy):
        """A user's reset, its first write: the mark cleared."""
        place = self.world.user_clears_mark(self._index(policy), policy)
        self.resets.append(place)
        return 'user resets %s: mark cleared, rows not yet' % '/'.join(
            place)

    def _reset_rows(self, policy):
        """The second write of a user's reset, as a step of its own."""
        return self._user_resets()

    def _deciding(self, policy):
        """Indexes of targets whose decision waits to be carried out."""
        policy_id = self.world.policies[policy].id
        waiting = {row.place for row in self.checker.rows.values()
                   if row.policy_id == policy_id and
                   row.state == 'RECOVERING' and
                   (row.recovery or {}).get('stage') == 'intent'}
        if not waiting:
            return []
        return [i for i, place in enumerate(self.world.places(policy))
                if place in waiting]

    def _pause_heal(self, policy):
        """Paused while a server fails, healed by hand, resumed later.

        Most often while a decision waits (its drain, its host): the
        decision must not be carried out on the healed server.
        """
        w = self.world
        reporting = self._reporting(policy)
        failing = [i for i in self._deciding(policy) if i in reporting] or [
            i for i in reporting
            if w.state(i, policy) in ('UNHEALTHY', 'RECOVERING',
                                      'VERIFYING', 'SUSPECT')]
        if not failing:
            return 'pause and heal: no failing server'
        index = self.rnd.choice(failing)
        seconds = self.rnd.choice([120, 300, 900])
        w.pause(policy)
        server = w.server_id(index, policy)
        w.heal_server(index, policy)
        w.advance(seconds)
        w.unpause(policy)
        return ('policy-%d paused, %s healed by hand, resumed %ss later' %
                (policy, server, seconds))

    def _user_stop(self, policy):
        """The server's user stops it through Nova's API, on purpose."""
        w = self.world
        index = self._index(policy)
        server = w.server(index, policy)
        if server.status != 'ACTIVE' or not w.nova._reporting(server):
            return 'user stop: %s is %s' % (server.id, server.status)
        w.user_nova('stop', index, policy)
        return 'the user of %s stops it (os-stop)' % server.id

    def _user_start(self, policy):
        """A server its user stopped is started again by that user."""
        w = self.world
        server_id = self.rnd.choice(sorted(self.checker.truth.intent))
        w.nova.client('user').servers.start(server_id)
        w.note('the user of %s starts it again' % server_id)
        return 'the user of %s starts it again (os-start)' % server_id

    def _heat(self, policy):
        call = self.rnd.choice(['update_target', 'mark_failed',
                                'stack_status', 'traversal',
                                'clear_mark', 'record_event'])
        phase = self.rnd.choice([faults_mod.BEFORE, faults_mod.AFTER])
        self.world.heat.faults.add(call, heat_double.timeout, phase=phase)
        return 'heat %s times out (%s)' % (call, phase)

    def _user_update(self, policy):
        places = self.world.places(policy)
        touching = sorted(self.rnd.sample(range(len(places)),
                                          self.rnd.randint(0, 2)))
        self.world.user_update(policy, seconds=self.rnd.choice([5, 15]),
                               touching=touching)
        self.checker.user_update(self.world.policies[policy].stack_id)
        return 'user updates the stack of policy-%d, touching %s' % (
            policy, touching)

    def _suspend(self, policy):
        row = self.checker.policies[self.world.policies[policy].id]
        if row.suspended:
            self.world.resume_stack(policy)
            return 'stack of policy-%d resumed' % policy
        self.world.suspend_stack(policy)
        return 'stack of policy-%d suspended' % policy

    def _pause(self, policy):
        row = self.checker.policies[self.world.policies[policy].id]
        if row.paused:
            self.world.unpause(policy)
            return 'policy-%d resumed by the operator' % policy
        self.world.pause(policy)
        return 'policy-%d paused' % policy

    def _disable(self, policy):
        row = self.checker.policies[self.world.policies[policy].id]
        self.world.set_enabled(not row.enabled, policy)
        return 'policy-%d enabled: %s' % (policy, not row.enabled)

    def _mark_healthy(self, policy):
        index = self._index(policy)
        place = self.world.places(policy)[index]
        if self.split_rnd.random() < 0.5:
            # Heat's half now, ours at the next advance of the clock.
            self.resets.append(self.world.user_clears_mark(index, policy))
            return 'user clears the mark of %s, resets later' % (
                '/'.join(place))
        ids = [r.id for r in self.checker.rows.values() if r.place == place]
        self.world.mark_healthy(index, policy)
        self.checker.foreign_write(ids)
        return 'user marks %s healthy' % '/'.join(place)

    def _user_resets(self):
        """The second write of the oldest half-done reset: its rows.

        By the place the user named: the index may now name another.
        """
        self.checker.fault()
        place = self.resets.pop(0)
        ids = [r.id for r in self.checker.rows.values() if r.place == place]
        self.world.reset_rows(place)
        self.checker.foreign_write(ids)
        return 'user resets the health of %s' % '/'.join(place)

    def _mark_unhealthy(self, policy):
        index = self._index(policy)
        place = self.world.places(policy)[index]
        self.world.mark_unhealthy(index, policy)
        return 'user marks %s unhealthy' % '/'.join(place)


def explore(seed, steps, engines=None, hook=None):
    """One seeded run of ``steps`` steps; returns its Result."""
    explorer = Explorer(seed, engines, hook)
    try:
        return explorer.run(steps)
    finally:
        explorer.close()
