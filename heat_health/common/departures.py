"""Servers leaving their load balancers' pools before Heat deletes them.

Heat gives no hook before it deletes a group member in a stack update
(its pre-delete hook fires only when the whole stack is deleted), but it
always deletes a resource before the resources it depends on. An
``OS::Heat::LoadBalancerDeparture`` placed beside a server in a group's
member template therefore goes first: while it is being deleted it marks
its server as departing in its resource data, heat-health-engine's member
follower leaves that server out of the pool's next batch, and the
departure completes once no load balancer records the server as a member.
Only then does Heat delete the server.

Both sides read Heat's database, with which heat-engine and
heat-health-engine share a connection: these are their queries.
"""

from heat.db import api as heat_db
from heat.db import models as heat_models
from oslo_serialization import jsonutils
import sqlalchemy as sa
from sqlalchemy import orm

from heat_health.common import lb_members

# Resource data key of a departure being deleted: the id of its server.
DATA_DEPARTING = 'departing_server'


def departing(ctxt):
    """Ids of the servers whose departure Heat is deleting now.

    A departure counts only for a server of its own stack tree: whatever
    id a departure's data holds, it never takes another stack's (another
    project's) server out of its pools.
    """
    R, D = heat_models.Resource, heat_models.ResourceData
    server = orm.aliased(R)
    with heat_db.context_manager.reader.using(ctxt):
        rows = ctxt.session.query(D.value).join(
            R, D.resource_id == R.id).join(
                server, sa.and_(server.physical_resource_id == D.value,
                                server.root_stack_id == R.root_stack_id,
                                server.id != R.id)
        ).filter(
            D.key == DATA_DEPARTING, R.action == 'DELETE',
            R.status == 'IN_PROGRESS').all()
    return frozenset(row.value for row in rows)


def pools_holding(ctxt, server_id):
    """Names of the load balancers that still record the server as a member.

    A load balancer being deleted counts as long as its members do: its
    pool goes with it, and the server may go when it is gone.
    """
    R, D = heat_models.Resource, heat_models.ResourceData
    with heat_db.context_manager.reader.using(ctxt):
        rows = ctxt.session.query(R.name, D.value).join(
            D, D.resource_id == R.id).filter(
                D.key == lb_members.DATA_MEMBERS,
                D.value.contains(server_id)).all()
    names = []
    for name, value in rows:
        try:
            members = jsonutils.loads(value)
        except ValueError:
            continue
        if isinstance(members, dict) and server_id in members:
            names.append(name)
    return sorted(names)
