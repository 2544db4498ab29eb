"""OS::Heat::LoadBalancer's Octavia objects, made and removed step by step.

Every Octavia call is made from ``check_*_complete``: a 409 or a PENDING_*
status only means "not yet" and the next poll tries again, until
``lb_status_timeout`` has passed in one step. Each object is recorded in
the resource's data as soon as Octavia accepted it.
"""

from heat.common import exception
from heat.common.i18n import _
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from heat_health.common import lb_members


class OctaviaSteps(object):
    """The load balancer, listener, pool and health monitor, step by step."""

    # Resource data

    def _ref(self, kind):
        value = self.data().get(kind)
        return jsonutils.loads(value) if value else None

    def _object_id(self, kind):
        ref = self._ref(kind)
        return ref and ref['id']

    def _remember(self, kind, object_id, created):
        self.data_set(kind, jsonutils.dumps({'id': object_id,
                                             'created': created}))
        if kind == self.LB_DATA:
            self.resource_id_set(object_id)

    def _forget(self, kind, object_id):
        if kind == self.MEMBER:
            members = self._members()
            kept = {server_id: member
                    for server_id, member in members.items()
                    if member.get('member_id') != object_id}
            self._store_members(kept)
            return
        gone = {self.LB_DATA: (self.LB_DATA, self.LISTENER_DATA,
                               self.POOL_DATA, self.HM_DATA,
                               self.MEMBERS_DATA),
                self.POOL_DATA: (self.POOL_DATA, self.HM_DATA,
                                 self.MEMBERS_DATA)}.get(kind, (kind,))
        for key in gone:
            self.data_delete(key)

    # Waiting

    def _advance(self, plan):
        """Run the plan's steps in order; True once all of them are done."""
        while plan.steps:
            name, argument = plan.steps[0]
            if plan.state is None:
                plan.state = {'step': name}
                self._start_wait(plan.state)
            if not getattr(self, '_step_' + name)(plan.state, argument):
                return False
            plan.steps.popleft()
            plan.state = None
        return True

    def _start_wait(self, state):
        """Start the lb_status_timeout clock of a step, in resource data."""
        self.data_set(self.WAIT_DATA, jsonutils.dumps(
            {'step': state['step'],
             'since': timeutils.utcnow_ts(microsecond=True)}))

    def _not_yet(self, state, detail):
        """False, for the next poll; fail once the step waited too long."""
        wait = jsonutils.loads(self.data().get(self.WAIT_DATA) or '{}')
        since = wait.get('since', timeutils.utcnow_ts(microsecond=True))
        waited = timeutils.utcnow_ts(microsecond=True) - since
        timeout = self.properties[self.LB_STATUS_TIMEOUT]
        if waited > timeout:
            raise exception.Error(
                _('step "%(step)s" of load balancer %(lb)s gave up after '
                  '%(waited)d s (lb_status_timeout is %(timeout)d s): '
                  'Octavia is still busy: %(detail)s') %
                {'step': state['step'], 'lb': self.resource_id,
                 'waited': waited, 'timeout': timeout, 'detail': detail})
        return False

    def _call(self, state, call, *args, **kwargs):
        """Make one Octavia change; False while Octavia refuses it as busy.

        The result is kept in ``state['result']``.
        """
        try:
            state['result'] = call(*args, **kwargs)
        except Exception as ex:
            if not self.client_plugin().is_conflict(ex):
                raise
            state['conflict'] = str(ex)
            return False
        return True

    def _refused(self, state):
        """Octavia answered 409: wait, unless the load balancer is in ERROR.

        Octavia refuses changes to a load balancer in ERROR with the same
        409 as to a busy one; only its status tells them apart.
        """
        if self.resource_id is None or self._settled(state):
            return self._not_yet(state, state['conflict'])
        return False

    def _settled(self, state, deleting=False):
        """True once the load balancer took the last change (ACTIVE).

        While deleting, a load balancer gone or in ERROR is settled too:
        Octavia accepts deletes in ERROR.
        """
        try:
            lb = self.client().load_balancer_show(self.resource_id)
        except Exception as ex:
            if deleting and self.client_plugin().is_not_found(ex):
                return True
            raise
        status = lb.get('provisioning_status')
        if status in lb_members.PENDING:
            return self._not_yet(state, status)
        if status == 'ERROR' and not deleting:
            raise exception.ResourceInError(
                resource_status=status,
                status_reason=_('load balancer %s is in provisioning status '
                                'ERROR') % self.resource_id)
        return True

    # Create

    def _loadbalancer_body(self):
        vip = self.properties[self.VIP]
        neutron = self.client_plugin('neutron')
        body = {'name': self.physical_resource_name(),
                'admin_state_up': vip[self.VIP_ADMIN_STATE_UP]}
        if vip[self.VIP_SUBNET]:
            body['vip_subnet_id'] = neutron.find_resourceid_by_name_or_id(
                'subnet', vip[self.VIP_SUBNET])
        if vip[self.VIP_NETWORK]:
            body['vip_network_id'] = neutron.find_resourceid_by_name_or_id(
                'network', vip[self.VIP_NETWORK])
        if vip[self.VIP_ADDRESS]:
            body['vip_address'] = vip[self.VIP_ADDRESS]
        if self.properties[self.AVAILABILITY_ZONE]:
            body['availability_zone'] = self.properties[
                self.AVAILABILITY_ZONE]
        if self.properties[self.FLAVOR_ID]:
            body['flavor_id'] = self.client_plugin().get_flavor(
                self.properties[self.FLAVOR_ID])
        return body

    def _listener_body(self):
        vip = self.properties[self.VIP]
        return {'name': self.physical_resource_name(),
                'loadbalancer_id': self.resource_id,
                'protocol': vip[self.VIP_PROTOCOL],
                'protocol_port': vip[self.VIP_PROTOCOL_PORT],
                'connection_limit': vip[self.VIP_CONNECTION_LIMIT],
                'admin_state_up': vip[self.VIP_ADMIN_STATE_UP]}

    def _pool_body(self):
        pool = self.properties[self.POOL]
        body = {'name': self.physical_resource_name(),
                'listener_id': self._object_id(self.LISTENER_DATA),
                'protocol': pool[self.POOL_PROTOCOL],
                'lb_algorithm': pool[self.POOL_LB_METHOD],
                'admin_state_up': pool[self.POOL_ADMIN_STATE_UP]}
        persistence = pool[self.POOL_SESSION_PERSISTENCE]
        if persistence:
            body['session_persistence'] = {
                key: value for key, value in persistence.items()
                if value is not None}
        return body

    def _health_monitor_body(self):
        monitor = self.properties[self.HEALTH_MONITOR]
        body = {key: monitor[key] for key in self._HM_KEYS
                if key != self.HM_ID and monitor.get(key) is not None}
        body.update(name=self.physical_resource_name(),
                    pool_id=self._object_id(self.POOL_DATA))
        return body

    def _create_object(self, state, kind, create):
        """Create one Octavia object once, then wait until it is in place."""
        if not state.get('called'):
            if not self._call(state, create):
                return self._refused(state)
            self._remember(kind, state['result']['id'], created=True)
            state['called'] = True
        return self._settled(state)

    def _step_loadbalancer(self, state, _argument):
        existing = self.properties[self.LOADBALANCER]
        if existing and not state.get('called'):
            self._remember(self.LB_DATA,
                           self.client_plugin().get_loadbalancer(existing),
                           created=False)
            state['called'] = True
        return self._create_object(
            state, self.LB_DATA, lambda: self.client().load_balancer_create(
                json={'loadbalancer': self._loadbalancer_body()}
            )['loadbalancer'])

    def _step_listener(self, state, _argument):
        return self._create_object(
            state, self.LISTENER_DATA, lambda: self.client().listener_create(
                json={'listener': self._listener_body()})['listener'])

    def _step_pool(self, state, _argument):
        existing = self.properties[self.POOL][self.POOL_ID]
        if existing and not state.get('called'):
            self._remember(self.POOL_DATA,
                           self.client_plugin().get_pool(existing),
                           created=False)
            state['called'] = True
        return self._create_object(
            state, self.POOL_DATA, lambda: self.client().pool_create(
                json={'pool': self._pool_body()})['pool'])

    def _step_health_monitor(self, state, _argument):
        existing = self.properties[self.HEALTH_MONITOR][self.HM_ID]
        if existing:
            self._remember(self.HM_DATA, existing, created=False)
            return True
        return self._create_object(
            state, self.HM_DATA, lambda: self.client().health_monitor_create(
                json={'healthmonitor': self._health_monitor_body()}
            )['healthmonitor'])

    # Update

    def _health_monitor_steps(self, before, after):
        ref = self._ref(self.HM_DATA)
        owned = bool(ref and ref['created'])
        if (before and after and owned and not after[self.HM_ID] and
                before[self.HM_TYPE] == after[self.HM_TYPE]):
            changes = {key: after[key] for key in self.HM_SETTABLE
                       if after[key] != before[key]}
            return [('set_health_monitor', changes)] if changes else []
        steps = []
        if owned:
            steps.append(('drop', (self.HM_DATA, ref['id'])))
        elif ref:
            self.data_delete(self.HM_DATA)
        if after:
            steps.append((self.HM_DATA, None))
        return steps

    def _step_set_health_monitor(self, state, changes):
        if not state.get('called'):
            if not self._call(state, self.client().health_monitor_set,
                              self._object_id(self.HM_DATA),
                              json={'healthmonitor': changes}):
                return self._refused(state)
            state['called'] = True
        return self._settled(state)

    # Delete

    def _delete_call(self, kind, object_id):
        client = self.client()
        if kind == self.LB_DATA:
            return client.load_balancer_delete(object_id, cascade=True)
        if kind == self.MEMBER:
            return client.member_delete(self._object_id(self.POOL_DATA),
                                        object_id)
        return {self.LISTENER_DATA: client.listener_delete,
                self.POOL_DATA: client.pool_delete,
                self.HM_DATA: client.health_monitor_delete}[kind](object_id)

    def _load_balancer_gone(self, state):
        try:
            lb = self.client().load_balancer_show(self.resource_id)
        except Exception as ex:
            if self.client_plugin().is_not_found(ex):
                return True
            raise
        status = lb.get('provisioning_status')
        if status == 'DELETED':
            return True
        return self._not_yet(state, status)

    def _step_drop(self, state, target):
        """Delete one object (404: already gone), then wait for Octavia."""
        kind, object_id = target
        if not state.get('called'):
            try:
                if not self._call(state, self._delete_call, kind, object_id):
                    return self._not_yet(state, state['conflict'])
            except Exception as ex:
                if not self.client_plugin().is_not_found(ex):
                    raise
            state['called'] = True
        if kind == self.LB_DATA:
            done = self._load_balancer_gone(state)
        else:
            done = self._settled(state, deleting=True)
        if done:
            self._forget(kind, object_id)
        return done

    def _delete_steps(self):
        """What this resource created, children first; reused: members."""
        refs = {kind: self._ref(kind) for kind in (
            self.LB_DATA, self.LISTENER_DATA, self.POOL_DATA, self.HM_DATA)}

        def created(kind):
            return bool(refs[kind] and refs[kind]['created'])

        if created(self.LB_DATA):
            # Octavia's cascade deletes listener, pool, monitor, members.
            return [(self.LB_DATA, refs[self.LB_DATA]['id'])]
        drops = []
        if created(self.POOL_DATA):
            drops.append((self.POOL_DATA, refs[self.POOL_DATA]['id']))
        elif refs[self.POOL_DATA]:
            if created(self.HM_DATA):
                drops.append((self.HM_DATA, refs[self.HM_DATA]['id']))
            drops.extend((self.MEMBER, member['member_id'])
                         for _server, member in sorted(
                             self._members().items())
                         if member.get('member_id'))
        if created(self.LISTENER_DATA):
            drops.append((self.LISTENER_DATA,
                          refs[self.LISTENER_DATA]['id']))
        return drops
