# ruff: noqa: F811  (the fixtures imported from hubserver are named as the tests' parameters)
"""The class on JupyterHub, for real (hub/jupyterhub_config.py; tests/hub/hubserver.py sets up the accounts, the exchange
and the hub). As root.

The journey, in headless Chromium: a student logs in with their Unix password (PAM), fetches Step 4 in the Assignments
tab, types Head's solution (from source/step4's solution cell) into the notebook, validates and submits; the instructor
logs in, opens the formgrader from the course list (a hub service running in the instructor's course directory, framed
in its JupyterLab: nbgrader #1870) and collects; grades with the course's own grader (python -m course.grader.grade, as the
instructor, in the course directory); releases the feedback from the formgrader; the student fetches the feedback and
reads their score on its page. Each test checks one claim about what was seen. Screenshots: test-artifacts/hub/.

Then what each student's Unix account can and cannot do with the exchange and the instructor's files, as that account.
Last, the hub stops, and with it every server it started and the proxy.
"""

import os
import re
import stat

import pytest
from browserpage import (
    CHROMIUM_ARGS,
    HEAD,
    HEAD_TESTS,
    NAME,
    NOTEBOOK,
    SOLUTION,
    cell,
    chromium,
    fill_in,
    menu,
    shooter,
)
from hubserver import COURSE_ID, STEP, as_user, classroom, hub  # noqa: F401  (fixtures)
from nbgrader.api import Gradebook
from playwright.sync_api import sync_playwright

from course.layout import ROOT

shoot = shooter(ROOT / 'test-artifacts' / 'hub')


@pytest.fixture(scope='module')
def browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def log_in(browser, hub, user):
    """A fresh browser context in which user has logged into the hub with their Unix password and their server, spawned
    by the hub, shows JupyterLab."""
    context = browser.new_context(viewport={'width': 1280, 'height': 860})
    context.set_default_timeout(300_000)  # a loaded machine is slow, not wrong: each wait is for an event
    page = context.new_page()
    page.goto(f'{hub.url}/hub/login')
    page.fill('#username_input', user['name'])
    page.fill('#password_input', user['password'])
    page.click('#login_submit')
    page.wait_for_url(f'**/user/{user["name"]}/lab**')
    page.locator('.jp-DirListing-content').wait_for()  # the file browser of their home
    return context, page


def nbgrader_menu(page):
    """The items of JupyterLab's Nbgrader menu, as this user's server offers them."""
    page.locator('.lm-MenuBar-itemLabel', has_text=re.compile('^Nbgrader$')).click()
    items = [t.strip() for t in page.locator('.lm-Menu-itemLabel').all_text_contents() if t.strip()]
    page.keyboard.press('Escape')
    return items


def assignment_list(page):
    menu(page, 'Nbgrader', 'Assignment List')
    page.locator('#released_assignments_list_loading').wait_for(state='hidden')


