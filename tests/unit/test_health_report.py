"""GET .../health: the paste filter's rule and the engine's report."""

import datetime
import json

from heat.api.middleware import fault
from heat.common import context
from heat.common import exception
from heat.tests import utils
import oslo_messaging
from oslo_utils import timeutils
import sqlalchemy
import webob

from heat_health.api import middleware
from heat_health.common import policies
from heat_health.db import api as db_api
from heat_health.db import models
from heat_health.db import session as db_session
from heat_health.engine import pausing
from tests.unit import base
from tests.unit import test_engine_endpoint

PATH = '/v1/p1/stacks/web/5d6f/health'


class FakeReportRPC(object):
    def __init__(self):
        self.calls = []
        self.error = None

    def health_report(self, ctxt, identity):
        self.calls.append(identity)
        if self.error:
            raise self.error
        return {'stack_id': identity['stack_id'], 'policies': [],
                'events': []}


class TestReportRoute(base.HeatHealthTestCase):

    def setUp(self):
        super(TestReportRoute, self).setUp()
        self.mock_find_file.return_value = None
        self.rpc = FakeReportRPC()
        self.filter = middleware.HealthMiddleware(None)
        self.filter._rpc = self.rpc
        self.app = fault.FaultWrapper(self.filter)

    def _get(self, path=PATH, roles=('reader',), project='p1'):
        req = webob.Request.blank(path, method='GET')
        req.context = context.RequestContext(
            project_id=project, user_id='u1', roles=list(roles))
        return req.get_response(self.app)

    def test_reader_of_the_project_gets_the_report(self):
        resp = self._get()
        self.assertEqual(200, resp.status_int, resp.body)
        self.assertEqual('5d6f', json.loads(resp.body)['health']['stack_id'])
        self.assertEqual(('p1', 'web', '5d6f'),
                         (self.rpc.calls[0]['tenant'],
                          self.rpc.calls[0]['stack_name'],
                          self.rpc.calls[0]['stack_id']))

    def test_other_project_is_403(self):
        resp = self._get(project='p2')
        self.assertEqual(403, resp.status_int)
        self.assertEqual([], self.rpc.calls)

    def test_without_reader_role_is_403(self):
        resp = self._get(roles=('heat_stack_user',))
        self.assertEqual(403, resp.status_int)
        self.assertIn('health:show', json.loads(resp.body)['error']['message'])
        self.assertEqual([], self.rpc.calls)

    def test_unknown_stack_is_404(self):
        self.rpc.error = exception.EntityNotFound(entity='Stack', name='web')
        self.assertEqual(404, self._get().status_int)

    def test_engine_silent_is_503(self):
        self.rpc.error = oslo_messaging.MessagingTimeout()
        self.assertEqual(503, self._get().status_int)

    def test_rules_are_documented(self):
        show, pause = policies.list_rules()
        self.assertEqual(('health:show',
                          'role:reader and project_id:%(project_id)s'),
                         (show.name, show.check_str))
        self.assertEqual(('health:pause',
                          'role:member and project_id:%(project_id)s'),
                         (pause.name, pause.check_str))
        self.assertEqual({'POST'}, {o['method'] for o in pause.operations})
        for rule in (show, pause):
            self.assertEqual(['project'], rule.scope_types)


