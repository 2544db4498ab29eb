"""Heat as recovery and the monitor see it: stacks, resources, updates.

It answers what the RecoveryLoop asks of a HeatReplacer (``stack_status``,
``traversal``, ``resource``, ``mark_failed``, ``stack_to_update``,
``update_target``, ``replaced``, ``record_event``, ``nova_client``,
``octavia_client``) and
what the monitor resolves from Heat's database (``resolution``: the places
of a policy's servers, the places a stack action works on, whether the
stack is suspended), with Heat 27's behaviour (reference/heat-internals.md §8):

* marking waits for no one: it is refused (ActionInProgress) while a stack
  action holds the stack, and for a resource being deleted;
* an update with ``existing`` is refused here unless the stack and
  every stack above it are ``*_COMPLETE`` and not suspended, as
  HeatReplacer refuses it; recovery updates the stack that holds the
  resource (``update_own``, the default) or the root; it takes virtual
  time; every CHECK_FAILED server resource of its tree is replaced
  by a new server (created first, the old one deleted when the update
  completes), and the load balancer's member follows the new server;
* any update replaces CHECK_FAILED servers, a user's too; a second update
  of a stack, or of a stack above it, while one runs supersedes it
  (convergence): the replacements go on;
* a CHECK_FAILED group member made from a template (``replace: MEMBER``)
  is replaced whole: a new member stack, under a new id, with a new
  server (on a new port: a new address); the old stack and server are
  deleted when the update completes. Until the new member's server shows
  (half the update) the place holds the old member's server, as Heat's
  resolver sees it in convergence, or, with ``member_gap``, no server at
  all (legacy: the old member moved to a backup stack);
* suspend and resume stop and start the servers through Nova.

Faults: any call can raise (``faults``), before or after its effect (an
update that times out but still happens: ``MessagingTimeout`` after).
"""

import collections
import copy
import datetime

from heat.common import exception as heat_exc
import oslo_messaging

from heat_health.db import api as db_api
from heat_health.engine.pools import lb_follow
from heat_health.engine.recovery import heat_replace
from heat_health.policy import targets as target_resolution
from tests.simulation import faults as faults_mod

SERVER, GROUP, LOAD_BALANCER = ('OS::Nova::Server', 'OS::Heat::ResourceGroup',
                                'OS::Heat::LoadBalancer')
# A group member made from a template of its own (server, port, ...).
MEMBER = 'member.yaml'
# Virtual seconds of a stack update, a suspend and a resume.
UPDATE_SECONDS = 10
SUSPEND_SECONDS = 4
IMAGE = 'img-0001'

Mark = collections.namedtuple('Mark', ['at', 'stack_id', 'resource_name',
                                       'physical_id', 'source', 'reason',
                                       'server_id'], defaults=(None,))
"""``server_id``: the server a mark of its group member was about."""
UpdateRequest = collections.namedtuple('UpdateRequest', [
    'at', 'stack_id', 'kind', 'superseded', 'marked', 'root_id'])
"""``stack_id``: the stack updated (its tree); ``marked``: the places
CHECK_FAILED it set out to replace."""
Replacement = collections.namedtuple('Replacement', [
    'at', 'stack_id', 'resource_name', 'old', 'new', 'outcome', 'marked'],
    defaults=(None,))
"""Of the server at (``stack_id``, ``resource_name``); ``marked``: the
(stack id, name, physical id) of the member replaced whole with it."""
Event = collections.namedtuple('Event', ['at', 'stack_id', 'resource_name',
                                         'action', 'status', 'reason'])


def timeout(call=None, key=None):
    """What an RPC to heat-engine raises when no answer comes in time."""
    return oslo_messaging.MessagingTimeout('No reply from heat-engine')


class Resource(object):
    __slots__ = ('name', 'type', 'physical_id', 'action', 'status',
                 'reason', 'image', 'replacing')

    def __init__(self, name, rtype, physical_id, image=None):
        self.name = name
        self.type = rtype
        self.physical_id = physical_id
        self.action, self.status = 'CREATE', 'COMPLETE'
        self.reason = ''
        self.image = image
        # A member replaced whole: (the old member's stack id, when the
        # new one's server shows), until the update ends.
        self.replacing = None

    @property
    def state(self):
        return (self.action, self.status)


