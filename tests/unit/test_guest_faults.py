"""The functional tests' guest faults, on each backend.

libvirt's is driven against a fake ``virsh`` (a script keeping its domains
in a file and logging each command line), the fault driver's against its
own control API served on 127.0.0.1 for a fake driver; then which backend
a run takes, and which tests it deselects.
"""

import json
import os
import stat
import sys
import types
from unittest import mock

import pytest

from tests.fault_driver import control
from tests.functional import cloud
from tests.functional import conftest
from tests.functional import guest_faults as gf

SERVER = {'id': 'c0ffee00-0000-4000-8000-000000000001',
          gf.HOST: 'node1', gf.INSTANCE_NAME: 'instance-00000001'}
DOMAIN = SERVER[gf.INSTANCE_NAME]
URI = ['-c', 'qemu:///system']

# Domains are {name: {'state': ..., 'saved': bool}}; each command line is
# logged with the LC_ALL it ran with.
FAKE_VIRSH = '''#!%(python)s
import json, os, sys
STATE, LOG = %(state)r, %(log)r
args = sys.argv[1:]
with open(LOG, 'a') as log:
    log.write(json.dumps([os.environ.get('LC_ALL')] + args) + '\\n')
if args[:1] == ['-c']:
    args = args[2:]
command, name, options = args[0], args[1], args[2:]
with open(STATE) as f:
    domains = json.load(f)


def fail(message):
    sys.exit('error: ' + message)


if name not in domains:
    fail("failed to get domain '%%s'" %% name)
domain = domains[name]
active = domain['state'] in ('running', 'paused')
if command == 'domstate':
    print(domain['state'])
    print()
    sys.exit()
if command == 'destroy':
    if not active:
        fail('Requested operation is not valid: domain is not running')
    domain['state'] = 'shut off'
elif command == 'suspend':
    if domain['state'] != 'running':
        fail('Requested operation is not valid: domain is not running')
    domain['state'] = 'paused'
elif command == 'managedsave':
    if not active:
        fail('Requested operation is not valid: domain is not running')
    domain.update(state='shut off', saved=True)
elif command == 'undefine':
    if domain.get('saved') and '--managed-save' not in options:
        fail('Requested operation is not valid: domain has a managed save')
    del domains[name]
else:
    fail('unknown command ' + command)
with open(STATE, 'w') as f:
    json.dump(domains, f)
'''


class FakeVirsh(object):
    """A virsh on PATH (in a directory whose name has a space)."""

    def __init__(self, tmp_path):
        self.bin = tmp_path / 'fake bin'
        self.bin.mkdir()
        self.state = tmp_path / 'domains.json'
        self.log = tmp_path / 'virsh.log'
        self.path = self.bin / 'virsh'
        self._script(self.path, FAKE_VIRSH % {
            'python': sys.executable, 'state': str(self.state),
            'log': str(self.log)})
        self.domains({DOMAIN: 'running'})

    def _script(self, path, text):
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def wrapper(self, name):
        """A prefix running the rest of the line, as sudo would."""
        self._script(self.bin / name, '#!/bin/sh\nexec "$@"\n')

    def domains(self, states=None):
        if states is not None:
            self.state.write_text(json.dumps(
                {name: {'state': state} for name, state in states.items()}))
        return {name: domain['state'] for name, domain in json.loads(
            self.state.read_text()).items()}

    def commands(self):
        """Each command line run, without the connection URI."""
        lines = [json.loads(line) for line in
                 self.log.read_text().splitlines()] if (
                     self.log.exists()) else []
        assert all(line[0] == 'C' for line in lines), lines
        return [line[3:] if line[1:3] == URI else line[1:]
                for line in lines]

    def backend(self):
        return gf.LibvirtBackend('"%s" -c qemu:///system' % self.path)


@pytest.fixture
def virsh(tmp_path):
    return FakeVirsh(tmp_path)


