from alembic import context

from heat_health.db import migration
from heat_health.db import models

connection = context.config.attributes['connection']
context.configure(connection=connection,
                  target_metadata=models.BASE.metadata,
                  version_table=migration.VERSION_TABLE,
                  render_as_batch=connection.dialect.name == 'sqlite')
with context.begin_transaction():
    context.run_migrations()
