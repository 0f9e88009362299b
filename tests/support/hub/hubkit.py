"""What the hub tests share (tests/hub/conftest.py makes fixtures of it): real Unix users, a Python every one of them can
run, nbgrader's exchange with its documented permissions and a global nbgrader config naming it, and a throwaway
PostgreSQL server. Everything runs as root (the tests skip otherwise) and everything made here is removed after."""

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from course.layout import ROOT

# Every Unix user the hub tests create is named PREFIX<pid>-<role>: PREFIX marks them as ours, the pid of the pytest
# process that made them tells a leftover of a killed run (its pid gone) from a run in progress (another worktree's).
PREFIX = 'nbt'
GECOS = 'course hub test, pid '
COURSE_ID = 'transformer-from-scratch'  # nbgrader_config.py's CourseDirectory.course_id
NO_SANDBOX = ('no sandbox on this machine: bubblewrap is missing or cannot create namespaces here '
              '(as root with apt-get, `make system` installs it); the course grades a real class only sandboxed')
LOCKS = Path('/run/lock') if Path('/run/lock').is_dir() else Path(tempfile.gettempdir())


def missing_tools(*tools):
    return [t for t in tools if not shutil.which(t)]


def why_not_root():
    """Why the hub tests cannot run here (a line), or None."""
    if os.geteuid() != 0:
        return 'not root: the hub tests create Unix users and run commands as them (run make test-hub as root, as CI does)'
    missing = missing_tools('useradd', 'userdel', 'runuser')
    return f'needs {", ".join(missing)} (Debian: the passwd and util-linux packages)' if missing else None


@contextlib.contextmanager
def locked(name):
    """An exclusive lock between processes on this machine (useradd and userdel, the shared venv's build)."""
    with open(LOCKS / f'course-hub-{name}.lock', 'w') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


class User(NamedTuple):
    name: str
    uid: int
    gid: int
    home: Path


def create_user(role, groups=()):
    """A new Unix user PREFIX<pid>-<role> with a home of its own (0700) and a group of its own; groups: more groups."""
    name = f'{PREFIX}{os.getpid()}-{role}'
    with locked('users'):
        subprocess.run(['useradd', '--create-home', '--user-group', '--shell', '/bin/sh', '--comment',
                        f'{GECOS}{os.getpid()}', *(['--groups', ','.join(groups)] if groups else []), name],
                       check=True, capture_output=True)
    entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    home.chmod(0o700)  # whatever the system's HOME_MODE: a student's files are their own
    return User(name, entry.pw_uid, entry.pw_gid, home)


def kill_processes_of(name):
    """SIGKILL every process of user name in this process's PID namespace, and none elsewhere: pkill -u matches a
    number, which a process in another PID namespace on this kernel (a container's) may have too. (The hub tests'
    systemd machines, tests/support/hub/machine.py, give their accounts ids apart from the host's: machine.IDS.)"""
    subprocess.run(['pkill', '-KILL', '-u', name, '--ns', str(os.getpid()), '--nslist', 'pid'], capture_output=True)


def in_this_pid_namespace(pid):
    """Whether process pid is in this process's PID namespace (not in a hub test's systemd machine); False once gone."""
    try:
        return os.readlink(f'/proc/{pid}/ns/pid') == os.readlink('/proc/self/ns/pid')
    except OSError:
        return False


def remove_user(name):
    """Remove a user and its home; the processes it left first (only those of this PID namespace: kill_processes_of)."""
    kill_processes_of(name)
    with locked('users'):
        subprocess.run(['userdel', '--remove', name], capture_output=True)


def sweep_stale_users():
    """Remove the users a killed test run left (ours by PREFIX and GECOS; its pid no longer running)."""
    for entry in pwd.getpwall():
        if entry.pw_name.startswith(PREFIX) and entry.pw_gecos.startswith(GECOS):
            pid = entry.pw_gecos.removeprefix(GECOS)
            if pid.isdigit() and not Path(f'/proc/{pid}').exists():
                remove_user(entry.pw_name)


def user_env(user, python_bin, **extra):
    """A plain login environment for user, with python_bin (a venv's bin folder) first on PATH."""
    return {'HOME': str(user.home), 'USER': user.name, 'LOGNAME': user.name, 'LANG': 'C.UTF-8', 'SHELL': '/bin/sh',
            'PATH': f'{python_bin}:/usr/local/bin:/usr/bin:/bin', **extra}


