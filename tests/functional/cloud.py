"""Drive a Heat deployment with heat-health as its users do: the openstack
CLI, and raw HTTP (through keystoneauth) for requests the CLI cannot send
and for the stacks every test makes, which the CLI would make slowly.

Each user is a cloud of ``clouds.yaml``, named by the environment as the
OpenStack clients name theirs:

=========  ============================  =====================
user       variable                      default
=========  ============================  =====================
demo       ``OS_CLOUD``                  ``devstack``
reader     ``HEAT_HEALTH_READER_CLOUD``  ``<OS_CLOUD>-reader``
admin      ``HEAT_HEALTH_ADMIN_CLOUD``   ``<OS_CLOUD>-admin``
alt_demo   ``HEAT_HEALTH_ALT_CLOUD``     ``<OS_CLOUD>-alt``
=========  ============================  =====================

``clouds.yaml`` is ``OS_CLIENT_CONFIG_FILE`` when set, else the first found
on the clients' search path. Every service URL comes from the catalog.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import weakref

from heatclient.common import template_utils
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import loading
from keystoneauth1 import session as ks_session
from openstack.config import loader as os_config
from openstack import exceptions as sdk_exceptions

from tests.functional import guest_faults

REPO = pathlib.Path(__file__).resolve().parents[2]
# The local deployment's state (tools/localcloud): read only by the helpers
# of the tests marked fakecloud, and by the benchmarks.
STATE_DIR = pathlib.Path(os.environ.get('LOCALCLOUD_DIR',
                                        REPO / '.localcloud'))
TEMPLATES = pathlib.Path(__file__).resolve().parent / 'templates'
OPENSTACK = str(pathlib.Path(sys.executable).parent / 'openstack')
# Seconds a request may take before the test fails instead of hanging.
HTTP_TIMEOUT = 60
# Seconds between reads of a stack being created, and the most to wait.
STACK_POLL_SECONDS = 0.5
STACK_TIMEOUT = 600

DEFAULT_CLOUD = 'devstack'
# user -> (variable naming its cloud, suffix of the default name)
ROLES = {'demo': ('OS_CLOUD', ''),
         'reader': ('HEAT_HEALTH_READER_CLOUD', '-reader'),
         'admin': ('HEAT_HEALTH_ADMIN_CLOUD', '-admin'),
         'alt_demo': ('HEAT_HEALTH_ALT_CLOUD', '-alt')}
# What fakecloud serves next to the compute API: its admin fault API.
FAKECLOUD_COMPUTE_PATH = '/compute/v2.1'
# Where the local deployment's real Nova computes serve their fault
# driver's control API: {host: URL}, written by tools/localcloud; the
# guest-fault backend by default when it exists.
FAULT_DRIVER_FILE = STATE_DIR / 'state' / 'fault-driver.json'
# Every user made, so that all forget their catalog when Nova changes.
_CLOUDS = weakref.WeakSet()
FAKECLOUD_PATH = '/fakecloud'
# Template parameter -> the variable that sets it for the target cloud.
STACK_PARAMETERS = {'image': 'HEAT_HEALTH_IMAGE',
                    'flavor': 'HEAT_HEALTH_FLAVOR',
                    'network': 'HEAT_HEALTH_NETWORK',
                    'subnet': 'HEAT_HEALTH_SUBNET'}


def guest_fault_backend():
    """The backend failing real Nova's guests in this run, or None."""
    return guest_faults.select(os.environ, FAULT_DRIVER_FILE)


class CloudNotFound(Exception):
    """No such cloud in clouds.yaml."""


def forget_sessions():
    """Every user gets a new token and catalog (after Nova changed)."""
    for made in list(_CLOUDS):
        made.forget_session()


def cloud_name(role):
    """The clouds.yaml cloud of a user (demo, reader, admin, alt_demo)."""
    variable, suffix = ROLES[role]
    if os.environ.get(variable):
        return os.environ[variable]
    return (os.environ.get('OS_CLOUD') or DEFAULT_CLOUD) + suffix


