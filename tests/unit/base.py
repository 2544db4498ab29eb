"""Heat's HeatTestCase, made to work from an installed Heat.

Heat's wheel puts ``etc/heat/environment.d`` under the environment prefix,
not next to site-packages where HeatTestCase looks for it; without the global
environment loaded from there every HeatTestCase fails. Loading it once from
the right place before the first test fixes that.
"""

import os
import sys

import fixtures
from heat.engine import resources
from heat.tests import common
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.db import migration
from heat_health.db import session as db_session


def _heat_etc_dir():
    import heat
    path = os.path.dirname(heat.__file__)
    while path != os.path.dirname(path):
        candidate = os.path.join(path, 'etc', 'heat')
        if os.path.isdir(os.path.join(candidate, 'environment.d')):
            return candidate
        path = os.path.dirname(path)
    return os.path.join(sys.prefix, 'etc', 'heat')


# heat-api registers these before the pipeline runs; faultwrap reads 'debug'.
logging.register_options(cfg.CONF)


def _load_global_environment():
    if resources._environment is None:
        cfg.CONF.set_default('environment_dir',
                             os.path.join(_heat_etc_dir(), 'environment.d'))
        resources.initialise()


class HeatHealthTestCase(common.HeatTestCase):

    def setUp(self, **kwargs):
        _load_global_environment()
        super(HeatHealthTestCase, self).setUp(**kwargs)

    def setup_health_db(self):
        """Our tables in a private sqlite file, created by our migrations."""
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'health.db')
        facade = db_session.enginefacade.transaction_context()
        facade.configure(connection='sqlite:///%s' % path)
        self.useFixture(fixtures.MockPatchObject(db_session, 'facade', facade))
        migration.db_sync()
