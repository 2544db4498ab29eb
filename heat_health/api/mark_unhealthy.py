"""PATCH .../resources/{resource}: the mark-unhealthy request body.

The contract is Heat's own (what heatclient and the ``openstack stack
resource mark unhealthy`` command send), with messages that name the problem.
A reason is at most 65,535 bytes of UTF-8: Heat keeps it whole in the
resource and we in the marking, both TEXT columns on MySQL, which hold no
more (a longer one would fail there after the request was accepted); Heat's
event keeps its first 255 characters. The body is bounded by Heat's own
``max_json_body_size``.
"""

import json

from heat.common import exception
from oslo_config import cfg

from heat_health.api import errors
from heat_health.rpc import api as rpc_api

cfg.CONF.import_opt('max_json_body_size', 'heat.common.wsgi')

MARK_UNHEALTHY = 'mark_unhealthy'
STATUS_REASON = 'resource_status_reason'
VALID_KEYS = (MARK_UNHEALTHY, STATUS_REASON)
# How much of a rejected value a message repeats.
MAX_SHOWN_VALUE = 80


def check_size(length):
    """Refuse a body over ``max_json_body_size`` bytes, as Heat does (400)."""
    limit = cfg.CONF.max_json_body_size
    if length is not None and length > limit:
        raise exception.RequestLimitExceeded(
            message='the request body is %d bytes long, more than the %d '
                    'bytes of max_json_body_size.' % (length, limit))


def _shown(value):
    """The value as JSON for a message: short, whatever its nesting."""
    try:
        text = json.dumps(value)
    except RecursionError:
        return 'a deeply nested %s' % type(value).__name__
    if len(text) > MAX_SHOWN_VALUE:
        text = text[:MAX_SHOWN_VALUE] + '...'
    return text


def _as_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ('true', 'false'):
        return value.lower() == 'true'
    raise errors.bad_request(
        'Unrecognized value %s for "%s", acceptable values are: true, '
        'false.' % (_shown(value), MARK_UNHEALTHY))


def load_json(raw_body):
    try:
        return json.loads(raw_body)
    except ValueError as e:
        raise errors.bad_request('The request body is not valid JSON: %s'
                                 % e)
    except RecursionError:
        # Python's parser recurses once per nested array or object.
        raise errors.bad_request(
            'The request body nests JSON arrays or objects too deeply.')


def parse_body(raw_body):
    """Return (mark_unhealthy, reason) or raise a 400 naming the problem."""
    if not raw_body or not raw_body.strip():
        raise errors.bad_request(
            'The request body is empty: expected a JSON object with a '
            'boolean "%s" key.' % MARK_UNHEALTHY)
    check_size(len(raw_body))
    body = load_json(raw_body)
    if not isinstance(body, dict):
        raise errors.bad_request(
            'The request body must be a JSON object, not %s.'
            % type(body).__name__)

    invalid = sorted(set(body) - set(VALID_KEYS))
    if invalid:
        raise errors.bad_request(
            'Invalid keys in resource mark unhealthy: %s; allowed keys are '
            '%s.' % (', '.join(invalid), ', '.join(VALID_KEYS)))
    if MARK_UNHEALTHY not in body:
        raise errors.bad_request(
            'Missing mandatory (%s) key from mark unhealthy request.'
            % MARK_UNHEALTHY)

    mark = _as_bool(body[MARK_UNHEALTHY])
    reason = body.get(STATUS_REASON)
    if reason is None:
        reason = ''
    if not isinstance(reason, str):
        raise errors.bad_request('"%s" must be a string.' % STATUS_REASON)
    try:
        reason.encode('utf-8')
    except UnicodeEncodeError:
        # A lone UTF-16 surrogate escape ("\\ud800"): no database stores it.
        raise errors.bad_request(
            '"%s" is not valid Unicode text: it holds an unpaired '
            'surrogate escape.' % STATUS_REASON)
    size = len(reason.encode('utf-8'))
    if size > rpc_api.MAX_REASON_BYTES:
        raise errors.bad_request(
            '"%s" is %d bytes long in UTF-8, more than the %d a resource '
            'status reason holds.' % (STATUS_REASON, size,
                                      rpc_api.MAX_REASON_BYTES))
    return mark, reason
