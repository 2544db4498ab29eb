"""The one place heat-health-engine talks to Nova: admin server listings.

Detectors ask two questions, both over every project at once: what changed
since a moment, and which servers exist now (in pages, so a full listing can
be spread over several poll cycles). Answers are plain dicts built straight
from the JSON, without novaclient's per-server objects, because they may
hold tens of thousands of servers. Any failure to get an answer (API error,
timeout, no endpoint, bad credentials) is raised as ``NovaUnavailable``:
detectors turn it into UNKNOWN, never into a failure of the servers.
"""

import collections
from urllib import parse

from heat.common import config as heat_config  # noqa: F401
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
from oslo_config import cfg
from oslo_utils import timeutils
import requests

from heat_health.common import config  # noqa: F401  (registers options)

# 2.16: a server's host_status and a service's forced_down are shown.
NOVA_API_VERSION = '2.16'

# Above this many server ids, one full listing costs less than a request
# per id: Nova's ``uuid`` filter takes one id (the last one given).
BY_ID_LIMIT = 20

# Above BY_ID_LIMIT ids, the listings of their projects (one request per
# project and page) are asked instead of a full listing when the ids are
# in at most this many projects: a takeover's servers are those of the
# policies taken, a share of the fleet that a full listing would list
# whole.
BY_PROJECT_LIMIT = 100

Server = collections.namedtuple('Server', ['status', 'addresses', 'name',
                                           'task_state', 'updated',
                                           'power_state', 'host'],
                                defaults=(None, None, None, None, None))
"""A server as listed: its status, IP addresses (all networks), name, the
task Nova is working on (None when idle), when it last changed, the
hypervisor's power state (Nova's integer; None when not shown), which alone
tells a guest paused or lost behind Nova's back from a running one, and
the compute host it is on (None when not shown or not placed)."""

# A compute host as Nova's host_status names it: UP, DOWN (its service
# forced down: fenced), MAINTENANCE (disabled; its guests still run),
# UNKNOWN (its nova-compute stopped reporting: dead, cut off, restarting).
HOST_STATES = (HOST_UP, HOST_DOWN, HOST_MAINTENANCE, HOST_UNKNOWN) = (
    'UP', 'DOWN', 'MAINTENANCE', 'UNKNOWN')


class NovaUnavailable(Exception):
    """Nova could not be asked or did not answer.

    ``code``: the HTTP status of Nova's answer, when it gave one.
    """

    def __init__(self, message, code=None):
        super(NovaUnavailable, self).__init__(message)
        self.code = code


Page = collections.namedtuple('Page', ['servers', 'next_marker'])
"""One page of a full listing: servers, and the marker of the next page
(None after the last one)."""


def admin_session(conf):
    """The keystoneauth session of heat-health-engine's admin listings."""
    section = conf.heat_health.nova_auth_section
    ks_loading.register_auth_conf_options(conf, section)
    ks_loading.register_session_conf_options(conf, section)
    auth = ks_loading.load_auth_from_conf_options(conf, section)
    return ks_session.Session(auth=auth)


def _ips(addresses):
    return [a['addr'] for net in (addresses or {}).values() for a in net
            if a.get('addr')]


def _servers(body):
    return {s['id']: Server(s.get('status'), _ips(s.get('addresses')),
                            s.get('name'), s.get('OS-EXT-STS:task_state'),
                            _updated(s.get('updated')),
                            s.get('OS-EXT-STS:power_state'),
                            s.get('OS-EXT-SRV-ATTR:host'))
            for s in body.get('servers', ())}


def host_state(service):
    """A nova-compute service's state as Nova's host_status rule has it."""
    if service.get('forced_down'):
        return HOST_DOWN
    if service.get('status') == 'disabled':
        return HOST_MAINTENANCE
    if service.get('state') != 'up':
        return HOST_UNKNOWN
    return HOST_UP


def _updated(stamp):
    """Nova's ``updated`` (ISO 8601) as naive UTC, or None."""
    if not stamp:
        return None
    try:
        return timeutils.normalize_time(timeutils.parse_isotime(stamp))
    except ValueError:
        return None


