"""Resources that exist only as their own stack created them.

Heat lets a template name an existing physical resource with
``external_id``, and a whole stack be adopted from data its user writes;
either way the resource's id is whatever the user said, checked only for
existence. A health policy's id and a departure's server are keys into
state that heat-health-engine keeps for every project with admin rights, so
taking one over would let a stack suspend, resume or read another project's
policy, or pull another project's servers out of their pools. Resources
with this mixin refuse both, at validation where Heat validates, and again
when the action runs.
"""

from heat.common import exception
from heat.common.i18n import _

EXTERNAL_ID = 'external_id'


class NoAdoptionMixin(object):
    """Refuses ``external_id`` and stack adopt with a clear message."""

    def _refuse(self, message, *path):
        raise exception.StackValidationFailed(
            path=[self.stack.t.get_section_name(self.stack.t.RESOURCES),
                  self.name] + list(path),
            message=message)

    def validate_external(self):
        """Heat validates a resource with ``external_id`` only by this."""
        self._refuse(_('%s cannot be created from external_id: it exists '
                       'only as its own stack creates it') % self.type(),
                     EXTERNAL_ID)

    def validate(self):
        if self.stack.adopt_stack_data:
            self._refuse(_('%s cannot be adopted: it exists only as its own '
                           'stack creates it') % self.type())
        return super(NoAdoptionMixin, self).validate()

    def handle_adopt(self, resource_data=None):
        raise exception.Error(_('%s cannot be adopted or created from '
                                'external_id: it exists only as its own '
                                'stack creates it') % self.type())
