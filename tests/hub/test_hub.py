# ruff: noqa: F811  (the fixtures imported from hubserver are named as the tests' parameters)
"""The class on JupyterHub, set up by following docs/hub.md as written (tests/support/hub/hubserver.py: in a machine with
systemd, behind nginx's TLS), then a step run through it as people do, in headless Chromium. Screenshots:
test-artifacts/hub/.

The instructor types the docs' release commands in a hub terminal; a student logs in with the password the roster
command gave them, fetches Step 4, types Head's solution, fills in the rest as a student would, validates and submits;
the instructor collects in the formgrader (framed in the service's JupyterLab) and types the docs' grading commands in
the terminal; the grader gives the written answers full credit in the formgrader; the instructor generates and releases
the feedback; the student fetches it, opens it with "view feedback" and reads full marks. Each test checks one claim.

Then what each student's Unix account can and cannot do with the exchange and the instructor's files, as that account.
"""

import re
import secrets

import nbformat
import pytest

from course.authoring.demo import solved
from course.layout import ROOT
from support.browserpage import HEAD, NAME, NOTEBOOK, SOLUTION, cell, fill_in, menu, shooter
from support.hub.hubserver import (  # noqa: F401  (fixtures)
    COURSE_ID,
    GRADER,
    INSTRUCTOR,
    STEP,
    STUDENTS,
    browser,
    docs_commands,
    fetched,
    hub,
    log_in,
    machine,
)

shoot = shooter(ROOT / 'test-artifacts' / 'hub')
STUDENT = STUDENTS[0]


def nbgrader_menu(page):
    """The items of JupyterLab's Nbgrader menu, as this user's server offers them."""
    page.locator('.lm-MenuBar-itemLabel', has_text=re.compile('^Nbgrader$')).click()
    items = [t.strip() for t in page.locator('.lm-Menu-itemLabel').all_text_contents() if t.strip()]
    page.keyboard.press('Escape')
    return items


SCREEN = ("() => { const t = [...document.querySelectorAll('.jp-Terminal')].pop();"
          " const rows = t && t.querySelector('.xterm-accessibility-tree, .xterm-rows');"
          " return rows ? [...rows.children].map(r => r.textContent).join('\\n') : ''; }")


def screen_reader(hub, user):
    """Turn on JupyterLab's Terminal ▸ Screen Reader Mode in user's settings: xterm then keeps the screen's text in
    the page (it draws on a canvas otherwise), where the test reads it, as a screen reader does."""
    folder = f'/home/{user}/.jupyter/lab/user-settings/@jupyterlab/terminal-extension'
    hub.m.run(['sh', '-c', f'mkdir -p {folder} && echo \'{{"screenReaderMode": true}}\' > {folder}/plugin.jupyterlab-settings'],
              user=user)


def terminal(page):
    """A new JupyterLab terminal (File > New > Terminal), its prompt shown."""
    menu(page, 'File', 'New')
    page.locator('.lm-Menu-itemLabel', has_text=re.compile('^Terminal$')).last.click()
    screen = page.locator('.jp-Terminal').last
    page.wait_for_function(f'() => ({SCREEN})().includes("$")')
    return screen


def type_in(page, screen, lines, done, what):
    """Type each line as a person does (key by key, then Enter) into screen; wait until everything typed has run; the
    screen's text from the first typed line on, which must show done (a regular expression)."""
    page.locator('.lm-TabBar-tab:has([data-icon="ui-components:terminal"])').last.click()  # its tab, to the front
    screen.click()
    for line in lines:
        page.keyboard.type(line)
        page.keyboard.press('Enter')
    token = secrets.randbelow(10**9)
    page.keyboard.type(f'echo "=={token}-$((6*7))=="')  # prints =={token}-42== once everything typed before it has run
    page.keyboard.press('Enter')
    page.wait_for_function(f'() => ({SCREEN})().includes("=={token}-42==")', timeout=900_000)
    text = page.evaluate(SCREEN)
    start = text.rfind(lines[0]) if lines else -1
    shown = text[max(start, 0):]
    assert re.search(done, shown), f'{what}: the terminal does not show {done!r}:\n{shown[-3000:]}'
    return shown


