"""SQLAlchemy models of the heat-health tables.

They live in Heat's database next to Heat's own tables, prefixed
``heat_health_`` and versioned by an alembic history of their own.
"""

from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy import orm

BASE = orm.declarative_base()


class Marking(BASE):
    """One accepted mark-unhealthy (or reset) request: who, what, why."""

    __tablename__ = 'heat_health_marking'
    __table_args__ = (
        sa.Index('ix_heat_health_marking_stack', 'stack_id'),
        sa.Index('ix_heat_health_marking_physical',
                 'physical_resource_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    stack_id = sa.Column(sa.String(36), nullable=False)
    owner_stack_id = sa.Column(sa.String(36), nullable=False)
    resource_name = sa.Column(sa.String(255), nullable=False)
    physical_resource_id = sa.Column(sa.String(255))
    mark_unhealthy = sa.Column(sa.Boolean, nullable=False)
    reason = sa.Column(sa.String(255), nullable=False)
    user_id = sa.Column(sa.String(64))
    project_id = sa.Column(sa.String(64))
    source = sa.Column(sa.String(32), nullable=False)
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)
