"""Mistral's schema in an sqlite database, for tools/localcloud.

    mistral_db.py --config-file MISTRAL_CONF

Mistral's migrations alter constraints, which sqlite cannot: there the
tables are made from Mistral's models by Mistral's own setup_db, as its unit
tests make them; "mistral-db-manage stamp head" then marks the schema as
the newest migration's.  Does nothing to a database that has the tables.
"""

import sys

import sqlalchemy as sa

# Importing mistral.cmd selects oslo.service's threading backend, as
# Mistral's own commands do.
from mistral.cmd import launch  # noqa: F401

from mistral import config
from mistral.db.sqlalchemy import base as db_base
from mistral.db.v2 import api as db_api


def main():
    config.parse_args(sys.argv[1:])
    if sa.inspect(db_base.get_engine()).has_table('workflow_executions_v2'):
        return
    db_api.setup_db()


if __name__ == '__main__':
    main()
