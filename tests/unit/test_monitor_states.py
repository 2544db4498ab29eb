"""How observations of several detection modes combine into a state."""

import datetime

from heat_health.engine.monitor import observation as obs
from heat_health.engine.monitor import states

T0 = datetime.datetime(2026, 11, 22, 12, 0, 0)
MODES = [obs.NODE_STATUS_POLLING, obs.LIFECYCLE_EVENTS]


def _seen(mode, verdict, seconds=0, reason='r'):
    return obs.Observation('srv', verdict, reason, mode,
                           T0 + datetime.timedelta(seconds=seconds))


def test_any_failed_takes_the_latest_failure():
    verdicts = {
        obs.NODE_STATUS_POLLING: _seen(obs.NODE_STATUS_POLLING,
                                       obs.HEALTHY),
        obs.LIFECYCLE_EVENTS: _seen(obs.LIFECYCLE_EVENTS, obs.UNHEALTHY, 1,
                                    'instance.power_off.end'),
    }
    assert states.decide(verdicts, MODES, states.ANY_FAILED) == (
        states.UNHEALTHY, 'instance.power_off.end', obs.LIFECYCLE_EVENTS)


def test_all_failed_needs_every_mode():
    one = {obs.LIFECYCLE_EVENTS: _seen(obs.LIFECYCLE_EVENTS, obs.UNHEALTHY)}
    assert states.decide(one, MODES, states.ALL_FAILED).state == (
        states.SUSPECT)
    both = dict(one, **{obs.NODE_STATUS_POLLING: _seen(
        obs.NODE_STATUS_POLLING, obs.UNHEALTHY, 2, 'SHUTOFF')})
    assert states.decide(both, MODES, states.ALL_FAILED) == (
        states.UNHEALTHY, 'SHUTOFF', obs.NODE_STATUS_POLLING)


def test_silence_is_healthy_and_other_policies_modes_are_ignored():
    assert states.decide({}, MODES, states.ANY_FAILED).state == (
        states.HEALTHY)
    url = {obs.NODE_STATUS_POLL_URL: _seen(obs.NODE_STATUS_POLL_URL,
                                           obs.UNHEALTHY)}
    assert states.decide(url, MODES, states.ANY_FAILED).state == (
        states.HEALTHY)
