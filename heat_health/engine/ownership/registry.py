"""The registry: which policies this heat-health-engine watches, and what.

Ownership is a lease in the policy's row, taken and renewed by ``claim()``
from the monitor loop (so a hung loop loses its leases), with a generation
that grows at every change of owner and fences the writes of an engine that
lost a policy. With a coordination backend, the engines' hash ring
(``partition``) says which engine should own each policy: a live owner
offers a policy the ring moved and keeps watching it until the new owner
takes it; the policies of an engine that leaves the group are taken at the
others' next claim. Without a backend, an engine takes the policies nobody
holds or whose holder let its lease expire, and frees at once those of a
holder that does not answer Heat's engine liveness probe (which every
heat-health-engine answers). An engine that stops gracefully releases its
policies so another takes them at once.
"""

import threading
import time

from heat.common import context
from heat.common import service_utils
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.engine import leftovers
from heat_health.engine.ownership import place_limits
from heat_health.objects import policy as policy_object
from heat_health.objects import target as target_object
from heat_health.policy import targets as target_resolution

LOG = logging.getLogger(__name__)

# The resolution of a policy whose stack cannot be read: no verdict on its
# servers until it can.
HELD = target_resolution.Resolution(places={}, busy=frozenset(),
                                    suspended=True, missing=[],
                                    fingerprint=())


class HeldRows(object):
    """The rows of the policies an engine holds, as of its last claim.

    A thousand policies' rows, specs parsed, at every tick would cost more
    than all the rest of a quiet tick: the rows held are kept with the
    values that change with anything but the lease, and read again when
    those do; and none is read while the digest of the rows held is as
    the last claim left it under the same ring. (The lease in a row kept
    is not kept up to date: nothing here reads it.) They are read at least
    once a third of a lease all the same, when their leases are renewed:
    the digest sees a write's time in seconds, and two writes of one
    second may leave it as it was.
    """

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._claimed = {}   # policy id -> (its row's key, Policy)
        self._digest = None  # (ring, digest, clock time of the read)

    def claim(self, engine_id, lease_seconds, ring=None, **kwargs):
        """The policies held after claiming, in the order of their ids.

        :param ring: what the claim's ``ring_owner`` answers from (a new
            one may move any policy held): the rows held are read then.
        """
        now = self._clock()
        digest = None
        if (self._digest is not None and self._digest[0] == ring and
                now - self._digest[2] < lease_seconds / 3.0):
            digest = self._digest[1]
        known = {pid: key for pid, (key, _p) in self._claimed.items()}
        rows, keys, found = policy_object.Policy.claim(
            engine_id, lease_seconds, known=known, digest=digest, **kwargs)
        if found is not digest:
            # The rows held were read (the digest given comes back as it
            # is when none was).
            self._digest = (ring, found, now)
        read = {p.id: p for p in rows}
        claimed = {}
        for pid, key in keys.items():
            policy = read.get(pid)
            if policy is None:
                policy = self._claimed[pid][1]
            claimed[pid] = (key, policy)
        self._claimed = claimed
        return [claimed[pid][1] for pid in sorted(claimed)]


