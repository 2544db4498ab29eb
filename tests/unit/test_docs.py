"""The documentation and release notes build without a warning.

What ``tox -e docs`` and ``tox -e releasenotes`` run, so that a broken
reference or a malformed note fails the suite, not only the docs job.
"""

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('source', ['doc/source', 'releasenotes/source'])
def test_builds_without_warnings(source, tmp_path):
    result = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-a', '-E', '-W', '--keep-going',
         '-q', '-b', 'html', source, str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    index = (tmp_path / 'index.html').read_text()
    # Built from the code and the notes, not an empty shell.
    expected = {'doc/source': 'Operating heat-health',
                'releasenotes/source': 'takeovers'}[source]
    assert expected in index
