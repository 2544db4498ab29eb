"""Targets keep the name Nova lists for their server.

A poll URL's {name} is the server's name in Nova, which an engine learns
from its status polls; kept with the addresses so a restarted engine can
check URLs before its first poll.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('heat_health_target',
                  sa.Column('server_name', sa.String(255)))
