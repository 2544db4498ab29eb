"""Recovery on the local deployment: faults healed, or wisely not."""

import configparser
import json
import time

import sqlalchemy as sa

from tests.functional import cloud

RECREATE_ONLY = {'actions': [{'name': 'RECREATE'}]}


def _stack_owner(stack_id):
    """The stack's stored credentials in Heat's database.

    Who acts for the stack when nobody asks: user_creds and its trust.
    """
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(cloud.STATE_DIR / 'etc' / 'heat.conf')
    engine = sa.create_engine(conf['database']['connection'])
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                'SELECT s.user_creds_id, s.username, u.trust_id, '
                'u.trustor_user_id FROM stack s JOIN user_creds u ON '
                'u.id = s.user_creds_id WHERE s.id = :id'),
                {'id': stack_id}).one()._asdict()
    finally:
        engine.dispose()


def _policy(demo, stack):
    policy, = demo.health_report(stack)['policies']
    return policy


def _targets(demo, stack):
    return {t['path']: t for t in _policy(demo, stack)['targets']}


def _all_healthy(demo, stack, count):
    targets = _targets(demo, stack)
    if len(targets) == count and all(t['state'] == 'HEALTHY'
                                     for t in targets.values()):
        return targets
    return None


def _events(demo, stack):
    return demo.health_report(stack)['events']


def _started(events, server_id=None):
    """The recovery actions started (newest first), per the timeline."""
    return [e for e in events if e['new_state'] == 'RECOVERING' and
            e['old_state'] == 'UNHEALTHY' and
            (server_id is None or e['server_id'] == server_id)]


def _heal_stack(stacks, demo, prefix, count=3, **params):
    args = ['count=%d' % count]
    for key, value in params.items():
        args.append('%s=%s' % (key, json.dumps(value)
                               if not isinstance(value, (str, int))
                               else value))
    stack = stacks(prefix, 'heal_group.yaml', *args)
    return stack, demo.wait_for(lambda: _all_healthy(demo, stack, count),
                                'every server HEALTHY')


def test_stopped_paused_suspended_get_the_cheapest_action(demo, admin,
                                                          stacks):
    stack, targets = _heal_stack(stacks, demo, 'heal-states')
    servers = [t['server_id'] for t in sorted(targets.values(),
                                              key=lambda t: t['path'])]
    faults = dict(zip(servers, ['pause', 'power_off', 'suspend']))
    for done, (server_id, fault) in enumerate(faults.items(), 1):
        # One after the other: three at once in a group of three would be
        # a mass failure, which brakes.
        assert admin.inject_fault(server_id, fault).status_code == 200
        healed = demo.wait_for(
            lambda: _all_healthy(demo, stack, 3) if len(
                _started(_events(demo, stack))) >= done else None,
            'the %s server healed' % fault, timeout=60)
    # The same servers: nothing was recreated.
    assert sorted(t['server_id'] for t in healed.values()) == sorted(servers)
    started = {e['server_id']: e['reason'] for e in _started(
        _events(demo, stack))}
    assert started[servers[0]].startswith('UNPAUSE'), started
    assert started[servers[1]].startswith('START'), started
    assert started[servers[2]].startswith('RESUME'), started
    recovered = [e for e in _events(demo, stack)
                 if e['old_state'] == 'VERIFYING' and
                 e['new_state'] == 'HEALTHY']
    assert {e['server_id'] for e in recovered} == set(servers)


def test_error_is_recreated_with_a_new_id(demo, admin, stacks):
    stack, targets = _heal_stack(stacks, demo, 'heal-error', count=2,
                                 recovery=RECREATE_ONLY)
    victim = targets['workers/0']['server_id']
    assert admin.inject_fault(victim, 'crash_to_error').status_code == 200
    healed = demo.wait_for(
        lambda: (lambda t: t if t and t['workers/0']['server_id'] != victim
                 else None)(_all_healthy(demo, stack, 2)),
        'workers/0 replaced and HEALTHY', timeout=120)
    assert healed['workers/1']['server_id'] == targets['workers/1'][
        'server_id']
    name = stack['stack_name']
    assert demo.json('stack', 'show', name)['stack_status'] == (
        'UPDATE_COMPLETE')
    # Exactly one replacement was made.
    replaced = [e for e in _events(demo, stack)
                if e['reason'] and 'replaced by' in e['reason']]
    assert len(replaced) == 1, replaced


