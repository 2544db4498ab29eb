"""RECREATE, stage by stage: fence, mark, have heat-engine replace.

A mixin of the recovery loop: each pass takes a stored RECREATE as far as
it goes now and stores the stage reached before the effect that follows
it. The old server is stopped once (``fencing``, confirmed ``fenced``);
the resource is marked CHECK_FAILED only while it still holds the old
server (``marked``). Every target of a stack marked by then, or within
the gather window, is replaced by one stack update, asked for after each
one's ``updating`` is stored, and again only for those an update ended
without replacing. The registry's sync sees each new server and verifies
it.

With ``replace: MEMBER`` the resource marked is the group member that
holds the server (a provider template or nested stack member of a group:
the server with its ports and volumes), recorded in the recovery as
``member`` before it is marked, so that whoever carries the recovery on
marks, updates for and watches that same member. Heat replaces it whole;
the target follows its server into the new member's stack (the registry's
sync, by its path).
"""

import collections
import datetime
import threading
import zlib

from heat.common import exception as heat_exc
from oslo_log import log as logging
import oslo_messaging

from heat_health.common import power_states
from heat_health.engine.monitor import states
from heat_health.engine.recovery import crash_evidence
from heat_health.engine.recovery import heat_replace
from heat_health.engine.recovery import nova_actions
from heat_health.engine.recovery import planner
from heat_health.policy import spec as policy_spec

LOG = logging.getLogger(__name__)

STAGES = (INTENT, FENCING, FENCED, MARKED, UPDATING) = (
    'intent', 'fencing', 'fenced', planner.MARKED, 'updating')
# Stages that may go on while a stack update of ours runs.
BEFORE_MARK = frozenset([INTENT, FENCING, FENCED])
# Updates tried for one RECREATE whose update was superseded.
MAX_UPDATES = 3
# vm_states of a server fenced by a delete, and those of one whose guest
# Nova keeps from running (stopped, its memory saved to disk, shelved).
_GONE = frozenset(['deleted', 'soft-delete'])
_STOPPED = frozenset(['stopped', 'suspended', 'shelved',
                      'shelved_offloaded'])
# Power states of a guest that does not run on its host (not found there,
# shut down, crashed, suspended). Not PAUSED: a paused guest's process
# keeps its memory, its open volumes and their locks, and runs on from
# where it was once unpaused.
_NOT_RUNNING = frozenset([power_states.NOSTATE, power_states.SHUTDOWN,
                          power_states.CRASHED, power_states.SUSPENDED])
# Seconds a member replaced whole may leave its target where it was (the
# old member's stack gone, the update over) before the recovery fails: the
# registry's sync moves the target to the new member's server as soon as
# it sees it, unless the new member holds no server at its path.
UNMOVED_SECONDS = 60
# Locks on asking for the update of a stack, one per stack by its hash.
_UPDATE_LOCKS = tuple(threading.Lock() for _i in range(64))


def marked_place(target, recovery=None):
    """(stack id, name) of the resource a RECREATE marks for the target.

    The group member recorded in its recovery (``replace: MEMBER``), else
    the server's own resource.
    """
    if recovery is None:
        recovery = target.recovery
    member = (recovery or {}).get('member')
    if member:
        return (member[heat_replace.MEMBER_STACK],
                member[heat_replace.MEMBER_NAME])
    return target.stack_id, target.resource_name


def fenced(recovery):
    """Whether the attempt stopped (or deleted) the old server itself.

    Its later effects rest on that: the server fails because it was
    fenced.
    """
    return bool(recovery.get('fence_started_at'))


def _fenced_as(found, host_down):
    """How the old server is fenced, in a few words; None while it is not.

    Gone; or, unless its host is forced down (then it is deleted), Nova
    keeps its guest from running, or its guest does not run. Never while
    Nova carries out a task on it: a reboot would run the guest again.
    """
    if found is None or (found.vm_state in _GONE and not found.task_state):
        return 'deleted'
    if found.task_state or host_down:
        return None
    if found.vm_state in _STOPPED:
        return found.vm_state
    power = power_states.name(found.power_state)
    if power in _NOT_RUNNING:
        return 'not running (power state %s)' % power
    return None


