"""An instructor who is not root, with the system's Python (most are). Run as root (as CI is), this module creates a plain
account, gives it a copy of the course, and as that account: builds the venv with the system's python3.11 through the
Makefile, runs the sandbox tests, and grades a demo class. Run as a user already, the whole suite is that check, and this
module skips.

The account keeps its venv between runs (~course-instructor/course/.venv): it is rebuilt when requirements.txt changes,
as the Makefile does for anyone. It builds it from a wheelhouse beside it (~course-instructor/wheels), with pip's index
turned off: the account downloads nothing. Root fills the wheelhouse first with `pip wheel` of requirements.txt, as its
own venv was built (the same pip settings), offline from the wheelhouse itself when it holds them all (every run after
the first, until requirements.txt changes), and with torch held to its CPU build."""

import os
import pwd
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NO_SANDBOX, can_sandbox
from course.layout import ROOT, steps

ACCOUNT = 'course-instructor'
SYSTEM_PYTHON = '/usr/bin/python3.11'  # Debian 12's (3.11.2), not the pyenv build the suite itself runs on
NOT_COPIED = ('.git', '.venv', '.build', '.ruff_cache', '__pycache__', 'submitted', 'autograded', 'feedback', 'results',
              'repairs', 'gradebook.db', 'grades*.csv', 'test-artifacts', 'input.txt')

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason='not root: this whole run is the non-root check'),
              pytest.mark.skipif(not can_sandbox(), reason=NO_SANDBOX)]


def as_account(home, cwd, command, timeout, pip=()):
    """Run command (a shell line) as ACCOUNT in cwd, with a plain user's environment (and pip, extra PIP_... settings);
    the CompletedProcess."""
    env = ['env', '-i', f'HOME={home}', f'USER={ACCOUNT}', f'LOGNAME={ACCOUNT}', 'PATH=/usr/local/bin:/usr/bin:/bin',
           'LANG=C.UTF-8', *(f'{k}={os.environ[k]}' for k in ('PIP_INDEX_URL', 'PIP_EXTRA_INDEX_URL', 'PIP_FIND_LINKS',
                                                              'PIP_NO_INDEX') if k in os.environ), *pip]
    return subprocess.run(['runuser', '-u', ACCOUNT, '--', *env, 'sh', '-c', f'cd {cwd} && {command}'],
                          capture_output=True, text=True, timeout=timeout)


# torch's CPU build, the one requirements.txt means (its pin, 2.13.0, alone also matches the multi-GB CUDA build on PyPI)
CPU_TORCH = 'torch==2.13.0+cpu'


def wheelhouse(folder):
    """folder filled with a wheel of every package requirements.txt installs (pip wheel, as root, with root's pip
    settings: the ones its own venv was built with), for the account's offline install; the wheels already there are
    reused: offline from folder alone when it holds them all, else with the index for what it lacks. torch is held to its
    CPU build (a constraint): where pip cannot find that, this fails before downloading any other."""
    folder.mkdir(exist_ok=True)
    pins = [line.split('#')[0].strip() for line in (ROOT / 'requirements.txt').read_text().splitlines()]
    torch = [pin for pin in pins if pin.startswith('torch==')]
    assert torch and CPU_TORCH.startswith(torch[0]), f'requirements.txt pins {torch}, not the version of {CPU_TORCH}'
    (folder / 'constraints.txt').write_text(f'{CPU_TORCH}\n')
    wheel = [sys.executable, '-m', 'pip', 'wheel', '--quiet', '--disable-pip-version-check', '--wheel-dir', str(folder),
             '--find-links', str(folder), '--constraint', str(folder / 'constraints.txt'), '-r', str(ROOT / 'requirements.txt')]
    done = subprocess.run([*wheel, '--no-index'], capture_output=True, text=True)
    if done.returncode:  # the wheelhouse lacks some (the first run, or requirements.txt changed): fetched, the rest reused
        done = subprocess.run(wheel, capture_output=True, text=True)
    assert done.returncode == 0, f'pip wheel into {folder} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    return folder


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
    # root's, readable by the account; filled only when make will build the venv (its rule: requirements.txt newer than
    # .venv/.installed): resolving 150 pins, even offline, took about 15 s of CPU (5 min at a load average of 25)
    installed = course / '.venv' / '.installed'
    fresh = installed.exists() and installed.stat().st_mtime >= (course / 'requirements.txt').stat().st_mtime
    wheels = home / 'wheels' if fresh else wheelhouse(home / 'wheels')
    done = as_account(home, course, f'make data PYTHON={SYSTEM_PYTHON} DATA={data}', timeout=1200,
                      pip=['PIP_NO_INDEX=1', f'PIP_FIND_LINKS={wheels}', f'PIP_CONSTRAINT={wheels}/constraints.txt'])
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
    done = as_account(home, course, f'.venv/bin/python -m course.grader.grade --demo --sample --step {steps()[0]}', timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and 'grading with warm kernels' in out, out[-3000:]
    perfect = next(line for line in done.stdout.splitlines() if line.startswith('perfect '))
    got, most = re.search(r' (\d+)/(\d+)', perfect).groups()
    assert got == most, perfect
