"""Fixtures shared by the unit tests."""

import pytest

from tests.simulation import world as world_mod


@pytest.fixture
def make_world():
    """Makes simulation worlds (one open at a time); closes them after."""
    made = []

    def make(**kwargs):
        w = world_mod.World(**kwargs)
        made.append(w)
        return w
    yield make
    for w in made:
        w.close()
