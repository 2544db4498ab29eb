"""What resources naming their stack's servers and groups share.

OS::Heat::HealthPolicy and OS::Heat::LoadBalancer both take ``targets``:
names of servers or groups of servers of their own stack. Names, not
references: Heat would not see a dependency, so it is added here, and a
wrong name is refused at validation with the property's path, as is a
server created from ``external_id`` (it may be another project's).
"""

from heat.common import exception
from heat.common.i18n import _
from heat.engine.resources.openstack.heat import instance_group
from heat.engine.resources.openstack.heat import resource_group
from heat.engine.resources.openstack.nova import server

TARGETS = 'targets'


class TargetsMixin(object):
    """Validation and dependencies of a ``targets`` property."""

    def _invalid(self, message, *path):
        raise exception.StackValidationFailed(
            path=[self.stack.t.get_section_name(self.stack.t.RESOURCES),
                  self.name, 'properties'] + [str(p) for p in path],
            message=message)

    def _validate_targets(self):
        seen = set()
        for index, name in enumerate(self.properties[TARGETS]):
            path = (TARGETS, index)
            if name in seen:
                self._invalid(_('target "%s" is listed twice') % name, *path)
            seen.add(name)
            if name == self.name or name not in self.stack:
                self._invalid(_('target "%s" is not a resource of this '
                                'stack') % name, *path)
            target = self.stack[name]
            if target.external_id is not None:
                # Its id is whatever the template says, of any project.
                self._invalid(_('target "%s" is created from external_id: '
                                'only servers this stack creates can be '
                                'targets') % name, *path)
            if not isinstance(target, (server.Server,
                                       resource_group.ResourceGroup,
                                       instance_group.InstanceGroup)):
                self._invalid(_('target "%(name)s" is a %(type)s; targets '
                                'must be OS::Nova::Server, '
                                'OS::Heat::ResourceGroup, '
                                'OS::Heat::AutoScalingGroup or '
                                'OS::Heat::InstanceGroup resources') %
                              {'name': name, 'type': target.type()}, *path)

    def add_dependencies(self, deps):
        """Created after its targets, deleted before them."""
        super(TargetsMixin, self).add_dependencies(deps)
        for name in self.properties[TARGETS] or []:
            if name != self.name and name in self.stack:
                deps += (self, self.stack[name])
