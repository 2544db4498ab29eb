"""Per-server health endpoints: GET http://127.0.0.1:<port>/<id>/health.

What an application health check would see from the guest: 200 "ok" while
the server is ACTIVE with no task and not hung; 503 while it is in any other
state (rebooting, stopped, paused, in error); 404 once it is gone.  A hung
server accepts the connection and never answers: the request is held (in
its own thread) until the hang is reset or the cap passes, then the
connection is closed without an answer.  A server stuck in a task answers
503 for as long as it is stuck, as it does while that operation runs: the
guest is in the middle of going down, freezing or coming back, never well.

When the deployment runs real Nova (``fault_driver_file`` names its
computes' control APIs), a server fakecloud does not hold is asked of the
computes (ids that are UUIDs only, as Nova's are): the one holding the
guest answers for its application (see tests/fault_driver/control.py),
and its answer, or its silence, is passed on as is. A server no compute
holds is 404; while a compute does not answer and another says it does
not hold the server, 503 (the guest may be on the silent one). When no
compute answers at all, real Nova is not running (the deployment runs
fakecloud's Nova): 404, as without computes.
"""

import http.client
import http.server
import json
import logging
import time
import urllib.parse
import uuid

from tests.fakecloud import wsgi_server

LOG = logging.getLogger(__name__)
POLL = 0.2


class HealthHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    timeout = wsgi_server.IDLE_TIMEOUT
    server_version = 'fakecloud-guest'
    sys_version = ''

    def _reply(self, code, text):
        data = text.encode()
        self.send_response_only(code)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(data)))
        wsgi_server.send_headers_and_body(
            self, b'' if self.command == 'HEAD' else data)

    def do_GET(self):
        start = time.monotonic()
        code, text = self.server.health.answer(self.path.split('?')[0])
        if code is None:
            self.close_connection = True
            LOG.info('health %s held %.1fs, closed without an answer',
                     self.path, time.monotonic() - start)
            return
        self._reply(code, text)
        LOG.debug('health %s %d', self.path, code)

    do_HEAD = do_GET

    def log_message(self, fmt, *args):
        pass


# Seconds to connect to a compute's control API.
CONNECT_TIMEOUT = 2
# Seconds beyond the hang cap that a held answer of a compute is waited for.
SLACK = 5


def is_uuid(text):
    """Whether the text is a UUID, as Nova's server ids are."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


class Computes(object):
    """The real Nova computes' control APIs, from the file that lists them.

    The file, ``{host: URL}`` as tools/localcloud writes it, is read at
    each use: the deployment turns to real Nova and back while fakecloud
    runs. No file, or no path: no computes.
    """

    def __init__(self, path, hang_cap):
        self.path = path
        self.hang_cap = hang_cap

    def urls(self):
        if not self.path:
            return {}
        try:
            with open(self.path) as f:
                found = json.load(f)
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _ask(self, url, server_id):
        """(status, text) of one compute; None: closed without an answer.

        Raises OSError when the compute does not answer at all.
        """
        where = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(where.hostname, where.port,
                                          timeout=CONNECT_TIMEOUT)
        try:
            conn.connect()
            conn.sock.settimeout(self.hang_cap + SLACK)
            conn.request('GET', '%s/%s/health' % (where.path.rstrip('/'),
                                                  server_id))
            try:
                resp = conn.getresponse()
                return resp.status, resp.read().decode(errors='replace')
            except (http.client.RemoteDisconnected, ConnectionResetError,
                    TimeoutError):
                return None
        finally:
            conn.close()

    def answer(self, server_id):
        """(status, text) for a server fakecloud does not hold.

        (None, None) when the compute holding it closed the check without
        an answer (its application hangs).
        """
        silent, answered = [], 0
        for host, url in sorted(self.urls().items()):
            try:
                found = self._ask(url, server_id)
            except OSError as e:
                silent.append('%s (%s)' % (host, e))
                continue
            if found is None:
                return None, None
            if found[0] != 404:
                return found
            answered += 1
        if silent and answered:
            return 503, 'not on the computes that answer; no answer from ' \
                '%s\n' % ', '.join(silent)
        return 404, 'no such server\n'


class Health(object):

    def __init__(self, store, hang_cap, computes=None):
        self.store = store
        self.hang_cap = hang_cap
        self.computes = computes

    def _verdict(self, server_id):
        with self.store.lock:
            server = self.store.servers.get(server_id)
            if server is None:
                return 404, 'no such server\n'
            if server.status == 'ACTIVE' and server.task_state is None:
                if server.hung or server.broken:
                    return None, None
                return 200, 'ok\n'
            return 503, 'server is %s%s\n' % (
                server.status, ' (task %s)' % server.task_state
                if server.task_state else '')

    def answer(self, path):
        """(status, text) for path, or (None, None) to close unanswered."""
        parts = path.strip('/').split('/')
        if len(parts) != 2 or parts[1] != 'health':
            return 404, 'GET /<server id>/health\n'
        if self.computes is not None and is_uuid(parts[0]):
            with self.store.lock:
                held = parts[0] in self.store.servers
            if not held:
                return self.computes.answer(parts[0])
        deadline = time.monotonic() + self.hang_cap
        while True:
            code, text = self._verdict(parts[0])
            if code is not None or time.monotonic() >= deadline:
                return code, text
            time.sleep(POLL)


def make_server(host, port, store, hang_cap, fault_driver_file=None):
    server = wsgi_server.ThreadingServer((host, port), HealthHandler)
    server.health = Health(store, hang_cap,
                           Computes(fault_driver_file, hang_cap))
    return server
