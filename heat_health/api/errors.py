"""HTTP errors that Heat's faultwrap renders in Heat's JSON error format."""

from heat.common import exception
from webob import exc


def _disguised(http_error_class, message):
    return exception.HTTPExceptionDisguise(http_error_class(message))


def bad_request(message):
    return _disguised(exc.HTTPBadRequest, message)


def forbidden():
    """Heat's own 403: the same answer whatever was refused, and why."""
    return exception.HTTPExceptionDisguise(exc.HTTPForbidden())


def service_unavailable(message):
    return _disguised(exc.HTTPServiceUnavailable, message)
