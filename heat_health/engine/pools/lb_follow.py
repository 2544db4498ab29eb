"""Pool members that follow their groups between stack updates.

``OS::Heat::LoadBalancer`` sets its pool's members when it is created or
updated, but a group changes without it: a scaling signal, a member
replaced by recovery or by ``mark_unhealthy`` and an update of the group's
nested stack. heat-health-engine closes that gap, as a reconcile loop:
read the servers of each load balancer's targets from Heat's database,
compare them with the members it holds (its resource data), and when they
differ send one full-state batch update as the stack's owner, wait until
Octavia took it, and store the new members. Members recovery drained, or
gave their weight back, are sent at the weight recovery recorded, not at
what was read: a drain or a restore that landed between the listing and
the batch is kept (``recovery_weights``).

A departing server stops counting as soon as Heat starts deleting it, so
its member goes with the next pass, while Nova is still shutting it down;
a server with an ``OS::Heat::LoadBalancerDeparture`` stops counting when
Heat deletes that, before the server (``common.departures``).
Passes follow each other every ``PASS_SECONDS``, and every
``BUSY_PASS_SECONDS`` while a stack action works on a load balancer's
targets or any stack of their tree (a replacement waiting for its
address, a departure being deleted, a scale-out): the pool changes as
soon as the server does, not at the next pass. A change waits a moment
(``JOIN_SECONDS`` at most) for the other new servers of the targets that
are on their way (being built, or in a place Heat is replacing now):
servers made together, as the replacements of a failure that took
several, join in one batch instead of each waiting for Octavia to apply
the batch before. Recovery nudges the follower when it asks for a stack
update, and passes come as often for
``NUDGE_SECONDS`` after, before Heat shows the update. A pass that finds
nothing changed asks neither Nova nor Octavia. The update is
level-triggered and the same from any engine: engines place
load balancers on the ring as they do policies, and a pass repeated by a
second engine (no ring, or a ring that just moved) only costs one more
listing, or a 409 that the next pass waits out.
"""

import collections
import threading
import time

from heat.common import context as heat_context
from heat.db import api as heat_db
from heat.db import models as heat_models
from oslo_log import log as logging
from oslo_serialization import jsonutils

from heat_health.common import departures
from heat_health.common import lb_members
from heat_health.db import api as db_api
from heat_health.policy import targets as targets_mod

LOG = logging.getLogger(__name__)

# Seconds between two passes.
PASS_SECONDS = 2.0
# Seconds between two passes while a stack action works on the targets
# of a load balancer this engine follows.
BUSY_PASS_SECONDS = 0.25
# Most seconds a change of a pool waits for new servers of its targets
# on their way (being built, or about to be), to send them in one batch.
JOIN_SECONDS = 0.5
# Seconds of busy passes after a nudge: heat-engine answers an update
# before its stacks show it.
NUDGE_SECONDS = 5.0
GONE = frozenset(['DELETED', 'SOFT_DELETED'])
# Seconds a stack's Octavia client is kept (its token checked once).
CLIENT_SECONDS = 600

LoadBalancer = collections.namedtuple('LoadBalancer', [
    'id', 'uuid', 'stack_id', 'name', 'data'])


def recovery_weights(before, after):
    """{address: weight} sent whatever the listing read, for recovery.

    ``before`` and ``after``: ``db.api.drain_states`` of the pool read
    before and after its listing. A member held drained is sent at 0: a
    drain accepted after the listing is never undone. One whose weight is
    being given back, or was given back since the first read, is sent at
    the weight it had: that restore may have landed after the listing,
    and is never undone either. One given back before the first read is
    as the listing read it.
    """
    weights = {}
    for address, (state, weight) in after.items():
        if state == db_api.HELD:
            weights[address] = 0
        elif (state == db_api.RESTORING or
              before.get(address, (None,))[0] != db_api.RESTORED):
            weights[address] = weight
    return weights


class _Targets(object):
    """What targets.Resolver needs of a policy, for a load balancer."""

    class _Parsed(object):
        def __init__(self, names):
            self.targets = names

    def __init__(self, lb):
        self.id = lb.uuid
        self.stack_id = lb.stack_id
        self.parsed = self._Parsed(tuple(lb.data.get('targets') or ()))


