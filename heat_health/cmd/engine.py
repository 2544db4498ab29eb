"""Entry point of heat-health-engine.

The threading backend must be chosen before anything imports oslo.messaging
or oslo_service.service, as heat-engine itself does.
"""

import sys

from oslo_service import backend
backend.init_backend(backend.BackendType.THREADING)

from heat.common import config as heat_config  # noqa: E402,F401
from heat.common import messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_service import service  # noqa: E402

from heat_health.common import config  # noqa: E402,F401
from heat_health.engine import service as engine_service  # noqa: E402


def main(argv=None):
    logging.register_options(cfg.CONF)
    cfg.CONF(sys.argv[1:] if argv is None else argv,
             project='heat', prog='heat-health-engine')
    logging.setup(cfg.CONF, 'heat-health-engine')
    messaging.setup()
    launcher = service.launch(cfg.CONF, engine_service.create_service(),
                              workers=1, restart_method='mutate')
    launcher.wait()
