"""Record of mark-unhealthy requests.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'heat_health_marking',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('stack_id', sa.String(36), nullable=False),
        sa.Column('owner_stack_id', sa.String(36), nullable=False),
        sa.Column('resource_name', sa.String(255), nullable=False),
        sa.Column('physical_resource_id', sa.String(255)),
        sa.Column('mark_unhealthy', sa.Boolean, nullable=False),
        sa.Column('reason', sa.String(255), nullable=False),
        sa.Column('user_id', sa.String(64)),
        sa.Column('project_id', sa.String(64)),
        sa.Column('source', sa.String(32), nullable=False),
        sa.Column('created_at', sa.DateTime, nullable=False),
        mysql_engine='InnoDB',
        mysql_charset='utf8mb4',
    )
    op.create_index('ix_heat_health_marking_stack',
                    'heat_health_marking', ['stack_id'])
    op.create_index('ix_heat_health_marking_physical',
                    'heat_health_marking', ['physical_resource_id'])
