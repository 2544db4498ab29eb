"""Which Nova a functional test needs, and turning the deployment to it.

Tests marked ``real_nova`` need real Nova whose computes run the fault
driver (faults made in the hypervisor, behind Nova's back); tests marked
``fakecloud`` need fakecloud's simulated Nova and its fault API. The local
deployment runs either (``tools/localcloud nova real|fake``), so a run
holding both kinds runs every other test first, then turns the deployment
to real Nova once, and leaves it as it found it. ``HEAT_HEALTH_NOVA_SWITCH=0``
never turns it: each kind then runs only on the Nova it finds.
"""

import os

from tests.functional import cloud
from tests.functional import engines

MARKER = 'real_nova'
MARKER_HELP = ("%s: needs real Nova with the fault driver's computes (the "
               "local deployment's LOCALCLOUD_NOVA=real); deselected when "
               "the target cloud has none and cannot be turned to it"
               % MARKER)
SWITCH_VARIABLE = 'HEAT_HEALTH_NOVA_SWITCH'
MODE_FILE = cloud.STATE_DIR / 'state' / 'nova-mode'
REAL, FAKE = 'real', 'fake'


def switchable(environ=None):
    """Whether this run may turn the local deployment's Nova."""
    environ = os.environ if environ is None else environ
    if environ.get(SWITCH_VARIABLE, '').strip().lower() in (
            '0', 'false', 'no', 'off'):
        return False
    return MODE_FILE.exists()


def current():
    """real or fake: the Nova the local deployment runs now."""
    return MODE_FILE.read_text().strip()


def needs(item, fakecloud_marker):
    """real, fake or None (either) for a collected test."""
    if item.get_closest_marker(MARKER):
        return REAL
    if item.get_closest_marker(fakecloud_marker):
        return FAKE
    return None


def real_last(items):
    """The tests needing real Nova after all others, each in order."""
    items.sort(key=lambda item: bool(item.get_closest_marker(MARKER)))


def switch(mode):
    """Turn the local deployment to that Nova; every user a new token."""
    engines.localcloud('nova', mode)
    cloud.forget_sessions()
