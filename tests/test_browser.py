"""The student and instructor journeys, driven through JupyterLab's UI in headless Chromium (Debian's, via Playwright).

One JupyterLab 4 serves a temporary copy of the course on 127.0.0.1 with a token, while course.grader.grade --demo autogrades a
demo class in that copy. The student opens each step's release and sees its first screen (the set-up collapsed); in the
reference step, finds the test cells locked, types Head into the editor, runs all cells (the Head's tests pass, every
later cell that needs a task not written yet says it waits, and the run reaches the end) and presses nbgrader's Validate;
the instructor opens the formgrader, sees the demo submissions and their scores, and grades one written answer; then a
student opens the feedback page of a demo mistake and of a perfect submission with the network cut off (maths offline).
The fixtures act and record what the page showed; each test checks one claim about it. Screenshots of each step go to
test-artifacts/browser/.
"""

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from nbgrader.api import Gradebook
from PIL import Image
from playwright.sync_api import sync_playwright
from test_lesson import PENDING

from conftest import can_sandbox, free_port
from course.authoring import demo
from course.authoring.demo import edited, solved
from course.cells import grade_id, read, role
from course.layout import ROOT, copy_course, notebooks, steps
from course.reports.feedback import claim_name
from support.browserpage import (
    AID,
    CHROMIUM_ARGS,
    HEAD,
    HEAD_TESTS,
    LOCKED,
    NAME,
    NEXT,
    NOTEBOOK,
    RELEASE,
    SOLUTION,
    STUB,
    TESTS,
    cell,
    chromium,
    fill_in,
    menu,
    shooter,
)

SHOTS = ROOT / 'test-artifacts' / 'browser'
STUDENT_SHOTS = ['01-student-opens-release', '02-student-locked-cell', '03-student-typed-head', '04-student-run-all',
                 '05-student-validate']
INSTRUCTOR_SHOTS = ['06-formgrader-assignments', '07-formgrader-submissions', '08-formgrader-manual-grade']
def first_line(i):
    return RELEASE[i].source.splitlines()[0]


IN_FLIGHT = set()  # every request of the browser (watch()) that has neither finished nor failed


def requested_by(request, tab):
    try:
        return not request.frame.is_detached() and request.frame.page == tab
    except Exception:  # a request of no frame (a service worker's), or of a frame gone
        return False


