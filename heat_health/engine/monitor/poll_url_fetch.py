"""One GET of a checked poll URL: to that address, within one deadline.

The connection goes to the ``Destination``'s IP and port and nowhere else:
no proxy, no redirect, no name resolved again, nothing read from the
engine host's environment (``*_PROXY``, ``.netrc``); the Host header and
the TLS server name and certificate check are the URL's own host.

A socket timeout bounds each read, not the whole answer: a server that
trickles a byte a second would hold a worker for as long as it likes.  So
a ``Watchdog`` shuts the connection down when the check's deadline passes,
whatever it is waiting for (connect, TLS, headers or body).
"""

import heapq
import http.client
import itertools
import socket
import ssl
import threading
import time

USER_AGENT = 'heat-health-poll-url'


class Timeout(Exception):
    """No whole answer before the deadline."""


class ConnectionFailed(Exception):
    """Nothing answered at the address (refused, unreachable, TLS)."""


class BadAnswer(Exception):
    """Something answered, not in HTTP."""


class _Watch(object):
    __slots__ = ('deadline', 'sock', 'fired')

    def __init__(self, deadline, sock):
        self.deadline = deadline
        self.sock = sock
        self.fired = False


class Watchdog(object):
    """Shuts sockets down at their deadline, from one thread of its own."""

    def __init__(self):
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._due = []
        self._order = itertools.count()
        self._thread = None
        self._stopped = False

    def watch(self, sock, deadline):
        watch = _Watch(deadline, sock)
        with self._lock:
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._run, name='poll-url-deadlines', daemon=True)
                self._thread.start()
            heapq.heappush(self._due, (deadline, next(self._order), watch))
            self._changed.notify()
        return watch

    def forget(self, watch):
        """The socket is done with: never shut it down.

        It may be closed, and its number reused, right after.
        """
        with self._lock:
            watch.sock = None

    def stop(self):
        with self._lock:
            self._stopped = True
            self._changed.notify()

    def _run(self):
        with self._lock:
            while not self._stopped:
                while self._due and self._due[0][2].sock is None:
                    heapq.heappop(self._due)
                if not self._due:
                    self._changed.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                _, _, watch = heapq.heappop(self._due)
                watch.fired = True
                try:
                    watch.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to the checked address only."""

    def __init__(self, destination, deadline, watchdog, tls_context):
        super(_PinnedConnection, self).__init__(
            str(destination.ip), destination.port)
        self._destination = destination
        self._deadline = deadline
        self._watchdog = watchdog
        self._tls = tls_context
        self.watch = None
        # http.client forgets its socket on errors: whether it had one.
        self.connected = False

    def connect(self):
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout('deadline passed')
        # The checked address itself: no lookup, not even of a literal.
        ip = self._destination.ip
        sock = socket.socket(
            socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
            socket.SOCK_STREAM)
        self.watch = self._watchdog.watch(sock, self._deadline)
        try:
            sock.settimeout(remaining)
            sock.connect((str(ip), self._destination.port))
        except BaseException:
            self._watchdog.forget(self.watch)
            sock.close()
            raise
        if self._tls is not None:
            try:
                sock = self._tls.wrap_socket(
                    sock, server_hostname=self._destination.host)
            except BaseException:
                self._watchdog.forget(self.watch)
                sock.close()
                raise
        self.sock = sock
        self.connected = True


def tls_context(verify):
    """The TLS settings of checks: the system's CAs, or none checked."""
    if verify:
        return ssl.create_default_context()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def get(destination, timeout, verify, max_body, watchdog):
    """GET destination within timeout seconds, all of it included.

    :returns: (status, body up to max_body bytes, charset or None).
    :raises Timeout, ConnectionFailed, BadAnswer:
    """
    return request('GET', destination, timeout, verify, max_body, watchdog)


def request(method, destination, timeout, verify, max_body, watchdog,
            body=None, headers=(), user_agent=USER_AGENT):
    """As ``get``, for any method, with a body and headers of its own.

    :param headers: (name, value) pairs.
    """
    deadline = time.monotonic() + timeout
    conn = _PinnedConnection(
        destination, deadline, watchdog,
        tls_context(verify) if destination.scheme == 'https' else None)
    try:
        conn.putrequest(method, destination.target, skip_host=True)
        conn.putheader('Host', destination.host_header)
        conn.putheader('User-Agent', user_agent)
        conn.putheader('Connection', 'close')
        for name, value in headers:
            conn.putheader(name, value)
        if body is not None:
            conn.putheader('Content-Length', str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        body = b''
        while len(body) < max_body:
            chunk = resp.read(min(8192, max_body - len(body)))
            if not chunk:
                break
            body += chunk
        if conn.watch is not None and conn.watch.fired:
            raise Timeout()
        return resp.status, body, resp.headers.get_content_charset()
    except Timeout:
        raise
    except (http.client.HTTPException, OSError, ValueError) as error:
        if not conn.connected:
            # Nothing answers at that address (a connect timeout, TLS).
            raise ConnectionFailed(type(error).__name__)
        if (conn.watch is not None and conn.watch.fired or
                isinstance(error, socket.timeout)):
            raise Timeout()
        if isinstance(error, ssl.SSLError):
            raise ConnectionFailed(type(error).__name__)
        if isinstance(error, (http.client.HTTPException, ValueError)):
            raise BadAnswer(type(error).__name__)
        raise ConnectionFailed(type(error).__name__)
    finally:
        if conn.watch is not None:
            watchdog.forget(conn.watch)
        conn.close()
