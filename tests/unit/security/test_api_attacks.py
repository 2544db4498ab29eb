"""Attacks on heat-health's API, through Heat's pipeline to the real engine.

Each test is one finding of the hostile-tenant review, answered as Heat
answers: refused before authentication, another project's stack told apart
from an unknown one by nothing, out-of-range input a 400 that says why.
"""

import json
import uuid

from heat.common import exception
from heat.common import template_format
from heat.engine import stack as heat_stack
from heat.engine import template
from heat.tests import utils

from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.objects import policy as policy_object
from tests.unit.security import api_pipeline

TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Heat::TestResource
    properties:
      value: web
'''
VICTIM = 'victim-project'
ATTACKER = 'attacker-project'
POLICY_ID = 'b1c2d3e4-0000-4000-8000-000000000001'


def create_stack(ctx, name='web'):
    stack = heat_stack.Stack(ctx, name, template.Template(
        template_format.parse(TEMPLATE)))
    stack.store()
    stack.create()
    return stack


def add_policy(stack, project, policy_id=POLICY_ID):
    with db_session.facade.writer.using(db_session.Session()) as session:
        session.add(models.Policy(
            id=policy_id, stack_id=stack.id, resource_name='health',
            project_id=project, enabled=True, generation=1,
            spec={'detection': {'interval': 5, 'detection_modes': [
                {'type': 'NODE_STATUS_POLLING'}]}}))
    db_api.event_add([{'policy_id': policy_id, 'server_id': 'srv-1',
                       'old_state': 'HEALTHY', 'new_state': 'UNHEALTHY',
                       'reason': 'the victim is down', 'source': 'test'}])


class VictimTestCase(api_pipeline.PipelineTestCase):
    """A victim project's stack, with a health policy and an event."""

    def setUp(self):
        super(VictimTestCase, self).setUp()
        self.victim_ctx = utils.dummy_context(tenant_id=VICTIM,
                                              user_id='victim-user')
        self.victim = create_stack(self.victim_ctx)
        add_policy(self.victim, VICTIM)

    def victim_state(self):
        rsrc = heat_stack.Stack.load(self.victim_ctx,
                                     stack_id=self.victim.id)['web']
        policy = policy_object.Policy.get(POLICY_ID)
        return (rsrc.action, rsrc.status, rsrc.status_reason,
                policy.paused_at, policy.suspended)

    def routes(self, project, stack_id, name='web'):
        """Every heat-health route, by full path and by id alone."""
        full = '/v1/%s/stacks/%s/%s' % (project, name, stack_id)
        short = '/v1/%s/stacks/%s' % (project, stack_id)
        mark = json.dumps({'mark_unhealthy': True,
                           'resource_status_reason': 'pwned'})
        return [('PATCH', full + '/resources/web', mark),
                ('GET', full + '/health', None),
                ('GET', full + '/health/events', None),
                ('POST', full + '/health/pause', '{}'),
                ('POST', full + '/health/resume', '{}'),
                ('GET', short + '/health', None),
                ('GET', short + '/health/events', None),
                ('POST', short + '/health/pause', '{}'),
                ('POST', short + '/health/resume', '{}')]

    def answer(self, method, path, body, **kwargs):
        resp = self.request(method, path, body, **kwargs)
        return resp.status_int, json.loads(resp.body)


class TestAuthenticationFirst(VictimTestCase):
    """Finding 3: the filter sat before custombackendauth and faultwrap."""

    def test_headers_without_authentication_reach_nothing(self):
        before = self.victim_state()
        for method, path, body in self.routes(VICTIM, self.victim.id):
            resp = self.request(method, path, body, project=VICTIM,
                                roles=('admin', 'member', 'reader'),
                                token='forged')
            self.assertEqual(401, resp.status_int, path)
            self.assertIn(b'Backend authentication failed', resp.body)
        self.assertEqual(before, self.victim_state())

    def test_filter_errors_are_rendered_by_faultwrap(self):
        status, body = self.answer(
            'PATCH', '/v1/%s/stacks/web/%s/resources/web'
            % (VICTIM, self.victim.id), '{"mark_unhealthy": "maybe"}',
            project=VICTIM)
        self.assertEqual(400, status)
        self.assertEqual('HTTPBadRequest', body['error']['type'])
        self.assertIn('acceptable values are: true, false',
                      body['error']['message'])


class TestAnotherProjectsStack(VictimTestCase):
    """Finding 9: another project's stack id answered 403, an unknown 404.

    Heat's own routes (measured on a deployment): another project's stack
    under the caller's own project is "The Stack (<name or id>) could not be
    found." (404), exactly as an unknown id; any stack under another
    project's id in the path is Heat's plain 403.
    """

    def test_answered_exactly_as_an_unknown_stack(self):
        unknown = str(uuid.uuid4())
        before = self.victim_state()
        for (method, path, body), (_m, unknown_path, _b) in zip(
                self.routes(ATTACKER, self.victim.id),
                self.routes(ATTACKER, unknown)):
            status, answer = self.answer(method, path, body,
                                         project=ATTACKER)
            self.assertEqual(404, status, path)
            self.assertEqual('EntityNotFound', answer['error']['type'])
            self.assertIn(answer['error']['message'], (
                'The Stack (web) could not be found.',
                'The Stack (%s) could not be found.' % self.victim.id))
            unknown_status, unknown_answer = self.answer(
                method, unknown_path, body, project=ATTACKER)
            self.assertEqual(
                (status, json.dumps(answer).replace(self.victim.id, 'ID')),
                (unknown_status,
                 json.dumps(unknown_answer).replace(unknown, 'ID')))
        self.assertEqual(before, self.victim_state())

    def test_victims_project_in_the_path_is_heats_plain_403(self):
        heat_403 = {'type': 'HTTPForbidden', 'traceback': None,
                    'message': 'Access was denied to this resource.'}
        for stack_id in (self.victim.id, str(uuid.uuid4())):
            for method, path, body in self.routes(VICTIM, stack_id):
                status, answer = self.answer(method, path, body,
                                             project=ATTACKER)
                self.assertEqual((403, heat_403), (status, answer['error']),
                                 path)

    def test_policy_refusal_is_heats_enforcers_403(self):
        status, answer = self.answer(
            'POST', '/v1/%s/stacks/web/%s/health/pause'
            % (VICTIM, self.victim.id), '{}', project=VICTIM,
            roles=('reader',))
        self.assertEqual((403, 'Forbidden',
                          'You are not authorized to use health:pause.'),
                         (status, answer['error']['type'],
                          answer['error']['message']))

    def test_the_owner_still_gets_its_answers(self):
        for method, path, body in self.routes(VICTIM, self.victim.id):
            status, answer = self.answer(method, path, body, project=VICTIM)
            self.assertEqual(200, status, (path, answer))


class TestTimelineQuery(VictimTestCase):
    """Finding 8: a time past the calendar's end once made UTC was a 500."""

    def _events(self, query):
        return self.answer('GET', '/v1/%s/stacks/web/%s/health/events?%s'
                           % (VICTIM, self.victim.id, query), None,
                           project=VICTIM)

    def test_out_of_range_values_are_400_with_a_message(self):
        for query, words in [
                ('since=9999-12-31T23:00:00-05:00', 'out of range'),
                ('since=0001-01-01T00:00:00%2B05:00', 'out of range'),
                ('since=2026-02-30', 'ISO 8601'),
                ('since=%00', 'ISO 8601'),
                ('since=' + '9' * 5000, 'ISO 8601'),
                ('marker=' + '9' * 30, 'from 0 to 9223372036854775807'),
                ('marker=' + '9' * 5000, 'must be an integer'),
                ('marker=1e3', 'must be an integer'),
                ('limit=-1', 'from 1 to 1000'),
                ('limit=%E2%85%A0', 'must be an integer')]:
            status, answer = self._events(query)
            self.assertEqual(400, status, query)
            self.assertIn(words, answer['error']['message'], query)

    def test_in_range_values_answer(self):
        status, answer = self._events(
            'since=9999-12-31T23:00:00%2B05:00&marker=9223372036854775807'
            '&limit=1000')
        self.assertEqual((200, []), (status, answer['events']))
        status, answer = self._events('since=2000-01-01T00:00:00Z&limit=1')
        self.assertEqual(['the victim is down'],
                         [e['reason'] for e in answer['events']])


class TestMarkReasonLimit(VictimTestCase):
    """Finding 10: a reason over 64 KiB was accepted, then failed (500)."""

    def _mark(self, reason):
        return self.answer(
            'PATCH', '/v1/%s/stacks/web/%s/resources/web'
            % (VICTIM, self.victim.id),
            json.dumps({'mark_unhealthy': True,
                        'resource_status_reason': reason}), project=VICTIM)

    def test_longer_than_a_text_column_is_refused_saying_the_limit(self):
        before = self.victim_state()
        status, answer = self._mark('\u20ac' * 21846)
        self.assertEqual(400, status)
        self.assertEqual(
            '"resource_status_reason" is 65538 bytes long in UTF-8, more '
            'than the 65535 a resource status reason holds.',
            answer['error']['message'])
        self.assertEqual(before, self.victim_state())

    def test_the_longest_is_kept_whole(self):
        reason = '\u20ac' * 21845
        self.assertEqual((200, None), self._mark(reason))
        self.assertEqual(('CHECK', 'FAILED', reason),
                         self.victim_state()[:3])


class TestEnginePolicyCalls(VictimTestCase):
    """The engine checks the caller's project on every policy call.

    heat-engine's plugin calls these with the stack's context; a template
    naming another project's policy id (external_id, adopt data) must not
    reach that policy.
    """

    def setUp(self):
        super(TestEnginePolicyCalls, self).setUp()
        self.attacker_ctx = utils.dummy_context(tenant_id=ATTACKER,
                                                user_id='attacker-user')
        self.attacker_stack = create_stack(self.attacker_ctx, 'attack')

    def test_suspend_of_another_projects_policy_is_refused(self):
        self.assertFalse(self.endpoint.set_policy_suspended(
            self.attacker_ctx, POLICY_ID, True))
        self.assertFalse(policy_object.Policy.get(POLICY_ID).suspended)
        self.assertTrue(self.endpoint.set_policy_suspended(
            self.victim_ctx, POLICY_ID, True))
        self.assertTrue(policy_object.Policy.get(POLICY_ID).suspended)

    def test_unregister_of_another_projects_policy_is_refused(self):
        self.assertFalse(self.endpoint.unregister_policy(
            self.attacker_ctx, POLICY_ID))
        self.assertIsNotNone(policy_object.Policy.get(POLICY_ID))

    def test_registering_over_another_projects_policy_is_refused(self):
        error = self.assertRaises(
            exception.EntityNotFound, api_pipeline.unwrap,
            self.endpoint.register_policy, self.attacker_ctx,
            {'id': POLICY_ID, 'stack_id': self.attacker_stack.id,
             'resource_name': 'health', 'spec': {}, 'enabled': True})
        self.assertIn(POLICY_ID, str(error))
        policy = policy_object.Policy.get(POLICY_ID)
        self.assertEqual((self.victim.id, VICTIM),
                         (policy.stack_id, policy.project_id))

    def test_registering_for_another_projects_stack_is_refused(self):
        self.assertRaises(
            exception.EntityNotFound, api_pipeline.unwrap,
            self.endpoint.register_policy, self.attacker_ctx,
            {'id': str(uuid.uuid4()), 'stack_id': self.victim.id,
             'resource_name': 'health', 'spec': {}, 'enabled': True})
        self.assertEqual([POLICY_ID], [
            p.id for p in policy_object.Policy.get_all_by_stack(
                self.victim.id)])

    def test_an_admin_may(self):
        admin = utils.dummy_context(tenant_id='admin-project',
                                    is_admin=True)
        self.assertTrue(self.endpoint.set_policy_suspended(
            admin, POLICY_ID, True))
        self.assertTrue(self.endpoint.unregister_policy(admin, POLICY_ID))
        self.assertIsNone(policy_object.Policy.get(POLICY_ID))