def settled(page):
    """Wait until the page (or frame) has loaded, every subresource and frame included, and no request has been in
    flight for half a second (Playwright's networkidle, judged on the browser's own request events: Chromium's
    networkidle never came for a file: page opened in a tab that had shown the formgrader, with nothing in flight):
    what its markup would run on load, and fetch, has run by then. Each step waits for an event; 300 s caps the whole."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_load_state('load')
    tab = getattr(page, 'page', page)  # a frame's events arrive on its page
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            tab.wait_for_event('request', timeout=500)  # a new request, or half a second of none
        except PlaywrightTimeout:
            if not any(requested_by(r, tab) for r in list(IN_FLIGHT)):
                return
    pending = sorted(f'{r.method} {r.url[:150]}' for r in list(IN_FLIGHT))
    raise AssertionError(f'{page.url[:150]} never went quiet in 300 s; requests still in flight: {pending}')


shoot = shooter(SHOTS)


# The demo class of the step the journeys are scripted on (the perfect and the blank submission): make grade prepares
# and grades this step only; the formgrader lists every step of source/, with no submission but this one's (the other
# steps' classes are graded in tests/test_grading.py)
WRITE_DEMO = ('from course.authoring.demo import demo_class, write_class; from course.layout import ROOT; '
              f'write_class(demo_class([{AID!r}]), ROOT / "submitted")')


@pytest.fixture(scope='module')
def course(tmp_path_factory):
    """A temporary copy of the course, with course.grader.grade --demo autograding its demo class in the background."""
    root = copy_course(tmp_path_factory.mktemp('course'))
    for bank in (root / 'source').glob('*/instructor/bank.py'):  # a small demo class: the perfect and the blank submission
        bank.unlink()
    # The demo class, written from release/ before the student edits it, and a hostile student (active content everywhere); then
    # course.grader.grade (make grade) grades them all.
    subprocess.run([sys.executable, '-c', WRITE_DEMO], cwd=root, check=True)
    write_hostile(root)
    write_mistake(root)
    log = open(root.parent / 'grade.log', 'w')
    unsandboxed = [] if can_sandbox() else ['--no-sandbox']  # make grade refuses a real class without one
    grading = subprocess.Popen([sys.executable, '-m', 'course.grader.grade', *unsandboxed], cwd=root, stdout=log,
                               stderr=subprocess.STDOUT)
    yield root, grading
    grading.kill()
    grading.wait()
    log.close()


@pytest.fixture(scope='module')
def lab(course, tmp_path_factory):
    """The URL of JupyterLab serving the course copy on 127.0.0.1 with a token, with fresh settings and workspaces."""
    root, _ = course
    home = tmp_path_factory.mktemp('jupyter')
    notification = home / 'settings' / '@jupyterlab' / 'apputils-extension' / 'notification.jupyterlab-settings'
    notification.parent.mkdir(parents=True)
    notification.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no "get Jupyter news?" toast
    (home / 'exchange').mkdir()
    (home / 'nbgrader_config.py').write_text(f'c = get_config()  # noqa\nc.Exchange.root = {str(home / "exchange")!r}\n')
    # The demo class is graded while the student browses: the gradebook's write-ahead log (gradebook.db-wal, -shm) comes
    # and goes in the course root, and a file gone between jupyter_server's lstat and its model of it makes the whole
    # listing a 404 (a "Directory not found" dialog over the file browser, which took every click). The course's server
    # config, which the Makefile puts in the venv, hides them; here, whatever built the venv.
    shutil.copy(ROOT / 'course' / 'jupyter_server_config.json', home / 'jupyter_server_config.json')
    env = {**os.environ, 'JUPYTER_CONFIG_DIR': str(home), 'JUPYTERLAB_SETTINGS_DIR': str(home / 'settings'),
           'JUPYTERLAB_WORKSPACES_DIR': str(home / 'workspaces'), 'JUPYTER_RUNTIME_DIR': str(home / 'runtime')}
    port, token = free_port(), secrets.token_hex(16)
    log = open(home / 'lab.log', 'w')
    server = subprocess.Popen([sys.executable, '-m', 'jupyterlab', '--no-browser', '--allow-root', '--ip=127.0.0.1',
                               f'--port={port}', f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}',
                               '--LabApp.news_url=None'], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300  # a loaded machine (CI, parallel work, grading at the same time) can take minutes
    while True:
        try:
            urllib.request.urlopen(f'http://127.0.0.1:{port}/api/status?token={token}', timeout=2)
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, (home / 'lab.log').read_text()
            time.sleep(0.3)
    yield f'http://127.0.0.1:{port}/lab?token={token}'
    server.terminate()  # JupyterLab shuts its kernels down on SIGTERM
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    log.close()


@pytest.fixture(scope='module')
def page(tmp_path_factory):
    """A page of headless Chromium with a fresh profile."""
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(tmp_path_factory.mktemp('profile'), executable_path=chromium(),
                                                       args=CHROMIUM_ARGS, headless=True, viewport={'width': 1280, 'height': 860})
        # every wait is for an event; this caps each, for every page, tab and popup of the context (a tab's own default
        # is 30 s, which a page of the formgrader exceeded at a load average of 20): a loaded machine is slow, not wrong
        browser.set_default_timeout(300_000)
        watch(browser)  # every page and frame of the browser, from the start: did a student's script run?
        page = browser.pages[0] if browser.pages else browser.new_page()
        yield page
        browser.close()


CELLS_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(c => ({
    prompt: c.querySelector('.jp-InputPrompt')?.textContent ?? '',
    output: c.querySelector('.jp-OutputArea')?.textContent ?? '',
    error: !!c.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')}))"""
IDLE_JS = """(i) => { const p = [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(
        c => c.querySelector('.jp-InputPrompt')?.textContent ?? '');
    const code = p.map((t, k) => k).filter(k => k <= i && document.querySelectorAll('.jp-Notebook .jp-Cell')[k]
        .classList.contains('jp-CodeCell'));
    return code.length > 0 && /\\d/.test(p[code[code.length - 1]]) && !p.some(t => t.includes('*')); }"""
WAITS = 'This cell waits for your task'  # what a cell prints that needs a task not written yet (WaitForTasks)


@pytest.fixture(scope='module')
def student(lab, page, course):
    """The student's journey; returns what the page showed and the notebook as saved."""
    root, _ = course
    path = root / 'release' / AID / NAME
    seen = {}
    page.goto(lab)
    for name in ['release', AID, NAME]:
        page.locator('.jp-DirListing-item', has_text=name).first.dblclick()
    cell(page, 0).locator('h1').wait_for()  # the title cell is rendered
    page.get_by_text('Python 3 (ipykernel) | Idle').wait_for()  # and the kernel is up
    shoot(page, STUDENT_SHOTS[0])

    locked = cell(page, LOCKED).locator('.cm-content')
    locked.click()
    seen['locked_edit_mode'] = page.locator('.jp-Notebook.jp-mod-editMode').count() == 1
    before = locked.text_content()
    page.keyboard.type('pass  # my change')
    seen['locked_text'] = (before, locked.text_content())
    shoot(page, STUDENT_SHOTS[1])

    fill_in(page, HEAD)
    page.keyboard.press('Escape')
    page.keyboard.press('Control+s')
    page.locator('.lm-TabBar-tab.jp-mod-dirty').wait_for(state='detached')
    seen['saved'] = read(path).cells
    shoot(page, STUDENT_SHOTS[2])

    menu(page, 'Run', 'Run All Cells')
    page.wait_for_function(IDLE_JS, arg=len(RELEASE) - 1)  # the run reaches the last cell
    seen['cells'] = page.evaluate(CELLS_JS)
    cell(page, HEAD_TESTS[0]).scroll_into_view_if_needed()
    shoot(page, STUDENT_SHOTS[3])

    page.get_by_role('button', name='Validate').click()
    dialog = page.locator('.jp-Dialog', has_text='Validation Results')
    dialog.wait_for()
    seen['validate'] = dialog.locator('.jp-Dialog-body').text_content()
    shoot(page, STUDENT_SHOTS[4])
    dialog.get_by_role('button', name='Ok').click()
    return seen


