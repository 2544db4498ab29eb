"""OpenStackClient plugin: the ``openstack stack health`` commands.

heat-health answers inside heat-api's own pipeline, so its client rides on
the orchestration client OSC already builds: same catalog endpoint, session,
region and interface as every other ``openstack`` command.
"""

from urllib import parse

from heatclient import exc as heat_exc
from osc_lib import exceptions
from osc_lib import utils

API_NAME = 'health'
API_VERSION_OPTION = 'os_health_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = {'1': 'heat_health.osc.plugin.HealthClient'}


def _server_said(error):
    """The message of a Heat error body, not heatclient's 'ERROR: ...'."""
    message = (error.error.get('error') or {}).get('message') or str(error)
    return '%s (HTTP %s)' % (message, error.code)


class HealthClient(object):
    """The health API of Heat stacks, each addressed by its name or id.

    heat-health finds the stack itself, as Heat's lookup does: one request
    per command, and the id of another project's stack is answered 403
    (Heat's answer to a path into another project), not 404.
    """

    def __init__(self, heat):
        self._http = heat.http_client

    @staticmethod
    def _path(stack, suffix=''):
        return '/stacks/%s/health%s' % (parse.quote(stack, safe=''), suffix)

    def _call(self, method, path, **kwargs):
        # Every HTTP error (403 by policy, 404 for an unknown policy, 503
        # when the engine is silent) becomes a one-line CommandError.
        try:
            response = getattr(self._http, method)(path, **kwargs)
        except heat_exc.HTTPException as error:
            raise exceptions.CommandError(_server_said(error))
        return response.json()

    def report(self, stack):
        """The stack's health report: policies, their targets, events."""
        return self._call('get', self._path(stack))['health']

    def events(self, stack, since=None, marker=None, limit=None):
        """Timeline events, oldest first, after ``marker`` (an event id)."""
        query = {key: value for key, value in (('since', since),
                                               ('marker', marker),
                                               ('limit', limit))
                 if value is not None}
        return self._call('get', self._path(stack, '/events'),
                          params=query)['events']

    def pause(self, stack, policy=None, reason=None):
        """Pause healing; returns the affected policies as now stored."""
        body = {key: value for key, value in (('policy', policy),
                                              ('reason', reason))
                if value is not None}
        return self._call('post', self._path(stack, '/pause'),
                          data=body)['policies']

    def resume(self, stack, policy=None):
        """Resume healing; returns the affected policies as now stored."""
        body = {'policy': policy} if policy is not None else {}
        return self._call('post', self._path(stack, '/resume'),
                          data=body)['policies']


def make_client(instance):
    """The health client of the requested API version."""
    version = instance._api_version[API_NAME]
    if version not in API_VERSIONS:
        raise exceptions.UnsupportedVersion(
            'heat-health API version %s is not supported; use one of: %s.'
            % (version, ', '.join(API_VERSIONS)))
    return HealthClient(instance.orchestration)


def build_option_parser(parser):
    """Add ``--os-health-api-version`` to OSC's global options."""
    parser.add_argument(
        '--os-health-api-version',
        metavar='<health-api-version>',
        default=utils.env('OS_HEALTH_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='heat-health API version, default=%s '
             '(Env: OS_HEALTH_API_VERSION)' % DEFAULT_API_VERSION)
    return parser
