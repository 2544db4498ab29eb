"""What recovery left on targets that go: undone before their rows go.

A target's row holds the record of the load balancer members its
recovery drained and of the CHECK_FAILED it set (``db.api.leftovers``).
The policy deleted, or the place no longer among its ``targets``, takes
the row, and with it the only record of the weight to give back: the
member would stay at weight 0 for good, the mark would wait for the next
stack update. So the row's leftovers are undone first; a row whose
undoing failed is kept by a targets' sync, and tried again at the next,
or with its policy deleted, and tried again by its owner.
"""

import functools

from oslo_log import log as logging

from heat_health.db import api as db_api
from heat_health.objects import policy as policy_object
from heat_health.objects import target as target_object

LOG = logging.getLogger(__name__)


class Undoer(object):
    """Gives drained members their weight back and clears recovery's marks.

    :param drainer: the recovery loop's ``lb_drain.Drainer``, or None.
    :param replacer: the recovery loop's ``HeatReplacer``.
    """

    def __init__(self, drainer, replacer):
        self._drainer = drainer
        self._replacer = replacer

    def undo(self, stack_id, rows):
        """Undo the leftovers of the rows of a policy of ``stack_id``.

        Returns the ids of the rows left with nothing to undo.
        """
        done = set()
        failed = self._restore(stack_id, rows)
        for row in rows:
            left = db_api.leftovers(row.recovery)
            try:
                if row.id in failed:
                    raise failed[row.id]
                if left and left.get('marked_failed'):
                    self._replacer.clear_mark(
                        row.stack_id, row.resource_name,
                        left['marked_failed'],
                        'heat-health no longer watches server %s' %
                        left['marked_failed'])
            except Exception as ex:
                LOG.warning('What recovery left on %(p)s is not undone '
                            'yet: %(e)s', {'p': row.path, 'e': ex})
                continue
            if left:
                LOG.info('Undid what recovery left on %(p)s before it '
                         'stops being watched: %(l)s',
                         {'p': row.path, 'l': left})
            done.add(row.id)
        return done

    def _restore(self, stack_id, rows):
        """Give back what the rows drained: {row id: error} of those not.

        All in one batch a pool: a deleted policy's undoing gets one try,
        and a load balancer busy with the first row's update would refuse
        the next ones. Only the members of the server each place holds.
        """
        drains = {}
        for row in rows:
            left = db_api.leftovers(row.recovery) or {}
            if left.get('drained') and self._drainer:
                drains[row.id] = (left['drained'], row.server_id)
        if not drains:
            return {}
        return self._drainer.restore_together(stack_id, drains)


def sync(undoer, policy_id, stack_id, places, grace_seconds, graced=()):
    """Target.sync, the leftovers of the rows leaving undone first.

    A place gone whose row's leftovers could not be undone keeps its row
    for now. Returns (Target.sync's answer, the places kept so).
    """
    leaving = []
    paths = {found['path'] for found in places.values()}
    for row in target_object.Target.get_all(policy_id):
        place = (row.stack_id, row.resource_name)
        # A place at a path still watched is the same place moved (its
        # group member replaced whole): its row follows it.
        if (place not in places and row.path not in paths and
                db_api.leftovers(row.recovery)):
            leaving.append(row)
    kept = set()
    if leaving and undoer is not None:
        done = undoer.undo(stack_id, leaving)
        kept = {(r.stack_id, r.resource_name) for r in leaving
                if r.id not in done}
    return target_object.Target.sync(policy_id, places, grace_seconds,
                                     graced, keep=kept), kept


def delete_policy(undoer, policy):
    """Policy.delete, the leftovers of its rows undone first.

    Rows whose undoing failed are kept with the policy, disabled and
    flagged deleted (``Policy.keep_deleted``): they hold the only record
    of what to give back, so its owner tries again (``undo_deleted``).
    Returns whether the policy existed.
    """
    if undoer is None:
        return policy_object.Policy.delete(policy.id)
    return _undo_rows(undoer, policy, policy_object.Policy.delete)


def undo_deleted(undoer, policy):
    """Try again what a deleted policy's rows owe; delete it once undone.

    Returns whether the policy is gone.
    """
    if undoer is None:
        return policy_object.Policy.delete(policy.id, only_deleted=True)
    return not _undo_rows(undoer, policy, functools.partial(
        policy_object.Policy.delete, only_deleted=True))


def _undo_rows(undoer, policy, delete):
    """Undo the policy's rows; delete it, or keep those not undone.

    Returns whether the policy existed.
    """
    rows = target_object.Target.get_all(policy.id)
    owing = [row for row in rows if db_api.leftovers(row.recovery)]
    done = undoer.undo(policy.stack_id, owing) if owing else set()
    if len(done) == len(owing):
        return delete(policy.id)
    LOG.warning('Policy %(id)s kept, deleted, until what its recovery left '
                'on %(n)d targets is undone (see above)',
                {'id': policy.id, 'n': len(owing) - len(done)})
    kept = {row.id for row in owing} - set(done)
    return policy_object.Policy.keep_deleted(
        policy.id, [row.id for row in rows if row.id not in kept])
