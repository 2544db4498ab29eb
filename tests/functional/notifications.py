"""A listener on the real RabbitMQ for Nova's versioned notifications.

It has a pool of its own, so it gets a copy of every notification without
taking any from heat-health-engine's listener.
"""

import configparser
import threading
import time
import uuid

import kombu
from oslo_config import cfg
import oslo_messaging

from tests.functional import cloud


def transport_url():
    """The message bus of the local deployment, as heat.conf names it."""
    conf = configparser.RawConfigParser(strict=False)
    conf.read(cloud.STATE_DIR / 'etc' / 'heat.conf')
    return conf.get('DEFAULT', 'transport_url')


def delete_queue(url, name):
    """Remove a listener pool's queue once its listener stopped.

    The queue outlives the listener and would collect a copy of every later
    notification.
    """
    with kombu.Connection(url.replace('rabbit://', 'amqp://', 1)) as conn:
        conn.default_channel.queue_delete(name)


class _Collector(object):
    def __init__(self):
        self.events = []
        # (event type, payload, when Nova sent it: its own timestamp)
        self.stamped = []
        self.changed = threading.Condition()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._add(event_type, payload, metadata)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._add(event_type, payload, metadata)

    def _add(self, event_type, payload, metadata):
        with self.changed:
            self.events.append((event_type, payload))
            self.stamped.append((event_type, payload,
                                 metadata.get('timestamp')))
            self.changed.notify_all()


class NovaNotifications(object):

    def __init__(self, topic='versioned_notifications'):
        self._url = transport_url()
        self._pool = 'heat-health-tests-%s' % uuid.uuid4().hex[:8]
        self._transport = oslo_messaging.get_notification_transport(
            cfg.ConfigOpts(), url=self._url)
        self._collector = _Collector()
        self._listener = oslo_messaging.get_notification_listener(
            self._transport,
            [oslo_messaging.Target(exchange='nova', topic=topic)],
            [self._collector], executor='threading', pool=self._pool)

    def start(self):
        self._listener.start()

    def stop(self):
        self._listener.stop()
        self._listener.wait()
        self._transport.cleanup()
        delete_queue(self._url, self._pool)

    def stamped(self):
        """[(event type, payload, Nova's timestamp)] seen so far."""
        with self._collector.changed:
            return list(self._collector.stamped)

    def wait_for(self, server_id, event_type, state=None, timeout=30):
        """The payload of event_type for server_id (in that state)."""
        deadline = time.time() + timeout
        with self._collector.changed:
            while True:
                for seen_type, payload in self._collector.events:
                    data = payload.get('nova_object.data', {})
                    if (seen_type == event_type and
                            data.get('uuid') == server_id and
                            state in (None, data.get('state'))):
                        return data
                left = deadline - time.time()
                if left <= 0:
                    seen = sorted({t for t, p in self._collector.events
                                   if p.get('nova_object.data', {}).get(
                                       'uuid') == server_id})
                    raise AssertionError(
                        'no %s for %s within %ss; seen: %s'
                        % (event_type, server_id, timeout, seen))
                self._collector.changed.wait(left)
