"""What a timeline row keeps beside its reason: a failed server's evidence.

Its console's tail, Nova's fault, its instance actions and its last poll
URL answer, read before a replacement destroys them.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from alembic import op
import sqlalchemy as sa

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_event') as batch:
        batch.add_column(sa.Column('detail', sa.Text))
