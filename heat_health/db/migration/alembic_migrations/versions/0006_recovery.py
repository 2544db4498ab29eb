"""Recovery: what a target's recovery is doing, its attempts, the brake.

A target carries the recovery under way (``recovery``: action, ladder
step, old server, stage, deadlines), stored before the action is issued so
that a restarted engine finishes it and never repeats it; the attempts
counted in the current window and when the next may start (back-off). A
policy carries why it stopped acting (``braked``) and since when.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from alembic import op
from oslo_db.sqlalchemy import types as db_types
import sqlalchemy as sa

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_target') as batch:
        batch.add_column(sa.Column('recovery', db_types.JsonEncodedDict))
        batch.add_column(sa.Column('attempts', sa.Integer, nullable=False,
                                   server_default='0'))
        batch.add_column(sa.Column('first_attempt_at', sa.DateTime))
        batch.add_column(sa.Column('next_attempt_at', sa.DateTime))
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('braked', sa.String(255)))
        batch.add_column(sa.Column('braked_since', sa.DateTime))
