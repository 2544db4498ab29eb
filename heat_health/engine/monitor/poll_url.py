"""NODE_STATUS_POLL_URL: a server's own health URL, checked over HTTP.

Checks run on a bounded pool of worker threads and report through
``observe``; the monitor only submits them, so a hung server never holds
up its one-second tick.  Waits between retries are kept on a timer, not in
a worker, so a few hung servers cannot starve everyone else's checks.

The URL is a template of the policy; once expanded, its host must be one
of the target server's own addresses, or a host the operator allows in
``[heat_health] poll_url_allowed_hosts``: the engine sits in the control
plane and must not become a way to probe arbitrary hosts from there.

The healthy response pattern is a tenant's too: it is matched by RE2, in
time linear in the body, never by Python's backtracking ``re``.
"""

import collections
from concurrent import futures
import heapq
import ipaddress
import re
import threading
import time
from urllib import parse

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils
import re2
import requests
from requests import adapters

from heat_health.common import config
from heat_health.engine.monitor import observation as obs

LOG = logging.getLogger(__name__)

OPTIONS = (POLL_URL, SSL_VERIFY, CONN_ERROR_AS_UNHEALTHY, HEALTHY_RESPONSE,
           RETRY_LIMIT, RETRY_INTERVAL, TIMEOUT) = (
    'poll_url', 'poll_url_ssl_verify', 'poll_url_conn_error_as_unhealthy',
    'poll_url_healthy_response', 'poll_url_retry_limit',
    'poll_url_retry_interval', 'poll_url_timeout')
"""Options of a NODE_STATUS_POLL_URL detection mode (Senlin's names)."""

DEFAULTS = {
    SSL_VERIFY: True,
    CONN_ERROR_AS_UNHEALTHY: True,
    RETRY_LIMIT: 3,
    RETRY_INTERVAL: 3,
    TIMEOUT: 5,
}

TEMPLATE_VARIABLES = ('ip', 'name', 'id')
_VARIABLE = re.compile(r'\{(%s)\}' % '|'.join(TEMPLATE_VARIABLES))

# Enough of a health page to find the healthy pattern in.
MAX_BODY = 64 * 1024

# RE2 would also write a bad pattern's error to stderr: it is reported with
# the check or the validation instead.  A pattern and its matching state get
# 1 MiB (RE2's default is 8 MiB): plenty for a health page, and the compiled
# patterns RE2 caches stay small.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 1 << 20

Target = collections.namedtuple('Target', ['server_id', 'name', 'addresses'])
"""A server to check: its id, name and IP addresses (strings).  Any object
with these attributes will do."""


def _ip(address):
    try:
        return ipaddress.ip_address(str(address).strip('[]'))
    except ValueError:
        return None


def expand(template, target):
    """The poll URL of target: the template with its variables expanded.

    {ip} is its first IPv4 address, else its first address; {name} and
    {id} its name and id.  Nothing else is expanded.
    """
    addresses = list(target.addresses or [])
    ips = [a for a in addresses if _ip(a) is not None]
    ip = next((a for a in ips if _ip(a).version == 4),
              ips[0] if ips else '')
    if _ip(ip) is not None and _ip(ip).version == 6:
        ip = '[%s]' % ip
    values = {'ip': ip, 'name': parse.quote(target.name or '', safe=''),
              'id': target.server_id}
    return _VARIABLE.sub(lambda m: values[m.group(1)], template)


def healthy_pattern(pattern):
    """pattern compiled by RE2, which matches in time linear in the body.

    With Python's ``re`` a pattern such as ``(a+)+$`` takes exponential
    time on a body of a's and holds a worker for good.  RE2 has no
    backreferences or lookaround: such a pattern is an error here, never
    matched some other way.

    :raises ValueError: RE2 cannot compile pattern; the message says why.
    """
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else ''
        if isinstance(reason, bytes):
            reason = reason.decode('utf-8', errors='replace')
        raise ValueError(reason or 'RE2 cannot compile %r' % pattern)


def pattern_refusal(pattern):
    """Why pattern cannot be the healthy response, or None if it can.

    None (no pattern: any 2xx answer is healthy) can.  Validation refuses
    the others; a policy stored before patterns were RE2's gets unknown
    observations, with the reason, rather than a check failing in a worker.
    """
    if pattern is None:
        return None
    if not pattern:
        return 'empty poll_url_healthy_response'
    try:
        healthy_pattern(pattern)
    except ValueError as error:
        return 'poll_url_healthy_response is not RE2 syntax: %s' % error
    return None


