"""JupyterHub for one class of this course on one machine: real Unix accounts, nbgrader's exchange, a shared formgrader.

Laid out as nbgrader's own demo `demos/demo_one_class_multiple_graders`, with these differences (docs/hub.md):
- the formgrader service runs as the instructor, in the instructor's course directory (its nbgrader_config.py, gradebook
  and course/ package are the course's own), not as a separate grader account;
- which nbgrader extensions each user sees is set per role by the spawner (JUPYTER_CONFIG_PATH, hub/roles/), not by
  `jupyter labextension enable --user` in every home;
- who reaches the formgrader is read from the graders' Unix group when each person logs in (and every few minutes
  after): adding or removing a grader needs no restart of the hub;
- JupyterHub >= 4.1 forbids framing single-user pages (frame-ancestors 'none'), which broke the formgrader's panel
  (nbgrader issue #1870): the formgrader service, and only it, allows frames from its own origin (hub/roles/formgrader).

Root runs this file: `make hub` installs it into /etc/transformer-hub/ (root's, from a checkout root reviewed), and the
systemd unit hub/transformer-hub.service runs  jupyterhub -f /etc/transformer-hub/jupyterhub_config.py  in the hub's
state folder (jupyterhub.sqlite, the cookie secret). Every setting is an environment variable, read below; the unit
reads them from /etc/transformer-hub/hub.env.
"""

import grp
import os
import pwd
import sys
from pathlib import Path

c = get_config()  # noqa: F821

HERE = Path(__file__).resolve().parent


def setting(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f'error: {__file__}: set {name} (in /etc/transformer-hub/hub.env; docs/hub.md lists every setting)')
    return value


def number(name, default):
    value = setting(name, default)
    try:
        return float(value)
    except ValueError:
        sys.exit(f'error: {__file__}: {name}={value!r} is not a number (docs/hub.md lists every setting)')


# The course: its id (as in the course's nbgrader_config.py) and the instructor whose course directory it is.
COURSE_ID = setting('COURSE_ID', 'transformer-from-scratch')
INSTRUCTOR = setting('COURSE_INSTRUCTOR')
try:
    INSTRUCTOR_HOME = pwd.getpwnam(INSTRUCTOR).pw_dir
except KeyError:
    sys.exit(f'error: {__file__}: COURSE_INSTRUCTOR={INSTRUCTOR!r} is no Unix account here: create it (useradd -m), or '
             'name the instructor who owns the course directory')
COURSE_ROOT = setting('COURSE_ROOT', str(Path(INSTRUCTOR_HOME) / COURSE_ID))
if not Path(COURSE_ROOT, 'nbgrader_config.py').is_file():
    sys.exit(f'error: {__file__}: no nbgrader_config.py in COURSE_ROOT={COURSE_ROOT}: clone the course there (as the '
             'instructor), or set COURSE_ROOT to the course directory')
# Unix groups: every member may log in; graders also reach the formgrader. Both are read at each login, never cached.
STUDENTS_GROUP = setting('COURSE_STUDENTS_GROUP', 'transformer-students')
GRADERS_GROUP = setting('COURSE_GRADERS_GROUP', 'transformer-graders')
# nbgrader's exchange: a folder on this machine, root-owned, mode 1777 (nbgrader's documented set-up, made sticky).
EXCHANGE = setting('COURSE_EXCHANGE', '/srv/nbgrader/exchange')
# The Python environment every user's server runs from (make hub builds it, root-owned, readable by every account),
# and what make hub puts beside it: the per-role settings, the proxy, Tiny Shakespeare.
ENV = Path(setting('COURSE_HUB_ENV', sys.prefix))
SHARE = Path(setting('COURSE_HUB_SHARE', str(ENV / 'share' / 'course-hub')))
ROLES = SHARE / 'roles'
DATA = SHARE / 'input.txt'

# Loopback only; a TLS reverse proxy (hub/nginx.conf) or Zero-to-JupyterHub's ingress opens PORT to the class.
IP = '127.0.0.1'
PORT = int(setting('COURSE_HUB_PORT', '8000'))  # what the reverse proxy forwards to
c.JupyterHub.bind_url = f'http://{IP}:{PORT}'
c.JupyterHub.hub_ip = IP
c.JupyterHub.hub_port = int(setting('COURSE_HUB_API_PORT', '8081'))
c.ConfigurableHTTPProxy.api_url = f'http://{IP}:{setting("COURSE_PROXY_API_PORT", "8001")}'
# The proxy: 'apart' when it runs as its own service (hub/transformer-hub-proxy.service, sharing CONFIGPROXY_AUTH_TOKEN
# with the hub): the hub then restarts without dropping a connection, and users' servers keep running. Otherwise the
# path of the proxy program, which the hub starts and stops with itself.
PROXY = setting('COURSE_HUB_PROXY', str(SHARE / 'proxy' / 'node_modules' / '.bin' / 'configurable-http-proxy'))
if PROXY == 'apart':
    c.ConfigurableHTTPProxy.should_start = False
