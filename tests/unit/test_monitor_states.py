"""How observations of several detection modes combine into a state, and
the pure rule that moves a target between states."""

import datetime

from heat_health.engine.monitor import states
from heat_health.policy import observation as obs
from heat_health.policy import spec as policy_spec

T0 = datetime.datetime(2026, 11, 22, 12, 0, 0)
MODES = [obs.NODE_STATUS_POLLING, obs.LIFECYCLE_EVENTS]
POLL, EVENTS = obs.NODE_STATUS_POLLING, obs.LIFECYCLE_EVENTS
GRACE_END = T0 + datetime.timedelta(seconds=300)


def _seen(mode, verdict, seconds=0, reason='r'):
    return obs.Observation('srv', verdict, reason, mode,
                           T0 + datetime.timedelta(seconds=seconds))


def _spec(modes=(POLL,), conditional='ANY_FAILED', enabled=True):
    return policy_spec.PolicySpec.parse({'detection': {
        'recovery_conditional': conditional,
        'detection_modes': [{'type': m} for m in modes]}}, enabled)


def _suppression(frozen=None, busy=None, grace_until=None):
    return states.Suppression(frozen, busy, grace_until)


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


def test_silence_decides_nothing_and_other_policies_modes_are_ignored():
    # A server nobody has looked at is not known to be healthy.
    assert states.decide({}, MODES, states.ANY_FAILED) is None
    url = {obs.NODE_STATUS_POLL_URL: _seen(obs.NODE_STATUS_POLL_URL,
                                           obs.UNHEALTHY)}
    assert states.decide(url, MODES, states.ANY_FAILED) is None
    healthy = {POLL: _seen(POLL, obs.HEALTHY, reason='Nova status ACTIVE')}
    assert states.decide(healthy, MODES, states.ANY_FAILED) == (
        states.HEALTHY, 'Nova status ACTIVE', POLL)


# The transition rule.

def test_no_verdict_changes_nothing():
    for old in states.STATES:
        assert states.transition(old, {}, T0, _spec()) == states.NOTHING
    # Verdicts of modes the policy lacks are no verdict.
    events_only = {EVENTS: _seen(EVENTS, obs.UNHEALTHY)}
    assert states.transition(states.NO_DATA, events_only, T0,
                             _spec((POLL,))) == states.NOTHING


def test_first_healthy_verdict_leaves_no_data_even_within_the_grace():
    result = states.transition(
        states.NO_DATA, {POLL: _seen(POLL, obs.HEALTHY, reason='ACTIVE')},
        T0, _spec(), _suppression(grace_until=GRACE_END))
    assert result.held is False
    assert result.decision == (states.HEALTHY, 'ACTIVE', POLL)


def test_failure_held_within_the_grace_decided_after():
    failed = {POLL: _seen(POLL, obs.UNHEALTHY, reason='SHUTOFF')}
    graced = _suppression(grace_until=GRACE_END)
    for old in (states.NO_DATA, states.HEALTHY):
        assert states.transition(old, failed, T0, _spec(), graced) == (
            states.Transition(None, True))
        assert states.transition(
            old, failed, GRACE_END - datetime.timedelta(seconds=1), _spec(),
            graced) == states.Transition(None, True)
        after = states.transition(old, failed, GRACE_END, _spec(), graced)
        assert after == states.Transition(
            (states.UNHEALTHY, 'SHUTOFF', POLL), False)


def test_failure_held_while_busy_decided_after():
    failed = {POLL: _seen(POLL, obs.UNHEALTHY, reason='DELETED')}
    busy = _suppression(busy='a stack action is working on web')
    assert states.transition(states.HEALTHY, failed, T0, _spec(), busy) == (
        states.Transition(None, True))
    assert states.transition(states.HEALTHY, failed, T0, _spec()) == (
        states.Transition((states.UNHEALTHY, 'DELETED', POLL), False))
    # Busy holds failures only: recovering is decided at once.
    healthy = {POLL: _seen(POLL, obs.HEALTHY, reason='ACTIVE')}
    result = states.transition(states.UNHEALTHY, healthy, T0, _spec(), busy)
    assert result == states.Transition((states.HEALTHY, 'ACTIVE', POLL),
                                       False)


def test_frozen_holds_every_change():
    failed = {POLL: _seen(POLL, obs.UNHEALTHY)}
    healthy = {POLL: _seen(POLL, obs.HEALTHY)}
    for frozen in ('the policy is disabled', 'the stack is suspended'):
        suppression = _suppression(frozen=frozen)
        for old, verdicts in ((states.HEALTHY, failed),
                              (states.NO_DATA, healthy),
                              (states.UNHEALTHY, healthy),
                              (states.NO_DATA, failed)):
            assert states.transition(old, verdicts, T0, _spec(),
                                     suppression) == (
                states.Transition(None, True)), (frozen, old)


def test_any_failed_and_all_failed():
    one = {POLL: _seen(POLL, obs.UNHEALTHY, reason='SHUTOFF'),
           EVENTS: _seen(EVENTS, obs.HEALTHY)}
    any_failed = states.transition(states.HEALTHY, one, T0,
                                   _spec((POLL, EVENTS), 'ANY_FAILED'))
    assert any_failed.decision.state == states.UNHEALTHY
    all_failed = states.transition(states.HEALTHY, one, T0,
                                   _spec((POLL, EVENTS), 'ALL_FAILED'))
    assert all_failed == states.Transition(
        (states.SUSPECT, 'SHUTOFF', POLL), False)
    both = dict(one, **{EVENTS: _seen(EVENTS, obs.UNHEALTHY, 1, 'off')})
    assert states.transition(
        states.SUSPECT, both, T0, _spec((POLL, EVENTS), 'ALL_FAILED')) == (
        states.Transition((states.UNHEALTHY, 'off', EVENTS), False))


def test_same_state_is_nothing_even_when_suppressed():
    failed = {POLL: _seen(POLL, obs.UNHEALTHY)}
    healthy = {POLL: _seen(POLL, obs.HEALTHY)}
    assert states.transition(states.UNHEALTHY, failed, T0,
                             _spec()) == states.NOTHING
    assert states.transition(states.HEALTHY, healthy, T0,
                             _spec()) == states.NOTHING
    # Nothing to hold either: no need to look at the target again.
    for suppression in (_suppression(frozen='disabled'),
                        _suppression(busy='busy'),
                        _suppression(grace_until=GRACE_END)):
        assert states.transition(states.UNHEALTHY, failed, T0, _spec(),
                                 suppression) == states.NOTHING