def test_student_cannot_type_into_a_locked_test_cell(student):
    before, after = student['locked_text']
    assert student['locked_edit_mode'] and before == after, f'typing into a locked cell changed it:\n{before}\n->\n{after}'
    assert student['saved'][LOCKED].source == RELEASE[LOCKED].source, 'the saved locked cell differs from the release'


def test_head_typed_into_the_editor_is_saved_as_the_solution(student):
    assert student['saved'][HEAD].source == SOLUTION, f'saved Head cell:\n{student["saved"][HEAD].source}'


def test_run_all_passes_every_test_of_the_head(student):
    cells = student['cells']
    failed = {first_line(i): (cells[i]['prompt'], cells[i]['output'][-300:]) for i in HEAD_TESTS
              if cells[i]['error'] or not re.search(r'\d', cells[i]['prompt'])}
    assert not failed, f'head tests that did not run and pass after Run All: {failed}'


def test_run_all_goes_on_past_the_exercises_not_written_yet(student):
    """No cell fails and every test after the next exercise ran: the next exercise's first test says which task it waits
    for (a later test of the Head alone, such as the equivariance theorems, passes)."""
    cells = student['cells']
    failed = [RELEASE[i].id for i, c in enumerate(cells) if c['error']]
    assert not failed, f'cells that failed under Run All with only the Head written: {failed}'
    later = [i for i in TESTS if i > NEXT]
    not_run = [RELEASE[i].id for i in later if not re.search(r'\d', cells[i]['prompt'])]
    assert later and not not_run, f'tests after {RELEASE[NEXT].id} that Run All did not reach: {not_run}'
    assert WAITS in cells[later[0]]['output'], (
        f'{RELEASE[later[0]].id}, the first test of the exercise not written, should say it waits; it printed '
        f'{cells[later[0]]["output"][-300:]!r}')


def listed(student):
    """Indices of the test cells that the Validate dialog lists as failed."""
    return [i for i in TESTS if first_line(i) in student['validate']]


def test_validate_dialog_lists_failed_tests_only_after_the_head_exercise(student):
    assert listed(student) and min(listed(student)) > NEXT, (
        f'Validate should list only tests after {RELEASE[NEXT].id}; it listed {[RELEASE[i].id for i in listed(student)]}:\n'
        f'{student["validate"][:2000]}')


def test_validate_dialog_gives_the_stub_message_for_each_failed_test(student):
    assert student['validate'].count(STUB) == len(listed(student)), student['validate'][:3000]


MANUAL = next(c for c in read(ROOT / 'source' / AID / NAME).cells if role(c) == 'answer').metadata.nbgrader
SCORE, COMMENT = MANUAL.points - 1, 'Right about saturation; say what happens to the gradient.'


def rows(frame, columns):
    """{first column's text: {column: text}} of the formgrader's main table."""
    table = {}
    for row in frame.locator('#main-table tr').all():
        texts = [row.locator(f'td.{c}').text_content().strip() for c in columns]
        table[texts[0]] = dict(zip(columns[1:], texts[1:], strict=True))
    return table


def follow(frame, link, url, ready='models.loaded'):
    """Click link in the formgrader's frame and wait until the page at url has loaded its data (ready is true)."""
    link.click()
    frame.wait_for_url(url, wait_until='domcontentloaded')  # the grading page's MathJax may wait on the network
    # Not yet true while a model is still undefined: the page builds formgrader before its grades and comments (a busy
    # machine shows the gap), so reading one of theirs throws until then.
    frame.wait_for_function(f'() => {{ try {{ return Boolean({ready}); }} catch (e) {{ return false; }} }}')


