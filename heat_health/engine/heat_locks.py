"""Heat's own locks, taken by heat-health-engine around a state change.

Convergence stacks lock the resource, legacy stacks lock the stack, exactly
as heat-engine does; the lock is held under this engine's id, and
``LivenessEndpoint`` answers Heat's checks for that id, so a heat-engine that
finds the lock held can tell a live holder (answer 409) from a dead one
(steal the lock).
"""

import contextlib

from heat.common import exception
from heat.engine import stack_lock
from heat.rpc import api as heat_rpc_api
import oslo_messaging


@contextlib.contextmanager
def locked(ctxt, rsrc, engine_id):
    stack = rsrc.stack
    if stack.convergence:
        lock = rsrc.lock(engine_id)
    else:
        lock = stack_lock.StackLock(ctxt, stack.id, engine_id)
    try:
        with lock:
            yield
    except exception.UpdateInProgress:
        raise exception.ActionInProgress(stack_name=stack.name,
                                         action=stack.action)


class LivenessEndpoint(object):
    """Answers Heat's "is the engine holding this lock alive?" probe."""

    def listening(self, ctxt):
        return True


def liveness_target(engine_id):
    return oslo_messaging.Target(topic=heat_rpc_api.LISTENER_TOPIC,
                                 server=engine_id)
