"""Pause: an operator stops a policy's healing without a stack update.

A policy carries who paused it, when and why; NULL ``paused_at`` means it
heals. Kept in the policy's row so a restart or a takeover keeps the
pause.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('paused_at', sa.DateTime))
        batch.add_column(sa.Column('paused_by', sa.String(255)))
        batch.add_column(sa.Column('paused_reason', sa.String(255)))
