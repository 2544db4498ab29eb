"""A marking keeps a reason of any length, as Heat does.

Heat accepts a resource_status_reason of any length and keeps it in the
resource's TEXT column; the record of a marking keeps it the same way.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_marking') as batch:
        batch.alter_column('reason', type_=sa.Text,
                           existing_type=sa.String(255),
                           existing_nullable=False)