@pytest.fixture(scope='module')
def instructor(student, page, course):
    """The instructor's journey in the formgrader, once the demo class is graded; returns what the pages showed."""
    root, grading = course
    done, log = grading.wait(timeout=600), (root.parent / 'grade.log').read_text()
    assert done == 0, log
    seen = {}
    page.keyboard.press('Control+b')  # hide the file browser: the formgrader's tables are wide
    menu(page, 'Nbgrader', 'Formgrader')
    frame = page.locator('iframe').element_handle().content_frame()
    frame.wait_for_url('**/formgrader/manage_assignments')
    frame.wait_for_function('() => window.models && models.loaded')
    seen['assignments'] = rows(frame, ['name', 'num-submissions'])
    shoot(page, INSTRUCTOR_SHOTS[0])

    follow(frame, frame.locator('#main-table tr', has_text=AID).locator('td.num-submissions a'), f'**/manage_submissions/{AID}')
    seen['submissions'] = rows(frame, ['student-id', 'score'])
    shoot(page, INSTRUCTOR_SHOTS[1])

    follow(frame, frame.get_by_role('link', name='Manual Grading'), '**/gradebook')
    follow(frame, frame.locator('#main-table a', has_text=re.compile(f'^{AID}$')), f'**/gradebook/{AID}')
    follow(frame, frame.locator('#main-table a', has_text=NOTEBOOK), f'**/gradebook/{AID}/{NOTEBOOK}')
    todo = frame.locator('#main-table tr', has=frame.locator('td.needs-manual-grade span')).first
    assert todo.count(), f'no submission waits for manual grading; course.grader.grade --demo said:\n{log}'
    seen['student'] = todo.locator('a.name-shown').text_content().strip()
    follow(frame, todo.locator('a.name-hidden'), '**/submissions/**', 'formgrader.grades.loaded && formgrader.comments.loaded')
    score, comment = frame.locator(f'input#{MANUAL.grade_id}'), frame.locator(f'textarea#{MANUAL.grade_id}-comment')
    with page.expect_response(lambda r: '/formgrader/api/grade/' in r.url and r.request.method == 'PUT'):
        score.fill(f'{SCORE:g}')
        score.press('Tab')
    with page.expect_response(lambda r: '/formgrader/api/comment/' in r.url and r.request.method == 'PUT'):
        comment.fill(COMMENT)
        score.focus()
    comment.scroll_into_view_if_needed()
    shoot(page, INSTRUCTOR_SHOTS[2])
    return seen


def students(root):
    return sorted(p.name for p in (root / 'submitted').iterdir() if p.is_dir())


def test_formgrader_lists_every_step_with_its_demo_submissions(instructor, course):
    root, _ = course
    want = {step: {'num-submissions': str(sum((root / 'submitted' / s / step).is_dir() for s in students(root)))}
            for step in steps()}
    assert instructor['assignments'] == want, f"the formgrader lists {instructor['assignments']}, the class is {want}"


def scores(text):
    """(score, max score) from the formgrader's 'a / b'; the text itself when it shows no score."""
    m = re.fullmatch(r'([\d.]+) / ([\d.]+)', text)
    return (float(m[1]), float(m[2])) if m else text


def test_formgrader_shows_each_submissions_autograded_score(instructor, course):
    root, _ = course
    with Gradebook(f'sqlite:///{root / "gradebook.db"}') as gb:
        subs = {s: gb.find_submission(AID, s) for s in students(root)}
        want = {s: (round(sub.code_score, 2), round(sub.max_score, 2)) for s, sub in subs.items()}
    shown = {s: scores(row['score']) for s, row in instructor['submissions'].items()}
    assert shown == want, f'formgrader scores {shown}, gradebook autograded scores {want}'


def test_manual_score_and_comment_entered_in_the_formgrader_reach_the_gradebook(instructor, course):
    root, _ = course
    with Gradebook(f'sqlite:///{root / "gradebook.db"}') as gb:
        grade = gb.find_grade(MANUAL.grade_id, NOTEBOOK, AID, instructor['student'])
        comment = gb.find_comment(MANUAL.grade_id, NOTEBOOK, AID, instructor['student'])
        got = (grade.manual_score, comment.manual_comment)
    assert got == (SCORE, COMMENT), f'gradebook holds {got} for {instructor["student"]}; entered {(SCORE, COMMENT)}'


def blank_fraction(path):
    """The share of the work area (right of the side bar, below the menus) that is the most common colour."""
    image = Image.open(path).convert('RGB')
    area = image.crop((300, 100, image.width, image.height))
    return max(area.getcolors(area.width * area.height))[0] / (area.width * area.height)


@pytest.mark.parametrize('shot', STUDENT_SHOTS + INSTRUCTOR_SHOTS)
def test_screenshot_of_each_step_shows_a_rendered_page(student, instructor, shot):
    fraction = blank_fraction(SHOTS / f'{shot}.png')
    assert fraction < 0.9, f'{shot}.png is {fraction:.0%} one colour: the page had not rendered'


# --- The first screen of every step: the lesson, with the set-up collapsed (docs/adding-a-step.md, "The student's view"). ---
FIRST_SCREENS = {(step, name): f'00-first-screen-{step}' for step in steps() for name in notebooks(step)[:1]}
# Where each cell is on the first screen, and whether its code shows (a collapsed input shows JupyterLab's placeholder).
SCREEN_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(c => {
    const r = c.getBoundingClientRect(), editor = c.querySelector('.jp-InputArea-editor');
    const placeholder = c.querySelector('.jp-InputPlaceholder');
    return {top: r.top, bottom: r.bottom, height: window.innerHeight,
            code_shown: !!editor && editor.checkVisibility(), placeholder: !!placeholder && placeholder.checkVisibility()};
})"""


@pytest.fixture(scope='module')
def first_screens(lab, page, student):
    """Each step's release as a student first opens it, in a tab of its own: where each cell is on the first screen."""
    seen = {}
    tab = page.context.new_page()
    try:
        for (step, name), shot in FIRST_SCREENS.items():
            tab.goto(lab.replace('/lab?', f'/lab/tree/release/{step}/{name}?'))
            title = tab.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').first.locator('h1')
            title.wait_for()
            tab.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook').first.evaluate('n => n.scrollTop = 0')
            shoot(tab, shot)
            seen[step, name] = tab.evaluate(SCREEN_JS.replace('.jp-Notebook .jp-Cell',
                                                              '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell'))
            menu(tab, 'File', 'Close Tab')
    finally:
        tab.close()
    return seen