else:
    c.ConfigurableHTTPProxy.command = [PROXY]
    c.ConfigurableHTTPProxy.should_start = True
    c.JupyterHub.cleanup_proxy = True

# Who logs in: one setting chooses the authenticator. 'pam' (Unix accounts and their passwords, as the system's login),
# or 'lti' (launches from the LMS by LTI 1.3, the platform in the course's course.toml [lti] table: hub/lti_config.py,
# installed beside this file; docs/lti.md). 'lti' is set up at the end of this file, on the roles and hooks below.
AUTH = setting('COURSE_HUB_AUTH', 'pam')
FORMGRADE_GROUP = f'formgrade-{COURSE_ID}'  # the hub group nbgrader's course list needs: formgrade-<course id>


def unix_groups(name):
    """The names of the Unix groups the account name belongs to (its primary group too); none if it is no account."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return set()
    return {grp.getgrgid(g).gr_name for g in os.getgrouplist(name, entry.pw_gid) if _group_exists(g)}


def _group_exists(gid):
    try:
        grp.getgrgid(gid)
        return True
    except KeyError:
        return False


def is_staff(name):
    """The instructor, and every member of the graders' Unix group now."""
    return name == INSTRUCTOR or GRADERS_GROUP in unix_groups(name)


def hub_groups(name):
    """The hub groups of a user, from the Unix groups: graders (and the instructor) are in the formgrader's group."""
    return [FORMGRADE_GROUP] if is_staff(name) else []


# The instructor is a user from the start (the formgrader asks the hub about its own user, and errors out when that user
# is missing from the hub's database: nbgrader issue #1872).
c.Authenticator.allowed_users = {INSTRUCTOR}
# No admin: an admin may open every student's server, and run code as them. Add c.Authenticator.admin_users to allow it.

if AUTH == 'pam':
    from jupyterhub.auth import PAMAuthenticator

    class CourseAuthenticator(PAMAuthenticator):
        """PAM, with the user's hub groups set from their Unix groups at each login and at each refresh (every
        auth_refresh_age seconds of use), so that a grader added to or removed from the Unix group gains or loses the
        formgrader without a restart of the hub."""

        manage_groups = True

        async def authenticate(self, handler, data):
            name = await super().authenticate(handler, data)
            if name is None:
                return None
            return {'name': name, 'groups': hub_groups(name)}

        async def refresh_user(self, user, handler=None):
            return {'name': user.name, 'groups': hub_groups(user.name)}

    c.JupyterHub.authenticator_class = CourseAuthenticator
    c.PAMAuthenticator.allowed_groups = {STUDENTS_GROUP, GRADERS_GROUP}
    c.Authenticator.auth_refresh_age = int(number('COURSE_HUB_REFRESH', '60'))  # seconds a user's groups are trusted
elif AUTH != 'lti':
    sys.exit(f'error: {__file__}: COURSE_HUB_AUTH={AUTH!r}: "pam" or "lti" (docs/hub.md, docs/lti.md)')

c.JupyterHub.load_roles = [
    {'name': FORMGRADE_GROUP, 'groups': [FORMGRADE_GROUP],
     'scopes': [f'access:services!service={COURSE_ID}', 'list:services', f'read:services!service={COURSE_ID}']},
    # A user's server token may do what its user may (the course list asks the hub for the formgrader service).
    {'name': 'server', 'scopes': ['inherit']},
]

# Each user's server, started as that user, in their home, JupyterLab. With systemd (a server's usual init), each is a
# transient unit of its own with a memory and CPU limit (jupyterhub-systemdspawner), so that one student's runaway
# kernel cannot take the class down, and the servers outlive a restart of the hub. Without systemd (a container), a
# plain process of the hub (LocalProcessSpawner), with no limit.
SPAWNER = setting('COURSE_HUB_SPAWNER', 'systemd' if Path('/run/systemd/system').is_dir() else 'local')
c.Spawner.ip = IP
c.Spawner.cmd = [str(ENV / 'bin' / 'jupyterhub-singleuser')]
c.Spawner.default_url = '/lab'
c.Spawner.notebook_dir = '~'
c.Spawner.start_timeout = 120  # a busy machine starts a server slowly; the hub gives up after this
c.Spawner.http_timeout = 120
if SPAWNER == 'systemd':
    c.JupyterHub.spawner_class = 'systemdspawner.SystemdSpawner'
    c.SystemdSpawner.mem_limit = setting('COURSE_HUB_MEMORY', '2G')  # a Step 6 kernel needs about 1 GiB
    c.SystemdSpawner.cpu_limit = number('COURSE_HUB_CPUS', '1')
    c.SystemdSpawner.unit_name_template = 'course-server-{USERNAME}'
    c.SystemdSpawner.isolate_tmp = True  # a /tmp of their own
    c.SystemdSpawner.isolate_devices = True
    c.SystemdSpawner.disable_user_sudo = True
    c.SystemdSpawner.default_shell = '/bin/bash'
    c.JupyterHub.cleanup_servers = False  # a restart of the hub leaves them running (they are not its processes)
