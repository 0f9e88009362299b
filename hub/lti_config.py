"""The hub's LTI 1.3 launch (docs/lti.md): students and graders come from the LMS, not from Unix passwords.

hub/jupyterhub_config.py calls configure() when COURSE_HUB_AUTH=lti. Then jupyterhub-ltiauthenticator's LTI13Authenticator
does the launch: the OpenID Connect login initiation, the id_token's signature checked against the platform's JWKS, its
issuer, audience (the client id), expiry, age and nonce (bound to the browser's cookie, and never taken twice here).
This file adds what the course needs on top, in CourseLTIAuthenticator:
- the deployment: only the deployment_id the LMS registered the tool under (the authenticator does not check it);
- the roles, from the signed token only: Learner -> the students' group; Instructor, TeachingAssistant -> the graders'
  and the formgrader's groups; any other role (Mentor, Administrator, none) is refused (403);
- the account: a Unix account named username(issuer, sub), made at the first launch (home 0700), never from the
  display name or email (they change); the same id course.classroom.lms_lti13 gives the student in the gradebook;
- the landing: the step the launch names (the custom parameter step=, or step= in the resource link's target link URI),
  opened by the course's launch extension in the user's server (hub/roles/lti/course_lti_launch.py): fetched and open,
  or, once its feedback is released, the feedback page.
The platform's settings are the [lti] table of the course's course.toml (COURSE_ROOT), read here as data.
"""

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from jupyterhub.auth import LocalAuthenticator
from jupyterhub.utils import url_path_join
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler
from tornado.web import HTTPError
from traitlets import Dict, Unicode

LTI = 'https://purl.imsglobal.org/spec/lti/claim/'
# LTI 1.3 role vocabularies (context roles, and their short forms some platforms send): who is what in the course.
STUDENT_ROLES = {'Learner'}
GRADER_ROLES = {'Instructor', 'TeachingAssistant'}
STEP = re.compile(r'[A-Za-z0-9][A-Za-z0-9_-]{0,63}')
SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


def username(issuer, sub):
    """The account of the LMS user sub of the platform issuer: 'lti-' and 16 hex digits of their hash (a valid Unix
    name). course.classroom.lms_lti13.student_id() is the same function: the gradebook's id of the same student."""
    return 'lti-' + hashlib.sha256(f'{issuer}\n{sub}'.encode()).hexdigest()[:16]


def role_names(claim):
    """The short names of the LTI roles in a token's roles claim: '...membership#Learner' and
    '...membership/Instructor#TeachingAssistant' give Learner and TeachingAssistant."""
    return {r.rsplit('#', 1)[-1] if '#' in r else r.rsplit('/', 1)[-1] for r in claim or [] if isinstance(r, str)}


def launch_step(token):
    """The step a launch names: the custom parameter step, else step= in the signed target link URI; None if neither (or
    not a plain step id)."""
    custom = (token.get(LTI + 'custom') or {}).get('step')
    target = parse_qs(urlparse(token.get(LTI + 'target_link_uri') or '').query).get('step', [None])[0]
    step = custom or target
    return step if step and STEP.fullmatch(step) else None


class CourseLTICallbackHandler(LTI13CallbackHandler):
    """The authenticator's launch handler, landing where the launch said: the step in the user's server."""

    def decode_and_validate_launch_request(self):
        self.launch = super().decode_and_validate_launch_request()
        return self.launch

    def get_next_url(self, user=None):
        step = launch_step(getattr(self, 'launch', {}))
        if step:
            return url_path_join(self.hub.base_url, 'user-redirect', 'course-launch', step)
        return super().get_next_url(user)


class CourseLTIAuthenticator(LocalAuthenticator, LTI13Authenticator):
    """LTI13Authenticator for the course: the deployment and roles checked, the account made from sub (module docstring)."""

    callback_handler = CourseLTICallbackHandler
    deployment_id = Unicode(help='the deployment id the LMS gave the tool: a launch of any other is refused').tag(config=True)
    students_group = Unicode('transformer-students', help='the hub group of Learners').tag(config=True)
    graders_groups = Dict(help='the hub groups of Instructors and TeachingAssistants (name: anything)').tag(config=True)
    home_mode = 0o700

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen_nonces = {}  # nonce: expiry of the token that carried it

    def get_handlers(self, app):
        return LTI13Authenticator.get_handlers(self, app)

    def login_url(self, base_url):
        return LTI13Authenticator.login_url(self, base_url)

    async def authenticate(self, handler, data=None):
        token = data or {}
        if token.get(LTI + 'deployment_id') != self.deployment_id:
            raise HTTPError(403, 'this launch is for another deployment of the tool than the one the course registered')
        now = time.time()
        self.seen_nonces = {n: t for n, t in self.seen_nonces.items() if t > now}
        nonce = token.get('nonce')
        if not nonce or nonce in self.seen_nonces:
            raise HTTPError(403, 'this launch was already used (its nonce was seen): launch again from the LMS')
        self.seen_nonces[nonce] = float(token.get('exp') or now + 3600)
        roles = role_names(token.get(LTI + 'roles'))
        if roles & GRADER_ROLES:
            groups = sorted(self.graders_groups)
        elif roles & STUDENT_ROLES:
            groups = [self.students_group]
        else:
            raise HTTPError(403, f'the course admits Learners, Instructors and TeachingAssistants; this launch is '
                                 f'{", ".join(sorted(roles)) or "of no role"}')
        name = username(token.get('iss', ''), token.get('sub', ''))
        if not token.get('sub'):
            raise HTTPError(400, 'the launch names no user (sub)')
        context = token.get('https://purl.imsglobal.org/spec/lti-ags/claim/endpoint', {})
        members = token.get('https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice', {})
        if roles & GRADER_ROLES:  # what make passback and make roster need in [lti], where an instructor can read it
            self.log.info('LTI launch by an instructor: [lti] lineitems = %r, memberships = %r',
                          context.get('lineitems'), members.get('context_memberships_url'))
        return {'name': name, 'groups': groups, 'auth_state': None}

    def check_allowed(self, username, authentication=None):
        return True  # authenticate() admitted the launch by its signed deployment and roles

    def add_system_user(self, user):
        """LocalAuthenticator's (useradd), in a thread: the hub goes on serving other launches meanwhile."""
        return asyncio.get_running_loop().run_in_executor(None, self.make_account, user)

    def make_account(self, user):
        super().add_system_user(user)
        home = Path(os.path.expanduser(f'~{user.name}'))
        if home.is_dir():
            home.chmod(self.home_mode)  # whatever the system's HOME_MODE: no account reads another's home


