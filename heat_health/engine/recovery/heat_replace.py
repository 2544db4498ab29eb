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
import threading
import time

from heat.common import context as heat_context
from heat.common import exception
from heat.common import identifier
from heat.db import api as heat_db
from heat.db import models as heat_models
from heat.engine.resources.aws.autoscaling import autoscaling_group
from heat.engine.resources import stack_resource
from heat.engine import stack as parser
from heat.objects import event as event_object
from heat.objects import stack as stack_object
from heat.rpc import api as heat_rpc_api
from heat.rpc import client as rpc_client
from oslo_config import cfg
from oslo_log import log as logging
from sqlalchemy import orm

from heat_health.engine import marking

LOG = logging.getLogger(__name__)

# Seconds a stack's stored context, and with it one trust-scoped token for
# Nova and Octavia alike, is kept.
CONTEXT_SECONDS = 600
# An update is sent with the owner's trust-scoped token while the token
# has this long to live; heat-engine acts on it for the whole update.
UPDATE_TOKEN_SECONDS = 1800

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


class NotActionable(Exception):
    """Heat cannot be asked to act on this now; the message says why."""


class ServerMoved(NotActionable):
    """The resource no longer holds the server the recovery was about."""


def _reader():
    """A context that only reads Heat's rows, fresh for every call.

    Fresh because a context caches the resources it read. No owner acts
    through it: stacks that act are loaded with their stored context.
    """
    return heat_context.get_admin_context()


def _stack_row(ctxt, stack_id):
    """The stack's object, its template joined in, for loading the stack."""
    row = stack_object.Stack.get_by_id(ctxt, stack_id, eager_load=True)
    if row is None:
        raise exception.EntityNotFound(entity='Stack', name=stack_id)
    return row


def _current_row(ctxt, stack, resource_name):
    """The resource's newest row not deleted.

    During a convergence replacement a stack holds two rows of one name
    (the old server and its replacement); the replacement is the newer.
    Only the columns recovery reads: watched every pass of an update,
    Heat's own read would join in every row's data and properties.
    """
    rows = [row for row in _named_rows(ctxt, stack.id, resource_name)
            if (row.action, row.status) != ('DELETE', 'COMPLETE')]
    if not rows:
        raise exception.ResourceNotFound(resource_name=resource_name,
                                         stack_name=stack.name)
    return max(rows, key=lambda row: row.id)


@heat_db.context_manager.reader
def _named_rows(context, stack_id, resource_name):
    model = heat_models.Resource
    return context.session.query(model).options(orm.load_only(
        model.id, model.physical_resource_id, model.action, model.status,
        model.status_reason)).filter_by(stack_id=stack_id,
                                        name=resource_name).all()


@heat_db.context_manager.reader
def _stack_state(context, stack_id):
    """A stack not deleted: only the columns recovery reads of it.

    Heat's own read makes a versioned object of every column, several
    times per recovery step; its template is only read to load a stack.
    """
    model = heat_models.Stack
    row = context.session.query(model).options(orm.load_only(
        model.id, model.name, model.tenant, model.owner_id,
        model.parent_resource_name, model.action, model.status,
        model.current_traversal, model.raw_template_id,
        model.user_creds_id, model.deleted_at)).filter_by(
            id=stack_id).first()
    if row is None or row.deleted_at is not None:
        raise exception.EntityNotFound(entity='Stack', name=stack_id)
    return row


def _token_context(stored):
    """The owner's stored context as the trust-scoped token it holds.

    heat-engine makes a context of its own from the one an update is sent
    with, for each step of the update. From a trust it logs in for each
    (a new token, which Nova and Octavia validate again): seven logins
    per member stack replaced. From a token and its data, as an API
    request or Aodh's trust notifier sends, it reuses the token. The
    same trust and roles either way; the stored context is sent as it is
    when its token has less than UPDATE_TOKEN_SECONDS to live.
    """
    access = stored.auth_plugin.get_access(stored.keystone_session)
    if access.will_expire_soon(UPDATE_TOKEN_SECONDS):
        return stored
    values = stored.to_dict()
    del values['request_id']        # a request of its own
    values.update(
        auth_token=access.auth_token, auth_token_info=access._data,
        trust_id=None, trustor_user_id=None, password=None,
        user_id=access.user_id, project_id=access.project_id,
        user_domain_id=access.user_domain_id,
        project_domain_id=access.project_domain_id,
        roles=access.role_names)
    return heat_context.RequestContext.from_dict(values)


def _resource_type(ctxt, stack, resource_name):
    """The type the stack's template gives the resource, as Heat shows it."""
    template = heat_db.raw_template_get(ctxt, stack.raw_template_id).template
    for section, key in (('resources', 'type'), ('Resources', 'Type')):
        definition = (template.get(section) or {}).get(resource_name)
        if isinstance(definition, dict) and definition.get(key):
            return definition[key]
    return None


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


