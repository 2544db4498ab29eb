"""Targets are places in the stack; policies carry a fencing generation.

A target is identified by (policy, stack holding the resource, resource
name): when Heat replaces the server, the new server id is written to the
same row, so attempts and history stay with the place. A policy's
``generation`` grows at every change of owner and fences writes of an
engine that lost it; ``handoff_to`` names the engine a live owner hands a
policy to; ``suspended`` follows the stack's suspend and resume. INIT
targets are NO_DATA: watched, no verdict yet.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from alembic import op
import sqlalchemy as sa

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('heat_health_policy') as batch:
        batch.add_column(sa.Column('generation', sa.Integer, nullable=False,
                                   server_default='0'))
        batch.add_column(sa.Column('handoff_to', sa.String(36)))
        batch.add_column(sa.Column('suspended', sa.Boolean, nullable=False,
                                   server_default=sa.false()))
    # The new unique index starts with policy_id too, so MariaDB's foreign
    # key keeps an index while the old one is dropped.
    with op.batch_alter_table('heat_health_target') as batch:
        batch.create_unique_constraint(
            'uniq_heat_health_target0policy0place',
            ['policy_id', 'stack_id', 'resource_name'])
    with op.batch_alter_table('heat_health_target') as batch:
        batch.drop_constraint('uniq_heat_health_target0policy0server',
                              type_='unique')
    op.execute("UPDATE heat_health_target SET state = 'NO_DATA' "
               "WHERE state = 'INIT'")
