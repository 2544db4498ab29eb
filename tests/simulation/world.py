"""A deterministic world for the acting core: engines, doubles, faults.

One virtual clock, one sqlite database made by our migrations, doubles of
Nova (with two compute hosts that can stop reporting, come back, or be
forced down), Octavia and Heat that behave as the real services do, health
policies registered as the resource plugin leaves them, and N engines
running the real Tracker, RecoveryLoop and Drainer. Nothing runs unless
the world is told: a script (or a seeded explorer) drives it step by step,
and nothing depends on wall time, threads or randomness it did not seed.

Example::

    w = World(engines=2, servers=3, pool=True)
    try:
        e = w.engines[0]
        e.tick()                     # claims the policy, stores its targets
        w.advance(21)                # past their grace (20 s)
        w.break_server(0, 'SHUTOFF')
        w.advance(2)                 # Nova's power sync: SHUTOFF
        e.tick()                     # polls: UNHEALTHY stored
        e.recovery_pass()            # queues the recovery steps
        e.steps                      # ['Start srv-0001']
        w.crash_at('nova', 'start', phase=faults.AFTER)
        e.run_step(0)                # drains, START accepted, kill -9
        w.advance(w.lease_seconds + 1)
        w.engines[1].tick()          # takes the policy over
        w.run(60)                    # every live engine, a second a step
    finally:
        w.close()

Only one World may be open at a time: it owns timeutils' override and the
database API's transaction factory until ``close``.
"""

import copy
import inspect

try:
    from heat_health.engine import leftovers
except ImportError:     # an acting core that drops rows with leftovers
    leftovers = None
from heat_health.objects import policy as policy_object
from heat_health.policy import observation as obs
from tests.simulation import clock as clock_mod
from tests.simulation import database
from tests.simulation import engine as engine_mod
from tests.simulation import faults as faults_mod
from tests.simulation import heat_double
from tests.simulation import nova_double
from tests.simulation import octavia_double
from tests.simulation import outside_double
from tests.simulation import poll_url_double

DEFAULT_POLICY = {
    'detection': {
        'interval': 5,
        'node_update_timeout': 20,
        'recovery_conditional': 'ANY_FAILED',
        'detection_modes': [{'type': obs.NODE_STATUS_POLLING,
                             'options': {}}]},
    'recovery': {'max_concurrent': 1},
    'enabled': True,
}


URL_MODE = {'type': obs.NODE_STATUS_POLL_URL,
            'options': {'poll_url': poll_url_double.URL}}

# The policy of another project that watches policy-0's servers too.
WATCHER_RECOVERY = {'actions': [{'name': 'REBOOT',
                                 'params': {'type': 'HARD'}}],
                    'max_attempts': 2, 'max_concurrent': 1}


class WouldBlock(Exception):
    """A virtual sleep the world was told not to let pass."""


class Policy(object):
    """A registered policy of the world and the stack it watches."""

    def __init__(self, policy_id, stack_id, spec, project_id='project-1',
                 watcher=False):
        self.id = policy_id
        self.stack_id = stack_id
        self.spec = spec
        self.project_id = project_id
        self.watcher = watcher
        self.deleted = False


def _merged(overrides):
    spec = copy.deepcopy(DEFAULT_POLICY)
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key].update(copy.deepcopy(value))
        else:
            spec[key] = copy.deepcopy(value)
    return spec


