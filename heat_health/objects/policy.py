"""Policy: a registered OS::Heat::HealthPolicy and who watches it."""

from heat.objects import fields as heat_fields
from oslo_versionedobjects import base
from oslo_versionedobjects import fields

from heat_health.db import api as db_api
from heat_health.policy import spec as policy_spec


@base.VersionedObjectRegistry.register
class Policy(base.VersionedObject, base.VersionedObjectDictCompat):
    OBJ_PROJECT_NAMESPACE = 'heat_health'
    # Version 1.0: Initial version
    # Version 1.1: generation, handoff_to, suspended
    # Version 1.2: braked, braked_since
    # Version 1.3: paused_at, paused_by, paused_reason
    # Version 1.4: error, error_since
    # Version 1.5: targets_version
    # Version 1.6: observed_through
    # Version 1.7: blind
    VERSION = '1.7'

    fields = {
        'id': fields.StringField(),
        'stack_id': fields.StringField(),
        'resource_name': fields.StringField(),
        'project_id': fields.StringField(),
        'user_id': fields.StringField(nullable=True),
        # The resource's properties as validated by heat-engine.
        'spec': heat_fields.JsonField(),
        'enabled': fields.BooleanField(),
        'engine_id': fields.StringField(nullable=True),
        'lease_expires_at': fields.DateTimeField(nullable=True),
        # Grows at every change of owner: the fencing token of its writes.
        'generation': fields.IntegerField(),
        'handoff_to': fields.StringField(nullable=True),
        'suspended': fields.BooleanField(),
        # Why the policy stopped acting, if it did.
        'braked': fields.StringField(nullable=True),
        'braked_since': fields.DateTimeField(nullable=True),
        # An operator paused its healing: when, who, why.
        'paused_at': fields.DateTimeField(nullable=True),
        'paused_by': fields.StringField(nullable=True),
        'paused_reason': fields.StringField(nullable=True),
        # Why its owner cannot watch it fully, since when.
        'error': fields.StringField(nullable=True),
        'error_since': fields.DateTimeField(nullable=True),
        'targets_version': fields.IntegerField(),
        'observed_through': fields.DateTimeField(nullable=True),
        # Detection modes that cannot see some of its targets, and why.
        'blind': heat_fields.JsonField(nullable=True),
        'created_at': fields.DateTimeField(),
        'updated_at': fields.DateTimeField(nullable=True),
    }

    @classmethod
    def _from_db_object(cls, db_policy):
        policy = cls()
        for field in cls.fields:
            policy[field] = getattr(db_policy, field)
        policy.obj_reset_changes()
        return policy

    @classmethod
    def _list(cls, rows):
        return [cls._from_db_object(row) for row in rows]

    @classmethod
    def create_or_update(cls, values, grace_seconds=0):
        return cls._from_db_object(db_api.policy_create_or_update(
            values, grace_seconds))

    @classmethod
    def get(cls, policy_id):
        row = db_api.policy_get(policy_id)
        return row and cls._from_db_object(row)

    @classmethod
    def get_all_by_stack(cls, stack_id):
        return cls._list(db_api.policy_get_all_by_stack(stack_id))

    @classmethod
    def claim(cls, engine_id, lease_seconds, policy_id=None,
              ring_owner=None, members=None, known=None, take_limit=None,
              digest=None, observed=None):
        """The policies owned after claiming; see ``policy_claim``.

        With ``known``: (the policies whose rows were read, {policy id:
        key} of every policy owned, the digest of the rows held).
        """
        found = db_api.policy_claim(
            engine_id, lease_seconds, policy_id=policy_id,
            ring_owner=ring_owner, members=members, known=known,
            take_limit=take_limit, digest=digest, observed=observed)
        if known is None:
            return cls._list(found)
        rows, keys, digest = found
        return cls._list(rows), keys, digest

    @classmethod
    def renew(cls, engine_id, lease_seconds):
        """Renew the engine's live leases; see ``policy_renew``."""
        return db_api.policy_renew(engine_id, lease_seconds)

    @classmethod
    def set_suspended(cls, policy_id, suspended):
        """Store the stack's suspension; a resume starts the grace again."""
        policy = cls.get(policy_id)
        if policy is None:
            return False
        return db_api.policy_set_suspended(policy_id, suspended,
                                           policy.parsed.grace)

    @classmethod
    def set_error(cls, engine_id, policy_id, generation, error):
        """Store (or clear, with None) why the policy is not watched fully."""
        return db_api.policy_set_error(engine_id, policy_id, generation,
                                       error)

    @classmethod
    def set_paused(cls, policy_ids, pause, user, reason=None):
        """Pause or resume healing; the ids whose pause changed."""
        return db_api.policy_set_paused(policy_ids, pause, user, reason)

    @property
    def paused(self):
        """Who paused its healing, when and why; None while it heals."""
        if self.paused_at is None:
            return None
        return {'by': self.paused_by, 'at': self.paused_at,
                'reason': self.paused_reason}

    @classmethod
    def other_owners(cls, engine_id):
        return db_api.policy_other_owners(engine_id)

    @classmethod
    def release(cls, engine_id):
        return db_api.policy_release(engine_id)

    @classmethod
    def delete(cls, policy_id, only_deleted=False):
        return db_api.policy_delete(policy_id, only_deleted)

    @classmethod
    def keep_deleted(cls, policy_id, gone):
        """Keep it deleted for what its rows owe; see policy_keep_deleted."""
        return db_api.policy_keep_deleted(policy_id, gone)

    @property
    def deleted(self):
        """Deleted, kept only until what its recovery left is undone."""
        return db_api.policy_is_deleted(self)

    @property
    def parsed(self):
        """The spec as a PolicySpec (typed, defaults filled in).

        Parsed once per spec set: the monitor asks each held policy's at
        every pass.
        """
        spec, enabled = self.spec, self.enabled
        kept = getattr(self, '_parsed_of', None)
        if kept is None or kept[0] is not spec or kept[1] != enabled:
            kept = (spec, enabled, policy_spec.PolicySpec.of(self))
            # Not a field: never stored, nor sent over RPC.
            object.__setattr__(self, '_parsed_of', kept)
        return kept[2]
