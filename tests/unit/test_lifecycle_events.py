"""Nova notifications, versioned and legacy, turned into observations."""

import datetime
import threading

from oslo_config import cfg
import oslo_messaging
import pytest

from heat_health.engine.monitor import lifecycle_events as le
from heat_health.policy import observation as obs

SERVER = '0b0a6c7e-4a4c-4d53-9a2c-2a1e4c51f0d1'
OTHER = '7f9a0f55-1111-4c1e-8f52-0dfc8e3b4c2a'
SENT = '2026-11-22 12:00:01.250000'


def versioned(vm_state='active', task_state=None, uuid=SERVER,
              kind='InstanceActionPayload', power_state='running'):
    """A payload as Nova's versioned notifications carry it (trimmed)."""
    return {'nova_object.name': kind, 'nova_object.namespace': 'nova',
            'nova_object.version': '1.9',
            'nova_object.data': {
                'uuid': uuid, 'tenant_id': 'p1', 'state': vm_state,
                'task_state': task_state, 'power_state': power_state,
                'host': 'compute-1', 'display_name': 'web-0',
                'fault': None}}


def legacy(vm_state='active', new_task_state=None, uuid=SERVER,
           power_state=1):
    """A payload as Nova's legacy compute.instance.* carry it (trimmed)."""
    return {'tenant_id': 'p1', 'instance_id': uuid, 'display_name': 'web-0',
            'state': vm_state, 'state_description': new_task_state or '',
            'new_task_state': new_task_state, 'power_state': power_state,
            'host': 'compute-1'}


def observe(event_type, payload, watched=(SERVER,)):
    return le.to_observation(event_type, payload,
                             {'message_id': 'm', 'timestamp': SENT},
                             set(watched).__contains__)


@pytest.mark.parametrize('event_type,vm_state', [
    ('instance.power_off.end', 'stopped'),
    ('instance.pause.end', 'paused'),
    ('instance.suspend.end', 'suspended'),
    ('instance.shutdown.end', 'stopped'),
    ('instance.soft_delete.end', 'soft-delete'),
    ('instance.delete.end', 'deleted'),
    ('instance.rebuild.error', 'error'),
    ('instance.power_on.error', 'error'),
])
@pytest.mark.parametrize('shape', ['versioned', 'legacy'])
def test_failure_events_are_unhealthy(event_type, vm_state, shape):
    if shape == 'legacy':
        event_type = 'compute.' + event_type
        payload = legacy(vm_state)
    else:
        payload = versioned(vm_state)
    found = observe(event_type, payload)
    assert found == obs.Observation(
        SERVER, obs.UNHEALTHY, 'Nova notification %s' % event_type,
        obs.LIFECYCLE_EVENTS, datetime.datetime(2026, 11, 22, 12, 0, 1,
                                                250000))


@pytest.mark.parametrize('event_type', [
    'instance.power_on.end', 'instance.unpause.end', 'instance.resume.end',
    'instance.reboot.end', 'instance.rebuild.end', 'instance.restore.end',
    'compute.instance.power_on.end', 'compute.instance.reboot.end',
])
def test_recovery_events_are_healthy(event_type):
    payload = (legacy() if event_type.startswith('compute.')
               else versioned())
    found = observe(event_type, payload)
    assert (found.verdict, found.reason) == (
        obs.HEALTHY, 'Nova notification %s' % event_type)


def test_rebuild_of_a_stopped_server_says_nothing():
    assert observe('instance.rebuild.end', versioned('stopped')) is None


@pytest.mark.parametrize('vm_state', ['error', 'stopped', 'paused',
                                      'suspended', 'deleted'])
def test_update_to_a_broken_state_is_unhealthy(vm_state):
    found = observe('instance.update', versioned(
        vm_state, kind='InstanceUpdatePayload'))
    assert found.verdict == obs.UNHEALTHY
    assert found.reason == ('Nova notification instance.update '
                            '(vm_state %s)' % vm_state)
    legacy_found = observe('compute.instance.update', legacy(vm_state))
    assert legacy_found.verdict == obs.UNHEALTHY


