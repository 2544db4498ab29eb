"""NODE_STATUS_POLL_URL: a server's own health URL, checked over HTTP.

Checks run on a bounded pool of worker threads and report through
``observe``; the monitor only submits them, so a hung server never holds
up its one-second tick.  Waits between retries are kept on a timer, not in
a worker, and each project has at most its share of the workers
(``[heat_health] poll_url_max_workers_per_project``): one tenant's hung
servers never hold up the others' checks.

The URL is a tenant's template, expanded by the rules the plugin also
validates with (``heat_health.policy.poll_url_rules``); once expanded it
is parsed once and its host checked (``poll_url_guard``): one of the
target server's own addresses or a host the operator allows, within the
networks the operator names; the fetch (``poll_url_fetch``) then
connects to that checked address only, within one deadline for the whole
answer.

The healthy response pattern is a tenant's too: it is matched by RE2, in
time linear in the body, never by Python's backtracking ``re``.

A verdict is the policy's own (its URL, its pattern): observations carry
the policy's id.
"""

import collections
from concurrent import futures
import heapq
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from heat_health.common import config
from heat_health.engine.monitor import poll_url_fetch as fetch
from heat_health.policy import observation as obs
from heat_health.policy import poll_url_guard as guard
from heat_health.policy import poll_url_rules as rules

LOG = logging.getLogger(__name__)

# Enough of a health page to find the healthy pattern in.
MAX_BODY = 64 * 1024

# Refusals remembered so as to warn once each (cleared past this many).
MAX_WARNED = 10000

Target = collections.namedtuple(
    'Target', ['server_id', 'name', 'addresses', 'policy_id', 'project_id',
               'due'],
    defaults=(None, None, None))
"""A server to check: its id, name and IP addresses (strings), the
policy (and its project) whose check it is, and when (monotonic clock) the
check was due, for its lateness."""

