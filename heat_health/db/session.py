"""Our own transaction factory, apart from Heat's.

Configured from heat.conf ``[database]``: a failure in one of our sessions
can never roll back, or be rolled back by, a Heat transaction. Every module
of this package opens its sessions here.
"""

from oslo_db import api as oslo_db_api
from oslo_db.sqlalchemy import enginefacade

facade = enginefacade.transaction_context()


def get_engine():
    return facade.writer.get_engine()


@enginefacade.transaction_context_provider
class Session(object):
    """Carrier for enginefacade's per-call transaction state."""


# Writes that lose a deadlock to another engine's transaction (MySQL rolls
# theirs back whole) run again: they read what they change in the same
# transaction, so a second run decides afresh.
retry_on_deadlock = oslo_db_api.wrap_db_retry(max_retries=5,
                                              retry_on_deadlock=True)


def detached(session, rows):
    for row in rows:
        session.expunge(row)
    return rows
