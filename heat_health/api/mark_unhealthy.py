"""PATCH .../resources/{resource}: the mark-unhealthy request body.

The contract is Heat's own (what heatclient and the ``openstack stack
resource mark unhealthy`` command send), with messages that name the problem.
"""

import json

from heat_health.api import errors

MARK_UNHEALTHY = 'mark_unhealthy'
STATUS_REASON = 'resource_status_reason'
VALID_KEYS = (MARK_UNHEALTHY, STATUS_REASON)
# Heat keeps at most this much of a status reason in its events.
MAX_REASON_LENGTH = 255


def _as_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ('true', 'false'):
        return value.lower() == 'true'
    raise errors.bad_request(
        'Unrecognized value %s for "%s", acceptable values are: true, '
        'false.' % (json.dumps(value), MARK_UNHEALTHY))


def parse_body(raw_body):
    """Return (mark_unhealthy, reason) or raise a 400 naming the problem."""
    if not raw_body or not raw_body.strip():
        raise errors.bad_request(
            'The request body is empty: expected a JSON object with a '
            'boolean "%s" key.' % MARK_UNHEALTHY)
    try:
        body = json.loads(raw_body)
    except ValueError as e:
        raise errors.bad_request('The request body is not valid JSON: %s'
                                 % e)
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
    if len(reason) > MAX_REASON_LENGTH:
        raise errors.bad_request(
            '"%s" is %d characters long; at most %d are kept.'
            % (STATUS_REASON, len(reason), MAX_REASON_LENGTH))
    return mark, reason
