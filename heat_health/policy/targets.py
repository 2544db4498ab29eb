"""Which servers a health policy watches, read from Heat's database.

A policy names resources of its own stack: servers, or groups whose member
servers live in nested stacks at any depth (ResourceGroup, AutoScalingGroup,
InstanceGroup, provider templates inside them). Heat stores every resource
with the id of its root stack, so the whole tree under a root is one query,
whatever its depth; the stacks and their templates (where resource types
are recorded) are two more, for any number of policies at once. Parsed
templates are cached by id and the stack's update time, so a tick that finds
nothing changed costs three small queries and no parsing.

A template is its tenant's to write, and the engine acts on what it finds
with the stack owner's trust, so a target is only what Heat itself created
as a server: each resource's type is looked up the way Heat looks it up, in
the environment stored with that (nested) stack's template (aliases, globs
and per-resource entries of ``resource_registry``), and a resource that
names an existing physical resource with ``external_id`` (any id, of any
project) is never a target.
"""

import collections
import functools
import random
import time

from heat.common import exception as heat_exception
from heat.db import api as heat_db
from heat.db import models as heat_models
from heat.engine import environment
from oslo_log import log as logging
import sqlalchemy as sa

LOG = logging.getLogger(__name__)

SERVER_TYPES = frozenset(['OS::Nova::Server', 'AWS::EC2::Instance'])
GROUP_TYPES = frozenset(['OS::Heat::ResourceGroup',
                         'OS::Heat::AutoScalingGroup',
                         'OS::Heat::InstanceGroup',
                         'AWS::AutoScaling::AutoScalingGroup'])
IN_PROGRESS = 'IN_PROGRESS'
# A stack whose last action is one of these has its servers stopped on
# purpose (a failed resume leaves it RESUME_FAILED: watched again).
SUSPENDED_ACTIONS = frozenset(['SUSPEND'])

Resolution = collections.namedtuple('Resolution', [
    'places',       # {(stack_id, resource_name): {server_id, path,
                    #   addresses}}: where the watched servers are
    'busy',         # places whose resource a stack action is working on
    'suspended',    # the policy's stack is suspended (or suspending)
    'missing',      # target names not (or no longer) in the stack
    'fingerprint',  # changes whenever a stack of the tree changes
    'unwatched',    # ((path, why), ...): named or nested resources that
                    #   hold a server id but are not watched
    'updating',     # a stack of the tree has an action in progress
], defaults=((), False))

EXTERNAL = 'external_id'
# Why a resource holding a server id is not a target.
EXTERNAL_REASON = ('created from external_id: only servers its stack '
                   'created are watched')

# What _resource_types records of a resource created from external_id.
_EXTERNAL = object()

_StackRow = collections.namedtuple('_StackRow', [
    'id', 'owner_id', 'action', 'status', 'raw_template_id', 'updated_at',
    'created_at'])


def _effective_type(env, rtype, name):
    """The plugin type Heat instantiates for this resource, or None.

    None for a provider template (its nested stack is walked instead) and
    for a type Heat does not know.
    """
    try:
        info = env.get_resource_info(rtype, resource_name=name)
    except heat_exception.EntityNotFound:
        return None
    if isinstance(info, environment.ClassResourceInfo):
        return info.name
    return None


def _resource_types(template, env_dict):
    """{resource name: effective type, or _EXTERNAL} of a stored template.

    Types are resolved by Heat's own registry lookup on the environment
    stored with the template, as Heat resolved them when it created the
    resources.
    """
    resources = (template or {}).get('resources')
    if resources is None:
        resources = (template or {}).get('Resources') or {}
    env = environment.Environment(env_dict or {})
    types = {}
    for name, definition in resources.items():
        if not isinstance(definition, dict):
            continue
        if definition.get(EXTERNAL) is not None:
            types[name] = _EXTERNAL
            continue
        rtype = definition.get('type') or definition.get('Type')
        if isinstance(rtype, str):
            types[name] = _effective_type(env, rtype, name)
    return types


def _parse(template_id, template, env_dict):
    """_resource_types, or nothing watched where the template is unreadable.

    One stack's stored template never stops the resolution of others.
    """
    try:
        return _resource_types(template, env_dict)
    except Exception:
        LOG.exception('Could not read the resource types of template %s: '
                      'none of its resources is watched', template_id)
        return {}


