"""The one place heat-health-engine reads Octavia: pool member listings.

LB_STATUS_POLLING reads what the load balancer's health checks concluded,
as admin, with the credentials the Nova listings use. Any failure to get
an answer is raised as ``OctaviaUnavailable``: never a verdict on the
servers, only a reason for their policies not to act.
"""

from keystoneauth1 import exceptions as ks_exc
from octaviaclient.api.v2 import octavia as octavia_api
from oslo_config import cfg
import requests

from heat_health.common import nova_adapter

SERVICE_TYPE = 'load-balancer'


class OctaviaUnavailable(Exception):
    """Octavia could not be asked or did not answer."""


class OctaviaAdapter(object):
    """Admin reads of pools and their members through python-octaviaclient."""

    def __init__(self, conf=cfg.CONF, client=None):
        self._conf = conf
        self._client = client
        self.requests = 0

    @property
    def client(self):
        if self._client is None:
            session = nova_adapter.admin_session(self._conf)
            endpoint = session.get_endpoint(
                service_type=SERVICE_TYPE,
                interface=self._conf.heat_health.nova_endpoint_type,
                region_name=self._conf.region_name_for_services)
            session.timeout = self._conf.heat_health.nova_request_timeout
            self._client = octavia_api.OctaviaAPI(endpoint=endpoint,
                                                  session=session)
        return self._client

    def _read(self, call, *args):
        self.requests += 1
        try:
            return call(*args)
        except (octavia_api.OctaviaClientException, ks_exc.ClientException,
                requests.RequestException, ValueError) as e:
            raise OctaviaUnavailable('%s: %s' % (type(e).__name__, e))

    def members(self, pool_id):
        """The pool's members as Octavia lists them."""
        body = self._read(self.client.member_list, pool_id)
        if not isinstance(body, dict) or 'members' not in body:
            raise OctaviaUnavailable(
                'Octavia answered without a member list')
        return body['members']

    def pool_enabled(self, pool_id):
        """Whether the pool's admin state is up."""
        body = self._read(self.client.pool_show, pool_id)
        return bool((body or {}).get('admin_state_up', True))
