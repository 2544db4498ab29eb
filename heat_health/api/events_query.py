"""GET .../health/events: the query string of the incident timeline.

``marker`` (an event id: only later events, as ``--follow`` polls),
``since`` (an ISO 8601 time, UTC unless it says otherwise) and ``limit``
(the newest that many, 1 to 1000). Every value is checked here, so a
malformed or out-of-range one is a 400 that names it, never an error deeper
down.
"""

from oslo_utils import timeutils

from heat_health.api import errors

MAX_LIMIT = 1000
# The largest id any database gives an event (a signed 64-bit integer).
MAX_MARKER = 2 ** 63 - 1
# How much of a rejected value a message repeats.
MAX_SHOWN = 80


def _integer(params, key, lowest, highest):
    value = params.get(key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        # Also where Python refuses to read thousands of digits.
        raise errors.bad_request('"%s" must be an integer, not %r.'
                                 % (key, value[:MAX_SHOWN]))
    if not lowest <= number <= highest:
        raise errors.bad_request('"%s" must be from %d to %d.'
                                 % (key, lowest, highest))
    return number


def _time(params, key):
    """The time as naive UTC ISO 8601, or a 400 if it is none or out of range.

    A time near the ends of the calendar with an offset would land outside
    it once made UTC (9999-12-31T23:00:00-05:00): refused as out of range.
    """
    value = params.get(key)
    if value is None:
        return None
    try:
        parsed = timeutils.parse_isotime(value)
    except ValueError:
        raise errors.bad_request('"%s" must be an ISO 8601 time, not %r.'
                                 % (key, value[:MAX_SHOWN]))
    try:
        return timeutils.normalize_time(parsed).isoformat()
    except OverflowError:
        raise errors.bad_request(
            '"%s" is out of range: %r is not a time between the years 1 '
            'and 9999 in UTC.' % (key, value[:MAX_SHOWN]))


def parse(params):
    """{marker, since (ISO 8601, naive UTC), limit}, or a 400."""
    return {'marker': _integer(params, 'marker', 0, MAX_MARKER),
            'since': _time(params, 'since'),
            'limit': _integer(params, 'limit', 1, MAX_LIMIT)}
