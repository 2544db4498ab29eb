"""RPC endpoint of heat-health-engine (topic ``[heat_health] topic``)."""

import functools

from heat.common import exception
from heat.objects import stack as stack_object
from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from heat_health.common import config  # noqa: F401  (registers options)
from heat_health.db import api as db_api
from heat_health.engine import leftovers
from heat_health.engine import marking as marking_mod
from heat_health.engine.ownership import registry as registry_module
from heat_health.engine import pausing
from heat_health.engine import report
from heat_health.engine import resource_locator
from heat_health.objects import policy as policy_object
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec
from heat_health.rpc import api as rpc_api

LOG = logging.getLogger(__name__)

DEFAULT_REASONS = {
    True: 'Marked unhealthy explicitly by user %s',
    False: 'Marked healthy explicitly by user %s',
}


def expected_heat_errors(func):
    """Return Heat's own errors to the caller without logging a traceback."""
    @functools.wraps(func)
    def wrapped(self, ctxt, *args, **kwargs):
        try:
            return func(self, ctxt, *args, **kwargs)
        except exception.HeatException:
            raise oslo_messaging.ExpectedException()
    return wrapped


def _past(deadline):
    """Whether a caller's deadline (ISO 8601, UTC) has passed."""
    if not deadline:
        return False
    return timeutils.utcnow() > timeutils.normalize_time(
        timeutils.parse_isotime(deadline))


def _check_reason(reason):
    """Refuse a reason no store of it holds (Heat's resource, our marking)."""
    if reason is None:
        return
    if not isinstance(reason, str):
        raise exception.Invalid(reason='resource_status_reason is not a '
                                       'string')
    size = len(reason.encode('utf-8', 'surrogatepass'))
    if size > rpc_api.MAX_REASON_BYTES:
        raise exception.Invalid(
            reason='resource_status_reason is %d bytes long in UTF-8, more '
                   'than the %d a resource status reason holds'
                   % (size, rpc_api.MAX_REASON_BYTES))


def _stack_of(ctxt, stack_id):
    """The stack's record if the caller may act on it, else None.

    Heat's own rule, in Heat's own lookup: a stack of the caller's project
    (or whose stack user project it is), any stack for an admin (Heat's
    ``context_is_admin`` policy rule sets ``is_admin``).
    """
    return stack_object.Stack.get_by_id(ctxt, stack_id, show_deleted=True,
                                        eager_load=False)


def _policy_of(ctxt, policy_id):
    """The registered policy if it belongs to the caller's project.

    Another project's policy is answered as an unknown one (None): its
    existence is not revealed and nothing is done to it.
    """
    policy = policy_object.Policy.get(policy_id)
    if policy is None:
        return None
    if ctxt.is_admin or policy.project_id == ctxt.project_id:
        return policy
    LOG.warning('Refused a call of project %(caller)s on health policy '
                '%(id)s of project %(owner)s',
                {'caller': ctxt.project_id, 'id': policy_id,
                 'owner': policy.project_id})
    return None


