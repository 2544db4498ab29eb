"""GET .../health/events: the query string of the incident timeline.

``marker`` (an event id: only later events, as ``--follow`` polls),
``since`` (an ISO 8601 time, UTC unless it says otherwise) and ``limit``
(the newest that many, 1 to 1000).
"""

from oslo_utils import timeutils

from heat_health.api import errors

MAX_LIMIT = 1000


def _integer(params, key, lowest, highest=None):
    value = params.get(key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise errors.bad_request('"%s" must be an integer, not %r.'
                                 % (key, value[:80]))
    if number < lowest or (highest is not None and number > highest):
        raise errors.bad_request(
            '"%s" must be %s.' % (key, 'from %d to %d' % (lowest, highest)
                                  if highest is not None else
                                  'at least %d' % lowest))
    return number


def parse(params):
    """{marker, since (ISO 8601, naive UTC), limit}, or a 400."""
    since = params.get('since')
    if since is not None:
        try:
            since = timeutils.normalize_time(
                timeutils.parse_isotime(since)).isoformat()
        except ValueError:
            raise errors.bad_request('"since" must be an ISO 8601 time, '
                                     'not %r.' % since[:80])
    return {'marker': _integer(params, 'marker', 0),
            'since': since,
            'limit': _integer(params, 'limit', 1, MAX_LIMIT)}