@pytest.fixture(scope='module')
def student_journey(browser, hub, classroom):
    """The first student: logs in, fetches, fills in Head, validates, submits. Returns what the pages showed."""
    student = classroom.students[0]
    seen = {}
    context, page = log_in(browser, hub, student)
    seen['lab_url'] = page.url
    seen['menu'] = nbgrader_menu(page)
    response = context.request.get(f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments')
    seen['formgrader'] = (response.status, response.text()[:3000])
    assignment_list(page)
    released = page.locator('#released_assignments_list .list_item', has_text=STEP)
    released.wait_for()
    seen['released'] = released.text_content()
    shoot(page, '01-student-assignments')
    released.get_by_role('button', name='Fetch').click()
    fetched = page.locator('#fetched_assignments_list .list_item', has_text=STEP).first
    fetched.wait_for()
    shoot(page, '02-student-fetched')
    fetched.locator('.assignment-notebooks-link').click()
    page.locator('#fetched_assignments_list a', has_text=NOTEBOOK).click()
    cell(page, 0).locator('h1').wait_for()
    page.get_by_text('Python 3 (ipykernel) | Idle').wait_for()
    fill_in(page, HEAD)
    page.keyboard.press('Escape')
    page.keyboard.press('Control+s')
    page.locator('.lm-TabBar-tab.jp-mod-dirty').wait_for(state='detached')
    shoot(page, '03-student-head-typed')

    page.get_by_role('button', name='Validate').click()
    dialog = page.locator('.jp-Dialog', has_text='Validation Results')
    dialog.wait_for()
    seen['validate'] = dialog.locator('.jp-Dialog-body').text_content()
    shoot(page, '04-student-validate')
    dialog.get_by_role('button', name='Ok').click()

    page.locator('.lm-TabBar-tab', has_text='Assignments').click()
    fetched = page.locator('#fetched_assignments_list .list_item', has_text=STEP).first
    fetched.get_by_role('button', name='Submit').click()
    submitted = page.locator('#submitted_assignments_list .list_item', has_text=STEP)
    submitted.first.wait_for()
    seen['submitted'] = submitted.first.text_content()
    shoot(page, '05-student-submitted')
    seen['context'], seen['page'] = context, page
    return seen


def formgrader_frame(page):
    frame = page.locator('iframe').first.element_handle().content_frame()
    frame.wait_for_url('**/formgrader/manage_assignments')
    frame.wait_for_function('() => window.models && models.loaded')
    return frame


@pytest.fixture(scope='module')
def instructor_journey(browser, student_journey, hub, classroom):
    """The instructor: logs in, opens the formgrader from the course list, collects; grades with python -m course.grader.grade
    in the course directory, as the instructor; releases the feedback from the formgrader."""
    seen = {}
    context, page = log_in(browser, hub, classroom.instructor)
    seen['menu'] = nbgrader_menu(page)
    menu(page, 'Nbgrader', 'Course List')
    link = page.locator('#formgrader_list a', has_text=COURSE_ID).or_(page.get_by_role('link', name=COURSE_ID)).first
    link.wait_for()
    seen['course_link'] = link.get_attribute('href')
    shoot(page, '06-instructor-course-list')
    page.goto(seen['course_link'])
    frame = formgrader_frame(page)
    seen['service_url'], seen['frame_url'] = page.url, frame.url
    row = frame.locator('#main-table tr', has_text=STEP)
    shoot(page, '07-formgrader-in-service-lab')
    row.locator('td.collect a').click()
    frame.locator('#success-modal').wait_for()
    seen['collect'] = frame.locator('#success-modal').text_content()
    shoot(page, '08-formgrader-collected')
    frame.locator('#success-modal button', has_text='OK').or_(frame.locator('#success-modal .close')).first.click()

    done = classroom.instructor_run(['python', '-m', 'course.grader.grade', '--step', STEP], 'python -m course.grader.grade')
    seen['grade_output'] = done.stdout + done.stderr

    frame.goto(frame.url)
    frame.wait_for_function('() => window.models && models.loaded')
    row = frame.locator('#main-table tr', has_text=STEP)
    seen['num_submissions'] = row.locator('td.num-submissions').text_content().strip()
    row.locator('td.release-feedback a').click()
    frame.locator('#success-modal').wait_for()
    seen['release_feedback'] = frame.locator('#success-modal').text_content()
    shoot(page, '09-formgrader-feedback-released')
    context.close()
    return seen


@pytest.fixture(scope='module')
def feedback_journey(instructor_journey, student_journey, hub, classroom):
    """The student, back in the Assignments tab: fetches the feedback and opens its page."""
    seen = {}
    page = student_journey['page']
    page.locator('.lm-TabBar-tab', has_text='Assignments').click()
    page.locator('#refresh_assignments_list').click()
    submitted = page.locator('#submitted_assignments_list .list_item', has_text=STEP).first
    submitted.get_by_role('button', name='Fetch Feedback').click()
    view = page.locator('#submitted_assignments_list a', has_text='view feedback').first
    view.wait_for()
    shoot(page, '10-student-feedback-fetched')
    view.click()
    home = classroom.students[0]['home']
    pages = sorted(home.glob(f'{STEP}/feedback/*/{NOTEBOOK}.html'))
    seen['feedback_files'] = pages
    if pages:
        tab = student_journey['context'].new_page()
        user = classroom.students[0]['name']
        tab.goto(f'{hub.url}/user/{user}/files/{pages[-1].relative_to(home)}')
        tab.locator('body').wait_for()
        seen['text'] = tab.locator('body').inner_text()
        shoot(tab, '11-student-reads-feedback')
    student_journey['context'].close()
    return seen


def test_student_logs_in_with_their_unix_password_and_gets_their_own_server(student_journey, classroom):
    assert f'/user/{classroom.students[0]["name"]}/lab' in student_journey['lab_url'], student_journey['lab_url']


def test_students_server_runs_as_their_own_unix_account(student_journey, classroom):
    import psutil

    student = classroom.students[0]
    servers = [p for p in psutil.process_iter(['uids', 'cmdline'])
               if 'jupyterhub-singleuser' in ' '.join(p.info['cmdline'] or []) and p.info['uids'].real == student['uid']]
    assert servers, f'no jupyterhub-singleuser process of uid {student["uid"]} ({student["name"]})'


def test_submitted_notebook_in_the_exchange_holds_the_typed_head(student_journey, classroom):
    from course.cells import read

    inbound = classroom.exchange / COURSE_ID / 'inbound'
    found = sorted(inbound.glob(f'{classroom.students[0]["name"]}+{STEP}+*/{NAME}'))
    assert found, f'no submission of {classroom.students[0]["name"]} in {inbound}: {os.listdir(inbound)}'
    assert read(found[-1]).cells[HEAD].source == SOLUTION, read(found[-1]).cells[HEAD].source


def test_validate_passes_heads_tests(student_journey):
    from browserpage import RELEASE, STUB

    assert STUB in student_journey['validate'], (
        f"Validate should list the later exercises, left as stubs, as failing: {student_journey['validate'][:2000]}")
    failed = [RELEASE[i].source.splitlines()[0] for i in HEAD_TESTS if RELEASE[i].source.splitlines()[0] in
              student_journey['validate']]
    assert not failed, f"Validate lists Head's own tests as failed: {failed}\n{student_journey['validate'][:2000]}"


def test_course_list_links_to_the_formgrader_service(instructor_journey, hub):
    assert instructor_journey['course_link'] == f'{hub.url}/services/{COURSE_ID}/lab?formgrader=true', \
        instructor_journey['course_link']


def test_formgrader_opens_framed_in_the_service_lab(instructor_journey):
    """nbgrader #1870: under JupyterHub >= 4.1 the formgrader's frame stayed blank (frame-ancestors 'none')."""
    assert f'/services/{COURSE_ID}/formgrader/manage_assignments' in instructor_journey['frame_url'], instructor_journey


def test_formgrader_collects_the_submission(instructor_journey, classroom):
    student = classroom.students[0]['name']
    assert (classroom.course / 'submitted' / student / STEP / NAME).exists(), instructor_journey['collect']


def test_course_grader_grades_the_collected_submission(instructor_journey, classroom):
    student = classroom.students[0]['name']
    with Gradebook(f'sqlite:///{classroom.course / "gradebook.db"}') as gb:
        submission = gb.find_submission(STEP, student)
        score, max_score = submission.score, submission.max_score
    assert max_score > 0 and score > 0, f'{student} scored {score}/{max_score}:\n{instructor_journey["grade_output"][-3000:]}'


def test_released_feedback_reaches_the_exchange(instructor_journey, classroom):
    feedback = list((classroom.exchange / COURSE_ID / 'feedback').glob('*.html'))
    assert len(feedback) == 1, f'{feedback}; the formgrader said: {instructor_journey["release_feedback"]}'


def gradebook_score(classroom):
    with Gradebook(f'sqlite:///{classroom.course / "gradebook.db"}') as gb:
        s = gb.find_submission(STEP, classroom.students[0]['name'])
        return s.score, s.max_score


def test_student_reads_their_score_on_the_feedback_page(feedback_journey, classroom):
    score, max_score = gradebook_score(classroom)
    text = feedback_journey.get('text', '')
    assert feedback_journey['feedback_files'], 'no feedback page in the student\'s step4/feedback/ after Fetch Feedback'
    want = re.compile(rf'Score:\s*{score:g}(\.0+)?\s*/\s*{max_score:g}(\.0+)?')
    assert want.search(text), f'the page does not say Score: {score:g} / {max_score:g}:\n{text[:1500]}'


@pytest.fixture(scope='module')
def grader_journey(browser, student_journey, hub, classroom):
    """A grader (not the instructor): logs in; the course list links to the formgrader, which serves them."""
    context, page = log_in(browser, hub, classroom.graders[0])
    menu(page, 'Nbgrader', 'Course List')
    link = page.get_by_role('link', name=COURSE_ID).first
    link.wait_for()
    seen = {'course_link': link.get_attribute('href')}
    response = context.request.get(f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments')
    seen['formgrader'] = (response.status, response.text()[:3000])
    shoot(page, '12-grader-course-list')
    context.close()
    return seen


def test_student_sees_only_the_assignment_list(student_journey):
    assert student_journey['menu'] == ['Assignment List'], student_journey['menu']


def test_instructor_sees_the_course_list_and_no_local_formgrader(instructor_journey):
    assert instructor_journey['menu'] == ['Assignment List', 'Course List'], instructor_journey['menu']


def test_student_cannot_open_the_formgrader(student_journey):
    status, body = student_journey['formgrader']
    assert status == 403 and 'Manage Assignments' not in body, (status, body[:500])


def test_grader_reaches_the_formgrader_through_the_course_list(grader_journey, hub):
    status, body = grader_journey['formgrader']
    assert grader_journey['course_link'] == f'{hub.url}/services/{COURSE_ID}/lab?formgrader=true', grader_journey
    assert status == 200 and 'Manage Assignments' in body, (status, body[:500])


# Security, as each student's own Unix account (their submissions are in the exchange once the journey has run).

def other_submission(classroom):
    inbound = classroom.exchange / COURSE_ID / 'inbound'
    return sorted(inbound.glob(f'{classroom.students[0]["name"]}+{STEP}+*'))[-1]


def test_student_cannot_list_the_exchanges_inbound_or_feedback(feedback_journey, classroom):
    for student in classroom.students[1:]:
        for folder in ('inbound', 'feedback'):
            done = as_user(student, classroom.exchange, ['ls', str(classroom.exchange / COURSE_ID / folder)])
            assert done.returncode != 0 and 'Permission denied' in done.stderr, (student['name'], folder, done.stdout)


def test_student_cannot_read_another_students_work_or_feedback_in_their_home(feedback_journey, classroom):
    owner = classroom.students[0]
    targets = [owner['home'] / STEP / NAME, *feedback_journey['feedback_files']]
    assert all(p.exists() for p in targets) and len(targets) > 1, targets
    for student in classroom.students[1:]:
        for path in targets:
            done = as_user(student, classroom.exchange, ['cat', str(path)])
            assert done.returncode != 0 and 'Permission denied' in done.stderr, (student['name'], str(path))


def test_student_cannot_read_the_instructors_source_instructor_files_or_gradebook(instructor_journey, classroom):
    course = classroom.course
    targets = [course / 'source' / STEP / NAME, course / 'source' / STEP / 'instructor' / 'checks.py',
               course / 'gradebook.db', course / 'submitted' / classroom.students[0]['name'] / STEP / NAME]
    for path in targets:
        assert path.exists(), f'{path} should exist for this test to mean anything'
    for student in classroom.students:
        for path in targets:
            done = as_user(student, classroom.exchange, ['cat', str(path)])
            assert done.returncode != 0 and 'Permission denied' in done.stderr, (student['name'], str(path), done.stdout[:200])


def test_student_cannot_submit_as_someone_else(instructor_journey, classroom):
    """The exchange's inbound is writable by all, and `nbgrader submit --student <name>` writes under any name: a
    student can put a submission in as another. Collect must not take it as that student's (nbgrader's own collect only
    logs a warning; the course's skips it). The forger's own submission, beside it, is collected (the control)."""
    forger, victim = classroom.students[1], classroom.students[2]
    inbound = classroom.exchange / COURSE_ID / 'inbound'
    forged = inbound / f'{victim["name"]}+{STEP}+2099-01-01 00:00:00.000000 UTC+forged'
    by_hand = as_user(forger, classroom.exchange, ['sh', '-c', f'mkdir "{forged}" && echo "2099-01-01 00:00:00.000000 UTC" '
                                                               f'> "{forged}/timestamp.txt" && echo "{{}}" > "{forged}/{NAME}"'])
    fetched = as_user(forger, classroom.exchange, ['nbgrader', 'fetch_assignment', STEP])
    as_victim = as_user(forger, classroom.exchange, ['nbgrader', 'submit', STEP, '--student', victim['name']])
    own = as_user(forger, classroom.exchange, ['nbgrader', 'submit', STEP])
    for done in (by_hand, fetched, as_victim, own):
        assert done.returncode == 0, f'{done.args[-4:]} failed: {done.stderr[-2000:]}'
    claimed = [p.name for p in inbound.iterdir() if p.name.startswith(f'{victim["name"]}+')]
    assert len(claimed) == 2, f'the two forgeries should be in the exchange under {victim["name"]}: {claimed}'
    collected = classroom.instructor_run(['nbgrader', 'collect', STEP], 'nbgrader collect')
    log = collected.stdout + collected.stderr
    assert (classroom.course / 'submitted' / forger['name'] / STEP / NAME).exists(), f'the control was not collected:\n{log}'
    assert not (classroom.course / 'submitted' / victim['name'] / STEP).exists(), (
        f'{forger["name"]} submitted as {victim["name"]}:\n{log}')


def test_students_cannot_rename_or_remove_the_courses_exchange_folder(student_journey, classroom):
    folder = classroom.exchange / COURSE_ID
    assert os.stat(classroom.exchange).st_mode & stat.S_ISVTX, 'the exchange root should be sticky (1777)'
    done = as_user(classroom.students[1], classroom.exchange, ['mv', str(folder), str(folder) + '-gone'])
    assert done.returncode != 0 and folder.is_dir(), done.stderr


def test_hub_stops_every_server_and_the_proxy(feedback_journey, grader_journey, hub):
    """Last: the hub, told to stop, stops the servers it spawned, its formgrader service and the proxy."""
    left = hub.stop()
    assert hub.process.returncode is not None and not left, f'still running after the hub stopped: {left}'

