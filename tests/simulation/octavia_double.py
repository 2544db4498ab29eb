"""Octavia's pools and members, as far as the Drainer and the pool reach.

As Octavia 19 does (reference/octavia.md): the batch member update
(``PUT /lbaas/pools/{id}/members``) replaces the whole list, matching
members by (address, port), resetting omitted fields to their defaults and
deleting unlisted members; the load balancer is PENDING_UPDATE for a while
after each change and refuses changes meanwhile with 409 "... is immutable".
The client object answers what ``lb_members.PoolMembers`` calls:
``member_list``, ``load_balancer_show`` (already translated to
OctaviaClientException, as python-octaviaclient's methods are) and
``_create``, which raises a raw HTTP error that
``octavia_api.correct_return_codes`` translates.

Every accepted batch is recorded with the weights it left, so the
invariants can tell what happened to a drained member.
"""

import collections
import datetime
import re

from octaviaclient.api.v2 import octavia as octavia_api

from tests.simulation import faults as faults_mod

# Seconds the load balancer stays PENDING_UPDATE after a change.
CHANGE_SECONDS = 2

DEFAULTS = (('weight', 1), ('admin_state_up', True), ('backup', False))
KEPT = ('name', 'tags', 'subnet_id')

Batch = collections.namedtuple('Batch', ['at', 'pool_id', 'weights',
                                         'actor'])


class _Response(object):
    def __init__(self, code, message):
        self.status_code = code
        self._message = message

    def json(self):
        return {'faultstring': self._message}


class HttpError(Exception):
    """A raw HTTP error of the client's session (keystoneauth-like)."""

    def __init__(self, code, message):
        super(HttpError, self).__init__('%s: %s' % (code, message))
        self.response = _Response(code, message)
        self.request_id = 'req-injected'


def error(code=500, message='injected Octavia failure'):
    """A factory for Faults.add: the call fails with this HTTP code."""
    return lambda call, key: HttpError(code, message)


class OctaviaDouble(object):

    def __init__(self, clock):
        self._clock = clock
        self.lbs = {}        # id -> {'provisioning_status', 'until'}
        self.pools = {}      # id -> {'lb': id, 'members': [dict]}
        self.batches = []    # [Batch]
        self.reads = 0       # member lists served
        self.faults = faults_mod.Faults()
        self.slow = []       # seconds the next changes keep it busy
        self._count = 0

    def add_pool(self, lb_id, pool_id):
        self.lbs[lb_id] = {'provisioning_status': 'ACTIVE', 'until': None,
                           'held_until': None}
        self.pools[pool_id] = {'lb': lb_id, 'members': []}

    def _new_id(self):
        self._count += 1
        return 'mem-%04d' % self._count

    def _lb(self, lb_id):
        lb = self.lbs[lb_id]
        if lb['until'] is not None and lb['until'] <= self._clock():
            lb['provisioning_status'] = 'ACTIVE'
            lb['until'] = None
        return lb

    def hold(self, lb_id, seconds):
        """The load balancer stays PENDING_UPDATE for ``seconds`` more.

        As when Octavia's worker is slow or another change runs long:
        every change is refused with 409 "immutable" meanwhile, and a
        drain may have to be carried over several recovery passes.
        """
        lb = self._lb(lb_id)
        until = self._clock() + datetime.timedelta(seconds=seconds)
        lb['provisioning_status'] = 'PENDING_UPDATE'
        lb['until'] = max(until, lb['until'] or until)
        lb['held_until'] = lb['until']

    def slow_next(self, seconds):
        """The next accepted change keeps its load balancer busy longer."""
        self.slow.append(seconds)

    def release(self):
        """Every hold ends now (the outage is over)."""
        now = self._clock()
        del self.slow[:]
        for lb in self.lbs.values():
            if lb['held_until'] is not None and lb['held_until'] > now:
                lb['held_until'] = None
                lb['until'] = now

    def held(self):
        """Whether a load balancer is held busy now."""
        now = self._clock()
        return bool(self.slow) or any(
            lb['held_until'] is not None and lb['held_until'] > now
            for lb in self.lbs.values())

    def weights(self, pool_id):
        """{address: weight} of the pool's members now."""
        return {m['address']: m['weight']
                for m in self.pools[pool_id]['members']}

    def apply(self, pool_id, members, actor, additive=False):
        """A batch update accepted: the pool holds exactly ``members``."""
        pool = self.pools[pool_id]
        existing = {(m['address'], m['protocol_port']): m
                    for m in pool['members']}
        result = [] if not additive else [
            m for key, m in existing.items()
            if key not in {(n['address'], n['protocol_port'])
                           for n in members}]
        for sent in members:
            key = (sent['address'], sent['protocol_port'])
            old = existing.get(key)
            member = {'id': old['id'] if old else self._new_id(),
                      'address': sent['address'],
                      'protocol_port': sent['protocol_port'],
                      'provisioning_status': 'ACTIVE',
                      'operating_status': 'NO_MONITOR'}
            for field, default in DEFAULTS:
                member[field] = sent.get(field, default)
            for field in KEPT:
                value = sent.get(field, (old or {}).get(field))
                if value is not None:
                    member[field] = value
            result.append(member)
        pool['members'] = sorted(result, key=lambda m: (m['address'],
                                                        m['protocol_port']))
        lb = self.lbs[pool['lb']]
        lb['provisioning_status'] = 'PENDING_UPDATE'
        lb['until'] = max(self._clock() + datetime.timedelta(
            seconds=CHANGE_SECONDS), lb['until'] or self._clock())
        if self.slow and actor == 'recovery':
            self.hold(pool['lb'], self.slow.pop(0))
        self.batches.append(Batch(self._clock(), pool_id,
                                  self.weights(pool_id), actor))

    def client(self, actor='recovery'):
        return _Client(self, actor)


