"""JupyterHub from hub/jupyterhub_config.py run as root on this host (not in tests/support/hub/machine.py's machine), on free
loopback ports, in a state folder of its own, with LocalProcessSpawner: what tests/hub/test_lti_launch.py drives (the
LMS stand-in and the launch need no systemd, and a hub in a machine of its own would need the stand-in in it too).

Nothing here shares a name with a real class on this host: the hub's Unix groups are this run's own (GROUPS, never made:
an LTI hub reads the graders' group only if it exists), the ports are free ones, the idle culler is off, and the proxy
is the one `make hub-env` installed at HUB_ENV. The hub stops every server it started when it stops.
"""

import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from course.layout import ROOT
from support import REFERENCE_STEP
from support.hub.hubkit import PREFIX, in_this_pid_namespace

COURSE_ID = 'transformer-from-scratch'
STEP = REFERENCE_STEP  # what an LTI launch opens (tests/support: the step the docs' pictures show)
HUB_ENV = Path(os.environ.get('HUB_ENV', '/opt/transformer-hub'))
SHARE = HUB_ENV / 'share' / 'course-hub'
ROLES = SHARE / 'roles'
PROXY = SHARE / 'proxy' / 'node_modules' / '.bin' / 'configurable-http-proxy'
# this run's own names for the hub's groups (hub/jupyterhub_config.py's COURSE_*_GROUP): never a real class's
STUDENTS_GROUP, GRADERS_GROUP = f'{PREFIX}{os.getpid()}-students', f'{PREFIX}{os.getpid()}-graders'


def require_root():
    """Skip, saying why, where the hub cannot run: not root, no account tools, `make hub-env` not run."""
    if os.geteuid() != 0:
        pytest.skip('the hub tests create Unix accounts and start JupyterHub as root (LocalProcessSpawner): run as root')
    missing = [t for t in ('useradd', 'userdel', 'runuser') if not shutil.which(t)]
    if missing:
        pytest.skip(f'needs {", ".join(missing)} (Debian: passwd, util-linux)')
    if not (HUB_ENV / '.installed').exists() or not PROXY.exists() or not ROLES.is_dir():
        pytest.skip(f'the hub is not installed: run `make hub-env` as root (the environment and proxy at {HUB_ENV})')


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


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Hub:
    """JupyterHub from hub/jupyterhub_config.py, run as root in a state folder of its own, on free loopback ports.
    classroom: .base (a folder the state goes in), .course (COURSE_ROOT), .exchange, .instructor, .users()."""

    def __init__(self, classroom, env=None):
        """env: more settings of hub/jupyterhub_config.py (COURSE_HUB_AUTH=lti and another instructor, say)."""
        self.classroom = classroom
        self.state = classroom.base / 'hub'
        self.state.mkdir(mode=0o700)
        self.port, self.api_port, self.proxy_port, self.formgrader_port = (free_port() for _ in range(4))
        self.url = f'http://127.0.0.1:{self.port}'
        env = {'PATH': f'{HUB_ENV / "bin"}:/usr/bin:/bin', 'LANG': 'C.UTF-8', 'HOME': '/root',
               'COURSE_INSTRUCTOR': classroom.instructor['name'], 'COURSE_ROOT': str(classroom.course),
               'COURSE_EXCHANGE': str(classroom.exchange), 'COURSE_HUB_ENV': str(HUB_ENV),
               'COURSE_STUDENTS_GROUP': STUDENTS_GROUP, 'COURSE_GRADERS_GROUP': GRADERS_GROUP,
               'COURSE_HUB_SPAWNER': 'local', 'COURSE_HUB_CULL_IDLE': '0', 'COURSE_HUB_PROXY': str(PROXY),
               'COURSE_HUB_PORT': str(self.port), 'COURSE_HUB_API_PORT': str(self.api_port),
               'COURSE_PROXY_API_PORT': str(self.proxy_port), 'COURSE_FORMGRADER_PORT': str(self.formgrader_port),
               **(env or {})}
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
            if not in_this_pid_namespace(p.info['pid']):
                continue  # a hub test's systemd machine beside this hub: its accounts have the same ids, not ours
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
