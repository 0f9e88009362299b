# ruff: noqa: F811  (the fixtures are named as the tests' parameters)
"""The course's JupyterHub launched from an LMS by LTI 1.3, for real (hub/lti_config.py, docs/lti.md): JupyterHub from
hub/jupyterhub_config.py with COURSE_HUB_AUTH=lti, jupyterhub-ltiauthenticator, the launch extension in each user's
server, nbgrader's exchange, the course's grader and passback; the LMS is tests/support/ltiplatform.py's stand-in, on loopback.
As root, after `make hub`.

The journey, in headless Chromium: the stand-in's course page, a Learner launches Step 4 and lands in JupyterLab with
Step 4 fetched and open; types Head's solution and submits in the Assignments tab; the instructor collects, grades
(python -m course.grader.grade), releases the feedback and runs the passback (python -m course.reports.passback), as the
instructor's account; the stand-in's gradebook shows the score; the student launches again and sees their feedback.
Then the refusals (a token signed by another key, for another client id or deployment, expired, replayed, a role
changed after signing or a role the course does not admit; a Learner at the formgrader) and 100 launches at once.
Last, the passback with the gradebook on PostgreSQL. Screenshots: test-artifacts/hub-lti/.
"""

import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from course.classroom import lms_lti13
from course.layout import ROOT, copy_course
from support.browserpage import CHROMIUM_ARGS, HEAD, NAME, chromium, fill_in, menu, shooter
from support.hub import hubkit
from support.hub.hosthub import COURSE_ID, STEP, Hub, as_user, chown_tree, ok, require_root
from support.lticlass import CLASS, add_class, ledger, run, toml_table
from support.ltiplatform import StandIn

shoot = shooter(ROOT / 'test-artifacts' / 'hub-lti')
LEARNER, TEACHER = 'u-ada', 'u-tom'