class _Client(object):
    """An OctaviaAPI, as far as lb_members.PoolMembers uses one."""

    _URL = re.compile(r'^/lbaas/pools/(?P<pool>[^/]+)/members$')

    def __init__(self, octavia, actor):
        self._octavia = octavia
        self._actor = actor

    def _check(self, phase, call, key, translate):
        try:
            self._octavia.faults.check(phase, call, key)
        except HttpError as e:
            if not translate:
                raise
            raise octavia_api.OctaviaClientException(
                code=e.response.status_code, message=e.response._message,
                request_id=e.request_id)

    def member_list(self, pool_id, **params):
        self._check(faults_mod.BEFORE, 'member_list', pool_id, True)
        self._octavia.reads += 1
        members = [dict(m) for m in
                   self._octavia.pools[pool_id]['members']]
        return {'members': members}

    def load_balancer_show(self, lb_id):
        self._check(faults_mod.BEFORE, 'load_balancer_show', lb_id, True)
        lb = self._octavia._lb(lb_id)
        return {'id': lb_id,
                'provisioning_status': lb['provisioning_status'],
                'operating_status': 'ONLINE'}

    def _create(self, url, method='POST', json=None, params=None, **kw):
        found = self._URL.match(url)
        if method != 'PUT' or found is None:
            raise HttpError(405, 'only the batch member update is served')
        pool_id = found.group('pool')
        self._check(faults_mod.BEFORE, 'member_batch', pool_id, False)
        pool = self._octavia.pools.get(pool_id)
        if pool is None:
            raise HttpError(404, 'Pool %s not found.' % pool_id)
        lb = self._octavia._lb(pool['lb'])
        if lb['provisioning_status'] != 'ACTIVE':
            raise HttpError(409, 'Load Balancer %s is immutable and cannot '
                            'be updated.' % pool['lb'])
        members = (json or {}).get('members') or []
        keys = [(m['address'], m['protocol_port']) for m in members]
        if len(set(keys)) != len(keys):
            raise HttpError(400, 'Duplicate member entries in the request')
        self._octavia.apply(pool_id, members, self._actor,
                            additive=(params or {}).get('additive_only')
                            in ('true', True))
        self._check(faults_mod.AFTER, 'member_batch', pool_id, False)
        return {}
