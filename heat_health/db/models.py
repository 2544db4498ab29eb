"""SQLAlchemy models of the heat-health tables.

They live in Heat's database next to Heat's own tables, prefixed
``heat_health_`` and versioned by an alembic history of their own.
"""

from oslo_db.sqlalchemy import types as db_types
from oslo_utils import timeutils
import sqlalchemy as sa
from sqlalchemy import orm

BASE = orm.declarative_base()


class Marking(BASE):
    """One accepted mark-unhealthy (or reset) request: who, what, why."""

    __tablename__ = 'heat_health_marking'
    __table_args__ = (
        sa.Index('ix_heat_health_marking_stack', 'stack_id'),
        sa.Index('ix_heat_health_marking_physical',
                 'physical_resource_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    stack_id = sa.Column(sa.String(36), nullable=False)
    owner_stack_id = sa.Column(sa.String(36), nullable=False)
    resource_name = sa.Column(sa.String(255), nullable=False)
    physical_resource_id = sa.Column(sa.String(255))
    mark_unhealthy = sa.Column(sa.Boolean, nullable=False)
    reason = sa.Column(sa.Text, nullable=False)
    user_id = sa.Column(sa.String(64))
    project_id = sa.Column(sa.String(64))
    source = sa.Column(sa.String(32), nullable=False)
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)


class Policy(BASE):
    """A registered OS::Heat::HealthPolicy: the desired state of watching.

    ``engine_id`` and ``lease_expires_at`` say which heat-health-engine
    watches it; an engine renews its leases every tick, and any engine may
    claim a policy whose lease has expired. ``generation`` grows at every
    change of owner: a write about the policy's targets is fenced by it,
    so an engine that lost the policy (hung, partitioned) writes nothing.
    ``handoff_to`` is the engine a live owner offers the policy to when
    the engines' hash ring moves it.
    """

    __tablename__ = 'heat_health_policy'
    __table_args__ = (
        sa.Index('ix_heat_health_policy_stack', 'stack_id'),
        sa.Index('ix_heat_health_policy_lease', 'lease_expires_at'),
    )

    id = sa.Column(sa.String(36), primary_key=True)
    stack_id = sa.Column(sa.String(36), nullable=False)
    resource_name = sa.Column(sa.String(255), nullable=False)
    project_id = sa.Column(sa.String(64), nullable=False)
    user_id = sa.Column(sa.String(64))
    spec = sa.Column(db_types.JsonEncodedDict, nullable=False)
    enabled = sa.Column(sa.Boolean, nullable=False, default=True)
    engine_id = sa.Column(sa.String(36))
    lease_expires_at = sa.Column(sa.DateTime)
    generation = sa.Column(sa.Integer, nullable=False, default=0,
                           server_default='0')
    handoff_to = sa.Column(sa.String(36))
    # The stack is suspended: its servers are stopped on purpose.
    suspended = sa.Column(sa.Boolean, nullable=False, default=False,
                          server_default=sa.false())
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)
    updated_at = sa.Column(sa.DateTime, onupdate=timeutils.utcnow)
    # Why the policy stopped acting (mass failure, blind observers), set
    # and cleared by its owner; None while it may act.
    braked = sa.Column(sa.String(255))
    braked_since = sa.Column(sa.DateTime)
    # An operator paused healing (detection goes on); None while it heals.
    paused_at = sa.Column(sa.DateTime)
    paused_by = sa.Column(sa.String(255))
    paused_reason = sa.Column(sa.String(255))
    # Why its owner could not watch it fully (its targets could not be
    # resolved or stored), since when; None while it is watched.
    error = sa.Column(sa.String(1024))
    error_since = sa.Column(sa.DateTime)
    # Grows whenever the set of servers its targets watch changes: the
    # engines' index of who watches which server reads only what changed.
    targets_version = sa.Column(sa.Integer, nullable=False, default=0,
                                server_default='0')
    # When its detectors last confirmed every target's stored observation:
    # written by the owner with its leases, not per target.
    observed_through = sa.Column(sa.DateTime)
    # {mode: {reason, targets, count}}: modes that cannot see some of its
    # targets, as its owner last found them.
    blind = sa.Column(db_types.JsonEncodedDict)


class Target(BASE):
    """One watched place of a policy, and its health as last decided.

    The place is the resource (``stack_id``, ``resource_name``) holding a
    server; ``server_id`` is the server there now and changes when Heat
    replaces it, while the row, its state and its events stay.
    """

    __tablename__ = 'heat_health_target'
    __table_args__ = (
        sa.UniqueConstraint('policy_id', 'stack_id', 'resource_name',
                            name='uniq_heat_health_target0policy0place'),
        sa.Index('ix_heat_health_target_server', 'server_id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    policy_id = sa.Column(sa.String(36),
                          sa.ForeignKey('heat_health_policy.id',
                                        ondelete='CASCADE'),
                          nullable=False)
    server_id = sa.Column(sa.String(36), nullable=False)
    # Where the server is: the stack holding its resource, that resource's
    # name, and the path of resource names from the policy's stack.
    stack_id = sa.Column(sa.String(36), nullable=False)
    resource_name = sa.Column(sa.String(255), nullable=False)
    path = sa.Column(sa.String(1024), nullable=False)
    addresses = sa.Column(db_types.JsonEncodedList)
    # The server's name in Nova (a poll URL's {name}), as last listed.
    server_name = sa.Column(sa.String(255))
    state = sa.Column(sa.String(16), nullable=False)
    state_reason = sa.Column(sa.String(255))
    state_since = sa.Column(sa.DateTime, nullable=False,
                            default=timeutils.utcnow)
    observation = sa.Column(sa.String(16))
    observation_reason = sa.Column(sa.String(255))
    observation_source = sa.Column(sa.String(32))
    observed_at = sa.Column(sa.DateTime)
    # No verdict before this time (grace after create or update).
    grace_until = sa.Column(sa.DateTime)
    # The recovery under way (RECOVERING, VERIFYING) or that just failed
    # (UNHEALTHY, to escalate): stored before its action is issued.
    recovery = sa.Column(db_types.JsonEncodedDict)
    # Attempts since ``first_attempt_at``; none before ``next_attempt_at``.
    attempts = sa.Column(sa.Integer, nullable=False, default=0,
                         server_default='0')
    first_attempt_at = sa.Column(sa.DateTime)
    next_attempt_at = sa.Column(sa.DateTime)


class Event(BASE):
    """A change of a target's state: the timeline people read."""

    __tablename__ = 'heat_health_event'
    __table_args__ = (
        sa.Index('ix_heat_health_event_policy', 'policy_id', 'id'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    policy_id = sa.Column(sa.String(36), nullable=False)
    server_id = sa.Column(sa.String(36))
    # The server's place when it happened: the target's row follows the
    # place to the next server, the timeline keeps the one it was about.
    path = sa.Column(sa.String(1024))
    old_state = sa.Column(sa.String(16))
    new_state = sa.Column(sa.String(16), nullable=False)
    reason = sa.Column(sa.String(255))
    source = sa.Column(sa.String(32))
    created_at = sa.Column(sa.DateTime, nullable=False,
                           default=timeutils.utcnow)
    # What the reason cannot hold: a failed server's crash evidence.
    detail = sa.Column(db_types.JsonEncodedDict)
