"""OS::Heat::HealthPolicy: validation and lifecycle with a fake registry."""

import copy
from unittest import mock

from heat.common import exception
from heat.common import template_format
from heat.engine import resource
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.tests import utils
from oslo_config import cfg
import oslo_messaging

from heat_health.objects import policy as policy_object
from heat_health.policy import spec as policy_spec
from heat_health.resources import health_policy
from heat_health.rpc import client as rpc_client
from tests.unit import base

TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.small
  other:
    type: OS::Heat::TestResource
  policy:
    type: OS::Heat::HealthPolicy
    properties:
      targets: [web]
      detection:
        interval: 10
        detection_modes:
          - type: NODE_STATUS_POLLING
'''


class HealthPolicyTestCase(base.HeatHealthTestCase):

    def setUp(self):
        super(HealthPolicyTestCase, self).setUp()
        resource._register_class('OS::Heat::HealthPolicy',
                                 health_policy.HealthPolicy)
        self.ctx = utils.dummy_context()
        # The engine may fetch the servers' addresses (tenant networks).
        self._networks(['10.0.0.0/8'])

    def _networks(self, networks):
        cfg.CONF.set_override('poll_url_allowed_networks', networks,
                              group='heat_health')
        self.addCleanup(cfg.CONF.clear_override,
                        'poll_url_allowed_networks', group='heat_health')

    def _stack(self, **props):
        tmpl = template_format.parse(TEMPLATE)
        policy = tmpl['resources']['policy']['properties']
        for key, value in props.items():
            if value is None:
                policy.pop(key, None)
            else:
                policy[key] = value
        return heat_stack.Stack(self.ctx, 'test', template.Template(tmpl))

    def _invalid(self, **props):
        stack = self._stack(**props)
        err = self.assertRaises(exception.StackValidationFailed,
                                stack['policy'].validate)
        return str(err)

    def _poll_url(self, **options):
        return {'detection_modes': [{'type': 'NODE_STATUS_POLL_URL',
                                     'options': options}]}

    def test_valid(self):
        stack = self._stack()
        self.assertIsNone(stack['policy'].validate())
        detection = stack['policy'].properties['detection']
        self.assertEqual(10, detection['interval'])
        self.assertEqual(300, detection['node_update_timeout'])
        self.assertEqual('ANY_FAILED', detection['recovery_conditional'])
        self.assertEqual('HEAL', stack['policy'].properties['recovery'][
            'mode'])

    def test_valid_poll_url(self):
        stack = self._stack(detection=self._poll_url(
            poll_url='http://{ip}:8080/health?name={name}&id={id}',
            poll_url_healthy_response='OK'))
        self.assertIsNone(stack['policy'].validate())

    def test_a_poll_url_the_engine_may_never_fetch_is_refused(self):
        """No allowed networks: no server's {ip} is ever polled."""
        self._networks([])
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://{ip}:8080/health'))
        self.assertIn('no [heat_health] poll_url_allowed_networks is '
                      'configured', msg)
        self.assertIn('no server could ever be checked', msg)

    def test_a_poll_url_host_name_not_allowed_is_refused(self):
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://health.example.com/{id}'))
        self.assertIn('health.example.com is a name that is not in '
                      '[heat_health] poll_url_allowed_hosts', msg)

    def test_a_poll_url_address_outside_the_networks_is_refused(self):
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://192.168.1.5/{id}'))
        self.assertIn('192.168.1.5 port 80 is not in [heat_health] '
                      'poll_url_allowed_networks', msg)

    def test_poll_url_missing(self):
        msg = self._invalid(detection=self._poll_url())
        self.assertIn('poll_url is required', msg)
        self.assertIn('detection_modes[0].options', msg)

    def test_poll_url_unknown_variable(self):
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://{ip}/{host}/{port}'))
        self.assertIn('not {host}, {port}', msg)
        self.assertIn('poll_url', msg)

    def test_poll_url_scheme(self):
        msg = self._invalid(detection=self._poll_url(poll_url='ftp://{ip}'))
        self.assertIn('must be an http:// or https:// URL', msg)

    def test_empty_healthy_response(self):
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://{ip}/', poll_url_healthy_response=''))
        self.assertIn('poll_url_healthy_response must not be empty', msg)

    def test_poll_url_that_can_never_be_fetched_is_named_at_validation(self):
        for url, why in [('http://user:secret@{ip}/health', 'credentials'),
                         ('http://169.254.169.254\\@{ip}/', 'backslash'),
                         ('http://[::1/health', 'host')]:
            msg = self._invalid(detection=self._poll_url(poll_url=url))
            self.assertIn('poll_url', msg)
            self.assertNotIn('secret', msg)
            self.assertIn(why, msg.lower())

    def test_valid_poll_url_without_pattern(self):
        stack = self._stack(detection=self._poll_url(
            poll_url='http://{ip}:8080/health'))
        self.assertIsNone(stack['policy'].validate())

    def test_bad_regex(self):
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://{ip}/', poll_url_healthy_response='(ok'))
        self.assertIn('poll_url_healthy_response is not a pattern RE2 can '
                      'match in linear time', msg)
        self.assertIn('missing )', msg)
        self.assertIn('poll_url_healthy_response', msg.split(':')[0])

    def test_backreference_is_refused(self):
        msg = self._invalid(detection=self._poll_url(
            poll_url='http://{ip}/', poll_url_healthy_response=r'(ok)\1'))
        self.assertIn('not a pattern RE2 can match in linear time', msg)
        self.assertIn('backreferences and lookaround are not supported',
                      msg)

    def test_lookaround_is_refused(self):
        for pattern in (r'ok(?!ay)', r'(?<=status: )ok'):
            msg = self._invalid(detection=self._poll_url(
                poll_url='http://{ip}/', poll_url_healthy_response=pattern))
            self.assertIn('not a pattern RE2 can match in linear time', msg)

    def test_re2_syntax_is_accepted(self):
        stack = self._stack(detection=self._poll_url(
            poll_url='http://{ip}/',
            poll_url_healthy_response=r'(?i)^status: (ok|up)\b'))
        self.assertIsNone(stack['policy'].validate())

    def test_lb_status_polling_needs_a_load_balancer(self):
        msg = self._invalid(detection={'detection_modes': [
            {'type': 'NODE_STATUS_POLLING'}, {'type': 'LB_STATUS_POLLING'}]})
        self.assertIn('LB_STATUS_POLLING reads the pool of an '
                      'OS::Heat::LoadBalancer of this stack, and this stack '
                      'has none', msg)
        self.assertIn('detection_modes[1].type', msg)

    def test_lb_status_polling_names_a_load_balancer(self):
        msg = self._invalid(detection={'detection_modes': [
            {'type': 'LB_STATUS_POLLING',
             'options': {'loadbalancer': 'web'}}]})
        self.assertIn('loadbalancer "web" is not an OS::Heat::LoadBalancer '
                      'of this stack', msg)
        self.assertIn('detection_modes[0].options.loadbalancer', msg)

    def test_loadbalancer_option_on_other_mode(self):
        msg = self._invalid(detection={'detection_modes': [
            {'type': 'NODE_STATUS_POLLING',
             'options': {'loadbalancer': 'lb'}}]})
        self.assertIn('the loadbalancer option applies only to detection '
                      'mode LB_STATUS_POLLING', msg)

    def test_poll_url_option_on_other_mode(self):
        msg = self._invalid(detection={'detection_modes': [
            {'type': 'NODE_STATUS_POLLING',
             'options': {'poll_url': 'http://{ip}/'}}]})
        self.assertIn('apply only to detection mode NODE_STATUS_POLL_URL',
                      msg)

    def test_duplicate_modes(self):
        msg = self._invalid(detection={'detection_modes': [
            {'type': 'LIFECYCLE_EVENTS'}, {'type': 'LIFECYCLE_EVENTS'}]})
        self.assertIn('detection mode LIFECYCLE_EVENTS is listed twice', msg)

    def test_unknown_mode(self):
        msg = self._invalid(detection={'detection_modes': [
            {'type': 'GUESS'}]})
        self.assertIn('GUESS', msg)

    def test_interval_range(self):
        msg = self._invalid(detection={'interval': 1})
        self.assertIn('interval', msg)
        self.assertIn('5', msg)

    def test_waits_and_concurrency_have_maxima(self):
        msg = self._invalid(recovery={'node_delete_timeout': 601})
        self.assertIn('node_delete_timeout', msg)
        self.assertIn('600', msg)
        msg = self._invalid(recovery={'max_concurrent': 21})
        self.assertIn('max_concurrent', msg)
        self.assertIn('20', msg)
        stack = self._stack(recovery={'node_delete_timeout': 600,
                                      'max_concurrent': 20})
        self.assertIsNone(stack['policy'].validate())

    def test_stored_values_above_the_maxima_are_read_as_them(self):
        spec = policy_spec.PolicySpec.parse({'recovery': {
            'node_delete_timeout': 3600, 'max_concurrent': 1000}})
        self.assertEqual((600, 20), (spec.recovery.node_delete_timeout,
                                     spec.recovery.max_concurrent))

    def test_target_not_in_stack(self):
        msg = self._invalid(targets=['nothere'])
        self.assertIn('target "nothere" is not a resource of this stack',
                      msg)

    def test_target_wrong_type(self):
        msg = self._invalid(targets=['other'])
        self.assertIn('target "other" is a OS::Heat::TestResource', msg)

    def test_target_twice(self):
        msg = self._invalid(targets=['web', 'web'])
        self.assertIn('listed twice', msg)

    def test_no_targets(self):
        msg = self._invalid(targets=[])
        self.assertIn('targets', msg)

    def test_backoff_order(self):
        msg = self._invalid(recovery={'backoff_initial': 100,
                                      'backoff_max': 10})
        self.assertIn('backoff_initial (100) is larger than backoff_max',
                      msg)

    def test_recovery_action_name(self):
        msg = self._invalid(recovery={'actions': [{'name': 'PRAY'}]})
        self.assertIn('PRAY', msg)

    def test_launch_before_terminate_is_a_recreate_choice(self):
        stack = self._stack(recovery={'actions': [
            {'name': 'RECREATE',
             'params': {'launch_before_terminate': True}}]})
        self.assertIsNone(stack['policy'].validate())
        msg = self._invalid(recovery={'actions': [
            {'name': 'REBOOT', 'params': {'launch_before_terminate': True}}]})
        self.assertIn('REBOOT takes no parameter launch_before_terminate',
                      msg)
        msg = self._invalid(recovery={'fencing': ['COMPUTE'], 'actions': [
            {'name': 'RECREATE',
             'params': {'launch_before_terminate': True}}]})
        self.assertIn('launch_before_terminate keeps the old server serving',
                      msg)

    def test_evacuate_needs_an_action_after_it(self):
        stack = self._stack(recovery={'actions': [
            {'name': 'EVACUATE'}, {'name': 'RECREATE'}]})
        self.assertIsNone(stack['policy'].validate())
        msg = self._invalid(recovery={'actions': [
            {'name': 'REBOOT'}, {'name': 'EVACUATE'}]})
        self.assertIn('EVACUATE heals only servers whose host is down', msg)

    def test_outside_rungs_as_text(self):
        msg = self._invalid(recovery={'actions': [
            {'type': 'MISTRAL_WORKFLOW'}]})
        self.assertIn('a MISTRAL_WORKFLOW rung names its workflow', msg)
        msg = self._invalid(recovery={'actions': [{'type': 'WEBHOOK'}]})
        self.assertIn('a WEBHOOK rung needs its url', msg)
        msg = self._invalid(recovery={'actions': [
            {'type': 'WEBHOOK', 'url': 'ftp://x/y'}]})
        self.assertIn('is not http or https', msg)
        msg = self._invalid(recovery={'actions': [
            {'type': 'WEBHOOK', 'url': 'http://x/y',
             'params': {'id': '{{ server.uuid }}'}}]})
        self.assertIn('unknown variables server.uuid', msg)
        msg = self._invalid(recovery={'actions': [
            {'name': 'REBOOT', 'url': 'http://x/y'}]})
        self.assertIn('url is only for a WEBHOOK rung', msg)
        msg = self._invalid(recovery={'actions': [{'params': {}}]})
        self.assertIn('an action needs a name', msg)
        msg = self._invalid(recovery={'actions': [{'name': 'reattach'}]})
        self.assertIn('a workflow needs type: MISTRAL_WORKFLOW', msg)
        # A webhook's params are its own: even a key named type.
        stack = self._stack(recovery={'actions': [
            {'name': 'REBOOT', 'params': {'type': 'HARD'}},
            {'type': 'WEBHOOK', 'url': 'http://x/y',
             'params': {'type': 'page', 'who': '{{ server.name }}'}}]})
        self.assertIsNone(stack['policy'].validate())

    def _with_mistral(self, endpoint=True, workflows=('reattach',)):
        plugin = mock.Mock(WORKFLOW_V2='workflowv2')
        plugin.does_endpoint_exist.return_value = endpoint

        def get(name):
            if name not in workflows:
                raise exception.EntityNotFound(entity='Workflow', name=name)
            return mock.Mock()
        plugin.get_workflow_by_identifier.side_effect = get
        patcher = mock.patch.object(health_policy.HealthPolicy,
                                    'client_plugin', return_value=plugin)
        patcher.start()
        self.addCleanup(patcher.stop)
        return plugin

    def test_a_workflow_rung_needs_mistral_and_the_workflow(self):
        rungs = {'actions': [{'name': 'REBOOT'}, {
            'name': 'reattach', 'type': 'MISTRAL_WORKFLOW',
            'params': {'server': '{{ server.id }}'}}]}
        plugin = self._with_mistral()
        stack = self._stack(recovery=rungs)
        self.assertIsNone(stack['policy'].validate())
        plugin.get_workflow_by_identifier.assert_called_once_with(
            'reattach')
        plugin.does_endpoint_exist.return_value = False
        msg = self._invalid(recovery=rungs)
        self.assertIn('recovery action 2 is a MISTRAL_WORKFLOW, but this '
                      'cloud has no Mistral', msg)
        plugin.does_endpoint_exist.return_value = True
        rungs['actions'][1]['name'] = 'theirs'
        msg = self._invalid(recovery=rungs)
        self.assertIn('workflow "theirs" cannot be run by project', msg)

    def test_a_workflow_named_by_another_resource_is_checked_at_create(self):
        plugin = self._with_mistral(workflows=())
        stack = self._stack(recovery={'actions': [
            {'name': {'get_resource': 'other'},
             'type': 'MISTRAL_WORKFLOW'}]})
        # Before "other" exists its name is not the workflow's.
        self.assertIsNone(stack['policy'].validate())
        plugin.get_workflow_by_identifier.assert_not_called()
        plugin.does_endpoint_exist.assert_called_once()
        # Creating the policy, once "other" is created, asks Mistral.
        self.assertRaises(exception.StackValidationFailed,
                          stack['policy']._validate_workflows)
        plugin.get_workflow_by_identifier.assert_called_once_with('other')

    def test_depends_on_targets(self):
        stack = self._stack()
        self.assertIn(stack['policy'],
                      list(stack.dependencies.required_by(stack['web'])))


class HealthPolicyLifecycleTestCase(base.HeatHealthTestCase):
    """The resource against a fake registry client, our tables in sqlite."""

    TMPL = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
  policy:
    type: OS::Heat::HealthPolicy
    properties:
      targets: [web]
'''

    def setUp(self):
        super(HealthPolicyLifecycleTestCase, self).setUp()
        self.setup_health_db()
        resource._register_class('OS::Heat::HealthPolicy',
                                 health_policy.HealthPolicy)
        # OS::Heat::TestResource stands in for a server in these tests.
        self.patchobject(health_policy.HealthPolicy, '_validate_targets')
        self.client = mock.Mock(timeout=10)
        self.client.register_policy.side_effect = self._register
        self.patchobject(rpc_client, 'RegistryClient',
                         return_value=self.client)
        self.ctx = utils.dummy_context()

    def _register(self, ctxt, policy):
        policy_object.Policy.create_or_update(dict(
            copy.deepcopy(policy), project_id=ctxt.project_id,
            engine_id='engine-1'))
        return {'policy_id': policy['id'], 'engine_id': 'engine-1',
                'targets': [], 'missing': []}

    def _create(self):
        stack = heat_stack.Stack(self.ctx, 'test', template.Template(
            template_format.parse(self.TMPL)))
        stack.store()
        stack.create()
        return stack

    def test_create_registers(self):
        stack = self._create()
        self.assertEqual((stack.CREATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        policy = stack['policy']
        record = policy_object.Policy.get(policy.resource_id)
        self.assertEqual(['web'], record.spec['targets'])
        self.assertEqual(stack.id, record.stack_id)
        status = policy.FnGetAtt('status')
        self.assertEqual('engine-1', status['engine_id'])
        self.assertEqual(0, status['targets'])
        self.assertEqual([], policy.FnGetAtt('members'))

    def test_create_fails_without_engine(self):
        self.client.register_policy.side_effect = (
            oslo_messaging.MessagingTimeout())
        stack = self._create()
        self.assertEqual((stack.CREATE, stack.FAILED), stack.state)
        self.assertIn('no heat-health-engine confirmed the registration',
                      stack.status_reason)
        self.assertIn('is heat-health-engine running?', stack.status_reason)

    def test_registration_stored_too_late_is_removed(self):
        def late(ctxt, policy):
            # An engine that stored the policy as the caller gave up.
            self._register(ctxt, policy)
            raise oslo_messaging.MessagingTimeout()
        self.client.register_policy.side_effect = late
        stack = self._create()
        self.assertEqual((stack.CREATE, stack.FAILED), stack.state)
        self.assertIsNone(policy_object.Policy.get(
            stack['policy'].resource_id))

    def test_registration_answered_expired_fails(self):
        self.client.register_policy.side_effect = (
            lambda ctxt, policy: {'policy_id': policy['id'],
                                  'expired': True})
        stack = self._create()
        self.assertEqual((stack.CREATE, stack.FAILED), stack.state)
        self.assertIn('no heat-health-engine confirmed the registration',
                      stack.status_reason)

    def test_update_enabled_registers_again(self):
        stack = self._create()
        tmpl = template_format.parse(self.TMPL)
        tmpl['resources']['policy']['properties']['enabled'] = False
        updated = heat_stack.Stack(self.ctx, 'test',
                                   template.Template(tmpl))
        stack.update(updated)
        self.assertEqual((stack.UPDATE, stack.COMPLETE), stack.state,
                         stack.status_reason)
        self.assertEqual(2, self.client.register_policy.call_count)
        policy = self.client.register_policy.call_args[0][1]
        self.assertFalse(policy['enabled'])
        self.assertFalse(policy['spec']['enabled'])

    def test_delete_unregisters(self):
        stack = self._create()
        policy_id = stack['policy'].resource_id
        stack.delete()
        self.client.unregister_policy.assert_called_once_with(
            mock.ANY, policy_id)

    def test_delete_without_engine_removes_rows(self):
        stack = self._create()
        policy_id = stack['policy'].resource_id
        self.client.unregister_policy.side_effect = (
            oslo_messaging.MessagingTimeout())
        stack.delete()
        self.assertEqual((stack.DELETE, stack.COMPLETE), stack.state)
        self.assertIsNone(policy_object.Policy.get(policy_id))