# Seconds a tree's resources read are taken as read while none of its
# stacks changed: a safety net, not the way changes are found. Each tree's
# is shortened by up to a half at random, so that the trees a takeover
# read together are not all read again in the same tick. Then one row
# that sums up its resources is read, and the resources themselves only
# when it differs from the one read with them.
TREE_SECONDS = 600.0


@functools.lru_cache(maxsize=None)
def _resource_digests_statement():
    R = heat_models.Resource
    server = R.physical_resource_id
    return sa.select(
        R.root_stack_id, sa.func.count(), sa.func.sum(R.id),
        sa.func.max(R.updated_at), sa.func.sum(R.atomic_key),
        sa.func.count(sa.case((R.status == IN_PROGRESS, 1))),
        sa.func.count(sa.case((R.action == 'DELETE', 1))),
        sa.func.count(R.replaced_by), sa.func.sum(sa.func.length(server)),
        sa.func.min(server), sa.func.max(server)).where(
            R.root_stack_id.in_(sa.bindparam('ids', expanding=True))
    ).group_by(R.root_stack_id)


def _resource_digests(session, root_ids):
    """{root id: what sums up its resource rows}.

    Portable sums of what a resolution reads of them: their number and
    ids, latest update, updates under Heat's resource locks, those in
    progress, being deleted or replaced, and their physical ids. Heat
    changes these within an action of their stack, which its row shows
    first: this only catches what that misses.
    """
    if not root_ids:
        return {}
    return {row[0]: tuple(row[1:]) for row in session.execute(
        _resource_digests_statement(), {'ids': sorted(root_ids)})}


