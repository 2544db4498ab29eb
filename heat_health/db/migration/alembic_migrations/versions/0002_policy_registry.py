"""Health policy registry: policies, their targets, state events.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op
from oslo_db.sqlalchemy import types as db_types
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'heat_health_policy',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('stack_id', sa.String(36), nullable=False),
        sa.Column('resource_name', sa.String(255), nullable=False),
        sa.Column('project_id', sa.String(64), nullable=False),
        sa.Column('user_id', sa.String(64)),
        sa.Column('spec', db_types.JsonEncodedDict, nullable=False),
        sa.Column('enabled', sa.Boolean, nullable=False),
        sa.Column('engine_id', sa.String(36)),
        sa.Column('lease_expires_at', sa.DateTime),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.Column('updated_at', sa.DateTime),
        **TABLE_ARGS)
    op.create_index('ix_heat_health_policy_stack', 'heat_health_policy',
                    ['stack_id'])
    op.create_index('ix_heat_health_policy_lease', 'heat_health_policy',
                    ['lease_expires_at'])

    op.create_table(
        'heat_health_target',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('policy_id', sa.String(36),
                  sa.ForeignKey('heat_health_policy.id', ondelete='CASCADE'),
                  nullable=False),
        sa.Column('server_id', sa.String(36), nullable=False),
        sa.Column('stack_id', sa.String(36), nullable=False),
        sa.Column('resource_name', sa.String(255), nullable=False),
        sa.Column('path', sa.String(1024), nullable=False),
        sa.Column('addresses', db_types.JsonEncodedList),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('state_reason', sa.String(255)),
        sa.Column('state_since', sa.DateTime, nullable=False),
        sa.Column('observation', sa.String(16)),
        sa.Column('observation_reason', sa.String(255)),
        sa.Column('observation_source', sa.String(32)),
        sa.Column('observed_at', sa.DateTime),
        sa.Column('grace_until', sa.DateTime),
        sa.UniqueConstraint('policy_id', 'server_id',
                            name='uniq_heat_health_target0policy0server'),
        **TABLE_ARGS)
    op.create_index('ix_heat_health_target_server', 'heat_health_target',
                    ['server_id'])

    op.create_table(
        'heat_health_event',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('policy_id', sa.String(36), nullable=False),
        sa.Column('server_id', sa.String(36)),
        sa.Column('old_state', sa.String(16)),
        sa.Column('new_state', sa.String(16), nullable=False),
        sa.Column('reason', sa.String(255)),
        sa.Column('source', sa.String(32)),
        sa.Column('created_at', sa.DateTime, nullable=False),
        **TABLE_ARGS)
    op.create_index('ix_heat_health_event_policy', 'heat_health_event',
                    ['policy_id', 'id'])
