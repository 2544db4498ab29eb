"""A registered policy's spec, parsed once, typed, with its defaults.

heat-engine stores the resource's validated properties as a JSON dict; the
registry, the monitor, the tracker and the health report all read this one
view of it, so a default lives in exactly one place.
"""

import collections

from heat_health.policy import observation as obs
from heat_health.policy import poll_url_guard
from heat_health.policy import poll_url_rules

DEFAULT_INTERVAL = 60
DEFAULT_GRACE = 300
ANY_FAILED, ALL_FAILED = 'ANY_FAILED', 'ALL_FAILED'
DEFAULT_MODES = (obs.NODE_STATUS_POLLING,)
# Added to the evidence bound (``PolicySpec.evidence_seconds``).
EVIDENCE_SLACK_SECONDS = 10

# Modes for which the engine lists servers in Nova (POLL_URL for the
# servers' names and addresses).
POLLED = frozenset([obs.NODE_STATUS_POLLING, obs.NODE_STATUS_POLL_URL])


HEAL, OBSERVE = 'HEAL', 'OBSERVE'
# Rungs outside Nova and Heat, and what RECREATE replaces.
MISTRAL_WORKFLOW, WEBHOOK = 'MISTRAL_WORKFLOW', 'WEBHOOK'
SERVER, MEMBER = 'SERVER', 'MEMBER'

# Maxima of OS::Heat::HealthPolicy's recovery properties; a policy stored
# before they existed is read with its values clamped to them.
# A fenced server must be confirmed stopped within this: ten times Nova's
# default shutdown_timeout, and a recovery worker waits no longer.
MAX_NODE_DELETE_TIMEOUT = 600
# Twice an engine's default max_concurrent_recoveries: more at once is a
# mass failure, which the brake is for, not one policy's share.
MAX_CONCURRENT = 20


def rung(action):
    """(name, params) of one rung of the ladder, as stored with attempts.

    A workflow's rung is named MISTRAL_WORKFLOW, its workflow and input in
    its params; a webhook's is named WEBHOOK, its URL in its params.
    """
    params = dict(action.get('params') or {})
    kind = action.get('type')
    if kind == MISTRAL_WORKFLOW:
        return (MISTRAL_WORKFLOW, {'workflow': action.get('name'),
                                   'input': params})
    if kind == WEBHOOK:
        return (WEBHOOK, {'url': action.get('url'), 'input': params})
    return (action['name'], params)


OUTSIDE = frozenset([MISTRAL_WORKFLOW, WEBHOOK])


def rung_label(name, params):
    """A rung as the timeline names it: REBOOT SOFT, workflow x..."""
    params = params or {}
    if name == MISTRAL_WORKFLOW:
        return 'workflow %s' % params.get('workflow')
    if name == WEBHOOK:
        return 'WEBHOOK %s' % poll_url_guard.redacted(params.get('url') or '')
    kind = params.get('type')
    return '%s %s' % (name, kind) if kind else name


