"""OS::Heat::HealthPolicy: watch a stack's servers, and (later) heal them.

The resource registers the policy with heat-health-engine, which stores it
in the heat-health registry, claims it and resolves the servers it names
(directly or inside groups at any depth). Properties keep the names of
Senlin's health policy so its users can port their policies; they and
their validation are in ``health_policy_schema``.
"""

import uuid

from heat.common import exception
from heat.common.i18n import _
from heat.engine import resource
from heat.engine import support
from oslo_log import log as logging
import oslo_messaging

from heat_health.objects import policy as policy_object
from heat_health.objects import target as target_object
from heat_health.policy import webhook_signature
from heat_health.resources import health_policy_schema
from heat_health.resources import no_adoption
from heat_health.resources import targeting
from heat_health.rpc import client as rpc_client

LOG = logging.getLogger(__name__)


class HealthPolicy(health_policy_schema.HealthPolicySchema,
                   no_adoption.NoAdoptionMixin, targeting.TargetsMixin,
                   resource.Resource):
    """Watches servers of its stack and says how they are healed.

    ``targets`` names servers or groups (ResourceGroup, AutoScalingGroup,
    InstanceGroup) of the same stack; the member servers of groups are
    watched at any nesting depth and follow scaling and updates. Creating
    the resource fails unless a heat-health-engine confirms it watches the
    policy.
    """

    support_status = support.SupportStatus(version='27.0.0')

    def validate(self):
        super(HealthPolicy, self).validate()
        self._validate_targets()
        self._validate_detection()
        self._validate_recovery()
        self._validate_workflows(at_validation=True)

    def _validate_workflows(self, at_validation=False):
        """Each workflow rung's workflow exists and the user may run it.

        Asked of Mistral as the user creating or updating the stack, in
        whose project the executions will run (through the stack's
        trust): Mistral shows a project its own workflows and public
        ones, never another project's private ones.
        """
        # A name from another resource (an OS::Mistral::Workflow of the
        # same template) is known only once that one is created: checked
        # then, before the policy is registered.
        later = self._named_by_resources() if at_validation else set()
        rungs = [(index, action) for index, action in enumerate(
            self.properties[self.RECOVERY][self.RECOVERY_ACTIONS] or [])
            if action.get(self.ACTION_TYPE) == self.MISTRAL_WORKFLOW]
        if not rungs:
            return
        plugin = self.client_plugin('mistral')
        if not plugin.does_endpoint_exist(plugin.WORKFLOW_V2, 'mistral'):
            self._invalid(_('recovery action %(n)d is a %(t)s, but this '
                            'cloud has no Mistral: no %(s)s service in '
                            'the Keystone catalog. Remove the rung, or '
                            'use a WEBHOOK rung instead') % {
                'n': rungs[0][0] + 1, 't': self.MISTRAL_WORKFLOW,
                's': plugin.WORKFLOW_V2},
                self.RECOVERY, self.RECOVERY_ACTIONS, rungs[0][0])
        if later is None:
            return
        rungs = [(i, a) for i, a in rungs if i not in later]
        for index, action in rungs:
            name = action[self.ACTION_NAME]
            try:
                plugin.get_workflow_by_identifier(name)
            except exception.EntityNotFound:
                self._invalid(_('workflow "%(w)s" cannot be run by project '
                                '%(p)s: Mistral shows it no workflow of '
                                'that name or id (a private workflow of '
                                'another project is not shown)') % {
                    'w': name, 'p': self.context.project_id},
                    self.RECOVERY, self.RECOVERY_ACTIONS, index,
                    self.ACTION_NAME)

    # Registration

    def _spec(self):
        return {key: self.properties[key] for key in self.PROPERTIES}

    def _register(self, new=False):
        """Register (again) with heat-health-engine, or fail.

        :param new: the policy was never registered: if no engine confirms
            in time, whatever a late engine may still store is removed.
        """
        client = rpc_client.RegistryClient()
        policy = {'id': self.resource_id, 'stack_id': self.stack.id,
                  'resource_name': self.name, 'spec': self._spec(),
                  'enabled': self.properties[self.ENABLED]}
        try:
            answer = client.register_policy(self.context, policy)
        except oslo_messaging.MessagingTimeout:
            answer = {'expired': True}
        if answer.get('expired'):
            if new:
                policy_object.Policy.delete(self.resource_id)
            raise exception.Error(
                _('no heat-health-engine confirmed the registration of '
                  'policy %(id)s within %(t)s s: is heat-health-engine '
                  'running?') % {'id': self.resource_id,
                                 't': client.timeout})
        if answer.get('missing'):
            raise exception.Error(
                _('targets not found in stack %(stack)s: %(names)s') %
                {'stack': self.stack.name,
                 'names': ', '.join(answer['missing'])})
        LOG.info('Health policy %(id)s watched by heat-health-engine '
                 '%(engine)s: %(n)d servers',
                 {'id': self.resource_id, 'engine': answer['engine_id'],
                  'n': len(answer['targets'])})
        return answer

    def handle_create(self):
        self._validate_workflows()
        self.resource_id_set(str(uuid.uuid4()))
        self._register(new=True)

    def handle_update(self, json_snippet, tmpl_diff, prop_diff):
        if prop_diff:
            self.properties = json_snippet.properties(self.properties_schema,
                                                      self.context)
            self._validate_workflows()
            self._register()

    def _set_suspended(self, suspended):
        """Tell heat-health-engine the stack is suspended or resumed.

        Heat suspends this resource before the servers it watches (they
        are its dependencies) and resumes it after them, so servers that
        a suspend stops are never taken for failures.
        """
        if self.resource_id is None:
            return
        try:
            rpc_client.RegistryClient().set_policy_suspended(
                self.context, self.resource_id, suspended)
        except oslo_messaging.MessagingTimeout:
            LOG.warning('No heat-health-engine answered; storing the '
                        'suspension of health policy %s directly',
                        self.resource_id)
            policy_object.Policy.set_suspended(self.resource_id, suspended)

    def handle_suspend(self):
        self._set_suspended(True)

    def handle_resume(self):
        self._set_suspended(False)

    def handle_delete(self):
        """Unregister; if no engine answers, delete the rows ourselves.

        A deleted policy must never stay registered, and deleting a stack
        must not depend on heat-health-engine being up: the rows are in
        Heat's database, which heat-engine reaches too. A live engine that
        still owned the policy drops it at its next claim.
        """
        if self.resource_id is None:
            return
        try:
            rpc_client.RegistryClient().unregister_policy(self.context,
                                                          self.resource_id)
        except oslo_messaging.MessagingTimeout:
            LOG.warning('No heat-health-engine answered the unregistration '
                        'of health policy %s; deleting its registry rows '
                        'directly', self.resource_id)
            policy_object.Policy.delete(self.resource_id)

    # Attributes

    def _resolve_attribute(self, name):
        if self.resource_id is None:
            return None
        policy = policy_object.Policy.get(self.resource_id)
        if policy is None:
            return None
        targets = target_object.Target.get_all(policy.id)
        if name == self.STATUS_ATTR:
            counts = {}
            for target in targets:
                counts[target.state] = counts.get(target.state, 0) + 1
            return {
                'enabled': policy.enabled,
                'suspended': policy.suspended,
                'engine_id': policy.engine_id,
                'lease_expires_at': (policy.lease_expires_at and
                                     policy.lease_expires_at.isoformat()),
                'observed_through': (policy.observed_through and
                                     policy.observed_through.isoformat()),
                'targets': len(targets),
                'states': counts,
            }
        if name == self.WEBHOOK_SECRET_ATTR:
            return webhook_signature.policy_secret(policy.id)
        if name == self.MEMBERS_ATTR:
            return [{
                'server_id': t.server_id,
                'server_name': t.server_name,
                'path': t.path,
                'stack_id': t.stack_id,
                'resource_name': t.resource_name,
                'state': t.state,
                'reason': t.state_reason,
                'observation': t.observation,
                'source': t.observation_source,
                'observed_at': t.observed_at and t.observed_at.isoformat(),
            } for t in targets]


def resource_mapping():
    return {'OS::Heat::HealthPolicy': HealthPolicy}
