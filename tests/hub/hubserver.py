"""A class on the hub, for real: Unix accounts (an instructor, a grader, three students) with passwords for PAM, nbgrader's
exchange (root-owned, mode 1777), the instructor's copy of the course with Step 4 released, and JupyterHub started
from hub/jupyterhub_config.py on free loopback ports, then stopped with every server it started.

Run as root, after `make hub` (the proxy in hub/node_modules, the environment every account's server runs from at
HUB_ENV). Accounts and groups are kept between runs (created when missing, passwords set anew); homes and the exchange
are made fresh."""

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from course.layout import ROOT, copy_course

COURSE_ID = 'transformer-from-scratch'
INSTRUCTOR = 'tfs-instructor'
GRADERS = ['tfs-grader1']
STUDENTS = ['tfs-student1', 'tfs-student2', 'tfs-student3']
STUDENTS_GROUP, GRADERS_GROUP = 'transformer-students', 'transformer-graders'  # hub/jupyterhub_config.py's defaults
STEP = 'step4'
HUB_ENV = Path(os.environ.get('HUB_ENV', '/opt/transformer-hub'))
ROLES = HUB_ENV / 'share' / 'course-hub' / 'roles'
PROXY = ROOT / 'hub' / 'node_modules' / '.bin' / 'configurable-http-proxy'


def require_root():
    """Skip, saying why, where the hub cannot run: not root, no account tools, `make hub` not run."""
    if os.geteuid() != 0:
        pytest.skip('the hub tests create Unix accounts and start JupyterHub as root (LocalProcessSpawner): run as root')
    missing = [t for t in ('useradd', 'groupadd', 'chpasswd', 'runuser') if not shutil.which(t)]
    if missing:
        pytest.skip(f'needs {", ".join(missing)} (Debian: passwd, util-linux)')
    if not (HUB_ENV / '.installed').exists() or not PROXY.exists() or not ROLES.is_dir():
        pytest.skip(f'the hub is not installed: run `make hub` as root (the proxy in hub/node_modules, {HUB_ENV})')


def account(name, group):
    """The Unix account name in group (created when missing), its home fresh (mode 0700), a new random password."""
    subprocess.run(['groupadd', '-f', group], check=True)
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(['useradd', '--create-home', '--shell', '/bin/bash', '--user-group', name], check=True)
    subprocess.run(['usermod', '-a', '-G', group, name], check=True)
    user = pwd.getpwnam(name)
    home = Path(user.pw_dir)
    kill_processes_of(user.pw_uid)  # a server left by an earlier, killed run
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(mode=0o700)
    os.chmod(home, 0o700)  # whatever the system's HOME_MODE: no account reads another's home
    os.chown(home, user.pw_uid, user.pw_gid)
    password = secrets.token_urlsafe(12)
    subprocess.run(['chpasswd'], input=f'{name}:{password}\n', text=True, check=True)
    return {'name': name, 'uid': user.pw_uid, 'gid': user.pw_gid, 'home': home, 'password': password}


def kill_processes_of(uid):
    for p in psutil.process_iter(['uids']):
        if p.info['uids'] and p.info['uids'].real == uid:
            p.kill()


def chown_tree(path, user):
    for p in [path, *path.rglob('*')]:
        os.chown(p, user['uid'], user['gid'], follow_symlinks=False)


def user_env(user, exchange, role):
    """The environment of a server the hub starts for user (hub/jupyterhub_config.py: environment()), for commands."""
    return {'HOME': str(user['home']), 'USER': user['name'], 'LOGNAME': user['name'], 'LANG': 'C.UTF-8',
            'PATH': f'{HUB_ENV / "bin"}:/usr/bin:/bin', 'OMP_NUM_THREADS': '1', 'COURSE_ID': COURSE_ID,
            'COURSE_EXCHANGE': str(exchange), 'JUPYTER_CONFIG_PATH': f'{ROLES / role}:{ROLES / "common"}'}


def as_user(user, exchange, args, cwd=None, role='student', timeout=600):
    """Run args as user (runuser, a plain environment like their server's) in cwd (default: their home)."""
    env = [f'{k}={v}' for k, v in user_env(user, exchange, role).items()]
    return subprocess.run(['runuser', '-u', user['name'], '--', 'env', '-i', *env, *args], cwd=cwd or user['home'],
                          capture_output=True, text=True, timeout=timeout)


def ok(done, what):
    assert done.returncode == 0, f'{what} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    return done


