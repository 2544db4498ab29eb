"""The functional suite's users, stacks and servers, and which tests run.

The target deployment is the one of the clouds in ``clouds.yaml`` the
environment names (see ``cloud``). Tests marked ``fakecloud`` need
fakecloud's fault injection or Octavia's simulated member status, which
only the local deployment (``tools/localcloud``) has: when the target
cloud has no fakecloud they are deselected, and the summary says how many.
``HEAT_HEALTH_FAKECLOUD=0`` deselects them whatever the cloud,
``HEAT_HEALTH_FAKECLOUD=1`` keeps them without asking the cloud. Tests
marked ``real_nova`` need real Nova (see ``nova_backend``): the local
deployment is turned to the Nova each test needs. Tests marked
``guest_operation_faults`` also make an operation fail or hang (see
``guest_faults``): deselected where the backend cannot, such as libvirt.
"""

import datetime
import os

from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
import pytest

from tests.functional import cloud
from tests.functional import engines
from tests.functional import guest_faults
from tests.functional import nova_backend
from tests.functional import service_logs

NOVA_API_VERSION = '2.1'
MARKER = 'fakecloud'
MARKER_HELP = ("%s: needs fakecloud's fault injection or Octavia's "
               "simulated member status (the local deployment); "
               "deselected when the target cloud has no fakecloud" % MARKER)
FORCE_VARIABLE = 'HEAT_HEALTH_FAKECLOUD'
ENGINE_MARKER = 'engine_control'
ENGINE_MARKER_HELP = (
    "%s: stops and starts the deployment's heat-health-engine (the local "
    "deployment does it; elsewhere HEAT_HEALTH_ENGINE_STOP and "
    "HEAT_HEALTH_ENGINE_START are the commands); deselected without "
    "them" % ENGINE_MARKER)
OPERATION_MARKER = 'guest_operation_faults'
OPERATION_MARKER_HELP = (
    "%s: makes a server's next operation fail or hang (fail_next, "
    "hang_next) or stops a compute (tests/functional/computes.py), which "
    "only the local deployment's fault driver computes allow; deselected "
    "where the guest-fault backend cannot (libvirt)" % OPERATION_MARKER)
_FALSE = ('0', 'false', 'no', 'off')
_TRUE = ('1', 'true', 'yes', 'on')

# What this run found of fakecloud: (present, why), and what it deselected.
_FAKECLOUD = pytest.StashKey()
_DESELECTED = pytest.StashKey()
_ENGINE_DESELECTED = pytest.StashKey()
_REAL_DESELECTED = pytest.StashKey()
_OPERATION_DESELECTED = pytest.StashKey()
# The Nova the local deployment ran when this run started, if it turned it.
_NOVA_FOUND = pytest.StashKey()


def fakecloud_wanted(environ, probe):
    """(whether the fakecloud tests run, why not), by the environment.

    :param environ: the environment (``HEAT_HEALTH_FAKECLOUD``).
    :param probe: asks the target cloud whether it has fakecloud; called
        only when the environment does not decide.
    """
    forced = environ.get(FORCE_VARIABLE, '').strip().lower()
    if forced in _FALSE:
        return False, '%s=%s' % (FORCE_VARIABLE, environ[FORCE_VARIABLE])
    if forced in _TRUE:
        return True, None
    if probe():
        return True, None
    return False, 'the target cloud has none'


def split_fakecloud(items):
    """(tests marked fakecloud, the others), each in collection order."""
    marked, others = [], []
    for item in items:
        (marked if item.get_closest_marker(MARKER) else others).append(item)
    return marked, others


def deselect_note(count, why):
    """The summary's line about the deselected fakecloud tests."""
    return ('%d functional test%s need%s fakecloud and %s deselected: %s'
            % (count, '' if count == 1 else 's', 's' if count == 1 else '',
               'was' if count == 1 else 'were', why))


def engine_note(count):
    """The summary's line about the deselected engine-stopping tests."""
    return ('%d functional test%s stop%s heat-health-engine and %s '
            'deselected: set %s and %s to the commands that stop and start '
            'it' % (count, '' if count == 1 else 's',
                    's' if count == 1 else '', 'was' if count == 1 else
                    'were', engines.STOP_VARIABLE, engines.START_VARIABLE))


def _probe():
    # The local deployment runs fakecloud again for the tests needing it.
    return (nova_backend.switchable() or
            cloud.Cloud(cloud.cloud_name('admin')).has_fakecloud())


