"""heat-health-manage: database administration of the heat-health tables."""

import sys

from heat.common import config as heat_config  # noqa: F401
from oslo_config import cfg
from oslo_log import log as logging

from heat_health.db import migration

CONF = cfg.CONF


def do_db_sync():
    migration.db_sync(CONF.command.version)
    print('heat-health tables at revision %s' % migration.db_version())


def do_db_version():
    print(migration.db_version())


def add_command_parsers(subparsers):
    parser = subparsers.add_parser(
        'db_sync', help='Create or upgrade the heat-health tables.')
    parser.set_defaults(func=do_db_sync)
    parser.add_argument('version', nargs='?', default='head')

    parser = subparsers.add_parser(
        'db_version', help='Print the revision of the heat-health tables.')
    parser.set_defaults(func=do_db_version)


def main(argv=None):
    CONF.register_cli_opt(cfg.SubCommandOpt(
        'command', title='Commands', handler=add_command_parsers))
    logging.register_options(CONF)
    CONF(sys.argv[1:] if argv is None else argv,
         project='heat', prog='heat-health-manage')
    logging.setup(CONF, 'heat-health-manage')
    CONF.command.func()
