"""What the world knows of each server, to judge recovery's effects by.

The engines see the world through detectors; the world knows it: when a
server broke, whether it is still broken, whether its user stopped it on
purpose through Nova's API. ``Truth`` samples every server after each step
and immediately before each effect of recovery (a Nova action, fencing
included; a drain to weight 0; a CHECK_FAILED mark; a stack update; a
workflow started; a webhook POSTed), and says which effects had no fresh
evidence:

* a server fails when Nova shows it not running (any vm_state but active,
  a power state but running, a task the world set), when it is gone
  behind Nova's API, when its host is forced down or stopped reporting
  with its guests lost, or, for one policy, when that policy's own poll
  URL of it does not answer;
* while a task recovery asked for runs (its host reporting), or a
  workflow the policy started for it runs, the server is in treatment:
  neither failing nor healthy; and evidence from before a policy's
  treatment does not justify that policy's next effect: the treatment may
  have healed it;
* a stop or delete its user asked Nova for is intent, not failure, until
  the user starts it again or the world changes it, or its host is
  forced down (the server is recovered whatever its user asked);
* an effect is justified when the acting policy saw the server failing
  (after its last treatment) no longer ago than the evidence bound, or
  when recovery had fenced the server (stopped or deleted it) already:
  what follows a fence rests on it. Restoring a drained member is no
  effect that needs evidence.

Only effects that happened are judged (a refused Nova action is none).
"""

from heat_health.policy import spec as policy_spec
from tests.simulation import nova_double
from tests.simulation import outside_double

FAILING, HEALTHY, TREATED, INTENDED = 'failing', 'healthy', 'treated', \
    'intended'
# Nova actions of recovery that treat a server, and those that fence it.
TREATMENTS = frozenset(['start', 'reboot', 'rebuild', 'unpause', 'resume',
                        'evacuate'])
FENCES = frozenset(['stop', 'delete', 'force_delete'])
# What a server's user may ask Nova for on purpose, and what undoes it.
INTENTS = frozenset(['stop', 'delete'])
UNDOES = frozenset(['start'])


def evidence_seconds(spec):
    """Seconds evidence of a failure justifies an effect, by the policy.

    The product's own documented bound (two detection intervals, the
    longest a poll URL check may take, and ten seconds): the contract
    checked is the one the README states.
    """
    return policy_spec.PolicySpec.parse(spec).evidence_seconds


