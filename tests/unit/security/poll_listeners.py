"""Listeners on loopback addresses for the poll URL attacks.

``Server`` is the target server's own health endpoint: it answers, and
records what it was asked.  ``Recorder`` stands where an attacker wants
the engine to go (another address, another port, a proxy): it records
every connection and answers nothing.  Both stop by themselves after
``LIFETIME`` seconds at the latest.
"""

from http import server as http_server
import socket
import threading
import time

LIFETIME = 120
# Addresses of their own, apart from other tests' listeners.
OWN_IP = '127.0.0.61'
OTHER_IP = '127.0.0.62'
PROXY_IP = '127.0.0.63'


class Recorder(object):
    """Accepts and records connections on (host, port) until closed."""

    def __init__(self, host, port=0):
        self.sock = socket.socket(
            socket.AF_INET6 if ':' in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.host, self.port = self.sock.getsockname()[:2]
        self.connections = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        ends = time.monotonic() + LIFETIME
        while not self._closed and time.monotonic() < ends:
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(0.5)
            try:
                first = conn.recv(4096)
            except OSError:
                first = b''
            self.connections.append((peer, first))
            conn.close()
        self.sock.close()

    def close(self):
        self._closed = True
        self._thread.join(2)


class _Handler(http_server.BaseHTTPRequestHandler):
    def do_GET(self):
        owner = self.server.owner
        owner.requests.append((self.path, dict(self.headers.items())))
        status, body, headers = owner.answer(self.path)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(object):
    """An HTTP server on host answering through ``answer(path)``."""

    def __init__(self, host, answer, port=0):
        self.requests = []
        self.answer = answer
        self.httpd = http_server.ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.httpd.timeout = 0.2
        self.host, self.port = self.httpd.server_address[:2]
        self._closed = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        ends = time.monotonic() + LIFETIME
        while not self._closed and time.monotonic() < ends:
            self.httpd.handle_request()
        self.httpd.server_close()

    def close(self):
        self._closed = True
        self._thread.join(2)
