"""Alembic history of the heat-health tables, kept apart from Heat's."""

import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration

from heat_health.db import api as db_api

VERSION_TABLE = 'heat_health_alembic_version'


def _config(connection):
    here = os.path.dirname(__file__)
    cfg = alembic_config.Config()
    cfg.set_main_option('script_location',
                        os.path.join(here, 'alembic_migrations'))
    cfg.attributes['connection'] = connection
    return cfg


def db_sync(version='head'):
    engine = db_api.get_engine()
    with engine.begin() as connection:
        alembic_command.upgrade(_config(connection), version)


def db_version():
    engine = db_api.get_engine()
    with engine.connect() as connection:
        context = alembic_migration.MigrationContext.configure(
            connection, opts={'version_table': VERSION_TABLE})
        return context.get_current_revision()