@pytest.mark.parametrize('fault,commands,power,left', [
    ('power_off', [['destroy']], 4, 'shut off'),
    ('crash', [['destroy']], 4, 'shut off'),
    ('pause', [['suspend']], 3, 'paused'),
    ('suspend', [['managedsave']], 4, 'shut off'),
    ('lose', [['destroy'], ['undefine', '--managed-save', '--keep-nvram']],
     None, None),
    ('reset', [], 1, 'running'),
])
def test_each_fault_runs_its_virsh_commands_on_the_servers_domain(
        virsh, fault, commands, power, left):
    found = virsh.backend().fault(SERVER, fault)
    ran = [[c[0]] + c[2:] for c in virsh.commands()]
    assert ran == commands + [['domstate']]
    assert all(c[1] == DOMAIN for c in virsh.commands())
    assert found == {'uuid': SERVER['id'], 'host': 'node1',
                     'power_state': power, 'next': {}}
    assert virsh.domains().get(DOMAIN) == left


def test_a_suspended_guest_is_lost_with_its_saved_memory(virsh):
    backend = virsh.backend()
    backend.fault(SERVER, 'suspend')
    assert backend.fault(SERVER, 'lose')['power_state'] is None
    assert virsh.domains() == {}


def test_a_guest_already_shut_off_is_lost_all_the_same(virsh):
    virsh.domains({DOMAIN: 'shut off'})
    assert virsh.backend().fault(SERVER, 'lose')['power_state'] is None
    assert virsh.domains() == {}


def test_a_command_that_fails_says_why(virsh):
    virsh.domains({DOMAIN: 'shut off'})
    with pytest.raises(gf.FaultFailed, match='domain is not running'):
        virsh.backend().fault(SERVER, 'pause')
    with pytest.raises(gf.FaultFailed, match="failed to get domain"):
        virsh.backend().fault(dict(SERVER, **{gf.INSTANCE_NAME: 'gone'}),
                              'power_off')


@pytest.mark.parametrize('state,power', [
    ('running', 1), ('idle', 1), ('blocked', 1), ('in shutdown', 1),
    ('paused', 3), ('shut off', 4), ('crashed', 6), ('pmsuspended', 7),
    ('no state', 0)])
def test_libvirt_states_are_novas_power_states(virsh, state, power):
    virsh.domains({DOMAIN: state})
    assert virsh.backend().power_state(DOMAIN) == power


def test_no_domain_is_no_power_state(virsh):
    virsh.domains({})
    assert virsh.backend().power_state(DOMAIN) is None


def test_an_unknown_state_is_an_error(virsh):
    virsh.domains({DOMAIN: 'dreaming'})
    with pytest.raises(gf.FaultFailed, match='dreaming'):
        virsh.backend().power_state(DOMAIN)


@pytest.mark.parametrize('fault', gf.OPERATION_FAULTS)
def test_operation_faults_are_not_made_by_libvirt(virsh, fault):
    with pytest.raises(gf.FaultNotSupported, match=fault):
        virsh.backend().fault(SERVER, fault, operation='reboot')
    assert virsh.commands() == []


def test_a_fault_libvirt_does_not_know_is_not_supported(virsh):
    with pytest.raises(gf.FaultNotSupported, match='melt.*only power_off'):
        virsh.backend().fault(SERVER, 'melt')
    assert virsh.commands() == []


def test_a_prefixed_command_runs_virsh_through_it(virsh, monkeypatch):
    virsh.wrapper('as-root')
    monkeypatch.setenv('PATH', str(virsh.bin))
    backend = gf.LibvirtBackend('as-root virsh -c qemu:///system')
    assert backend.available()
    assert backend.fault(SERVER, 'pause')['power_state'] == 3
    assert [c[0] for c in virsh.commands()] == ['suspend', 'domstate']


def test_a_missing_command_says_which_variable_names_it(tmp_path):
    backend = gf.LibvirtBackend(str(tmp_path / 'no-virsh'))
    assert not backend.available()
    with pytest.raises(gf.FaultFailed, match=gf.VIRSH_VARIABLE):
        backend.fault(SERVER, 'power_off')


# The fault driver's control API

class _Driver(object):
    """What the control API asks of the fault driver."""

    def __init__(self):
        self.injected = []

    def guest(self, uuid):
        return {'uuid': uuid, 'host': 'node1', 'power_state': 1, 'next': {}}

    def inject(self, uuid, fault, operation, seconds):
        if uuid != SERVER['id']:
            raise KeyError(uuid)
        self.injected.append((uuid, fault, operation, seconds))
        found = self.guest(uuid)
        if operation:
            found['next'] = {operation: seconds or 'fail'}
        return found