def _next_marker(body):
    for link in body.get('servers_links', ()):
        if link.get('rel') == 'next':
            query = parse.parse_qs(parse.urlsplit(link['href']).query)
            if query.get('marker'):
                return query['marker'][0]
    return None


class NovaAdapter(object):
    """Admin listings of all projects' servers through python-novaclient.

    Credentials are a keystoneauth section of heat.conf (by default Heat's
    own service user in ``[keystone_authtoken]``), which must be allowed to
    list all projects' servers (``all_tenants``).
    """

    def __init__(self, conf=cfg.CONF, client=None):
        self._conf = conf
        self._client = client
        self.requests = 0
        # Of which listings of servers (the poll's cost in Nova).
        self.server_lists = 0
        # Called after each answer: a listing of many pages progresses.
        self.on_request = None

    @property
    def client(self):
        if self._client is None:
            options = self._conf.heat_health
            self._client = nova_client.Client(
                NOVA_API_VERSION, session=admin_session(self._conf),
                region_name=self._conf.region_name_for_services,
                endpoint_type=options.nova_endpoint_type,
                timeout=options.nova_request_timeout)
        return self._client

    def _get(self, params, path='/servers/detail', key='servers'):
        self.requests += 1
        if key == 'servers':
            self.server_lists += 1
        url = path + '?' + parse.urlencode(params, doseq=True)
        try:
            _resp, body = self.client.client.get(url)
        except (nova_exc.ClientException, ks_exc.ClientException,
                requests.RequestException, ValueError) as e:
            raise NovaUnavailable('%s: %s' % (type(e).__name__, e),
                                  getattr(e, 'code', None) or
                                  getattr(e, 'http_status', None))
        if self.on_request is not None:
            self.on_request()
        if not isinstance(body, dict) or key not in body:
            raise NovaUnavailable('Nova answered without a %s list' %
                                  key.rstrip('s'))
        return body

    def _all_pages(self, params):
        servers = {}
        marker = None
        while True:
            page_params = dict(params, marker=marker) if marker else params
            body = self._get(page_params)
            servers.update(_servers(body))
            marker = _next_marker(body)
            if marker is None:
                return servers

    def list_changed(self, since):
        """{server_id: Server} changed at or after ``since``.

        ``since`` is a naive UTC datetime; deleted servers are included,
        with status DELETED.
        """
        return self._all_pages({'all_tenants': 1,
                                'changes-since': since.isoformat()})

    def list_all(self):
        """{server_id: Server} of every existing server."""
        return self._all_pages({'all_tenants': 1})

    def list_by_ids(self, server_ids, projects=None):
        """{server_id: Server} of these servers (those Nova lists).

        A request per id with Nova's ``uuid`` filter, which keeps only one
        value. Above BY_ID_LIMIT ids: the listings of ``projects`` (the
        projects these servers are in, when known and at most
        BY_PROJECT_LIMIT), else a full listing, filtered here.
        """
        ids = sorted(set(server_ids))
        if len(ids) <= BY_ID_LIMIT:
            servers = {}
            for server_id in ids:
                servers.update(_servers(self._get({'all_tenants': 1,
                                                   'uuid': server_id})))
            return servers
        if projects and len(set(projects)) <= BY_PROJECT_LIMIT:
            listed = {}
            for project_id in sorted(set(projects)):
                listed.update(self._all_pages({'all_tenants': 1,
                                               'project_id': project_id}))
        else:
            listed = self.list_all()
        wanted = set(ids)
        return {s: server for s, server in listed.items() if s in wanted}

    def list_page(self, marker=None):
        """One page of all servers in id order, for a spread-out listing."""
        params = {'all_tenants': 1, 'sort_key': 'uuid', 'sort_dir': 'asc'}
        if marker:
            params['marker'] = marker
        body = self._get(params)
        return Page(_servers(body), _next_marker(body))

    def list_compute_hosts(self):
        """{host: HOST_UP | HOST_DOWN | HOST_MAINTENANCE | HOST_UNKNOWN}.

        One request for every nova-compute service (``os-services``).
        """
        body = self._get({'binary': 'nova-compute'}, path='/os-services',
                         key='services')
        return {s['host']: host_state(s) for s in body['services']
                if s.get('host')}