def load_hub_config():
    import importlib.util

    spec = importlib.util.spec_from_file_location('lti_config', ROOT / 'hub' / 'lti_config.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lti_config = load_hub_config()


class LtiClass:
    """An instructor's Unix account with the course (its [lti] table naming the stand-in, the tool's key), Step 4
    released into a fresh exchange; the accounts launches make are removed at the end."""

    def __init__(self, base, instructor, lms):
        self.base, self.lms = base, lms
        self.exchange = base / 'exchange'
        self.exchange.mkdir()
        os.chmod(self.exchange, 0o1777)
        self.instructor = {'name': instructor.name, 'uid': instructor.uid, 'gid': instructor.gid, 'home': instructor.home}
        self.course = instructor.home / COURSE_ID
        copy_course(self.course)
        settings = lms.settings()
        with open(self.course / 'course.toml', 'a') as f:
            f.write('\n[lti]\n' + ''.join(f'{k} = "{v}"\n' for k, v in settings.items()))
        chown_tree(self.course, self.instructor)
        self.run(['python', '-m', 'course.reports.passback', '--key'], 'make lti-key')
        lms.tool_jwk = lms_lti13.public_jwk((self.course / 'lms' / 'lti-tool-key.pem').read_text())
        self.run(['nbgrader', 'release_assignment', STEP], 'release_assignment')
        self.launched = set()

    def run(self, args, what, timeout=900):
        return ok(as_user(self.instructor, self.exchange, args, cwd=self.course, role='staff', timeout=timeout), what)

    def account(self, user_id):
        name = lti_config.username(self.lms.issuer, user_id)
        self.launched.add(name)
        return name

    def users(self):
        import pwd

        found = [self.instructor]
        for name in sorted(self.launched):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            found.append({'name': name, 'uid': entry.pw_uid})
        return found

    def remove_accounts(self):
        for name in sorted(self.launched):
            hubkit.remove_user(name)


@pytest.fixture(scope='module')
def lti(unix_users):
    require_root()
    base = Path(tempfile.mkdtemp(prefix='course-lti-', dir='/var/tmp'))
    os.chmod(base, 0o755)
    with StandIn() as lms:
        room = LtiClass(base, unix_users('ltiteacher'), lms)
        hub = Hub(room, env={'COURSE_HUB_AUTH': 'lti', 'COURSE_INSTRUCTOR': room.instructor['name']})
        lms.register(f'{hub.url}/hub/lti13/oauth_login', f'{hub.url}/hub/lti13/oauth_callback', f'{hub.url}/hub/home')
        lms.enrol(LEARNER, 'Ada', 'Lovelace', email='ada@uni.example')
        lms.enrol(TEACHER, 'Tom', 'Teach', role='Instructor')
        try:
            yield room, hub, lms
        finally:
            hub.kill_left(hub.stop())
            room.remove_accounts()
            shutil.rmtree(base, ignore_errors=True)


def form_of(page):
    """(action, id_token, state) of the stand-in's auto-submitting launch form."""
    field = {k: re.search(rf'name="{k}" value="([^"]*)"', page).group(1) for k in ('id_token', 'state')}
    return re.search(r'action="([^"]*)"', page).group(1), field['id_token'], field['state']


def launch(lms, user_id, step=STEP, session=None, **token):
    """A launch without a browser: the login initiation through the hub to the stand-in's authorisation endpoint, then
    the id_token POSTed to the hub. (session, response of the POST, not followed, and the form posted)."""
    import html

    session = session or requests.Session()
    page = session.get(lms.launch_url(user_id, step, **token), timeout=60)
    assert page.status_code == 200, (page.status_code, page.text[:500])
    action, id_token, state = (html.unescape(x) for x in form_of(page.text))
    answer = session.post(action, data={'id_token': id_token, 'state': state}, allow_redirects=False, timeout=120)
    return session, answer, (action, id_token, state)


# -- the journey ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def journey(lti):
    from playwright.sync_api import sync_playwright

    room, hub, lms = lti
    seen = {'account': room.account(LEARNER)}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={'width': 1280, 'height': 860})
        context.set_default_timeout(300_000)  # a loaded machine is slow, not wrong: each wait is for an event
        page = context.new_page()
        page.goto(f'{lms.url}/course?step={STEP}')
        shoot(page, '01-lms-course-page')
        page.click(f'#launch-{LEARNER}-{STEP}')
        page.wait_for_url(f'**/user/{seen["account"]}/lab/tree/{STEP}/**')
        seen['landed'] = page.url
        page.locator('.jp-NotebookPanel').first.wait_for()
        seen['tab'] = page.locator('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel').first \
            .text_content()  # the current tab of the main area (not of a side bar)
        page.get_by_text('Python 3 (ipykernel) | Idle').wait_for()
        shoot(page, f'02-launched-{STEP}-open')
        fill_in(page, HEAD)
        page.keyboard.press('Escape')
        page.keyboard.press('Control+s')
        page.locator('.lm-TabBar-tab.jp-mod-dirty').wait_for(state='detached')
        menu(page, 'Nbgrader', 'Assignment List')
        page.locator('#released_assignments_list_loading').wait_for(state='hidden')
        fetched = page.locator('#fetched_assignments_list .list_item', has_text=STEP).first
        fetched.get_by_role('button', name='Submit').click()
        page.locator('#submitted_assignments_list .list_item', has_text=STEP).first.wait_for()
        shoot(page, '03-submitted')
        response = context.request.get(f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments')
        seen['formgrader'] = (response.status, response.text()[:2000])

        room.run(['nbgrader', 'collect', STEP], 'nbgrader collect')
        seen['grade'] = room.run(['python', '-m', 'course.grader.grade', '--step', STEP], 'course.grader.grade').stdout
        room.run(['nbgrader', 'release_feedback', STEP], 'nbgrader release_feedback')
        seen['passback'] = room.run(['python', '-m', 'course.reports.passback'], 'course.reports.passback').stdout
        seen['again'] = room.run(['python', '-m', 'course.reports.passback'], 'course.reports.passback').stdout

        page.goto(f'{lms.url}/gradebook')
        row = page.locator('#gradebook tr', has_text='Ada Lovelace')
        seen['lms_score'] = (row.locator('.score').text_content(), row.locator('.max').text_content(),
                             row.locator('.progress').text_content())
        shoot(page, '04-lms-gradebook')

        page.goto(f'{lms.url}/course?step={STEP}')
        page.click(f'#launch-{LEARNER}-{STEP}')
        page.wait_for_url(f'**/user/{seen["account"]}/files/{STEP}/feedback/**')
        seen['feedback_url'] = page.url
        seen['feedback'] = page.locator('body').inner_text()
        shoot(page, '05-launched-again-feedback')
        browser.close()
    from nbgrader.api import Gradebook

    with Gradebook(f'sqlite:///{room.course / "gradebook.db"}') as gb:
        s = gb.find_submission(STEP, seen['account'])
        seen['gradebook'] = (s.score, s.max_score, s.needs_manual_grade)
    return seen


def test_a_learners_launch_lands_in_jupyterlab_with_the_step_fetched_and_open(journey):
    assert journey['landed'].endswith(f'/lab/tree/{STEP}/{NAME}'), journey['landed']
    assert journey['tab'].strip() == NAME, journey['tab']


def test_the_account_is_made_from_sub_with_a_private_home(journey, lti):
    import pwd
    import stat

    room, _, lms = lti
    entry = pwd.getpwnam(journey['account'])
    assert journey['account'] == lti_config.username(lms.issuer, LEARNER)
    assert stat.S_IMODE(os.stat(entry.pw_dir).st_mode) == 0o700


def test_a_learner_cannot_reach_the_formgrader(journey):
    status, body = journey['formgrader']
    assert status == 403 and 'Manage Assignments' not in body, (status, body[:300])


def test_the_lms_gradebook_shows_the_score_nbgrader_gave(journey):
    score, maximum, pending = journey['gradebook']
    assert score > 0, journey['grade'][-2000:]
    shown = journey['lms_score']
    assert (float(shown[0]), float(shown[1])) == (score, maximum), (shown, journey['passback'])
    assert shown[2] == ('PendingManual' if pending else 'FullyGraded'), shown


def test_passing_back_again_posts_nothing_new(journey):
    assert journey['again'].strip().endswith('passback: 0 posted, 1 unchanged since the last run, 0 failed'), journey['again']


def test_launching_the_graded_step_again_shows_the_released_feedback(journey):
    score, maximum, _ = journey['gradebook']
    assert re.search(rf'Score:\s*{score:g}(\.0+)?\s*/\s*{maximum:g}', journey['feedback']), journey['feedback'][:1500]


# -- the refusals --------------------------------------------------------------------------------------------------------

def logged_in(answer):
    return answer.status_code == 302 and '/user-redirect/course-launch/' in answer.headers.get('Location', '')


def test_a_well_formed_launch_is_taken(lti):
    room, hub, lms = lti
    room.account('u-ok')
    lms.enrol('u-ok', 'Oda', 'Kay')
    _, answer, _ = launch(lms, 'u-ok')
    assert logged_in(answer), (answer.status_code, answer.text[:300], hub.log_tail())


@pytest.mark.parametrize('token, status, why', [
    ({'signer': 'foreign'}, 400, 'signature'),
    ({'aud': 'someone-else'}, 401, 'audience'),
    ({'deployment': 'deployment-9'}, 403, 'another deployment'),
    ({'exp': 1_000_000_000}, 400, 'expired'),
    ({'tamper_roles': ['Instructor']}, 400, 'signature'),
    ({'roles': ['Mentor']}, 403, 'Mentor'),
    ({'roles': ['Administrator']}, 403, 'Administrator'),
], ids=['other-key', 'other-client-id', 'other-deployment', 'expired', 'role-not-signed', 'mentor', 'administrator'])
def test_a_launch_is_refused(lti, token, status, why):
    room, _, lms = lti
    user = f'u-refused-{abs(hash(str(token))) % 10**6}'
    room.account(user)
    lms.enrol(user, 'Eve', 'Refused')
    _, answer, _ = launch(lms, user, **token)
    assert answer.status_code == status and why.lower() in answer.text.lower(), (answer.status_code, answer.text[:600])


def test_a_replayed_launch_is_refused_even_with_its_cookies(lti):
    """The same id_token POSTed again: without the login's cookies (the authenticator cleared them) and with copies of
    them (the hub remembers the nonce)."""
    room, _, lms = lti
    room.account('u-replay')
    lms.enrol('u-replay', 'Ray', 'Play')
    session = requests.Session()
    page = session.get(lms.launch_url('u-replay', STEP), timeout=60)
    import html

    action, id_token, state = (html.unescape(x) for x in form_of(page.text))
    cookies = session.cookies.copy()
    first = session.post(action, data={'id_token': id_token, 'state': state}, allow_redirects=False, timeout=120)
    assert logged_in(first), first.text[:300]
    again = requests.post(action, data={'id_token': id_token, 'state': state}, allow_redirects=False, timeout=60)
    assert again.status_code == 400, again.text[:300]
    copied = requests.post(action, data={'id_token': id_token, 'state': state}, cookies=cookies, allow_redirects=False,
                           timeout=60)
    assert copied.status_code == 403 and 'already used' in copied.text, (copied.status_code, copied.text[:300])


def test_an_instructor_launch_reaches_the_formgrader(lti):
    room, hub, lms = lti
    room.account(TEACHER)
    session, answer, _ = launch(lms, TEACHER)
    assert logged_in(answer), answer.text[:300]
    page = session.get(f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments', timeout=300)
    assert page.status_code == 200 and 'Manage Assignments' in page.text, (page.status_code, page.text[:300])


def test_100_students_launch_within_a_minute(lti):
    """100 Learners, ten at a time, each a full launch (login initiation, the stand-in's authorisation, the id_token
    checked against the JWKS, the account made): every one logged in. The time is printed, not judged; the test is
    bounded by its count and each request's timeout. The platform's key rotates half way: launches signed by the new
    key are checked against the new JWKS."""
    room, _, lms = lti
    users = [f'u-load-{i:03d}' for i in range(100)]
    for u in users:
        lms.enrol(u, f'L{u[-3:]}', 'Load')
        room.account(u)

    def one(u):
        if u == users[50]:
            lms.rotate()
        return logged_in(launch(lms, u)[1])

    start = time.monotonic()
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(one, users))
    seconds = time.monotonic() - start
    print(f'\n100 LTI launches in {seconds:.1f} s ({100 / seconds:.1f} a second), accounts made on first launch')
    assert all(results), f'{results.count(False)} of 100 launches refused'


def test_passback_keeps_its_ledger_in_a_postgresql_gradebook(postgres, tmp_path, monkeypatch):
    """The gradebook on PostgreSQL (docs/gradebook.md): the ledger's table beside nbgrader's, the same answers."""
    monkeypatch.setenv('COURSE_GRADEBOOK_URL', postgres.database('lti_passback'))
    root = copy_course(tmp_path / 'course')
    with StandIn() as lms:
        with open(root / 'course.toml', 'a') as f:
            f.write(toml_table(lms.settings()))
        lms.tool_jwk = lms_lti13.new_key(root)
        add_class(root, lms, CLASS)
        lines, failed = run(root)
        assert failed == 0 and lines[-1].startswith('passback: 3 posted, 0 unchanged'), lines
        again, _ = run(root)
        assert again[-1].startswith('passback: 0 posted, 3 unchanged'), again
        assert len(ledger(root)) == 3 and len(lms.accepted) == 3
