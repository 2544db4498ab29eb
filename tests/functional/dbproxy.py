"""A TCP proxy in front of the database, to play its restart.

The test's engine connects to the proxy instead of the database. The
database server of the machine is never stopped: ``outage()`` makes the
proxy behave as a restarting server does for its clients (every open
connection is cut at once, and a new one is closed as soon as it is
accepted) until ``restore()``.

Every thread is a daemon and every wait is bounded, so a test that forgets
to stop the proxy never hangs the interpreter; ``stop()`` ends it all
within a few seconds.
"""

import socket
import threading

_CHUNK = 65536
_ACCEPT_POLL = 0.2      # seconds the accept loop waits between checks
_CONNECT_TIMEOUT = 5.0  # seconds to reach the database


def _close(sock):
    """Cut a socket at once: its peer sees the connection lost."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Link(object):
    """One client connection and its connection to the database."""

    def __init__(self, client, upstream):
        self.client = client
        self.upstream = upstream
        self._closed = threading.Event()

    def close(self):
        if not self._closed.is_set():
            self._closed.set()
            _close(self.client)
            _close(self.upstream)

    def pump(self, source, sink, on_end):
        try:
            while not self._closed.is_set():
                data = source.recv(_CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self.close()
            on_end(self)


# Where the proxy listens, and the database server it forwards to by default.
LISTEN_HOST = '127.0.0.1'
DEFAULT_TARGET = (LISTEN_HOST, 3306)


class DatabaseProxy(object):
    """Forward LISTEN_HOST:<port> to the database, with outages on demand.

    :param target: (host, port) of the database server.
    Counters: ``accepted`` connections forwarded, ``refused`` connections
    closed during an outage, ``cut`` connections closed by ``outage()``.
    """

    def __init__(self, target=DEFAULT_TARGET):
        self.target = target
        self.port = None
        self.accepted = 0
        self.refused = 0
        self.cut = 0
        self._lock = threading.Lock()
        self._links = set()
        self._down = threading.Event()
        self._stopping = threading.Event()
        self._server = None
        self._threads = []

    def start(self):
        """Listen on a free port of LISTEN_HOST; returns self."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((LISTEN_HOST, 0))
        server.listen(64)
        server.settimeout(_ACCEPT_POLL)
        self._server = server
        self.port = server.getsockname()[1]
        self._spawn(self._accept_loop, 'dbproxy-accept')
        return self

    def _spawn(self, target, name, *args):
        thread = threading.Thread(target=target, args=args, name=name,
                                  daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                client, _address = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                return   # the listening socket was closed by stop()
            client.settimeout(None)
            if self._down.is_set() or self._stopping.is_set():
                with self._lock:
                    self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(
                    self.target, timeout=_CONNECT_TIMEOUT)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            link = _Link(client, upstream)
            with self._lock:
                # An outage may have begun while connecting.
                if self._down.is_set() or self._stopping.is_set():
                    self.refused += 1
                    link.close()
                    continue
                self._links.add(link)
                self.accepted += 1
            self._spawn(link.pump, 'dbproxy-up', client, upstream,
                        self._forget)
            self._spawn(link.pump, 'dbproxy-down', upstream, client,
                        self._forget)

    def _forget(self, link):
        with self._lock:
            self._links.discard(link)

    def _cut_all(self):
        with self._lock:
            links, self._links = self._links, set()
        for link in links:
            link.close()
        return len(links)

    def outage(self):
        """The database goes away: cut every connection, refuse new ones.

        Returns how many connections were cut.
        """
        with self._lock:
            self._down.set()
        cut = self._cut_all()
        with self._lock:
            self.cut += cut
        return cut

    def restore(self):
        """The database is back: new connections are forwarded again."""
        self._down.clear()

    @property
    def down(self):
        return self._down.is_set()

    def stop(self, timeout=5.0):
        """Close everything; waits at most about ``timeout`` seconds."""
        self._stopping.set()
        if self._server is not None:
            _close(self._server)
        self._cut_all()
        with self._lock:
            threads = list(self._threads)
        per_thread = timeout / max(1, len(threads))
        for thread in threads:
            thread.join(per_thread)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
