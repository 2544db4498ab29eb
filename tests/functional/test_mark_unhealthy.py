"""openstack stack resource mark unhealthy, through the heat-health filter,
as the users of a real Heat deployment run it."""

import pytest


@pytest.fixture(scope='module')
def marks(demo):
    stack = demo.create_stack('marks', 'marks.yaml')
    yield stack
    demo.delete_stack(stack['stack_name'])


def _status(demo, stack, resource):
    res = demo.resource(stack['stack_name'], resource)
    return res['resource_status'], res['resource_status_reason']


def _mark(cloud, stack, resource, *args, reset=False):
    options = ['--reset'] if reset else []
    return cloud.run('stack', 'resource', 'mark', 'unhealthy', *options,
                     stack['stack_name'], resource, *args)


def test_mark_with_reason_shows_in_resource_and_events(demo, marks):
    _mark(demo, marks, 'with_reason', 'probe failed on port 80')
    assert _status(demo, marks, 'with_reason') == (
        'CHECK_FAILED', 'probe failed on port 80')
    events = demo.events(marks['stack_name'])
    assert any(e['resource_name'] == 'with_reason' and
               e['resource_status'] == 'CHECK_FAILED' and
               e['resource_status_reason'] == 'probe failed on port 80'
               for e in events), events


def test_mark_without_reason_records_who(demo, marks):
    _mark(demo, marks, 'without_reason')
    assert _status(demo, marks, 'without_reason') == (
        'CHECK_FAILED', 'Marked unhealthy explicitly by user %s'
        % demo.username)


def test_reset_clears_check_failed(demo, marks):
    _mark(demo, marks, 'reset_me', 'flaky')
    _mark(demo, marks, 'reset_me', 'fixed by hand', reset=True)
    assert _status(demo, marks, 'reset_me') == (
        'CHECK_COMPLETE', 'fixed by hand')


def test_reset_of_a_healthy_resource_changes_nothing(demo, marks):
    before = demo.resource(marks['stack_name'], 'never_marked')
    _mark(demo, marks, 'never_marked', reset=True)
    after = demo.resource(marks['stack_name'], 'never_marked')
    assert after['resource_status'] == 'CREATE_COMPLETE'
    assert after['updated_time'] == before['updated_time']


def test_mark_by_physical_id(demo, marks):
    physical_id = demo.resource(marks['stack_name'],
                                'by_physical_id')['physical_resource_id']
    _mark(demo, marks, physical_id, 'seen dead by monitoring')
    assert _status(demo, marks, 'by_physical_id') == (
        'CHECK_FAILED', 'seen dead by monitoring')


@pytest.mark.parametrize('body,words', [
    ({'mark_unhealthy': True, 'force': True}, 'Invalid keys'),
    ({'mark_unhealthy': 'maybe'}, 'acceptable values are: true, false'),
    ({'resource_status_reason': 'no flag'}, 'Missing mandatory'),
    (b'{"mark_unhealthy": tr', 'not valid JSON'),
    ([True], 'must be a JSON object'),
])
def test_bad_body_is_400_and_changes_nothing(demo, marks, body, words):
    resp = demo.patch_resource(marks, 'never_marked', body)
    assert resp.status_code == 400, resp.text
    assert words in resp.json()['error']['message']
    assert _status(demo, marks, 'never_marked')[0] == 'CREATE_COMPLETE'


def test_unknown_resource_is_404(demo, marks):
    error = demo.fails('stack', 'resource', 'mark', 'unhealthy',
                       marks['stack_name'], 'no_such_resource')
    assert 'Stack or resource not found' in error
    resp = demo.patch_resource(marks, 'no_such_resource',
                               {'mark_unhealthy': True})
    assert resp.status_code == 404, resp.text


def test_reader_is_forbidden(reader, demo, marks):
    error = reader.fails('stack', 'resource', 'mark', 'unhealthy',
                         marks['stack_name'], 'never_marked')
    assert 'not authorized to use resource:mark_unhealthy' in error, error
    resp = reader.patch_resource(marks, 'never_marked',
                                 {'mark_unhealthy': True})
    assert resp.status_code == 403, resp.text
    assert _status(demo, marks, 'never_marked')[0] == 'CREATE_COMPLETE'


def test_conflict_while_the_resource_is_being_updated(demo, stacks):
    busy = stacks('busy', 'busy.yaml')
    name = busy['stack_name']
    demo.run('stack', 'update', '--existing', '--parameter', 'value=two',
             '--parameter', 'update_wait=25', name)
    demo.wait_for(
        lambda: demo.resource(name, 'slow')['resource_status'] ==
        'UPDATE_IN_PROGRESS', 'slow to be UPDATE_IN_PROGRESS')
    resp = demo.patch_resource(busy, 'slow', {'mark_unhealthy': True})
    assert resp.status_code == 409, resp.text
    assert 'in progress' in resp.json()['error']['message']
    error = demo.fails('stack', 'resource', 'mark', 'unhealthy', name,
                       'slow', 'during update')
    assert 'in progress' in error, error
    demo.wait_for(
        lambda: demo.json('stack', 'show', name)['stack_status'] ==
        'UPDATE_COMPLETE', 'the update to finish', timeout=180)
    assert demo.resource(name, 'slow')['resource_status'] == 'UPDATE_COMPLETE'


def test_reason_longer_than_255_characters_is_kept_as_heat_keeps_it(
        demo, stacks):
    stack = stacks('long-reason', 'marks.yaml')
    reason = ('probe failed: ' + 'connection refused on port 80; ' * 10)[:300]
    assert len(reason) == 300
    _mark(demo, stack, 'with_reason', reason)
    # The resource keeps the whole reason, its event the first 255
    # characters, as Heat does.
    assert _status(demo, stack, 'with_reason') == ('CHECK_FAILED', reason)
    events = demo.events(stack['stack_name'])
    assert any(e['resource_name'] == 'with_reason' and
               e['resource_status'] == 'CHECK_FAILED' and
               e['resource_status_reason'] == reason[:255]
               for e in events), events


@pytest.mark.parametrize('body', [
    '[' * 100000 + ']' * 100000,
    '{"mark_unhealthy": true, "resource_status_reason": ' +
    '{"a": ' * 100000 + '1' + '}' * 100000 + '}',
])
def test_deeply_nested_body_is_400(demo, marks, body):
    resp = demo.patch_resource(marks, 'never_marked', body)
    assert resp.status_code == 400, resp.text[:500]
    assert 'too deeply' in resp.json()['error']['message']
    assert _status(demo, marks, 'never_marked')[0] == 'CREATE_COMPLETE'


def test_body_over_heats_size_limit_is_400(demo, marks):
    # Heat's default max_json_body_size is 1 MiB.
    resp = demo.patch_resource(marks, 'never_marked', {
        'mark_unhealthy': True, 'resource_status_reason': 'x' * (2 << 20)})
    assert resp.status_code == 400, resp.text[:500]
    assert resp.json()['error']['type'] == 'RequestLimitExceeded'
    assert _status(demo, marks, 'never_marked')[0] == 'CREATE_COMPLETE'