def settings(course_root):
    """The [lti] table of the course's course.toml (data only: nothing of the course's code runs in the hub)."""
    path = Path(course_root) / 'course.toml'
    try:
        table = tomllib.loads(path.read_text()).get('lti') or {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SystemExit(f'error: {path}: cannot read its [lti] table ({e}): docs/lti.md says what it holds') from None
    missing = [k for k in ('issuer', 'client_id', 'deployment_id', 'auth_login_url', 'key_set_url') if not table.get(k)]
    if missing:
        raise SystemExit(f'error: {path}: [lti] has no {", ".join(missing)}: set them as the LMS registered the tool '
                         '(docs/lti.md), or COURSE_HUB_AUTH=pam')
    return table


def configure(c, course_id, course_root, instructor, graders, students_group, graders_group, roles):
    """Switch the hub of hub/jupyterhub_config.py to LTI 1.3 launches (module docstring). The instructor and the Unix
    graders keep the formgrader (by the role, since the authenticator now manages the groups)."""
    lti = settings(course_root)
    formgrade = f'formgrade-{course_id}'
    c.JupyterHub.authenticator_class = CourseLTIAuthenticator
    c.LTI13Authenticator.issuer = lti['issuer']
    c.LTI13Authenticator.client_id = {lti['client_id']}
    c.LTI13Authenticator.authorize_url = lti['auth_login_url']
    c.LTI13Authenticator.jwks_endpoint = lti['key_set_url']
    c.LTI13Authenticator.tool_name = lti.get('tool_name', 'Build a transformer from scratch')
    c.LTI13Authenticator.tool_description = 'The course\'s notebooks in JupyterLab: each step fetched and open'
    c.LTI13Authenticator.uri_scheme = lti.get('uri_scheme', 'auto')
    c.CourseLTIAuthenticator.deployment_id = lti['deployment_id']
    c.CourseLTIAuthenticator.students_group = students_group
    c.CourseLTIAuthenticator.graders_groups = {graders_group: 1, formgrade: 1}
    c.LocalAuthenticator.create_system_users = True
    useradd = shutil.which('useradd', path=SYSTEM_PATH) or 'useradd'  # the hub's PATH may lack /usr/sbin
    c.LocalAuthenticator.add_user_cmd = [useradd, '--create-home', '--user-group', '--shell', '/bin/bash',
                                         '--comment', 'course LTI account']
    if lti['issuer'].startswith('https://'):
        # the launch is a POST from the LMS's site to the hub's: the login's state and nonce cookies go with it only when
        # they say SameSite=None (and so Secure: the hub behind TLS, as a real deployment is)
        c.JupyterHub.tornado_settings.update({'cookie_options': {'samesite': 'None', 'secure': True}})
    c.Authenticator.manage_groups = True
    c.Authenticator.allowed_users = set()
    # load_groups cannot be used with groups the authenticator manages: the instructor and Unix graders reach the
    # formgrader through the role itself, which also puts them in the hub's database (nbgrader #1872)
    c.JupyterHub.load_groups = {}
    for role in c.JupyterHub.load_roles:
        if role.get('name') == formgrade:
            role['users'] = sorted({instructor, *graders})
    per_role = c.Spawner.pre_spawn_hook

    def lti_role(spawner):
        """hub/jupyterhub_config.py's per-role settings, then: an LTI grader (in the formgrader's group) is staff, and
        every server loads the launch extension (hub/roles/lti)."""
        per_role(spawner)
        staff = any(g.name == formgrade for g in spawner.user.groups)
        env = spawner.environment
        role = 'staff' if staff or 'staff' in env.get('JUPYTER_CONFIG_PATH', '') else 'student'
        env['JUPYTER_CONFIG_PATH'] = os.pathsep.join(str(Path(roles) / r) for r in ('lti', role, 'common'))
        env['PYTHONPATH'] = str(Path(roles) / 'lti')

    c.Spawner.pre_spawn_hook = lti_role
    return lti


def remove_accounts(prefix='lti-'):
    """For tests and for the end of a term: the accounts launches made (their processes first). Returns their names."""
    import pwd

    gone = []
    for entry in pwd.getpwall():
        if entry.pw_name.startswith(prefix) and entry.pw_gecos == 'course LTI account':
            # its processes in the hub's own PID namespace only: a container on this host may run processes under
            # the same user id, which are not this account's
            subprocess.run(['pkill', '-KILL', '-u', entry.pw_name, '--ns', str(os.getpid()), '--nslist', 'pid'],
                           capture_output=True)
            subprocess.run([shutil.which('userdel', path=SYSTEM_PATH) or 'userdel', '--remove', entry.pw_name],
                           capture_output=True)
            gone.append(entry.pw_name)
    return gone
