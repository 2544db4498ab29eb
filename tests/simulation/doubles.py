"""The doubles of the services heat-health acts through, in one place.

Each behaves as the real service does (see its module): NovaDouble
(nova_double), OctaviaDouble (octavia_double), HeatDouble (heat_double).
Every call of theirs can be made to fail, or to kill the calling engine
(``Crash``), through its ``faults``.
"""

from tests.simulation.faults import AFTER  # noqa: F401
from tests.simulation.faults import BEFORE  # noqa: F401
from tests.simulation.faults import Crash  # noqa: F401
from tests.simulation.faults import Faults  # noqa: F401
from tests.simulation.heat_double import HeatDouble  # noqa: F401
from tests.simulation.heat_double import timeout as heat_timeout  # noqa
from tests.simulation.nova_double import error as nova_error  # noqa: F401
from tests.simulation.nova_double import NovaDouble  # noqa: F401
from tests.simulation.octavia_double import error as octavia_error  # noqa
from tests.simulation.octavia_double import OctaviaDouble  # noqa: F401
