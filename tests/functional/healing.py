"""Helpers of the recovery tests: stacks healed, reports and timelines."""

import configparser
import json
import time

import sqlalchemy as sa

from tests.functional import cloud

RECREATE_ONLY = {'actions': [{'name': 'RECREATE'}]}
# Each server's health endpoint on the local deployment's fakecloud (its
# health port): fakecloud's own servers', and on real Nova each guest's,
# which fakecloud asks of the compute's fault driver. Only tests marked
# fakecloud or real_nova poll it.
FAKECLOUD_HEALTH_URL = 'http://127.0.0.1:8775/{id}/health'
POLL_URL = [{'type': 'NODE_STATUS_POLL_URL', 'options': {
    'poll_url': FAKECLOUD_HEALTH_URL,
    'poll_url_retry_limit': 0, 'poll_url_timeout': 1}}]


def local_deployment():
    """Whether the tests run beside the local deployment (tools/localcloud).

    Its configuration, databases and processes are then at hand: a second
    heat-health-engine, Heat's database, the engine's own workers.
    """
    return (cloud.STATE_DIR / 'etc' / 'heat.conf').exists()


def heat_db():
    """An engine on the local deployment's Heat database."""
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(cloud.STATE_DIR / 'etc' / 'heat.conf')
    return sa.create_engine(conf['database']['connection'])


def stack_owner(stack_id):
    """The stack's stored credentials in Heat's database.

    Who acts for the stack when nobody asks: user_creds and its trust.
    """
    engine = heat_db()
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                'SELECT s.user_creds_id, s.username, u.trust_id, '
                'u.trustor_user_id FROM stack s JOIN user_creds u ON '
                'u.id = s.user_creds_id WHERE s.id = :id'),
                {'id': stack_id}).one()._asdict()
    finally:
        engine.dispose()


def policy(demo, stack):
    policy, = demo.health_report(stack)['policies']
    return policy


def targets(demo, stack):
    return {t['path']: t for t in policy(demo, stack)['targets']}


def all_healthy(demo, stack, count):
    found = targets(demo, stack)
    if len(found) == count and all(t['state'] == 'HEALTHY'
                                   for t in found.values()):
        return found
    return None


def events(demo, stack):
    return demo.health_report(stack)['events']


def all_events(demo, stack):
    """Every event of the stack's policies (up to 1,000), oldest first.

    The report shows the newest 50 only.
    """
    return demo.session.get('%s/stacks/%s/%s/health/events?limit=1000' % (
        demo.endpoint('orchestration'), stack['stack_name'],
        stack['id'])).json()['events']


def started(events, server_id=None):
    """The recovery actions started (newest first), per the timeline."""
    return [e for e in events if e['new_state'] == 'RECOVERING' and
            e['old_state'] == 'UNHEALTHY' and
            (server_id is None or e['server_id'] == server_id)]


def heal_stack(stacks, demo, prefix, count=3, template='heal_group.yaml',
               **params):
    """A stack of ``count`` servers and its targets, once all are HEALTHY.

    :param template: one with a ``count`` of servers and a health policy.
    """
    args = ['count=%d' % count]
    for key, value in params.items():
        args.append('%s=%s' % (key, json.dumps(value)
                               if not isinstance(value, (str, int))
                               else value))
    stack = stacks(prefix, template, *args)
    return stack, demo.wait_for(lambda: all_healthy(demo, stack, count),
                                'every server HEALTHY')


def last_seen(read, done, timeout=30, interval=0.5):
    """What ``read()`` returns once ``done`` of it, or at the deadline.

    For an assertion on what was seen: a wait that times out would only
    say that it did.
    """
    deadline = time.time() + timeout
    while True:
        value = read()
        if done(value) or time.time() >= deadline:
            return value
        time.sleep(interval)


def timeline(admin, server_id=None):
    url = '/timeline' + ('?server_id=%s' % server_id if server_id else '')
    return admin.session.get(admin.fakecloud_url(url)).json()['timeline']


def stack_status(demo, stack):
    return demo.session.get('%s/stacks/%s/%s' % (
        demo.endpoint('orchestration'), stack['stack_name'],
        stack['id'])).json()['stack']['stack_status']


def holder(demo, stack, path):
    """The nested stack (name, id) holding the resource at ``path``.

    The stack recovery updates to replace that resource's server
    (``replacement_update_stack = own``). Heat's API looks a stack up by
    its id alone (a redirect to name/id), not its resources.
    """
    orchestration = demo.endpoint('orchestration')
    found = {'stack_name': stack['stack_name'], 'id': stack['id']}
    for name in path.split('/')[:-1]:
        nested = demo.session.get('%s/stacks/%s/%s/resources/%s' % (
            orchestration, found['stack_name'], found['id'],
            name)).json()['resource']['physical_resource_id']
        shown = demo.session.get('%s/stacks/%s' % (
            orchestration, nested)).json()['stack']
        found = {'stack_name': shown['stack_name'], 'id': shown['id']}
    return found


def wait_replaced(demo, stack, path, old, count, timeout=150):
    """The targets by path, once ``path`` holds a server other than ``old``.

    And all ``count`` targets are HEALTHY.
    """
    def replaced():
        found = all_healthy(demo, stack, count)
        return found if found and found[path]['server_id'] != old else None
    return demo.wait_for(replaced, '%s replaced and every server HEALTHY'
                         % path, timeout=timeout)


def wait_member_recreated(demo, stack, old, timeout=150):
    """The group of one (``pool``) once its member holds a new server.

    Returns the targets, HEALTHY; the group must still have one member.
    """
    healed = demo.wait_for(
        lambda: (lambda t: t if t and [x['server_id'] for x in t.values()]
                 != [old] else None)(all_healthy(demo, stack, 1)),
        'the member recreated', timeout=timeout)
    group = demo.resource(stack['stack_name'], 'pool')
    members = demo.json('stack', 'resource', 'list',
                        group['physical_resource_id'])
    assert len(members) == 1, members
    return healed
