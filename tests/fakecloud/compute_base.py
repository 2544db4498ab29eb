"""Nova's error bodies and microversion negotiation, shared by the
compute API modules."""

import datetime
import re

from tests.fakecloud import http

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 96)


def version_text(version):
    return '%d.%d' % version


class NovaError(http.ApiError):
    _KINDS = {400: 'badRequest', 403: 'forbidden', 404: 'itemNotFound',
              405: 'HTTPMethodNotAllowed', 406: 'HTTPNotAcceptable',
              409: 'conflictingRequest', 500: 'computeFault'}

    def __init__(self, status, message):
        super(NovaError, self).__init__(status, {self._KINDS[status]: {
            'code': status, 'message': message}})


def bad_request(message):
    return NovaError(400, message)


def parse_version(req):
    """The requested microversion, as Nova reads its two headers."""
    text = None
    header = req.headers.get('OpenStack-API-Version')
    if header:
        for item in header.split(','):
            service, _, value = item.strip().partition(' ')
            if service.lower() == 'compute':
                text = value.strip()
    if text is None:
        text = req.headers.get('X-OpenStack-Nova-API-Version')
    if not text:
        return MIN_VERSION
    if text.lower() == 'latest':
        return MAX_VERSION
    found = re.match(r'^([1-9]\d*)\.([1-9]\d*|0)$', text.strip())
    if not found:
        raise bad_request('API Version String %s is of invalid format. '
                          'Must be of format MajorNum.MinorNum.' % text)
    version = (int(found.group(1)), int(found.group(2)))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise NovaError(406, 'Version %s is not supported by the API. '
                             'Minimum is %s and maximum is %s.' % (
                                 text, version_text(MIN_VERSION),
                                 version_text(MAX_VERSION)))
    return version


def parse_time(text, name):
    try:
        when = datetime.datetime.fromisoformat(text.replace('Z', '+00:00'))
    except ValueError:
        raise bad_request("Invalid input for query parameters %s. Value: "
                          "%s. '%s' is not a 'date-time'" % (name, text,
                                                             text))
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def regex(pattern):
    try:
        return re.compile(pattern)
    except re.error:
        return re.compile(re.escape(pattern))