class TestEngineReport(test_engine_endpoint.StackTestCase):

    def _report(self, stack, ctx=None):
        try:
            return self.endpoint.health_report(ctx or self.ctx,
                                               dict(stack.identifier()))
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]

    def test_policies_targets_and_events(self):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Policy(
                id='pol-1', stack_id=self.top.id, resource_name='health',
                project_id='tenant-1', enabled=True, engine_id='e-1',
                lease_expires_at=(timeutils.utcnow() +
                                  datetime.timedelta(minutes=5)),
                generation=3,
                spec={'detection': {'interval': 5,
                                    'recovery_conditional': 'ANY_FAILED',
                                    'detection_modes': [
                                        {'type': 'NODE_STATUS_POLLING'}]}}))
            session.flush()
            session.add(models.Target(
                policy_id='pol-1', server_id='srv-1', stack_id=self.top.id,
                resource_name='web', path='web', state='HEALTHY'))
        # Stored as the owning engine's tracker stores a change.
        done = db_api.target_transition('e-1', [{
            'target': {'id': 1, 'state': 'UNHEALTHY',
                       'state_reason': 'Nova status SHUTOFF',
                       'state_since': timeutils.utcnow(),
                       'observation': 'UNHEALTHY',
                       'observation_reason': 'Nova status SHUTOFF',
                       'observation_source': 'NODE_STATUS_POLLING',
                       'observed_at': timeutils.utcnow()},
            'old_state': 'HEALTHY', 'server_id': 'srv-1', 'generation': 3,
            'event': {'policy_id': 'pol-1', 'server_id': 'srv-1',
                      'old_state': 'HEALTHY', 'new_state': 'UNHEALTHY',
                      'reason': 'Nova status SHUTOFF',
                      'source': 'NODE_STATUS_POLLING',
                      'created_at': timeutils.utcnow()}}])
        self.assertEqual({1}, done)
        report = self._report(self.top)
        json.dumps(report)
        policy, = report['policies']
        self.assertEqual(('pol-1', 'health', True, False, 'e-1', 3),
                         (policy['id'], policy['resource_name'],
                          policy['enabled'], policy['suspended'],
                          policy['engine_id'], policy['generation']))
        self.assertEqual({'UNHEALTHY': 1}, policy['counts'])
        target, = policy['targets']
        self.assertEqual(('srv-1', 'web', 'UNHEALTHY', 'Nova status SHUTOFF'),
                         (target['server_id'], target['path'],
                          target['state'], target['reason']))
        self.assertEqual('NODE_STATUS_POLLING',
                         target['last_observation']['source'])
        seen = target['last_observation']['time']
        self.assertEqual(seen, target['last_observation']['still_seen_at'])
        self.assertIsNone(policy['observed_through'])
        # Its owner saw it so again since, and said it with its leases.
        later = timeutils.utcnow() + datetime.timedelta(minutes=3)
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.query(models.Policy).filter_by(id='pol-1').update(
                {'observed_through': later})
        policy, = self._report(self.top)['policies']
        observed = policy['targets'][0]['last_observation']
        self.assertEqual((seen, policy['observed_through']),
                         (observed['time'], observed['still_seen_at']))
        self.assertTrue(policy['observed_through'].startswith(
            later.isoformat()[:19]))
        event, = report['events']
        self.assertEqual(('HEALTHY', 'UNHEALTHY'),
                         (event['old_state'], event['new_state']))

    def test_a_policy_error_is_shown_until_its_owner_clears_it(self):
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Policy(
                id='pol-1', stack_id=self.top.id, resource_name='health',
                project_id='tenant-1', enabled=True, engine_id='e-1',
                generation=3, spec={}))
        why = 'its targets could not be stored: data too long'
        # Only the owner under its generation writes it.
        self.assertFalse(db_api.policy_set_error('e-2', 'pol-1', 3, why))
        self.assertFalse(db_api.policy_set_error('e-1', 'pol-1', 2, why))
        self.assertIsNone(self._report(self.top)['policies'][0]['error'])
        self.assertTrue(db_api.policy_set_error('e-1', 'pol-1', 3, why))
        policy, = self._report(self.top)['policies']
        self.assertEqual(why, policy['error'])
        since = policy['error_since']
        self.assertIsNotNone(since)
        # The same error again keeps its time; a long one is cut.
        db_api.policy_set_error('e-1', 'pol-1', 3, why)
        self.assertEqual(since,
                         self._report(self.top)['policies'][0]['error_since'])
        db_api.policy_set_error('e-1', 'pol-1', 3, 'x' * 5000)
        self.assertEqual('x' * 1024,
                         self._report(self.top)['policies'][0]['error'])
        db_api.policy_set_error('e-1', 'pol-1', 3, None)
        policy, = self._report(self.top)['policies']
        self.assertEqual((None, None), (policy['error'],
                                        policy['error_since']))

    def test_stack_without_policies(self):
        self.assertEqual([], self._report(self.top)['policies'])

    def test_unknown_stack_and_other_project(self):
        identity = dict(self.top.identifier())
        identity['stack_name'] = 'nope'
        self.assertRaises(exception.EntityNotFound, self._call, identity)
        # Heat does not show another project's stack at all.
        other = utils.dummy_context(tenant_id='tenant-2')
        self.assertRaises(exception.EntityNotFound, self._call,
                          dict(self.top.identifier()), other)

    def _call(self, identity, ctx=None):
        try:
            return self.endpoint.health_report(ctx or self.ctx, identity)
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]


