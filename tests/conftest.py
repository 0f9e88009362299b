"""Shared fixtures: the course's notebooks, parametrized over every assignment in source/."""

import os
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'tools'))

import sandbox  # noqa: E402
from course import assignments, notebooks  # noqa: E402

NOTEBOOKS = [(aid, name) for aid in assignments() for name in notebooks(aid)]


@pytest.fixture(params=NOTEBOOKS, ids=[f'{a}/{n}' for a, n in NOTEBOOKS])
def notebook(request):
    """(assignment id, notebook name) of every source notebook."""
    return request.param


def read(path):
    return nbformat.read(path, as_version=4)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on (free now; the caller binds it or relies on it being closed)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='session')
def graded(tmp_path_factory, plain_started):
    """One class graded by the real command (tools/grade.py) in a copy of the course: the demo class (perfect, blank, every
    mistake and alternative of each step's
    instructor/bank.py) and every damaged, broken and hostile case of tests/corpus.py; and, first,
    a few clean students alone, to compare with. Plain nbgrader grades its demo class at the same time (plain_started)."""
    from classroom import grade_class

    return grade_class(tmp_path_factory.mktemp('course'))


@pytest.fixture(scope='session')
def plain_started(tmp_path_factory):
    """The demo class being graded by plain serial `nbgrader autograde`, in a thread (nbgrader itself runs in a process of
    its own): a future of {(assignment, student): {test cell: score}}."""
    from classroom import grade_plain

    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(grade_plain, tmp_path_factory.mktemp('plain'))


@pytest.fixture(scope='session')
def plain(plain_started):
    """The demo class graded by plain serial `nbgrader autograde`: {(assignment, student): {test cell: score}}."""
    return plain_started.result()


def ensure_sandbox():
    """Whether this machine can sandbox a grading kernel; installs bubblewrap first when it is missing (CI is root on a
    fresh Debian)."""
    if not shutil.which('bwrap') and os.geteuid() == 0 and shutil.which('apt-get'):
        install = ['apt-get', 'install', '-y', '-q', 'bubblewrap']
        env = {**os.environ, 'DEBIAN_FRONTEND': 'noninteractive'}
        if subprocess.run(install, capture_output=True, env=env).returncode:
            subprocess.run(['apt-get', 'update', '-q'], capture_output=True, env=env)
            subprocess.run(install, capture_output=True, env=env)
    return sandbox.available()


def running(marker):
    """Command lines of the processes whose command line holds marker."""
    done = subprocess.run(['pgrep', '-af', marker], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if 'pgrep' not in line]
