"""OS::Heat::LoadBalancerDeparture: a server leaves its pools before it goes.

See ``heat_health.common.departures`` for why a resource does this: Heat
deletes it before the server it names, and its deletion lasts until
heat-health-engine has taken the server out of every pool that an
``OS::Heat::LoadBalancer`` keeps, in the same batch as any other change.
"""

from heat.common import context as heat_context
from heat.common.i18n import _
from heat.engine import constraints
from heat.engine import properties
from heat.engine import resource
from heat.engine import support
from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.common import departures
from heat_health.resources import no_adoption

LOG = logging.getLogger(__name__)


class LoadBalancerDeparture(no_adoption.NoAdoptionMixin, resource.Resource):
    """Takes a server out of its load balancers' pools before Heat deletes it.

    Put it beside the server in the member template of a group that an
    OS::Heat::LoadBalancer targets, with ``server: {get_resource:
    server}``. When the group scales in, is resized or loses the member,
    Heat deletes this resource first; it completes once the server is no
    member of any pool, so clients stop being sent to the server before it
    shuts down. Without it, the member leaves the pool within seconds after
    Heat starts deleting the server.
    """

    support_status = support.SupportStatus(version='27.0.0')

    PROPERTIES = (SERVER, TIMEOUT) = ('server', 'timeout')

    properties_schema = {
        SERVER: properties.Schema(
            properties.Schema.STRING,
            _('ID of the server that leaves its pools before it is '
              'deleted. A new server replaces this resource.'),
            required=True,
            constraints=[constraints.CustomConstraint('nova.server')]),
        TIMEOUT: properties.Schema(
            properties.Schema.INTEGER,
            _('Seconds to wait for the server to leave its pools; after '
              'them the server is deleted anyway, and an event says it was '
              'still a member.'),
            default=120,
            constraints=[constraints.Range(1, 3600)],
            update_allowed=True),
    }

    def handle_create(self):
        self.resource_id_set(self.properties[self.SERVER])

    def handle_update(self, json_snippet, tmpl_diff, prop_diff):
        """Only the timeout changes in place: nothing to call."""

    def handle_delete(self):
        if self.resource_id is None:
            return None
        self.data_set(departures.DATA_DEPARTING, self.resource_id)
        return {'since': timeutils.utcnow_ts(microsecond=True)}

    def check_delete_complete(self, state):
        if state is None:
            return True
        pools = departures.pools_holding(heat_context.get_admin_context(),
                                         self.resource_id)
        if not pools:
            return True
        waited = timeutils.utcnow_ts(microsecond=True) - state['since']
        if waited < self.properties[self.TIMEOUT]:
            return False
        reason = (_('server %(server)s is still a member of %(pools)s after '
                    '%(seconds)d s; it is deleted anyway') %
                  {'server': self.resource_id, 'pools': ', '.join(pools),
                   'seconds': self.properties[self.TIMEOUT]})
        LOG.warning('%(resource)s: %(reason)s',
                    {'resource': self, 'reason': reason})
        self._add_event(self.DELETE, self.IN_PROGRESS, reason)
        return True


def resource_mapping():
    return {'OS::Heat::LoadBalancerDeparture': LoadBalancerDeparture}