elif SPAWNER == 'local':
    c.JupyterHub.spawner_class = 'localprocess'
    c.JupyterHub.cleanup_servers = True  # the servers are the hub's children: stopped with it
else:
    sys.exit(f'error: {__file__}: COURSE_HUB_SPAWNER={SPAWNER!r}: "systemd" or "local"')


def environment(role):
    """What a server of role sees: nbgrader's per-role extensions and settings, the course's commands on PATH (a hub
    terminal is a login shell whose /etc/profile resets PATH: /etc/profile.d/transformer-hub.sh puts COURSE_HUB_ENV's
    bin first again), Tiny Shakespeare (the notebooks' data cell copies it from TINY_SHAKESPEARE_URL)."""
    return {
        'JUPYTER_CONFIG_PATH': os.pathsep.join([str(ROLES / role), str(ROLES / 'common')]),
        'COURSE_EXCHANGE': EXCHANGE,
        'COURSE_ID': COURSE_ID,
        'COURSE_HUB_ENV': str(ENV),
        'PATH': f'{ENV / "bin"}:/usr/local/bin:/usr/bin:/bin',
        'TINY_SHAKESPEARE_URL': DATA.as_uri(),
        'OMP_NUM_THREADS': setting('OMP_NUM_THREADS', '1'),  # one torch thread per kernel: many kernels share the cores
    }


def link_data(home):
    """~/input.txt -> the shared Tiny Shakespeare (read-only, root's), where the notebooks look first (their folder and
    three above it), unless the user has a file of that name. Never follows a link the user made."""
    target = Path(home) / 'input.txt'
    if DATA.is_file() and Path(home).is_dir() and not os.path.lexists(target):
        try:
            os.symlink(DATA, target)
        except OSError:
            pass  # made meanwhile, or a home we cannot write: the notebooks then copy it from TINY_SHAKESPEARE_URL


def per_role(spawner):
    """Students see the Assignments tab only; the instructor and graders also the course list (the formgrader's link)."""
    name = spawner.user.name
    spawner.environment.update(environment('staff' if is_staff(name) else 'student'))
    try:
        link_data(pwd.getpwnam(name).pw_dir)
    except KeyError:
        pass


c.Spawner.pre_spawn_hook = per_role

# The formgrader, shared by the instructor and the graders: a hub service (named as the course, as nbgrader requires)
# running a Jupyter server as the instructor in the course directory, so that nbgrader reads the course's own
# nbgrader_config.py and gradebook there. Graders reach it through the hub, never the instructor's files.
c.JupyterHub.services = [{
    'name': COURSE_ID,
    'url': f'http://{IP}:{setting("COURSE_FORMGRADER_PORT", "9999")}',
    'command': [str(ENV / 'bin' / 'jupyterhub-singleuser')],
    'user': INSTRUCTOR,
    'cwd': COURSE_ROOT,
    'environment': {**environment('formgrader'), 'JUPYTERHUB_DEFAULT_URL': '/lab'},
    'oauth_no_confirm': True,
    # seconds the hub waits for the formgrader to answer before giving up and exiting (JupyterHub 6's default, 30, is
    # less than a busy machine takes to start a Jupyter server that imports nbgrader and the course)
    'timeout': int(number('COURSE_FORMGRADER_TIMEOUT', '300')),
}]

# Idle servers stopped (jupyterhub-idle-culler, a hub service): a class of 200 is never all at work, and an idle server
# holds 150-175 MB. Seconds without activity; 0 turns it off.
IDLE = int(number('COURSE_HUB_CULL_IDLE', '3600'))
if IDLE > 0:
    every = int(number('COURSE_HUB_CULL_EVERY', str(max(1, min(300, IDLE // 2)))))
    c.JupyterHub.services.append({
        'name': 'idle-culler',
        'command': [str(ENV / 'bin' / 'python'), '-m', 'jupyterhub_idle_culler', f'--timeout={IDLE}',
                    f'--cull-every={every}'],
    })
    c.JupyterHub.load_roles.append({'name': 'idle-culler', 'services': ['idle-culler'],
                                    'scopes': ['list:users', 'read:users:activity', 'read:servers', 'delete:servers']})

if AUTH == 'lti':
    sys.path.insert(0, str(HERE))
    import lti_config  # noqa: E402

    # the instructor and the graders' Unix group now reach the formgrader by its role (LTI graders by their launch)
    try:
        GRADERS = sorted(grp.getgrnam(GRADERS_GROUP).gr_mem)
    except KeyError:
        GRADERS = []
    lti_config.configure(c, COURSE_ID, COURSE_ROOT, INSTRUCTOR, GRADERS, STUDENTS_GROUP, GRADERS_GROUP, ROLES)
