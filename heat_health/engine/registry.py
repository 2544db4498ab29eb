"""The registry: which policies this heat-health-engine watches, and what.

Ownership is a lease in the policy's row. ``claim()`` renews this engine's
leases and takes the policies nobody holds or whose holder let its lease
expire, in one conditional UPDATE, so two engines never own the same policy
and an engine killed with ``kill -9`` is replaced within two leases (its
lease runs out, the next claim of any engine takes it). Sooner than that,
an engine that finds a lease holder not answering Heat's engine liveness
probe (which every heat-health-engine answers) frees its policies, so a
restarted engine resumes at once. An engine that stops gracefully releases
its policies so another takes them at once.
"""

import threading

from heat.common import context
from heat.common import service_utils
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.engine import targets as target_resolution
from heat_health.objects import policy as policy_object
from heat_health.objects import target as target_object

LOG = logging.getLogger(__name__)

DEFAULT_GRACE = 300


class Registry(object):

    def __init__(self, engine_id, lease_seconds=None):
        self.engine_id = engine_id
        self.lease_seconds = (lease_seconds or
                              cfg.CONF.heat_health.lease_seconds)
        self._resolver = target_resolution.Resolver()
        self._resolutions = {}   # policy id -> last Resolution
        self._owned = set()
        # The RPC endpoint, the lease keeper and the monitor share one
        # registry: two target syncs of a policy at once would both insert
        # its new servers.
        self._refresh_lock = threading.Lock()

    @staticmethod
    def _context():
        return context.get_admin_context()

    def claim(self, policy_id=None):
        """Policies this engine owns now, their leases renewed."""
        policies = policy_object.Policy.claim(self.engine_id,
                                              self.lease_seconds, policy_id)
        ids = {p.id for p in policies}
        if policy_id is None:
            for gone in self._owned - ids:
                self._resolutions.pop(gone, None)
                LOG.info('Policy %s is no longer watched by this engine',
                         gone)
            for new in ids - self._owned:
                LOG.info('Policy %(p)s is now watched by engine %(e)s',
                         {'p': new, 'e': self.engine_id})
            self._owned = ids
        else:
            self._owned |= ids
        return policies

    def free_dead_owners(self):
        """Release the policies of lease holders that do not answer.

        One liveness probe per other engine holding a lease; a live engine
        answers in milliseconds, a dead one costs the probe's timeout.
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
        self._owned = set()
        self._resolutions = {}
        LOG.info('Released %(n)d policies of engine %(e)s',
                 {'n': count, 'e': self.engine_id})
        return count

    def forget(self, policy_id):
        self._owned.discard(policy_id)
        self._resolutions.pop(policy_id, None)

    def targets(self, policy):
        return target_object.Target.get_all(policy.id)

    def refresh_targets(self, policy):
        """Resolve the policy's servers from Heat and update its targets."""
        return self.refresh_all([policy])[policy.id]

    def refresh_all(self, policies):
        """refresh_targets for many policies with one batch of queries.

        Returns {policy id: [Target]}; target rows are only written when
        the servers found differ from the last resolution.
        """
        if not policies:
            return {}
        with self._refresh_lock:
            return self._refresh_all(policies)

    def _refresh_all(self, policies):
        resolutions = self._resolver.resolve(self._context(), policies)
        for policy in policies:
            resolution = resolutions[policy.id]
            previous = self._resolutions.get(policy.id)
            if previous is None or previous.servers != resolution.servers:
                grace = policy.detection.get('node_update_timeout',
                                             DEFAULT_GRACE)
                added, removed = target_object.Target.sync(
                    policy.id, resolution.servers, grace)
                if added or removed:
                    LOG.info('Policy %(p)s: %(a)d targets added, %(r)d '
                             'removed, %(n)d watched',
                             {'p': policy.id, 'a': len(added),
                              'r': len(removed),
                              'n': len(resolution.servers)})
            self._resolutions[policy.id] = resolution
        return target_object.Target.get_all_by_policies(
            [p.id for p in policies])

    def stack_in_progress(self, policy):
        """Whether a stack of the policy is IN_PROGRESS (no detection).

        As of the last refresh: the policy's stack, or a nested stack of a
        target.
        """
        resolution = self._resolutions.get(policy.id)
        if resolution is None:
            resolution = self._resolver.resolve(self._context(),
                                                [policy])[policy.id]
        return resolution.in_progress

    def missing_targets(self, policy):
        resolution = self._resolutions.get(policy.id)
        return list(resolution.missing) if resolution else []


class LeaseKeeper(object):
    """Claims and renews this engine's policies every third of a lease.

    Runs even when nothing else in the engine does, so leases of a live
    engine never lapse and orphans of a dead one are taken within
    ``lease + lease / 3`` (the monitor may call ``claim()`` as well: claims
    are idempotent).
    """

    def __init__(self, registry):
        self.registry = registry
        self.interval = max(1.0, registry.lease_seconds / 3.0)
        self._stop = threading.Event()
        self._thread = None

    def _run(self):
        while not self._stop.is_set():
            try:
                self.registry.free_dead_owners()
                policies = self.registry.claim()
                self.registry.refresh_all(policies)
            except Exception:
                LOG.exception('Claiming health policies failed; retrying')
            self._stop.wait(self.interval)

    def start(self):
        self._thread = threading.Thread(target=self._run,
                                        name='heat-health-leases',
                                        daemon=True)
        self._thread.start()

    def stop(self):
        """Stop renewing and release every policy to the other engines."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            self.registry.release()
        except Exception:
            LOG.exception('Releasing health policies failed: other engines '
                          'take them when their leases expire')
