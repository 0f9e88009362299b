"""The Makefile's set-up: a Python the course cannot use is refused at once, in one line that says what was
found and what to install, before any venv or pip install starts."""

import shutil
import subprocess
import sys

import pytest

from course.layout import ROOT

# A stand-in for another Python: this one, reporting the version given on its command line to the code it runs with -c.
FAKE = '''#!/bin/sh
exec "{python}" -c '
import sys, collections
V = collections.namedtuple("version_info", "major minor micro releaselevel serial")
sys.version_info = V({major}, {minor}, 0, "final", 0)
code = sys.argv[2]
sys.argv = ["-c", *sys.argv[3:]]
exec(compile(code, "<string>", "exec"))
' "$@"
'''


@pytest.mark.parametrize('version', [(3, 12), (3, 10)])
def test_another_python_is_refused_before_any_venv_with_one_line(tmp_path, version):
    if not shutil.which('make'):
        pytest.skip('no make on PATH')
    for name in ('Makefile', 'requirements.txt'):
        shutil.copy(ROOT / name, tmp_path / name)
    fake = tmp_path / 'python-other'
    fake.write_text(FAKE.format(python=sys.executable, major=version[0], minor=version[1]))
    fake.chmod(0o755)
    done = subprocess.run(['make', '-s', f'PYTHON={fake}', '.venv/.installed'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    errors = [line for line in done.stderr.splitlines() if line.startswith('error:')]
    assert done.returncode != 0 and len(errors) == 1, (
        f'expected make to stop with one error line for Python {version}; exit {done.returncode}, stderr:\n{done.stderr}')
    line = errors[0]
    assert f'{version[0]}.{version[1]}.0' in line and 'Python 3.11' in line and 'PYTHON=' in line, (
        f'the line should say what was found ({version[0]}.{version[1]}.0), what is needed (Python 3.11) and how to '
        f'pick one (PYTHON=...); got: {line}')
    # before any venv or pip work (what made it take seconds): no venv was made. Not timed: a loaded machine is slow.
    assert not (tmp_path / '.venv').exists(), 'a refused Python must not leave a venv behind'