def refusal(url, target, allowed_hosts, allowed_networks=()):
    """Why url must not be fetched for target, or None if it may be.

    :param allowed_networks: ip_network objects; if any, the host must be
        an address in one of them as well.
    """
    parts = parse.urlsplit(url)
    if parts.scheme not in ('http', 'https'):
        return 'poll URL %s is not http or https' % url
    host = parts.hostname
    if not host:
        return 'poll URL %s names no host' % url
    wanted = _ip(host)
    if allowed_networks and not (
            wanted is not None and
            any(wanted in network for network in allowed_networks)):
        return ('poll URL host %s is not in [heat_health] '
                'poll_url_allowed_networks' % host)
    for allowed in list(target.addresses or []) + list(allowed_hosts):
        if wanted is not None and _ip(allowed) == wanted:
            return None
        if str(allowed).strip('[]').lower() == host:
            return None
    return ('poll URL host %s is neither an address of the server nor in '
            '[heat_health] poll_url_allowed_hosts' % host)


class _Attempt(object):
    """The outcome of one HTTP attempt."""

    def __init__(self, verdict, reason):
        self.verdict = verdict
        self.reason = reason

    @property
    def healthy(self):
        return self.verdict == obs.HEALTHY


class PollUrlChecker(object):
    """Bounded, non-blocking poll URL checks.

    :param observe: called with one Observation per finished check, from a
        worker thread.
    :param max_workers: most checks in flight;
        ``[heat_health] poll_url_max_workers`` when not given.
    :param allowed_hosts: hosts allowed besides the server's addresses;
        ``[heat_health] poll_url_allowed_hosts`` when not given.
    :param allowed_networks: CIDRs every host must be in (none: no such
        limit); ``[heat_health] poll_url_allowed_networks`` when not given.
    """

    def __init__(self, observe, max_workers=None, allowed_hosts=None,
                 allowed_networks=None, conf=cfg.CONF):
        group = conf[config.GROUP]
        self._observe = observe
        self._max_workers = max_workers or group.poll_url_max_workers
        self._allowed = list(group.poll_url_allowed_hosts
                             if allowed_hosts is None else allowed_hosts)
        self._networks = [ipaddress.ip_network(n, strict=False) for n in (
            group.poll_url_allowed_networks if allowed_networks is None
            else allowed_networks)]
        self._executor = futures.ThreadPoolExecutor(
            self._max_workers, thread_name_prefix='poll-url')
        self._session = requests.Session()
        adapter = adapters.HTTPAdapter(pool_connections=256,
                                       pool_maxsize=self._max_workers,
                                       max_retries=0)
        self._session.mount('http://', adapter)
        self._session.mount('https://', adapter)
        self._lock = threading.Lock()
        self._running = set()
        self._due = []
        self._due_changed = threading.Condition(self._lock)
        self._stopped = False
        self._timer = threading.Thread(target=self._retry_when_due,
                                       name='poll-url-retries', daemon=True)
        self._timer.start()

    # Synchronous: one whole check, retries included.

    def check(self, target, options):
        """Check target now, retries and waits included; the Observation."""
        options = dict(DEFAULTS, **options)
        url, refused = self._url(target, options)
        if refused:
            return refused
        attempt = self._attempt(url, options)
        for _ in range(int(options[RETRY_LIMIT])):
            if attempt.healthy:
                break
            time.sleep(float(options[RETRY_INTERVAL]))
            attempt = self._attempt(url, options)
        return self._observation(target, attempt, options)

    # Asynchronous: what the monitor uses.

    def submit(self, target, options):
        """Start checking target; the result goes to observe.

        :returns: False, doing nothing, while the previous check of the
            same server is still running (retries included); else True.
        """
        with self._lock:
            if self._stopped or target.server_id in self._running:
                return False
            self._running.add(target.server_id)
        options = dict(DEFAULTS, **options)
        try:
            self._executor.submit(self._run, target, options, 0)
        except RuntimeError:
            self._finish(target, None)
            return False
        return True

    def running(self, server_id):
        with self._lock:
            return server_id in self._running

    def stop(self):
        with self._lock:
            self._stopped = True
            self._due = []
            self._due_changed.notify_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._session.close()

    def _run(self, target, options, tries):
        try:
            url, refused = self._url(target, options)
            if refused:
                self._finish(target, refused)
                return
            attempt = self._attempt(url, options)
            if attempt.healthy or tries >= int(options[RETRY_LIMIT]):
                self._finish(target,
                             self._observation(target, attempt, options))
                return
            with self._lock:
                heapq.heappush(self._due, (
                    time.monotonic() + float(options[RETRY_INTERVAL]),
                    id(target), target, options, tries + 1))
                self._due_changed.notify()
        except Exception:
            LOG.exception('Poll URL check of server %s failed',
                          target.server_id)
            self._finish(target, None)

    def _retry_when_due(self):
        with self._lock:
            while not self._stopped:
                if not self._due:
                    self._due_changed.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._due_changed.wait(wait)
                    continue
                _, _, target, options, tries = heapq.heappop(self._due)
                try:
                    self._executor.submit(self._run, target, options, tries)
                except RuntimeError:
                    self._running.discard(target.server_id)

    def _finish(self, target, observation):
        with self._lock:
            self._running.discard(target.server_id)
        if observation is None:
            return
        try:
            self._observe(observation)
        except Exception:
            LOG.exception('Recording the poll URL observation of server %s '
                          'failed', target.server_id)

    # One attempt.

    def _url(self, target, options):
        """(url, None), or (None, an UNKNOWN Observation) if refused."""
        template = options.get(POLL_URL)
        bad_pattern = pattern_refusal(options.get(HEALTHY_RESPONSE))
        reason = None
        if not template:
            reason = 'no poll_url'
        elif bad_pattern:
            reason = bad_pattern
        elif '{name}' in template and not target.name:
            reason = ('the server\'s name is not known yet (Nova has not '
                      'listed it)')
        elif '{ip}' in template and not target.addresses:
            reason = ('the server has no known IP address (Nova has not '
                      'listed one)')
        else:
            url = expand(template, target)
            reason = refusal(url, target, self._allowed, self._networks)
        if reason is None:
            return url, None
        LOG.warning('Poll URL check of server %(id)s refused: %(reason)s',
                    {'id': target.server_id, 'reason': reason})
        return None, obs.Observation(
            target.server_id, obs.UNKNOWN, 'check refused: %s' % reason,
            obs.NODE_STATUS_POLL_URL, timeutils.utcnow())

    def _attempt(self, url, options):
        timeout = float(options[TIMEOUT])
        try:
            with self._session.get(url, timeout=timeout, stream=True,
                                   allow_redirects=False,
                                   verify=bool(options[SSL_VERIFY])) as resp:
                body = b''
                for chunk in resp.iter_content(8192):
                    body += chunk
                    if len(body) >= MAX_BODY:
                        break
                status = resp.status_code
                encoding = resp.encoding or 'utf-8'
        except requests.exceptions.ConnectionError as error:
            # Includes a connect timeout: nothing answers at that address.
            verdict = (obs.UNHEALTHY if options[CONN_ERROR_AS_UNHEALTHY]
                       else obs.UNKNOWN)
            return _Attempt(verdict, 'poll URL %s: connection failed (%s)'
                            % (url, type(error).__name__))
        except requests.exceptions.Timeout:
            return _Attempt(obs.UNHEALTHY, 'poll URL %s: no answer within '
                            '%ss' % (url, timeout))
        except requests.exceptions.RequestException as error:
            return _Attempt(obs.UNKNOWN, 'poll URL %s: %s' % (url, error))
        if not 200 <= status < 300:
            return _Attempt(obs.UNHEALTHY, 'poll URL %s answered %d'
                            % (url, status))
        pattern = options.get(HEALTHY_RESPONSE)
        if pattern is not None:
            text = body.decode(encoding, errors='replace')
            if healthy_pattern(pattern).search(text) is None:
                return _Attempt(obs.UNHEALTHY, 'poll URL %s answered %d '
                                'without %r' % (url, status, pattern))
        return _Attempt(obs.HEALTHY,
                        'poll URL %s answered %d' % (url, status))

    @staticmethod
    def _observation(target, attempt, options):
        reason = attempt.reason
        tries = int(options[RETRY_LIMIT]) + 1
        if not attempt.healthy and tries > 1:
            reason = '%s (%d attempts)' % (reason, tries)
        return obs.Observation(target.server_id, attempt.verdict, reason,
                               obs.NODE_STATUS_POLL_URL, timeutils.utcnow())