def as_user(user, argv, env, cwd=None, input=None, timeout=300, check=True):
    """Run argv as user (runuser: its uid, gid and groups, no capabilities) with exactly env, in cwd (default its
    home); the CompletedProcess (text). check: fail with what it printed if it exits non-zero."""
    argv = [str(a) for a in argv]
    cmd = ['runuser', '-u', user.name, '--', 'env', '-i', *(f'{k}={v}' for k, v in env.items()),
           'sh', '-c', 'cd "$0" && exec "$@"', str(cwd or user.home), *argv]
    done = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode:
        raise AssertionError(f'{" ".join(argv)} as {user.name} exited {done.returncode}:\n{done.stdout[-3000:]}'
                             f'\n{done.stderr[-3000:]}')
    return done


# A venv every test user can run, with the course's requirements: the course's own .venv often cannot be (its Python
# is pyenv's under /root, mode 0700, as in CI). Built once per machine and requirements.txt, with the system's Python
# (Debian 12's python3.11: make system installs its venv module), kept between runs as tests/test_nonroot.py's is.
SHARED_VENVS = Path('/opt/course-hub')
SYSTEM_PYTHON = '/usr/bin/python3.11'


def runnable_by_others(python):
    """Whether a user with no rights of its own could run python: every folder on its way (and the links') traversable."""
    path = Path(python)
    for p in [path, *path.resolve().parents, *path.parents, path.resolve()]:
        mode = p.stat().st_mode
        if p.is_dir() and not mode & 0o001 or p.is_file() and not mode & 0o005 == 0o005:
            return False
    return True


def hub_env_current(hub):
    """Whether hub/install.sh built the environment at hub from this checkout's requirements (its stamp holds their
    sha256, as install.sh writes it)."""
    stamp = Path(hub) / '.installed'
    want = hashlib.sha256((ROOT / 'requirements.txt').read_bytes() + (ROOT / 'hub' / 'requirements.txt').read_bytes())
    return stamp.is_file() and stamp.read_text().strip() == want.hexdigest()


def user_venv(timeout=1800):
    """The bin folder of a venv with the course's requirements that every test user can run: the course's own .venv
    where others can run it, else $HUB_ENV where `make hub-env` built it from this requirements.txt, else
    SHARED_VENVS/venv-<hash of requirements.txt>, built now if missing (minutes, once)."""
    own = Path(sys.executable).parent
    if runnable_by_others(sys.executable) and (own.parent / 'pyvenv.cfg').exists():
        return own
    # the hub's own environment, where `make hub` built it for every account (HUB_ENV, docs/hub.md): the same packages
    hub = Path(os.environ.get('HUB_ENV', '/nonexistent'))
    if hub_env_current(hub):
        return hub / 'bin'
    requirements = (ROOT / 'requirements.txt').read_bytes()
    venv = SHARED_VENVS / f'venv-{hashlib.sha256(requirements).hexdigest()[:12]}'
    SHARED_VENVS.mkdir(mode=0o755, exist_ok=True)
    with locked('venv'):
        if not (venv / '.installed').exists():
            if not os.access(SYSTEM_PYTHON, os.X_OK):
                raise RuntimeError(f'{SYSTEM_PYTHON} missing: make test-hub installs it (apt install python3.11-venv)')
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([SYSTEM_PYTHON, '-m', 'venv', venv], check=True)
            subprocess.run([venv / 'bin' / 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-compile',
                            '-r', ROOT / 'requirements.txt'], check=True, timeout=timeout)
            subprocess.run([venv / 'bin' / 'python', '-m', 'compileall', '-q', '-j', '0', venv / 'lib'],
                           capture_output=True)
            (venv / '.installed').write_text(requirements.decode())
    return venv / 'bin'


class Exchange(NamedTuple):
    root: Path  # nbgrader's Exchange.root
    config: Path  # the folder of the global nbgrader_config.py: JUPYTER_CONFIG_PATH for everyone of the course
    env: dict  # what every process of the course needs in its environment to find it


def make_exchange(base, course_id=COURSE_ID, extra_config=''):
    """nbgrader's exchange in base (a fresh folder others can traverse) as nbgrader's documentation sets one up: a
    root-owned folder everyone may write (`chmod ugo+rw`, what release_assignment itself asks for: 0777), and a global
    nbgrader_config.py naming it and the course. The tests point JUPYTER_CONFIG_PATH at that config's folder instead
    of writing /etc/jupyter, which is the machine's."""
    base = Path(base)
    base.chmod(0o755)
    root, config = base / 'exchange', base / 'etc-jupyter'
    root.mkdir()
    root.chmod(0o777)
    config.mkdir(mode=0o755)
    (config / 'nbgrader_config.py').write_text(
        '# The machine-wide nbgrader settings (normally /etc/jupyter/nbgrader_config.py): where the exchange is, and the\n'
        '# course every student fetches from.\n'
        'c = get_config()  # noqa: F821\n'
        f'c.Exchange.root = {str(root)!r}\n'
        f'c.CourseDirectory.course_id = {course_id!r}\n' + extra_config)
    (config / 'nbgrader_config.py').chmod(0o644)
    return Exchange(root, config, {'JUPYTER_CONFIG_PATH': str(config)})


