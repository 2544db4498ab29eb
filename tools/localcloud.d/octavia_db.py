"""Octavia's database in the local deployment.

    octavia_db.py OCTAVIA_CONF sqlite-schema
        Create Octavia's schema in an sqlite database from Octavia's models
        and fill its lookup tables, the way Octavia's functional tests do:
        Octavia's migrations alter constraints, which sqlite cannot.

    octavia_db.py OCTAVIA_CONF fault-member MEMBER_ID [MEMBER_ID...] STATUS
        Set members' operating_status as Octavia's health manager would
        after one heartbeat (in one transaction: a reader sees all of them
        changed or none), and recompute their pools', the load balancers'
        listeners' and the load balancers' operating_status from them.
        Prints what changed.

Reads [database] connection from OCTAVIA_CONF.
"""

import configparser
import datetime
import sys

import sqlalchemy as sa

ONLINE = 'ONLINE'
OFFLINE = 'OFFLINE'
DEGRADED = 'DEGRADED'
ERROR = 'ERROR'
NO_MONITOR = 'NO_MONITOR'
DRAINING = 'DRAINING'
MEMBER_STATUSES = (ERROR, ONLINE, OFFLINE, NO_MONITOR, DRAINING)
# Members haproxy still sends traffic to: its backend stays UP while one is.
SERVING = (ONLINE, NO_MONITOR, DRAINING)


def connection_url(conf_file):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(conf_file)
    return parser.get('database', 'connection')


def sqlite_schema(url):
    """Octavia's tables and lookup rows, once."""
    from octavia.common import constants
    from octavia.db import base_models
    from octavia.db import models
    from sqlalchemy import orm

    engine = sa.create_engine(url)
    if sa.inspect(engine).has_table('load_balancer'):
        return
    base_models.BASE.metadata.create_all(engine)
    lookups = [
        (constants.SUPPORTED_PROVISIONING_STATUSES, models.ProvisioningStatus),
        (constants.SUPPORTED_HEALTH_MONITOR_TYPES, models.HealthMonitorType),
        (constants.SUPPORTED_LB_ALGORITHMS, models.Algorithm),
        (constants.SUPPORTED_PROTOCOLS, models.Protocol),
        (constants.SUPPORTED_OPERATING_STATUSES, models.OperatingStatus),
        (constants.SUPPORTED_SP_TYPES, models.SessionPersistenceType),
        (constants.SUPPORTED_AMPHORA_ROLES, models.AmphoraRoles),
        (constants.SUPPORTED_LB_TOPOLOGIES, models.LBTopology),
        (constants.SUPPORTED_VRRP_AUTH, models.VRRPAuthMethod),
        (constants.SUPPORTED_L7RULE_TYPES, models.L7RuleType),
        (constants.SUPPORTED_L7RULE_COMPARE_TYPES, models.L7RuleCompareType),
        (constants.SUPPORTED_L7POLICY_ACTIONS, models.L7PolicyAction),
        (constants.SUPPORTED_CLIENT_AUTH_MODES,
         models.ClientAuthenticationMode),
    ]
    with orm.Session(engine) as session, session.begin():
        for names, model in lookups:
            session.add_all(model(name=name) for name in names)
        # The placeholders Octavia's migrations insert for deleted flavors
        # and availability zones.
        session.add(models.FlavorProfile(
            id=constants.NIL_UUID, name='DELETED-PLACEHOLDER',
            provider_name=constants.DELETED, flavor_data='{}'))
        session.flush()
        session.add(models.Flavor(
            id=constants.NIL_UUID, flavor_profile_id=constants.NIL_UUID,
            name='DELETED-PLACEHOLDER', enabled=False,
            description='Placeholder for DELETED LBs with DELETED flavors'))
        session.add(models.AvailabilityZoneProfile(
            id=constants.NIL_UUID, name='DELETED-PLACEHOLDER',
            provider_name=constants.DELETED, availability_zone_data='{}'))
        session.flush()
        session.add(models.AvailabilityZone(
            availability_zone_profile_id=constants.NIL_UUID,
            name=constants.NIL_UUID, enabled=False,
            description='Placeholder for DELETED LBs with DELETED '
                        'availability zones'))


