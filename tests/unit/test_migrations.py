"""The alembic history of the heat-health tables, on every supported database.

Each test gets a new database from oslo.db's opportunistic fixtures: sqlite
in memory always; MariaDB/MySQL and PostgreSQL when oslo.db's conventional
account answers on localhost (user, password and database openstack_citest,
which ``tools/localcloud up`` creates). Where it does not, that database's
tests skip and give the reason in pytest's summary (``-rs``).

The history is upgrade-only (its script template writes no downgrade), so
it is walked upwards: one revision at a time, with a row in every table, to
the script's head, whatever revision that is today.
"""

import datetime
import os

from alembic import script as alembic_script
from oslo_db.sqlalchemy import test_fixtures
from oslo_db.sqlalchemy import test_migrations
from oslotest import base as test_base
import sqlalchemy as sa

from heat_health.db import api as db_api
from heat_health.db import migration
from heat_health.db import models
from heat_health.db import session as db_session


def _script():
    return alembic_script.ScriptDirectory(os.path.join(
        os.path.dirname(migration.__file__), 'alembic_migrations'))


class _OwnFacade(object):
    """Provision the database into heat-health's transaction factory.

    oslo.db's fixtures patch its global factory by default; ours is apart
    from it (and from Heat's), so db_api and db_sync use the test database
    only when it is patched in there.
    """

    def get_enginefacade(self):
        return db_session.facade


class _SQLiteFixture(_OwnFacade, test_fixtures.OpportunisticDbFixture):
    pass


class _MySQLFixture(_OwnFacade, test_fixtures.MySQLOpportunisticFixture):
    pass


class _PostgreSQLFixture(_OwnFacade,
                         test_fixtures.PostgresqlOpportunisticFixture):
    pass


# Values a real row holds where a column's type alone does not say enough.
_SAMPLES = {'spec': '{}', 'addresses': '[]', 'state': 'HEALTHY'}
_SAMPLE_TIME = datetime.datetime(2026, 1, 2, 3, 4, 5)


def _sample_row(table, seeded):
    """A row for a reflected table: every column filled, references kept."""
    row = {}
    for column in table.columns:
        targets = [fk.column for fk in column.foreign_keys]
        type_ = column.type
        if targets:
            row[column.name] = seeded[targets[0].table.name][
                targets[0].name]
        elif column.name in _SAMPLES:
            row[column.name] = _SAMPLES[column.name]
        elif isinstance(type_, sa.Boolean):
            row[column.name] = True
        elif isinstance(type_, sa.Integer):
            # MySQL reflects booleans as TINYINT: 1 suits both.
            row[column.name] = 1
        elif isinstance(type_, sa.DateTime):
            row[column.name] = _SAMPLE_TIME
        elif isinstance(type_, sa.String):
            row[column.name] = column.name[:type_.length or None]
        else:
            raise AssertionError('no sample value for %s.%s (%r)' % (
                table.name, column.name, type_))
    return row


class _HistoryTests(test_migrations.ModelsMigrationsSync):
    """The history on one database; test_models_sync comes from oslo.db.

    test_models_sync runs the history to its head and compares the result
    with the models: tables, columns and their types, nullability, server
    defaults, indexes, unique constraints and foreign keys.
    """

    def setUp(self):
        try:
            super(_HistoryTests, self).setUp()
        except self.skipException as skip:
            raise self.skipException(
                '%s: the opportunistic tests connect to localhost as user '
                'openstack_citest, password openstack_citest '
                '(tools/localcloud up creates it)' % skip)
        self.assertEqual(self.FIXTURE.DRIVER,
                         db_api.get_engine().dialect.name)
        self.script = _script()

    # ModelsMigrationsSync

    def get_engine(self):
        return db_api.get_engine()

    def get_metadata(self):
        return models.BASE.metadata

    def db_sync(self, engine):
        self.assertIs(db_api.get_engine(), engine)
        migration.db_sync()

    def include_object(self, object_, name, type_, reflected, compare_to):
        # Alembic leaves out only its default version table by itself.
        return not (type_ == 'table' and name == migration.VERSION_TABLE)

    # The walk

    def _seed_new_tables(self, seeded):
        engine = db_api.get_engine()
        metadata = sa.MetaData()
        metadata.reflect(bind=engine)
        with engine.begin() as connection:
            for table in metadata.sorted_tables:
                if (table.name == migration.VERSION_TABLE or
                        table.name in seeded):
                    continue
                row = _sample_row(table, seeded)
                connection.execute(table.insert().values(row))
                seeded[table.name] = row

    def _assert_rows_kept(self, seeded, revision):
        with db_api.get_engine().connect() as connection:
            for name in seeded:
                count = connection.execute(
                    sa.select(sa.func.count()).select_from(
                        sa.table(name))).scalar()
                self.assertEqual(1, count,
                                 'rows of %s after %s' % (name, revision))

    def test_walk_history(self):
        """Every revision in turn, each upgrading tables that hold rows."""
        revisions = list(self.script.walk_revisions())
        revisions.reverse()
        self.assertIsNone(migration.db_version())
        seeded = {}
        for script in revisions:
            migration.db_sync(script.revision)
            self.assertEqual(script.revision, migration.db_version())
            self._assert_rows_kept(seeded, script.revision)
            self._seed_new_tables(seeded)
        head = self.script.get_current_head()
        self.assertEqual(head, revisions[-1].revision)
        self.assertEqual(
            {t.name for t in models.BASE.metadata.sorted_tables},
            set(seeded))

        # Once at head, db_sync has nothing left to do.
        migration.db_sync()
        self.assertEqual(head, migration.db_version())
        self._assert_rows_kept(seeded, 'a second db_sync')


class TestHistorySQLite(_HistoryTests,
                        test_fixtures.OpportunisticDBTestMixin,
                        test_base.BaseTestCase):
    FIXTURE = _SQLiteFixture


class TestHistoryMySQL(_HistoryTests,
                       test_fixtures.OpportunisticDBTestMixin,
                       test_base.BaseTestCase):
    FIXTURE = _MySQLFixture


class TestHistoryPostgreSQL(_HistoryTests,
                            test_fixtures.OpportunisticDBTestMixin,
                            test_base.BaseTestCase):
    FIXTURE = _PostgreSQLFixture


class TestHistoryShape(test_base.BaseTestCase):
    """One line of revisions: two changes written at once cannot fork it."""

    def test_single_base(self):
        self.assertEqual(1, len(_script().get_bases()))

    def test_single_head(self):
        self.assertEqual(1, len(_script().get_heads()))
