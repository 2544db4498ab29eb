"""The world's database: our tables in sqlite, made by our migrations.

The migrations run once per process into a template file; every world
copies it into an in-memory database (a copy costs far less than an
alembic upgrade, and oslo.db keeps one connection to an in-memory database
where it opens one per transaction to a file) and points
``heat_health.db.session.facade`` at it until it closes. Every public
function of the database API is wrapped so that faults can be injected
(a failed write, a commit whose answer was lost, kill -9 at a call); the
world's own writes (a user's or an operator's) go to the originals.
"""

import os
import sqlite3
import tempfile
from unittest import mock

from oslo_db import exception as db_exc

from heat_health.db import api as db_api
from heat_health.db import migration
from heat_health.db import session as db_session
from tests.simulation import faults as faults_mod

WRITES = frozenset([
    'policy_create_or_update', 'policy_delete', 'policy_claim',
    'policy_release', 'policy_set_suspended', 'policy_set_braked',
    'policy_set_paused', 'event_add', 'target_reset',
    'target_details_update', 'target_sync', 'target_transition',
    'target_observations_store', 'target_store_columns',
    'marking_create'])
READS = frozenset([
    'policy_get', 'policy_get_all_by_stack', 'policy_other_owners',
    'policy_owners', 'policy_owners_digest', 'policy_servers',
    'owner_index', 'target_get_all', 'target_get_rows', 'event_get_after',
    'event_get_recent', 'marking_get_all_by_stack'])

_template = None


def _tmp_dir():
    shm = '/dev/shm'
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _facade_for(path=None):
    """A transaction factory of a sqlite file, or in memory."""
    facade = db_session.enginefacade.transaction_context()
    facade.configure(connection='sqlite:///%s' % path if path else
                     'sqlite://', sqlite_synchronous=False)
    return facade


def _migrated_template():
    global _template
    if _template is None:
        handle, path = tempfile.mkstemp(prefix='heat-health-sim-',
                                        suffix='.db', dir=_tmp_dir())
        os.close(handle)
        facade = _facade_for(path)
        with mock.patch.object(db_session, 'facade', facade):
            migration.db_sync()
        facade.dispose_pool()
        _template = path
    return _template


def db_error(call, key=None):
    """What a database that went away makes the API raise."""
    return db_exc.DBConnectionError('injected database failure in %s' % call)


class Database(object):
    """One world's copy of the tables, and the faults of its API."""

    def __init__(self):
        self.faults = faults_mod.Faults()
        # Only the calls this database API has: the world also runs
        # older versions of the acting core.
        self.real = {name: getattr(db_api, name) for name in WRITES | READS
                     if hasattr(db_api, name)}
        self._facade = _facade_for()
        engine = self._facade.writer.get_engine()
        template = sqlite3.connect(_migrated_template())
        try:
            with engine.connect() as connection:
                template.backup(connection.connection.dbapi_connection)
        finally:
            template.close()
        self._patches = [mock.patch.object(db_session, 'facade', self._facade)]
        self._patches += [mock.patch.object(db_api, name, self._wrap(name))
                          for name in sorted(self.real)]
        for patch in self._patches:
            patch.start()

    def _wrap(self, name):
        real = self.real[name]
        faults = self.faults

        def call(*args, **kwargs):
            faults.check(faults_mod.BEFORE, name)
            result = real(*args, **kwargs)
            faults.check(faults_mod.AFTER, name)
            return result
        call.__name__ = name
        return call

    def fail(self, count=1, calls=WRITES, committed=False):
        """The next ``count`` calls among ``calls`` raise a DB error.

        :param committed: the write is done, then the error raised (the
            answer of a commit lost with the connection).
        """
        self.faults.add(tuple(sorted(calls)), db_error, count,
                        phase=faults_mod.AFTER if committed else
                        faults_mod.BEFORE)

    def close(self):
        for patch in reversed(self._patches):
            patch.stop()
        self._facade.dispose_pool()