@pytest.mark.parametrize('power_state,reason', [
    ('paused', 'power state PAUSED (guest paused by the hypervisor)'),
    ('pending', 'power state NOSTATE (guest not found on the hypervisor)'),
    ('shutdown', "power state SHUTDOWN (guest shut down behind Nova's "
     'back)'),
    ('crashed', 'power state CRASHED (guest crashed)'),
    ('suspended', "power state SUSPENDED (guest suspended behind Nova's "
     'back)'),
])
def test_update_of_an_active_server_whose_guest_is_not_running(power_state,
                                                               reason):
    # The one instance.update Nova sends when the hypervisor pauses or
    # loses a guest: the vm_state stays active.
    found = observe('instance.update', versioned(
        kind='InstanceUpdatePayload', power_state=power_state))
    assert (found.verdict, found.reason) == (
        obs.UNHEALTHY, 'Nova status ACTIVE but %s' % reason)
    # Nova is working on it (its own reboot): no verdict yet.
    assert observe('instance.update', versioned(
        task_state='rebooting_hard', kind='InstanceUpdatePayload',
        power_state=power_state)) is None
    # Running, or no power state at all (legacy payloads carry none): the
    # vm_state alone, as before.
    assert observe('instance.update', versioned(
        kind='InstanceUpdatePayload')).verdict == obs.HEALTHY
    no_power = legacy()
    del no_power['power_state']
    assert observe('compute.instance.update',
                   no_power).verdict == obs.HEALTHY


def test_a_reboot_that_ends_with_the_guest_not_running_did_not_heal():
    found = observe('instance.reboot.end', versioned(power_state='paused'))
    assert (found.verdict, found.reason) == (
        obs.UNHEALTHY, 'Nova status ACTIVE but power state PAUSED (guest '
        'paused by the hypervisor)')
    # Nova's integer, where a payload gives one.
    found = observe('compute.instance.update', legacy(power_state=0))
    assert found.verdict == obs.UNHEALTHY
    assert 'power state NOSTATE' in found.reason
    assert observe('instance.reboot.end',
                   versioned()).verdict == obs.HEALTHY


def test_update_to_active_is_healthy_only_without_a_task():
    assert observe('instance.update', versioned()).verdict == obs.HEALTHY
    assert observe('instance.update',
                   versioned(task_state='rebooting')) is None
    assert observe('compute.instance.update',
                   legacy(new_task_state='deleting')) is None


@pytest.mark.parametrize('event_type', [
    'instance.power_off.start', 'instance.delete.start',
    'instance.volume_attach.error', 'instance.live_migration_abort.end',
    'instance.exists', 'compute.instance.exists',
])
def test_other_events_say_nothing(event_type):
    assert observe(event_type, versioned('error')) is None


def test_unwatched_instance_is_dropped_before_the_payload_is_read():
    lookups = []

    def is_watched(server_id):
        lookups.append(server_id)
        return False

    class Untouchable(dict):
        def get(self, key, default=None):
            if key not in ('nova_object.data', 'uuid'):
                raise AssertionError('read %s of an unwatched one' % key)
            return super(Untouchable, self).get(key, default)

    payload = Untouchable(versioned(uuid=OTHER))
    payload['nova_object.data'] = Untouchable(payload['nova_object.data'])
    assert le.to_observation('instance.power_off.end', payload, {},
                             is_watched) is None
    assert lookups == [OTHER]


def test_filter_passes_only_event_types_with_something_to_say():
    match = le.EVENT_TYPES.match
    assert match('instance.power_off.end')
    assert match('compute.instance.pause.end')
    assert match('instance.update')
    assert match('instance.rebuild.error')
    assert not match('instance.power_off.start')
    assert not match('instance.exists')
    assert not match('volume.usage')
    assert not match('xinstance.update')


def test_timestamp_missing_or_unreadable_is_now():
    before = datetime.datetime.utcnow()
    for metadata in ({}, {'timestamp': 'yesterday'}, None):
        found = le.notification_time(metadata)
        assert before <= found <= datetime.datetime.utcnow()
    aware = le.notification_time({'timestamp': '2026-11-22T13:00:00+01:00'})
    assert aware == datetime.datetime(2026, 11, 22, 12, 0, 0)


def test_targets_follow_the_options():
    conf = cfg.ConfigOpts()
    from heat_health.common import config
    config.register_opts(conf)
    conf([])
    assert [(t.exchange, t.topic) for t in le.targets(conf)] == [
        ('nova', 'versioned_notifications'), ('nova', 'notifications')]
    conf.set_override('nova_legacy_topic', '', group='heat_health')
    assert [t.topic for t in le.targets(conf)] == ['versioned_notifications']


