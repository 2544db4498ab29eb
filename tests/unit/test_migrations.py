"""The alembic history creates every table the models describe."""

import sqlalchemy as sa

from heat_health.db import api as db_api
from heat_health.db import migration
from heat_health.db import models
from tests.unit import base


class TestMigrations(base.HeatHealthTestCase):

    def test_history_matches_models(self):
        self.setup_health_db()
        self.assertEqual('0003', migration.db_version())
        inspector = sa.inspect(db_api.get_engine())
        for table in models.BASE.metadata.sorted_tables:
            columns = {c['name'] for c in inspector.get_columns(table.name)}
            self.assertEqual({c.name for c in table.columns}, columns,
                             table.name)

    def test_db_sync_twice_is_harmless(self):
        self.setup_health_db()
        migration.db_sync()
        self.assertEqual('0003', migration.db_version())