@pytest.mark.parametrize('notebook', FIRST_SCREENS, ids=[step for step, _ in FIRST_SCREENS])
def test_first_screen_shows_the_introduction_with_the_set_up_collapsed(first_screens, notebook):
    """The title and introduction open the first screen, and no set-up cell above the first task shows its code there:
    JupyterLab shows each collapsed (its placeholder), as the metadata of the release asks."""
    if notebook[0] in PENDING:
        pytest.xfail(PENDING[notebook[0]])
    cells, release = first_screens[notebook], read(ROOT / 'release' / notebook[0] / notebook[1]).cells
    assert cells[0]['top'] >= 0 and cells[0]['top'] < cells[0]['height'] / 4, f'the title is not at the top: {cells[0]}'
    first = next(i for i, c in enumerate(release) if role(c) == 'solution')
    shown = [release[i].id for i in range(first) if release[i].cell_type == 'code'
             and (cells[i]['code_shown'] or not cells[i]['placeholder'])]
    assert not shown, f'set-up cells whose code JupyterLab shows (not collapsed): {shown}'


@pytest.mark.parametrize('shot', FIRST_SCREENS.values())
def test_screenshot_of_each_first_screen_shows_a_rendered_page(first_screens, shot):
    fraction = blank_fraction(SHOTS / f'{shot}.png')
    assert fraction < 0.9, f'{shot}.png is {fraction:.0%} one colour: the page had not rendered'


# --- Active content: a hostile student's HTML and JavaScript must never run in the instructor's browser. ---
# Every vector runs the same payload, named after it: it logs XSS-RAN-<vector> on the console, writes XSS-<vector>.txt into
# the course root through the server's REST API with the instructor's session (as a script in the formgrader could), and asks
# nbgrader's Lab extension, over the formgrader iframe's message channel, to open XSS-<vector>-postmessage.txt. The
# detector (watch()) records every console message and request of every page and frame of the browser; any of the
# three traces of any vector fails the test. test_positive_control_* runs the payload for real to prove each trace is seen.

HOSTILE = 'hostile'
ACTIVITY = []  # (kind, text) of every console message and request of the browser
TRACE = re.compile(r'XSS-(?:RAN-)?([a-z][a-z0-9_]*)')


def watch(context):
    context.on('console', lambda m: ACTIVITY.append(('console', m.text)))
    context.on('request', lambda r: (ACTIVITY.append(('request', f'{r.method} {r.url}')), IN_FLIGHT.add(r)))
    context.on('requestfinished', lambda r: IN_FLIGHT.discard(r))
    context.on('requestfailed', lambda r: IN_FLIGHT.discard(r))


def payload(vector):
    """JavaScript a hostile student would run in the instructor's browser (base64: it survives markdown and quoting)."""
    js = f"""console.log('XSS-RAN-{vector}');
var t = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
fetch('/api/contents/XSS-{vector}.txt', {{method: 'PUT', credentials: 'include', headers: {{'Content-Type': 'application/json',
  'X-XSRFToken': decodeURIComponent(t)}}, body: JSON.stringify({{type: 'file', format: 'text', content: 'pwned'}})}});
try {{ parent.postMessage(JSON.stringify({{command: 'docmanager:open',
  arguments: {{path: 'XSS-{vector}_postmessage.txt'}}}}), '*'); }} catch (e) {{}}"""
    return js


def run_js(vector):
    import base64

    return f"eval(atob('{base64.b64encode(payload(vector).encode()).decode()}'))"


def hostile_page(vector):
    return (f'<html><body><h1>hi</h1><script>{run_js(vector)}</script>'
            f'<img src="x" onerror="{run_js(vector + "_img")}"></body></html>')


