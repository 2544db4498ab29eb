"""OS::Heat::LoadBalancer: an Octavia pool that holds the servers of targets.

The resource creates (or reuses) a load balancer, a listener, a pool and a
health monitor, then makes the pool's members the servers of its targets
with one full-state batch member update (``heat_health.common.lb_members``):
N servers cost one Octavia change and one wait, not N of each. Property
names are those of Senlin's load-balancing policy so its specs port over;
times are in seconds, as Octavia counts them.

Every Octavia call is made from ``check_*_complete``: a 409 or a PENDING_*
status only means "not yet" and the next poll tries again, until
``lb_status_timeout`` has passed in one step.

The resource is made of three parts, as Heat keeps one module per Octavia
resource: ``load_balancer_schema`` (properties, attributes, validation),
``load_balancer_octavia`` (the Octavia objects, step by step) and
``load_balancer_members`` (the pool's members, the targets' servers).
"""

import collections

from heat.engine import resource
from heat.engine import support
from oslo_log import log as logging

from heat_health.resources import load_balancer_members
from heat_health.resources import load_balancer_octavia
from heat_health.resources import load_balancer_schema
from heat_health.resources import targeting

LOG = logging.getLogger(__name__)


class _Plan(object):
    """The steps of one create, update or delete, advanced at each poll.

    A step is (name, argument); ``state`` holds what the current step has
    done so far (whether its Octavia call was accepted, what it computed).
    """

    def __init__(self, steps):
        self.steps = collections.deque(steps)
        self.state = None


class LoadBalancer(load_balancer_members.MemberSync,
                   load_balancer_octavia.OctaviaSteps,
                   load_balancer_schema.LoadBalancerSchema,
                   targeting.TargetsMixin, resource.Resource):
    """An Octavia load balancer whose pool follows servers of this stack.

    ``targets`` names servers or groups (ResourceGroup, AutoScalingGroup,
    InstanceGroup) of the same stack. Each server becomes a member with its
    address on the pool's subnet; a member keeps the weight, admin state and
    backup flag the pool gives it, so a drained member stays drained when
    others change. An existing load balancer, pool or health monitor can be
    reused by id and is never deleted; the members of a reused pool become
    the targets' servers too, and only those this resource recorded are
    removed from it at delete.
    """

    support_status = support.SupportStatus(version='27.0.0')

    default_client_name = 'octavia'

    def validate(self):
        super(LoadBalancer, self).validate()
        self._validate_targets()
        self._validate_pool()
        self._validate_vip()
        self._validate_health_monitor()

    def handle_create(self):
        steps = [self.LB_DATA]
        if not self.properties[self.POOL][self.POOL_ID]:
            steps.append(self.LISTENER_DATA)
        steps.append(self.POOL_DATA)
        if self.properties[self.HEALTH_MONITOR]:
            steps.append(self.HM_DATA)
        steps.append(self.MEMBERS_STEP)
        return _Plan((step, None) for step in steps)

    def check_create_complete(self, plan):
        return self._advance(plan)

    def _needs_update(self, after, before, after_props, before_props,
                      prev_resource, check_init_complete=True):
        """Update at every stack update, even with unchanged properties.

        A group's scaling changes the servers without changing this
        resource's definition; the update that scaled it must still bring
        the pool along. When the members are already right, the update
        reads Octavia and Neutron and changes nothing.
        """
        super(LoadBalancer, self)._needs_update(
            after, before, after_props, before_props, prev_resource,
            check_init_complete)
        return True

    def needs_replace_with_prop_diff(self, changed_properties_set,
                                     after_props, before_props):
        """Only pool.protocol_port changes in place: it moves the members."""
        if self.POOL not in changed_properties_set:
            return False
        before = dict(before_props[self.POOL])
        after = dict(after_props[self.POOL])
        before.pop(self.POOL_PROTOCOL_PORT)
        after.pop(self.POOL_PROTOCOL_PORT)
        return before != after

    def handle_update(self, json_snippet, tmpl_diff, prop_diff):
        before = self.properties[self.HEALTH_MONITOR]
        self.properties = json_snippet.properties(self.properties_schema,
                                                  self.context)
        steps = []
        if self.HEALTH_MONITOR in prop_diff:
            steps.extend(self._health_monitor_steps(
                before, self.properties[self.HEALTH_MONITOR]))
        steps.append((self.MEMBERS_STEP, None))
        return _Plan(steps)

    def check_update_complete(self, plan):
        return self._advance(plan)

    def handle_delete(self):
        if self.resource_id is None:
            return _Plan([])
        return _Plan(('drop', target) for target in self._delete_steps())

    def check_delete_complete(self, plan):
        return self._advance(plan)

    def _show_resource(self):
        return self.client().load_balancer_show(self.resource_id)

    def _resolve_attribute(self, name):
        if self.resource_id is None:
            return None
        if name == self.VIP_ADDRESS_ATTR:
            return self._show_resource().get('vip_address')
        if name == self.LOADBALANCER_ID_ATTR:
            return self.resource_id
        if name == self.POOL_ID_ATTR:
            return self._object_id(self.POOL_DATA)
        if name == self.MEMBERS_ATTR:
            return self._members()


def resource_mapping():
    return {'OS::Heat::LoadBalancer': LoadBalancer}
