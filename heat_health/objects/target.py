"""Target: one watched server of a policy, where it is and how it is."""

from heat.objects import fields as heat_fields
from oslo_versionedobjects import base
from oslo_versionedobjects import fields

from heat_health.db import api as db_api


@base.VersionedObjectRegistry.register
class Target(base.VersionedObject, base.VersionedObjectDictCompat):
    OBJ_PROJECT_NAMESPACE = 'heat_health'
    # Version 1.0: Initial version
    # Version 1.1: server_name
    # Version 1.2: recovery, attempts, first_attempt_at, next_attempt_at
    VERSION = '1.2'

    fields = {
        'id': fields.IntegerField(),
        'policy_id': fields.StringField(),
        'server_id': fields.StringField(),
        'stack_id': fields.StringField(),
        'resource_name': fields.StringField(),
        'path': fields.StringField(),
        'addresses': fields.ListOfStringsField(nullable=True),
        'server_name': fields.StringField(nullable=True),
        'state': fields.StringField(),
        'state_reason': fields.StringField(nullable=True),
        'state_since': fields.DateTimeField(),
        'observation': fields.StringField(nullable=True),
        'observation_reason': fields.StringField(nullable=True),
        'observation_source': fields.StringField(nullable=True),
        'observed_at': fields.DateTimeField(nullable=True),
        'grace_until': fields.DateTimeField(nullable=True),
        'recovery': heat_fields.JsonField(nullable=True),
        'attempts': fields.IntegerField(),
        'first_attempt_at': fields.DateTimeField(nullable=True),
        'next_attempt_at': fields.DateTimeField(nullable=True),
    }

    @classmethod
    def _from_db_object(cls, db_target):
        target = cls()
        for field in cls.fields:
            target[field] = getattr(db_target, field)
        target.obj_reset_changes()
        return target

    @classmethod
    def get_all_by_policies(cls, policy_ids):
        """{policy_id: [Target]}, one query for all the policies."""
        return {policy_id: [cls._from_db_object(row) for row in rows]
                for policy_id, rows in db_api.target_get_all(
                    policy_ids).items()}

    @classmethod
    def get_all(cls, policy_id):
        return cls.get_all_by_policies([policy_id])[policy_id]

    @classmethod
    def record_details(cls, details):
        """Store what Nova listed: {target id: (server_name, addresses)}."""
        return db_api.target_details_update(details)

    @classmethod
    def sync(cls, policy_id, places, grace_seconds, graced=(), keep=()):
        """Rows follow the places in Heat: (added, removed, replaced)."""
        return db_api.target_sync(policy_id, places, grace_seconds, graced,
                                  keep)
