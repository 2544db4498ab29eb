"""The fault driver's control API, served inside nova-compute.

Tests reach the hypervisor, not Nova: ``POST /guests/<uuid>/fault`` with
``{"fault": ..., "operation": ..., "seconds": ...}`` makes a fault happen
to a guest of this host, ``GET /guests/<uuid>`` tells what the hypervisor
holds of it. Bound to 127.0.0.1 only.

``GET /<uuid>/health`` is what the application in the guest answers its
health check (fakecloud's health endpoints ask it for real Nova's
servers): 200 ``ok`` while the guest runs, 503 while it does not, 404 for
a guest this host does not hold. While the application hangs the check is
held (its own thread) until the hang ends or ``hang_cap`` seconds pass,
then the connection closes without an answer.
"""

from http import server
import json
import os
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)
HOST = '127.0.0.1'
# Most seconds a hung application's health check is held, as fakecloud's.
HANG_CAP = float(os.environ.get('FAULT_DRIVER_HANG_CAP') or 300)
# Seconds between looks at a hung application while its check is held.
POLL = 0.2


def _handler(driver, hang_cap):

    class Handler(server.BaseHTTPRequestHandler):

        def _reply(self, status, body):
            if isinstance(body, str):
                data, kind = body.encode(), 'text/plain'
            else:
                data, kind = json.dumps(body).encode(), 'application/json'
            self.send_response(status)
            self.send_header('Content-Type', kind)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _guest_path(self, suffix=''):
            parts = self.path.strip('/').split('/')
            if (len(parts) == (3 if suffix else 2) and parts[0] == 'guests'
                    and (not suffix or parts[2] == suffix)):
                return parts[1]
            return None

        def _health(self):
            """The guest of /<uuid>/health, or None for another path."""
            parts = self.path.split('?')[0].strip('/').split('/')
            if len(parts) == 2 and parts[1] == 'health':
                return parts[0]
            return None

        def _answer_health(self, guest):
            deadline = time.monotonic() + hang_cap
            while True:
                verdict = driver.health(guest)
                if verdict is not None:
                    return self._reply(*verdict)
                if time.monotonic() >= deadline:
                    LOG.info('health of %s held %.0f s, closed without an '
                             'answer', guest, hang_cap)
                    self.close_connection = True
                    return
                time.sleep(POLL)

        def do_GET(self):
            if self._health() is not None:
                return self._answer_health(self._health())
            guest = self._guest_path()
            if guest is None:
                return self._reply(404, {'error': 'no such path'})
            self._reply(200, {'guest': driver.guest(guest)})

        def do_POST(self):
            guest = self._guest_path('fault')
            if guest is None:
                return self._reply(404, {'error': 'no such path'})
            try:
                length = int(self.headers.get('Content-Length') or 0)
                body = json.loads(self.rfile.read(length) or b'{}')
                found = driver.inject(guest, body.get('fault'),
                                      body.get('operation'),
                                      body.get('seconds'))
            except KeyError:
                return self._reply(404, {'error': 'no guest %s on this '
                                                  'host' % guest})
            except (TypeError, ValueError) as e:
                return self._reply(400, {'error': str(e)})
            self._reply(200, {'guest': found})

        def log_message(self, fmt, *args):
            LOG.debug('fault control: ' + fmt, *args)

    return Handler


def serve(driver, port, hang_cap=HANG_CAP):
    """Serve the control API on 127.0.0.1:port in a daemon thread."""
    httpd = server.ThreadingHTTPServer((HOST, port),
                                       _handler(driver, hang_cap))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever,
                              name='fault-control', daemon=True)
    thread.start()
    LOG.info('Fault control API on %s:%s', HOST, port)
    return httpd