def pool_status(member_statuses):
    """A pool's status from its members', as the health manager reports it.

    haproxy marks the backend DOWN when no member serves (the health manager
    then says ERROR) and the health manager degrades an UP pool with a member
    in ERROR.
    """
    if not member_statuses:
        return None
    if not any(s in SERVING for s in member_statuses):
        return ERROR
    if ERROR in member_statuses:
        return DEGRADED
    return ONLINE


def lb_status(enabled, pool_statuses):
    """The load balancer's status: the worst of its pools'.

    The health manager counts only pools that serve a listener; the others
    it reports OFFLINE, and OFFLINE does not lower the load balancer's.
    """
    if not enabled:
        return OFFLINE
    if ERROR in pool_statuses:
        return ERROR
    if DEGRADED in pool_statuses:
        return DEGRADED
    return ONLINE


class Recorder(object):

    def __init__(self, conn):
        self.conn = conn
        self.now = datetime.datetime.now(datetime.timezone.utc).replace(
            tzinfo=None)
        self.changes = []

    def set(self, table, row_id, old, new):
        if new is None or new == old:
            return
        self.conn.execute(
            sa.text('UPDATE %s SET operating_status = :new, '
                    'updated_at = :now WHERE id = :id' % table),
            {'new': new, 'now': self.now, 'id': row_id})
        self.changes.append('%-13s %s  %s -> %s' % (table, row_id, old, new))


def fault_members(url, member_ids, status):
    if status not in MEMBER_STATUSES:
        sys.exit('status must be one of %s' % ', '.join(MEMBER_STATUSES))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        rec = Recorder(conn)
        pool_ids = []
        for member_id in member_ids:
            members = _query(conn, 'SELECT id, pool_id, operating_status '
                             'FROM member WHERE id = :id', id=member_id)
            if not members:
                sys.exit('no member %s in Octavia\'s database' % member_id)
            member = members[0]
            rec.set('member', member['id'], member['operating_status'],
                    status)
            if member['pool_id'] not in pool_ids:
                pool_ids.append(member['pool_id'])
        for pool_id in pool_ids:
            _recompute(conn, rec, pool_id)
    print('\n'.join(rec.changes) if rec.changes else
          'no change: already %s' % status)


def _query(conn, sql, **params):
    return conn.execute(sa.text(sql), params).mappings().all()


def _recompute(conn, rec, pool_id):
    """A pool's status from its members', then its load balancer's."""
    pool = _query(conn, 'SELECT id, load_balancer_id, operating_status '
                  'FROM pool WHERE id = :id', id=pool_id)[0]
    siblings = [r['operating_status'] for r in _query(
        conn, 'SELECT operating_status FROM member WHERE pool_id = :id',
        id=pool['id'])]
    new_pool = pool_status(siblings)
    rec.set('pool', pool['id'], pool['operating_status'], new_pool)

    lbs = _query(conn, 'SELECT id, enabled, operating_status '
                 'FROM load_balancer WHERE id = :id',
                 id=pool['load_balancer_id'])
    if not lbs:
        return
    lb = lbs[0]
    # haproxy reports every enabled listener OPEN.
    listeners = _query(conn, 'SELECT id, enabled, operating_status '
                       'FROM listener WHERE load_balancer_id = :id',
                       id=lb['id'])
    for listener in listeners:
        rec.set('listener', listener['id'], listener['operating_status'],
                ONLINE if listener['enabled'] else OFFLINE)
    pools = _query(conn, 'SELECT id, operating_status FROM pool '
                   'WHERE load_balancer_id = :id', id=lb['id'])
    statuses = [p['operating_status'] for p in pools]
    rec.set('load_balancer', lb['id'], lb['operating_status'],
            lb_status(lb['enabled'], statuses))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    url = connection_url(sys.argv[1])
    command, args = sys.argv[2], sys.argv[3:]
    if command == 'sqlite-schema' and not args:
        sqlite_schema(url)
    elif command == 'fault-member' and len(args) >= 2:
        fault_members(url, args[:-1], args[-1])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
