"""Test package setup shared by unit and functional tests.

Heat's test base class selects the threading backend at import time, which
fails once oslo.messaging has been imported; selecting it here first keeps
the import order of the test modules irrelevant.
"""

from oslo_service import backend

try:
    backend.init_backend(backend.BackendType.THREADING)
except backend.exceptions.BackendAlreadySelected:
    pass
