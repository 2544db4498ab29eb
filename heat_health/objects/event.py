"""Event: one change of a target's health state, as the report shows it."""

from oslo_versionedobjects import base
from oslo_versionedobjects import fields

from heat_health.db import api as db_api


@base.VersionedObjectRegistry.register
class Event(base.VersionedObject, base.VersionedObjectDictCompat):
    OBJ_PROJECT_NAMESPACE = 'heat_health'
    # Version 1.0: Initial version
    # Version 1.1: path
    VERSION = '1.1'

    fields = {
        'id': fields.IntegerField(),
        'policy_id': fields.StringField(),
        'server_id': fields.StringField(nullable=True),
        'path': fields.StringField(nullable=True),
        'old_state': fields.StringField(nullable=True),
        'new_state': fields.StringField(),
        'reason': fields.StringField(nullable=True),
        'source': fields.StringField(nullable=True),
        'created_at': fields.DateTimeField(),
    }

    @classmethod
    def _from_db_object(cls, db_event):
        event = cls()
        for field in cls.fields:
            event[field] = getattr(db_event, field)
        event.obj_reset_changes()
        return event

    @classmethod
    def get_recent(cls, policy_ids, limit=50):
        """The newest events of these policies, newest first."""
        return [cls._from_db_object(row)
                for row in db_api.event_get_recent(policy_ids, limit)]

    @classmethod
    def get_after(cls, policy_ids, marker=None, since=None, limit=None):
        """Events oldest first, after an event id and from a time."""
        return [cls._from_db_object(row) for row in db_api.event_get_after(
            policy_ids, marker, since, limit)]