class HeatReplacer(object):
    """Heat's part of a recovery, for the recovery loop.

    :param engine_id: the id heat-health-engine answers Heat's liveness
        probes under: Heat's locks taken while marking are held under it.
    """

    def __init__(self, engine_id, clock=time.monotonic, update_stack=None):
        self.engine_id = engine_id
        self._update_own = (
            update_stack or
            cfg.CONF.heat_health.replacement_update_stack) == OWN
        self._engine_client = None
        self._clock = clock
        # Stored contexts by the stored credentials they act with, which
        # a stack shares with every stack nested in it; and which
        # credentials each stack asked for points to.
        self._contexts = {}   # user_creds id -> (stored context, expiry)
        self._creds_of = {}   # stack id -> (user_creds id, expiry)
        self._contexts_lock = threading.Lock()
        self._making = collections.defaultdict(threading.Lock)

    @property
    def _engine(self):
        # Made at first use: the RPC transport is set up by then.
        if self._engine_client is None:
            self._engine_client = rpc_client.EngineClient()
        return self._engine_client

    @staticmethod
    def _load(ctxt, stack_id, load_template=True):
        """The stack, acting with its stored (owner's) context."""
        return parser.Stack.load(ctxt, stack=_stack_row(ctxt, stack_id),
                                 use_stored_context=True,
                                 load_template=load_template)

    def stack_status(self, stack_id):
        """(action, status) of a root or nested stack.

        Raises Heat's EntityNotFound once the stack is deleted.
        """
        row = _stack_state(_reader(), stack_id)
        return row.action, row.status

    def traversal(self, stack_id):
        """The id of the stack's latest action, or None.

        heat-engine (convergence) stores a new traversal before its
        update_stack returns, so read just after an update of ours it
        names that update; a later action, such as a user's update that
        supersedes ours, names another. A legacy stack has none.
        """
        return _stack_state(_reader(), stack_id).current_traversal or None

    def resource(self, stack_id, resource_name):
        """The ResourceState of a resource of the stack that holds it.

        Raises Heat's EntityNotFound (stack) or ResourceNotFound.
        """
        ctxt = _reader()
        row = _current_row(ctxt, _stack_state(ctxt, stack_id), resource_name)
        return ResourceState(row.physical_resource_id, row.action,
                             row.status, row.status_reason)

    def _holding(self, stack_id, resource_name, server_id):
        """The stack and its resource, which must still hold the server."""
        stack = self._load(_reader(), stack_id)
        if resource_name not in stack:
            raise exception.ResourceNotFound(resource_name=resource_name,
                                             stack_name=stack.name)
        rsrc = stack[resource_name]
        if server_id is not None and rsrc.resource_id != server_id:
            raise ServerMoved('Resource %s of stack %s holds %s, not %s' % (
                resource_name, stack.name, rsrc.resource_id, server_id))
        return stack, rsrc

    def mark_failed(self, stack_id, resource_name, reason, server_id=None):
        """Mark the resource CHECK_FAILED, as the PATCH API does.

        Same code as the API (Heat's lock honoured: ActionInProgress while
        a stack action holds it; the marking recorded, source
        SOURCE_RECOVERY), acting as the stack's owner. Returns the physical
        id marked, the server Heat will replace.

        Raises ServerMoved when the resource no longer holds ``server_id``
        (an update already replaced it: its new server is not marked),
        NotActionable for a resource with a nested stack (a group or
        template resource: Heat would replace its whole nested stack) or
        one being deleted (marking it does nothing).
        """
        stack, rsrc = self._holding(stack_id, resource_name, server_id)
        if isinstance(rsrc, stack_resource.StackResource):
            raise NotActionable(
                'Resource %s of stack %s has a nested stack: marking it '
                'would replace all of it' % (resource_name, stack.name))
        if rsrc.action == rsrc.DELETE:
            raise NotActionable('Resource %s of stack %s is %s_%s' % (
                resource_name, stack.name, rsrc.action, rsrc.status))
        marking.mark(stack.context, self.engine_id, stack, rsrc, True,
                     reason, SOURCE_RECOVERY, stack.root_stack_id())
        if rsrc.state != (rsrc.CHECK, rsrc.FAILED):
            # Deleted while we waited for the lock.
            raise NotActionable('Resource %s of stack %s is %s_%s' % (
                resource_name, stack.name, rsrc.action, rsrc.status))
        return rsrc.resource_id

    def clear_mark(self, stack_id, resource_name, server_id, reason):
        """Clear a CHECK_FAILED recovery set, while it holds that server.

        As a user's ``mark_unhealthy: false`` does, so the next stack
        update does not replace a server that healed. True if cleared;
        False when there is nothing of ours to clear (the server was
        replaced, or the resource is no longer CHECK_FAILED).
        """
        try:
            stack, rsrc = self._holding(stack_id, resource_name, server_id)
        except (ServerMoved, exception.ResourceNotFound,
                exception.EntityNotFound):
            return False
        if rsrc.state != (rsrc.CHECK, rsrc.FAILED):
            return False
        marking.mark(stack.context, self.engine_id, stack, rsrc, False,
                     reason, SOURCE_RECOVERY, stack.root_stack_id())
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
        root = _stack_state(ctxt, root_stack_id)
        if stack_id == root_stack_id:
            _current_row(ctxt, root, resource_name)
            return root, root
        holder = _stack_state(ctxt, stack_id)
        _current_row(ctxt, holder, resource_name)
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
            stack = _stack_state(ctxt, stack.owner_id)
            _refuse_unless_updatable(stack)

    def stack_to_update(self, root_stack_id, stack_id, resource_name):
        """The id of the stack update_target would update for the resource.

        Resources that share it are replaced by one update.
        """
        return self._rows_to_update(_reader(), root_stack_id, stack_id,
                                    resource_name)[1].id

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
        ctxt = _reader()
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
            _reader(), target.id, load_template=False).context)
        self._engine.update_stack(
            _token_context(stored), identity, None, {}, {},
            {heat_rpc_api.PARAM_EXISTING: True})
        return target.id

    def replaced(self, stack_id, resource_name, old_physical_id):
        """Whether the resource now holds a server other than the old one.

        A replacement not created yet (or whose create failed) does not
        count, so a restarted engine never takes a half-done replacement
        for a finished one. Raises as resource() does.
        """
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
        ctxt = _reader()
        stack = _stack_state(ctxt, stack_id)
        if resource_name == stack.name:
            LOG.warning('No event recorded for %(res)s: it is named like '
                        'its stack', {'res': resource_name})
            return None
        row = _current_row(ctxt, stack, resource_name)
        # Rows, not the stack: loading it parses the template and makes
        # every resource, per event, while a recovery is under way.
        return event_object.Event.create(ctxt, {
            'stack_id': stack.id, 'resource_name': resource_name,
            'physical_resource_id': row.physical_resource_id,
            'resource_action': action, 'resource_status': status,
            'resource_status_reason':
                (status_reason or '')[:EVENT_REASON_LENGTH],
            'resource_type': _resource_type(ctxt, stack, resource_name),
        }).uuid

    def _stored_context(self, stack_id):
        """The stack's stored (owner's) context, kept a while.

        A fresh one means a new trust-scoped token, which Nova and
        Octavia each validate: most of a recovery's first second. Kept,
        one token serves the drains, Nova actions, pool changes and
        updates of every stack that shares the owner's stored
        credentials: a root and the stacks nested in it.
        """
        now = self._clock()
        with self._contexts_lock:
            creds, until = self._creds_of.get(stack_id, (None, now))
            found = self._contexts.get(creds)
        if until > now and found is not None and found[1] > now:
            return found[0]
        row = _stack_state(_reader(), stack_id)
        return self._context_of(row, lambda: self._load(
            _reader(), stack_id, load_template=False).context)

    def _context_of(self, row, make):
        """The stored context of the stack row's credentials.

        ``make()`` makes one when none is kept; one at a time per
        credentials, so recoveries that start together share one login.
        """
        creds = row.user_creds_id or ('stack', row.id)
        with self._contexts_lock:
            making = self._making[creds]
        with making:
            now = self._clock()
            with self._contexts_lock:
                found = self._contexts.get(creds)
            if found is None or found[1] <= now:
                found = (make(), now + CONTEXT_SECONDS)
            with self._contexts_lock:
                self._contexts[creds] = found
                self._creds_of[row.id] = (creds, found[1])
        return found[0]

    def forget_clients(self, stack_id):
        """After an error: the next client gets a new token and trust.

        Every stack acting with the same stored credentials gets one.
        """
        with self._contexts_lock:
            creds, _until = self._creds_of.pop(stack_id, (None, None))
            self._contexts.pop(creds, None)

    def nova_client(self, stack_id):
        """A novaclient acting as the stack's owner (its stored trust).

        Through Heat's own nova client plugin, so Nova sees the same user
        and project as for the stack's servers.
        """
        return self._client(stack_id, 'nova')

    def octavia_client(self, stack_id):
        """An OctaviaAPI acting as the stack's owner (its stored trust)."""
        return self._client(stack_id, 'octavia')

    def _client(self, stack_id, name):
        """One of Heat's clients made with the stack's stored context.

        Heat's client plugins hold their context weakly: the context is
        held here until the client is made, since another thread may drop
        it from the cache (forget_clients) meanwhile.
        """
        ctxt = self._stored_context(stack_id)
        return ctxt.clients.client(name)

    def owner(self, stack_id):
        """Who the stack acts as: the stored credentials it points to.

        For checking that a recovery left the owner and trust unchanged
        (Heat re-points ``user_creds_id`` when another user updates). Holds
        the trust id: do not log it.
        """
        ctxt = _reader()
        row = _stack_row(ctxt, stack_id)
        stack = parser.Stack.load(ctxt, stack=row, load_template=False)
        stored = stack.stored_context()
        return {'stack_id': row.id,
                # An int from a row, a string from Heat's object.
                'user_creds_id': str(stack.user_creds_id),
                'trust_id': stored.trust_id,
                'trustor_user_id': stored.trustor_user_id,
                'username': row.username,
                'project_id': row.tenant,
                'stack_user_project_id': row.stack_user_project_id}
