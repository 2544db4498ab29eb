"""Which functional tests run against which cloud.

Tests marked ``fakecloud`` are deselected (not skipped) when the target
cloud has no fakecloud, or when ``HEAT_HEALTH_FAKECLOUD=0`` says so, and the
summary says how many and why; the users' clouds are named by OS_CLOUD and
HEAT_HEALTH_{READER,ADMIN,ALT}_CLOUD.
"""

from unittest import mock

import pytest

from tests.functional import cloud
from tests.functional import conftest


class _Item(object):
    def __init__(self, name, marked):
        self.name = name
        self._marked = marked

    def get_closest_marker(self, name):
        return mock.sentinel.marker if (
            self._marked and name == conftest.MARKER) else None


class _Config(object):
    def __init__(self):
        self.stash = pytest.Stash()
        self.hook = mock.Mock()


def _items():
    return [_Item('mark', False), _Item('fault', True),
            _Item('report', False), _Item('engine', True)]


def _select(monkeypatch, env, probe=lambda: False):
    monkeypatch.delenv(conftest.FORCE_VARIABLE, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    probed = []

    def _probe():
        probed.append(True)
        return probe()
    monkeypatch.setattr(conftest, '_probe', _probe)
    config, items = _Config(), _items()
    conftest.pytest_collection_modifyitems(None, config, items)
    lines = []
    reporter = mock.Mock(write_line=lines.append)
    conftest.pytest_terminal_summary(reporter, 0, config)
    return config, [i.name for i in items], lines, probed


def _deselected(config):
    return [[i.name for i in call.kwargs['items']]
            for call in config.hook.pytest_deselected.call_args_list]


def test_no_fakecloud_deselects_the_marked_tests_and_says_so(monkeypatch):
    config, kept, lines, probed = _select(monkeypatch, {})
    assert probed
    assert kept == ['mark', 'report']
    assert _deselected(config) == [['fault', 'engine']]
    assert lines == ['2 functional tests need fakecloud and were '
                     'deselected: the target cloud has none']


def test_a_cloud_with_fakecloud_runs_everything(monkeypatch):
    config, kept, lines, probed = _select(monkeypatch, {},
                                          probe=lambda: True)
    assert kept == ['mark', 'fault', 'report', 'engine']
    assert not _deselected(config) and not lines


@pytest.mark.parametrize('value', ['0', 'false', 'no'])
def test_forced_off_deselects_without_asking_the_cloud(monkeypatch, value):
    config, kept, lines, probed = _select(
        monkeypatch, {conftest.FORCE_VARIABLE: value}, probe=lambda: True)
    assert not probed
    assert kept == ['mark', 'report']
    assert lines == ['2 functional tests need fakecloud and were '
                     'deselected: HEAT_HEALTH_FAKECLOUD=%s' % value]


def test_forced_on_keeps_them_without_asking_the_cloud(monkeypatch):
    config, kept, lines, probed = _select(
        monkeypatch, {conftest.FORCE_VARIABLE: '1'})
    assert not probed
    assert kept == ['mark', 'fault', 'report', 'engine']


def test_a_cloud_that_cannot_be_asked_keeps_them_and_says_why(monkeypatch):
    def unreachable():
        raise cloud.CloudNotFound("cloud 'devstack-admin': not found")
    config, kept, lines, probed = _select(monkeypatch, {},
                                          probe=unreachable)
    assert kept == ['mark', 'fault', 'report', 'engine']
    assert not _deselected(config)
    assert len(lines) == 1 and 'devstack-admin' in lines[0], lines
    assert 'kept' in lines[0]


def test_nothing_marked_asks_nothing(monkeypatch):
    monkeypatch.setattr(conftest, '_probe', mock.Mock(side_effect=Exception))
    config = _Config()
    items = [_Item('mark', False)]
    conftest.pytest_collection_modifyitems(None, config, items)
    assert [i.name for i in items] == ['mark']


def test_one_test_is_one_test():
    assert conftest.deselect_note(1, 'the target cloud has none') == (
        '1 functional test needs fakecloud and was deselected: the target '
        'cloud has none')


@pytest.mark.parametrize('env,names', [
    ({}, ['devstack', 'devstack-reader', 'devstack-admin', 'devstack-alt']),
    ({'OS_CLOUD': 'mine'}, ['mine', 'mine-reader', 'mine-admin',
                            'mine-alt']),
    ({'OS_CLOUD': 'devstack', 'HEAT_HEALTH_READER_CLOUD': 'r',
      'HEAT_HEALTH_ADMIN_CLOUD': 'a', 'HEAT_HEALTH_ALT_CLOUD': 'b'},
     ['devstack', 'r', 'a', 'b']),
])
def test_the_users_clouds_are_named_by_the_environment(monkeypatch, env,
                                                       names):
    for variable in ('OS_CLOUD', 'HEAT_HEALTH_READER_CLOUD',
                     'HEAT_HEALTH_ADMIN_CLOUD', 'HEAT_HEALTH_ALT_CLOUD'):
        monkeypatch.delenv(variable, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert [cloud.cloud_name(role) for role in (
        'demo', 'reader', 'admin', 'alt_demo')] == names


def test_the_cli_gets_the_cloud_and_not_another_clouds_settings(
        monkeypatch, tmp_path):
    clouds = tmp_path / 'clouds.yaml'
    clouds.write_text(
        'clouds:\n'
        '  target:\n'
        '    auth: {auth_url: "https://keystone.example/v3", username: u,\n'
        '           password: p, project_name: demo,\n'
        '           user_domain_name: Default,\n'
        '           project_domain_name: Default}\n'
        '    region_name: RegionTwo\n'
        '    interface: internal\n')
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
    monkeypatch.setenv('OS_USERNAME', 'someone-else')
    monkeypatch.setenv('OS_AUTH_URL', 'https://elsewhere.example/v3')
    user = cloud.Cloud('target')
    assert (user.username, user.interface, user.region_name) == (
        'u', 'internal', 'RegionTwo')
    assert user.env['OS_CLOUD'] == 'target'
    assert user.env['OS_CLIENT_CONFIG_FILE'] == str(clouds)
    assert 'OS_USERNAME' not in user.env and 'OS_AUTH_URL' not in user.env

    other = user.other_user('outsider', 'secret', 'elsewhere')
    assert 'OS_CLOUD' not in other.env
    assert (other.env['OS_USERNAME'], other.env['OS_PROJECT_NAME'],
            other.env['OS_AUTH_URL'], other.env['OS_REGION_NAME'],
            other.env['OS_INTERFACE']) == (
        'outsider', 'elsewhere', 'https://keystone.example/v3',
        'RegionTwo', 'internal')


def test_an_unknown_cloud_is_named_in_the_error(monkeypatch, tmp_path):
    clouds = tmp_path / 'clouds.yaml'
    clouds.write_text('clouds: {}\n')
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(clouds))
    monkeypatch.setattr(cloud, 'STATE_DIR', tmp_path / 'no-localcloud')
    with pytest.raises(cloud.CloudNotFound) as raised:
        cloud.Cloud('nowhere')
    assert 'nowhere' in str(raised.value)


class _EngineItem(_Item):
    def get_closest_marker(self, name):
        return mock.sentinel.marker if (
            self._marked and name == conftest.ENGINE_MARKER) else None


def _select_engine_tests(monkeypatch, env):
    for key in ('HEAT_HEALTH_ENGINE_STOP', 'HEAT_HEALTH_ENGINE_START'):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(conftest.FORCE_VARIABLE, '0')
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = _Config()
    items = [_EngineItem('registration', True), _EngineItem('mark', False)]
    conftest.pytest_collection_modifyitems(None, config, items)
    lines = []
    conftest.pytest_terminal_summary(mock.Mock(write_line=lines.append), 0,
                                     config)
    return [i.name for i in items], lines


def test_engine_stopping_tests_need_commands_away_from_localcloud(
        monkeypatch):
    kept, lines = _select_engine_tests(monkeypatch, {})
    assert kept == ['mark']
    assert lines == ['1 functional test stops heat-health-engine and was '
                     'deselected: set HEAT_HEALTH_ENGINE_STOP and '
                     'HEAT_HEALTH_ENGINE_START to the commands that stop '
                     'and start it']


def test_engine_stopping_tests_run_with_the_commands(monkeypatch):
    kept, lines = _select_engine_tests(monkeypatch, {
        'HEAT_HEALTH_ENGINE_STOP': 'systemctl stop e',
        'HEAT_HEALTH_ENGINE_START': 'systemctl start e'})
    assert kept == ['registration', 'mark']
    assert lines == []
