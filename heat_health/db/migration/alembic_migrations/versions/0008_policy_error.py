"""A policy's error: why its owner could not watch it fully.

Set by the owning engine when the policy's targets could not be resolved
or stored (bad data from a template, a database error) and cleared when
they are again; kept in the policy's row so that any engine's health
report shows it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from alembic import op
import sqlalchemy as sa

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('error', sa.String(1024)))
        batch.add_column(sa.Column('error_since', sa.DateTime))