class Registry(object):

    def __init__(self, engine_id, lease_seconds=None, partition=None,
                 undoer=None):
        self.engine_id = engine_id
        # Undoes what recovery left on targets before their rows go
        # (``leftovers.Undoer``); None: nothing is undone.
        self.undoer = undoer
        self.lease_seconds = (lease_seconds or
                              cfg.CONF.heat_health.lease_seconds)
        self.partition = partition
        self._resolver = target_resolution.Resolver()
        self._resolutions = {}   # policy id -> last Resolution
        # policy id -> (Resolution stored, {place: why it is not watched})
        self._bounded = {}
        self._owned = {}         # policy id -> generation
        self._errors = {}        # policy id -> its error as stored
        # policy id -> places gone whose rows wait for their leftovers to
        # be undone: synced again at the next refresh.
        self._kept = {}
        self._held = HeldRows()
        # The RPC endpoint and the monitor share one registry: two target
        # syncs of a policy at once would both insert its new places.
        self._refresh_lock = threading.Lock()
        self._next_renew = 0.0   # monotonic time renew() may write again
        # Called between the policies of a refresh (the monitor's
        # heartbeat: a takeover's refresh is long).
        self.on_progress = None
        # Asked when leases are renewed: {policy id: when its detectors
        # last confirmed what is stored} (the monitor's tracker).
        self.observed = None
        # Grow when a policy is registered here, and when a Resolution
        # kept changes: the monitor claims, and compares, only then.
        self.registrations = 0
        self.resolutions_changed = 0

    @staticmethod
    def _context():
        return context.get_admin_context()

    def claim(self, policy_id=None):
        """Policies this engine owns now, their leases renewed.

        With ``policy_id`` (a registration): take that policy if it is
        free, whatever the ring says; the ring's owner gets it offered at
        this engine's next claim.
        """
        kwargs = {}
        partition = self.partition
        if policy_id is None and partition is not None and partition.enabled:
            kwargs = {'ring_owner': partition.owner,
                      'members': partition.members}
        if policy_id is None:
            policies = self._held.claim(
                self.engine_id, self.lease_seconds,
                ring=kwargs.get('members'),
                take_limit=cfg.CONF.heat_health.takeover_batch,
                observed=self.observed, **kwargs)
        else:
            policies = policy_object.Policy.claim(
                self.engine_id, self.lease_seconds, policy_id=policy_id,
                **kwargs)
            self.registrations += 1
        owned = {p.id: p.generation for p in policies}
        if policy_id is None:
            for gone in set(self._owned) - set(owned):
                self._resolutions.pop(gone, None)
                self._bounded.pop(gone, None)
                self._errors.pop(gone, None)
                LOG.info('Policy %s is no longer watched by this engine',
                         gone)
            for new in set(owned) - set(self._owned):
                LOG.info('Policy %(p)s is now watched by engine %(e)s '
                         '(generation %(g)d)',
                         {'p': new, 'e': self.engine_id, 'g': owned[new]})
            self._owned = owned
        else:
            self._owned.update(owned)
        return policies

    def renew(self):
        """Keep the leases held, between the long steps of one tick.

        Asked of the monitor loop only (a loop that hangs loses its
        leases); at most once a sixth of a lease.
        """
        now = time.monotonic()
        if now < self._next_renew:
            return 0
        self._next_renew = now + self.lease_seconds / 6.0
        return policy_object.Policy.renew(self.engine_id,
                                          self.lease_seconds)

    def generation(self, policy_id):
        """The generation this engine holds the policy under, or None."""
        return self._owned.get(policy_id)

    def free_dead_owners(self):
        """Release the policies of lease holders that do not answer.

        One liveness probe per other engine holding a lease; a live engine
        answers in milliseconds, a dead one costs the probe's timeout.
        With a coordination backend the group tells who is alive instead.
        """
        freed = 0
        for owner in policy_object.Policy.other_owners(self.engine_id):
            if not service_utils.engine_alive(self._context(), owner):
                count = policy_object.Policy.release(owner)
                LOG.warning('heat-health-engine %(o)s holds %(n)d policies '
                            'but does not answer: freeing them',
                            {'o': owner, 'n': count})
                freed += count
        return freed

    def release(self):
        """Give up every policy (graceful stop): others claim them at once."""
        count = policy_object.Policy.release(self.engine_id)
        self._owned = {}
        self._held = HeldRows()
        self._resolutions = {}
        self._bounded = {}
        self._errors = {}
        self._kept = {}
        LOG.info('Released %(n)d policies of engine %(e)s',
                 {'n': count, 'e': self.engine_id})
        return count

    def forget(self, policy_id):
        self._owned.pop(policy_id, None)
        self._kept.pop(policy_id, None)
        self._resolutions.pop(policy_id, None)
        self._bounded.pop(policy_id, None)
        self._errors.pop(policy_id, None)

    def refresh_targets(self, policy):
        """Resolve the policy's servers from Heat and update its targets."""
        return self.refresh_all([policy])[policy.id]

    def refresh_all(self, policies, read=None):
        """refresh_targets for many policies with one batch of queries.

        Returns {policy id: [Target]}; target rows are only written when
        the places found, or the stack actions on them, changed since the
        last resolution.

        :param read: ids of the policies whose rows are read and returned
            (None: all), besides those whose places were just stored:
            reading every row of a large fleet at every resolution would
            cost more than all the rest of watching it.
        """
        if not policies:
            return {}
        with self._refresh_lock:
            return self._refresh_all(policies, read)

    def _refresh_all(self, policies, read=None):
        synced = set()
        deleted = [p for p in policies if p.deleted]
        for policy in deleted:
            self._undo_deleted(policy)
        policies = [p for p in policies if not p.deleted]
        resolutions = self._resolve_each(policies) if policies else {}
        for policy in policies:
            if self.on_progress is not None:
                self.on_progress()
            resolution = resolutions.get(policy.id)
            if isinstance(resolution, Exception):
                self.failed(policy, 'its stack could not be read',
                            resolution)
                continue
            try:
                refused, stored = self._sync(policy, resolution)
                if stored:
                    synced.add(policy.id)
            except Exception as error:
                self.failed(policy, 'its targets could not be stored',
                            error)
                continue
            if self._resolutions.get(policy.id) is not resolution:
                self.resolutions_changed += 1
            self._resolutions[policy.id] = resolution
            reasons = [refused[place] for place in sorted(refused)] + [
                'resource %s is not watched: %s' % (path[:255], why)
                for path, why in resolution.unwatched]
            self._set_error(policy, '; '.join(reasons)[:1024] or None)
        wanted = [p.id for p in policies
                  if read is None or p.id in read or p.id in synced]
        found = target_object.Target.get_all_by_policies(wanted)
        found.update((p.id, []) for p in deleted)
        return found

    def _undo_deleted(self, policy):
        """A deleted policy kept for its leftovers: undo them, then go.

        Its stack may be gone: it is not resolved, and nothing watches
        its rows (held as a suspended stack's).
        """
        self._resolutions[policy.id] = HELD
        try:
            if leftovers.undo_deleted(self.undoer, policy):
                LOG.info('Deleted policy %s: what its recovery left is '
                         'undone', policy.id)
        except Exception as error:
            LOG.warning('Deleted policy %(p)s: its leftovers are tried '
                        'again later: %(e)s', {'p': policy.id, 'e': error})

    def _resolve_each(self, policies):
        """{policy id: Resolution or the exception resolving it raised}.

        One batch for all; when the batch fails, each policy alone, so
        that one policy's stack does not keep the others unresolved.
        """
        try:
            return self._resolver.resolve(self._context(), policies)
        except Exception:
            LOG.debug('Resolving %d policies at once failed; one by one',
                      len(policies))
        found = {}
        for policy in policies:
            try:
                found.update(self._resolver.resolve(self._context(),
                                                    [policy]))
            except Exception as error:
                found[policy.id] = error
        return found

    def _sync(self, policy, resolution):
        """Store the policy's places.

        Returns ({place: why it is not watched}, whether rows were synced).
        A Resolution the resolver kept (its tree is quiet) was stored as it
        is: its places are not gone over again.
        """
        previous = self._resolutions.get(policy.id)
        bounded = self._bounded.get(policy.id)
        if (previous is resolution and bounded is not None and
                bounded[0] is resolution and not self._kept.get(policy.id)):
            return bounded[1], False
        places, refused = place_limits.bounded(resolution.places)
        # A place whose stack action just ended (a member update, our
        # own recovery) starts its grace again.
        graced = (previous.busy - resolution.busy) if previous else ()
        stored = bool(previous is None or graced or
                      previous.places != resolution.places or
                      self._kept.get(policy.id))
        if stored:
            (added, removed, replaced), kept = leftovers.sync(
                self.undoer, policy.id, policy.stack_id, places,
                policy.parsed.grace, graced)
            self._kept[policy.id] = kept
            if added or removed or replaced:
                LOG.info('Policy %(p)s: %(a)d targets added, %(r)d '
                         'removed, %(c)d servers replaced, %(n)d '
                         'watched',
                         {'p': policy.id, 'a': len(added),
                          'r': len(removed), 'c': len(replaced),
                          'n': len(places)})
        self._bounded[policy.id] = (resolution, refused)
        return refused, stored

    def failed(self, policy, what, error):
        """Keep the policy's error; its targets are tried again next time.

        Logged with its traceback once per distinct error, not at every
        refresh while it lasts.
        """
        # A database error's first line says what; the rest is its SQL.
        message = '%s: %s' % (what, (str(error).splitlines() or
                                     [type(error).__name__])[0])
        if self._errors.get(policy.id) != message:
            LOG.error('Policy %(p)s of stack %(s)s is not watched fully, '
                      '%(m)s', {'p': policy.id, 's': policy.stack_id,
                                'm': message}, exc_info=error)
        self._set_error(policy, message)

    def _set_error(self, policy, message):
        """Store the policy's error (None clears it) when it changed."""
        before = self._errors.get(policy.id, getattr(policy, 'error', None))
        self._errors[policy.id] = message
        if message is None and before is not None:
            LOG.info('Policy %s is watched fully again', policy.id)
        if message == before:
            return
        try:
            policy_object.Policy.set_error(
                self.engine_id, policy.id, self.generation(policy.id),
                message)
        except Exception:
            # Memory forgets it: the next refresh writes it again.
            self._errors.pop(policy.id, None)
            LOG.exception('Could not store the error of policy %s',
                          policy.id)

    def error(self, policy_id):
        """Why the policy is not watched fully now, or None."""
        return self._errors.get(policy_id)

    def resolution(self, policy):
        """The policy's last Resolution, resolving it if there is none.

        A policy whose stack cannot be read has its targets held (as if
        its stack were suspended) until it can.
        """
        found = self._resolutions.get(policy.id)
        if found is None:
            try:
                found = self._resolver.resolve(self._context(),
                                               [policy])[policy.id]
            except Exception as error:
                self.failed(policy, 'its stack could not be read', error)
                return HELD
        return found

    def resolve_now(self, policy):
        """A fresh Resolution straight from Heat's database."""
        with self._refresh_lock:
            found = self._resolver.resolve(self._context(),
                                           [policy])[policy.id]
        return found

    def missing_targets(self, policy):
        resolution = self._resolutions.get(policy.id)
        return list(resolution.missing) if resolution else []
