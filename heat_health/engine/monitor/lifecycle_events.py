"""LIFECYCLE_EVENTS: Nova's notifications turned into observations.

One listener per engine, whatever the number of policies, on Nova's
exchange: the versioned topic and the legacy ``compute.instance.*`` one.
Every engine listens in the same pool (``[heat_health] notification_pool``),
so the broker hands each notification to one engine only, and consumers
with pools of their own keep getting all of them (Senlin gave each cluster
a listener in one shared pool, so listeners took each other's events).

Most notifications concern servers nobody watches: the instance id is read
first and the notification set aside unless ``is_watched`` says otherwise.
What is set aside is kept a few seconds: an engine learns of the servers
another engine has just started to watch at its next read of the index, and
news of them that reaches it before that is handled then, not lost.

A guest the hypervisor paused or lost leaves its server ACTIVE in Nova: the
one ``instance.update`` Nova sends of it says ``state: active`` and only its
``power_state`` (a versioned payload's; legacy ones carry none) tells.
"""

import collections
import datetime
import re
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from heat_health.common import config
from heat_health.common import power_states
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

LEGACY_PREFIX = 'compute.'

# Actions that leave the server not running (or gone).
_UNHEALTHY_ACTIONS = ('power_off', 'pause', 'suspend', 'shutdown',
                      'soft_delete', 'delete')
# Actions after which a server is running again, if it is active.
_HEALTHY_ACTIONS = ('power_on', 'unpause', 'resume', 'reboot', 'rebuild',
                    'restore')
# Actions whose failure leaves the server broken.  A failed volume attach
# or live migration does not: Nova rolls those back.
_FAILING_ACTIONS = ('create', 'rebuild', 'reboot', 'power_on', 'resume',
                    'unpause', 'restore', 'unshelve', 'evacuate',
                    'resize_finish')
# vm_state of instance.update that means the server is not running.
_UNHEALTHY_STATES = frozenset(['error', 'stopped', 'paused', 'suspended',
                               'deleted', 'soft-delete'])

# Seconds and number of notifications about servers not known to be
# watched that are kept for when they are: more than the few ticks an
# engine's index can lag behind another engine's new targets.
KEEP_UNWATCHED_SECONDS = 10.0
MAX_UNWATCHED = 5000

EVENT_TYPES = re.compile(
    r'^(%s)?instance\.(update|(%s)\.end|(%s)\.end|(%s)\.error)$' % (
        re.escape(LEGACY_PREFIX), '|'.join(_UNHEALTHY_ACTIONS),
        '|'.join(_HEALTHY_ACTIONS), '|'.join(_FAILING_ACTIONS)))
"""The notifications that can change a verdict; the broker's others are
dropped by the dispatcher before any payload is looked at."""

_UNHEALTHY_TYPES = frozenset(['instance.%s.end' % a
                              for a in _UNHEALTHY_ACTIONS] +
                             ['instance.%s.error' % a
                              for a in _FAILING_ACTIONS])
_HEALTHY_TYPES = frozenset('instance.%s.end' % a for a in _HEALTHY_ACTIONS)


def instance_id(payload):
    """The instance uuid of a versioned or legacy payload, or None."""
    try:
        data = payload.get('nova_object.data')
        if data is not None:
            return data.get('uuid')
        return payload.get('instance_id')
    except AttributeError:
        return None


def verdict(event_type, payload):
    """(verdict, reason) for a notification, or None if it says nothing.

    :param event_type: versioned (instance.*) or legacy
        (compute.instance.*) event type.
    """
    event = event_type
    if event.startswith(LEGACY_PREFIX):
        event = event[len(LEGACY_PREFIX):]
    data = payload.get('nova_object.data', payload)
    vm_state = data.get('state')
    reason = 'Nova notification %s' % event_type
    if event in _UNHEALTHY_TYPES:
        return obs.UNHEALTHY, reason
    task_state = data.get('task_state', data.get('new_task_state'))
    if vm_state == 'active' and not task_state and (
            event in _HEALTHY_TYPES or event == 'instance.update'):
        # Active, and over: the guest must run too.
        down = power_states.active_but_down(data.get('power_state'))
        if down is not None:
            return obs.UNHEALTHY, down
    if event in _HEALTHY_TYPES:
        # A rebuild of a stopped server ends stopped.
        if vm_state in (None, 'active'):
            return obs.HEALTHY, reason
        return None
    if event == 'instance.update':
        reason = '%s (vm_state %s)' % (reason, vm_state)
        if vm_state in _UNHEALTHY_STATES:
            return obs.UNHEALTHY, reason
        if vm_state == 'active' and not task_state:
            return obs.HEALTHY, reason
    return None


def notification_time(metadata):
    """When Nova sent the notification (naive UTC), else now."""
    stamp = (metadata or {}).get('timestamp')
    if stamp:
        try:
            when = datetime.datetime.fromisoformat(str(stamp))
        except ValueError:
            LOG.debug('Unreadable notification timestamp %r', stamp)
        else:
            if when.tzinfo is not None:
                when = when.astimezone(datetime.timezone.utc).replace(
                    tzinfo=None)
            return when
    return timeutils.utcnow()


