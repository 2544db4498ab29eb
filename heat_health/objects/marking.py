"""Marking: the versioned record of one mark-unhealthy request.

It is what heat-health-engine answers over RPC, so the API and the engine
can be upgraded one after the other.
"""

from oslo_versionedobjects import base
from oslo_versionedobjects import fields

from heat_health.db import api as db_api


@base.VersionedObjectRegistry.register
class Marking(base.VersionedObject, base.VersionedObjectDictCompat):
    OBJ_PROJECT_NAMESPACE = 'heat_health'
    # Version 1.0: Initial version
    VERSION = '1.0'

    fields = {
        'id': fields.IntegerField(),
        'stack_id': fields.StringField(),
        'owner_stack_id': fields.StringField(),
        'resource_name': fields.StringField(),
        'physical_resource_id': fields.StringField(nullable=True),
        'mark_unhealthy': fields.BooleanField(),
        'reason': fields.StringField(),
        'user_id': fields.StringField(nullable=True),
        'project_id': fields.StringField(nullable=True),
        'source': fields.StringField(),
        'created_at': fields.DateTimeField(),
    }

    @classmethod
    def _from_db_object(cls, db_marking):
        marking = cls()
        for field in cls.fields:
            marking[field] = getattr(db_marking, field)
        marking.obj_reset_changes()
        return marking

    @classmethod
    def create(cls, values):
        return cls._from_db_object(db_api.marking_create(values))

    @classmethod
    def get_all_by_stack(cls, stack_id, limit=None):
        return [cls._from_db_object(m)
                for m in db_api.marking_get_all_by_stack(stack_id, limit)]

    @classmethod
    def last_of(cls, physical_resource_id, owner_stack_id, resource_name):
        """The latest marking of a resource holding that physical id."""
        found = db_api.marking_last_of(physical_resource_id, owner_stack_id,
                                       resource_name)
        return found and cls._from_db_object(found)
