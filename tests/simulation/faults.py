"""Faults injected into the doubles' calls, and the engine's sudden death.

A rule names a call (or ``'*'``), optionally the key it is about (a server
id, a pool id, a stack id), how many matching calls it hits, and whether it
strikes before the call has any effect or after (the effect happened, the
answer was lost: a timeout that still happened, a kill -9 right after the
request was accepted). Rules are consumed in the order they were added.
"""

import collections


class Crash(BaseException):
    """kill -9 of the engine making the call.

    A BaseException, so no ``except Exception`` of the product code can
    swallow it: it unwinds to the world, which drops the engine.
    """


BEFORE, AFTER = 'before', 'after'

Rule = collections.namedtuple(
    'Rule', ['call', 'key', 'error', 'phase', 'skip'])


def _raise(error, call, key):
    if isinstance(error, BaseException):
        raise error
    if isinstance(error, type):
        raise error('injected fault in %s(%s)' % (call, key or ''))
    raise error(call, key)


def _names(calls, call):
    if isinstance(calls, str):
        return calls in ('*', call)
    return call in calls


class Faults(object):
    """Rules of one double; ``check`` raises the first that matches."""

    def __init__(self):
        self._rules = []     # [Rule, remaining count]
        self.hits = []       # (call, key, phase, error type name)

    def add(self, call, error, count=1, key=None, phase=BEFORE, skip=0):
        """Make ``count`` matching calls raise ``error``.

        :param call: a call's name, ``'*'`` or a tuple of names.
        :param error: an exception instance or class, or a callable
            (call, key) returning the exception to raise.
        :param skip: matching calls let through first.
        """
        if phase not in (BEFORE, AFTER):
            raise ValueError('phase is %s or %s' % (BEFORE, AFTER))
        self._rules.append([Rule(call, key, error, phase, skip), count])

    def crash(self, call, key=None, phase=BEFORE, skip=0):
        """kill -9 of the calling engine at this call."""
        self.add(call, Crash, 1, key, phase, skip)

    def clear(self):
        del self._rules[:]

    @property
    def pending(self):
        return [(rule, left) for rule, left in self._rules]

    def check(self, phase, call, key=None):
        if not self._rules:
            return
        for entry in self._rules:
            rule, left = entry
            if (rule.phase == phase and _names(rule.call, call) and
                    rule.key in (None, key)):
                if rule.skip:
                    entry[0] = rule._replace(skip=rule.skip - 1)
                    return
                if left <= 1:
                    self._rules.remove(entry)
                else:
                    entry[1] = left - 1
                name = getattr(rule.error, '__name__',
                               type(rule.error).__name__)
                self.hits.append((call, key, phase, name))
                _raise(rule.error, call, key)
