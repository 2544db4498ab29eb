"""The mark-unhealthy body: what is accepted and what each 400 says."""

import json

import pytest
from webob import exc

from heat_health.api import mark_unhealthy


def _parse(body):
    if not isinstance(body, (str, bytes)):
        body = json.dumps(body)
    return mark_unhealthy.parse_body(body)


def _bad_request(body):
    with pytest.raises(Exception) as e:
        _parse(body)
    assert isinstance(e.value.exc, exc.HTTPBadRequest)
    return str(e.value.exc)


@pytest.mark.parametrize('body,expected', [
    ({'mark_unhealthy': True, 'resource_status_reason': 'probe failed'},
     (True, 'probe failed')),
    ({'mark_unhealthy': False}, (False, '')),
    ({'mark_unhealthy': 'TRUE', 'resource_status_reason': ''}, (True, '')),
    ({'mark_unhealthy': 'false', 'resource_status_reason': None},
     (False, '')),
])
def test_accepted(body, expected):
    assert _parse(body) == expected


def test_missing_flag_is_named():
    assert 'Missing mandatory (mark_unhealthy)' in _bad_request(
        {'resource_status_reason': 'x'})


def test_extra_keys_are_named():
    message = _bad_request({'mark_unhealthy': True, 'force': 1, 'zz': 2})
    assert 'Invalid keys' in message
    assert 'force, zz' in message


@pytest.mark.parametrize('value', ['yes', 1, 0, None, [], 'truthy'])
def test_non_boolean_flag(value):
    message = _bad_request({'mark_unhealthy': value})
    assert 'acceptable values are: true, false' in message
    assert json.dumps(value) in message


@pytest.mark.parametrize('body,words', [
    (b'', 'empty'),
    (b'   ', 'empty'),
    (b'{"mark_unhealthy": tru', 'not valid JSON'),
    ([True], 'must be a JSON object, not list'),
    ('"mark_unhealthy"', 'must be a JSON object, not str'),
])
def test_not_an_object(body, words):
    assert words in _bad_request(body)


def test_reason_must_be_a_string():
    assert 'must be a string' in _bad_request(
        {'mark_unhealthy': True, 'resource_status_reason': 42})


def test_reason_longer_than_heat_keeps():
    message = _bad_request({'mark_unhealthy': True,
                            'resource_status_reason': 'x' * 256})
    assert '256 characters' in message
    assert _parse({'mark_unhealthy': True,
                   'resource_status_reason': 'x' * 255})[1] == 'x' * 255
