import datetime

from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
import pytest

from tests.functional import cloud
from tests.functional import service_logs

NOVA_API_VERSION = '2.1'


def _user(name):
    if not (cloud.STATE_DIR / ('%s-openrc' % name)).exists():
        pytest.fail('the local deployment is not up: run tools/localcloud '
                    'up (no %s-openrc in %s)' % (name, cloud.STATE_DIR))
    return cloud.Cloud(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the deployment's errors to a failed test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when != 'teardown':
        started = datetime.datetime.fromtimestamp(call.start)
        errors = service_logs.errors_since(started)
        if errors:
            report.sections.append(('deployment errors', errors))


@pytest.fixture(scope='session')
def demo():
    return _user('demo')


@pytest.fixture(scope='session')
def reader():
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
    return nova_client.Client(NOVA_API_VERSION, session=demo.session)


@pytest.fixture(scope='module')
def admin_nova(admin):
    return nova_client.Client(NOVA_API_VERSION, session=admin.session)


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
