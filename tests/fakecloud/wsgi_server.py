"""A threaded HTTP/1.1 server for WSGI applications, on the standard library.

wsgiref answers one request per connection (HTTP/1.0), which makes a
client's keep-alive session reconnect for every call; this server keeps
connections open, runs one thread per connection and buffers each answer so
that it can always send a Content-Length.  Every answer of fakecloud is
small JSON or text, so buffering costs nothing worth measuring.
"""

import http.server
import io
import logging
import socket
import socketserver
import sys
import urllib.parse

LOG = logging.getLogger(__name__)

# Idle keep-alive connections are closed after this many seconds.
IDLE_TIMEOUT = 120


def send_headers_and_body(handler, data):
    """End the headers and send them with the body in one write.

    Headers and body in two small writes meet the client's delayed ACK
    (Nagle's algorithm holds the second write): 40 ms per request.
    """
    handler._headers_buffer.append(b'\r\n')
    handler._headers_buffer.append(data)
    handler.flush_headers()


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    # Bursts of concurrent clients (a benchmark, Heat's engine workers)
    # would overflow the default backlog of 5.
    request_queue_size = 256
    allow_reuse_address = True


class WSGIRequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    timeout = IDLE_TIMEOUT
    server_version = 'fakecloud'
    sys_version = ''

    def setup(self):
        super(WSGIRequestHandler, self).setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _environ(self, body):
        path, _, query = self.path.partition('?')
        environ = {
            'REQUEST_METHOD': self.command,
            'SCRIPT_NAME': '',
            'PATH_INFO': urllib.parse.unquote(path, 'latin-1'),
            'QUERY_STRING': query,
            'SERVER_NAME': self.server.server_address[0],
            'SERVER_PORT': str(self.server.server_address[1]),
            'SERVER_PROTOCOL': self.request_version,
            'REMOTE_ADDR': self.client_address[0],
            'CONTENT_LENGTH': str(len(body)),
            'CONTENT_TYPE': self.headers.get('Content-Type', ''),
            'wsgi.version': (1, 0),
            'wsgi.url_scheme': 'http',
            'wsgi.input': io.BytesIO(body),
            'wsgi.errors': sys.stderr,
            'wsgi.multithread': True,
            'wsgi.multiprocess': False,
            'wsgi.run_once': False,
        }
        for name, value in self.headers.items():
            key = 'HTTP_' + name.upper().replace('-', '_')
            if key in ('HTTP_CONTENT_TYPE', 'HTTP_CONTENT_LENGTH'):
                continue
            if key in environ:
                environ[key] += ',' + value
            else:
                environ[key] = value
        return environ

    def _read_body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b''.join(chunks)
        length = int(self.headers.get('Content-Length') or 0)
        return self.rfile.read(length) if length else b''

    def handle_request(self):
        body = self._read_body()
        environ = self._environ(body)
        answer = {}

        def start_response(status, headers, exc_info=None):
            answer['status'] = status
            answer['headers'] = headers
            return lambda data: None

        try:
            result = self.server.app(environ, start_response)
            try:
                data = b''.join(result)
            finally:
                if hasattr(result, 'close'):
                    result.close()
        except Exception:
            LOG.exception('unhandled error in %s %s', self.command, self.path)
            answer = {'status': '500 Internal Server Error',
                      'headers': [('Content-Type', 'text/plain')]}
            data = b'internal error\n'

        code, _, reason = answer['status'].partition(' ')
        self.send_response_only(int(code), reason)
        names = set()
        for name, value in answer['headers']:
            if name.lower() == 'content-length':
                continue
            names.add(name.lower())
            self.send_header(name, value)
        if 'date' not in names:
            self.send_header('Date', self.date_time_string())
        self.send_header('Content-Length', str(len(data)))
        send_headers_and_body(self, b'' if self.command == 'HEAD' else data)

    def __getattr__(self, name):
        # BaseHTTPRequestHandler looks up do_<METHOD>: serve them all.
        if name.startswith('do_'):
            return self.handle_request
        raise AttributeError(name)

    def log_message(self, fmt, *args):
        # Requests are logged by the application, with their timing.
        pass


def make_server(host, port, app):
    server = ThreadingServer((host, port), WSGIRequestHandler)
    server.app = app
    return server
