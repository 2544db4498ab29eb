import pytest

from tests.functional import cloud


def _user(name):
    if not (cloud.STATE_DIR / ('%s-openrc' % name)).exists():
        pytest.fail('the local deployment is not up: run tools/localcloud '
                    'up (no %s-openrc in %s)' % (name, cloud.STATE_DIR))
    return cloud.Cloud(name)


@pytest.fixture(scope='session')
def demo():
    return _user('demo')


@pytest.fixture(scope='session')
def reader():
    return _user('reader')


@pytest.fixture(scope='session')
def admin():
    return _user('admin')


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
