"""The place of each timeline row's server, as it was then.

A recovery's steps name the old server; once it is replaced the target's
row names the new one, so the place of the old server's rows could no
longer be found from the targets.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08
"""

from alembic import op
import sqlalchemy as sa

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_event') as batch:
        batch.add_column(sa.Column('path', sa.String(1024)))
