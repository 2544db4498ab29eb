"""A hostile tenant cannot touch another project's servers or detection.

Two projects, two engines. The attacker (alt_demo) writes the templates a
security review found harmful: a server resource turned into
``OS::Heat::None`` by a glob in its environment and given the victim's
server id as ``external_id``, watched by a policy whose poll URL never
answers; and a policy whose server's path is 1,025 characters long. The
victim (demo) must not notice either: its server is never acted on, its
report never changes, and its power-offs are detected and healed as ever.
"""

import json
import textwrap
import uuid

import pytest
import sqlalchemy as sa

from tests.functional import cloud
from tests.functional import engines
from tests.functional import healing as h

# fakecloud's faults and timeline.
pytestmark = pytest.mark.fakecloud

# Seconds the attacker's policy is given to do harm: many of its intervals.
ATTACK_SECONDS = 20
# The nested resources on the way to the poisoned policy's server, with
# the lengths their names are given: a/0/bbb.../eee... is 1,025 long.
NESTED = {'b': 255, 'c': 255, 'd': 255, 'e': 253}


@pytest.fixture
def peer(demo, tmp_path):
    """The second engine: either may own each policy."""
    engine = engines.Engine(tmp_path, 'isolation-peer').start(demo)
    yield engine
    engine.kill()


@pytest.fixture
def alt_stacks(alt_demo):
    """Stacks of the attacker's project, deleted after the test."""
    created = []
    yield created
    for name in created:
        alt_demo.delete_stack(name)


def _create(user, created, prefix, template, *extra):
    """``openstack stack create`` as user; (name, succeeded, errors)."""
    name = '%s-%s' % (prefix, uuid.uuid4().hex[:8])
    created.append(name)
    result = user.run('stack', 'create', '--wait', '-t', str(template),
                      '-e', user.stack_environment(), *(extra + (name,)),
                      check=False)
    return name, result.returncode == 0, result.stderr


def _actions(admin, server_id, since):
    """What fakecloud was asked to do to the server after seq ``since``."""
    return [e for e in h.timeline(admin, server_id)
            if e['seq'] > since and e['event'].startswith('action:')]


def _report(user, name):
    stack = user.json('stack', 'show', name)
    return user.health_report(stack)


def _victim_view(demo, stack):
    """What the victim's report says: its targets and its event count."""
    policy = h.policy(demo, stack)
    return ({t['path']: (t['server_id'], t['state'])
             for t in policy['targets']}, len(h.events(demo, stack)))


def test_template_aimed_at_another_projects_server_reaches_nothing(
        demo, alt_demo, admin, admin_nova, stacks, alt_stacks, peer):
    stack, targets = h.heal_stack(stacks, demo, 'iso-victim', count=2)
    victim = targets['workers/0']['server_id']
    server = admin_nova.servers.get(victim)
    secrets = [server.name] + [a['addr'] for found in
                               server.addresses.values() for a in found]
    before = _victim_view(demo, stack)
    since = h.timeline(admin)[-1]['seq']

    name, created, error = _create(
        alt_demo, alt_stacks, 'iso-attack', cloud.TEMPLATES /
        'attack_external.yaml', '-e',
        str(cloud.TEMPLATES / 'attack_glob_env.yaml'),
        '--parameter', 'victim=%s' % victim)
    if not created:
        # Refused at create: it must say why, not fail in the dark.
        assert 'external_id' in error or 'external' in error.lower(), error
    else:
        h.last_seen(lambda: _victim_view(demo, stack),
                    lambda view: view != before, timeout=ATTACK_SECONDS)
        attacker = json.dumps(_report(alt_demo, name))
        assert victim not in attacker
        for secret in secrets:
            assert secret not in attacker, (
                'the attacker reads %r of the victim: %s' % (secret,
                                                             attacker))
    assert _actions(admin, victim, since) == []
    assert _victim_view(demo, stack) == before


