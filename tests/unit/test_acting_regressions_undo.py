"""Regressions of the acting core: what recovery left, and its bounds.

As ``test_acting_regressions``: each drives the real tracker, recovery
loop, drainer and replacer through the simulation world and asserts what
the stack's owner would notice.
"""

from tests.simulation import heat_double
from tests.unit import test_acting_regressions as acting

RECREATE_ONLY = {'recovery': dict(acting.NO_JITTER,
                                  actions=[{'name': 'RECREATE'}])}


def test_a_users_reset_racing_recoverys_mark_leaves_no_check_failed(
        make_world):
    """The user's clear, recovery's mark, then the user's reset.

    The user fixed the server and marked it healthy; recovery's RECREATE
    marked it between the two writes of that reset. Once the server is
    seen healthy the mark is cleared: the user's next update keeps it.
    """
    w = make_world(servers=3, pool=False, policy=RECREATE_ONLY)
    engine = w.engines[0]
    acting._watching(w)
    server_id = w.server_id(0)
    acting._fails(w, 0)
    engine.recovery_pass()
    w.user_clears_mark(0)
    engine.run_steps()
    assert [m.physical_id for m in w.heat.marks
            if m.source == 'recovery'] == [server_id]
    w.user_resets_target(0)
    w.heal_server(0)
    w.run_until(lambda: w.state(0) == 'HEALTHY')
    w.run(5)
    w.user_update()
    w.run(heat_double.UPDATE_SECONDS + 5)
    assert w.heat.replacements == []
    assert w.server_id(0) == server_id