def formgrader_frame(page):
    frame = page.locator('iframe').first.element_handle().content_frame()
    frame.wait_for_url('**/formgrader/manage_assignments')
    frame.wait_for_function('() => window.models && models.loaded')
    return frame


def assignment_list(page):
    menu(page, 'Nbgrader', 'Assignment List')
    page.locator('#released_assignments_list_loading').wait_for(state='hidden')


@pytest.fixture(scope='module')
def instructor(browser, hub):
    """The instructor: logs in, opens a terminal and types the docs' release block (Step 1 of "A class")."""
    seen = {}
    screen_reader(hub, INSTRUCTOR)
    context, page = log_in(browser, hub, INSTRUCTOR)
    seen['menu'] = nbgrader_menu(page)
    screen = terminal(page)
    seen['release'] = type_in(page, screen, docs_commands('release'), r'Released as: ' + COURSE_ID, 'nbgrader release')
    shoot(page, '01-instructor-releases-in-a-terminal')
    seen['context'], seen['page'], seen['screen'] = context, page, screen
    return seen


@pytest.fixture(scope='module')
def student_journey(browser, hub, instructor):
    """The first student: logs in, fetches, types Head, fills in the rest, validates, submits."""
    seen = {}
    context, page = log_in(browser, hub, STUDENT)
    seen['lab_url'] = page.url
    seen['menu'] = nbgrader_menu(page)
    seen['formgrader'] = fetched(page, f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments')
    assignment_list(page)
    released = page.locator('#released_assignments_list .list_item', has_text=STEP)
    released.wait_for()
    shoot(page, '02-student-assignments')
    released.get_by_role('button', name='Fetch').click()
    mine = page.locator('#fetched_assignments_list .list_item', has_text=STEP).first
    mine.wait_for()
    mine.locator('.assignment-notebooks-link').click()
    page.locator('#fetched_assignments_list a', has_text=NOTEBOOK).click()
    cell(page, 0).locator('h1').wait_for()
    page.get_by_text('Python 3 (ipykernel) | Idle').wait_for()
    fill_in(page, HEAD)
    page.keyboard.press('Escape')
    page.keyboard.press('Control+s')
    page.locator('.lm-TabBar-tab.jp-mod-dirty').wait_for(state='detached')
    shoot(page, '03-student-head-typed')
    path = hub.home(STUDENT) / STEP / NAME
    seen['typed_head'] = nbformat.read(path, as_version=4).cells[HEAD].source
    # the rest of the step, as the student would fill it in (every exercise and written answer), saved by them
    hub.m.run(['sh', '-c', 'cat > "$0"', f'/home/{STUDENT}/{STEP}/{NAME}'], user=STUDENT,
              input=nbformat.writes(solved(STEP, NAME)))
    menu(page, 'File', 'Reload Notebook from Disk')
    page.get_by_role('button', name='Validate').click()
    dialog = page.locator('.jp-Dialog', has_text='Validation Results')
    dialog.wait_for()
    seen['validate'] = dialog.locator('.jp-Dialog-body').text_content()
    shoot(page, '04-student-validate')
    dialog.get_by_role('button', name='Ok').click()
    page.locator('.lm-TabBar-tab', has_text='Assignments').click()
    mine = page.locator('#fetched_assignments_list .list_item', has_text=STEP).first
    mine.get_by_role('button', name='Submit').click()
    submitted = page.locator('#submitted_assignments_list .list_item', has_text=STEP)
    submitted.first.wait_for()
    shoot(page, '05-student-submitted')
    seen['context'], seen['page'] = context, page
    return seen


@pytest.fixture(scope='module')
def graded(browser, hub, instructor, student_journey):
    """The instructor collects in the formgrader and types the docs' grading block in the terminal."""
    seen = {}
    page = instructor['page']
    menu(page, 'Nbgrader', 'Course List')
    link = page.get_by_role('link', name=COURSE_ID).first
    link.wait_for()
    seen['course_link'] = link.get_attribute('href')
    lab = instructor['context'].new_page()
    lab.goto(seen['course_link'])
    frame = formgrader_frame(lab)
    seen['frame_url'] = frame.url
    row = frame.locator('#main-table tr', has_text=STEP)
    seen['duedate'] = row.locator('td').nth(1).inner_text()
    shoot(lab, '06-formgrader-in-service-lab')
    row.locator('td.collect a').click()
    frame.locator('#success-modal').wait_for()
    seen['collect'] = frame.locator('#success-modal').text_content()
    frame.locator('#success-modal button', has_text='OK').or_(frame.locator('#success-modal .close')).first.click()
    seen['grade'] = type_in(page, instructor['screen'], docs_commands('grade'), rf'{STUDENT}\s', 'course grader')
    shoot(page, '07-instructor-grades-in-a-terminal')
    log = hub.course / '.build' / 'logs' / STEP / f'{STUDENT}.log'  # what the grader says of the submission
    text = log.read_text(errors='replace') if log.is_file() else f'(no {log.name})'
    seen['log'] = text[:6000] + ('\n...\n' + text[-2000:] if len(text) > 8000 else text[6000:])
    seen['lab'], seen['frame'] = lab, frame
    return seen


@pytest.fixture(scope='module')
def written_answers(browser, hub, graded):
    """The grader: logs in, opens the formgrader from their course list, gives each written answer full credit."""
    seen = {}
    context, page = log_in(browser, hub, GRADER)
    menu(page, 'Nbgrader', 'Course List')
    link = page.get_by_role('link', name=COURSE_ID).first
    link.wait_for()
    seen['course_link'] = link.get_attribute('href')
    seen['formgrader'] = fetched(page, f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments')
    sheet = context.new_page()
    sheet.goto(f'{hub.url}/services/{COURSE_ID}/formgrader/gradebook/{STEP}/{NOTEBOOK}')
    sheet.locator('a[href*="/formgrader/submissions/"]').first.click()
    sheet.wait_for_url('**/formgrader/submissions/**')
    # its buttons act only once the page's grades and comments are loaded (as tests/test_browser.py waits)
    sheet.wait_for_function('() => window.formgrader && formgrader.grades.loaded && formgrader.comments.loaded')
    buttons = sheet.locator('button.full-credit')
    buttons.first.wait_for()
    seen['answers'] = buttons.count()
    for i in range(seen['answers']):
        with sheet.expect_response(lambda r: '/formgrader/api/grade/' in r.url and r.request.method == 'PUT'):
            buttons.nth(i).click()
    shoot(sheet, '08-grader-full-credit')
    context.close()
    return seen


@pytest.fixture(scope='module')
def released(hub, graded, written_answers):
    """The instructor, in the formgrader: Generate feedback, then Release feedback (a feedback folder with no
    timestamp.txt put beside the class's first: what a submission that never came through the exchange leaves)."""
    seen = {}
    stray = f'/home/{INSTRUCTOR}/{COURSE_ID}/feedback/stray/{STEP}'
    hub.m.run(['sh', '-c', f'mkdir -p {stray} && echo "<p>stray</p>" > {stray}/{NOTEBOOK}.html'], user=INSTRUCTOR)
    frame, lab = graded['frame'], graded['lab']
    frame.goto(frame.url)
    frame.wait_for_function('() => window.models && models.loaded')
    row = frame.locator('#main-table tr', has_text=STEP)
    row.locator('td.generate-feedback a').click()
    frame.locator('#success-modal').wait_for()
    frame.locator('#success-modal button', has_text='OK').or_(frame.locator('#success-modal .close')).first.click()
    frame.locator('#success-modal').wait_for(state='hidden')
    row.locator('td.release-feedback a').click()
    modal = frame.locator('#success-modal, #error-modal').first
    modal.wait_for()
    seen['modal'] = modal.get_attribute('id')
    seen['release_feedback'] = modal.text_content()
    shoot(lab, '09-formgrader-feedback-released')
    return seen


@pytest.fixture(scope='module')
def feedback_journey(hub, student_journey, released):
    """The student, back in the Assignments tab: fetches the feedback and clicks "view feedback"."""
    seen = {}
    context, page = student_journey['context'], student_journey['page']
    page.locator('.lm-TabBar-tab', has_text='Assignments').click()
    page.locator('#refresh_assignments_list').click()
    submitted = page.locator('#submitted_assignments_list .list_item', has_text=STEP).first
    submitted.get_by_role('button', name='Fetch Feedback').click()
    view = page.locator('#submitted_assignments_list a', has_text='view feedback').first
    view.wait_for()
    shoot(page, '10-student-feedback-fetched')
    with context.expect_page() as opened:
        view.click()
    tab = opened.value
    tab.wait_for_load_state()
    tab.get_by_text('Score').first.wait_for()
    seen['url'], seen['text'] = tab.url, tab.locator('body').inner_text()
    shoot(tab, '11-student-reads-feedback')
    seen['files'] = sorted(hub.home(STUDENT).glob(f'{STEP}/feedback/*/{NOTEBOOK}.html'))
    return seen


def test_the_instructors_hub_terminal_finds_the_courses_nbgrader(instructor):
    """JupyterLab's terminal is a login shell whose /etc/profile resets PATH: the docs' commands still run."""
    assert 'command not found' not in instructor['release'], instructor['release'][-2000:]


def test_release_sets_the_due_date_of_course_toml(instructor, graded, hub):
    from course.classroom.lms import scheduled_due

    due = scheduled_due(STEP)
    with hub.gradebook() as gb:
        held = gb.find_assignment(STEP).duedate
    assert held == due, f'the gradebook says {STEP} is due {held}, course.toml {due}'
    assert f'{due:%Y-%m-%d %H:%M}' in instructor['release'] and str(due.year) in graded['duedate'], graded['duedate']


def test_student_logs_in_with_the_rosters_password_and_gets_their_own_server(student_journey, hub):
    assert f'/user/{STUDENT}/lab' in student_journey['lab_url'], student_journey['lab_url']
    assert hub.unit_active(hub.server_unit(STUDENT)), f'no systemd unit {hub.server_unit(STUDENT)} for the server'


def test_students_server_runs_as_their_account_within_its_limits(student_journey, hub):
    unit = hub.server_unit(STUDENT)
    shown = hub.sh(f'systemctl show -p User -p MemoryMax -p CPUQuotaPerSecUSec {unit}').stdout
    uid = hub.sh(f'id -u {STUDENT}').stdout.strip()
    assert f'User={uid}' in shown and 'MemoryMax=2147483648' in shown and 'CPUQuotaPerSecUSec=1s' in shown, shown


def test_the_typed_head_is_saved_in_the_students_notebook(student_journey):
    assert student_journey['typed_head'] == SOLUTION, student_journey['typed_head']


def test_validate_passes_every_test_of_the_filled_in_step(student_journey):
    assert 'Success! Your notebook passes all the tests.' in student_journey['validate'], student_journey['validate'][:2000]


def test_student_sees_only_the_assignment_list(student_journey):
    assert student_journey['menu'] == ['Assignment List'], student_journey['menu']


def test_student_cannot_open_the_formgrader(student_journey):
    status, body = student_journey['formgrader']
    assert status == 403 and 'Manage Assignments' not in body, (status, body[:500])


def test_instructor_sees_the_course_list_and_no_local_formgrader(instructor):
    assert instructor['menu'] == ['Assignment List', 'Course List'], instructor['menu']


def test_course_list_opens_the_formgrader_framed_in_the_service_lab(graded, hub):
    """nbgrader #1870: under JupyterHub >= 4.1 the formgrader's frame stayed blank (frame-ancestors 'none')."""
    assert graded['course_link'] == f'{hub.url}/services/{COURSE_ID}/lab?formgrader=true', graded['course_link']
    assert f'/services/{COURSE_ID}/formgrader/manage_assignments' in graded['frame_url'], graded['frame_url']


def test_formgrader_collects_the_submission(graded, hub):
    assert (hub.course / 'submitted' / STUDENT / STEP / NAME).exists(), graded['collect']


def test_the_course_grader_graded_the_submission_in_the_hub_terminal(graded):
    assert re.search(rf'{STUDENT}\s+graded', graded['grade']) and 'not graded' not in graded['grade'], (
        graded['grade'][-1500:] + '\n' + graded['log'])


def test_grader_reaches_the_formgrader_through_the_course_list(written_answers, hub):
    status, body = written_answers['formgrader']
    assert written_answers['course_link'] == f'{hub.url}/services/{COURSE_ID}/lab?formgrader=true', written_answers
    assert status == 200 and 'Manage Assignments' in body, (status, body[:500])


def test_release_feedback_releases_the_class_and_names_what_it_skipped(released, hub):
    text = released['release_feedback']
    assert released['modal'] == 'success-modal' and 'Traceback' not in text, text[:3000]
    assert 'Not released: stray' in text and 'feedback released to 1 student' in text, text[:3000]
    assert len(list((hub.exchange / COURSE_ID / 'feedback').glob('*.html'))) == 1, text[:3000]


def test_the_on_time_correct_submission_reads_full_marks_on_its_feedback_page(feedback_journey, hub):
    with hub.gradebook() as gb:
        s = gb.find_submission(STEP, STUDENT)
        score, max_score, penalty = s.score, s.max_score, s.late_submission_penalty
    text = feedback_journey['text']
    assert max_score > 0 and score == max_score and not penalty, f'{STUDENT}: {score}/{max_score}, late {penalty}'
    assert re.search(rf'Score:\s*{max_score:g}(\.0+)?\s*/\s*{max_score:g}(\.0+)?', text), text[:1500]


def test_view_feedback_opens_the_feedback_page(feedback_journey):
    assert feedback_journey['files'], f"no feedback page in the student's {STEP}/feedback/ after Fetch Feedback"
    assert feedback_journey['url'].endswith(f'{NOTEBOOK}.html'), feedback_journey['url']


# Security, as each student's own Unix account (their submissions are in the exchange once the journey has run).

def as_student(hub, student, command):
    return hub.m.run(['sh', '-c', command], user=student, check=False)


def test_student_cannot_list_the_exchanges_inbound_or_feedback(feedback_journey, hub):
    for student in STUDENTS[1:]:
        for folder in ('inbound', 'feedback'):
            done = as_student(hub, student, f'ls /srv/nbgrader/exchange/{COURSE_ID}/{folder}')
            assert done.returncode != 0 and 'Permission denied' in done.stderr, (student, folder, done.stdout)


def test_student_cannot_read_another_students_work_or_feedback(feedback_journey, hub):
    targets = [f'/home/{STUDENT}/{STEP}/{NAME}',
               *(f'/home/{STUDENT}/{p.relative_to(hub.home(STUDENT))}' for p in feedback_journey['files'])]
    assert len(targets) > 1, targets
    for student in STUDENTS[1:]:
        for path in targets:
            done = as_student(hub, student, f'cat "{path}"')
            assert done.returncode != 0 and 'Permission denied' in done.stderr, (student, path)


def test_student_cannot_read_the_instructors_source_instructor_files_or_gradebook(graded, hub):
    course = f'/home/{INSTRUCTOR}/{COURSE_ID}'
    targets = [f'{course}/source/{STEP}/{NAME}', f'{course}/source/{STEP}/instructor/checks.py', f'{course}/gradebook.db',
               f'{course}/submitted/{STUDENT}/{STEP}/{NAME}']
    for path in targets:
        assert hub.m.path(path).exists(), f'{path} should exist for this test to mean anything'
    for student in STUDENTS:
        for path in targets:
            done = as_student(hub, student, f'cat "{path}"')
            assert done.returncode != 0 and 'Permission denied' in done.stderr, (student, path, done.stdout[:200])


def test_student_cannot_submit_as_someone_else(feedback_journey, hub):
    """The exchange's inbound is writable by all, and `nbgrader submit --student <name>` writes under any name: collect
    must not take it as that student's (the course's collect skips it). The forger's own submission is collected."""
    forger, victim = STUDENTS[1], STUDENTS[2]
    inbound = f'/srv/nbgrader/exchange/{COURSE_ID}/inbound'
    forged = f'{inbound}/{victim}+{STEP}+2099-01-01 00:00:00.000000 UTC+forged'
    for command in (f'mkdir "{forged}" && echo "2099-01-01 00:00:00.000000 UTC" > "{forged}/timestamp.txt" && '
                    f'echo "{{}}" > "{forged}/{NAME}"',
                    f'nbgrader fetch_assignment {STEP}', f'nbgrader submit {STEP} --student {victim}',
                    f'nbgrader submit {STEP}'):
        done = hub.m.run(['bash', '-lc', f'cd ~ && {command}'], user=forger, check=False,  # in their home, as a terminal is
                         env={'COURSE_HUB_ENV': '/opt/transformer-hub', 'HOME': f'/home/{forger}',
                              'JUPYTER_CONFIG_PATH': '/opt/transformer-hub/share/course-hub/roles/student:'
                                                     '/opt/transformer-hub/share/course-hub/roles/common'})
        assert done.returncode == 0, f'{command} failed: {done.stderr[-2000:]}'
    claimed = [p.name for p in hub.m.path(inbound).iterdir() if p.name.startswith(f'{victim}+')]
    assert len(claimed) == 2, f'the two forgeries should be in the exchange under {victim}: {claimed}'
    collected = hub.m.run(['bash', '-lc', f'cd ~/{COURSE_ID} && nbgrader collect {STEP}'], user=INSTRUCTOR, check=False,
                          env={'COURSE_HUB_ENV': '/opt/transformer-hub', 'HOME': f'/home/{INSTRUCTOR}',
                               'JUPYTER_CONFIG_PATH': '/opt/transformer-hub/share/course-hub/roles/staff:'
                                                      '/opt/transformer-hub/share/course-hub/roles/common'})
    log = collected.stdout + collected.stderr
    assert (hub.course / 'submitted' / forger / STEP / NAME).exists(), f'the control was not collected:\n{log}'
    assert not (hub.course / 'submitted' / victim / STEP).exists(), f'{forger} submitted as {victim}:\n{log}'


def test_students_cannot_rename_the_courses_exchange_folder(student_journey, hub):
    folder = f'/srv/nbgrader/exchange/{COURSE_ID}'
    done = as_student(hub, STUDENTS[1], f'mv {folder} {folder}-gone')
    assert done.returncode != 0 and hub.m.path(folder).is_dir(), done.stderr


def test_every_server_sees_one_read_only_tiny_shakespeare(student_journey, hub):
    """The hub links ~/input.txt to the shared copy (where the notebooks look: Validate ran the data cell with it), and
    sets TINY_SHAKESPEARE_URL to it for notebooks elsewhere; no student can change it."""
    shared = '/opt/transformer-hub/share/course-hub/input.txt'
    link = hub.sh(f'readlink /home/{STUDENT}/input.txt').stdout.strip()
    mode = hub.sh(f'stat -c %U:%a {shared}').stdout.strip()
    writable = hub.sh(f'[ -w {shared} ] && echo writable', user=STUDENT, check=False).stdout
    env = hub.sh(f'tr "\\0" "\\n" < /proc/{hub.main_pid(hub.server_unit(STUDENT))}/environ').stdout
    assert link == shared and mode == 'root:444' and not writable, (link, mode, writable)
    assert f'TINY_SHAKESPEARE_URL=file://{shared}' in env, env


def class_state(hub):
    """What the class's course directory holds of the class: the gradebook's students and due dates, submitted/."""
    with hub.gradebook() as gb:
        students = sorted(s.id for s in gb.students)
        dues = {a.name: a.duedate for a in gb.assignments}
    return students, dues, sorted(p.name for p in (hub.course / 'submitted').iterdir())


def test_the_demo_leaves_the_class_gradebook_untouched(feedback_journey, hub):
    """The docs' demo block, run by the instructor in the class's course directory (a login shell, as a hub terminal
    is, in the hub's environment), leaves the class's students, due dates and submissions as they were."""
    before = class_state(hub)
    script = ' && '.join(docs_commands('demo'))
    done = hub.m.run(['bash', '-lc', script], user=INSTRUCTOR, check=False, timeout=1800,
                     env={'COURSE_HUB_ENV': '/opt/transformer-hub', 'HOME': f'/home/{INSTRUCTOR}'})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r'perfect\s+graded', done.stdout), f'the demo graded nothing:\n{done.stdout[-2000:]}{done.stderr[-2000:]}'
    assert class_state(hub) == before