class Stack(object):

    def __init__(self, stack_id, name, owner_id=None, parent=None):
        self.id = stack_id
        self.name = name
        self.owner_id = owner_id
        self.parent = parent          # the resource name in its owner
        self.action, self.status = 'CREATE', 'COMPLETE'
        self.resources = collections.OrderedDict()
        self.traversal = 'traversal-%s-0' % stack_id   # its latest action


class _Operation(object):
    """A stack action under way: ends at ``until``."""

    def __init__(self, kind, until, busy=(), replacing=None, members=None):
        self.kind = kind
        self.until = until
        self.busy = set(busy)          # places a user's update touches
        self.replacing = replacing or {}   # place -> old server id
        # member place -> (old member stack id, old server id)
        self.members = members or {}


class HeatDouble(object):

    def __init__(self, clock, nova, octavia):
        self._clock = clock
        self.nova = nova
        self.octavia = octavia
        self.stacks = {}
        self.load_balancers = {}     # root stack id -> [decoded LB data]
        self.marks = []              # [Mark]
        self.unmarks = []            # [Mark] cleared once healthy again
        self.updates = []            # [UpdateRequest]
        self.replacements = []       # [Replacement]
        self.events = []             # [Event]
        self.faults = faults_mod.Faults()
        self.mistral = None          # the world's outside_double.Mistral
        self.update_seconds = UPDATE_SECONDS
        # The pool follower may lag behind a replacement (it works in
        # passes): its swaps wait in ``lagging`` until ``follow_now``.
        self.follow_lags = False
        self.lagging = []            # [(root id, old, new)]
        self.listed = {}             # pool id -> members the follower read
        self._ops = {}               # stack id -> _Operation
        # replacement_update_stack = own: the stack holding the resource.
        self.update_own = True
        # No server at a member's place while it is replaced (legacy).
        self.member_gap = False
        # root stack id -> the resources its policy names (``targets``)
        # since they changed; all of the root's before.
        self.watched = {}
        self._addresses = 0
        self._updates_started = 0
        self._members_made = 0

    # Building the world

    def _address(self):
        self._addresses += 1
        high, low = divmod(self._addresses, 250)
        return '10.0.%d.%d' % (high, low + 1)

    def _server(self, stack, name):
        address = self._address()
        server_id = self.nova.create('%s-%s' % (stack.name, name), IMAGE,
                                     [address], build_seconds=0)
        stack.resources[name] = Resource(name, SERVER, server_id, IMAGE)
        return server_id, address

    def create_stack(self, name, servers, nested=True, pool=True,
                     weight=1, members=False):
        """A stack of ``servers`` servers; returns (root id, targets).

        Nested: a ResourceGroup ``group`` whose nested stack holds
        resources '0', '1'... (with ``members``, each a template resource
        whose own stack holds the server ``server``); flat: resources
        'server-0'... in the root.
        With a pool, an OS::Heat::LoadBalancer puts every server in one
        Octavia pool, at ``weight``.
        """
        root = Stack('stack-%s' % name, name)
        self.stacks[root.id] = root
        if nested:
            holder = Stack('nested-%s' % name, '%s-group' % name,
                           owner_id=root.id, parent='group')
            self.stacks[holder.id] = holder
            root.resources['group'] = Resource('group', GROUP, holder.id)
            names, targets = [str(i) for i in range(servers)], ['group']
        else:
            holder = root
            names = ['server-%d' % i for i in range(servers)]
            targets = list(names)
        if nested and members:
            made = [self._server(self._member(holder, n), 'server')
                    for n in names]
        else:
            made = [self._server(holder, n) for n in names]
        if pool:
            lb_id, pool_id = 'lb-%s' % name, 'pool-%s' % name
            self.octavia.add_pool(lb_id, pool_id)
            self.octavia.apply(pool_id, [
                {'address': address, 'protocol_port': 80, 'weight': weight,
                 'subnet_id': 'subnet-1', 'name': server_id}
                for server_id, address in made], 'heat')
            self.octavia.lbs[lb_id].update(provisioning_status='ACTIVE',
                                           until=None)
            ids = {m['address']: m['id']
                   for m in self.octavia.pools[pool_id]['members']}
            root.resources['lb'] = Resource('lb', LOAD_BALANCER, lb_id)
            self.load_balancers[root.id] = [{
                'pool_id': pool_id, 'loadbalancer_id': lb_id,
                'protocol_port': 80, 'subnet_id': 'subnet-1',
                'subnet_cidr': '10.0.0.0/8', 'lb_status_timeout': 10,
                'members': {server_id: {'address': address,
                                        'member_id': ids[address]}
                            for server_id, address in made}}]
        return root.id, targets

    def _member(self, group, name):
        member = Stack('%s-%s' % (group.id, name),
                       '%s-%s' % (group.name, name), owner_id=group.id,
                       parent=name)
        self.stacks[member.id] = member
        group.resources[name] = Resource(name, MEMBER, member.id)
        return member

    def alias_stack(self, name, server_ids):
        """A stack whose server resources hold servers of another stack.

        As a resource created from ``external_id`` did before targets
        refused it, or a second policy watching the same servers: its
        policy watches servers it shares. Returns (root id, targets).
        """
        root = Stack('stack-%s' % name, name)
        self.stacks[root.id] = root
        names = ['server-%d' % i for i in range(len(server_ids))]
        for rname, server_id in zip(names, server_ids):
            root.resources[rname] = Resource(rname, SERVER, server_id, IMAGE)
        return root.id, names

    # What the monitor resolves from Heat's database

    def _tree(self, root_id):
        """(stack, resource, path) of every server resource under root.

        As Heat's resolver finds them: a member being replaced whole shows
        its old stack's servers until the new one's server shows (or,
        with ``member_gap``, none).
        """
        found = []
        now = self._clock()

        def walk(stack, prefix):
            for rsrc in stack.resources.values():
                if rsrc.type == SERVER:
                    found.append((stack, rsrc, prefix + rsrc.name))
                    continue
                nested = rsrc.physical_id
                if rsrc.replacing is not None and now < rsrc.replacing[1]:
                    nested = None if self.member_gap else rsrc.replacing[0]
                if rsrc.type in (GROUP, MEMBER) and nested in self.stacks:
                    walk(self.stacks[nested], prefix + rsrc.name + '/')
        walk(self.stacks[root_id], '')
        return found

    def _resources(self, top_id):
        """(stack, resource) of every resource under top, as they are."""
        found = []

        def walk(stack):
            for rsrc in stack.resources.values():
                found.append((stack, rsrc))
                if rsrc.type in (GROUP, MEMBER) and \
                        rsrc.physical_id in self.stacks:
                    walk(self.stacks[rsrc.physical_id])
        walk(self.stacks[top_id])
        return found

    def places(self, root_id):
        self._settle()
        places = {}
        for stack, rsrc, path in self._tree(root_id):
            if not rsrc.physical_id or rsrc.action == 'DELETE':
                continue
            server = self.nova.find(rsrc.physical_id)
            places[(stack.id, rsrc.name)] = {
                'server_id': rsrc.physical_id, 'path': path,
                'addresses': list(server.addresses) if server else []}
        return places

    def busy(self, root_id):
        self._settle()
        return frozenset((stack.id, rsrc.name)
                         for stack, rsrc, _p in self._tree(root_id)
                         if rsrc.status == 'IN_PROGRESS')

    def suspended(self, root_id):
        self._settle()
        return self.stacks[root_id].action == 'SUSPEND'

    def resolution(self, root_id, targets=None):
        """What heat_health.policy.targets.Resolver would find now.

        Only under the root's resources its policy names: ``targets``
        (the policy's resource names, as the engine passes them) or, when
        not given, what the world set in ``watched``.
        """
        places = self.places(root_id)
        named = targets if targets is not None else self.watched.get(
            root_id)
        if named is not None:
            places = {place: found for place, found in places.items()
                      if found['path'].split('/')[0] in named}
        return target_resolution.Resolution(
            places, self.busy(root_id), self.suspended(root_id), [], None)

    def lb_specs(self, root_id):
        """The decoded data of the stack's load balancers (the Drainer's)."""
        return copy.deepcopy(self.load_balancers.get(root_id, []))

    # Time

    def _settle(self):
        now = self._clock()
        for root_id, op in list(self._ops.items()):
            if op.until <= now:
                del self._ops[root_id]
                getattr(self, '_finish_' + op.kind)(root_id, op)

    def _set_tree(self, top_id, action, status):
        for stack in self.stacks.values():
            if top_id in self._chain(stack.id):
                stack.action, stack.status = action, status

    def _chain(self, stack_id):
        """The ids of the stack and of every stack above it, root last."""
        chain = [stack_id]
        while self.stacks[chain[-1]].owner_id is not None:
            chain.append(self.stacks[chain[-1]].owner_id)
        return chain

    def _root_of(self, stack_id):
        return self._chain(stack_id)[-1]

    def _acting_on(self, stack_id):
        """A stack acting on this one (itself or one above), or None."""
        for key in self._chain(stack_id):
            if self.stacks[key].status == 'IN_PROGRESS':
                return self.stacks[key]
        return None

    # Updates

    def _start_update(self, top_id, kind, seconds=None, busy=()):
        now = self._clock()
        # Updates of this stack or of stacks below it are superseded.
        previous = [key for key, op in self._ops.items()
                    if op.kind == 'update' and top_id in self._chain(key)]
        superseded = bool(previous)
        seconds = self.update_seconds if seconds is None else seconds
        replacing, members, touched = {}, {}, set()
        for key in previous:
            op = self._ops.pop(key)
            replacing.update(op.replacing)
            members.update(op.members)
            touched |= op.busy
        marked = []
        found = self._resources(top_id)
        # A member replaced whole takes what its stack holds with it.
        whole = {rsrc.physical_id for _stack, rsrc in found
                 if rsrc.type == MEMBER and
                 rsrc.state == ('CHECK', 'FAILED')}
        for stack, rsrc in found:
            if rsrc.state != ('CHECK', 'FAILED') or rsrc.type not in (
                    SERVER, MEMBER) or stack.id in whole:
                continue
            marked.append((stack.id, rsrc.name))
            if rsrc.type == MEMBER:
                members[(stack.id, rsrc.name)] = self._new_member(
                    stack, rsrc, now + datetime.timedelta(
                        seconds=seconds / 2.0))
                continue
            old = rsrc.physical_id
            address = self._address()
            new = self.nova.create('%s-%s' % (stack.name, rsrc.name),
                                   rsrc.image, [address])
            replacing[(stack.id, rsrc.name)] = old
            rsrc.physical_id = new
            rsrc.action, rsrc.status = 'CREATE', 'IN_PROGRESS'
        for place in busy:
            rsrc = self.stacks[place[0]].resources[place[1]]
            if place not in replacing:
                rsrc.action, rsrc.status = 'UPDATE', 'IN_PROGRESS'
                touched.add(place)
        self._set_tree(top_id, 'UPDATE', 'IN_PROGRESS')
        self._updates_started += 1
        for stack in self.stacks.values():
            if top_id in self._chain(stack.id):
                stack.traversal = 'traversal-%d' % self._updates_started
        self._ops[top_id] = _Operation(
            'update', now + datetime.timedelta(seconds=seconds), touched,
            replacing, members)
        self.updates.append(UpdateRequest(now, top_id, kind, superseded,
                                          tuple(marked),
                                          self._root_of(top_id)))

    def _new_member(self, group, rsrc, shows_at):
        """A member's replacement: a new stack, server and port.

        Returns (the old member's stack id, its server's id).
        """
        old_stack = self.stacks[rsrc.physical_id]
        old_server = old_stack.resources['server'].physical_id
        self._members_made += 1
        member = Stack('%s-%s-r%d' % (group.id, rsrc.name, self._members_made),
                       '%s-%s' % (group.name, rsrc.name), owner_id=group.id,
                       parent=rsrc.name)
        member.action, member.status = 'CREATE', 'IN_PROGRESS'
        self.stacks[member.id] = member
        address = self._address()
        image = old_stack.resources['server'].image
        server = Resource('server', SERVER, self.nova.create(
            '%s-server' % member.name, image, [address]), image)
        server.action, server.status = 'CREATE', 'IN_PROGRESS'
        member.resources['server'] = server
        rsrc.replacing = (old_stack.id, shows_at)
        rsrc.physical_id = member.id
        rsrc.action, rsrc.status = 'CREATE', 'IN_PROGRESS'
        return old_stack.id, old_server

    def _finish_member(self, root_id, place, old):
        """The member's replacement ends: the old member goes, or stays."""
        group_id, name = place
        rsrc = self.stacks[group_id].resources[name]
        member = self.stacks[rsrc.physical_id]
        server = member.resources['server']
        found = self.nova.find(server.physical_id)
        rsrc.replacing = None
        if (found is None or found.deleted or found.vm_state != 'active' or
                found.task_state):
            for item in (rsrc, server):
                item.action, item.status = 'CREATE', 'FAILED'
            member.action, member.status = 'CREATE', 'FAILED'
            outcome = 'failed'
        else:
            for item in (rsrc, server):
                item.action, item.status = 'CREATE', 'COMPLETE'
                item.reason = ''
            member.action, member.status = 'CREATE', 'COMPLETE'
            self.nova.delete_now(old[1])
            self.stacks.pop(old[0], None)
            self._follow(root_id, old[1], server.physical_id)
            outcome = 'replaced'
        self.replacements.append(Replacement(
            self._clock(), old[0], 'server', old[1], server.physical_id,
            outcome, (group_id, name, old[0])))
        return outcome == 'failed'

    def _finish_update(self, top_id, op):
        failed = False
        for place, old in sorted(op.members.items()):
            failed = self._finish_member(self._root_of(top_id), place,
                                         old) or failed
        for (stack_id, name), old in sorted(op.replacing.items()):
            if stack_id not in self.stacks:
                continue    # in a member since replaced whole
            rsrc = self.stacks[stack_id].resources[name]
            server = self.nova.find(rsrc.physical_id)
            if (server is None or server.deleted or
                    server.vm_state != 'active' or server.task_state):
                rsrc.action, rsrc.status = 'CREATE', 'FAILED'
                failed = True
                outcome = 'failed'
            else:
                rsrc.action, rsrc.status = 'CREATE', 'COMPLETE'
                rsrc.reason = ''
                self.nova.delete_now(old)
                self._follow(self._root_of(top_id), old, rsrc.physical_id)
                outcome = 'replaced'
            self.replacements.append(Replacement(
                self._clock(), stack_id, name, old, rsrc.physical_id,
                outcome))
        for stack_id, name in op.busy:
            if stack_id not in self.stacks:
                continue
            rsrc = self.stacks[stack_id].resources[name]
            if rsrc.status == 'IN_PROGRESS':
                rsrc.action, rsrc.status = 'UPDATE', 'COMPLETE'
        self._set_tree(top_id, 'UPDATE', 'FAILED' if failed else 'COMPLETE')

    def follow_now(self):
        """The lagging pool follower catches up with every replacement."""
        self.follow_list()
        return self.follow_put()

    def follow_list(self):
        """The follower's pass lists the pools its lagging swaps are in.

        As MemberFollower: the PUT (``follow_put``) is built from this
        listing, a step or more later.
        """
        self.listed = {}
        # As MemberFollower: recovery's drains read before the listing.
        self.drains_before = {}
        for root_id, _old, _new in self.lagging:
            for spec in self.load_balancers.get(root_id, []):
                pool_id = spec['pool_id']
                self.drains_before[pool_id] = db_api.drain_states(
                    [pool_id]).get(pool_id, {})
                self.listed[pool_id] = [
                    dict(m) for m in self.octavia.pools[pool_id]['members']]
        return len(self.listed)

    def follow_put(self):
        """The follower's PUT of what it listed, its swaps applied.

        Recovery's drains are read again now, and the weights it holds
        or gives back are sent as MemberFollower sends them
        (``lb_follow.recovery_weights``); every other weight is the
        listed one. A busy load balancer: the next pass.
        """
        lagging, self.lagging = self.lagging, []
        drained = {pool_id: lb_follow.recovery_weights(
            self.drains_before.get(pool_id, {}),
            db_api.drain_states([pool_id]).get(pool_id, {}))
            for pool_id in self.listed}
        kept = []
        for root_id, old, new in lagging:
            pools = [s['pool_id'] for s in self.load_balancers.get(root_id,
                                                                   [])]
            if any(p not in self.listed or self.octavia._lb(
                    self.octavia.pools[p]['lb'])['provisioning_status'] !=
                    'ACTIVE' for p in pools):
                kept.append((root_id, old, new))
                continue
            self._swap(root_id, old, new, self.listed, drained)
        self.lagging = kept
        return len(lagging) - len(kept)

    def _follow(self, root_id, old, new):
        """The LoadBalancer resource's update: the member follows."""
        if self.follow_lags:
            self.lagging.append((root_id, old, new))
        else:
            self._swap(root_id, old, new)

    def _swap(self, root_id, old, new, listed=None, drained=None):
        """The member of ``old`` replaced by one of ``new``.

        At once by Heat's own update, or by the follower from its
        ``listed`` members (pool id -> [member]), with recovery's weights
        (``drained``: pool id -> {address: weight}).
        """
        server = self.nova.find(new)
        for spec in self.load_balancers.get(root_id, []):
            if old not in spec['members']:
                continue
            gone = spec['members'].pop(old)['address']
            address = server.addresses[0]
            pool_id = spec['pool_id']
            members = [dict(m) for m in (
                listed[pool_id] if listed is not None else
                self.octavia.pools[pool_id]['members'])
                if m['address'] != gone]
            weights = (drained or {}).get(pool_id, {})
            for member in members:
                if member['address'] in weights:
                    member['weight'] = weights[member['address']]
            members.append({'address': address, 'protocol_port':
                            spec['protocol_port'], 'subnet_id':
                            spec['subnet_id'], 'name': new})
            self.octavia.apply(pool_id, members,
                               'heat' if listed is None else 'follower')
            member_id = [m['id'] for m in
                         self.octavia.pools[pool_id]['members']
                         if m['address'] == address][0]
            spec['members'][new] = {'address': address,
                                    'member_id': member_id}

    def user_update(self, root_id, seconds=None, busy=()):
        """A user's stack update, touching the places in ``busy``."""
        self._settle()
        self._start_update(root_id, 'user', seconds, busy)

    # Suspend and resume

    def suspend(self, root_id, seconds=SUSPEND_SECONDS):
        self._settle()
        for _stack, rsrc, _path in self._tree(root_id):
            self.nova.suspend_now(rsrc.physical_id)
        self._set_tree(root_id, 'SUSPEND', 'IN_PROGRESS')
        self._ops[root_id] = _Operation('suspend', self._clock() +
                                        datetime.timedelta(seconds=seconds))

    def _finish_suspend(self, root_id, op):
        self._set_tree(root_id, 'SUSPEND', 'COMPLETE')

    def resume(self, root_id, seconds=SUSPEND_SECONDS):
        self._settle()
        for _stack, rsrc, _path in self._tree(root_id):
            self.nova.resume_now(rsrc.physical_id)
        self._set_tree(root_id, 'RESUME', 'IN_PROGRESS')
        self._ops[root_id] = _Operation('resume', self._clock() +
                                        datetime.timedelta(seconds=seconds))

    def _finish_resume(self, root_id, op):
        self._set_tree(root_id, 'RESUME', 'COMPLETE')

    # A user's marks through the API

    def set_check_failed(self, stack_id, name, failed, source='api',
                         reason='marked by the user'):
        """The PATCH API's marking (True) or its reset (False)."""
        self._settle()
        rsrc = self.stacks[stack_id].resources[name]
        if failed:
            rsrc.action, rsrc.status, rsrc.reason = 'CHECK', 'FAILED', reason
        elif rsrc.state == ('CHECK', 'FAILED'):
            rsrc.action, rsrc.status, rsrc.reason = 'CHECK', 'COMPLETE', ''
        self.marks.append(Mark(self._clock(), stack_id, name,
                               rsrc.physical_id, source if failed else
                               source + ':reset', reason))

    # The HeatReplacer interface

    def _enter(self, call, key):
        self._settle()
        self.faults.check(faults_mod.BEFORE, call, key)

    def _leave(self, call, key):
        self.faults.check(faults_mod.AFTER, call, key)

    def _stack(self, stack_id):
        stack = self.stacks.get(stack_id)
        if stack is None:
            raise heat_exc.EntityNotFound(entity='Stack', name=stack_id)
        return stack

    def _resource(self, stack_id, name):
        stack = self._stack(stack_id)
        if name not in stack.resources:
            raise heat_exc.ResourceNotFound(resource_name=name,
                                            stack_name=stack.name)
        return stack, stack.resources[name]

    def stack_status(self, stack_id):
        self._enter('stack_status', stack_id)
        stack = self._stack(stack_id)
        self._leave('stack_status', stack_id)
        return stack.action, stack.status

    def traversal(self, stack_id):
        """As HeatReplacer.traversal: each update starts a new one."""
        self._enter('traversal', stack_id)
        stack = self._stack(stack_id)
        self._leave('traversal', stack_id)
        return stack.traversal

    def resource(self, stack_id, resource_name):
        self._enter('resource', stack_id)
        _stack, rsrc = self._resource(stack_id, resource_name)
        self._leave('resource', stack_id)
        return heat_replace.ResourceState(rsrc.physical_id, rsrc.action,
                                          rsrc.status, rsrc.reason)

    def mark_failed(self, stack_id, resource_name, reason, server_id=None,
                    member=None):
        self._enter('mark_failed', stack_id)
        stack, rsrc = self._resource(stack_id, resource_name)
        if server_id is not None and rsrc.physical_id != server_id:
            raise heat_replace.ServerMoved('Resource %s holds %s, not %s' % (
                resource_name, rsrc.physical_id, server_id))
        if member is not None:
            stack, rsrc = self._member_holding(stack_id, member)
        acting = self._acting_on(stack.id)
        if acting is not None:
            raise heat_exc.ActionInProgress(stack_name=acting.name,
                                            action=acting.action)
        if rsrc.type != (MEMBER if member is not None else SERVER):
            raise heat_replace.NotActionable(
                'Resource %s of stack %s has a nested stack' % (
                    rsrc.name, stack.name))
        if rsrc.action == 'DELETE':
            raise heat_replace.NotActionable('Resource %s is %s_%s' % (
                rsrc.name, rsrc.action, rsrc.status))
        rsrc.action, rsrc.status, rsrc.reason = 'CHECK', 'FAILED', reason
        self.marks.append(Mark(self._clock(), stack.id, rsrc.name,
                               rsrc.physical_id, 'recovery', reason,
                               server_id if member is not None else None))
        self._leave('mark_failed', stack_id)
        return rsrc.physical_id

    def _member_holding(self, stack_id, member):
        """(group stack, member) while the member holds ``stack_id``."""
        stack_id_now = stack_id
        while stack_id_now != member['nested_id']:
            owner = self.stacks[stack_id_now].owner_id
            if owner is None:
                raise heat_replace.ServerMoved('not in member %s' %
                                               member['name'])
            stack_id_now = owner
        group, rsrc = self._resource(member['stack_id'], member['name'])
        if rsrc.physical_id != member['nested_id']:
            raise heat_replace.ServerMoved('Member %s holds %s, not %s' % (
                member['name'], rsrc.physical_id, member['nested_id']))
        return group, rsrc

    def member_of(self, root_stack_id, stack_id, resource_name, server_id):
        """As HeatReplacer.member_of: the nearest group's member, or None."""
        self._enter('member_of', stack_id)
        _stack, rsrc = self._resource(stack_id, resource_name)
        if server_id is not None and rsrc.physical_id != server_id:
            raise heat_replace.ServerMoved('Resource %s holds %s, not %s' % (
                resource_name, rsrc.physical_id, server_id))
        found = self._nearest_member(stack_id, root_stack_id)
        self._leave('member_of', stack_id)
        return found

    def _nearest_member(self, stack_id, root_stack_id=None):
        child, stack = None, self.stacks[stack_id]
        while stack.id != root_stack_id and stack.owner_id is not None:
            owner = self.stacks[stack.owner_id]
            if owner.resources[stack.parent].type == GROUP:
                return child and {'stack_id': stack.id,
                                  'name': child.parent,
                                  'nested_id': child.id}
            child, stack = stack, owner
        return None

    def clear_mark(self, stack_id, resource_name, server_id, reason):
        """As HeatReplacer.clear_mark: back from CHECK_FAILED, once.

        The server's resource unless a user's mark is the latest of it,
        and its group member when recovery's mark is the latest of it.
        """
        self._enter('clear_mark', stack_id)
        if stack_id not in self.stacks:
            self._leave('clear_mark', stack_id)
            return False
        stack, rsrc = self._resource(stack_id, resource_name)
        if rsrc.physical_id != server_id:
            self._leave('clear_mark', stack_id)
            return False
        cleared = []
        member = self._nearest_member(stack_id)
        try:
            group, held = (self._member_holding(stack_id, member)
                           if member is not None else (None, None))
        except heat_replace.ServerMoved:
            # As the replacer: a member that moved is not ours to clear.
            group = held = None
        if held is not None:
            marks = [m for m in self.marks
                     if (m.stack_id, m.resource_name, m.physical_id) ==
                     (group.id, held.name, held.physical_id)]
            if marks and marks[-1].source == 'recovery':
                cleared.append((group, held))
        marks = [m for m in self.marks
                 if (m.stack_id, m.resource_name, m.physical_id) ==
                 (stack.id, rsrc.name, rsrc.physical_id)]
        if not marks or marks[-1].source == 'recovery' or \
                marks[-1].source.endswith(':reset'):
            # A user's own CHECK_FAILED since recovery's stays.
            cleared = [(stack, rsrc)] + cleared
        cleared = [(s, r) for s, r in cleared
                   if (r.action, r.status) == ('CHECK', 'FAILED')]
        for found, _rsrc in cleared:
            acting = self._acting_on(found.id)
            if acting is not None:
                raise heat_exc.ActionInProgress(stack_name=acting.name,
                                                action=acting.action)
        for found, held in cleared:
            held.action, held.status, held.reason = 'CHECK', 'COMPLETE', \
                reason
            self.unmarks.append(Mark(self._clock(), found.id, held.name,
                                     held.physical_id, 'recovery', reason,
                                     server_id if held is not rsrc
                                     else None))
        self._leave('clear_mark', stack_id)
        return bool(cleared)

    def stack_to_update(self, root_stack_id, stack_id, resource_name):
        self._resource(stack_id, resource_name)
        return (stack_id if self.update_own
                else self._stack(root_stack_id).id)

    def update_target(self, root_stack_id, stack_id, resource_name):
        self._enter('update_target', root_stack_id)
        top_id = self.stack_to_update(root_stack_id, stack_id, resource_name)
        for key in self._chain(top_id):
            stack = self.stacks[key]
            if (stack.status != 'COMPLETE' or
                    stack.action not in heat_replace.UPDATABLE_ACTIONS):
                raise heat_replace.NotActionable('Stack %s (%s) is %s_%s' % (
                    stack.name, stack.id, stack.action, stack.status))
        self._start_update(top_id, 'recovery')
        self._leave('update_target', root_stack_id)
        return top_id

    def replaced(self, stack_id, resource_name, old_physical_id,
                 member=None):
        if member is not None:
            stack_id, resource_name, old_physical_id = (
                member['stack_id'], member['name'], member['nested_id'])
        now = self.resource(stack_id, resource_name)
        return (bool(now.physical_id) and
                now.physical_id != old_physical_id and
                (now.action, now.status) not in heat_replace._NOT_CREATED)

    def record_event(self, stack_id, resource_name, status_reason,
                     action=heat_replace.EVENT_ACTION,
                     status=heat_replace.IN_PROGRESS):
        self._enter('record_event', stack_id)
        self._resource(stack_id, resource_name)
        self.events.append(Event(self._clock(), stack_id, resource_name,
                                 action, status, status_reason[:255]))
        self._leave('record_event', stack_id)

    def nova_client(self, stack_id):
        self._enter('nova_client', stack_id)
        return self.nova.client('recovery', stack_id)

    def admin_nova_client(self, stack_id):
        self._enter('admin_nova_client', stack_id)
        return self.nova.client('recovery', stack_id, admin=True)

    def mistral_client(self, stack_id):
        self._enter('mistral_client', stack_id)
        return self.mistral.client(stack_id)

    def octavia_client(self, stack_id):
        self._enter('octavia_client', stack_id)
        return self.octavia.client('recovery')