def clouds_yaml():
    """The clouds.yaml the environment names, or None (the search path)."""
    return os.environ.get('OS_CLIENT_CONFIG_FILE') or None


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


def _load(name, path):
    """The cloud's settings (an openstacksdk CloudRegion)."""
    try:
        with warnings.catch_warnings():
            # openstacksdk warns of InfluxDB support whatever the file says.
            warnings.filterwarnings('ignore', message='Support for InfluxDB')
            return os_config.OpenStackConfig(
                config_files=[str(path)] if path else None).get_one(
                    cloud=name)
    except sdk_exceptions.ConfigException as exc:
        raise CloudNotFound('cloud %r of %s: %s' % (
            name, path or 'the clouds.yaml search path', exc))


def _client_environ():
    """The environment without the OS_* settings of some other cloud.

    The CLI would let them override the cloud's own; clouds.yaml and
    secure.yaml as the environment names them are kept.
    """
    return {key: value for key, value in os.environ.items()
            if not key.startswith('OS_') or key.startswith('OS_CLIENT_')}


class Cloud(object):
    """One user of the deployment: a cloud of clouds.yaml.

    :param name: the cloud's name. A name that is no cloud of the file
        but one of the local deployment's users (``demo``, ``admin``...), as
        the benchmarks name them, stands for that user's cloud in
        ``.localcloud/clouds.yaml``.
    :param config_file: the clouds.yaml to read; by default
        ``OS_CLIENT_CONFIG_FILE``, else the clients' search path.
    :param auth: auth settings used instead of the cloud's (another user of
        the same deployment); see :meth:`other_user`.
    """

    def __init__(self, name, config_file=None, auth=None):
        if config_file is None:
            config_file = clouds_yaml()
        try:
            region = _load(name, config_file)
        except CloudNotFound:
            local = STATE_DIR / 'clouds.yaml'
            if name not in ROLES or not local.exists():
                raise
            # A user's name, as the benchmarks give it: its default cloud.
            name, config_file = DEFAULT_CLOUD + ROLES[name][1], str(local)
            region = _load(name, config_file)
        self.name = name
        self.config_file = config_file
        self.region = region
        self._own_auth = auth is None
        self.auth = dict(region.config.get('auth') or {}
                         if auth is None else auth)
        self.auth_type = region.config.get('auth_type') or 'password'
        self.interface = region.get_interface() or 'public'
        self.region_name = region.region_name or None
        self.username = self.auth.get('username')
        self.user = self.username
        self.env = self._cli_environ()
        self._session = None
        self._environment = None
        _CLOUDS.add(self)

    def forget_session(self):
        """A new token, with the catalog as it is now, at the next call."""
        if self._session is not None:
            # The cloud's auth plugin, shared by every session made of it,
            # holds the token.
            self._session.invalidate()
        self._session = None

    def _cli_environ(self):
        env = _client_environ()
        if self._own_auth:
            env['OS_CLOUD'] = self.name
            if self.config_file:
                env['OS_CLIENT_CONFIG_FILE'] = str(self.config_file)
            return env
        # Another user: the settings an openrc file would hold.
        env.pop('OS_CLIENT_CONFIG_FILE', None)
        env.update(('OS_%s' % key.upper(), str(value))
                   for key, value in self.auth.items() if value is not None)
        env.update(OS_AUTH_TYPE=self.auth_type, OS_INTERFACE=self.interface,
                   OS_IDENTITY_API_VERSION='3')
        if self.region_name:
            env['OS_REGION_NAME'] = self.region_name
        verify, _cert = self.region.get_requests_verify_args()
        if verify is False:
            env['OS_INSECURE'] = 'true'
        elif isinstance(verify, str):
            env['OS_CACERT'] = verify
        return env

    def other_user(self, username, password, project_name):
        """Another user of the same deployment, in the same domains."""
        auth = {key: value for key, value in self.auth.items()
                if key not in ('user_id', 'project_id', 'domain_id',
                               'domain_name', 'system_scope', 'token')}
        auth.update(username=username, password=password,
                    project_name=project_name)
        return Cloud(self.name, self.config_file, auth=auth)

    @property
    def creds(self):
        """The auth settings as an openrc file names them (OS_...)."""
        return {'OS_%s' % key.upper(): value
                for key, value in self.auth.items()}

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

    def stack_environment(self):
        """An environment file giving the templates this cloud's names.

        The templates' ``image``, ``flavor``, ``network`` and ``subnet``
        parameters default to devstack's and the local deployment's
        names; ``HEAT_HEALTH_IMAGE`` (else the first image whose name
        starts with "cirros", as devstack uploads it), ``HEAT_HEALTH_FLAVOR``,
        ``HEAT_HEALTH_NETWORK`` and ``HEAT_HEALTH_SUBNET`` override them.
        """
        if self._environment is None:
            defaults = {name: os.environ[variable]
                        for name, variable in STACK_PARAMETERS.items()
                        if os.environ.get(variable)}
            if 'image' not in defaults:
                names = sorted(i['Name'] for i in self.json('image', 'list'))
                if 'cirros' not in names:
                    cirros = [n for n in names if n.startswith('cirros')]
                    if cirros:
                        defaults['image'] = cirros[0]
            path = pathlib.Path(tempfile.mkdtemp(prefix='heat-health-env-'))
            self._environment = path / 'parameters.yaml'
            self._environment.write_text(json.dumps(
                {'parameter_defaults': defaults}))
        return str(self._environment)

    def create_stack(self, prefix, template, *params):
        """A stack of ``template`` made as this user, once CREATE_COMPLETE.

        Sent as ``openstack stack create`` sends it (heatclient reads the
        template's files and the environment), then read every half
        second: the CLI's ``--wait`` lists events every 5 s, and each CLI
        run costs a Python start of its own.

        :param params: ``key=value`` strings, as ``--parameter`` takes them.
        """
        name = '%s-%s' % (prefix, uuid.uuid4().hex[:8])
        files, body = template_utils.get_template_contents(
            template_file=str(TEMPLATES / template))
        env_files, environment = (
            template_utils.process_multiple_environments_and_files(
                env_paths=[self.stack_environment()]))
        files.update(env_files)
        resp = self.session.post(
            self._stacks_url(), raise_exc=False,
            json={'stack_name': name, 'template': body, 'files': files,
                  'environment': environment, 'disable_rollback': True,
                  'parameters': dict(p.split('=', 1) for p in params)})
        assert resp.status_code == 201, 'stack create %s: %s %s' % (
            name, resp.status_code, resp.text)

        def created():
            stack = self.stack(name)
            if not stack['stack_status'].endswith('_IN_PROGRESS'):
                return stack
        stack = self.wait_for(created, 'stack %s created' % name,
                              timeout=STACK_TIMEOUT,
                              interval=STACK_POLL_SECONDS)
        assert stack['stack_status'] == 'CREATE_COMPLETE', stack
        return stack

    def _stacks_url(self, *path):
        return '/'.join((self.endpoint('orchestration'), 'stacks') + path)

    def stack(self, name):
        """The stack as Heat's API shows it to this user; None if gone."""
        resp = self.session.get(self._stacks_url(name), raise_exc=False)
        if resp.status_code == 404:
            return None
        assert resp.status_code == 200, resp.text
        return resp.json()['stack']

    def delete_stack(self, name):
        """Ask Heat to delete the stack, if it is there; not waited for."""
        stack = self.stack(name)
        if stack is not None:
            self.session.delete(self._stacks_url(
                stack['stack_name'], stack['id']), raise_exc=False)

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
            if self._own_auth:
                auth = self.region.get_auth()
            else:
                auth = loading.get_plugin_loader(
                    self.auth_type).load_from_options(**self.auth)
            verify, cert = self.region.get_requests_verify_args()
            # A hung service fails the test instead of hanging the run.
            self._session = ks_session.Session(
                auth=auth, verify=verify, cert=cert, timeout=HTTP_TIMEOUT)
        return self._session

    def endpoint(self, service_type):
        """The service's URL in the catalog, as this user sees it."""
        return self.session.get_endpoint(service_type=service_type,
                                         interface=self.interface,
                                         region_name=self.region_name)

    def resource_url(self, stack, resource):
        return '%s/stacks/%s/%s/resources/%s' % (
            self.endpoint('orchestration'), stack['stack_name'], stack['id'],
            resource)

    def health_report(self, stack):
        """GET .../stacks/{name}/{id}/health as this user (a dict)."""
        return self.session.get('%s/stacks/%s/%s/health' % (
            self.endpoint('orchestration'), stack['stack_name'],
            stack['id'])).json()['health']

    def patch_resource(self, stack, resource, body):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.session.request(
            self.resource_url(stack, resource), 'PATCH', data=data,
            headers={'Content-Type': 'application/json'}, raise_exc=False)

    # fakecloud's admin fault API

    def fakecloud_root(self):
        """Where fakecloud's fault API would be, by the catalog; or None.

        fakecloud serves it next to its compute API (``.../compute/v2.1``).
        """
        try:
            compute = (self.endpoint('compute') or '').rstrip('/')
        except ks_exceptions.EndpointNotFound:
            return None
        if not compute.endswith(FAKECLOUD_COMPUTE_PATH):
            return None
        return compute[:-len(FAKECLOUD_COMPUTE_PATH)] + FAKECLOUD_PATH

    def has_fakecloud(self):
        """Whether the compute API is fakecloud's.

        Its fault API answers this user (an admin).
        """
        root = self.fakecloud_root()
        if root is None:
            return False
        resp = self.session.get(root + '/fault', raise_exc=False)
        if resp.status_code != 200:
            return False
        try:
            return 'api_faults' in resp.json()
        except ValueError:
            return False

    def has_real_nova(self):
        """Whether the compute API is real Nova whose guests tests can fail.

        Real Nova: not fakecloud's. Failing its guests needs a guest-fault
        backend (see ``guest_faults``): the local deployment's fault driver
        or, on a single-node devstack, libvirt.
        """
        if self.fakecloud_root() is not None or guest_fault_backend() is None:
            return False
        try:
            return bool(self.endpoint('compute'))
        except ks_exceptions.EndpointNotFound:
            return False

    def guest_fault(self, server_id, fault, **extra):
        """Make a fault happen to a server's guest, behind Nova's back.

        Through the guest-fault backend of this run (real Nova; this user
        an admin, who may see the server's host and domain). Faults:
        power_off, crash, pause (as QEMU on an I/O error), suspend, lose
        (gone from the hypervisor); fail_next and hang_next with an
        ``operation`` (the fault driver only); reset. Returns what the
        hypervisor holds of the guest.
        """
        backend = guest_fault_backend()
        assert backend is not None, (
            'no guest-fault backend: set %s' % guest_faults.VARIABLE)
        server = self.session.get('%s/servers/%s' % (
            self.endpoint('compute'), server_id)).json()['server']
        return backend.fault(server, fault, **extra)

    def fakecloud_url(self, path):
        root = self.fakecloud_root()
        assert root, ('the cloud %s has no fakecloud: a test using it is '
                      'marked fakecloud' % self.name)
        return root + path

    def inject_fault(self, server_id, fault, **extra):
        """POST a fault for one server; the response is returned as is."""
        return self.session.post(
            self.fakecloud_url('/servers/%s/fault' % server_id),
            json=dict(fault=fault, **extra), raise_exc=False)

    def fakecloud_server(self, server_id):
        """fakecloud's internal state of one server (a dict)."""
        resp = self.session.get(
            self.fakecloud_url('/servers/%s' % server_id), raise_exc=False)
        assert resp.status_code == 200, resp.text
        return resp.json()['server']

    def inject_api_fault(self, fault, **extra):
        return self.session.post(self.fakecloud_url('/fault'),
                                 json=dict(fault=fault, **extra),
                                 raise_exc=False)
