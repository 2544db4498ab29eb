"""Rungs outside Nova: a Mistral workflow, a signed webhook.

Thin adapters that sort the answers into what recovery treats
differently. ``RungFailed`` means this rung cannot heal the server now
(Mistral refused the execution or is unreachable, the webhook answered
other than 2xx or not in time, or its URL breaks the network rules): the
attempt escalates to the next rung, as when a Nova action is refused.
``AnswerLost`` means Mistral may have started the execution all the same.
"""

import json

from mistralclient.api import base as mistral_base
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.engine.monitor import poll_url_fetch as fetch
from heat_health.policy import poll_url_guard as guard
from heat_health.policy import webhook_signature

LOG = logging.getLogger(__name__)

# The state a running execution is put in to stop it.
CANCELLED = 'CANCELLED'
# Bytes of a webhook's answer read (only its status counts).
MAX_ANSWER = 4096
USER_AGENT = 'heat-health-webhook'


class RungFailed(Exception):
    """The rung did not go through: the next rung is tried."""


class AnswerLost(RungFailed):
    """Mistral's answer did not come (timeout, connection lost, 5xx).

    It may have created the execution before: whoever can look it up does
    so before calling the rung failed.
    """


def _mistral_reason(error):
    if isinstance(error, mistral_base.APIException):
        return '%s (HTTP %s)' % (error.error_message, error.error_code)
    return '%s: %s' % (type(error).__name__, error)


class Workflows(object):
    """Executions of Mistral workflows, with one mistralclient Client.

    The caller makes the client with the stack's stored trust, so the
    execution runs as the stack's owner, in the owner's project.
    """

    def __init__(self, client):
        self._client = client

    def _call(self, what, func, *args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as e:
            raise RungFailed('%s: %s' % (what, _mistral_reason(e)))

    def start(self, workflow, workflow_input, description):
        """Start an execution; (its id, its state).

        :raises RungFailed: Mistral refused it (4xx).
        :raises AnswerLost: anything else: it may have been started.
        """
        what = 'Mistral did not start workflow %s' % workflow
        try:
            found = self._client.executions.create(
                workflow, workflow_input=workflow_input,
                description=description)
        except mistral_base.APIException as e:
            if e.error_code is not None and 400 <= e.error_code < 500:
                raise RungFailed('%s: %s' % (what, _mistral_reason(e)))
            raise AnswerLost('%s: %s' % (what, _mistral_reason(e)))
        except Exception as e:
            raise AnswerLost('%s: %s' % (what, _mistral_reason(e)))
        return found.id, found.state

    def state(self, execution_id):
        """(state, state_info) of the execution."""
        found = self._call('Mistral did not show execution %s' %
                           execution_id, self._client.executions.get,
                           execution_id)
        return found.state, getattr(found, 'state_info', None)

    def find(self, description):
        """(id, state) of the execution started with ``description``.

        After a takeover of an attempt whose execution may have been
        started: it is followed, never started again. None if none.
        """
        found = self._call('Mistral did not list executions',
                           self._client.executions.list,
                           description=description)
        for execution in found:
            if execution.description == description:
                return execution.id, execution.state
        return None

    def cancel(self, execution_id):
        """Cancel a running execution (its rung's deadline passed)."""
        self._call('Mistral did not cancel execution %s' % execution_id,
                   self._client.executions.update, execution_id, CANCELLED)


class Webhooks(object):
    """Signed POSTs to webhook receivers, under the poll URL rules."""

    def __init__(self, conf=cfg.CONF, watchdog=None):
        group = conf.heat_health
        self._conf = conf
        self._allowed = list(group.poll_url_allowed_hosts)
        self._networks = guard.allowed_networks(
            group.poll_url_allowed_networks)
        self._timeout = group.webhook_timeout
        self._watchdog = watchdog or fetch.Watchdog()

    def stop(self):
        self._watchdog.stop()

    def destination(self, url):
        """The checked destination of ``url``, or RungFailed."""
        try:
            return guard.destination(url, (), self._allowed, self._networks)
        except guard.Refused as e:
            raise RungFailed('webhook %s refused by the network rules of '
                             'poll URLs: %s' % (guard.redacted(url), e))

    def post(self, url, payload, secret):
        """POST ``payload`` as signed JSON; the 2xx status, or RungFailed."""
        target = self.destination(url)
        body = json.dumps(payload, sort_keys=True).encode('utf-8')
        headers = (('Content-Type', 'application/json'),
                   (webhook_signature.HEADER,
                    webhook_signature.signature(secret, body)))
        shown = guard.redacted(url)
        try:
            status, _body, _charset = fetch.request(
                'POST', target, self._timeout, True, MAX_ANSWER,
                self._watchdog, body=body, headers=headers,
                user_agent=USER_AGENT)
        except fetch.Timeout:
            raise RungFailed('webhook %s did not answer within %s s' % (
                shown, self._timeout))
        except (fetch.ConnectionFailed, fetch.BadAnswer) as e:
            raise RungFailed('webhook %s failed: %s' % (shown, e))
        if not 200 <= status < 300:
            raise RungFailed('webhook %s answered HTTP %s' % (shown, status))
        return status
