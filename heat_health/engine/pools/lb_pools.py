"""Which Octavia pools a health policy reads, from Heat's database.

An ``OS::Heat::LoadBalancer`` keeps its pool, member port and members
(server id -> member id and address) in its resource data, so the engine
learns them with one query for any number of policies, without asking
heat-engine. A policy reads the load balancers of its own stack (or the
one its LB_STATUS_POLLING options name) and only the members whose
servers it watches.
"""

from heat.db import api as heat_db
from heat.db import models as heat_models

from heat_health.common import lb_members
from heat_health.engine.monitor import lb_status

KEYS = (lb_members.DATA_SPEC, lb_members.DATA_MEMBERS)
OPTION = 'loadbalancer'


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


def _members(spec):
    port = spec['protocol_port']
    return {(m.get('address'), port): server_id
            for server_id, m in spec['members'].items()}


def pools(ctxt, policies, watched, enabled=lambda pool_id: True):
    """The lb_status.Pools to read for ``policies``.

    :param policies: policies with LB_STATUS_POLLING (``id``,
        ``stack_id``, ``parsed``).
    :param watched: policy id -> the server ids it watches.
    :param enabled: pool id -> whether its admin state is up.
    """
    if not policies:
        return []
    by_stack = load_balancers(ctxt, {p.stack_id for p in policies})
    merged = {}  # pool id -> {policy id: servers}
    for policy in policies:
        options = policy.parsed.options(lb_status.SOURCE) or {}
        named = options.get(OPTION)
        mine = set(watched.get(policy.id, ()))
        for name, data in sorted(by_stack.get(policy.stack_id, {}).items()):
            spec = lb_members.read_data(data)
            if spec is None or (named and name != named):
                continue
            servers = merged.setdefault(spec['pool_id'], {}).setdefault(
                policy.id, {})
            servers.update({key: server_id for key, server_id
                            in _members(spec).items() if server_id in mine})
    return [lb_status.Pool(pool_id, enabled(pool_id), readers)
            for pool_id, readers in sorted(merged.items())]
