"""When each policy's owner last saw every target as the report shows it.

Written with the owner's lease renewals, so that a target's latest
observation is stored only when it changes, and the report still tells
that the detectors are alive.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""

from alembic import op
import sqlalchemy as sa

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('observed_through', sa.DateTime))