def test_listener_survives_errors_in_observe():
    """A failing observe is logged; the next notification is handled.

    Through oslo.messaging's in-memory driver.
    """
    conf = cfg.ConfigOpts()
    from heat_health.common import config
    config.register_opts(conf)
    conf([])
    transport = oslo_messaging.get_notification_transport(conf,
                                                          url='fake://')
    # The in-memory driver sends to the default exchange.
    conf.set_override('nova_notification_exchange', conf.control_exchange,
                      group='heat_health')
    seen = []
    done = threading.Event()

    def flaky_observe(observation):
        seen.append(observation)
        if len(seen) == 1:
            raise RuntimeError('database gone')
        done.set()

    listener = le.LifecycleListener(flaky_observe, {SERVER}.__contains__,
                                    transport=transport, conf=conf)
    listener.start()
    try:
        notifier = oslo_messaging.Notifier(
            transport, publisher_id='nova-compute:c1', driver='messaging',
            topics=['versioned_notifications'])
        notifier.info({}, 'instance.pause.end', versioned('paused'))
        notifier.info({}, 'instance.exists', versioned())
        notifier.info({}, 'instance.power_off.end',
                      versioned('stopped', uuid=OTHER))
        notifier.info({}, 'instance.unpause.end', versioned())
        assert done.wait(10)
    finally:
        listener.stop()
        transport.cleanup()
    assert [(o.verdict, o.reason) for o in seen] == [
        (obs.UNHEALTHY, 'Nova notification instance.pause.end'),
        (obs.HEALTHY, 'Nova notification instance.unpause.end')]


def message(event_type, payload):
    return {'event_type': event_type, 'payload': payload,
            'metadata': {'message_id': 'm', 'timestamp': SENT}}


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def endpoint(watched, clock=None):
    seen = []
    kept = le.Unwatched(clock=clock or Clock())
    return le._Endpoint(seen.append, watched.__contains__, kept), seen


def test_news_of_a_server_another_engine_just_started_watching_is_kept():
    """Its failure is seen once this engine's index knows the server."""
    watched = set()
    found, seen = endpoint(watched)
    found.info([message('instance.power_off.end',
                        versioned('stopped', uuid=OTHER))])
    assert seen == []
    watched.add(OTHER)
    found.watched_changed()
    assert [(o.server_id, o.verdict, o.observed_at) for o in seen] == [
        (OTHER, obs.UNHEALTHY, datetime.datetime(2026, 11, 22, 12, 0, 1,
                                                 250000))]
    # Handled once.
    found.watched_changed()
    assert len(seen) == 1


def test_news_of_servers_nobody_watches_is_forgotten_after_a_while():
    clock = Clock()
    watched = set()
    found, seen = endpoint(watched, clock)
    found.info([message('instance.power_off.end',
                        versioned('stopped', uuid=OTHER))])
    clock.now += 5
    found.info([message('instance.pause.end',
                        versioned('paused', uuid=SERVER))])
    found.watched_changed()
    clock.now += le.KEEP_UNWATCHED_SECONDS - 4
    watched.update([OTHER, SERVER])
    found.watched_changed()
    # The first is too old by now; the second was not.
    assert [(o.server_id, o.reason) for o in seen] == [
        (SERVER, 'Nova notification instance.pause.end')]


def test_news_set_aside_while_what_is_watched_changes_is_not_lost():
    """A change comes between a listener thread's lookup and its keeping.

    The monitor's look at what was kept then finds nothing yet.
    """
    watched = set()
    found = None

    def is_watched(server_id):
        answer = server_id in watched
        if server_id == OTHER and not answer and OTHER not in changed:
            changed.add(OTHER)
            watched.add(OTHER)
            found.watched_changed()     # the monitor, on its own thread
        return answer

    changed = set()
    seen = []
    found = le._Endpoint(seen.append, is_watched, le.Unwatched(clock=Clock()))
    found.info([message('instance.power_off.end',
                        versioned('stopped', uuid=OTHER))])
    assert [(o.server_id, o.verdict) for o in seen] == [
        (OTHER, obs.UNHEALTHY)]


def test_only_the_newest_news_of_unwatched_servers_is_kept():
    watched = set()
    seen = []
    found = le._Endpoint(seen.append, watched.__contains__,
                         le.Unwatched(size=2, clock=Clock()))
    for state in ('paused', 'stopped', 'error'):
        found.info([message('instance.update',
                            versioned(state, uuid=OTHER))])
    watched.add(OTHER)
    found.watched_changed()
    assert [o.reason for o in seen] == [
        'Nova notification instance.update (vm_state stopped)',
        'Nova notification instance.update (vm_state error)']


def test_a_message_without_a_payload_does_not_stop_the_batch():
    found, seen = endpoint({SERVER})
    found.info([{'event_type': 'instance.pause.end', 'metadata': {}},
                message('instance.pause.end', versioned('paused'))])
    assert [o.server_id for o in seen] == [SERVER]
