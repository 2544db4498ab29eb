"""A policy's blind modes: detection modes that cannot see some targets.

Written by the owning engine when it changes: which mode, for which
targets, and why (a poll URL the engine's rules refuse), so that any
engine's health report shows it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('blind', sa.Text))
