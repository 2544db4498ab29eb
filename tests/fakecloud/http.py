"""Request context, routing and answers shared by the APIs.

Handlers return ``Reply`` objects or raise ``ApiError``; each API builds its
errors in the shape its real service uses, because the clients turn those
shapes into their exception classes.
"""

import json
import re
import uuid

import webob


class Context(object):
    """Who is calling: from keystonemiddleware's headers (or noauth's)."""

    def __init__(self, project_id, user_id, roles, request_id=None):
        self.project_id = project_id
        self.user_id = user_id
        self.roles = roles
        self.is_admin = 'admin' in roles
        self.request_id = request_id or 'req-%s' % uuid.uuid4()

    @classmethod
    def from_environ(cls, environ):
        roles = [r.strip().lower() for r in
                 environ.get('HTTP_X_ROLES', '').split(',') if r.strip()]
        return cls(environ.get('HTTP_X_PROJECT_ID') or None,
                   environ.get('HTTP_X_USER_ID') or None, roles)

    def to_notification(self):
        """The context dict a listener receives with a notification."""
        return {'user_id': self.user_id, 'project_id': self.project_id,
                'tenant': self.project_id, 'user': self.user_id,
                'roles': self.roles, 'is_admin': self.is_admin,
                'request_id': self.request_id}


class Reply(object):
    """A status, a body (dict, str, bytes or None) and extra headers."""

    def __init__(self, status, body=None, headers=None,
                 content_type='application/json'):
        self.status = status
        self.body = body
        self.headers = list(headers or [])
        self.content_type = content_type

    def encode(self):
        body = self.body
        if body is None:
            return b''
        if isinstance(body, bytes):
            return body
        if isinstance(body, str):
            return body.encode('utf-8')
        return json.dumps(body).encode('utf-8')


class ApiError(Exception):
    def __init__(self, status, body, content_type='application/json'):
        super(ApiError, self).__init__(status)
        self.reply = Reply(status, body, content_type=content_type)


STATUS_TEXT = {
    200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content',
    300: 'Multiple Choices', 400: 'Bad Request', 401: 'Unauthorized',
    403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
    406: 'Not Acceptable', 409: 'Conflict', 413: 'Request Entity Too Large',
    500: 'Internal Server Error', 501: 'Not Implemented',
    503: 'Service Unavailable',
}


def status_line(code):
    return '%d %s' % (code, STATUS_TEXT.get(code, 'Unknown'))


class Router(object):
    """Maps (method, path pattern) to handlers; {name} matches a segment."""

    def __init__(self):
        self._routes = []

    def add(self, method, pattern, handler):
        regex = re.sub(r'\{(\w+)\}', r'(?P<\1>[^/]+)', pattern)
        self._routes.append((method, re.compile('^%s/?$' % regex), handler))

    def match(self, method, path):
        """Return (handler, kwargs) for a request.

        (None, True) if only the method is wrong, (None, False) if nothing
        matches.
        """
        path_matched = False
        for route_method, regex, handler in self._routes:
            found = regex.match(path)
            if found:
                if route_method == method:
                    return handler, found.groupdict()
                path_matched = True
        return None, path_matched


def json_body(req, error):
    """The request's JSON body; error(message) builds the ApiError."""
    try:
        body = json.loads(req.body or b'null')
    except ValueError:
        raise error('Malformed request body')
    if not isinstance(body, dict):
        raise error('Malformed request body')
    return body


def request(environ):
    return webob.Request(environ)