class Truth(object):
    """Ground truth of the world's servers, and effects judged by it.

    :param policy_of: server id -> {policy id: place} of the policies
        watching it (the checker's map).
    :param spec_of: policy id -> its stored spec.
    """

    def __init__(self, world, policy_of, spec_of):
        self.w = world
        self._policy_of = policy_of
        self._spec_of = spec_of
        self._seq = 0
        self.seen = {}        # (policy, server) -> (seconds, seq) failing
        self.treated = {}     # (policy, server) -> seq of its treatment
        self.in_task = set()  # servers whose task recovery asked for
        self.fenced = set()   # servers recovery stopped or deleted
        self.intent = {}      # server -> (seconds, action) of its user
        self.workflows = {}   # (policy, server) -> execution id
        self.pending = []     # effects without evidence, found in a step
        self._originals = []
        self._wrap()

    def close(self):
        for obj, name, original in self._originals:
            setattr(obj, name, original)

    # Ground truth

    def _forced_down(self, server):
        """Its host is forced down: the server is lost, whoever stopped it.

        As the README says, such a server is recovered whatever its user
        asked before.
        """
        host = self.w.nova.hosts.get(server.host)
        return host is not None and host.state == nova_double.DOWN

    def _health(self, server):
        """FAILING, HEALTHY, TREATED or INTENDED, policy aside."""
        if self._forced_down(server):
            return FAILING
        if server.id in self.intent:
            return INTENDED
        if server.deleted:
            return FAILING
        host = self.w.nova.hosts.get(server.host)
        if host is not None and (host.state == nova_double.UNKNOWN and
                                 host.guests_lost):
            return FAILING
        if server.task_state is None:
            self.in_task.discard(server.id)
        if server.vm_state == 'building':
            return TREATED
        if server.task_state and server.id in self.in_task and (
                host is None or host.state == nova_double.UP):
            return TREATED
        if (server.task_state or server.vm_state != 'active' or
                server.power_state != nova_double.RUNNING):
            return FAILING
        return HEALTHY

    def _running(self, execution_id):
        """Whether a workflow execution still runs, at the world's time."""
        mistral = self.w.mistral
        execution = mistral.executions.get(execution_id)
        if execution is None or execution.state != 'RUNNING':
            return False
        ends = outside_double.RUN_SECONDS.get(execution.workflow_name)
        return ends is None or self.w.clock.seconds() < \
            execution.started + ends

    def sample(self):
        """Every watched server's state now, as each policy judges it."""
        self._seq += 1
        now = self.w.clock.seconds()
        nova, silent = self.w.nova, self.w.urls.silent
        for server_id, policies in self._policy_of.items():
            server = nova.find(server_id)
            if server is None:
                continue
            health = self._health(server)
            for policy_id in policies:
                key = (policy_id, server_id)
                found = health
                execution = self.workflows.get(key)
                if execution is not None and self._running(execution):
                    found = TREATED
                elif key in silent and health != INTENDED:
                    found = FAILING
                if found == FAILING:
                    self.seen[key] = (now, self._seq)

    def saw_failing(self, policy_id, server_id):
        """A detector's look the world made up: the server failed now."""
        self._seq += 1
        self.seen[(policy_id, server_id)] = (self.w.clock.seconds(),
                                             self._seq)

    def _treat(self, policy_id, server_id):
        self._seq += 1
        self.treated[(policy_id, server_id)] = self._seq

    def unjustified(self, policy_id, server_id, what):
        """Why the effect had no fresh evidence, or None."""
        if policy_id is None or server_id is None or \
                server_id in self.fenced:
            return None
        intent = self.intent.get(server_id)
        server = self.w.nova.find(server_id)
        if intent is not None and not (server is not None and
                                       self._forced_down(server)):
            return ('%s by %s on %s, which its user %s on purpose at %.0fs'
                    % (what, policy_id, server_id, _past(intent[1]),
                       intent[0]))
        bound = evidence_seconds(self._spec_of(policy_id))
        now = self.w.clock.seconds()
        seen = self.seen.get((policy_id, server_id))
        treated = self.treated.get((policy_id, server_id), 0)
        if seen is not None and seen[1] > treated and now - seen[0] <= bound:
            return None
        if seen is None:
            last = 'never seen failing'
        elif seen[1] <= treated:
            last = 'not seen failing since its last treatment'
        else:
            last = 'last seen failing %.0fs before' % (now - seen[0])
        return '%s by %s on %s (%s now): %s (evidence bound %ss)' % (
            what, policy_id, server_id, self._now(server_id), last, bound)

    def _now(self, server_id):
        server = self.w.nova.find(server_id)
        if server is None:
            return 'unknown'
        return '%s, power %s%s' % (server.status, server.power_state,
                                   ', task %s' % server.task_state
                                   if server.task_state else '')

    # The effects, judged as they are made

    def _wrap(self):
        w = self.w
        self._around(w.nova, '_call', self._nova_effects,
                     lambda: len(w.nova.accepted), self._nova_done)
        self._around(w.octavia, 'apply', self._drains,
                     lambda: len(w.octavia.batches))
        self._around(w.heat, 'mark_failed', self._mark,
                     lambda: len(w.heat.marks))
        self._around(w.heat, 'update_target', self._update,
                     lambda: len(w.heat.updates))
        self._around(w.mistral, 'create', self._workflow,
                     lambda: len(w.mistral.started), self._workflow_done)
        self._around(w.hooks, 'post', self._webhook,
                     lambda: len(w.hooks.posted), self._webhook_done)
        for name in ('break_server', 'heal'):
            self._around(w.nova, name, self._changed, lambda: 0)

    def _around(self, obj, name, effects, count, done=None):
        """Judge ``obj.name``'s effects before the call, keep if made."""
        original = getattr(obj, name)
        self._originals.append((obj, name, original))

        def call(*args, **kwargs):
            found = effects(*args, **kwargs)
            if found:
                self.sample()
                found = [(p, s, self.unjustified(p, s, what))
                         for p, s, what in found]
            before = count()
            try:
                return original(*args, **kwargs)
            finally:
                if count() != before:
                    self.pending += [why for _p, _s, why in found if why]
                    if done is not None:
                        done(found, *args, **kwargs)
        setattr(obj, name, call)

    def _policy(self, stack_id):
        policy = self.w.policy_of_stack(stack_id) if stack_id else None
        return policy and policy.id

    def _nova_effects(self, actor, call, server_id, *args):
        if actor == 'recovery' and call != 'get':
            label = '%s%s' % (call, ' %s' % args[0] if args else '')
            return [(self._policy(self.w.nova.caller), server_id,
                     'Nova action ' + label)]
        return []

    def _nova_done(self, found, actor, call, server_id, *args):
        if actor == 'recovery':
            for policy_id, _s, _why in found:
                if call in TREATMENTS:
                    self.in_task.add(server_id)
                    self._treat(policy_id, server_id)
                elif call in FENCES:
                    self.fenced.add(server_id)
        elif call in INTENTS:
            self.intent[server_id] = (self.w.clock.seconds(), call)
        elif call in UNDOES:
            self.intent.pop(server_id, None)

    def _changed(self, server_id, *args, **kwargs):
        """The world broke or healed it: whatever it was before is over."""
        self.intent.pop(server_id, None)
        self.in_task.discard(server_id)
        return []

    def _drains(self, pool_id, members, actor, additive=False):
        if actor != 'recovery':
            return []
        now = self.w.octavia.weights(pool_id)
        root = [r for r, specs in self.w.heat.load_balancers.items()
                if pool_id in [s['pool_id'] for s in specs]]
        policy_id = self._policy(root[0]) if root else None
        found = []
        for member in members:
            address = member['address']
            if now.get(address) and member.get('weight', 1) == 0:
                found.append((policy_id, self._server_at(address),
                              'drain of member %s' % address))
        return found

    def _server_at(self, address):
        for server in self.w.nova.servers.values():
            if address in server.addresses and not server.deleted:
                return server.id
        return None

    def _mark(self, stack_id, resource_name, reason, server_id=None,
              member=None):
        stack = self.w.heat.stacks.get(stack_id)
        rsrc = stack and stack.resources.get(resource_name)
        server = server_id or (rsrc and rsrc.physical_id)
        return [(self._policy(stack_id), server,
                 'mark CHECK_FAILED of %s/%s' % (stack_id, resource_name))]

    def _update(self, root_stack_id, stack_id, resource_name):
        """Each server recovery marked that the update would replace."""
        heat = self.w.heat
        if stack_id not in heat.stacks:
            return []
        top = heat.stack_to_update(root_stack_id, stack_id, resource_name)
        found = []
        for stack, rsrc in heat._resources(top):
            if rsrc.state != ('CHECK', 'FAILED'):
                continue
            marks = [m for m in heat.marks if
                     (m.stack_id, m.resource_name, m.physical_id) ==
                     (stack.id, rsrc.name, rsrc.physical_id)]
            if not marks or marks[-1].source != 'recovery':
                continue
            found.append((self._policy(root_stack_id),
                          marks[-1].server_id or rsrc.physical_id,
                          'stack update replacing %s/%s' % (stack.id,
                                                            rsrc.name)))
        return found

    def _workflow(self, stack_id, workflow, workflow_input, description):
        found = outside_double._SERVER.search(description or '')
        return [(self._policy(stack_id), found and found.group(1),
                 'workflow %s' % workflow)]

    def _workflow_done(self, found, stack_id, *args):
        started = self.w.mistral.started[-1]
        for policy_id, server_id, _why in found:
            self._treat(policy_id, server_id)
            self.workflows[(policy_id, server_id)] = started.execution_id

    def _webhook(self, url, payload, secret):
        return [(self._policy(payload.get('stack_id')),
                 payload['server']['id'], 'webhook %s' % url)]

    def _webhook_done(self, found, *args):
        for policy_id, server_id, _why in found:
            self._treat(policy_id, server_id)


def _past(action):
    return {'stop': 'stopped', 'delete': 'deleted'}.get(action, action)
