"""Per-server health endpoints: GET http://127.0.0.1:<port>/<id>/health.

What an application health check would see from the guest: 200 "ok" while
the server is ACTIVE with no task and not hung; 503 while it is in any other
state (rebooting, stopped, paused, in error); 404 once it is gone.  A hung
server accepts the connection and never answers: the request is held (in
its own thread) until the hang is reset or the cap passes, then the
connection is closed without an answer.  A server stuck in a task answers
503 for as long as it is stuck, as it does while that operation runs: the
guest is in the middle of going down, freezing or coming back, never well.
"""

import http.server
import logging
import time

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


class Health(object):

    def __init__(self, store, hang_cap):
        self.store = store
        self.hang_cap = hang_cap

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
        deadline = time.monotonic() + self.hang_cap
        while True:
            code, text = self._verdict(parts[0])
            if code is not None or time.monotonic() >= deadline:
                return code, text
            time.sleep(POLL)


def make_server(host, port, store, hang_cap):
    server = wsgi_server.ThreadingServer((host, port), HealthHandler)
    server.health = Health(store, hang_cap)
    return server