def write_hostile(root):
    """submitted/hostile/<AID>/: the perfect submission carrying active content of every class the sanitizer knows: rich outputs
    of a code cell it adds (text/html with <script> and event handlers, application/javascript, text/markdown, SVG), a
    markdown cell it adds and its written answer (raw HTML, an iframe's srcdoc, a javascript: link), a file its code
    writes while graded (pwn.html: into its folder's cover, gone with the kernel), and a file submitted with the notebook
    (extra.html)."""
    import nbformat

    nb = solved(AID, NAME)
    answer = next(c for c in nb.cells if c.metadata.get('nbgrader', {}).get('grade_id') == MANUAL.grade_id)
    answer.source += (f'\n\n<img src="x" onerror="{run_js("answer_img")}"> <details open ontoggle="{run_js("answer_details")}">'
                      f'more</details> <iframe srcdoc="<script>{run_js("answer_srcdoc")}</script>"></iframe>'
                      f' [a link](javascript:{run_js("answer_link")})'
                      f' $\\href{{javascript:{run_js("answer_tex_href")}}}{{x}}$ $\\require{{HTML}}\\href{{javascript:x}}{{y}}$')
    code = f"""from IPython.display import HTML, Javascript, Markdown, display
display(HTML({f'<b>table</b><script>{run_js("html_script")}</script><img src="x" onerror="{run_js("html_img")}">'!r}))
display(Javascript({run_js("javascript")!r}))
display(Markdown({f'<img src="x" onerror="{run_js("markdown_output")}">'!r}))
display({{'image/svg+xml': {f'<svg xmlns="http://www.w3.org/2000/svg" onload="{run_js("svg")}"/>'!r},
         'text/plain': 'svg'}}, raw=True)
with open('pwn.html', 'w') as f:
    f.write({hostile_page('written_file')!r})"""
    markdown = f'<script>{run_js("markdown_script")}</script>\n\n<svg onload="{run_js("markdown_svg")}"></svg> A cell of my own.'
    nb.cells[1:1] = [nbformat.v4.new_markdown_cell(markdown), nbformat.v4.new_code_cell(code)]
    folder = root / 'submitted' / HOSTILE / AID
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / NAME)
    (folder / 'extra.html').write_text(hostile_page('submitted_file'))


def traces(vectors_only=True):
    """{vector: [how it was seen]} from the browser's activity and the course root's XSS-*.txt files."""
    seen = {}
    for kind, text in ACTIVITY:
        for vector in TRACE.findall(text):
            seen.setdefault(vector, []).append(f'{kind}: {text[:120]}')
    return seen


@pytest.fixture(scope='module')
def hostile(page, course, lab):
    """Once the class is graded, the instructor opens the hostile submission in the formgrader: through the Lab UI (a
    window of the Lab of its own, on a fresh workspace: this journey does not rest on the student's and instructor's),
    then in a tab of its own; then the files it served, and its feedback page. Returns what was seen, then the positive
    control's traces."""
    root, grading = course
    assert grading.wait(timeout=600) == 0, (root.parent / 'grade.log').read_text()
    base = lab.split('/lab?')[0]
    seen = {'files': {}}
    ui = page.context.new_page()
    ui.goto(lab.replace('/lab?', '/lab/workspaces/hostile?'))
    menu(ui, 'Nbgrader', 'Formgrader')
    frame = ui.locator('iframe').first.element_handle().content_frame()
    frame.wait_for_url('**/formgrader/manage_assignments')
    frame.wait_for_function('() => window.models && models.loaded')
    follow(frame, frame.get_by_role('link', name='Manual Grading'), '**/gradebook')
    follow(frame, frame.locator('#main-table a', has_text=re.compile(f'^{AID}$')), f'**/gradebook/{AID}')
    follow(frame, frame.locator('#main-table a', has_text=NOTEBOOK), f'**/gradebook/{AID}/{NOTEBOOK}')
    row = frame.locator('#main-table tr', has=frame.locator('a.name-shown', has_text=re.compile(f'^\\s*{HOSTILE}\\s*$')))
    follow(frame, row.locator('a.name-hidden'), '**/submissions/**',
           'formgrader.grades && formgrader.grades.loaded && formgrader.comments && formgrader.comments.loaded')
    submission = re.search(r'/formgrader/submissions/([^/]+)/', frame.url)[1]
    settled(frame)  # event handlers, onload, ontoggle, a srcdoc frame: they would have fired by now
    seen['text'] = frame.locator('body').text_content()
    shoot(ui, '09-formgrader-hostile-in-lab')
    ui.close()

    tab = page.context.new_page()
    response = tab.goto(f'{base}/formgrader/submissions/{submission}/')
    seen['page_csp'] = response.headers.get('content-security-policy', '')
    tab.wait_for_function('() => window.formgrader && formgrader.grades && formgrader.grades.loaded')
    settled(tab)
    tab.screenshot(path=SHOTS / '10-formgrader-hostile-tab.png')
    for name in ('pwn.html', 'extra.html', NAME):
        url = f'{base}/formgrader/submissions/{submission}/{name}'
        response = tab.context.request.get(url) if name == NAME else tab.goto(url)  # the notebook is a download
        seen['files'][name] = (response.status, response.headers.get('content-security-policy', ''))
        if name != NAME:
            settled(tab)
    feedback = root / 'feedback' / HOSTILE / AID / f'{NOTEBOOK}.html'
    seen['feedback'] = feedback.exists()
    if feedback.exists():
        tab.goto(feedback.as_uri())
        tab.wait_for_selector('html[data-maths="typeset"]', state='attached')  # MathJax has read the student's TeX
        settled(tab)
        seen['feedback_links'] = tab.evaluate("""() => [...document.querySelectorAll('[href]')]
            .map(e => e.getAttribute('href')).filter(h => !/^(https?:|mailto:|#|$)/i.test(h.trim()))""")
    seen['traces'] = traces()
    seen['written'] = sorted(p.name for p in root.glob('XSS-*'))

    # Positive control: the same payload, run for real in the formgrader's page, leaves all three traces.
    tab.goto(f'{base}/formgrader/submissions/{submission}/')
    tab.wait_for_function('() => window.formgrader && formgrader.grades && formgrader.grades.loaded')
    tab.evaluate(f'() => {{ {payload("control")} }}')
    deadline = time.monotonic() + 300  # a cap: the control's file is the event waited for
    while not (root / 'XSS-control.txt').exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    seen['control'] = traces().get('control', [])
    seen['control_file'] = (root / 'XSS-control.txt').exists()
    tab.close()
    return seen


