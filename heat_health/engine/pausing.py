"""An operator's pause of healing: which policies, and who is told.

A pause is the operator's word, like AWS's suspend-processes: recoveries
hold (a recovery already issued is carried through, never left half
done) while detection and the report go on. The template's
``enabled: false`` still wins: a disabled policy stays disabled on resume.
"""

from heat.common import exception
from heat.common import messaging
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.objects import policy as policy_object

LOG = logging.getLogger(__name__)

EVENT_TYPES = {True: 'heat_health.policy.paused',
               False: 'heat_health.policy.resumed'}


def choose(stack, name_or_id=None):
    """The stack's policies named (by resource name or id), or all.

    Raises EntityNotFound (404) for an unknown name, or a stack without
    any health policy.
    """
    policies = policy_object.Policy.get_all_by_stack(stack.id)
    if name_or_id is not None:
        policies = [p for p in policies
                    if name_or_id in (p.resource_name, p.id)]
    if not policies:
        raise exception.EntityNotFound(
            entity='Health policy',
            name=name_or_id or 'of stack %s' % stack.name)
    return policies


def announce(ctxt, policy, pause, user, reason):
    """A ``heat_health.policy.paused`` or ``resumed`` notification."""
    payload = {'policy_id': policy.id, 'stack_id': policy.stack_id,
               'resource_name': policy.resource_name, 'user': user,
               'reason': reason}
    try:
        notifier = messaging.get_notifier(
            'heat-health-engine.%s' % cfg.CONF.host)
        notifier.info(ctxt, EVENT_TYPES[pause], payload)
    except Exception:
        LOG.exception('Could not send %s for policy %s', EVENT_TYPES[pause],
                      policy.id)