@pytest.fixture
def fault_driver(tmp_path):
    """A control API on 127.0.0.1 and the file saying where it is."""
    driver = _Driver()
    httpd = control.serve(driver, 0)
    where = tmp_path / 'fault-driver.json'
    where.write_text(json.dumps(
        {'node1': 'http://127.0.0.1:%d' % httpd.server_address[1]}))
    yield driver, gf.FaultDriverBackend(where)
    httpd.shutdown()
    httpd.server_close()


def test_the_fault_driver_makes_the_fault_on_the_servers_host(fault_driver):
    driver, backend = fault_driver
    found = backend.fault(SERVER, 'hang_next', operation='reboot',
                          seconds=30)
    assert driver.injected == [(SERVER['id'], 'hang_next', 'reboot', 30)]
    assert found == {'uuid': SERVER['id'], 'host': 'node1',
                     'power_state': 1, 'next': {'reboot': 30}}
    assert backend.operation_faults


def test_the_fault_driver_refusing_says_why(fault_driver):
    _driver, backend = fault_driver
    with pytest.raises(gf.FaultFailed, match='404.*no guest'):
        backend.fault(dict(SERVER, id='other'), 'crash')
    with pytest.raises(gf.FaultFailed, match='no control API.*node9'):
        backend.fault(dict(SERVER, **{gf.HOST: 'node9'}), 'crash')


# Which backend a run takes

@pytest.mark.parametrize('wanted,driver_file,on_path,found', [
    ('fault-driver', False, False, gf.FaultDriverBackend),
    ('libvirt', True, False, gf.LibvirtBackend),
    (' LibVirt ', True, True, gf.LibvirtBackend),
    ('none', True, True, type(None)),
    ('', True, True, gf.FaultDriverBackend),
    ('', False, True, gf.LibvirtBackend),
    ('', False, False, type(None)),
])
def test_the_environment_or_what_is_there_chooses_the_backend(
        virsh, monkeypatch, tmp_path, wanted, driver_file, on_path, found):
    where = tmp_path / 'fault-driver.json'
    if driver_file:
        where.write_text('{}')
    monkeypatch.setenv('PATH', str(virsh.bin) if on_path else str(tmp_path))
    backend = gf.select({gf.VARIABLE: wanted}, where)
    assert type(backend) is found
    if found is gf.FaultDriverBackend:
        assert backend.where == where


def test_the_virsh_command_is_the_environments(virsh, tmp_path):
    backend = gf.select({gf.VIRSH_VARIABLE: '"%s" -c test:///default'
                         % virsh.path}, tmp_path / 'none.json')
    assert backend.command == [str(virsh.path), '-c', 'test:///default']
    assert gf.LibvirtBackend().command == ['virsh', '-c', 'qemu:///system']


def test_an_unknown_backend_is_an_error(tmp_path):
    with pytest.raises(ValueError, match='xen'):
        gf.select({gf.VARIABLE: 'xen'}, tmp_path / 'fault-driver.json')


def _admin(compute='http://nova/compute/v2.1', fakecloud=None):
    """Enough of an admin Cloud for has_real_nova and guest_fault."""
    session = mock.Mock()
    session.get.return_value.json.return_value = {'server': SERVER}
    return types.SimpleNamespace(fakecloud_root=lambda: fakecloud,
                                 endpoint=lambda service: compute,
                                 session=session)


def test_real_nova_needs_a_guest_fault_backend(monkeypatch):
    monkeypatch.setattr(cloud, 'guest_fault_backend', lambda: None)
    assert not cloud.Cloud.has_real_nova(_admin())
    monkeypatch.setattr(cloud, 'guest_fault_backend', mock.Mock)
    assert cloud.Cloud.has_real_nova(_admin())
    assert not cloud.Cloud.has_real_nova(_admin(fakecloud='http://f'))


def test_a_guest_fault_goes_to_the_backend_with_the_admins_server(
        monkeypatch):
    backend = mock.Mock()
    monkeypatch.setattr(cloud, 'guest_fault_backend', lambda: backend)
    admin = _admin()
    found = cloud.Cloud.guest_fault(admin, SERVER['id'], 'hang_next',
                                    operation='reboot')
    assert found is backend.fault.return_value
    backend.fault.assert_called_once_with(SERVER, 'hang_next',
                                          operation='reboot')
    admin.session.get.assert_called_once_with(
        'http://nova/compute/v2.1/servers/%s' % SERVER['id'])


