"""Drive the local deployment as its users do: the openstack CLI, and raw
HTTP (through keystoneauth) for requests the CLI cannot send."""

import json
import os
import pathlib
import subprocess
import sys
import time
import uuid

from keystoneauth1 import loading
from keystoneauth1 import session as ks_session

REPO = pathlib.Path(__file__).resolve().parents[2]
STATE_DIR = pathlib.Path(os.environ.get('LOCALCLOUD_DIR',
                                        REPO / '.localcloud'))
TEMPLATES = pathlib.Path(__file__).resolve().parent / 'templates'
OPENSTACK = str(pathlib.Path(sys.executable).parent / 'openstack')


def wait_server_status(nova, server_id, status, timeout=30):
    """Wait until Nova shows the server in that status."""
    deadline = time.time() + timeout
    current = None
    while time.time() < deadline:
        current = nova.servers.get(server_id).status
        if current == status:
            return
        time.sleep(0.2)
    raise AssertionError('server %s is %s, not %s after %ss'
                         % (server_id, current, status, timeout))


def read_openrc(user):
    env = {}
    for line in (STATE_DIR / ('%s-openrc' % user)).read_text().splitlines():
        line = line.strip()
        if line.startswith('export ') and '=' in line:
            key, value = line[len('export '):].split('=', 1)
            env[key] = value.strip('\'"')
    return env


class CommandFailed(Exception):
    def __init__(self, args, result):
        self.result = result
        super(CommandFailed, self).__init__(
            'openstack %s exited %d: %s' % (' '.join(args), result.returncode,
                                            _errors(result.stderr)))


def _errors(stderr):
    """A failed command's error, with the API's answer if --debug ran.

    Heat answers an unexpected error with a bare "Internal Error" for the
    CLI; the body it sent names the exception's type.
    """
    lines = stderr.strip().splitlines()
    if not any(line.startswith('REQ: ') for line in lines):
        return stderr.strip()
    bodies = [line for line in lines
              if line.startswith('RESP BODY') and '"error"' in line]
    errors = [line for line in lines if line.startswith('ERROR')]
    return '\n'.join(bodies[-2:] + errors[-3:])


class Cloud(object):
    """One Keystone user of the local deployment."""

    def __init__(self, user):
        self.user = user
        self.creds = read_openrc(user)
        self.env = dict(os.environ, **self.creds)
        self._session = None

    def run(self, *args, check=True):
        result = subprocess.run([OPENSTACK] + list(args), env=self.env,
                                capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=600)
        if check and result.returncode != 0:
            raise CommandFailed(args, result)
        return result

    def json(self, *args):
        return json.loads(self.run(*(args + ('-f', 'json'))).stdout)

    def fails(self, *args):
        """Run a command that must fail; return its error output."""
        result = self.run(*args, check=False)
        assert result.returncode != 0, (
            'openstack %s succeeded: %s' % (' '.join(args), result.stdout))
        return result.stderr

    # Stacks

    def create_stack(self, prefix, template, *params):
        name = '%s-%s' % (prefix, uuid.uuid4().hex[:8])
        # --debug: a failure says what Heat answered (see _errors).
        args = ['--debug', 'stack', 'create', '--wait', '-t',
                str(TEMPLATES / template)]
        for param in params:
            args += ['--parameter', param]
        self.run(*(args + [name]))
        stack = self.json('stack', 'show', name)
        assert stack['stack_status'] == 'CREATE_COMPLETE', stack
        return stack

    def delete_stack(self, name):
        self.run('stack', 'delete', '--yes', name, check=False)

    def resource(self, stack, name):
        return self.json('stack', 'resource', 'show', stack, name)

    def nested_resources(self, stack):
        return self.json('stack', 'resource', 'list', '--nested-depth', '3',
                         stack)

    def events(self, stack, nested_depth=0):
        args = ['stack', 'event', 'list', stack]
        if nested_depth:
            args += ['--nested-depth', str(nested_depth)]
        return self.json(*args)

    def wait_for(self, predicate, what, timeout=120, interval=1):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        raise AssertionError('timed out after %ss waiting for %s'
                             % (timeout, what))

    # Raw HTTP

    @property
    def session(self):
        if self._session is None:
            loader = loading.get_plugin_loader('password')
            auth = loader.load_from_options(
                auth_url=self.creds['OS_AUTH_URL'],
                username=self.creds['OS_USERNAME'],
                password=self.creds['OS_PASSWORD'],
                project_name=self.creds['OS_PROJECT_NAME'],
                user_domain_name=self.creds.get('OS_USER_DOMAIN_NAME',
                                                'Default'),
                project_domain_name=self.creds.get(
                    'OS_PROJECT_DOMAIN_NAME', 'Default'))
            # A hung service fails the test instead of hanging the run.
            self._session = ks_session.Session(auth=auth, timeout=60)
        return self._session

    def resource_url(self, stack, resource):
        endpoint = self.session.get_endpoint(service_type='orchestration',
                                             interface='public')
        return '%s/stacks/%s/%s/resources/%s' % (
            endpoint, stack['stack_name'], stack['id'], resource)

    def health_report(self, stack):
        """GET .../stacks/{name}/{id}/health as this user (a dict)."""
        endpoint = self.session.get_endpoint(service_type='orchestration',
                                             interface='public')
        return self.session.get('%s/stacks/%s/%s/health' % (
            endpoint, stack['stack_name'], stack['id'])).json()['health']

    def patch_resource(self, stack, resource, body):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.session.request(
            self.resource_url(stack, resource), 'PATCH', data=data,
            headers={'Content-Type': 'application/json'}, raise_exc=False)

    # fakecloud's admin fault API

    def fakecloud_url(self, path):
        compute = self.session.get_endpoint(service_type='compute',
                                            interface='public')
        return compute.replace('/compute/v2.1', '/fakecloud') + path

    def inject_fault(self, server_id, fault, **extra):
        """POST a fault for one server; the response is returned as is."""
        return self.session.post(
            self.fakecloud_url('/servers/%s/fault' % server_id),
            json=dict(fault=fault, **extra), raise_exc=False)

    def inject_api_fault(self, fault, **extra):
        return self.session.post(self.fakecloud_url('/fault'),
                                 json=dict(fault=fault, **extra),
                                 raise_exc=False)
