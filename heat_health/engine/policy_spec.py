"""A registered policy's spec, parsed once, typed, with its defaults.

heat-engine stores the resource's validated properties as a JSON dict; the
registry, the monitor, the tracker and the health report all read this one
view of it, so a default lives in exactly one place.
"""

import collections

from heat_health.engine.monitor import observation as obs

DEFAULT_INTERVAL = 60
DEFAULT_GRACE = 300
ANY_FAILED, ALL_FAILED = 'ANY_FAILED', 'ALL_FAILED'
DEFAULT_MODES = (obs.NODE_STATUS_POLLING,)

# Modes for which the engine lists servers in Nova (POLL_URL for the
# servers' names and addresses).
POLLED = frozenset([obs.NODE_STATUS_POLLING, obs.NODE_STATUS_POLL_URL])


class PolicySpec(collections.namedtuple('PolicySpec', [
        'targets',        # resource names of the policy's stack
        'modes',          # detection mode names, in the template's order
        'mode_options',   # {mode: {option: value}}
        'interval',       # seconds between two checks of each server
        'grace',          # seconds after a create or update: no failure
        'conditional',    # ANY_FAILED or ALL_FAILED
        'enabled'])):     # the template's maintenance switch
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
                   enabled=bool(enabled))

    @classmethod
    def of(cls, policy):
        """The spec of a Policy object (or row)."""
        return cls.parse(policy.spec, policy.enabled)

    def options(self, mode):
        """The options of ``mode``, or None if the policy lacks it."""
        return self.mode_options.get(mode)

    @property
    def polled(self):
        return bool(POLLED.intersection(self.modes))

    def detection_key(self):
        """What the tracker's verdicts depend on: a change drops them."""
        return (self.modes, self.conditional)