# Lateness of the checks started, kept for the cost log (at most this
# many between two reads).
MAX_LATENESS_KEPT = 100000


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
    :param allowed_networks: where polls may connect (see the option);
        ``[heat_health] poll_url_allowed_networks`` when not given.
    :param per_project: most checks of one project in flight;
        ``[heat_health] poll_url_max_workers_per_project`` when not given.
    """

    def __init__(self, observe, max_workers=None, allowed_hosts=None,
                 allowed_networks=None, per_project=None, conf=cfg.CONF):
        group = conf[config.GROUP]
        self._observe = observe
        self._max_workers = max_workers or group.poll_url_max_workers
        self._per_project = (per_project or
                             group.poll_url_max_workers_per_project or
                             max(1, self._max_workers // 4))
        self._allowed = list(group.poll_url_allowed_hosts
                             if allowed_hosts is None else allowed_hosts)
        self._networks = guard.allowed_networks(
            group.poll_url_allowed_networks if allowed_networks is None
            else allowed_networks)
        self._executor = futures.ThreadPoolExecutor(
            self._max_workers, thread_name_prefix='poll-url')
        self._watchdog = fetch.Watchdog()
        self._lock = threading.Lock()
        # (policy id, server id) of checks under way, retries included.
        self._running = set()
        # Project id -> attempts on a worker; attempts over the share wait
        # in that project's queue, in order.
        self._busy = collections.Counter()
        self._queued = collections.defaultdict(collections.deque)
        # (policy id, server id) -> the refusal last logged as a warning.
        self._warned = {}
        self._due = []
        self._due_changed = threading.Condition(self._lock)
        self._stopped = False
        # Since the last take_stats(): seconds each first attempt started
        # after it was due, and checks not started as the previous one
        # of the same server still ran.
        self._lateness = []
        self._skipped = 0
        self._timer = threading.Thread(target=self._retry_when_due,
                                       name='poll-url-retries', daemon=True)
        self._timer.start()

    # Synchronous: one whole check, retries included.

    def check(self, target, options):
        """Check target now, retries and waits included; the Observation."""
        options = dict(rules.DEFAULTS, **options)
        url, refused = self._url(target, options)
        if refused:
            return refused
        attempt = self._attempt(url, target, options)
        for _ in range(int(options[rules.RETRY_LIMIT])):
            if attempt.healthy:
                break
            time.sleep(float(options[rules.RETRY_INTERVAL]))
            attempt = self._attempt(url, target, options)
        return self._observation(target, attempt, options)

    # Asynchronous: what the monitor uses.

    def submit(self, target, options):
        """Start checking target for its policy; the result goes to observe.

        A project over its share of the workers waits for one of its own
        checks to end: its check is queued, never dropped.

        :returns: False, doing nothing, while the previous check of the
            same server for the same policy is still running or queued
            (retries included); else True.
        """
        key = (target.policy_id, target.server_id)
        with self._lock:
            if self._stopped or key in self._running:
                self._skipped += not self._stopped
                return False
            self._running.add(key)
        self._start(target, dict(rules.DEFAULTS, **options), 0)
        return True

    def take_stats(self):
        """What started since the last call: counts and lateness (s)."""
        with self._lock:
            late, self._lateness = sorted(self._lateness), []
            skipped, self._skipped = self._skipped, 0
        return {'started': len(late), 'skipped': skipped,
                'late_max': late[-1] if late else 0.0,
                'late_p99': late[int(0.99 * (len(late) - 1))] if late
                else 0.0}

    def running(self, server_id, policy_id=None):
        with self._lock:
            return (policy_id, server_id) in self._running

    def stop(self):
        with self._lock:
            self._stopped = True
            self._due = []
            self._queued.clear()
            self._due_changed.notify_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._watchdog.stop()

    def _start(self, target, options, tries):
        """Run an attempt on a worker, within the project's share.

        Over the share, it waits behind the project's own attempts.
        """
        project = target.project_id
        with self._lock:
            if self._stopped:
                return
            if self._busy[project] >= self._per_project:
                self._queued[project].append((target, options, tries))
                return
            self._busy[project] += 1
        self._submit(target, options, tries)

    def _submit(self, target, options, tries):
        try:
            self._executor.submit(self._run, target, options, tries)
        except RuntimeError:
            # Stopped meanwhile.
            with self._lock:
                self._running.discard((target.policy_id, target.server_id))

    def _release(self, project):
        """An attempt of project left its worker.

        The next queued attempt of the same project takes its place.
        """
        with self._lock:
            queue = self._queued.get(project)
            if queue:
                following = queue.popleft()
            else:
                self._queued.pop(project, None)
                self._busy[project] -= 1
                if self._busy[project] <= 0:
                    del self._busy[project]
                return
        self._submit(*following)

    def _run(self, target, options, tries):
        try:
            self._run_attempt(target, options, tries)
        finally:
            self._release(target.project_id)

    def _run_attempt(self, target, options, tries):
        if tries == 0 and target.due is not None:
            with self._lock:
                if len(self._lateness) < MAX_LATENESS_KEPT:
                    self._lateness.append(
                        max(time.monotonic() - target.due, 0.0))
        try:
            url, refused = self._url(target, options)
            if refused:
                self._finish(target, refused)
                return
            attempt = self._attempt(url, target, options)
            if attempt.healthy or tries >= int(options[rules.RETRY_LIMIT]):
                self._finish(target,
                             self._observation(target, attempt, options))
                return
            with self._lock:
                heapq.heappush(self._due, (
                    time.monotonic() + float(options[rules.RETRY_INTERVAL]),
                    id(target), target, options, tries + 1))
                self._due_changed.notify()
        except Exception:
            LOG.exception('Poll URL check of server %s failed',
                          target.server_id)
            self._finish(target, None)

    def _retry_when_due(self):
        while True:
            with self._lock:
                if self._stopped:
                    return
                if not self._due:
                    self._due_changed.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._due_changed.wait(wait)
                    continue
                _, _, target, options, tries = heapq.heappop(self._due)
            self._start(target, options, tries)

    def _finish(self, target, observation):
        with self._lock:
            self._running.discard((target.policy_id, target.server_id))
        if observation is None:
            return
        try:
            self._observe(observation)
        except Exception:
            LOG.exception('Recording the poll URL observation of server %s '
                          'failed', target.server_id)

    # One attempt.

    def _url(self, target, options):
        """(Destination, None), or (None, an UNKNOWN Observation)."""
        reason = self._refusal_before_parsing(target, options)
        if reason is None:
            try:
                return guard.destination(
                    rules.expand(options[rules.POLL_URL], target),
                    target.addresses or (), self._allowed,
                    self._networks), None
            except guard.Refused as error:
                reason = str(error)
        self._warn_once(target, reason)
        return None, obs.Observation(
            target.server_id, obs.UNKNOWN, obs.refused(reason),
            obs.NODE_STATUS_POLL_URL, timeutils.utcnow(), target.policy_id)

    @staticmethod
    def _refusal_before_parsing(target, options):
        template = options.get(rules.POLL_URL)
        if not template:
            return 'no poll_url'
        bad_pattern = rules.pattern_refusal(
            options.get(rules.HEALTHY_RESPONSE))
        if bad_pattern:
            return bad_pattern
        if '{name}' in template and not target.name:
            return ('the server\'s name is not known yet (Nova has not '
                    'listed it)')
        if '{ip}' in template and not target.addresses:
            return ('the server has no known IP address (Nova has not '
                    'listed one)')
        return None

    def _warn_once(self, target, reason):
        """Log a refusal as a warning once per policy's server.

        Later the same refusal is a debug line, not a warning every
        interval.
        """
        key = (target.policy_id, target.server_id)
        with self._lock:
            first = self._warned.get(key) != reason
            if len(self._warned) >= MAX_WARNED:
                self._warned.clear()
            self._warned[key] = reason
        log = LOG.warning if first else LOG.debug
        log('Poll URL check of server %(id)s (policy %(policy)s) refused: '
            '%(reason)s', {'id': target.server_id,
                           'policy': target.policy_id, 'reason': reason})

    def _attempt(self, destination, target, options):
        with self._lock:
            self._warned.pop((target.policy_id, target.server_id), None)
        timeout = float(options[rules.TIMEOUT])
        url = guard.redacted('%s://%s%s' % (
            destination.scheme, destination.host_header, destination.target))
        try:
            status, body, charset = fetch.get(
                destination, timeout, bool(options[rules.SSL_VERIFY]),
                MAX_BODY,
                self._watchdog)
        except fetch.ConnectionFailed as error:
            verdict = (obs.UNHEALTHY if options[rules.CONN_ERROR_AS_UNHEALTHY]
                       else obs.UNKNOWN)
            return _Attempt(verdict, 'poll URL %s: connection failed (%s)'
                            % (url, error))
        except fetch.Timeout:
            return _Attempt(obs.UNHEALTHY, 'poll URL %s: no answer within '
                            '%ss' % (url, timeout))
        except fetch.BadAnswer as error:
            return _Attempt(obs.UNKNOWN, 'poll URL %s: not an HTTP answer '
                            '(%s)' % (url, error))
        if not 200 <= status < 300:
            return _Attempt(obs.UNHEALTHY, 'poll URL %s answered %d'
                            % (url, status))
        pattern = options.get(rules.HEALTHY_RESPONSE)
        if pattern is not None:
            try:
                text = body.decode(charset or 'utf-8', errors='replace')
            except LookupError:
                text = body.decode('utf-8', errors='replace')
            if rules.healthy_pattern(pattern).search(text) is None:
                return _Attempt(obs.UNHEALTHY, 'poll URL %s answered %d '
                                'without %r' % (url, status, pattern))
        return _Attempt(obs.HEALTHY,
                        'poll URL %s answered %d' % (url, status))

    @staticmethod
    def _observation(target, attempt, options):
        reason = attempt.reason
        tries = int(options[rules.RETRY_LIMIT]) + 1
        if not attempt.healthy and tries > 1:
            reason = '%s (%d attempts)' % (reason, tries)
        return obs.Observation(target.server_id, attempt.verdict, reason,
                               obs.NODE_STATUS_POLL_URL, timeutils.utcnow(),
                               target.policy_id)
