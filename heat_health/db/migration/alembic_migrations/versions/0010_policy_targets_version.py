"""A version of each policy's set of watched servers.

It grows whenever the policy's targets are added, removed or given a new
server, so that every engine keeps its deployment-wide index of who
watches which server by reading one row per policy each tick, and the
servers only of the policies whose version changed.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from alembic import op
import sqlalchemy as sa

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('targets_version', sa.Integer,
                                   nullable=False, server_default='0'))
