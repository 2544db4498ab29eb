"""The load balancers of stacks, read from Heat's database.

An ``OS::Heat::LoadBalancer`` keeps its pool, member port and members
(server id -> member id and address) in its resource data, so the engine
learns them with one query for any number of stacks, without asking
heat-engine: LB_STATUS_POLLING finds the pools it reads
(``monitor.lb_status.pools``), and drains the members of a server.
"""

from heat.db import api as heat_db
from heat.db import models as heat_models

from heat_health.common import lb_members

KEYS = (lb_members.DATA_SPEC, lb_members.DATA_MEMBERS)


def load_balancers(ctxt, stack_ids):
    """{stack id: {resource name: {key: value}}} of load balancers."""
    R, D = heat_models.Resource, heat_models.ResourceData
    found = {}
    with heat_db.context_manager.reader.using(ctxt):
        rows = ctxt.session.query(R.stack_id, R.name, D.key, D.value).join(
            D, D.resource_id == R.id).filter(
                R.stack_id.in_(sorted(stack_ids)), D.key.in_(KEYS),
                R.action != 'DELETE').all()
    for stack_id, name, key, value in rows:
        found.setdefault(stack_id, {}).setdefault(name, {})[key] = value
    return found