class HealthEndpoint(object):

    target = oslo_messaging.Target(version=rpc_api.RPC_API_VERSION)

    def __init__(self, engine_id, registry=None, router=None):
        self.engine_id = engine_id
        # The engine's registry (the service shares its own).
        self.registry = registry or registry_module.Registry(engine_id)
        # Where news forwarded by other engines goes (the monitor's).
        self.router = router

    def observe(self, ctxt, observations, hops=0):
        """Nova news of servers this engine owns, from another engine.

        A cast to this engine's own server by another engine's listener.
        """
        if self.router is not None:
            self.router.receive([obs.from_wire(o) for o in observations],
                                hops)

    @expected_heat_errors
    def mark_unhealthy(self, ctxt, stack_identity, resource_name,
                       mark_unhealthy, resource_status_reason=None,
                       source=rpc_api.SOURCE_API):
        """Set or clear CHECK_FAILED under Heat's lock, then record it.

        Returns the recorded marking, or None when the state changed but
        the record could not be written: the marking happened all the
        same, so the caller is not told it failed.
        """
        if not isinstance(mark_unhealthy, bool):
            raise exception.Invalid(reason='mark_unhealthy is not a boolean')
        _check_reason(resource_status_reason)
        stack, rsrc = resource_locator.find_resource(
            ctxt, stack_identity, resource_name,
            cfg.CONF.heat_health.max_nested_depth)
        user = ctxt.username or ctxt.user_name or ctxt.user_id
        reason = (resource_status_reason or
                  DEFAULT_REASONS[mark_unhealthy] % user)
        marking = marking_mod.mark(ctxt, self.engine_id, stack, rsrc,
                                   mark_unhealthy, reason, source,
                                   stack_identity['stack_id'])
        if not mark_unhealthy:
            # The user says it is well: a failure, a recovery under way or
            # a given-up server starts afresh.
            try:
                db_api.target_reset(rsrc.stack.id, rsrc.name,
                                    'reset by %s: %s' % (user, reason))
            except Exception:
                LOG.exception('Could not reset the health of %s',
                              rsrc.name)
        return marking.obj_to_primitive() if marking is not None else None

    # Health policy registration (OS::Heat::HealthPolicy).

    @expected_heat_errors
    def register_policy(self, ctxt, policy):
        """Store a policy, claim it and resolve its targets.

        The answer is the confirmation heat-engine waits for: the owning
        engine's id and what it watches. A policy another live engine
        already owns stays with it (that engine is named in the answer).
        A request past its ``deadline`` is answered ``expired``: heat-engine
        has failed the resource by then, so a new policy is not kept.
        """
        deadline = policy.get('deadline')
        if _past(deadline):
            LOG.warning('Dropped the registration of policy %(id)s: '
                        'heat-engine stopped waiting for it at %(at)s',
                        {'id': policy['id'], 'at': deadline})
            return {'policy_id': policy['id'], 'expired': True}
        values = dict((key, policy[key]) for key in (
            'id', 'stack_id', 'resource_name', 'spec', 'enabled'))
        stack = _stack_of(ctxt, values['stack_id'])
        if stack is None:
            raise exception.EntityNotFound(entity='Stack',
                                           name=values['stack_id'])
        known = policy_object.Policy.get(values['id'])
        if known is not None and _policy_of(ctxt, values['id']) is None:
            # Another project's policy id (an external_id or adopt data):
            # never taken over, answered as a policy that cannot be made.
            raise exception.EntityNotFound(entity='Health policy',
                                           name=values['id'])
        # The policy belongs to its stack's project, whoever registers it.
        values.update(project_id=stack.tenant, user_id=ctxt.user_id)
        # One deleted, kept for its leftovers, is registered anew.
        existed = known is not None and not known.deleted
        policy_object.Policy.create_or_update(
            values, policy_spec.PolicySpec.parse(values['spec']).grace)
        owned = self.registry.claim(policy_id=values['id'])
        record = owned[0] if owned else policy_object.Policy.get(values['id'])
        watched = self.registry.refresh_targets(record)
        if _past(deadline) and not existed:
            LOG.warning('Registered policy %(id)s after heat-engine stopped '
                        'waiting (%(at)s): removed it again',
                        {'id': record.id, 'at': deadline})
            self.unregister_policy(ctxt, record.id)
            return {'policy_id': record.id, 'expired': True}
        LOG.info('Registered policy %(id)s (%(res)s of stack %(stack)s): '
                 '%(n)d servers, owner %(owner)s',
                 {'id': record.id, 'res': record.resource_name,
                  'stack': record.stack_id, 'n': len(watched),
                  'owner': record.engine_id})
        return {'policy_id': record.id, 'engine_id': record.engine_id,
                'targets': [t.path for t in watched],
                'missing': self.registry.missing_targets(record)}

    def set_policy_suspended(self, ctxt, policy_id, suspended):
        """The policy's stack is being suspended, or was resumed.

        Heat suspends a policy before the servers it watches and resumes it
        after them, so servers stopped by a suspend are never failures.
        """
        if _policy_of(ctxt, policy_id) is None:
            return False
        found = policy_object.Policy.set_suspended(policy_id, suspended)
        LOG.info('Policy %(id)s %(what)s', {
            'id': policy_id,
            'what': 'suspended with its stack' if suspended else 'resumed'})
        return found

    def unregister_policy(self, ctxt, policy_id):
        """Forget a policy and delete its rows; True if it was registered.

        What its recoveries left (members drained, marks) is undone first:
        the rows hold the only record of it.
        """
        policy = _policy_of(ctxt, policy_id)
        if policy is None:
            return False
        self.registry.forget(policy_id)
        existed = leftovers.delete_policy(self.registry.undoer, policy)
        LOG.info('Unregistered policy %s', policy_id)
        return existed

    # Health report (GET .../stacks/{name}/{id}/health).

    @staticmethod
    def _stack(ctxt, stack_identity, stack):
        """The addressed stack: by its identity, or by name or id."""
        if stack_identity is not None:
            return resource_locator.find_stack(ctxt, stack_identity)
        return resource_locator.identify_stack(ctxt, stack)

    @expected_heat_errors
    def health_report(self, ctxt, stack_identity=None, stack=None):
        """The stack's policies, targets and recent events.

        Read from our tables, whichever engine watches the policies.
        """
        stack = self._stack(ctxt, stack_identity, stack)
        return report.health_report(stack.id, stack_name=stack.name)

    @expected_heat_errors
    def health_events(self, ctxt, stack_identity=None, stack=None,
                      marker=None, since=None, limit=None):
        """The stack's incident timeline, oldest first."""
        stack = self._stack(ctxt, stack_identity, stack)
        if since is not None:
            since = timeutils.parse_isotime(since).replace(tzinfo=None)
        return report.timeline(stack.id, marker, since, limit)

    @expected_heat_errors
    def set_paused(self, ctxt, pause, stack_identity=None, stack=None,
                   policy=None, reason=None):
        """Pause or resume the healing of the stack's policies.

        Stored in the policies' rows: the owning engine holds its
        recoveries from its next claim, and a restart or a takeover keeps
        the pause. Detection and the report go on.
        """
        stack = self._stack(ctxt, stack_identity, stack)
        chosen = pausing.choose(stack, policy)
        user = ctxt.username or ctxt.user_name or ctxt.user_id
        changed = policy_object.Policy.set_paused(
            [p.id for p in chosen], pause, user, reason)
        for found in chosen:
            if found.id in changed:
                pausing.announce(ctxt, found, pause, user, reason)
        LOG.info('%(what)s healing of %(n)d policies of stack %(stack)s '
                 '(%(changed)d changed) for %(user)s',
                 {'what': 'Paused' if pause else 'Resumed',
                  'n': len(chosen), 'stack': stack.name,
                  'changed': len(changed), 'user': user})
        return report.policies(stack.id, [p.id for p in chosen])
