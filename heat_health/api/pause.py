"""POST .../health/pause and .../health/resume: the request bodies.

Both take an optional JSON object: ``policy`` (a health policy's resource
name or id; every policy of the stack when left out) and, for a pause,
``reason`` (kept in the timeline and shown in the report).
"""

from heat_health.api import errors
from heat_health.api import mark_unhealthy

POLICY = 'policy'
REASON = 'reason'
MAX_REASON = 255


def _text(body, key, limit=None):
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise errors.bad_request('"%s" must be a non-empty string.' % key)
    if limit is not None and len(value) > limit:
        raise errors.bad_request('"%s" is %d characters long, more than %d.'
                                 % (key, len(value), limit))
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:
        raise errors.bad_request('"%s" is not valid Unicode text.' % key)
    return value


def parse_body(raw_body, pausing):
    """(policy or None, reason or None), or a 400 naming the problem."""
    allowed = (POLICY, REASON) if pausing else (POLICY,)
    if not raw_body or not raw_body.strip():
        return None, None
    mark_unhealthy.check_size(len(raw_body))
    body = mark_unhealthy.load_json(raw_body)
    if not isinstance(body, dict):
        raise errors.bad_request('The request body must be a JSON object, '
                                 'not %s.' % type(body).__name__)
    invalid = sorted(set(body) - set(allowed))
    if invalid:
        raise errors.bad_request('Invalid keys: %s; allowed keys are %s.'
                                 % (', '.join(invalid), ', '.join(allowed)))
    return _text(body, POLICY), _text(body, REASON, MAX_REASON)
