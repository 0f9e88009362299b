"""The class's hub, installed and run by following docs/hub.md's commands as written, in a machine of its own
(tests/support/hub/machine.py: this host's root filesystem through an overlay in memory, systemd as its PID 1, a network of its
own, loopback only). Nothing the tests make (accounts, groups, /etc/transformer-hub, /srv/nbgrader, ports 8000 and 443,
systemd units) is this host's: the machine and all it holds are gone when the session ends, and a real class on this
host is never touched.

Run as root, after `make test-hub`'s `make hub-env` (the environment and the proxy at HUB_ENV, which the machine sees
through its overlay, so that the docs' `make hub` finds them current and needs no network).

docs/hub.md marks each block of commands a test runs with an HTML comment, <!-- hub-test: NAME -->. The test runs each
line as root in the machine, as written, except the substitutions in SUBSTITUTIONS (no network: a copy of this checkout
instead of `git clone`; a password given to chpasswd instead of typed into passwd).
"""

import contextlib
import os
import re
import secrets
import shlex
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from course.layout import ROOT
from support import REFERENCE_STEP
from support.browserpage import CHROMIUM_ARGS, chromium

DOCS = ROOT / 'docs' / 'hub.md'
HUB_ENV = Path(os.environ.get('HUB_ENV', '/opt/transformer-hub'))
COURSE_ID = 'transformer-from-scratch'
STEP = REFERENCE_STEP  # what the docs' path is followed on: the step the browser's journeys and the docs' pictures use
NAME, CERT = 'hub.example.edu', '/etc/ssl/transformer-hub/hub.pem'  # the docs' TLS block: its name, its certificate
CHECKOUT = '/usr/local/src/transformer-hub'  # where docs/hub.md's root keeps its reviewed checkout
INSTRUCTOR = 'teacher'
PASSWORD = secrets.token_urlsafe(12)  # the instructor's (the roster's accounts get theirs from transformer-hub accounts)
DATA = Path(os.environ.get('HUB_TEST_DATA', ROOT / 'input.txt'))
# The roster docs/hub.md shows the format of: one grader, three students.
ROSTER = 'username,role,name\nta1,grader,Tess Assistant\nalice,student,Alice A\nbob,student,Bob B\ncarol,student,Carol C\n'
GRADER, STUDENTS = 'ta1', ['alice', 'bob', 'carol']
# What the docs say, and what the test runs instead (each: why).
SUBSTITUTIONS = [
    # no network in the machine: the course comes from this checkout, not GitHub
    (re.compile(r'git clone \S+ (\S+)'), lambda m: f'cp -r {CHECKOUT} {m.group(1)}'),
    # no one to type a password: the same account gets one through chpasswd
    (re.compile(r'passwd (\w+)$'), lambda m: f'echo {m.group(1)}:{PASSWORD} | chpasswd'),
    # the docs' example path of a local Tiny Shakespeare
    (re.compile(r'/path/to/input\.txt'), lambda m: str(DATA)),
]


def docs_commands(name, docs=DOCS):
    """The command lines of the block docs/hub.md marks <!-- hub-test: name -->, comments and blank lines left out,
    a line ending in a backslash joined with the next."""
    text = docs.read_text()
    marker = f'<!-- hub-test: {name} -->'
    assert marker in text, f'{docs} has no block marked {marker}'
    block = re.search(re.escape(marker) + r'\s*```\w*\n(.*?)```', text, re.S)
    assert block, f'{docs}: {marker} is not followed by a fenced block'
    joined = block.group(1).replace('\\\n', ' ')
    return [line.split('  #')[0].strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith('#')]


def substituted(line):
    for pattern, replace in SUBSTITUTIONS:
        line = pattern.sub(replace, line)
    return line