def test_no_script_of_a_hostile_submission_runs_in_the_formgrader_its_files_or_its_feedback(hostile):
    ran = {v: how for v, how in hostile['traces'].items() if v != 'control'}
    written = [name for name in hostile['written'] if name != 'XSS-control.txt']
    assert not ran and not written, f'student scripts ran: {ran}; files written through the API: {written}'
    assert hostile['feedback'], 'the hostile submission has no feedback page to open'
    # MathJax typesets the feedback page: the answer's \href{javascript:...} (and \require{HTML}) make no link.
    assert hostile['feedback_links'] == [], f"links the typeset feedback page holds: {hostile['feedback_links']}"


def test_positive_control_the_detector_sees_a_script_that_runs(hostile):
    kinds = {how.split(':')[0] for how in hostile['control']}
    assert kinds == {'console', 'request'} and hostile['control_file'], (
        f'the payload, run in the formgrader page, left {hostile["control"]} and wrote the file: {hostile["control_file"]}')


def test_formgrader_serves_pages_and_files_with_content_security_headers(hostile):
    assert "script-src 'self'" in hostile['page_csp'] and 'unsafe-inline' not in hostile['page_csp'].split('style-src')[0], (
        f'formgrader page CSP: {hostile["page_csp"]!r}')
    status, csp = hostile['files'][NAME]
    assert status == 200 and csp.startswith('sandbox'), f'the submitted notebook served with status {status}, CSP {csp!r}'
    served = {name: got for name, got in hostile['files'].items() if name != NAME and got[0] != 404}
    assert not served, f'the file written while graded, or the HTML file submitted, is served: {served}'


def test_hostile_submission_is_graded_with_a_note_and_the_report_lists_what_was_removed(hostile, course):
    import csv

    root, _ = course
    with open(root / 'grades.csv', newline='') as f:
        status = next(r['status'] for r in csv.DictReader(f) if r['student_id'] == HOSTILE and r['step'] == AID)
    report = (root / 'repairs' / HOSTILE / f'{AID}.txt').read_text()
    assert status.startswith('graded') and 'active content removed' in status, status
    for what in ('<script>', 'onerror on <img>', 'application/javascript', 'image/svg+xml', '<iframe>', 'href on <a>',
                 '<details>'):
        assert what in report, f'{what} missing from the repair report:\n{report}'
    written = root / 'autograded' / HOSTILE / AID / 'pwn.html'
    assert not written.exists(), f'{written}: what the kernel wrote in its folder outlived it (policy.FOLDER)'


def test_the_grader_sees_what_the_hostile_student_wrote_as_text(hostile):
    assert 'A cell of my own.' in hostile['text'] and '<script>' in hostile['text'], hostile['text'][:2000]


# --- The feedback page a student opens: the claims named at the top, failed first; the maths offline. ---

FEEDBACK_SHOTS = {'mistake': '11-feedback-demo-mistake', 'perfect': '12-feedback-perfect'}
REPORT_SHOT = '13-class-report'
MISTAKE = demo.bank(AID).MUTANTS[0]  # the bank of the repository (the course copy's is removed: a small demo class)


def write_mistake(root):
    """submitted/<the first mistake of the step's bank>/<AID>/: a demo mistake, which fails MISTAKE.caught_by."""
    import nbformat

    folder = root / 'submitted' / MISTAKE.student / AID
    folder.mkdir(parents=True)
    nbformat.write(edited(solved(AID, NAME), MISTAKE.edits), folder / NAME)


OFFLINE = ('file:', 'data:', 'about:')  # what a page opened from disk may load with the network cut off
SEEN_JS = """() => ({
    failed: [...document.querySelectorAll('#summary ol.failed > li')].map(li => ({
        name: li.querySelector('a').textContent, href: li.querySelector('a').getAttribute('href'),
        message: li.querySelector('.message').textContent})),
    headings: [...document.querySelectorAll('#summary h5, #summary summary')].map(h => h.textContent),
    passed: document.querySelectorAll('#summary details ol.passed > li').length,
    passed_open: !!document.querySelector('#summary details[open]'),
    anchors: [...document.querySelectorAll('#summary a[href^="#"]')].map(a => a.getAttribute('href').slice(1))
        .filter(id => !document.querySelector(`a[name="${CSS.escape(id)}"]`)),
    maths: document.querySelectorAll('.text_cell_render .MathJax_MathML math').length,
    raw: [...document.querySelectorAll('.text_cell_render')].map(e => e.innerText)
        .flatMap(t => t.match(/\\$[^$\\n]{1,200}\\$/g) || []),
    errors: document.querySelectorAll('.MathJax_Error, merror').length})"""


