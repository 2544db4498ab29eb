"""What recovery tells: its timeline, Heat's events and the brake.

Every row says what was done or why nothing is, once: a hold is recorded
when its kind changes, the brake when its cause does. The brake is stored
fenced (only the policy's owner under its generation writes it) and
believed once stored; what is stored is taken from the policy's row until
this engine wrote it, so a restarted engine or a new owner releases a
brake whose cause has cleared.
"""

import queue
import threading

from oslo_log import log as logging

from heat_health.db import api as db_api
from heat_health.engine.recovery import planner

LOG = logging.getLogger(__name__)


# What a brake write that raised left stored: it may have committed.
_UNKNOWN = object()


def _brake_kind(reason):
    """What a brake's reason says, without the details that change."""
    if reason and reason.startswith(planner.BLIND):
        return planner.BLIND
    return reason


class EventWriter(object):
    """Writes Heat's events in order, on a thread of its own.

    A step's line in Heat's event list (four queries of Heat's tables)
    then never holds up the effect that follows it: when several servers
    fail together, their drains, marks and updates are not kept waiting
    behind each other's events. Our own timeline is stored with each step
    and stays the record; what is queued at a stop is written first.
    """

    def __init__(self, write):
        self._write = write
        self._queue = queue.Queue()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='heat-health-heat-events')
        self._thread.start()

    def stop(self, timeout=10):
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=timeout)
            self._thread = None

    def submit(self, *args, **kwargs):
        if self._thread is None:
            return self._write(*args, **kwargs)
        self._queue.put((args, kwargs))

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            args, kwargs = item
            try:
                self._write(*args, **kwargs)
            except Exception as e:
                LOG.debug('No Heat event for %(r)s of stack %(s)s: %(e)s',
                          {'r': args[1], 's': args[0], 'e': e})


class Timeline(object):
    """The recovery loop's records.

    :param replacer: writes Heat's events (heat_replace.HeatReplacer).
    """

    def __init__(self, engine_id, replacer, clock):
        self.engine_id = engine_id
        self._replacer = replacer
        self._clock = clock
        # Heat's events: written by the step itself until started.
        self.heat_events = EventWriter(self._record_event)
        self._held = {}          # target id -> kind of hold recorded
        # policy id -> ((row's creation, generation), reason stored)
        self._braked = {}

    def forget(self, target_id):
        """The target is acted on: its next hold is recorded again."""
        self._held.pop(target_id, None)

    def brake(self, policy, reason, now):
        """Store the brake when its cause changes (fenced, then believed).

        What is stored is known from the policy's row until this engine
        wrote it under the generation it holds; after a write that raised
        (it may have committed) it is not known, and written again.
        """
        known = self._braked.get(policy.id)
        # A policy deleted and registered again under the same id starts
        # its generations again: its row's creation tells them apart.
        held = (policy.created_at, policy.generation)
        stored = (known[1] if known is not None and known[0] == held
                  else policy.braked)
        if stored is not _UNKNOWN and (
                _brake_kind(stored) == _brake_kind(reason)):
            # The same cause (each Nova error has its own request id).
            return
        try:
            written = db_api.policy_set_braked(self.engine_id, policy.id,
                                               policy.generation, reason)
            if written:
                db_api.event_add([{
                    'policy_id': policy.id, 'server_id': None,
                    'old_state': None,
                    'new_state': 'BRAKED' if reason else 'UNBRAKED',
                    'reason': reason or 'brake released: recovery resumes',
                    'source': 'recovery', 'created_at': now}])
        except Exception:
            LOG.exception('Could not store the brake of policy %s',
                          policy.id)
            self._braked[policy.id] = (held, _UNKNOWN)
            return
        if not written:
            return
        if reason:
            LOG.warning('Policy %(p)s braked: %(r)s',
                        {'p': policy.id, 'r': reason})
        else:
            LOG.info('Policy %s released its brake', policy.id)
        self._braked[policy.id] = (held, reason)

    def hold(self, policy, target, reason, now):
        """Record once why a failed target is not acted on."""
        kind = reason.split(':')[0]
        if self._held.get(target.id) == kind:
            return
        self._held[target.id] = kind
        LOG.info('Not recovering %(s)s (%(p)s) now: %(r)s',
                 {'s': target.server_id, 'p': target.path, 'r': reason})
        self.record(policy, target, 'SUPPRESSED', reason)

    def record(self, policy, target, new_state, reason, detail=None):
        """A timeline row that is not a state change.

        :param detail: what the reason cannot hold (a dict).
        """
        try:
            db_api.event_add([{
                'policy_id': policy.id, 'server_id': target.server_id,
                'path': target.path,
                'old_state': target.state, 'new_state': new_state,
                'reason': reason, 'source': 'recovery',
                'created_at': self._clock(), 'detail': detail}])
        except Exception:
            LOG.exception('Could not record %s', reason)

    def lb_event(self, policy, target, new_state, reason):
        LOG.info('%(s)s (%(p)s): %(r)s', {'s': target.server_id,
                                          'p': target.path, 'r': reason})
        self.record(policy, target, new_state, reason)
        self.heat_event(target, 'IN_PROGRESS', reason)

    def heat_event(self, target, status, reason):
        """The step in Heat's own event list of the server's resource."""
        try:
            self.heat_events.submit(target.stack_id, target.resource_name,
                                    reason[:255], status)
        except Exception as e:
            LOG.debug('No Heat event for %(p)s: %(e)s',
                      {'p': target.path, 'e': e})

    def _record_event(self, stack_id, resource_name, reason, status):
        self._replacer.record_event(stack_id, resource_name, reason,
                                    status=status)