def _fakecloud(config):
    """(present, why not) for this run; the cloud is asked once.

    present is None when the cloud could not be asked (why says why).
    """
    if _FAKECLOUD not in config.stash:
        try:
            found = fakecloud_wanted(os.environ, _probe)
        except Exception as exc:
            found = (None, '%s: %s' % (type(exc).__name__, exc))
        config.stash[_FAKECLOUD] = found
    return config.stash[_FAKECLOUD]


def pytest_configure(config):
    config.addinivalue_line('markers', MARKER_HELP)
    config.addinivalue_line('markers', ENGINE_MARKER_HELP)
    config.addinivalue_line('markers', nova_backend.MARKER_HELP)
    config.addinivalue_line('markers', OPERATION_MARKER_HELP)


def _deselect_engine_stoppers(config, items):
    """Tests that stop the engine need a way to: localcloud or commands."""
    stopping = [i for i in items if i.get_closest_marker(ENGINE_MARKER)]
    if not stopping or engines.engine_commands(os.environ):
        return
    if _fakecloud(config)[0] is not False:
        return  # the local deployment (or unknown: the test will say)
    config.hook.pytest_deselected(items=stopping)
    items[:] = [i for i in items if i not in stopping]
    config.stash[_ENGINE_DESELECTED] = len(stopping)


def pytest_collection_modifyitems(session, config, items):
    """Deselect the tests the target cloud cannot run."""
    _deselect_fakecloud(config, items)
    _deselect_engine_stoppers(config, items)
    _deselect_real_nova(config, items)
    _deselect_operation_faults(config, items)
    nova_backend.real_last(items)


def _deselect_real_nova(config, items):
    """The real Nova tests, when there is none and none can be had."""
    marked = [i for i in items if i.get_closest_marker(nova_backend.MARKER)]
    if not marked or nova_backend.switchable():
        return
    try:
        present = cloud.Cloud(cloud.cloud_name('admin')).has_real_nova()
    except Exception:
        return  # unknown: the tests run and say what is wrong
    if present:
        return
    why = 'the target cloud has none'
    try:
        if cloud.guest_fault_backend() is None:
            why = 'no guest-fault backend (set %s)' % guest_faults.VARIABLE
    except ValueError:
        pass  # the setting is wrong, and the cloud has no real Nova
    config.hook.pytest_deselected(items=marked)
    items[:] = [i for i in items if i not in marked]
    config.stash[_REAL_DESELECTED] = (len(marked), why)


def operation_faults(environ, backend, switchable):
    """(whether operation faults can be made, why not), by the backend.

    :param backend: the guest-fault backend found (``guest_faults``);
        called only when the environment does not name one and the local
        deployment will not run the fault driver anyway.
    :param switchable: whether the local deployment is turned to real Nova,
        whose computes run the fault driver.
    """
    if switchable and not environ.get(guest_faults.VARIABLE):
        return True, None
    found = backend()
    if found is None:
        return False, 'there is no guest-fault backend'
    if not found.operation_faults:
        return False, 'the %s guest-fault backend cannot make them' % (
            found.name)
    return True, None


def real_nova_note(count, why):
    """The summary's line about the deselected real Nova tests."""
    return ('%d functional test%s need%s real Nova whose guests can be '
            'failed and %s deselected: %s' % (
                count, '' if count == 1 else 's', 's' if count == 1 else '',
                'was' if count == 1 else 'were', why))


def operation_note(count, why):
    """The summary's line about the deselected operation-fault tests."""
    return ('%d functional test%s need%s guest operation faults (%s) and '
            '%s deselected: %s' % (
                count, '' if count == 1 else 's', 's' if count == 1 else '',
                ', '.join(guest_faults.OPERATION_FAULTS),
                'was' if count == 1 else 'were', why))


