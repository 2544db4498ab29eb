"""Crash evidence: bounded, each part read or said missing."""

import datetime
import threading
import types

from heat_health.engine.recovery import crash_evidence as evidence
from heat_health.engine.recovery import nova_actions
from heat_health.policy import observation as obs

NOW = datetime.datetime(2026, 12, 2, 12, 0, 0)


class Nova(object):
    def __init__(self, console='boot\n' * 2000, hold=None):
        self.console = console
        self.hold = hold

    def console_tail(self, server_id, lines):
        if isinstance(self.console, Exception):
            raise self.console
        return self.console

    def status(self, server_id):
        if self.hold is not None:
            self.hold.wait(5)
        return types.SimpleNamespace(fault={'message': 'disk full',
                                            'code': 500, 'created': None})

    def instance_actions(self, server_id, limit):
        return [nova_actions.InstanceAction('stop', None, None, 'req-1',
                                            NOW, None)]


def _target(verdicts=None):
    return types.SimpleNamespace(server_id='srv-1', verdicts=verdicts or {},
                                 stored=None)


def test_every_part_bounded():
    found = evidence.read(Nova(), _target({
        obs.NODE_STATUS_POLL_URL: obs.Observation(
            'srv-1', obs.UNHEALTHY, 'poll URL answered 500',
            obs.NODE_STATUS_POLL_URL, NOW)}))
    assert len(found['console'].encode()) == evidence.CONSOLE_BYTES
    assert found['fault']['message'] == 'disk full'
    assert found['instance_actions'] == [{
        'action': 'stop', 'user_id': None, 'project_id': None,
        'request_id': 'req-1', 'start_time': NOW.isoformat(),
        'message': None}]
    assert found['poll_url'] == {'verdict': obs.UNHEALTHY,
                                 'reason': 'poll URL answered 500',
                                 'time': NOW.isoformat()}
    assert evidence.summary(found) == (
        'console tail of 4096 bytes, fault "disk full", 1 instance '
        'actions, last poll URL answer')


def test_a_missing_console_and_a_slow_nova_are_said():
    hold = threading.Event()
    try:
        found = evidence.read(Nova(console=nova_actions.ActionRefused(
            'no console'), hold=hold), _target(), timeout=0.2)
    finally:
        hold.set()
    assert found['console_missing'] == 'no console'
    assert found['fault_missing'] == 'not read within 0.2s'
    assert found['instance_actions_missing'] == 'not read within 0.2s'
    assert found['poll_url'] is None
    assert evidence.summary(found) == 'no console log'
