"""The Heat side of recovery: mark a server, have heat-engine replace it.

Used by heat-health-engine's recovery loop, in heat-health-engine's own
process. Nothing here runs a stack action with Heat's classes: a legacy
stack lock held under our engine id for a whole update, a cancel we cannot
answer or a crash of ours would strand the stack (heat-internals §8). So
the resource is marked CHECK_FAILED through the API's own code path, and
heat-engine is asked over its RPC to update the stack with ``existing``,
as Heat's own scaling signals do; Heat then replaces every CHECK_FAILED
resource (create the new server, then delete the old one).

Everything that acts does so with the stack's stored context (the owner's
trust), never an admin context: heat-engine rejects an admin context, and
any other caller than the trustor would make Heat give the stack a new
owner. An admin context only reads Heat's rows.
"""

import collections
import time

from heat.common import exception
from heat.common import identifier
from heat.engine.resources.aws.autoscaling import autoscaling_group
from heat.engine.resources.openstack.heat import instance_group
from heat.engine.resources.openstack.heat import resource_group
from heat.engine.resources import stack_resource
from heat.engine import stack as parser
from heat.objects import event as event_object
from heat.rpc import api as heat_rpc_api
from heat.rpc import client as rpc_client
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.engine import marking
from heat_health.engine.recovery import heat_rows
from heat_health.engine.recovery import stack_owner
from heat_health.objects import marking as marking_object

LOG = logging.getLogger(__name__)


# replacement_update_stack: the stack holding the resource, or the root.
OWN, ROOT = 'own', 'root'

# Recorded with a marking made by recovery (the API's is rpc_api.SOURCE_API).
SOURCE_RECOVERY = 'recovery'

# `openstack stack event list` shows ACTION_STATUS. Heat's event table
# takes any action string: HEALTH sets recovery's steps apart from Heat's
# own actions (a CHECK_* event would read as a `stack check`), with Heat's
# statuses so clients colour them as they do Heat's.
EVENT_ACTION = 'HEALTH'
EVENT_STATUSES = (IN_PROGRESS, COMPLETE, FAILED) = (
    'IN_PROGRESS', 'COMPLETE', 'FAILED')
# Heat's event table keeps this many characters of a reason.
EVENT_REASON_LENGTH = 255

# Stack actions after which an update with ``existing`` re-applies the
# template the user last applied. SUSPEND and DELETE are refused by
# heat-engine; any *_FAILED or *_IN_PROGRESS state is refused here.
UPDATABLE_ACTIONS = frozenset([
    'CREATE', 'UPDATE', 'CHECK', 'RESUME', 'ADOPT', 'ROLLBACK', 'SNAPSHOT',
    'RESTORE'])

ResourceState = collections.namedtuple(
    'ResourceState', ['physical_id', 'action', 'status', 'status_reason'])
"""A resource as Heat's database holds it now."""

# A resource row in these states has not (yet) become a server in service.
_NOT_CREATED = frozenset([('INIT', 'COMPLETE'), ('CREATE', 'IN_PROGRESS'),
                          ('CREATE', 'FAILED')])

# Heat's groups, whose members are the resources of their nested stack:
# ResourceGroup, and InstanceGroup with the AutoScalingGroups (AWS's and
# OS::Heat's) that derive from it.
GROUPS = (resource_group.ResourceGroup, instance_group.InstanceGroup)

# What recovery records of a group member it replaces whole: the group's
# nested stack, the member's name in it, and the member's own nested stack
# (which holds the server, at any depth).
MEMBER_KEYS = (MEMBER_STACK, MEMBER_NAME, MEMBER_NESTED) = (
    'stack_id', 'name', 'nested_id')


class NotActionable(Exception):
    """Heat cannot be asked to act on this now; the message says why."""


class ServerMoved(NotActionable):
    """The resource no longer holds the server the recovery was about."""


def _refuse_unless_updatable(stack):
    state = '%s_%s' % (stack.action, stack.status)
    if stack.status == parser.Stack.IN_PROGRESS:
        why = 'an action is in progress; it would be superseded'
    elif stack.status == parser.Stack.FAILED:
        why = ('its last action failed; an update with existing would '
               'apply a template the user did not choose')
    elif stack.action not in UPDATABLE_ACTIONS:
        why = 'heat-engine does not update a stack in that state'
    else:
        return
    raise NotActionable('Stack %s (%s) is %s: %s' % (stack.name, stack.id,
                                                     state, why))


