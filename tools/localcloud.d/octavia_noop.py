"""Run Octavia's API or worker with a self-consistent noop network driver.

Octavia's noop network driver answers get_subnet() with whatever network id
the same process looked up last (none at first).  The API and the worker
then put one subnet in different networks: a member on the VIP's subnet
"moves" the amphora off the VIP's network when it is created, and deleting
the last such member fails in CalculateAmphoraDelta (KeyError) and leaves
the member in ERROR, so Heat cannot delete a stack with an
OS::Octavia::PoolMember.  Here every process derives a subnet's network id
from the subnet id, as a real Neutron would answer the same for both.

    uwsgi:  module = octavia_noop:application, with this directory on
            pythonpath
    worker: python octavia_noop.py worker --config-file octavia.conf
"""

import sys
import uuid

from octavia.network.drivers.noop_driver import driver as noop_driver

_NAMESPACE = uuid.UUID('5a1c3f8e-0c4e-4d0b-9a57-6f1d2b7e8c90')
_get_subnet = noop_driver.NoopManager.get_subnet


def network_of(subnet_id):
    return str(uuid.uuid5(_NAMESPACE, str(subnet_id)))


def get_subnet(self, subnet_id):
    subnet = _get_subnet(self, subnet_id)
    subnet.network_id = network_of(subnet_id)
    return subnet


noop_driver.NoopManager.get_subnet = get_subnet


def main():
    if sys.argv[1:2] != ['worker']:
        sys.exit(__doc__)
    from octavia.cmd import octavia_worker
    sys.argv = ['octavia-worker'] + sys.argv[2:]
    octavia_worker.main()


if __name__ == '__main__':
    main()
else:
    # Imported by uwsgi: Octavia's own WSGI application, which reads the
    # configuration from uwsgi's pyargv.
    from octavia.wsgi import api
    application = api.application