class TestEnginePause(test_engine_endpoint.StackTestCase):
    """set_paused and health_events, on the engine's tables."""

    def setUp(self):
        super(TestEnginePause, self).setUp()
        for policy_id, name in (('pol-1', 'health'), ('pol-2', 'watch')):
            with db_session.facade.writer.using(
                    db_session.Session()) as session:
                session.add(models.Policy(
                    id=policy_id, stack_id=self.top.id, resource_name=name,
                    project_id='tenant-1', enabled=True, generation=1,
                    spec={}))
                session.flush()
                session.add(models.Target(
                    policy_id=policy_id, server_id='srv-1',
                    stack_id=self.top.id, resource_name='web', path='web',
                    state='HEALTHY'))
        self.notified = []
        self.patchobject(pausing, 'announce', side_effect=lambda *a:
                         self.notified.append((a[1].id, a[2], a[3], a[4])))

    def _call(self, method, *args, **kwargs):
        try:
            return getattr(self.endpoint, method)(
                self.ctx, *args, stack_identity=dict(self.top.identifier()),
                **kwargs)
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]

    def test_pause_one_policy_is_stored_shown_and_announced(self):
        answer = self._call('set_paused', True, policy='health',
                            reason='kernel upgrade')
        policy, = answer['policies']
        self.assertEqual('health', policy['resource_name'])
        self.assertEqual('kernel upgrade', policy['paused']['reason'])
        self.assertEqual(self.ctx.username, policy['paused']['by'])
        report = self._call('health_report')
        paused = {p['resource_name']: p['paused'] for p in
                  report['policies']}
        self.assertIsNone(paused['watch'])
        self.assertEqual(policy['paused'], paused['health'])
        self.assertEqual([('pol-1', True, self.ctx.username,
                           'kernel upgrade')], self.notified)
        # Pausing again changes nothing and announces nothing.
        self._call('set_paused', True, policy='pol-1', reason='again')
        self.assertEqual(1, len(self.notified))
        self.assertEqual('kernel upgrade', self._call(
            'health_report')['policies'][0]['paused']['reason'])

    def test_resume_without_a_name_resumes_every_policy(self):
        self._call('set_paused', True)
        answer = self._call('set_paused', False)
        self.assertEqual([None, None],
                         [p['paused'] for p in answer['policies']])
        events = self._call('health_events')['events']
        self.assertEqual(
            [('health', 'PAUSED'), ('watch', 'PAUSED'),
             ('health', 'RESUMED'), ('watch', 'RESUMED')],
            sorted([(e['policy'], e['new_state']) for e in events],
                   key=lambda e: (e[1] != 'PAUSED', e[0])))
        self.assertEqual('resumed by %s' % self.ctx.username,
                         events[-1]['reason'])

    def test_unknown_policy_is_not_found(self):
        self.assertRaises(exception.EntityNotFound, self._call,
                          'set_paused', True, policy='nope')
        self.assertEqual([], self.notified)

    def test_timeline_is_oldest_first_after_the_marker(self):
        now = timeutils.utcnow()
        db_api.event_add([{
            'policy_id': 'pol-1', 'server_id': 'srv-1',
            'old_state': old, 'new_state': new, 'reason': new.lower(),
            'source': 'LIFECYCLE_EVENTS',
            'created_at': now + datetime.timedelta(seconds=n)}
            for n, (old, new) in enumerate([('HEALTHY', 'UNHEALTHY'),
                                            ('UNHEALTHY', 'RECOVERING'),
                                            ('RECOVERING', 'VERIFYING')])])
        events = self._call('health_events')['events']
        self.assertEqual(['UNHEALTHY', 'RECOVERING', 'VERIFYING'],
                         [e['new_state'] for e in events])
        self.assertEqual(('health', 'web'),
                         (events[0]['policy'], events[0]['path']))
        later = self._call('health_events', marker=events[0]['id'])
        self.assertEqual(['RECOVERING', 'VERIFYING'],
                         [e['new_state'] for e in later['events']])
        newest = self._call('health_events', limit=1)['events']
        self.assertEqual(['VERIFYING'], [e['new_state'] for e in newest])
        since = (now + datetime.timedelta(seconds=2)).isoformat()
        self.assertEqual(['VERIFYING'], [
            e['new_state'] for e in
            self._call('health_events', since=since)['events']])

    def test_stack_by_name_or_id_and_another_projects_stack(self):
        def report(ref, ctx):
            try:
                return self.endpoint.health_report(ctx, stack=ref)
            except oslo_messaging.ExpectedException as e:
                raise e.exc_info[1]
        for ref in (self.top.name, self.top.id):
            self.assertEqual(self.top.id, report(ref, self.ctx)['stack_id'])
        other = utils.dummy_context(tenant_id='tenant-2')
        # Its id exists but is not theirs: not found, as Heat's own lookup
        # answers, the same as its name.
        error = self.assertRaises(exception.EntityNotFound, report,
                                  self.top.id, other)
        self.assertEqual('The Stack (%s) could not be found.' % self.top.id,
                         str(error))
        self.assertRaises(exception.EntityNotFound, report, self.top.name,
                          other)
        self.assertRaises(exception.EntityNotFound, report,
                          '0d9f3c2e-8a8b-4b7e-9f00-1c2d3e4f5a6b', self.ctx)