def _users_mark(physical_id, stack_id, resource_name):
    """Whether the latest marking of the resource is a user's CHECK_FAILED.

    A user's reset keeps what recovery marked to be cleared later: a mark
    the user made since is theirs, and stays.
    """
    last = marking_object.Marking.last_of(physical_id, stack_id,
                                          resource_name)
    return (last is not None and last.source != SOURCE_RECOVERY and
            last.mark_unhealthy)


class HeatReplacer(stack_owner.OwnerContexts):
    """Heat's part of a recovery, for the recovery loop.

    :param engine_id: the id heat-health-engine answers Heat's liveness
        probes under: Heat's locks taken while marking are held under it.
    """

    def __init__(self, engine_id, clock=time.monotonic, update_stack=None):
        self.engine_id = engine_id
        self._update_own = (
            update_stack or
            cfg.CONF.heat_health.replacement_update_stack) == OWN
        super(HeatReplacer, self).__init__(clock)
        self._engine_client = None

    @property
    def _engine(self):
        # Made at first use: the RPC transport is set up by then.
        if self._engine_client is None:
            self._engine_client = rpc_client.EngineClient()
        return self._engine_client

    def stack_status(self, stack_id):
        """(action, status) of a root or nested stack.

        Raises Heat's EntityNotFound once the stack is deleted.
        """
        row = heat_rows.stack_state(heat_rows.reader(), stack_id)
        return row.action, row.status

    def traversal(self, stack_id):
        """The id of the stack's latest action, or None.

        heat-engine (convergence) stores a new traversal before its
        update_stack returns, so read just after an update of ours it
        names that update; a later action, such as a user's update that
        supersedes ours, names another. A legacy stack has none.
        """
        row = heat_rows.stack_state(heat_rows.reader(), stack_id)
        return row.current_traversal or None

    def resource(self, stack_id, resource_name):
        """The ResourceState of a resource of the stack that holds it.

        Raises Heat's EntityNotFound (stack) or ResourceNotFound.
        """
        ctxt = heat_rows.reader()
        row = heat_rows.current_row(
            ctxt, heat_rows.stack_state(ctxt, stack_id), resource_name)
        return ResourceState(row.physical_resource_id, row.action,
                             row.status, row.status_reason)

    def _holding(self, stack_id, resource_name, server_id):
        """The stack and its resource, which must still hold the server."""
        stack = self._load(heat_rows.reader(), stack_id)
        if resource_name not in stack:
            raise exception.ResourceNotFound(resource_name=resource_name,
                                             stack_name=stack.name)
        rsrc = stack[resource_name]
        if server_id is not None and rsrc.resource_id != server_id:
            raise ServerMoved('Resource %s of stack %s holds %s, not %s' % (
                resource_name, stack.name, rsrc.resource_id, server_id))
        return stack, rsrc

    def mark_failed(self, stack_id, resource_name, reason, server_id=None,
                    member=None):
        """Mark the resource CHECK_FAILED, as the PATCH API does.

        Same code as the API (Heat's lock honoured: ActionInProgress while
        a stack action holds it; the marking recorded, source
        SOURCE_RECOVERY), acting as the stack's owner. Returns the physical
        id marked, the server Heat will replace.

        With ``member`` (as member_of found it), the group member holding
        the server is marked instead, while it still holds it through its
        nested stack: Heat then replaces the member whole, its server,
        ports and volumes. Its nested stack's id is returned.

        Raises ServerMoved when the resource no longer holds ``server_id``
        (an update already replaced it: its new server is not marked) or
        the member no longer holds the server, NotActionable for a resource
        with a nested stack (a group or template resource: Heat would
        replace its whole nested stack) unless it is that member, or one
        being deleted (marking it does nothing).
        """
        if member is not None:
            return self._mark_member(stack_id, resource_name, reason,
                                     server_id, member)
        stack, rsrc = self._holding(stack_id, resource_name, server_id)
        if isinstance(rsrc, stack_resource.StackResource):
            raise NotActionable(
                'Resource %s of stack %s has a nested stack: marking it '
                'would replace all of it' % (resource_name, stack.name))
        return self._mark(stack, rsrc, reason)

    def _mark(self, stack, rsrc, reason):
        if rsrc.action == rsrc.DELETE:
            raise NotActionable('Resource %s of stack %s is %s_%s' % (
                rsrc.name, stack.name, rsrc.action, rsrc.status))
        marking.mark(stack.context, self.engine_id, stack, rsrc, True,
                     reason, SOURCE_RECOVERY, stack.root_stack_id())
        if rsrc.state != (rsrc.CHECK, rsrc.FAILED):
            # Deleted while we waited for the lock.
            raise NotActionable('Resource %s of stack %s is %s_%s' % (
                rsrc.name, stack.name, rsrc.action, rsrc.status))
        return rsrc.resource_id

    def _mark_member(self, stack_id, resource_name, reason, server_id,
                     member):
        ctxt = heat_rows.reader()
        self._held_by_member(ctxt, stack_id, resource_name, server_id,
                             member)
        group = self._load(ctxt, member[MEMBER_STACK])
        rsrc = group[member[MEMBER_NAME]]
        if rsrc.resource_id != member[MEMBER_NESTED]:
            raise ServerMoved('Member %s of stack %s holds stack %s, not '
                              '%s' % (rsrc.name, group.name, rsrc.resource_id,
                                      member[MEMBER_NESTED]))
        return self._mark(group, rsrc, reason)

    def member_of(self, root_stack_id, stack_id, resource_name, server_id):
        """The group member to replace whole for the server, or None.

        The resource of a group's nested stack (a member of a
        ResourceGroup, AutoScalingGroup or InstanceGroup) whose own nested
        stack holds, at any depth, the server resource ``resource_name``
        of ``stack_id``: a provider template (or AWS::CloudFormation::Stack)
        member, say a server with its port and volume. None when the server is
        itself a member of the nearest group above it, or no group below
        the policy's stack ``root_stack_id`` holds it: the server alone is
        then replaced. Returns {MEMBER_STACK, MEMBER_NAME, MEMBER_NESTED}.

        Raises ServerMoved when the resource no longer holds
        ``server_id``.
        """
        ctxt = heat_rows.reader()
        stack = heat_rows.stack_state(ctxt, stack_id)
        self._server_held(ctxt, stack, resource_name, server_id)
        return self._nearest_member(ctxt, stack, root_stack_id)

    def _nearest_member(self, ctxt, stack, root_stack_id=None):
        """The member of the nearest group above the stack (a row), or None.

        None too when the stack is that group's own nested stack.
        """
        child = None
        while stack.id != root_stack_id and stack.owner_id is not None:
            if self._is_group_stack(ctxt, stack):
                if child is None:
                    return None
                return {MEMBER_STACK: stack.id,
                        MEMBER_NAME: child.parent_resource_name,
                        MEMBER_NESTED: child.id}
            child, stack = stack, heat_rows.stack_state(ctxt,
                                                        stack.owner_id)
        return None

    def _is_group_stack(self, ctxt, stack):
        """Whether the stack (a row) is the nested stack of a group."""
        if stack.owner_id is None or not stack.parent_resource_name:
            return False
        parent = self._load(ctxt, stack.owner_id)
        return (stack.parent_resource_name in parent and
                isinstance(parent[stack.parent_resource_name], GROUPS))

    @staticmethod
    def _server_held(ctxt, stack, resource_name, server_id):
        row = heat_rows.current_row(ctxt, stack, resource_name)
        if server_id is not None and row.physical_resource_id != server_id:
            raise ServerMoved('Resource %s of stack %s holds %s, not %s' % (
                resource_name, stack.name, row.physical_resource_id,
                server_id))

    def _held_by_member(self, ctxt, stack_id, resource_name, server_id,
                        member):
        """ServerMoved unless the member holds the server as recorded.

        The resource of ``stack_id`` holds the server, ``stack_id`` is the
        member's nested stack or below it, and the member's current row
        holds that nested stack (not a replacement's).
        """
        stack = heat_rows.stack_state(ctxt, stack_id)
        self._server_held(ctxt, stack, resource_name, server_id)
        while stack.id != member[MEMBER_NESTED]:
            if stack.owner_id is None:
                raise ServerMoved('Stack %s is not in member %s' % (
                    stack_id, member[MEMBER_NAME]))
            stack = heat_rows.stack_state(ctxt, stack.owner_id)
        group = heat_rows.stack_state(ctxt, member[MEMBER_STACK])
        row = heat_rows.current_row(ctxt, group, member[MEMBER_NAME])
        if (stack.owner_id != group.id or
                row.physical_resource_id != member[MEMBER_NESTED]):
            raise ServerMoved('Member %s of stack %s holds stack %s, not '
                              '%s' % (member[MEMBER_NAME], group.name,
                                      row.physical_resource_id,
                                      member[MEMBER_NESTED]))
        return group, row

    def clear_mark(self, stack_id, resource_name, server_id, reason):
        """Clear a CHECK_FAILED recovery set, while it holds that server.

        As a user's ``mark_unhealthy: false`` does, so the next stack
        update does not replace a server that healed: on the server's
        resource, and on the group member holding it when recovery marked
        that member (``replace: MEMBER``). True if cleared; False when
        there is nothing of ours to clear (the server was replaced, or
        neither is CHECK_FAILED).
        """
        try:
            stack, rsrc = self._holding(stack_id, resource_name, server_id)
        except (ServerMoved, exception.ResourceNotFound,
                exception.EntityNotFound):
            return False
        cleared = False
        if rsrc.state == (rsrc.CHECK, rsrc.FAILED) and not _users_mark(
                rsrc.resource_id, stack.id, resource_name):
            marking.mark(stack.context, self.engine_id, stack, rsrc, False,
                         reason, SOURCE_RECOVERY, stack.root_stack_id())
            cleared = True
        return self._clear_member_mark(stack_id, resource_name, server_id,
                                       reason) or cleared

    def _clear_member_mark(self, stack_id, resource_name, server_id, reason):
        """Clear the CHECK_FAILED recovery set on the server's member.

        Only while that member holds the server and recovery's marking is
        the latest of it: a user's own mark of the member stays.
        """
        ctxt = heat_rows.reader()
        try:
            member = self._nearest_member(
                ctxt, heat_rows.stack_state(ctxt, stack_id))
            if member is None:
                return False
            _group, row = self._held_by_member(ctxt, stack_id, resource_name,
                                               server_id, member)
        except (ServerMoved, exception.ResourceNotFound,
                exception.EntityNotFound):
            return False
        if (row.action, row.status) != ('CHECK', 'FAILED'):
            return False
        last = marking_object.Marking.last_of(member[MEMBER_NESTED],
                                              member[MEMBER_STACK],
                                              member[MEMBER_NAME])
        if last is None or last.source != SOURCE_RECOVERY or \
                not last.mark_unhealthy:
            return False
        group = self._load(ctxt, member[MEMBER_STACK])
        rsrc = group[member[MEMBER_NAME]]
        if rsrc.state != (rsrc.CHECK, rsrc.FAILED):
            return False
        marking.mark(group.context, self.engine_id, group, rsrc, False,
                     reason, SOURCE_RECOVERY, group.root_stack_id())
        return True

    def _group_sized_by_members(self, ctxt, stack):
        """Whether stack is the nested stack of an ASG without a capacity.

        Such an AutoScalingGroup (no desired capacity) is sized from its
        members: it counts only members not FAILED when its parent
        updates it, so a root update would drop the marked member instead
        of replacing it. Its own nested stack still lists the member:
        updating that replaces it in place, at the same size.
        """
        if stack.owner_id is None or not stack.parent_resource_name:
            return False
        parent = self._load(ctxt, stack.owner_id)
        if stack.parent_resource_name not in parent:
            return False
        group = parent[stack.parent_resource_name]
        # OS::Heat::AutoScalingGroup derives from the AWS one.
        return (isinstance(group, autoscaling_group.AutoScalingGroup) and
                not group.properties[group.DESIRED_CAPACITY])

    def _rows_to_update(self, ctxt, root_stack_id, stack_id, resource_name):
        """(root row, row of the stack whose update replaces the resource)."""
        root = heat_rows.stack_state(ctxt, root_stack_id)
        if stack_id == root_stack_id:
            heat_rows.current_row(ctxt, root, resource_name)
            return root, root
        holder = heat_rows.stack_state(ctxt, stack_id)
        heat_rows.current_row(ctxt, holder, resource_name)
        if self._update_own or self._group_sized_by_members(ctxt, holder):
            return root, holder
        return root, root

    @staticmethod
    def _refuse_unless_tree_updatable(ctxt, root, stack):
        """NotActionable unless it and every stack above are updatable.

        An action above reaches ``stack`` too (a user's update, a
        scaling signal): ours would supersede it, or be superseded; and a
        stack the user suspended, or whose last action failed, is left
        alone down to its leaves, as a root update would leave it.
        """
        _refuse_unless_updatable(stack)
        while stack.id != root.id and stack.owner_id is not None:
            stack = heat_rows.stack_state(ctxt, stack.owner_id)
            _refuse_unless_updatable(stack)

    def stack_to_update(self, root_stack_id, stack_id, resource_name):
        """The id of the stack update_target would update for the resource.

        Resources that share it are replaced by one update.
        """
        return self._rows_to_update(heat_rows.reader(), root_stack_id,
                                    stack_id, resource_name)[1].id

    def update_target(self, root_stack_id, stack_id, resource_name):
        """Have heat-engine update a stack with ``existing``; its id.

        heat-engine runs the update (over its RPC, as the stack's owner
        with its stored context), which replaces the CHECK_FAILED resource
        ``resource_name`` of ``stack_id``. The stack updated is
        ``stack_id`` itself (``replacement_update_stack = own``), or
        ``root_stack_id`` (nested stacks always update, so the member is
        reached at any depth) except for the nested stack of an
        AutoScalingGroup without a desired capacity, which is updated
        itself so the group keeps its size.

        Raises NotActionable when the stack to update, or one above it,
        is not in a *_COMPLETE state Heat updates as the user left it;
        heat-engine's own errors come back as Heat's exceptions (e.g.
        ActionInProgress); AuthorizationFailure when the stored context
        cannot be sent (no [trustee] credentials, trust gone). In
        convergence a concurrent update may still supersede this one:
        confirm with replaced().
        """
        ctxt = heat_rows.reader()
        root, target = self._rows_to_update(ctxt, root_stack_id, stack_id,
                                            resource_name)
        self._refuse_unless_tree_updatable(ctxt, root, target)
        identity = dict(identifier.HeatIdentifier(target.tenant, target.name,
                                                  target.id))
        LOG.info('Asking heat-engine to update stack %(stack)s (%(id)s) '
                 'with existing to replace %(res)s of stack %(holder)s',
                 {'stack': target.name, 'id': target.id,
                  'res': resource_name, 'holder': stack_id})
        stored = self._context_of(target, lambda: self._load(
            heat_rows.reader(), target.id, load_template=False).context)
        self._engine.update_stack(
            stack_owner.token_context(stored), identity, None, {}, {},
            {heat_rpc_api.PARAM_EXISTING: True})
        return target.id

    def replaced(self, stack_id, resource_name, old_physical_id,
                 member=None):
        """Whether the resource now holds a server other than the old one.

        A replacement not created yet (or whose create failed) does not
        count, so a restarted engine never takes a half-done replacement
        for a finished one. With ``member`` (recorded by member_of), whether
        that member now holds another nested stack, created: its server,
        ports and volumes all new. Raises as resource() does.
        """
        if member is not None:
            stack_id, resource_name, old_physical_id = (
                member[MEMBER_STACK], member[MEMBER_NAME],
                member[MEMBER_NESTED])
        now = self.resource(stack_id, resource_name)
        return (bool(now.physical_id) and
                now.physical_id != old_physical_id and
                (now.action, now.status) not in _NOT_CREATED)

    def record_event(self, stack_id, resource_name, status_reason,
                     action=EVENT_ACTION, status=IN_PROGRESS):
        """A step of recovery in Heat's event list of the resource.

        Shown by `openstack stack event list` as e.g. HEALTH_IN_PROGRESS,
        the reason cut to what Heat's table keeps. Returns the event's
        uuid, or None when the resource is named like its stack: clients
        waiting on the stack (`--wait`) would take the event for the
        stack's own status.
        """
        if status not in EVENT_STATUSES:
            raise ValueError('Event status %s is not one of %s' %
                             (status, ', '.join(EVENT_STATUSES)))
        ctxt = heat_rows.reader()
        stack = heat_rows.stack_state(ctxt, stack_id)
        if resource_name == stack.name:
            LOG.warning('No event recorded for %(res)s: it is named like '
                        'its stack', {'res': resource_name})
            return None
        row = heat_rows.current_row(ctxt, stack, resource_name)
        # Rows, not the stack: loading it parses the template and makes
        # every resource, per event, while a recovery is under way.
        return event_object.Event.create(ctxt, {
            'stack_id': stack.id, 'resource_name': resource_name,
            'physical_resource_id': row.physical_resource_id,
            'resource_action': action, 'resource_status': status,
            'resource_status_reason':
                (status_reason or '')[:EVENT_REASON_LENGTH],
            'resource_type': heat_rows.resource_type(ctxt, stack,
                                                     resource_name),
        }).uuid