def open_offline(context, url, shot=None):
    """Open url in a new page of context with every request but file:, data: and about: refused (the network cut off);
    once MathJax has typeset the page, return what it shows (SEEN_JS) and the requests refused."""
    tab = context.new_page()
    refused = []
    tab.route('**/*', lambda route: route.continue_() if route.request.url.startswith(OFFLINE + (url.split('/files/')[0],))
              else (refused.append(route.request.url), route.abort()))
    tab.goto(url)
    tab.wait_for_selector('html[data-maths="typeset"]', state='attached')
    seen = tab.evaluate(SEEN_JS)
    if shot:
        shoot(tab, shot)
        tab.locator('.text_cell_render .MathJax_MathML').first.scroll_into_view_if_needed()
        shoot(tab, f'{shot}-maths')
    tab.close()
    return {**seen, 'refused': refused}


@pytest.fixture(scope='module')
def feedback(page, course, lab):
    """Once the class is graded, the feedback pages of the demo mistake and of the perfect submission, opened from disk
    (as a student opens the page handed back) with the network cut off, then the mistake's page as the Jupyter server
    serves it (under its content-security policy): what each showed."""
    root, grading = course
    assert grading.wait(timeout=600) == 0, (root.parent / 'grade.log').read_text()
    seen = {}
    for student, shot in FEEDBACK_SHOTS.items():
        path = root / 'feedback' / (MISTAKE.student if student == 'mistake' else student) / AID / f'{NOTEBOOK}.html'
        assert path.exists(), f'no feedback page {path}'
        seen[student] = open_offline(page.context, path.as_uri(), shot)
    base, token = lab.split('/lab?')
    url = f'{base}/files/feedback/{MISTAKE.student}/{AID}/{NOTEBOOK}.html?{token}'
    seen['served'] = open_offline(page.context, url)
    report = page.context.new_page()  # the class report make grade wrote: no script, nothing to wait for but its load
    report.goto((root / 'reports' / 'index.html').as_uri(), wait_until='load')
    shoot(report, REPORT_SHOT)
    report.close()
    return seen


def failed_claim():
    """The name of the demo mistake's first failed claim: the first line of its test's docstring, in the source."""
    source = next(c for c in read(ROOT / 'source' / AID / NAME).cells if grade_id(c) == MISTAKE.caught_by[0])
    return claim_name(source.source, MISTAKE.caught_by[0])


def test_feedback_summary_names_the_failed_claim_and_its_message_first(feedback, course):
    root, _ = course
    graded = read(root / 'autograded' / MISTAKE.student / AID / NAME)
    cell = next(c for c in graded.cells if grade_id(c) == MISTAKE.caught_by[0])
    error = next(o for o in cell.outputs if o.output_type == 'error')
    seen = feedback['mistake']
    assert seen['headings'][0].startswith('To fix:'), seen['headings']
    shown = {f['href']: f for f in seen['failed']}
    mine = shown.get(f'#{MISTAKE.caught_by[0]}')
    assert mine and mine['name'] == failed_claim() and error.evalue.splitlines()[0][:80] in mine['message'], (
        f'the summary should name {failed_claim()!r} with {error.evalue[:80]!r}; it lists {seen["failed"]}')
    assert {f'#{gid}' for gid in MISTAKE.caught_by} <= set(shown), f'failed claims listed: {list(shown)}'
    assert not seen['anchors'], f'summary links to no anchor of the page: {seen["anchors"]}'


def test_feedback_of_a_perfect_submission_folds_every_passed_claim(feedback):
    seen = feedback['perfect']
    tests = sum(role(c) == 'test' for c in RELEASE)
    assert not seen['failed'] and seen['passed'] == tests and not seen['passed_open'], seen
    assert seen['headings'][0] == f'Every one of the {tests} claims holds', seen['headings']
    assert any(h.startswith('Written answers awaiting a grader') for h in seen['headings']), seen['headings']


@pytest.mark.parametrize('student', ['mistake', 'perfect', 'served'])
def test_feedback_maths_renders_with_the_network_cut_off(feedback, student):
    seen = feedback[student]
    assert seen['maths'] > 10 and not seen['raw'] and not seen['errors'], (
        f"{seen['maths']} formulas typeset, {seen['errors']} errors; raw TeX left: {seen['raw'][:5]}")
    web = [url for url in seen['refused'] if 'colab' not in url]  # the notebook's Open in Colab badge is a web image
    assert not web, f'the page asked the network for {web}'


@pytest.mark.parametrize('shot', [f'{shot}{part}' for shot in FEEDBACK_SHOTS.values() for part in ('', '-maths')]
                         + [REPORT_SHOT])
def test_screenshot_of_each_feedback_page_shows_a_rendered_page(feedback, shot):
    fraction = blank_fraction(SHOTS / f'{shot}.png')
    assert fraction < 0.9, f'{shot}.png is {fraction:.0%} one colour: the page had not rendered'