class Resolver(object):
    """Resolves policies' targets; keeps parsed templates between calls.

    It also keeps each tree's resource rows while the rows of its stacks
    stay the same: Heat changes a resource only within an action of its
    stack, which changes the stack's row (its status, its update time), so
    a tree none of whose stacks changed, and none of whose stacks has an
    action in progress, has the resources last read. A resolution of many
    stacks then costs one query of their stack rows, not one of their
    every resource. The Resolution made of such a tree is kept too (per
    policy, with the names it asked for), so that a quiet tree costs
    neither a walk nor a pass over its resource rows.
    """

    def __init__(self, clock=time.monotonic):
        self._types = {}  # (raw_template_id, updated_at) -> {name: type}
        self._roots = {}  # stack id -> root stack id
        # root id -> (its stacks' rows {id: _StackRow}, its resource rows,
        # the digest of those rows read just before them)
        self._trees = {}
        # root id -> clock time its rows were last read or checked, less
        # its share of TREE_SECONDS taken off
        self._checked = {}
        self._rnd = random.Random()
        # policy id -> (tree it was made of, stack id, names, Resolution)
        self._made = {}
        self._clock = clock

    def _root_ids(self, ctxt, stack_ids):
        for stack_id in set(stack_ids) - set(self._roots):
            self._roots[stack_id] = (heat_db.stack_get_root_id(
                ctxt, stack_id) or stack_id)
        return {stack_id: self._roots[stack_id] for stack_id in stack_ids}

    @staticmethod
    def _stack_rows(session, stack_ids):
        return {row[0]: _StackRow(*row) for row in session.execute(
            _stack_rows_statement(), {'ids': sorted(stack_ids)})}

    def _unchanged(self, root_id, stacks):
        """The resource rows kept of a tree none of whose stacks changed."""
        tree = self._trees.get(root_id)
        if tree is None:
            return None
        known, resources, _digest = tree
        if any(stacks.get(sid) != row or row.status == IN_PROGRESS
               for sid, row in known.items()):
            return None
        return resources

    def _still_same(self, session, root_ids, now):
        """Of these trees kept, those whose resources are still as read.

        Checked once their TREE_SECONDS ran, by one row per tree: a tree
        whose rows sum up as when they were read keeps them (and the
        Resolutions made of them) for another while.
        """
        aged = [r for r in root_ids
                if now - self._checked.get(r, now) >= TREE_SECONDS]
        digests = _resource_digests(session, aged)
        same = set(root_ids) - set(aged)
        for root_id in aged:
            if digests.get(root_id) == self._trees[root_id][2]:
                same.add(root_id)
                self._checked[root_id] = now - self._rnd.uniform(
                    0, TREE_SECONDS / 2)
        return same

    def _load(self, ctxt, root_ids, skip=()):
        """Live resources and stacks of the trees under root_ids.

        Also returns the roots of ``skip`` whose trees did not change:
        their rows are left out (their Resolutions are kept).
        """
        R, T = heat_models.Resource, heat_models.RawTemplate
        now = self._clock()
        with heat_db.context_manager.reader.using(ctxt):
            session = ctxt.session
            known = set(root_ids)
            for root_id in root_ids:
                known.update(self._trees.get(root_id, ({},))[0])
            stacks = self._stack_rows(session, known)
            resources = []
            kept = {root_id: self._unchanged(root_id, stacks)
                    for root_id in root_ids}
            same = self._still_same(
                session, [r for r, rows in kept.items() if rows is not None],
                now)
            stale = sorted(r for r in root_ids if r not in same)
            quiet = same & set(skip)
            for root_id in same - quiet:
                resources.extend(kept[root_id])
            if stale:
                digests = _resource_digests(session, stale)
                fresh = session.query(
                    R.id, R.name, R.stack_id, R.physical_resource_id,
                    R.action, R.status, R.replaced_by,
                    R.root_stack_id).filter(
                        R.root_stack_id.in_(sorted(stale))).all()
                resources.extend(fresh)
                new_ids = {r.stack_id for r in fresh} - set(stacks)
                if new_ids:
                    stacks.update(self._stack_rows(session, new_ids))
                by_root = {root_id: [] for root_id in stale}
                for row in fresh:
                    by_root[row.root_stack_id].append(row)
                for root_id, rows in by_root.items():
                    tree = {sid: stacks[sid] for sid in
                            {r.stack_id for r in rows} | {root_id}
                            if sid in stacks}
                    self._trees[root_id] = (tree, rows,
                                            digests.get(root_id))
                    self._checked[root_id] = now - self._rnd.uniform(
                        0, TREE_SECONDS / 2)
            for gone in set(self._trees) - set(self._roots.values()):
                del self._trees[gone]
                self._checked.pop(gone, None)
            self._made = {pid: made for pid, made in self._made.items()
                          if self._trees.get(self._roots.get(made[1]))
                          is made[0]}
            current = {(s.raw_template_id, s.updated_at)
                       for s in stacks.values()}
            wanted = current - set(self._types)
            if wanted:
                ids = sorted({tmpl_id for tmpl_id, _ in wanted})
                parsed = {row.id: _parse(row.id, row.template,
                                         row.environment)
                          for row in session.query(
                              T.id, T.template, T.environment).filter(
                                  T.id.in_(ids))}
                for key in wanted:
                    self._types[key] = parsed.get(key[0], {})
            if len(self._types) > 2 * len(current) + 64:
                # Forget the templates of stacks updated or deleted since.
                self._types = {key: self._types[key] for key in current}
        by_stack = collections.defaultdict(dict)
        busy = set()
        # (stack id, name) -> the row a replacement followed here replaces
        replaced = {}
        for row in resources:
            if row.stack_id not in stacks or row.action == 'DELETE':
                continue
            if row.status == IN_PROGRESS:
                busy.add((row.stack_id, row.name))
            key = (row.stack_id, row.name)
            current = by_stack[row.stack_id].get(row.name)
            # A replaced resource and its replacement share a name while an
            # update runs: the replacement is the one to follow, once it
            # has a server (until then the place keeps the old one).
            if current is None or (row.physical_resource_id and (
                    current.replaced_by == row.id or
                    not current.physical_resource_id or
                    (row.replaced_by is None and
                     current.replaced_by is not None))):
                by_stack[row.stack_id][row.name] = row
                if current is not None and current.replaced_by == row.id:
                    replaced[key] = current
            elif row.replaced_by == current.id:
                replaced[key] = row
        return by_stack, stacks, busy, quiet, replaced

    def _types_of(self, stack):
        return self._types.get((stack.raw_template_id, stack.updated_at), {})

    def _walk(self, by_stack, stacks, stack_id, names, prefix, found,
              visited, unwatched, replaced):
        """The places of the servers under the named resources of a stack.

        :param replaced: {(stack id, name): the row the resource followed
            there replaces}, while an update replaces it.
        """
        stack = stacks.get(stack_id)
        if stack is None:
            return
        visited.add(stack_id)
        types = self._types_of(stack)
        for name in names:
            row = by_stack[stack_id].get(name)
            if row is None or not row.physical_resource_id:
                continue
            path = prefix + name
            if types.get(name) is _EXTERNAL:
                # Its id is whatever the template said: never acted on.
                unwatched.append((path, EXTERNAL_REASON))
                continue
            nested = stacks.get(row.physical_resource_id)
            before = len(found)
            if nested is not None and nested.owner_id == stack_id:
                self._walk(by_stack, stacks, nested.id,
                           sorted(by_stack[nested.id]), path + '/', found,
                           visited, unwatched, replaced)
            elif types.get(name) in SERVER_TYPES:
                found[(stack_id, name)] = {
                    'server_id': row.physical_resource_id,
                    'path': path, 'addresses': []}
                continue
            old = replaced.get((stack_id, name))
            nested = old and stacks.get(old.physical_resource_id)
            if (len(found) == before and nested is not None and
                    nested.owner_id == stack_id):
                # A member replaced whole (a template or nested stack
                # resource): its servers stay where they were until the
                # new member's stack holds one.
                self._walk(by_stack, stacks, nested.id,
                           sorted(by_stack[nested.id]), path + '/', found,
                           visited, unwatched, replaced)

    def _kept(self, policy, roots):
        """The Resolution last made for the policy, if its tree is kept."""
        made = self._made.get(policy.id)
        if (made is None or made[1] != policy.stack_id or
                made[2] != tuple(policy.parsed.targets) or
                self._trees.get(roots[policy.stack_id]) is not made[0]):
            return None
        return made[3]

    def resolve(self, ctxt, policies):
        """{policy id: Resolution} for policies (with stack_id and spec)."""
        roots = self._root_ids(ctxt, {p.stack_id for p in policies})
        # Trees all of whose policies here have a Resolution kept.
        skip = set(roots.values()) - {
            roots[p.stack_id] for p in policies
            if self._kept(p, roots) is None}
        by_stack, stacks, busy, quiet, replaced = self._load(
            ctxt, set(roots.values()), skip)
        result = {}
        for policy in policies:
            root_id = roots[policy.stack_id]
            if root_id in quiet:
                result[policy.id] = self._kept(policy, roots)
                continue
            names = list(policy.parsed.targets)
            found, visited, unwatched = {}, set(), []
            self._walk(by_stack, stacks, policy.stack_id, names, '', found,
                       visited, unwatched, replaced)
            present = by_stack.get(policy.stack_id, {})
            stack = stacks.get(policy.stack_id)
            fingerprint = tuple(sorted(
                (s, str(stacks[s].updated_at or stacks[s].created_at),
                 stacks[s].status) for s in visited))
            result[policy.id] = Resolution(
                places=found, busy=frozenset(busy.intersection(found)),
                suspended=bool(stack and stack.action in SUSPENDED_ACTIONS),
                missing=[n for n in names if n not in present],
                fingerprint=fingerprint, unwatched=tuple(unwatched),
                updating=any(stacks[s].status == IN_PROGRESS
                             for s in visited))
            if root_id in self._trees:
                self._made[policy.id] = (self._trees[root_id],
                                         policy.stack_id, tuple(names),
                                         result[policy.id])
        return result


# Built once: asked at every tick, building it costs more than the
# resolution of a quiet tree.
@functools.lru_cache(maxsize=None)
def _stack_rows_statement():
    S = heat_models.Stack
    return sa.select(
        S.id, S.owner_id, S.action, S.status, S.raw_template_id,
        S.updated_at, S.created_at).where(
            S.id.in_(sa.bindparam('ids', expanding=True)),
            S.deleted_at.is_(None), sa_not_true(S.backup))


def sa_not_true(column):
    """column is false or NULL (Heat leaves ``backup`` NULL on most rows)."""
    return (column.is_(None)) | (column == False)  # noqa: E712