# Which tests a run deselects

class _Item(object):
    def __init__(self, name, *markers):
        self.name = name
        self.markers = markers

    def get_closest_marker(self, name):
        return mock.sentinel.marker if name in self.markers else None


def _collect(monkeypatch, backend, environ=None, switchable=False):
    """(the tests kept, the summary's lines) for one backend."""
    monkeypatch.setattr(cloud, 'guest_fault_backend', lambda: backend)
    monkeypatch.setattr(conftest.nova_backend, 'switchable',
                        lambda: switchable)
    monkeypatch.setattr(conftest, '_probe', lambda: True)
    monkeypatch.setattr(
        cloud, 'Cloud', lambda name: types.SimpleNamespace(
            has_real_nova=lambda: backend is not None))
    monkeypatch.delenv(gf.VARIABLE, raising=False)
    for key, value in (environ or {}).items():
        monkeypatch.setenv(key, value)
    config = types.SimpleNamespace(stash=pytest.Stash(), hook=mock.Mock())
    items = [_Item('plain'), _Item('real', 'real_nova'),
             _Item('hang', 'real_nova', conftest.OPERATION_MARKER)]
    conftest.pytest_collection_modifyitems(None, config, items)
    lines = []
    conftest.pytest_terminal_summary(
        mock.Mock(write_line=lines.append), 0, config)
    return [i.name for i in items], lines


def test_libvirt_deselects_the_operation_fault_tests_and_says_so(
        monkeypatch):
    kept, lines = _collect(monkeypatch, gf.LibvirtBackend())
    assert kept == ['plain', 'real']
    assert lines == ['1 functional test needs guest operation faults '
                     '(fail_next, hang_next) and was deselected: the '
                     'libvirt guest-fault backend cannot make them']


def test_the_fault_driver_runs_them(monkeypatch, tmp_path):
    kept, lines = _collect(monkeypatch, gf.FaultDriverBackend(tmp_path))
    assert kept == ['plain', 'real', 'hang'] and not lines


def test_the_local_deployment_will_run_the_fault_driver(monkeypatch):
    kept, lines = _collect(monkeypatch, None, switchable=True)
    assert kept == ['plain', 'real', 'hang'] and not lines
    kept, lines = _collect(monkeypatch, gf.LibvirtBackend(),
                           environ={gf.VARIABLE: 'libvirt'},
                           switchable=True)
    assert kept == ['plain', 'real']


def test_no_backend_deselects_every_real_nova_test(monkeypatch):
    kept, lines = _collect(monkeypatch, None)
    assert kept == ['plain']
    assert lines == ['2 functional tests need real Nova whose guests can '
                     'be failed and were deselected: no guest-fault '
                     'backend (set %s)' % gf.VARIABLE]


def test_a_wrong_setting_keeps_the_operation_fault_tests_to_say_it(
        monkeypatch):
    def wrong():
        raise ValueError('%s=xen: not one of ...' % gf.VARIABLE)
    monkeypatch.setattr(cloud, 'guest_fault_backend', wrong)
    monkeypatch.setattr(conftest.nova_backend, 'switchable', lambda: False)
    monkeypatch.setenv(gf.VARIABLE, 'xen')
    config = types.SimpleNamespace(stash=pytest.Stash(), hook=mock.Mock())
    items = [_Item('hang', conftest.OPERATION_MARKER)]
    conftest._deselect_operation_faults(config, items)
    assert [i.name for i in items] == ['hang']
    assert not config.hook.pytest_deselected.called


def test_lc_all_is_the_only_change_to_virshs_environment(virsh,
                                                         monkeypatch):
    monkeypatch.setenv('LC_ALL', 'de_DE.UTF-8')
    monkeypatch.setenv('HEAT_HEALTH_PROBE', 'kept')
    with mock.patch.object(gf.subprocess, 'run',
                           wraps=gf.subprocess.run) as run:
        virsh.backend().power_state(DOMAIN)
    env = run.call_args.kwargs['env']
    assert env['LC_ALL'] == 'C' and env['HEAT_HEALTH_PROBE'] == 'kept'
    assert os.environ['LC_ALL'] == 'de_DE.UTF-8'