def test_vanished_server_is_recreated(demo, admin, stacks):
    stack, targets = _heal_stack(stacks, demo, 'heal-vanish', count=2)
    victim = targets['workers/1']['server_id']
    assert admin.inject_fault(victim, 'vanish').status_code == 200
    healed = demo.wait_for(
        lambda: (lambda t: t if t and t['workers/1']['server_id'] != victim
                 else None)(_all_healthy(demo, stack, 2)),
        'workers/1 recreated and HEALTHY', timeout=120)
    assert healed['workers/0']['server_id'] == targets['workers/0'][
        'server_id']


def test_observe_never_acts(demo, admin, stacks, demo_nova):
    stack, targets = _heal_stack(stacks, demo, 'heal-observe', count=2,
                                 recovery={'mode': 'OBSERVE'})
    victim = targets['workers/0']['server_id']
    assert admin.inject_fault(victim, 'power_off').status_code == 200
    demo.wait_for(lambda: _targets(demo, stack)['workers/0']['state'] ==
                  'UNHEALTHY', 'the stopped server UNHEALTHY', timeout=30)
    # Three ticks of the recovery loop and a status poll later: nothing.
    time.sleep(6)
    assert _targets(demo, stack)['workers/0']['state'] == 'UNHEALTHY'
    assert demo_nova.servers.get(victim).status == 'SHUTOFF'
    assert not _started(_events(demo, stack))
    held = [e for e in _events(demo, stack)
            if e['new_state'] == 'SUPPRESSED']
    assert held and 'OBSERVE' in held[0]['reason'], held


def test_mass_failure_brakes_then_heals_what_is_left(demo, admin, stacks,
                                                     demo_nova):
    stack, targets = _heal_stack(stacks, demo, 'heal-brake', count=4,
                                 recovery={'max_concurrent': 4})
    servers = [targets['workers/%d' % n]['server_id'] for n in range(4)]
    for server_id in servers[:3]:
        assert admin.inject_fault(server_id, 'power_off').status_code == 200
    policy = demo.wait_for(
        lambda: (lambda p: p if p['braked'] else None)(_policy(demo, stack)),
        'the policy to brake', timeout=30)
    assert '3 of 4' in policy['braked']
    time.sleep(5)
    assert not _started(_events(demo, stack)), _events(demo, stack)
    assert [demo_nova.servers.get(s).status for s in servers[:3]] == [
        'SHUTOFF'] * 3
    # The fault clears on two (as if the platform came back): the brake
    # lets go and the third is healed.
    for server_id in servers[:2]:
        assert admin.inject_fault(server_id, 'reset').status_code == 200
    demo.wait_for(lambda: _all_healthy(demo, stack, 4),
                  'every server HEALTHY again', timeout=90)
    started = _started(_events(demo, stack))
    assert [e['server_id'] for e in started] == [servers[2]], started
    assert _policy(demo, stack)['braked'] is None


def test_recovery_steps_in_heats_event_list(demo, admin, stacks):
    stack, targets = _heal_stack(stacks, demo, 'heal-events', count=1)
    victim = targets['workers/0']['server_id']
    assert admin.inject_fault(victim, 'pause').status_code == 200
    demo.wait_for(lambda: _all_healthy(demo, stack, 1) and _started(
        _events(demo, stack)), 'the server healed', timeout=60)
    events = demo.events(stack['stack_name'], nested_depth=2)
    reasons = [e.get('resource_status_reason') or '' for e in events
               if e.get('resource_name') == '0']
    assert any('UNPAUSE' in r for r in reasons), events


def test_owner_and_trust_unchanged_after_a_recreate(demo, admin, stacks):
    stack, targets = _heal_stack(stacks, demo, 'heal-owner', count=1,
                                 recovery=RECREATE_ONLY)
    before = demo.json('stack', 'show', stack['stack_name'])
    owner = _stack_owner(stack['id'])
    assert owner['trust_id'], owner
    victim = targets['workers/0']['server_id']
    assert admin.inject_fault(victim, 'crash_to_error').status_code == 200
    demo.wait_for(
        lambda: (lambda t: t if t and t['workers/0']['server_id'] != victim
                 else None)(_all_healthy(demo, stack, 1)),
        'workers/0 replaced and HEALTHY', timeout=120)
    after = demo.json('stack', 'show', stack['stack_name'])
    assert after['stack_owner'] == before['stack_owner']
    assert after['stack_user_project_id'] == before['stack_user_project_id']
    assert _stack_owner(stack['id']) == owner