class RecoverySpec(collections.namedtuple('RecoverySpec', [
        'actions',          # ((name, params), ...) or None: state-aware
        'fence_compute',    # stop the old server before a RECREATE
        'node_delete_timeout',  # seconds for the fencing to be confirmed
        'node_force_recreate',  # force-delete a server that will not stop
        'max_attempts',     # attempts within attempt_window, then GAVE_UP
        'attempt_window',   # seconds
        'healthy_reset',    # seconds healthy before attempts are forgotten
        'backoff_initial',  # seconds before the second attempt
        'backoff_max',      # longest wait between two attempts
        'backoff_jitter',   # fraction of noise on each wait
        'success_threshold',  # healthy verdicts after an action
        'max_concurrent',   # recoveries of the policy at once
        'max_unhealthy_fraction',  # the brake
        'mode',             # HEAL or OBSERVE
        'replace',          # what RECREATE replaces: SERVER or MEMBER
        'respect_user_actions'])):  # a user's stop is not a failure
    __slots__ = ()

    @classmethod
    def parse(cls, recovery):
        recovery = recovery or {}

        def get(key, default):
            value = recovery.get(key)
            return default if value is None else value

        actions = recovery.get('actions')
        if actions:
            actions = tuple(rung(a) for a in actions)
        return cls(actions=actions or None,
                   fence_compute='COMPUTE' in (recovery.get('fencing') or ()),
                   node_delete_timeout=min(get('node_delete_timeout', 20),
                                           MAX_NODE_DELETE_TIMEOUT),
                   node_force_recreate=bool(recovery.get(
                       'node_force_recreate')),
                   max_attempts=get('max_attempts', 5),
                   attempt_window=get('attempt_window', 3600),
                   healthy_reset=get('healthy_reset', 600),
                   backoff_initial=get('backoff_initial', 10),
                   backoff_max=get('backoff_max', 300),
                   backoff_jitter=get('backoff_jitter', 0.2),
                   success_threshold=get('success_threshold', 1),
                   max_concurrent=min(get('max_concurrent', 1),
                                      MAX_CONCURRENT),
                   max_unhealthy_fraction=get('max_unhealthy_fraction',
                                              0.55),
                   mode=get('mode', HEAL),
                   replace=get('replace', SERVER),
                   respect_user_actions=bool(get('respect_user_actions',
                                                 True)))

    def backoff(self, attempt, noise=0.0):
        """Seconds to wait after the ``attempt``-th attempt (1-based) ended.

        From backoff_initial, doubling to backoff_max, with ``noise`` in
        [-1, 1] scaled by backoff_jitter.
        """
        base = min(self.backoff_max,
                   self.backoff_initial * 2 ** max(attempt - 1, 0))
        return max(0.0, base * (1.0 + self.backoff_jitter * noise))


class PolicySpec(collections.namedtuple('PolicySpec', [
        'targets',        # resource names of the policy's stack
        'modes',          # detection mode names, in the template's order
        'mode_options',   # {mode: {option: value}}
        'interval',       # seconds between two checks of each server
        'grace',          # seconds after a create or update: no failure
        'conditional',    # ANY_FAILED or ALL_FAILED
        'enabled',        # the template's maintenance switch
        'recovery'])):    # its RecoverySpec
    __slots__ = ()

    @classmethod
    def parse(cls, spec, enabled=True):
        spec = spec or {}
        detection = spec.get('detection') or {}
        entries = detection.get('detection_modes')
        if entries is None:
            entries = [{'type': m} for m in DEFAULT_MODES]
        modes = tuple(entry['type'] for entry in entries)
        options = {entry['type']: dict(entry.get('options') or {})
                   for entry in entries}
        grace = detection.get('node_update_timeout')
        return cls(targets=tuple(spec.get('targets') or ()),
                   modes=modes,
                   mode_options=options,
                   interval=detection.get('interval') or DEFAULT_INTERVAL,
                   grace=DEFAULT_GRACE if grace is None else grace,
                   conditional=(detection.get('recovery_conditional') or
                                ANY_FAILED),
                   enabled=bool(enabled),
                   recovery=RecoverySpec.parse(spec.get('recovery')))

    @classmethod
    def of(cls, policy):
        """The spec of a Policy object (or row)."""
        return cls.parse(policy.spec, policy.enabled)

    def options(self, mode):
        """The options of ``mode``, or None if the policy lacks it."""
        return self.mode_options.get(mode)

    @property
    def evidence_seconds(self):
        """Seconds a detector's verdict stays evidence for an action.

        Two detection intervals, plus the longest a poll URL check may
        take (its tries and their waits), plus ten seconds of slack: a
        detector that still sees the failure has said so again by then.
        """
        check = 0
        options = self.options(obs.NODE_STATUS_POLL_URL)
        if options is not None:
            value = dict(poll_url_rules.DEFAULTS, **{
                k: v for k, v in options.items() if v is not None}).get
            check = value(poll_url_rules.RETRY_LIMIT) * (
                value(poll_url_rules.TIMEOUT) +
                value(poll_url_rules.RETRY_INTERVAL))
        return 2 * self.interval + check + EVIDENCE_SLACK_SECONDS

    @property
    def polled(self):
        return bool(POLLED.intersection(self.modes))

    def detection_key(self):
        """What the tracker's verdicts depend on: a change drops them."""
        return (self.modes, self.conditional)