class Classroom:
    """The accounts, the exchange and the instructor's course directory (COURSE_ROOT), Step 4 released."""

    def __init__(self, base):
        self.base = base
        self.exchange = base / 'exchange'
        self.exchange.mkdir()
        os.chmod(self.exchange, 0o1777)  # nbgrader's ugo+rwx, and sticky: only its owner renames or deletes a folder
        self.instructor = account(INSTRUCTOR, GRADERS_GROUP)
        self.graders = [account(name, GRADERS_GROUP) for name in GRADERS]
        self.students = [account(name, STUDENTS_GROUP) for name in STUDENTS]
        self.course = self.instructor['home'] / COURSE_ID
        copy_course(self.course)
        chown_tree(self.course, self.instructor)
        for student in self.students:  # Tiny Shakespeare where the notebook looks (three folders up from ~/step4/)
            data = student['home'] / 'input.txt'
            shutil.copy(ROOT / 'input.txt', data)
            os.chown(data, student['uid'], student['gid'])
        # release/ is the student version make build wrote (nbgrader's generate_assignment): released as it is
        self.instructor_run(['nbgrader', 'release_assignment', STEP], 'release_assignment')

    def instructor_run(self, args, what, timeout=600):
        return ok(as_user(self.instructor, self.exchange, args, cwd=self.course, role='staff', timeout=timeout), what)

    def student_run(self, student, args, timeout=300):
        return as_user(student, self.exchange, args, timeout=timeout)

    def users(self):
        return [self.instructor, *self.graders, *self.students]


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Hub:
    """JupyterHub from hub/jupyterhub_config.py, run as root in a state folder of its own, on free loopback ports."""

    def __init__(self, classroom):
        self.classroom = classroom
        self.state = classroom.base / 'hub'
        self.state.mkdir(mode=0o700)
        self.port, self.api_port, self.proxy_port, self.formgrader_port = (free_port() for _ in range(4))
        self.url = f'http://127.0.0.1:{self.port}'
        env = {'PATH': f'{HUB_ENV / "bin"}:/usr/bin:/bin', 'LANG': 'C.UTF-8', 'HOME': '/root',
               'COURSE_INSTRUCTOR': INSTRUCTOR, 'COURSE_ROOT': str(classroom.course),
               'COURSE_EXCHANGE': str(classroom.exchange), 'COURSE_HUB_ENV': str(HUB_ENV),
               'COURSE_HUB_PORT': str(self.port), 'COURSE_HUB_API_PORT': str(self.api_port),
               'COURSE_PROXY_API_PORT': str(self.proxy_port), 'COURSE_FORMGRADER_PORT': str(self.formgrader_port)}
        self.log_path = self.state / 'jupyterhub.log'
        self.log = open(self.log_path, 'w')
        self.process = subprocess.Popen([str(HUB_ENV / 'bin' / 'jupyterhub'), '-f', str(ROOT / 'hub' / 'jupyterhub_config.py')],
                                        cwd=self.state, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self.wait_ready()
        except BaseException:  # a hub that exits on a critical error leaves its proxy running: stop what started
            self.kill_left(self.stop())
            raise

    @staticmethod
    def kill_left(left):
        for line in left:
            try:
                psutil.Process(int(line.split()[0])).kill()
            except psutil.NoSuchProcess:
                pass

    def log_tail(self, n=4000):
        """The hub's log without the proxy's lines (which repeat every failed request), its last n characters."""
        lines = self.log_path.read_text(errors='replace').splitlines()
        own = [line for line in lines if '[ConfigProxy]' not in line and not line.startswith((' ', '}'))]
        return '\n'.join(own)[-n:]

    def wait_ready(self, timeout=300):
        """Until the hub answers its health check through the proxy (a busy machine takes a while), or it exits."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f'{self.url}/hub/health', timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            assert self.process.poll() is None, f'JupyterHub exited ({self.process.returncode}):\n{self.log_tail()}'
            assert time.monotonic() < deadline, f'JupyterHub not ready in {timeout} s:\n{self.log_tail()}'
            time.sleep(0.3)

    def left_running(self):
        """'pid user command' of every process of the class's accounts, and of the proxy, still running."""
        uids = {u['uid'] for u in self.classroom.users()}
        left = []
        for p in psutil.process_iter(['pid', 'uids', 'cmdline']):
            cmd = ' '.join(p.info['cmdline'] or [])
            if (p.info['uids'] and p.info['uids'].real in uids) or (str(self.proxy_port) in cmd and 'proxy' in cmd):
                left.append(f"{p.info['pid']} {p.info['uids'] and p.info['uids'].real} {cmd[:200]}")
        return left

    def stop(self, timeout=120):
        """SIGTERM the hub and wait for it to exit: it stops every server it spawned, its service and the proxy
        (cleanup_servers, cleanup_proxy). Returns what was still running after it exited (should be nothing)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        deadline = time.monotonic() + 30  # a server told to stop may take a moment to exit after the hub has
        while (left := self.left_running()) and time.monotonic() < deadline:
            psutil.wait_procs([psutil.Process(int(line.split()[0])) for line in left if psutil.pid_exists(int(line.split()[0]))],
                              timeout=1)
        return left


@pytest.fixture(scope='session')
def classroom():
    require_root()
    base = Path(tempfile.mkdtemp(prefix='course-hub-', dir='/var/tmp'))
    os.chmod(base, 0o755)  # the accounts reach the exchange inside it
    try:
        room = Classroom(base)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    yield room
    for user in room.users():
        kill_processes_of(user['uid'])
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope='session')
def hub(classroom):
    server = Hub(classroom)
    yield server
    server.kill_left(server.stop())  # never leave a server running, whatever the tests said