def _nested_templates(directory):
    """A group of one, its member nesting a server four stacks deep.

    Heat refuses nested stacks whose names (each parent's name and the
    resource's, joined) pass 255 characters, so a template cannot spell
    out a long path: the names are lengthened in Heat's database once the
    stack exists (``_lengthen``), as a stack of another release or a
    restored database might hold them.
    """
    params = ('parameters:\n  image: {type: string, default: cirros}\n'
              '  flavor: {type: string, default: m1.tiny}\n'
              '  network: {type: string, default: private}\n')
    passed = ('properties:\n  image: {get_param: image}\n'
              '  flavor: {get_param: flavor}\n'
              '  network: {get_param: network}\n')
    body = ('type: OS::Nova::Server\nproperties:\n'
            '  image: {get_param: image}\n  flavor: {get_param: flavor}\n'
            '  networks: [{network: {get_param: network}}]\n')
    for depth in range(len(NESTED), 0, -1):
        nested = directory / ('level%d.yaml' % depth)
        nested.write_text('heat_template_version: 2018-08-31\n' + params +
                          'resources:\n  %s:\n' % list(NESTED)[depth - 1] +
                          textwrap.indent(body, ' ' * 4))
        body = 'type: %s\n' % nested.name + passed
    group = ('type: OS::Heat::ResourceGroup\nproperties:\n  count: 1\n'
             '  resource_def:\n' + textwrap.indent(body, ' ' * 4))
    top = directory / 'poisoned.yaml'
    top.write_text(
        'heat_template_version: 2018-08-31\n' + params + 'resources:\n'
        '  a:\n' + textwrap.indent(group, ' ' * 4) +
        '  policy:\n    type: OS::Heat::HealthPolicy\n    properties:\n'
        '      targets: [a]\n      detection:\n        interval: 5\n'
        '        detection_modes: [{type: NODE_STATUS_POLLING}]\n')
    return top


def _lengthen(root_stack_id):
    """Give the nested resources 255-character names in Heat's database.

    Returns the target's path: 'a/0' and four long names, 1,025
    characters.
    """
    long_names = {name: name * length for name, length in NESTED.items()}
    engine = h.heat_db()
    try:
        with engine.begin() as conn:
            rows = conn.execute(sa.text(
                'SELECT r.id, r.name, r.stack_id, s.raw_template_id FROM '
                'resource r JOIN stack s ON s.id = r.stack_id WHERE '
                'r.root_stack_id = :root AND r.name IN :names').bindparams(
                    sa.bindparam('names', expanding=True)),
                {'root': root_stack_id, 'names': list(long_names)}).all()
            assert len(rows) == len(NESTED), rows
            for row in rows:
                new = long_names[row.name]
                template = json.loads(conn.execute(sa.text(
                    'SELECT template FROM raw_template WHERE id = :id'),
                    {'id': row.raw_template_id}).scalar())
                resources = template['resources']
                resources[new] = resources.pop(row.name)
                conn.execute(sa.text(
                    'UPDATE raw_template SET template = :t WHERE id = :id'),
                    {'t': json.dumps(template), 'id': row.raw_template_id})
                conn.execute(sa.text(
                    'UPDATE resource SET name = :n WHERE id = :id'),
                    {'n': new, 'id': row.id})
                conn.execute(sa.text(
                    'UPDATE stack SET updated_at = UTC_TIMESTAMP() '
                    'WHERE id = :id'), {'id': row.stack_id})
    finally:
        engine.dispose()
    return '/'.join(['a', '0'] + [long_names[n] for n in NESTED])


def _owners(reports):
    return {name: report['policies'][0].get('engine_id')
            for name, report in reports.items()}


def test_poisoned_policy_leaves_other_projects_healed(
        demo, alt_demo, admin, stacks, alt_stacks, peer, tmp_path):
    name, created, error = _create(alt_demo, alt_stacks, 'iso-poison',
                                   _nested_templates(tmp_path))
    assert created, error
    poisoned = alt_demo.json('stack', 'show', name)
    alt_demo.wait_for(lambda: h.all_healthy(alt_demo, poisoned, 1),
                      'the nested server watched')
    assert len(_lengthen(poisoned['id'])) == 1025
    victims = [h.heal_stack(stacks, demo, 'iso-healed-%d' % n, count=1)
               for n in range(2)]
    reports = lambda: dict(  # noqa: E731
        [('poison', _report(alt_demo, name))] +
        [(n, demo.health_report(s)) for n, (s, _t) in enumerate(victims)])
    owners = demo.wait_for(
        lambda: (lambda o: o if all(o.values()) else None)(
            _owners(reports())), 'every policy owned by an engine')
    if owners['poison'] not in [owners[n] for n in range(len(victims))]:
        # No victim shares the poisoned policy's engine: leave one engine,
        # which then owns them all.
        peer.kill()
        owners = demo.wait_for(
            lambda: (lambda o: o if len(set(o.values())) == 1 and
                     None not in o.values() else None)(_owners(reports())),
            'one engine to own every policy', timeout=120)
    for stack, targets in victims:
        server_id, = [t['server_id'] for t in targets.values()]
        assert admin.inject_fault(server_id, 'power_off').status_code == 200
    for stack, _targets in victims:
        demo.wait_for(lambda: h.all_healthy(demo, stack, 1) if h.started(
            h.events(demo, stack)) else None,
            'the powered-off server healed', timeout=60)
    # The poisoned policy itself watches its server under a path that fits,
    # its start and end kept.
    target, = _report(alt_demo, name)['policies'][0]['targets']
    assert (len(target['path']) <= 1024 and
            target['path'].startswith('a/') and
            target['path'].endswith('e' * 253)), target['path']
