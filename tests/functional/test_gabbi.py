"""heat-health's routes through gabbi-run, as against any Heat endpoint.

``tests/functional/gabbits/*.yaml`` name everything they need in the
environment (see their heading); this test makes the stack and the tokens
(of the demo, reader and alt_demo clouds, the URLs from their catalogs) and
plays each file with the real ``gabbi-run``.
"""

import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from tests.functional import healing

GABBITS = pathlib.Path(__file__).resolve().parent / 'gabbits'
GABBI_RUN = str(pathlib.Path(sys.executable).parent / 'gabbi-run')


@pytest.mark.parametrize('gabbit', sorted(p.name for p in
                                          GABBITS.glob('*.yaml')))
def test_gabbit(gabbit, demo, reader, alt_demo, stacks):
    # Once its server is HEALTHY: the timeline holds its first step.
    stack, _targets = healing.heal_stack(stacks, demo, 'gabbi', count=1,
                                         recovery={'mode': 'OBSERVE'})
    env = dict(os.environ,
               HEAT_HEALTH_TOKEN=demo.session.get_token(),
               HEAT_HEALTH_READER_TOKEN=reader.session.get_token(),
               HEAT_HEALTH_ALT_TOKEN=alt_demo.session.get_token(),
               HEAT_HEALTH_ALT_URL=alt_demo.endpoint('orchestration'),
               HEAT_HEALTH_STACK=stack['stack_name'],
               HEAT_HEALTH_STACK_ID=stack['id'])
    url = demo.endpoint('orchestration')
    with open(GABBITS / gabbit) as tests:
        result = subprocess.run([GABBI_RUN, url], stdin=tests, env=env,
                                capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Every test of the file ran (none skipped for a missing variable).
    count = len(yaml.safe_load((GABBITS / gabbit).read_text())['tests'])
    assert 'Ran %d tests' % count in output, output
    assert output.count('\u2713') == count, output