def _member_args(recovery):
    """The replacer's keyword naming the member, if one is recorded."""
    member = (recovery or {}).get('member')
    return {'member': member} if member else {}


class RecreateStages(object):
    """RECREATE's stages.

    The loop provides tracker, replacer, timeline, ``_actions``,
    ``_failed``, ``_justified``, ``_saw_nova_error`` and
    ``_wake_after_step``.
    """

    def _store_stage(self, target, recovery, reason):
        """Store the stage reached; ``reason`` None: not in the timeline."""
        if self.tracker.store_step(target, states.RECOVERING,
                                   states.RECOVERING,
                                   reason or target.reason,
                                   {'recovery': recovery},
                                   announce=reason is not None):
            if reason:
                self.timeline.heat_event(target, 'IN_PROGRESS', reason)
            return True
        return False

    def _recreate(self, policy, target, recovery, nova):
        stage = recovery.get('stage')
        old = recovery.get('old_server_id') or target.server_id
        if stage == UPDATING:
            return self._recreate_update(policy, target, recovery)
        if stage == MARKED:
            # Its update is asked for with the others (ReplaceMarked).
            return
        if stage == INTENT and not recovery.get('evidence_kept'):
            self._keep_evidence(policy, target, 'before RECREATE', nova)
            recovery['evidence_kept'] = True
            if not self.tracker.store_columns(target,
                                              {'recovery': recovery}):
                return
        if (policy.spec.recovery.fence_compute or
                recovery.get('host_down')) and stage != FENCED:
            if not self._fence(policy, target, recovery, old, nova):
                return
        try:
            if not self._find_member(policy, target, recovery, old):
                return
            updated = self.replacer.stack_to_update(
                policy.stack_id, *marked_place(target, recovery))
        except heat_replace.ServerMoved as e:
            LOG.info('RECREATE of %(p)s: %(e)s', {'p': target.path, 'e': e})
            return
        except Exception as e:
            return self._failed(policy, target, 'its stack cannot be '
                                'read: %s' % e)
        if self.replacer.stack_status(updated)[1] == 'IN_PROGRESS':
            # Our update runs: marked once it ends, for the next one.
            return
        reason = 'RECREATE: %s' % (recovery.get('detected') or 'unhealthy')
        member = recovery.get('member')
        try:
            self.replacer.mark_failed(target.stack_id, target.resource_name,
                                      reason[:255], server_id=old,
                                      **_member_args(recovery))
        except heat_replace.ServerMoved as e:
            # An earlier update replaced it already: the registry's next
            # sync verifies the new server.
            LOG.info('RECREATE of %(p)s: %(e)s', {'p': target.path, 'e': e})
            return
        except Exception as e:
            return self._failed(policy, target, 'could not mark the '
                                'resource CHECK_FAILED: %s' % e)
        if member:
            done = ('marked member %s CHECK_FAILED: server %s to be '
                    'replaced with its whole member (stack %s)' % (
                        member[heat_replace.MEMBER_NAME], old,
                        member[heat_replace.MEMBER_NESTED]))
        else:
            done = 'marked CHECK_FAILED: server %s to be replaced' % old
        self._to_update(target, recovery, done)

    def _keep_evidence(self, policy, target, when, nova=None):
        """Keep the failed server's crash evidence with the incident.

        Its console and Nova's record of it go with the server: read
        before it is fenced or replaced, and when recovery gives up.
        Evidence that cannot be read holds nothing up.
        """
        try:
            found = crash_evidence.read(
                nova or self._actions(policy.stack_id), target)
        except Exception as e:
            LOG.warning('No crash evidence of %(p)s kept: %(e)s',
                        {'p': target.path, 'e': e})
            return
        self.timeline.record(policy, target, 'EVIDENCE', 'crash evidence '
                             'of server %s kept %s: %s' % (
                                 target.server_id, when,
                                 crash_evidence.summary(found)), detail=found)

    def _find_member(self, policy, target, recovery, old):
        """Record the group member to replace whole, before it is marked.

        Only with ``replace: MEMBER`` and only once: a member recorded is
        the one marked, updated for and watched by whichever engine
        carries the recovery on. A server that is itself a group's member,
        or in no group, is replaced alone. False when the record could not
        be stored (tried again at the next pass).
        """
        if (recovery.get('member') or
                policy.spec.recovery.replace != policy_spec.MEMBER):
            return True
        member = self.replacer.member_of(policy.stack_id, target.stack_id,
                                         target.resource_name, old)
        if member is None:
            return True
        recovery['member'] = member
        return self._store_stage(target, recovery, None)

    def _fence(self, policy, target, recovery, old, nova):
        """Stop the old server, once; True once it is fenced.

        Before Heat makes the new one: Heat creates the replacement first.
        Fenced means it can no longer write to what it shares (see
        ``_fenced_as``). Looked at again at every pass until
        node_delete_timeout while Nova carries out a task on it. One Nova
        refuses to stop and that does not run is fenced as it is; one
        Nova refuses to stop that may run (paused, locked) is deleted at
        once where node_force_recreate allows, else the RECREATE fails
        saying why: nothing would come of waiting.

        A server whose host is forced down is deleted instead, whatever
        the policy's fencing: its host is fenced, so nothing runs it, and
        Nova deletes it at once (its compute is down). Heat, finding it
        gone, gives the new server new ports; it would otherwise wait for
        the dead host to detach the old ones, and fail the update. That
        delete is node_force_recreate's own: refused, or not done within
        node_delete_timeout, it is not sent again; the RECREATE fails.
        """
        spec = policy.spec.recovery
        host = recovery.get('host_down')
        now = self._clock()
        refused = None
        if recovery.get('stage') == INTENT:
            recovery.update(stage=FENCING, fence_started_at=now.isoformat())
            what = ('deleting server %s (its host %s is forced down)' % (
                old, host) if host else 'stopping server %s' % old)
            if not self._store_stage(target, recovery, 'fencing: ' + what):
                return False
            try:
                if host:
                    nova.force_delete(old)
                else:
                    nova.run(old, 'STOP')
            except nova_actions.ServerGone:
                pass
            except nova_actions.ActionRefused as e:
                refused = e
            except nova_actions.NovaActionFailed as e:
                self._saw_nova_error(policy, e)
                self._failed(policy, target, 'fencing failed: %s' % e,
                             retry_same=True)
                return False
        try:
            found = nova.status(old)
        except nova_actions.ServerGone:
            found = None
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)
            return False
        fenced = _fenced_as(found, host)
        if fenced is not None:
            recovery['stage'] = FENCED
            return self._store_stage(target, recovery, 'fenced: server %s '
                                     'is %s' % (old, fenced))
        if refused is not None and not found.task_state:
            why = 'Nova refused to %s server %s (%s): %s' % (
                'delete' if host else 'stop', old, found.status, refused)
        else:
            started = planner.parse_time(recovery.get('fence_started_at'))
            if now < (started or now) + datetime.timedelta(
                    seconds=spec.node_delete_timeout):
                return False
            why = 'server %s did not %s within %ss' % (
                old, 'go' if host else 'stop', spec.node_delete_timeout)
        if (not spec.node_force_recreate or recovery.get('force_deleted') or
                host):
            # A server on a host forced down was fenced by the delete
            # node_force_recreate would send: never sent twice.
            self._failed(policy, target, '%s; not fenced' % why)
            return False
        self._force_delete(policy, target, recovery, old, nova, why)
        return False

    def _force_delete(self, policy, target, recovery, old, nova, why):
        """node_force_recreate: delete the server that was not stopped."""
        recovery.update(force_deleted=True,
                        fence_started_at=self._clock().isoformat())
        if not self._store_stage(target, recovery, 'fencing: %s: deleting '
                                 'it' % why):
            return
        try:
            nova.force_delete(old)
        except nova_actions.ServerGone:
            pass
        except nova_actions.ActionRefused as e:
            self._failed(policy, target, 'server %s could not be '
                         'deleted: %s' % (old, e))
        except nova_actions.NovaActionFailed as e:
            self._saw_nova_error(policy, e)

    def _to_update(self, target, recovery, reason):
        """Marked: waits for the stack update it shares with the others."""
        recovery.update(stage=MARKED, marked_at=self._clock().isoformat())
        if self._store_stage(target, recovery, reason):
            self._wake_after_step(target)

    def _replace_marked(self, policy, step):
        """One stack update for the targets marked in each stack.

        Targets are grouped by the stack whose update replaces them
        (heat_replace.stack_to_update); a group whose stack is still
        updating waits for the next pass. A target whose mark was cleared
        since fails rather than ask for an update that replaces nothing.
        Each target stores ``updating``
        (fenced) before heat-engine is asked; one whose write failed
        waits for the next update.
        """
        held = self._not_now(policy)
        if held:
            LOG.info('Replacement of %(n)d servers of stack %(s)s waits: '
                     '%(r)s', {'n': len(step.targets), 's': policy.stack_id,
                               'r': held})
            return
        groups = collections.OrderedDict()   # stack to update -> targets
        for target in step.targets:
            recovery = target.recovery or {}
            old = recovery.get('old_server_id') or target.server_id
            if not fenced(recovery) and not self._justified(
                    policy, target, self._actions(policy.stack_id),
                    'the stack update'):
                continue
            try:
                if self.replacer.replaced(target.stack_id,
                                          target.resource_name, old,
                                          **_member_args(recovery)):
                    # Another update (a user's) replaced it meanwhile:
                    # the registry's next sync verifies the new server.
                    continue
                resource = self.replacer.resource(*marked_place(target))
                stack_id = self.replacer.stack_to_update(
                    policy.stack_id, *marked_place(target))
            except Exception as e:
                self._failed(policy, target, 'heat-engine did not update '
                             'the stack: %s' % e)
                continue
            if (resource.action, resource.status) != ('CHECK', 'FAILED'):
                # Its mark was cleared since (a user's mark healthy, whose
                # reset of our row follows): an update would replace
                # nothing of it.
                self._failed(policy, target, 'the %s is %s_%s, no longer '
                             'marked: not replaced' % (
                                 'member' if recovery.get('member')
                                 else 'resource', resource.action,
                                 resource.status))
                continue
            if recovery.get('updates', 0) >= MAX_UPDATES:
                self._failed(policy, target, 'the update was superseded '
                             '%d times' % MAX_UPDATES)
                continue
            groups.setdefault(stack_id, []).append(target)
        for stack_id, targets in groups.items():
            # Steps of one policy run side by side (members of one group
            # each marked in a stack of its own share the group's update):
            # one asks for it, the others find it running.
            with self._stack_lock(stack_id):
                if self.replacer.stack_status(stack_id)[1] == 'IN_PROGRESS':
                    LOG.info('Replacement of %(n)d servers waits for the '
                             'update of stack %(s)s to end',
                             {'n': len(targets), 's': stack_id})
                    continue
                self._replace_together(policy, stack_id, targets)

    @staticmethod
    def _stack_lock(stack_id):
        """The lock on asking for an update of the stack, in this process."""
        return _UPDATE_LOCKS[zlib.crc32(stack_id.encode()) %
                             len(_UPDATE_LOCKS)]

    def _replace_together(self, policy, stack_id, targets):
        """Store ``updating`` for each target, then one update of stack_id."""
        now = self._clock().isoformat()
        olds = sorted((t.recovery or {}).get('old_server_id') or t.server_id
                      for t in targets)
        others = len(targets) - 1
        batch = []
        for target in targets:
            recovery = dict(target.recovery or {})
            old = recovery.get('old_server_id') or target.server_id
            recovery.update(stage=UPDATING, update_at=now,
                            updates=recovery.get('updates', 0) + 1)
            reason = ('stack update (existing) requested to replace server '
                      '%s%s%s' % (old, ' with its member %s' % (
                          recovery['member'][heat_replace.MEMBER_NAME])
                          if recovery.get('member') else '',
                          ' with %d other%s (%s)' % (
                              others, 's' if others > 1 else '',
                              ', '.join(olds)) if others else ''))
            if self._store_stage(target, recovery, reason):
                batch.append((target, recovery))
        if not batch:
            return
        try:
            found, traversal = self._update(policy, batch[0][0])
        except Exception as e:
            found, traversal = e, None
        for target, recovery in batch:
            if isinstance(found, Exception):
                self._failed(policy, target, 'heat-engine did not update '
                             'the stack: %s' % found)
            elif found is not None:
                recovery.update(updated_stack=found,
                                update_traversal=traversal)
                self.tracker.store_columns(target, {'recovery': recovery})

    def _update(self, policy, target):
        """(the stack heat-engine updates, that update's traversal).

        (None, None) if heat-engine did not answer; a traversal of None
        if it could not be read: that update is then not known as ours.
        """
        try:
            updated = self.replacer.update_target(
                policy.stack_id, *marked_place(target))
        except oslo_messaging.MessagingTimeout as e:
            # It may still run: the next pass sees what became of it.
            LOG.warning('heat-engine did not answer the update replacing '
                        '%(p)s in time: %(e)s', {'p': target.path, 'e': e})
            updated = None
        traversal = None
        if updated is not None:
            try:
                traversal = self.replacer.traversal(updated)
            except Exception as e:
                LOG.warning('Could not read which update of stack %(s)s '
                            'runs: %(e)s', {'s': updated, 'e': e})
            self._ours[updated] = traversal
        if self.on_update is not None:
            self.on_update()
        return updated, traversal

    def _recreate_update(self, policy, target, recovery):
        old = recovery.get('old_server_id') or target.server_id
        if self.replacer.replaced(target.stack_id, target.resource_name,
                                  old, **_member_args(recovery)):
            # Done: the registry's next sync verifies the new server.
            if recovery.get('member'):
                self._not_moved(policy, target, recovery)
            return
        place = marked_place(target, recovery)
        updated = recovery.get('updated_stack') or (
            self.replacer.stack_to_update(policy.stack_id, *place))
        action, status = self.replacer.stack_status(updated)
        if status == 'IN_PROGRESS':
            return
        if status == 'FAILED':
            return self._failed(policy, target, 'the stack update failed: '
                                '%s_%s' % (action, status))
        resource = self.replacer.resource(*place)
        if (resource.action, resource.status) != ('CHECK', 'FAILED'):
            return self._failed(policy, target, 'the %s is %s_%s and '
                                'was not replaced' % (
                                    'member' if recovery.get('member')
                                    else 'resource',
                                    resource.action, resource.status))
        if recovery.get('updates', 0) >= MAX_UPDATES:
            return self._failed(policy, target, 'the update was superseded '
                                '%d times' % MAX_UPDATES)
        self._to_update(target, recovery, 'the stack update ended without '
                        'replacing server %s: asked again' % old)

    def _not_moved(self, policy, target, recovery):
        """A member replaced whole whose target stays where it was.

        The registry's sync moves the target to the new member's server
        as soon as it sees it. Once the update is over and the old
        member's stack gone for UNMOVED_SECONDS, the new member holds no
        server at the target's path (its template changed meanwhile):
        the recovery fails rather than wait for ever.
        """
        try:
            self.replacer.stack_status(target.stack_id)
            gone = False
        except heat_exc.EntityNotFound:
            gone = True
        unmoved = self.__dict__.setdefault('_unmoved', {})
        if not gone:
            unmoved.pop(target.id, None)
            return
        now = self._clock()
        since = unmoved.setdefault(target.id, now)
        if now - since >= datetime.timedelta(seconds=UNMOVED_SECONDS):
            unmoved.pop(target.id, None)
            self._failed(policy, target, 'member %s was replaced but holds '
                         'no server at %s' % (
                             recovery['member'][heat_replace.MEMBER_NAME],
                             target.path))