def _deselect_operation_faults(config, items):
    """The tests failing an operation, where no backend fails them."""
    marked = [i for i in items if i.get_closest_marker(OPERATION_MARKER)]
    if not marked:
        return
    try:
        present, why = operation_faults(
            os.environ, cloud.guest_fault_backend, nova_backend.switchable())
    except ValueError:
        return  # a wrong setting: the tests run and say it
    if present:
        return
    config.hook.pytest_deselected(items=marked)
    items[:] = [i for i in items if i not in marked]
    config.stash[_OPERATION_DESELECTED] = (len(marked), why)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Turn the local deployment to the Nova the test needs, first."""
    wanted = nova_backend.needs(item, MARKER)
    if wanted is None or not nova_backend.switchable():
        return
    found = nova_backend.current()
    if found != wanted:
        item.config.stash.setdefault(_NOVA_FOUND, found)
        nova_backend.switch(wanted)


def pytest_sessionfinish(session, exitstatus):
    """Leave the local deployment on the Nova it ran when the run began."""
    found = session.config.stash.get(_NOVA_FOUND, None)
    if found is not None and nova_backend.current() != found:
        nova_backend.switch(found)


def _deselect_fakecloud(config, items):
    """The fakecloud tests, when the target cloud has none."""
    marked, others = split_fakecloud(items)
    if not marked:
        return
    present, why = _fakecloud(config)
    if present or present is None:
        # Unknown: the tests run, and the users' fixtures say what is wrong.
        return
    config.hook.pytest_deselected(items=marked)
    items[:] = others
    config.stash[_DESELECTED] = (len(marked), why)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _REAL_DESELECTED in config.stash:
        terminalreporter.write_sep('-', 'real Nova')
        terminalreporter.write_line(real_nova_note(
            *config.stash[_REAL_DESELECTED]))
    if _OPERATION_DESELECTED in config.stash:
        terminalreporter.write_sep('-', 'guest operation faults')
        terminalreporter.write_line(operation_note(
            *config.stash[_OPERATION_DESELECTED]))
    if _ENGINE_DESELECTED in config.stash:
        terminalreporter.write_sep('-', 'heat-health-engine')
        terminalreporter.write_line(engine_note(
            config.stash[_ENGINE_DESELECTED]))
    if _DESELECTED in config.stash:
        terminalreporter.write_sep('-', 'fakecloud')
        terminalreporter.write_line(deselect_note(*config.stash[_DESELECTED]))
    elif config.stash.get(_FAKECLOUD, (True,))[0] is None:
        terminalreporter.write_sep('-', 'fakecloud')
        terminalreporter.write_line(
            'Could not ask the target cloud whether it has fakecloud (%s): '
            'the fakecloud tests were kept' % config.stash[_FAKECLOUD][1])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the local deployment's errors to a failed test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when != 'teardown' and _local(item.config):
        started = datetime.datetime.fromtimestamp(call.start)
        errors = service_logs.errors_since(started)
        if errors:
            report.sections.append(('deployment errors', errors))


def _local(config):
    """Whether the target is the local deployment, whose logs are ours."""
    return bool(_fakecloud(config)[0])


def _user(role):
    name = cloud.cloud_name(role)
    try:
        return cloud.Cloud(name)
    except cloud.CloudNotFound as exc:
        pytest.fail('no %s user: %s. Name the clouds with OS_CLOUD and '
                    'HEAT_HEALTH_{READER,ADMIN,ALT}_CLOUD and the file with '
                    'OS_CLIENT_CONFIG_FILE, or bring up the local '
                    'deployment (tools/run-tests does both)' % (role, exc))


@pytest.fixture(scope='session')
def demo():
    return _user('demo')


@pytest.fixture(scope='session')
def reader():
    """A reader of demo's project."""
    return _user('reader')


@pytest.fixture(scope='session')
def admin():
    return _user('admin')


@pytest.fixture(scope='session')
def alt_demo():
    """A member of another project than demo's."""
    return _user('alt_demo')


@pytest.fixture
def stacks(demo):
    """Create stacks as demo; delete them after the test."""
    created = []

    def create(prefix, template, *params):
        stack = demo.create_stack(prefix, template, *params)
        created.append(stack['stack_name'])
        return stack
    yield create
    for name in created:
        demo.delete_stack(name)


@pytest.fixture(scope='module')
def demo_nova(demo):
    return nova_client.Client(NOVA_API_VERSION, session=demo.session,
                              endpoint_type=demo.interface,
                              region_name=demo.region_name)


@pytest.fixture(scope='module')
def admin_nova(admin):
    return nova_client.Client(NOVA_API_VERSION, session=admin.session,
                              endpoint_type=admin.interface,
                              region_name=admin.region_name)


@pytest.fixture
def server(demo_nova):
    """An ACTIVE server of the demo project, deleted after the test."""
    created = demo_nova.servers.create(
        'test-server', demo_nova.glance.find_image('cirros'),
        demo_nova.flavors.find(name='m1.tiny'),
        nics=[{'net-id': demo_nova.neutron.find_network('private').id}])
    cloud.wait_server_status(demo_nova, created.id, 'ACTIVE')
    yield demo_nova.servers.get(created.id)
    try:
        demo_nova.servers.delete(created.id)
    except nova_exc.NotFound:
        pass
