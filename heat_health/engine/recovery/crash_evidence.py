"""Crash evidence of a failed server, kept before it is destroyed.

Heat deletes a replaced server with its console log and Nova's record of
what went wrong. Before a RECREATE fences or marks the server, and when
recovery gives up on it, what an operator would look at is read and kept
with the incident's timeline row: the console log's tail, Nova's fault,
its last instance actions (who asked Nova for what) and the last poll URL
answer the engine has of it. Reading it never holds the recovery up for
long: what is not read within ``READ_SECONDS`` is said to be missing, as
is a console Nova does not give.
"""

import threading

from oslo_log import log as logging

from heat_health.engine.recovery import nova_actions
from heat_health.policy import observation as obs

LOG = logging.getLogger(__name__)

# Lines of the console log asked for, and bytes of its end kept.
CONSOLE_LINES = 100
CONSOLE_BYTES = 4096
# Instance actions kept, newest first.
ACTIONS_KEPT = 5
# Longest wait for Nova's answers: a console log comes in milliseconds,
# and a RECREATE waits for it before its fence and mark.
READ_SECONDS = 3.0


def _console(nova, server_id):
    tail = nova.console_tail(server_id, CONSOLE_LINES)
    kept = tail.encode('utf-8')[-CONSOLE_BYTES:]
    return kept.decode('utf-8', 'ignore')


def _actions(nova, server_id):
    return [dict(a._asdict(), start_time=a.start_time and
                 a.start_time.isoformat())
            for a in nova.instance_actions(server_id, ACTIONS_KEPT)]


def _fault(nova, server_id):
    return nova.status(server_id).fault


_READS = (('console', _console), ('fault', _fault),
          ('instance_actions', _actions))
_RAISED = 'raised'


def _missing(error):
    if isinstance(error, (nova_actions.ServerGone,
                          nova_actions.ActionRefused,
                          nova_actions.NovaActionFailed)):
        return str(error)
    return '%s: %s' % (type(error).__name__, error)


def _read_into(found, nova, server_id):
    for key, read in _READS:
        try:
            found[key] = read(nova, server_id)
        except Exception as e:
            found[key + '_missing'] = _missing(e)
        except BaseException as e:
            # The caller's to raise, as if it had read inline.
            found[_RAISED] = e
            return


def last_poll_answer(target):
    """The last poll URL verdict the engine has of the target, or None."""
    seen = (getattr(target, 'verdicts', None) or {}).get(
        obs.NODE_STATUS_POLL_URL)
    stored = getattr(target, 'stored', None)
    if seen is None and stored is not None and \
            stored.source == obs.NODE_STATUS_POLL_URL:
        seen = stored
    if seen is None:
        return None
    return {'verdict': seen.verdict, 'reason': seen.reason,
            'time': seen.observed_at.isoformat()}


def read(nova, target, timeout=READ_SECONDS):
    """The target's server's evidence, as an event's detail.

    Nova is read on a thread of its own, waited for up to ``timeout``:
    what has not come by then is said missing.
    """
    server_id = target.server_id
    found = {'server_id': server_id}
    reader = threading.Thread(target=_read_into, args=(found, nova,
                                                       server_id),
                              daemon=True, name='heat-health-evidence')
    reader.start()
    reader.join(timeout)
    evidence = dict(found)
    if _RAISED in evidence:
        raise evidence[_RAISED]
    for key, _read in _READS:
        if key not in evidence and key + '_missing' not in evidence:
            evidence[key + '_missing'] = 'not read within %ss' % timeout
    evidence['poll_url'] = last_poll_answer(target)
    return evidence


def summary(evidence):
    """What the evidence holds, in a few words (a timeline row's reason)."""
    parts = []
    console = evidence.get('console')
    parts.append('console tail of %d bytes' % len(console.encode('utf-8'))
                 if console is not None else 'no console log')
    fault = evidence.get('fault')
    if fault:
        parts.append('fault "%s"' % fault.get('message'))
    actions = evidence.get('instance_actions')
    if actions:
        parts.append('%d instance actions' % len(actions))
    if evidence.get('poll_url'):
        parts.append('last poll URL answer')
    return ', '.join(parts)