def to_observation(event_type, payload, metadata, is_watched):
    """The Observation a notification makes, or None.

    None for an unwatched instance or a notification with nothing to say.
    """
    server_id = instance_id(payload)
    if server_id is None or not is_watched(server_id):
        return None
    found = verdict(event_type, payload)
    if found is None:
        return None
    return obs.Observation(server_id, found[0], found[1],
                           obs.LIFECYCLE_EVENTS, notification_time(metadata))


class Unwatched(object):
    """Notifications about servers not known to be watched, for a while.

    Kept as received (the payload is read only if its server turns out to
    be watched); the oldest go first when there are too many. ``changes``
    counts the changes of what is watched, so that a listener thread that
    set news aside while one happened looks at what was kept once more.
    """

    def __init__(self, seconds=KEEP_UNWATCHED_SECONDS, size=MAX_UNWATCHED,
                 clock=time.monotonic):
        self._seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._kept = collections.deque(maxlen=size)
        self.changes = 0

    def changed(self):
        with self._lock:
            self.changes += 1

    def keep(self, server_id, message):
        with self._lock:
            self._kept.append((self._clock(), server_id, message))

    def release(self, is_watched):
        """The messages kept about servers watched now, oldest first."""
        oldest = self._clock() - self._seconds
        with self._lock:
            kept, self._kept = self._kept, collections.deque(
                maxlen=self._kept.maxlen)
            found = []
            for item in kept:
                at, server_id, message = item
                if at < oldest:
                    continue
                if is_watched(server_id):
                    found.append(message)
                else:
                    self._kept.append(item)
        return found


class _Endpoint(object):
    """Takes notifications in batches: fewer hand-offs between threads."""

    filter_rule = oslo_messaging.NotificationFilter(
        event_type=EVENT_TYPES.pattern)

    def __init__(self, observe, is_watched, unwatched=None):
        self._observe = observe
        self._is_watched = is_watched
        self._unwatched = unwatched or Unwatched()
        self._count_lock = threading.Lock()
        self.handled = 0

    def info(self, messages):
        with self._count_lock:
            self.handled += len(messages)
        changes = self._unwatched.changes
        kept = False
        for message in messages:
            server_id = instance_id(message.get('payload'))
            if server_id is None:
                continue
            if self._is_watched(server_id):
                self._handle(message)
            else:
                self._unwatched.keep(server_id, message)
                kept = True
        if kept and self._unwatched.changes != changes:
            # What is watched changed while these were set aside, maybe
            # after the last look at what was kept.
            self._release()

    def watched_changed(self):
        """``is_watched`` answers anew: handle what was kept for that."""
        self._unwatched.changed()
        self._release()

    def _release(self):
        for message in self._unwatched.release(self._is_watched):
            self._handle(message)

    def _handle(self, message):
        try:
            found = to_observation(message['event_type'],
                                   message['payload'], message['metadata'],
                                   self._is_watched)
            if found is not None:
                self._observe(found)
        except Exception:
            # Acknowledged anyway: a notification that breaks us once
            # would break us on every redelivery.
            LOG.exception('Handling Nova notification %s failed',
                          message.get('event_type'))

    error = info
    warn = info


def targets(conf=cfg.CONF):
    """The topics listened to, as oslo.messaging targets."""
    group = conf[config.GROUP]
    return [oslo_messaging.Target(exchange=group.nova_notification_exchange,
                                  topic=topic)
            for topic in (group.nova_versioned_topic,
                          group.nova_legacy_topic) if topic]


class LifecycleListener(object):
    """The engine's one listener on Nova's notifications.

    :param observe: called with each Observation, from the listener's
        worker threads (so it must be thread-safe).
    :param is_watched: server id -> bool; called for every notification of
        a relevant type, so it must be cheap (a set or dict lookup).
    :param transport: a notification transport; Heat's (heat.conf's
        transport_url) when not given.
    :param pool: listener pool; ``[heat_health] notification_pool`` when
        not given.
    """

    def __init__(self, observe, is_watched, transport=None, pool=None,
                 conf=cfg.CONF):
        self._own_transport = transport is None
        self._transport = (transport if transport is not None else
                           oslo_messaging.get_notification_transport(conf))
        self._targets = targets(conf)
        self._pool = pool or conf[config.GROUP].notification_pool
        self._listener = None
        self._endpoint = _Endpoint(observe, is_watched)
        if self._targets:
            group = conf[config.GROUP]
            self._listener = oslo_messaging.get_batch_notification_listener(
                self._transport, self._targets,
                [self._endpoint], executor='threading',
                pool=self._pool,
                batch_size=group.notification_batch_size,
                batch_timeout=group.notification_batch_timeout)

    @property
    def handled(self):
        """Notifications of the types that matter handled so far."""
        return self._endpoint.handled

    def watch(self, server_ids=None):
        """What is watched changed: news kept of those now watched is handled.

        ``is_watched`` already answers for the new set; ``server_ids`` is
        for listeners in other processes (listener_workers).
        """
        self._endpoint.watched_changed()

    def start(self):
        if self._listener is None:
            LOG.info('Nova notification topics are all disabled: '
                     'LIFECYCLE_EVENTS sees nothing')
            return
        self._listener.start()
        LOG.info('Listening to Nova notifications on %(targets)s in pool '
                 '%(pool)s', {'targets': ', '.join(
                     '%s/%s' % (t.exchange, t.topic) for t in self._targets),
                     'pool': self._pool})

    def stop(self):
        if self._listener is not None:
            self._listener.stop()
            self._listener.wait()
        if self._own_transport:
            self._transport.cleanup()