class TestReportOfManyTargets(test_engine_endpoint.StackTestCase):
    """A policy watching hundreds of servers: rows read, not objects."""

    SERVERS = 300

    def setUp(self):
        super(TestReportOfManyTargets, self).setUp()
        self.now = datetime.datetime(2026, 3, 1, 12, 0, 0, 250000)
        with db_session.facade.writer.using(db_session.Session()) as session:
            session.add(models.Policy(
                id='pol-1', stack_id=self.top.id, resource_name='health',
                project_id='tenant-1', enabled=True, generation=1, spec={}))
        self._add_targets(range(1))

    def _add_targets(self, numbers):
        later = self.now + datetime.timedelta(minutes=5)
        with db_session.facade.writer.using(db_session.Session()) as session:
            for n in numbers:
                failing = n % 10 == 0
                session.add(models.Target(
                    policy_id='pol-1', server_id='srv-%04d' % n,
                    stack_id=self.top.id, resource_name='web%04d' % n,
                    path='web%04d' % n, server_name='web-%d' % n,
                    state='UNHEALTHY' if failing else 'HEALTHY',
                    state_reason='Nova status SHUTOFF' if failing else None,
                    state_since=self.now, grace_until=later,
                    observation='UNHEALTHY' if failing else 'HEALTHY',
                    observation_reason='seen', observation_source='NOVA',
                    observed_at=self.now,
                    recovery={'kind': 'START', 'attempt': 1}
                    if failing else None,
                    attempts=1 if failing else 0,
                    next_attempt_at=later if failing else None))
        db_api.event_add([{
            'policy_id': 'pol-1', 'server_id': 'srv-%04d' % n,
            'old_state': 'HEALTHY', 'new_state': 'UNHEALTHY',
            'reason': 'Nova status SHUTOFF', 'source': 'NOVA',
            'created_at': self.now} for n in numbers])

    def _call(self, method, **kwargs):
        try:
            return getattr(self.endpoint, method)(
                self.ctx, stack_identity=dict(self.top.identifier()),
                **kwargs)
        except oslo_messaging.ExpectedException as e:
            raise e.exc_info[1]

    def _statements(self, method, **kwargs):
        """The answer, and how many SQL statements it took."""
        counted = []

        def count(*args):
            counted.append(args[2])
        engine = db_session.get_engine()
        sqlalchemy.event.listen(engine, 'before_cursor_execute', count)
        try:
            answer = self._call(method, **kwargs)
        finally:
            sqlalchemy.event.remove(engine, 'before_cursor_execute', count)
        return answer, len(counted)

    def test_queries_do_not_grow_with_the_targets(self):
        _report, one = self._statements('health_report')
        _events, one_events = self._statements('health_events')
        self._add_targets(range(1, self.SERVERS))
        report, many = self._statements('health_report')
        events, many_events = self._statements('health_events')
        self.assertEqual(self.SERVERS,
                         len(report['policies'][0]['targets']))
        self.assertEqual({'HEALTHY': 270, 'UNHEALTHY': 30},
                         report['policies'][0]['counts'])
        self.assertEqual(50, len(report['events']))
        self.assertEqual(self.SERVERS, len(events['events']))
        self.assertEqual((one, one_events), (many, many_events))

    def test_targets_and_events_as_stored_with_utc_times(self):
        report = self._call('health_report')
        json.dumps(report)
        target, = report['policies'][0]['targets']
        at = '2026-03-01T12:00:00.250000+00:00'
        later = '2026-03-01T12:05:00.250000+00:00'
        self.assertEqual({
            'server_id': 'srv-0000', 'server_name': 'web-0',
            'resource_name': 'web0000', 'path': 'web0000',
            'state': 'UNHEALTHY', 'reason': 'Nova status SHUTOFF',
            'since': at, 'grace_until': later,
            'recovery': {'kind': 'START', 'attempt': 1}, 'attempts': 1,
            'next_attempt_at': later,
            'last_observation': {'verdict': 'UNHEALTHY', 'reason': 'seen',
                                 'source': 'NOVA', 'time': at,
                                 'still_seen_at': at}}, target)
        event, = report['events']
        self.assertEqual(('srv-0000', None, at),
                         (event['server_id'], event['path'], event['time']))
        event, = self._call('health_events')['events']
        self.assertEqual(('health', 'web0000', at),
                         (event['policy'], event['path'], event['time']))