class Hub:
    """The hub in a machine, installed by the docs; what the tests ask of it."""

    def __init__(self, machine):
        self.m = machine
        self.url = f'https://{NAME}'  # through nginx, as the class opens it (the name resolves to the machine's 127.0.0.1)
        self.ran = []

    def run_docs(self, name, cwd='/root'):
        """Run the block of the docs marked name, line by line, as root in the machine (one shell: cd carries over)."""
        lines = [substituted(line) for line in docs_commands(name)]
        self.ran += lines
        script = 'set -e\ncd ' + shlex.quote(cwd) + '\n' + '\n'.join(lines) + '\n'
        return self.m.run(['bash', '-c', script], timeout=900).stdout

    def sh(self, command, user=None, check=True, timeout=300):
        return self.m.run(['bash', '-c', command], user=user, check=check, timeout=timeout)

    def health(self, url='http://127.0.0.1:8000'):
        """The hub's health check answered through url (curl, in the machine), or None."""
        done = self.sh(f'curl -sf --max-time 10 --resolve {NAME}:443:127.0.0.1 --cacert {CERT} {url}/hub/health', check=False)
        return done.stdout if done.returncode == 0 else None

    def main_pid(self, unit='transformer-hub'):
        return int(self.sh(f'systemctl show -p MainPID --value {unit}').stdout.strip())

    def wait_ready(self, timeout=300, since_pid=None):
        """Until the hub (another process than since_pid, if given) says it is running (its services started) and
        answers through nginx; its MainPID."""
        deadline = time.monotonic() + timeout
        while True:
            pid = self.main_pid()
            if (pid and pid != since_pid and 'JupyterHub is now running' in self.journal(f'transformer-hub _PID={pid}')
                    and self.health(self.url) is not None):
                return pid
            assert time.monotonic() < deadline, f'the hub is not ready after {timeout} s:\n{self.journal()[-4000:]}'
            time.sleep(0.5)

    def wait_for(self, what, test, timeout=300):
        deadline = time.monotonic() + timeout
        while not (value := test()):
            assert time.monotonic() < deadline, f'{what}: not after {timeout} s:\n{self.journal()[-3000:]}'
            time.sleep(0.5)
        return value

    def journal(self, unit='transformer-hub'):
        """The journal of unit (and any further journalctl matches after it: 'unit _PID=123')."""
        return self.sh(f'journalctl -u {unit} --no-pager -o cat', check=False).stdout

    def password(self, user):
        """The initial password transformer-hub accounts gave user (the newest passwords file in root's home)."""
        if user == INSTRUCTOR:
            return PASSWORD
        files = sorted(self.m.path('/root').glob('transformer-hub-passwords-*.csv'))
        for f in reversed(files):
            for line in f.read_text().splitlines()[1:]:
                name, _, password = line.split(',')
                if name == user:
                    return password
        raise AssertionError(f'no initial password for {user} in {files}')

    def home(self, user):
        return self.m.path(f'/home/{user}')

    @property
    def course(self):
        return self.m.path(f'/home/{INSTRUCTOR}/{COURSE_ID}')

    @property
    def exchange(self):
        return self.m.path('/srv/nbgrader/exchange')

    def server_unit(self, user):
        return f'course-server-{user}'

    @contextlib.contextmanager
    def gradebook(self):
        """nbgrader's Gradebook of the class, on a copy of its SQLite file (and log): SQLite resolves the links in a
        database's path, and /proc/<pid>/root, through which the host sees the machine's files, reads as the host's /."""
        from nbgrader.api import Gradebook

        with tempfile.TemporaryDirectory() as tmp:
            for suffix in ('', '-wal'):
                source = self.course / f'gradebook.db{suffix}'
                if source.exists():
                    shutil.copyfile(source, Path(tmp, f'gradebook.db{suffix}'))
            with Gradebook(f'sqlite:///{tmp}/gradebook.db') as gb:
                yield gb

    def unit_active(self, unit):
        return self.sh(f'systemctl is-active {unit}', check=False).stdout.strip() == 'active'


def require_machine():
    """Skip, saying why, where the hub cannot be set up: not root, no machine, `make hub-env` not run."""
    from support.hub.machine import why_not

    reason = why_not()
    if reason:
        pytest.skip(f'the hub tests run a machine with systemd as root: {reason}')
    from support.hub.hubkit import hub_env_current

    if not hub_env_current(HUB_ENV) or not (HUB_ENV / 'share' / 'course-hub' / 'proxy' / '.installed').exists():
        pytest.skip(f'the hub is not installed: run `make hub-env` as root (the environment and proxy at {HUB_ENV})')
    if not DATA.is_file():
        pytest.skip(f'no Tiny Shakespeare at {DATA}: make data')


@pytest.fixture(scope='module')
def machine():
    require_machine()
    from support.hub.machine import Machine

    # HUB_ENV as this process sees it: a folder bound there (a developer's own environment, in a mount namespace of
    # theirs, beside a shared machine's) is bound into the machine too; otherwise the overlay shows the host's
    mounts = {line.split()[4] for line in Path('/proc/self/mountinfo').read_text().splitlines()}
    with Machine(net=True, shared=[HUB_ENV] if str(HUB_ENV) in mounts else ()) as m:
        yield m


@pytest.fixture(scope='module')
def hub(machine):
    return install(machine)


