"""JupyterHub for one class of this course on one machine: real Unix accounts, nbgrader's exchange, a shared formgrader.

Laid out as nbgrader's own demo `demos/demo_one_class_multiple_graders`, with these differences (docs/hub.md):
- the formgrader service runs as the instructor, in the instructor's course directory (its nbgrader_config.py, gradebook
  and course/ package are the course's own), not as a separate grader account;
- which nbgrader extensions each user sees is set per role by the spawner (JUPYTER_CONFIG_PATH, hub/roles/), not by
  `jupyter labextension enable --user` in every home;
- JupyterHub >= 4.1 forbids framing single-user pages (frame-ancestors 'none'), which broke the formgrader's panel
  (nbgrader issue #1870): the formgrader service, and only it, allows frames from its own origin (hub/roles/formgrader).

Run as root (the hub starts each user's server as that user), from the directory that keeps the hub's state
(jupyterhub.sqlite, the cookie secret):  jupyterhub -f /path/to/hub/jupyterhub_config.py
Every setting an instructor changes is an environment variable, read below; `make hub` installs what this file names.
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
        sys.exit(f'error: {__file__}: set {name} (docs/hub.md lists every setting)')
    return value


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
# Unix groups: every member may log in; graders also reach the formgrader. Read when the hub starts (restart the hub
# after adding a grader; a new student only needs the group).
STUDENTS_GROUP = setting('COURSE_STUDENTS_GROUP', 'transformer-students')
GRADERS_GROUP = setting('COURSE_GRADERS_GROUP', 'transformer-graders')
# nbgrader's exchange: a folder on this machine, root-owned, mode 1777 or 0777 (nbgrader's documented set-up).
EXCHANGE = setting('COURSE_EXCHANGE', '/srv/nbgrader/exchange')
# The Python environment every user's server runs from: readable by every account (make hub builds it).
ENV = Path(setting('COURSE_HUB_ENV', sys.prefix))
# Role configuration (hub/roles/): a copy every account can read, made by make hub next to the environment.
ROLES = Path(setting('COURSE_HUB_ROLES', str(ENV / 'share' / 'course-hub' / 'roles')))
# The proxy, from npm into hub/node_modules by make hub (never a global install).
PROXY = setting('COURSE_HUB_PROXY', str(HERE / 'node_modules' / '.bin' / 'configurable-http-proxy'))

# Loopback only; a real deployment puts a TLS reverse proxy (or Zero-to-JupyterHub's ingress) in front of PORT.
IP = '127.0.0.1'
PORT = int(setting('COURSE_HUB_PORT', '8000'))  # what browsers open
c.JupyterHub.bind_url = f'http://{IP}:{PORT}'
c.JupyterHub.hub_ip = IP
c.JupyterHub.hub_port = int(setting('COURSE_HUB_API_PORT', '8081'))
c.ConfigurableHTTPProxy.api_url = f'http://{IP}:{setting("COURSE_PROXY_API_PORT", "8001")}'
c.ConfigurableHTTPProxy.command = [PROXY]
c.ConfigurableHTTPProxy.should_start = True  # the hub starts the proxy and stops it with itself
c.JupyterHub.cleanup_servers = True  # and stops every user's server when it stops
c.JupyterHub.cleanup_proxy = True

# Unix accounts, with their passwords (PAM, as the system's login does).
c.JupyterHub.authenticator_class = 'pam'
c.PAMAuthenticator.allowed_groups = {STUDENTS_GROUP, GRADERS_GROUP}
c.Authenticator.allowed_users = {INSTRUCTOR}
# No admin: an admin may open every student's server, and run code as them. Add c.Authenticator.admin_users to allow it.


def members(group):
    try:
        return sorted(grp.getgrnam(group).gr_mem)
    except KeyError:
        sys.exit(f'error: {__file__}: no Unix group {group!r}: create it (groupadd {group}) and add its members')


GRADERS = members(GRADERS_GROUP)
members(STUDENTS_GROUP)

# Who reaches the formgrader: the hub group must be named formgrade-<course id> for nbgrader's course list. Loading it
# also puts every grader and the instructor in the hub's database at start-up: the formgrader asks the hub about its
# own user, and errors out when that user is missing from the database (nbgrader issue #1872).
c.JupyterHub.load_groups = {f'formgrade-{COURSE_ID}': {'users': [INSTRUCTOR, *GRADERS]}}
c.JupyterHub.load_roles = [
    {'name': f'formgrade-{COURSE_ID}', 'groups': [f'formgrade-{COURSE_ID}'],
     'scopes': [f'access:services!service={COURSE_ID}', 'list:services', f'read:services!service={COURSE_ID}']},
    # A user's server token may do what its user may (the course list asks the hub for the formgrader service).
    {'name': 'server', 'scopes': ['inherit']},
]

# Each user's server, started as that user by LocalProcessSpawner (the hub runs as root), in their home, JupyterLab.
c.JupyterHub.spawner_class = 'localprocess'
c.Spawner.ip = IP
c.Spawner.cmd = [str(ENV / 'bin' / 'jupyterhub-singleuser')]
c.Spawner.default_url = '/lab'
c.Spawner.notebook_dir = '~'
c.Spawner.start_timeout = 120  # a busy machine starts a server slowly; the hub gives up after this
c.Spawner.http_timeout = 120


def environment(role):
    """What a server of role sees: nbgrader's per-role extensions and settings, the course's commands on PATH."""
    return {
        'JUPYTER_CONFIG_PATH': os.pathsep.join([str(ROLES / role), str(ROLES / 'common')]),
        'COURSE_EXCHANGE': EXCHANGE,
        'COURSE_ID': COURSE_ID,
        'PATH': f'{ENV / "bin"}:/usr/local/bin:/usr/bin:/bin',
        'OMP_NUM_THREADS': setting('OMP_NUM_THREADS', '1'),  # one torch thread per kernel: many kernels share the cores
    }


def per_role(spawner):
    """Students see the Assignments tab only; the instructor and graders also the course list (the formgrader's link)."""
    name = spawner.user.name
    spawner.environment.update(environment('staff' if name == INSTRUCTOR or name in GRADERS else 'student'))


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
    'timeout': int(setting('COURSE_FORMGRADER_TIMEOUT', '300')),
}]
