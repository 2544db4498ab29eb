"""The mark-unhealthy body: what is accepted and what each 400 says."""

import json

from heat.common import exception
from oslo_config import cfg
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


def test_reason_up_to_what_a_resource_status_reason_holds():
    for length in (255, 256, 300, 65535):
        reason = 'x' * length
        assert _parse({'mark_unhealthy': True,
                       'resource_status_reason': reason}) == (True, reason)
    # Counted in bytes of UTF-8, as MySQL's TEXT counts: 3 bytes each.
    reason = '\u20ac' * 21845
    assert _parse({'mark_unhealthy': True,
                   'resource_status_reason': reason}) == (True, reason)


def test_reason_longer_than_a_resource_status_reason_holds():
    message = _bad_request({'mark_unhealthy': True,
                            'resource_status_reason': '\u20ac' * 21846})
    assert message == ('"resource_status_reason" is 65538 bytes long in '
                       'UTF-8, more than the 65535 a resource status reason '
                       'holds.')


def test_reason_with_an_unpaired_surrogate():
    message = _bad_request(b'{"mark_unhealthy": true, '
                           b'"resource_status_reason": "bad \\ud800"}')
    assert 'not valid Unicode text' in message
    assert _parse(b'{"mark_unhealthy": true, '
                  b'"resource_status_reason": "\\ud83d\\ude00"}') == (
        True, '\U0001f600')


@pytest.mark.parametrize('body', [
    '[' * 100000 + ']' * 100000,
    '{"a": ' * 100000 + '1' + '}' * 100000,
    '{"mark_unhealthy": true, "resource_status_reason": ' + '[' * 100000 +
    ']' * 100000 + '}',
])
def test_deeply_nested_body(body):
    assert 'nests JSON arrays or objects too deeply' in _bad_request(body)


def test_rejected_value_is_shown_short():
    message = _bad_request({'mark_unhealthy': 'y' * 5000})
    assert '"yyyy' in message
    assert '...' in message
    assert len(message) < 300


@pytest.fixture
def small_body_limit():
    cfg.CONF.set_override('max_json_body_size', 100)
    yield
    cfg.CONF.clear_override('max_json_body_size')


def test_body_over_heat_limit(small_body_limit):
    body = json.dumps({'mark_unhealthy': True,
                       'resource_status_reason': 'x' * 100})
    with pytest.raises(exception.RequestLimitExceeded) as e:
        _parse(body)
    assert '%d bytes long' % len(body) in str(e.value)
    assert _parse({'mark_unhealthy': True,
                   'resource_status_reason': 'x' * 40}) == (True, 'x' * 40)