# A fresh server's state, in the machine (its overlay: the host is untouched): no account or group of people (uid and
# gid 1000 and up: a class this host may hold), empty /home and /srv, none of the hub's files but the environment that
# `make hub-env` built (which the docs' `make hub` then finds current).
FRESH = """
import re
people = lambda line, field: int(line.split(':')[field]) >= 1000 and int(line.split(':')[field]) != 65534
def rewrite(path, keep):
    lines = open(path).read().splitlines()
    open(path, 'w').write(''.join(line + '\\n' for line in lines if keep(line)))
gone = {l.split(':')[0] for l in open('/etc/passwd').read().splitlines() if people(l, 2)}
groups_gone = {l.split(':')[0] for l in open('/etc/group').read().splitlines() if people(l, 2)}
rewrite('/etc/passwd', lambda l: l.split(':')[0] not in gone)
rewrite('/etc/shadow', lambda l: l.split(':')[0] not in gone)
def members(line, field):
    parts = line.split(':')
    parts[field] = ','.join(m for m in parts[field].split(',') if m and m not in gone)
    return ':'.join(parts)
for path, field in (('/etc/group', 3), ('/etc/gshadow', 3)):
    lines = [members(l, field) for l in open(path).read().splitlines() if l.split(':')[0] not in groups_gone]
    open(path, 'w').write(''.join(line + '\\n' for line in lines))
"""
HUB_FILES = ['/etc/transformer-hub', '/var/lib/transformer-hub', '/etc/systemd/system/transformer-hub.service',
             '/etc/systemd/system/transformer-hub-proxy.service', '/etc/profile.d/transformer-hub.sh',
             '/usr/local/sbin/transformer-hub', '/etc/nginx/sites-enabled/transformer-hub',
             '/etc/nginx/sites-available/transformer-hub', '/usr/local/src/transformer-hub', '/var/backups/transformer-hub']


def fresh(machine):
    machine.run(['python3', '-c', FRESH])
    machine.run(['rm', '-rf', *HUB_FILES])
    for folder in ('/home', '/srv'):
        machine.run(['mount', '-t', 'tmpfs', '-o', 'mode=0755', 'fresh', folder])
    machine.run(['systemctl', 'daemon-reload'])


def install(machine):
    """The hub as docs/hub.md sets it up in machine, made a fresh server first: the checkout, make hub, the accounts,
    the exchange, the service, TLS; ready."""
    from course.layout import copy_course

    fresh(machine)
    h = Hub(machine)
    checkout = machine.path(CHECKOUT)
    copy_course(checkout)  # the course; and below, what installing reads beside it
    (checkout / 'input.txt').unlink()  # a clone has none (gitignored)
    for name in ('Makefile', 'requirements.txt', 'hub', 'docs'):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, checkout / name, ignore=shutil.ignore_patterns('node_modules', '__pycache__'))
        else:
            (checkout / name).write_bytes(source.read_bytes())
    machine.path('/root/roster.csv').write_text(ROSTER)
    # the hub's public name resolves on the hub itself, as a server's DNS name does (nbgrader's course list, in each
    # user's server, fetches the hub's public URL)
    hosts = machine.path('/etc/hosts')
    hosts.write_text(hosts.read_text() + f'127.0.0.1 {NAME}\n')
    h.run_docs('install', cwd=CHECKOUT)
    h.run_docs('tls', cwd=CHECKOUT)
    h.wait_ready()
    return h


@pytest.fixture(scope='module')
def browser(hub):
    # the machine's own network: the browser runs in it, and hub.example.edu is its 127.0.0.1
    args = [a for a in CHROMIUM_ARGS if not a.startswith('--host-resolver-rules')]
    args.append(f'--host-resolver-rules=MAP {NAME} 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1')
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(hub.m.program(chromium())), args=args, headless=True)
        yield browser
        browser.close()


def log_in(browser, hub, user):
    """A fresh browser context (the hub's self-signed certificate accepted, as on a trial) in which user has logged in
    with their Unix password and their server, spawned by the hub, shows JupyterLab."""
    context = browser.new_context(viewport={'width': 1280, 'height': 860}, ignore_https_errors=True)
    context.set_default_timeout(300_000)  # a loaded machine is slow, not wrong: each wait is for an event
    page = context.new_page()
    page.goto(f'{hub.url}/hub/login')
    page.fill('#username_input', user)
    page.fill('#password_input', hub.password(user))
    page.click('#login_submit')
    page.wait_for_url(f'**/user/{user}/lab**')
    page.locator('.jp-DirListing-content').wait_for()  # the file browser of their home
    return context, page


def fetched(page, url):
    """(status, text[:3000]) of url opened in a new tab of the page's browser (its cookies, the machine's network;
    Playwright's request API would fetch from the host, which cannot reach the machine), redirects followed."""
    tab = page.context.new_page()
    try:
        response = tab.goto(url)
        return response.status, tab.locator('body').inner_text()[:3000]
    finally:
        tab.close()