def load_balancers(ctxt):
    """Every load balancer that heat-engine is not working on.

    Each with its decoded resource data (``lb_members.read_data``).
    """
    R, D = heat_models.Resource, heat_models.ResourceData
    rows_by_id = {}
    with heat_db.context_manager.reader.using(ctxt):
        rows = ctxt.session.query(
            R.id, R.uuid, R.stack_id, R.name, D.key, D.value).join(
                D, D.resource_id == R.id).filter(
                D.key.in_([lb_members.DATA_SPEC, lb_members.DATA_MEMBERS]),
                R.action != 'DELETE', R.status == 'COMPLETE').all()
    for row in rows:
        rows_by_id.setdefault(row[:4], {})[row.key] = row.value
    found = []
    for (rid, uuid, stack_id, name), data in sorted(rows_by_id.items()):
        spec = lb_members.read_data(data)
        if spec is not None and spec.get('loadbalancer_id') and spec.get(
                'subnet_cidr'):
            found.append(LoadBalancer(rid, uuid, stack_id, name, spec))
    return found


class MemberFollower(object):
    """Keeps the pools of load balancers equal to their targets' servers.

    :param octavia_client: stack id -> an OctaviaAPI acting as the stack's
        owner (HeatReplacer.octavia_client).
    :param list_servers: server ids -> {id: nova_adapter.Server} (admin).
    :param owns: load balancer uuid -> whether this engine follows it.
    :param forget_client: stack id -> None, after an error: the next
        client is made anew (a new token and trust).
    """

    def __init__(self, octavia_client, list_servers, owns=lambda uuid: True,
                 clock=time.monotonic, forget_client=lambda stack_id: None):
        self._octavia_client = octavia_client
        self._forget_client = forget_client
        self._list_servers = list_servers
        self._owns = owns
        self._clock = clock
        self._resolver = targets_mod.Resolver()
        self._clients = {}   # stack id -> (client, expiry)
        self._pending = set()  # resource ids whose batch Octavia applies
        self._holding = {}     # resource id -> since when a change waits
        self._busy = False     # a stack action works on followed targets
        self._nudged = None    # when recovery last asked for an update
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='heat-health-lb-follower')
        self._thread.start()

    def nudge(self):
        """A pool may change soon (a stack update was asked): look now."""
        self._nudged = self._clock()
        self._wake.set()

    def stop(self):
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self):
        while not self._stopping.is_set():
            try:
                self.run_once()
            except Exception:
                LOG.exception('Load balancer member pass failed; retrying')
            nudged = self._nudged is not None and (
                self._clock() < self._nudged + NUDGE_SECONDS)
            self._wake.wait(BUSY_PASS_SECONDS if self._busy or nudged
                            else PASS_SECONDS)
            self._wake.clear()

    def run_once(self):
        started = self._clock()
        ctxt = heat_context.get_admin_context()
        owned = [lb for lb in load_balancers(ctxt) if self._owns(lb.uuid)]
        leaving = departures.departing(ctxt) if owned else frozenset()
        self._busy = bool(leaving)
        for lb in owned:
            try:
                self._follow(ctxt, lb, leaving)
            except lb_members.Busy:
                pass  # Octavia is busy: the next pass sends it again.
            except Exception as ex:
                self._clients.pop(lb.stack_id, None)
                self._forget_client(lb.stack_id)
                LOG.warning('Members of load balancer %(name)s (stack '
                            '%(stack)s) not updated: %(ex)s',
                            {'name': lb.name, 'stack': lb.stack_id,
                             'ex': ex})
        LOG.debug('Member pass over %(n)d load balancers in %(s).2f s '
                  '(busy: %(busy)s)', {'n': len(owned), 'busy': self._busy,
                                       's': self._clock() - started})

    def _client(self, stack_id):
        now = self._clock()
        found = self._clients.get(stack_id)
        if found is None or found[1] <= now:
            found = (self._octavia_client(stack_id), now + CLIENT_SECONDS)
            self._clients[stack_id] = found
        return found[0]

    def _wanted(self, ctxt, lb, leaving=frozenset()):
        """What the pool should hold now.

        ({server id: address}, {server id: path}, the servers whose
        successors are on their way: new servers Nova is still building,
        with no address yet, and servers of places Heat is replacing now).

        Servers in ``leaving`` (their departure is being deleted) are left
        out, and never kept for a replacement.

        A place whose new server is not plugged in yet keeps the member of
        the server it replaces while Nova still has that one (Heat creates
        the replacement first, and with launch-before-terminate the old
        server serves until the new one can): the pool never shrinks for a
        swap.
        """
        resolved = self._resolver.resolve(ctxt, [_Targets(lb)])[lb.uuid]
        if resolved.busy or resolved.updating:
            self._busy = True
        paths = {p['server_id']: p['path'] for p in resolved.places.values()
                 if p['server_id'] not in leaving}
        stored = lb.data['members']
        known = {s: m['address'] for s, m in stored.items()
                 if s in paths and m.get('address')}
        # A stack action works on these places: their replacement may get
        # its address in a moment (Heat creates it first).
        building = {p['server_id'] for key, p in resolved.places.items()
                    if key in resolved.busy and p['server_id'] in known}
        unknown = set(paths) - set(known)
        if not unknown:
            return known, paths, frozenset(building)
        replaced = {m['path']: s for s, m in stored.items()
                    if s not in paths and s not in leaving and
                    m.get('path') and m.get('address')}
        listed = self._list_servers(unknown | set(replaced.values()))
        for server_id in unknown:
            server = listed.get(server_id)
            address = None
            if server is not None and server.status not in GONE:
                address = lb_members.address_on(lb.data['subnet_cidr'],
                                                server.addresses or ())
            if address:
                known[server_id] = address
                continue
            if server is not None and server.status == 'BUILD':
                building.add(server_id)
            old = replaced.get(paths[server_id])
            if old is not None and old in listed and \
                    listed[old].status not in GONE:
                known[old] = stored[old]['address']
                paths[old] = paths[server_id]
        return known, paths, frozenset(building)

    def _waits(self, lb, building):
        """Whether a change waits for the new servers on their way.

        Only for JOIN_SECONDS from the first pass that held it: a server
        that stays in BUILD, or a place Heat keeps working on, holds
        nothing for long.
        """
        if not building or lb.id in self._pending:
            self._holding.pop(lb.id, None)
            return False
        now = self._clock()
        since = self._holding.setdefault(lb.id, now)
        if now - since < JOIN_SECONDS:
            self._busy = True
            return True
        return False

    def _follow(self, ctxt, lb, leaving=frozenset()):
        data = lb.data
        wanted, paths, building = self._wanted(ctxt, lb, leaving)
        stored = {s: m['address'] for s, m in data['members'].items()}
        if lb.id not in self._pending and wanted == stored:
            self._holding.pop(lb.id, None)
            return
        if self._waits(lb, building):
            LOG.debug('Members of load balancer %(name)s wait for %(n)d '
                      'servers on their way', {'name': lb.name,
                                               'n': len(building)})
            return
        pool = lb_members.PoolMembers(self._client(lb.stack_id),
                                      data['pool_id'])
        if not pool.ready(data['loadbalancer_id']):
            return
        pool_id = data['pool_id']
        before = db_api.drain_states([pool_id]).get(pool_id, {})
        current = pool.list()
        port = data['protocol_port']
        after = db_api.drain_states([pool_id]).get(pool_id, {})
        members = lb_members.plan(current, data['members'], wanted, port,
                                  data.get('subnet_id'), names=paths,
                                  weights=recovery_weights(before, after))
        if members is not None:
            if members:
                pool.replace(members)
            else:
                for member in current:
                    pool.client.member_delete(data['pool_id'], member['id'])
            self._pending.add(lb.id)
            self._holding.pop(lb.id, None)
            LOG.info('Members of load balancer %(name)s (stack %(stack)s) '
                     'sent: %(n)d servers', {'name': lb.name,
                                             'stack': lb.stack_id,
                                             'n': len(wanted)})
            return
        # The pool holds what was sent: store it.
        self._pending.discard(lb.id)
        heat_db.resource_data_set(
            ctxt, lb.id, lb_members.DATA_MEMBERS,
            jsonutils.dumps(lb_members.member_map(current, wanted, port,
                                                  paths)))
