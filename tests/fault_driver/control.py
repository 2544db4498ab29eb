"""The fault driver's control API, served inside nova-compute.

Tests reach the hypervisor, not Nova: ``POST /guests/<uuid>/fault`` with
``{"fault": ..., "operation": ..., "seconds": ...}`` makes a fault happen
to a guest of this host, ``GET /guests/<uuid>`` tells what the hypervisor
holds of it. Bound to 127.0.0.1 only.
"""

from http import server
import json
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)
HOST = '127.0.0.1'


def _handler(driver):

    class Handler(server.BaseHTTPRequestHandler):

        def _reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _guest_path(self, suffix=''):
            parts = self.path.strip('/').split('/')
            if (len(parts) == (3 if suffix else 2) and parts[0] == 'guests'
                    and (not suffix or parts[2] == suffix)):
                return parts[1]
            return None

        def do_GET(self):
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


def serve(driver, port):
    """Serve the control API on 127.0.0.1:port in a daemon thread."""
    httpd = server.ThreadingHTTPServer((HOST, port), _handler(driver))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever,
                              name='fault-control', daemon=True)
    thread.start()
    LOG.info('Fault control API on %s:%s', HOST, port)
    return httpd