def postgres_bin():
    """Debian's PostgreSQL server programs (the newest installed), or None."""
    found = sorted(Path('/usr/lib/postgresql').glob('*/bin/initdb'),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    return found[-1].parent if found else None


class Postgres:
    """A throwaway PostgreSQL cluster: initdb into base/data as the `postgres` account (the server refuses root), the
    server on a unix socket only (base/socket; no TCP), peer authentication. OS users reach the role `gradebook`
    (which owns every database made here) through an ident map: root from the start, others once allow()ed; anyone
    else is refused (a student cannot open the gradebook). stop() stops it and removes base."""

    ROLE = 'gradebook'

    def __init__(self, base):
        self.base = Path(base)
        self.bin = postgres_bin()
        self.data, self.socket, self.log = self.base / 'data', self.base / 'socket', self.base / 'server.log'
        account = pwd.getpwnam('postgres')
        self.base.chmod(0o755)
        for folder in (self.data, self.socket):
            folder.mkdir(mode=0o700)
            os.chown(folder, account.pw_uid, account.pw_gid)
        self.socket.chmod(0o755)  # anyone may knock; pg_hba.conf decides who is let in
        os.chown(self.base, account.pw_uid, account.pw_gid)
        self._as_postgres('initdb', '-D', self.data, '-U', 'postgres', '--auth-local=peer', '--auth-host=reject',
                          '--no-sync', '--encoding=UTF8', '--locale=C')
        (self.data / 'pg_hba.conf').write_text('local all postgres peer\nlocal all all peer map=course\n')
        self.allowed = ['root']
        self._write_ident()
        # fsync off: a throwaway cluster; the tests' own load, not the disk's, is what they measure
        self._as_postgres('pg_ctl', '-D', self.data, '-l', self.log, '-w', '-t', '300', '-o',
                          f"-c listen_addresses='' -k {self.socket} -c fsync=off -c max_connections=200", 'start')
        self.psql('postgres', f'create role {self.ROLE} login')

    def _as_postgres(self, program, *args):
        done = subprocess.run(['runuser', '-u', 'postgres', '--', self.bin / program, *map(str, args)],
                              capture_output=True, text=True, cwd=self.base)
        if done.returncode:
            log = self.log.read_text() if self.log.exists() else ''
            raise RuntimeError(f'{program} failed:\n{done.stdout}{done.stderr}{log[-3000:]}')
        return done

    def _write_ident(self):
        (self.data / 'pg_ident.conf').write_text(''.join(f'course {u} {self.ROLE}\n' for u in self.allowed))

    def psql(self, database, sql, user='postgres'):
        """Run sql with psql as the database user (postgres: the superuser); its output (unaligned, tuples only)."""
        done = subprocess.run(['runuser', '-u', 'postgres', '--', self.bin / 'psql', '-h', self.socket, '-U', user,
                               '-d', database, '-v', 'ON_ERROR_STOP=1', '-At', '-c', sql],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f'psql {sql!r} failed: {done.stderr}')
        return done.stdout

    def database(self, name):
        """A new database owned by the gradebook role; its URL (the value of COURSE_GRADEBOOK_URL)."""
        self.psql('postgres', f'create database "{name}" owner {self.ROLE}')
        return self.url(name)

    def url(self, name):
        return f'postgresql://{self.ROLE}@/{name}?host={self.socket}'

    def allow(self, user):
        """Let the OS user (a grader's account) open the gradebook role's databases; returns when the server says so."""
        self.allowed.append(user.name)
        self._write_ident()
        self._as_postgres('pg_ctl', '-D', self.data, 'reload')
        probe = ['runuser', '-u', user.name, '--', self.bin / 'psql', '-h', self.socket, '-U', self.ROLE, '-d', 'postgres',
                 '-Atc', 'select 1']
        deadline = time.monotonic() + 60
        while subprocess.run(probe, capture_output=True).returncode:  # the server rereads its files on the signal
            assert time.monotonic() < deadline, f'PostgreSQL did not let {user.name} in after a reload'
            time.sleep(0.1)

    def stop(self):
        with contextlib.suppress(RuntimeError):
            self._as_postgres('pg_ctl', '-D', self.data, '-m', 'fast', '-w', 'stop')
        shutil.rmtree(self.base, ignore_errors=True)
