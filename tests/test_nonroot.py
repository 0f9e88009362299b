"""An instructor who is not root, with the system's Python (most are). Run as root (as CI is), this module creates a plain
account, gives it a copy of the course, and as that account: builds the venv with the system's python3.11 through the
Makefile, runs the sandbox tests, and grades a demo class. Run as a user already, the whole suite is that check, and this
module skips.

The account keeps its venv between runs (~course-instructor/course/.venv): it is rebuilt when requirements.txt changes,
as the Makefile does for anyone."""

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import NO_SANDBOX, can_sandbox
from course.layout import ROOT

ACCOUNT = 'course-instructor'
SYSTEM_PYTHON = '/usr/bin/python3.11'  # Debian 12's (3.11.2), not the pyenv build the suite itself runs on
NOT_COPIED = ('.git', '.venv', '.build', '.ruff_cache', '__pycache__', 'submitted', 'autograded', 'feedback', 'results',
              'repairs', 'gradebook.db', 'grades*.csv', 'test-artifacts', 'input.txt')

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason='not root: this whole run is the non-root check'),
              pytest.mark.skipif(not can_sandbox(), reason=NO_SANDBOX)]


def as_account(home, cwd, command, timeout):
    """Run command (a shell line) as ACCOUNT in cwd, with a plain user's environment; the CompletedProcess."""
    env = ['env', '-i', f'HOME={home}', f'USER={ACCOUNT}', f'LOGNAME={ACCOUNT}', 'PATH=/usr/local/bin:/usr/bin:/bin',
           'LANG=C.UTF-8', *(f'{k}={os.environ[k]}' for k in ('PIP_INDEX_URL', 'PIP_EXTRA_INDEX_URL', 'PIP_FIND_LINKS',
                                                              'PIP_NO_INDEX') if k in os.environ)]
    return subprocess.run(['runuser', '-u', ACCOUNT, '--', *env, 'sh', '-c', f'cd {cwd} && {command}'],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope='module')
def account():
    """(home, course): ACCOUNT (created if missing) and its copy of this course, with the venv built by `make data`."""
    missing = [t for t in ('useradd', 'runuser', 'make') if not shutil.which(t)]
    if missing or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f'needs {", ".join(missing) or SYSTEM_PYTHON}: the non-root check runs as a plain account with the '
                    "system's Python (Debian: apt install python3.11 python3.11-venv)")
    try:
        pwd.getpwnam(ACCOUNT)
    except KeyError:
        subprocess.run(['useradd', '--create-home', '--user-group', '--shell', '/bin/sh', ACCOUNT], check=True)
    user = pwd.getpwnam(ACCOUNT)
    home = Path(user.pw_dir)
    course = home / 'course'
    for entry in course.iterdir() if course.exists() else ():  # a fresh copy, but the venv the account built before
        if entry.name != '.venv':
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    shutil.copytree(ROOT, course, ignore=shutil.ignore_patterns(*NOT_COPIED), dirs_exist_ok=True)  # keeps mtimes
    data = home / 'input.txt'  # where the account can read it (ROOT may be in root's home)
    shutil.copy(ROOT / 'input.txt', data)
    for path in [home, data, course, *course.rglob('*')]:
        if not path.is_symlink():
            os.chown(path, user.pw_uid, user.pw_gid)
    done = as_account(home, course, f'make data PYTHON={SYSTEM_PYTHON} DATA={data}', timeout=1200)
    assert done.returncode == 0, f'make data as {ACCOUNT} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    return home, course


def test_the_venv_is_built_with_the_systems_python(account):
    home, course = account
    done = as_account(home, course, '.venv/bin/python -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"',
                      timeout=120)
    system = subprocess.run([SYSTEM_PYTHON, '-c', 'import sys; print(sys.version.split()[0])'], capture_output=True,
                            text=True).stdout.split()[0]
    assert done.returncode == 0 and done.stdout.split() == [system, '2.13.0+cpu'], done.stdout + done.stderr


def test_sandbox_tests_pass_as_that_account(account):
    """tests/test_sandbox.py, every guarantee, on warm kernels (what a user grades with, built differently from root's:
    docs/security.md), as the account. Its cold kernels, which were a user's only kind before, are left out of make
    test's time budget: `pytest tests/test_sandbox.py` as a user runs them. The one test that skips is the per-kernel
    totals', which need a cgroup the account may make (docs/security.md: uncapped for a user); it must skip for that reason
    and no other."""
    home, course = account
    done = as_account(home, course, '.venv/bin/python -m pytest -q -p no:cacheprovider -o addopts=-rs tests/test_sandbox.py '
                      "-k 'warm'", timeout=900)
    skipped = [line for line in done.stdout.splitlines() if line.startswith('SKIPPED')]
    assert done.returncode == 0 and ' passed' in done.stdout and ' 1 skipped' in done.stdout, done.stdout[-5000:]
    assert len(skipped) == 1 and 'may not make a cgroup' in skipped[0], skipped


def test_a_demo_class_is_graded_with_warm_kernels_as_that_account(account):
    """course.grader.grade --demo on the first step's sample of its bank, as the account: warm kernels, sandboxed, and the
    perfect submission gets full marks."""
    home, course = account
    done = as_account(home, course, '.venv/bin/python -m course.grader.grade --demo --sample --step step1', timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and 'grading with warm kernels' in out, out[-3000:]
    perfect = next(line for line in done.stdout.splitlines() if line.startswith('perfect '))
    got, most = re.search(r' (\d+)/(\d+)', perfect).groups()
    assert got == most, perfect
