"""Fixtures of the hub tests (make test-hub; plain make test does not collect this folder: tests/conftest.py).

  unix_users    a factory: unix_users('student1') makes a real Unix user PREFIX<pid>-student1 (hubkit.create_user),
                removed with its home after the session; users a killed run left are swept first
  user_python   the bin folder of a venv with the course's requirements that every one of those users can run
  exchange      nbgrader's exchange (root-owned, 0777 as nbgrader's docs set it) and a global nbgrader config naming it
                and the course: hubkit.Exchange(root, config, env), env holding JUPYTER_CONFIG_PATH; one per test module
  postgres      a throwaway PostgreSQL server on a unix socket (hubkit.Postgres): postgres.database(name) makes a
                database and returns its URL for COURSE_GRADEBOOK_URL; postgres.allow(user) lets a grader's account in

All of them need root (they skip, saying why, otherwise) and stop or remove what they made.
"""

import os

# One torch thread in every process, as tests/conftest.py sets for the main suite (this folder is collected alone).
os.environ.setdefault('OMP_NUM_THREADS', '1')

import shutil
import subprocess
import tempfile

import pytest

from support.hub import hubkit


@pytest.fixture(scope='session')
def root_only():
    reason = hubkit.why_not_root()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope='session')
def unix_users(root_only):
    hubkit.sweep_stale_users()
    made = []

    def make(role, groups=()):
        user = hubkit.create_user(role, groups)
        made.append(user)
        return user

    yield make
    for user in made:
        hubkit.remove_user(user.name)


@pytest.fixture(scope='session')
def user_python(root_only):
    try:
        return hubkit.user_venv()
    except (RuntimeError, subprocess.CalledProcessError) as e:
        pytest.skip(f'no venv the test users can run: {e}')


@pytest.fixture(scope='module')
def exchange(root_only):
    base = tempfile.mkdtemp(prefix='course-exchange-')  # in /tmp, not pytest's tmp_path: that is root's alone (0700)
    yield hubkit.make_exchange(base)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope='session')
def postgres(root_only):
    if hubkit.postgres_bin() is None or hubkit.missing_tools('psql'):
        pytest.skip("no PostgreSQL server here: make test-hub installs Debian's postgresql as root")
    try:
        hubkit.pwd.getpwnam('postgres')
    except KeyError:
        pytest.skip("no `postgres` account (Debian's postgresql package makes it): PostgreSQL will not run as root")
    server = hubkit.Postgres(tempfile.mkdtemp(prefix='course-postgres-'))
    yield server
    server.stop()