class World(object):
    """See the module's docstring.

    :param engines: how many engines (ids engine-0, engine-1...).
    :param policy: overrides of DEFAULT_POLICY's ``detection``,
        ``recovery`` (merged key by key) and ``enabled``.
    :param servers: servers of each policy's stack.
    :param pool: put each stack's servers behind an Octavia pool.
    :param policies: how many policies, each with a stack of its own.
    :param nested: servers in a ResourceGroup's nested stack (path
        ``group/N``), or ``'members'``: each in a group member's stack of
        its own (path ``group/N/server``), else in the root stack.
    :param drain_sleep: ``advance`` (a virtual sleep moves the clock) or
        ``raise`` (WouldBlock: the step cannot wait).
    :param shared: every policy also checks its servers' poll URLs (each
        its own), and one more policy, ``policy-shared`` of another
        project, watches policy-0's servers through a stack of its own
        (see ``HeatDouble.alias_stack``), checking its own poll URL and
        recovering by hard reboots; ``urls`` makes any policy's URL of a
        server stop answering.
    """

    def __init__(self, engines=1, policy=None, servers=3, pool=True,
                 policies=1, nested=True, seed=0, lease_seconds=30,
                 weight=1, drain_sleep='advance', shared=False,
                 take_limit=None):
        self.clock = clock_mod.VirtualClock()
        self.trace = []
        self.lease_seconds = lease_seconds
        self.take_limit = take_limit   # most policies taken per claim
        self.drain_sleep = drain_sleep
        self.ring = {}          # policy id -> engine id the ring names
        self.members = None     # live engine ids; None: leases decide
        self.db = None
        try:
            self.db = database.Database()
            self.nova = nova_double.NovaDouble(self.clock)
            self.octavia = octavia_double.OctaviaDouble(self.clock)
            self.heat = heat_double.HeatDouble(self.clock, self.nova,
                                               self.octavia)
            self.urls = poll_url_double.PollUrlDouble(self.clock, self.nova)
            self.mistral = outside_double.MistralDouble(self.clock,
                                                        self.nova)
            self.heat.mistral = self.mistral
            self.hooks = outside_double.WebhookDouble(self.clock, self.nova)
            if shared:
                policy = copy.deepcopy(policy or {})
                detection = policy.setdefault('detection', {})
                detection['detection_modes'] = list(detection.get(
                    'detection_modes') or DEFAULT_POLICY['detection'][
                        'detection_modes']) + [URL_MODE]
            self.policies = [self._add_policy(i, policy, servers, pool,
                                              nested, weight)
                             for i in range(policies)]
            if shared:
                self.policies.append(self._add_watcher(policy))
            self.engines = [engine_mod.Engine(self, 'engine-%d' % i, seed + i)
                            for i in range(engines)]
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None
        self.clock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Set-up

    def _add_policy(self, index, overrides, servers, pool, nested, weight):
        stack_id, names = self.heat.create_stack(
            'p%d' % index, servers, nested=bool(nested), pool=pool,
            weight=weight, members=nested == 'members')
        spec = _merged(overrides)
        enabled = bool(spec.pop('enabled', True))
        spec['targets'] = names
        spec['enabled'] = enabled
        policy_id = 'policy-%d' % index
        self.db.real['policy_create_or_update']({
            'id': policy_id, 'stack_id': stack_id, 'resource_name': 'health',
            'project_id': 'project-1', 'user_id': 'user-1', 'spec': spec,
            'enabled': enabled})
        return Policy(policy_id, stack_id, spec)

    def _add_watcher(self, overrides):
        """policy-shared: another project's policy on policy-0's servers."""
        found = self.heat.places(self.policies[0].stack_id)
        servers = [found[p]['server_id'] for p in
                   sorted(found, key=lambda p: found[p]['path'])]
        stack_id, names = self.heat.alias_stack('shared', servers)
        spec = _merged({'detection': (overrides or {}).get('detection', {}),
                        'recovery': WATCHER_RECOVERY})
        spec.pop('enabled', None)
        spec['targets'] = names
        spec['enabled'] = True
        self.db.real['policy_create_or_update']({
            'id': 'policy-shared', 'stack_id': stack_id,
            'resource_name': 'health', 'project_id': 'project-2',
            'user_id': 'user-2', 'spec': spec, 'enabled': True})
        return Policy('policy-shared', stack_id, spec, 'project-2',
                      watcher=True)

    def policy_of_stack(self, stack_id):
        """The world's policy whose stack holds ``stack_id`` (or None)."""
        root = self.heat._root_of(stack_id) if stack_id in \
            self.heat.stacks else stack_id
        for policy in self.policies:
            if policy.stack_id == root:
                return policy
        return None

    def silence_url(self, index, policy=0, silent=True):
        """The policy's own poll URL of a server stops answering (or not).

        Nova still says the server is ACTIVE and running.
        """
        server_id = self.server_id(index, policy)
        self.urls.silence(self._policy(policy).id, server_id, silent)
        self.note('poll URL of %s for %s silent: %s' % (
            server_id, self._policy(policy).id, silent))

    # Time and the trace

    def note(self, text):
        self.trace.append((self.clock.seconds(), text))

    def advance(self, seconds):
        self.clock.advance(seconds)
        self.note('advance %ss' % seconds)

    def sleep(self, seconds):
        """The Drainer's sleep."""
        if self.drain_sleep == 'raise':
            raise WouldBlock('a step would wait %ss' % seconds)
        self.clock.advance(seconds)

    def run(self, seconds, step=1.0):
        """Every live engine ticks, plans and runs its steps, each step."""
        end = self.clock.seconds() + seconds
        while self.clock.seconds() < end:
            for engine in self.engines:
                if engine.alive:
                    engine.tick()
                if engine.alive:
                    engine.recovery_pass()
                if engine.alive:
                    engine.run_steps()
            self.clock.advance(step)

    def run_until(self, done, seconds=120):
        """``run`` a second at a time until ``done()``; fails if never."""
        for _second in range(seconds):
            if done():
                return
            self.run(1)
        assert done(), self.trace[-10:]

    # Engines and ownership

    def ring_owner(self, engine_id):
        """The claim's ring, as this engine sees it.

        The world's choice where it made one; elsewhere every engine wants
        every policy, as without a coordination backend.
        """
        return lambda policy_id: self.ring.get(policy_id, engine_id)

    def assign(self, policy, engine):
        """The ring moves a policy to an engine (index or id)."""
        engine_id = (self.engines[engine].id if isinstance(engine, int)
                     else engine)
        self.ring[self._policy(policy).id] = engine_id
        self.note('ring: %s -> %s' % (self._policy(policy).id, engine_id))

    def owner(self, policy=0):
        """(engine id, generation) stored for the policy."""
        row = self.db.real['policy_get'](self._policy(policy).id)
        return row.engine_id, row.generation

    # Looking at the world

    def _policy(self, policy):
        return self.policies[policy] if isinstance(policy, int) else \
            [p for p in self.policies if p.id == policy][0]

    def places(self, policy=0):
        """[(stack id, resource name)] of the policy's servers, by path."""
        found = self.heat.places(self._policy(policy).stack_id)
        return sorted(found, key=lambda place: found[place]['path'])

    def server_id(self, index, policy=0):
        """The id of the server at the index-th place now."""
        found = self.heat.places(self._policy(policy).stack_id)
        return found[self.places(policy)[index]]['server_id']

    def server(self, index, policy=0):
        """The Nova double's record of that server."""
        return self.nova.find(self.server_id(index, policy))

    def targets(self, policy=0):
        """The stored target rows of the policy, by path."""
        policy_id = self._policy(policy).id
        return self.db.real['target_get_all']([policy_id])[policy_id]

    def state(self, index, policy=0):
        """The stored state of the index-th place's target."""
        place = self.places(policy)[index]
        return [t.state for t in self.targets(policy)
                if (t.stack_id, t.resource_name) == place][0]

    def weights(self, policy=0):
        """{address: weight} of the policy's pool members now."""
        spec = self.heat.lb_specs(self._policy(policy).stack_id)[0]
        return self.octavia.weights(spec['pool_id'])

    def accepted(self, actor='recovery'):
        """Nova actions accepted from ``actor`` (recovery: the engines)."""
        return [a for a in self.nova.accepted if a.actor == actor]

    # Faults

    def break_server(self, index, how, policy=0, **kwargs):
        server_id = self.server_id(index, policy)
        self.nova.break_server(server_id, how, **kwargs)
        self.note('server %s breaks: %s' % (server_id, how))

    def heal_server(self, index, policy=0):
        server_id = self.server_id(index, policy)
        self.nova.heal(server_id)
        self.note('server %s heals by itself' % server_id)

    # Compute hosts (see nova_double)

    def host_of(self, index, policy=0):
        """The compute host of the index-th place's server."""
        return self.server(index, policy).host

    def host_stops(self, host, guests_lost=False, unnoticed=0):
        """The host's nova-compute stops reporting (UNKNOWN).

        ``guests_lost``: the machine went down too; else its guests run on.
        ``unnoticed``: seconds Nova still shows it UP.
        """
        self.nova.host_stops(host, guests_lost, unnoticed)
        self.note('host %s stops reporting%s%s' % (
            host, ', its guests lost' if guests_lost else '',
            ', shown UP for %ss' % unnoticed if unnoticed else ''))

    def host_back(self, host):
        """Its nova-compute starts again: restart handling, then UP."""
        self.nova.host_back(host)
        self.note('host %s reports again' % host)

    def host_forced_down(self, host):
        """An operator or fencing agent forces the host down (DOWN)."""
        self.nova.host_forced_down(host)
        self.note('host %s forced down' % host)

    def host_forced_up(self, host):
        """Forced up again: its nova-compute starts, its guests lost."""
        self.nova.host_forced_up(host)
        self.note('host %s forced up' % host)

    def lock_server(self, index, locked=True, policy=0):
        self.nova.lock(self.server_id(index, policy), locked)
        self.note('server %d locked: %s' % (index, locked))

    def fail_writes(self, count=1, calls=database.WRITES, committed=False):
        """The next ``count`` database writes fail (see Database.fail)."""
        self.db.fail(count, calls, committed)
        self.note('next %d writes fail (committed=%s)' % (count, committed))

    def crash_at(self, double, call, key=None, phase=faults_mod.BEFORE):
        """kill -9 of whichever engine makes this call next.

        :param double: 'nova', 'octavia', 'heat', 'db', 'mistral' or
            'hooks' (webhook receivers).
        """
        target = {'nova': self.nova.faults, 'octavia': self.octavia.faults,
                  'heat': self.heat.faults, 'db': self.db.faults,
                  'mistral': self.mistral.faults,
                  'hooks': self.hooks.faults}[double]
        target.crash(call, key, phase)
        self.note('crash at %s.%s (%s)' % (double, call, phase))

    # Users and operators

    def user_update(self, policy=0, seconds=None, touching=()):
        """A user's stack update, touching the places at these indexes."""
        places = self.places(policy)
        self.heat.user_update(self._policy(policy).stack_id, seconds,
                              [places[i] for i in touching])
        self.note('user updates stack of %s' % self._policy(policy).id)

    def suspend_stack(self, policy=0):
        """Heat suspends the policy resource first, then the servers."""
        found = self._policy(policy)
        self.db.real['policy_set_suspended'](found.id, True, 0)
        self.heat.suspend(found.stack_id)
        self.note('stack of %s suspended' % found.id)

    def resume_stack(self, policy=0):
        """Servers resumed first, then the policy resource (its grace)."""
        found = self._policy(policy)
        self.heat.resume(found.stack_id)
        grace = found.spec['detection'].get('node_update_timeout') or 0
        self.db.real['policy_set_suspended'](found.id, False, grace)
        self.note('stack of %s resumed' % found.id)

    def pause(self, policy=0, reason=None):
        self.db.real['policy_set_paused']([self._policy(policy).id], True,
                                          'operator', reason)
        self.note('%s paused' % self._policy(policy).id)

    def unpause(self, policy=0):
        self.db.real['policy_set_paused']([self._policy(policy).id], False,
                                          'operator')
        self.note('%s resumed by the operator' % self._policy(policy).id)

    def set_enabled(self, enabled, policy=0):
        """The template's maintenance switch, re-registered.

        As the engine's endpoint registers it: enabled again, its targets
        get the grace (where the database API takes one).
        """
        found = self._policy(policy)
        found.spec['enabled'] = enabled
        register = self.db.real['policy_create_or_update']
        args = [{'id': found.id, 'spec': copy.deepcopy(found.spec),
                 'enabled': enabled}]
        if 'grace_seconds' in inspect.signature(register).parameters:
            args.append(found.spec['detection'].get('node_update_timeout')
                        or 0)
        register(*args)
        self.note('%s enabled: %s' % (found.id, enabled))

    def _register(self, found):
        """The policy's spec as the engine's endpoint registers it."""
        self.db.real['policy_create_or_update']({
            'id': found.id, 'spec': copy.deepcopy(found.spec),
            'enabled': found.spec['enabled']})

    def set_mode(self, mode, policy=0):
        """The template's recovery mode changed: HEAL or OBSERVE."""
        found = self._policy(policy)
        found.spec['recovery']['mode'] = mode
        self._register(found)
        self.note('%s mode: %s' % (found.id, mode))

    def set_targets(self, names, policy=0):
        """The template's ``targets`` changed: only these are watched."""
        found = self._policy(policy)
        found.spec['targets'] = list(names)
        self.heat.watched[found.stack_id] = set(names)
        self._register(found)
        self.note('%s targets: %s' % (found.id, ', '.join(names)))

    def delete_policy(self, policy=0):
        """The policy's resource deleted: the RPC endpoint's unregister.

        Through the first engine's undoer, as any engine's endpoint.
        """
        found = self._policy(policy)
        if leftovers is None:
            policy_object.Policy.delete(found.id)
        else:
            try:
                leftovers.delete_policy(self.engines[0].undoer,
                                        policy_object.Policy.get(found.id))
            except faults_mod.Crash:
                # The endpoint's engine died half way: Heat's delete
                # failed and is asked again, another engine answering.
                self.note('%s delete interrupted; asked again' % found.id)
                leftovers.delete_policy(self.engines[-1].undoer,
                                        policy_object.Policy.get(found.id))
        found.deleted = True
        self.note('%s deleted' % found.id)

    def create_policy_again(self, policy=0):
        """The deleted policy's resource created again, as registered."""
        found = self._policy(policy)
        self.db.real['policy_create_or_update']({
            'id': found.id, 'stack_id': found.stack_id,
            'resource_name': 'health', 'project_id': found.project_id,
            'user_id': 'user-1', 'spec': copy.deepcopy(found.spec),
            'enabled': found.spec['enabled']})
        found.deleted = False
        self.note('%s created again' % found.id)

    def user_nova(self, call, index, policy=0):
        """The server's own user asks Nova for ``call`` (stop, start...)."""
        server_id = self.server_id(index, policy)
        getattr(self.nova.client('user').servers, call)(server_id)
        self.note('the user of %s asks Nova to %s it' % (server_id, call))

    def reset_rows(self, place, reason='marked healthy'):
        """The second write of a user's reset: the place's rows."""
        self.db.real['target_reset'](place[0], place[1], reason)
        self.note('rows of %s/%s reset' % place)

    def mark_healthy(self, index, policy=0, reason='marked healthy'):
        """A user's ``mark_unhealthy: false`` on the index-th place."""
        self.user_clears_mark(index, policy, reason)
        self.user_resets_target(index, policy, reason)

    def user_clears_mark(self, index, policy=0, reason='marked healthy'):
        """Heat's half of a user's ``mark_unhealthy: false``.

        The engine clears CHECK_FAILED under Heat's lock, then resets the
        target (``reset_rows``): other steps may come between. Returns the
        place.
        """
        stack_id, name = self.places(policy)[index]
        self.heat.set_check_failed(stack_id, name, False, reason=reason)
        self.note('user clears the mark of %s/%s' % (stack_id, name))
        return stack_id, name

    def user_resets_target(self, index, policy=0, reason='marked healthy'):
        """heat-health's half of a user's ``mark_unhealthy: false``."""
        self.reset_rows(self.places(policy)[index], reason)

    def mark_unhealthy(self, index, policy=0, reason='marked unhealthy'):
        """A user's ``mark_unhealthy: true``: CHECK_FAILED in Heat."""
        stack_id, name = self.places(policy)[index]
        self.heat.set_check_failed(stack_id, name, True, reason=reason)
        self.note('user marks %s/%s unhealthy' % (stack_id, name))
