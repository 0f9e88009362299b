"""Damaged, broken and hostile submissions (tests/corpus.py), graded on every step in one batch with the demo class by the
real command: each gets its status and points, clean students' grades do not move, nothing outside a student's folder
changes, no process a student started is left running, and the hostile network attempt never reaches a real listener."""

import sqlite3

import pytest

import synthetic
from conftest import running
from corpus import MARK, cases, expected_status, placed
from course.cells import read
from course.isolation.warm import available as warm_kernels_available
from course.layout import notebooks, steps

CASES = placed(cases(), steps())  # the grader's own cases on the synthetic step (tests/synthetic.py), the rest on every step


@pytest.mark.parametrize('step, case', CASES, ids=[f'{s}-{c.student}' for s, c in CASES])
def test_case_gets_its_expected_status_and_points(graded, step, case):
    if case.student not in {c.student for c in graded.cases[step]}:
        pytest.skip('needs the bubblewrap sandbox, which this machine cannot run')
    row = graded.rows[(step, case.student)]
    status = expected_status(case, read(graded.course / 'release' / step / notebooks(step, graded.course)[0]))
    if case.points == 'full':
        points_ok = float(row['autograded']) == float(row['autograded_max'])
    elif case.points is None:  # timing decides: only a sane number
        points_ok = 0 <= float(row['autograded']) <= float(row['autograded_max'])
    else:
        points_ok = float(row['autograded']) == case.points
    assert row['status'].startswith(status) and points_ok, (
        f"{case.student}: expected status {status!r}... and {case.points} points; got {row['status']!r} and "
        f"{row['autograded']}/{row['autograded_max']} (see {graded.course}/.build/logs/{step}/{case.student}.log)")


def test_clean_students_grades_are_those_of_a_clean_run(graded):
    def same(row):
        return {k: v for k, v in row.items() if k != 'timestamp'}

    differ = {key: (graded.rows[key]['status'], graded.rows[key]['autograded'], row['status'], row['autograded'])
              for key, row in graded.alone.items() if same(graded.rows[key]) != same(row)}
    assert graded.alone and not differ, differ


def test_nothing_outside_the_students_folders_changed(graded):
    assert snapshot_equal(graded)
    assert not (graded.course / 'pwned.txt').exists() and not (graded.course.parent / 'pwned.txt').exists()
    db = sqlite3.connect(graded.course / 'gradebook.db')
    tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    assert 'pwned' not in tables, 'student code created a table in the gradebook'


def test_nothing_a_students_code_wrote_is_left_in_autograded(graded):
    """Every file in autograded/<student>/<step>/ is one nbgrader put there: from the submission or the step's source
    (hostile_fills_its_folder wrote as much as it could, and the kernels of the rest wrote their probe records)."""
    strays = []
    for step in steps(graded.course):  # the synthetic step's too
        source = graded.course / 'source' / step
        shipped = {p.relative_to(source) for p in source.rglob('*')}
        for folder in sorted((graded.course / 'autograded').glob(f'*/{step}')):
            submitted = graded.course / 'submitted' / folder.parent.name / step
            given = shipped | {p.relative_to(submitted) for p in submitted.rglob('*')}
            strays += [str(p) for p in folder.rglob('*') if p.relative_to(folder) not in given]
    assert graded.rows and not strays, f'written by student code, left in autograded/: {strays[:20]}'


def snapshot_equal(graded):
    from classroom import snapshot

    return snapshot(graded.course) == graded.before


def test_no_process_started_by_student_code_is_still_running(graded):
    left = running(MARK)
    assert not left, 'left running:\n' + '\n'.join(left)


def test_the_network_attempt_met_a_real_listener_and_did_not_reach_it(graded, listener):
    """The hostile submission connects to a port where a listener really waits on the host's loopback: in the sandbox the
    connection is refused (no network), and the listener never accepts anything."""
    step = synthetic.STEP
    if 'hostile_touches_the_course' not in {c.student for c in graded.cases[step]}:
        pytest.skip('needs the bubblewrap sandbox, which this machine cannot run')
    port, accepted = listener
    nb = read(graded.course / 'autograded' / 'hostile_touches_the_course' / step / synthetic.NAME)
    printed = ''.join(o.get('text', '') for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', []))
    assert 'network refused' in printed and 'network reached' not in printed, printed[-2000:]
    assert not accepted(), f'something reached the listener on 127.0.0.1:{port}'


def page_text(path):
    """A feedback page's text as a reader sees it: tags (the syntax highlighting splits every line) removed, entities
    decoded; so that a leaked line would appear verbatim."""
    import html
    import re

    return html.unescape(re.sub(r'<[^>]+>', '', path.read_text()))


def submitted(course, page, step, name):
    """The source of every cell of the notebook the student of a feedback page submitted ('' if unreadable): a line of a
    hidden test that the student wrote too (a hand-written softmax, say) is their own code, not a leak."""
    try:
        return '\n'.join(c.source for c in read(course / 'submitted' / page.parent.parent.name / step / name).cells)
    except Exception:  # a damaged or missing submission of the corpus
        return ''


def test_hidden_tests_never_reach_feedback(graded):
    """No feedback page of any student of any step shows a line of a hidden test; each page does show its visible tests'
    first lines (the search would find a leaked line)."""
    from test_generated import hidden_lines

    leaks, pages = {}, 0
    for step in steps(graded.course):  # the synthetic step's too
        for name in notebooks(step, graded.course):
            secret = hidden_lines(step, name, graded.course)
            assert secret, f'{step}/{name} has no hidden test lines to look for'
            visible = [c.source.splitlines()[0] for c in read(graded.course / 'release' / step / name).cells
                       if c.cell_type == 'code' and c.get('metadata', {}).get('nbgrader', {}).get('grade')]
            for page in (graded.course / 'feedback').glob(f'*/{step}/{name.replace(".ipynb", ".html")}'):
                text = page_text(page)
                assert all(line in text for line in visible), f'{page}: the visible tests are not found as text'
                pages += 1
                found = [line for line in secret if line in text and line not in submitted(graded.course, page, step, name)]
                if found:
                    leaks[f'{page.parent.parent.name}/{step}'] = found[:3]
    assert pages and not leaks, f'feedback shows hidden test lines: {leaks}'


def test_the_sandbox_is_on_or_a_warning_says_it_is_off(graded):
    assert graded.sandboxed != ('WITHOUT a sandbox' in graded.out), graded.out[-2000:]


def test_what_student_work_costs_the_grader_is_bounded(graded):
    """The submissions built to cost the grader memory (tests/corpus.py's BUDGET: a record bomb, 20,000 entries,
    a deep-nested notebook, 50 MiB of saved outputs, 48 MiB printed) each cost its grading worker at most 512 MiB more
    than the most any demo student of the step cost (measured: VmHWM, reset before each submission). Unbounded, the
    record bomb alone took 2 GiB more."""
    from corpus import BUDGET
    from course.reports.results import load

    step = synthetic.STEP  # where they were graded, with its own demo class
    peak = {s: (load(step, s, graded.course) or {}).get('memory', {}).get('worker_peak_rss')
            for (st, s) in graded.rows if st == step}
    demo = [v for s, v in peak.items() if v and not s.startswith(('broken_', 'hostile_', 'damaged_'))]
    assert demo, peak
    costly = {c.student: round((peak[c.student] - max(demo)) / 2**20) for c in BUDGET if peak.get(c.student)}
    assert len(costly) == len(BUDGET), peak
    assert max(costly.values()) < 512, f'MiB above the demo class: {costly}'


def test_progress_is_shown_in_sparse_plain_lines_with_the_statuses_of_the_grade_table(graded):
    """Not on a terminal (the test captures it), make grade's progress is plain lines, about one per tenth of the class;
    the last says every submission is done, with as many of each status as the grade table shows."""
    from collections import Counter

    lines = [line for line in graded.out.splitlines() if line.startswith('grading ') and ' so far: ' in line]
    statuses = Counter(r['status'].split(' (')[0] for r in graded.rows.values() if r['status'] != 'not submitted')
    n = sum(statuses.values())
    assert lines and lines[-1].startswith(f'grading {n}/{n} (100%), '), graded.out[-3000:]
    elapsed = 0
    for part in lines[-1].split(' so far: ')[0].rsplit(' ', 1)[1].split(':'):  # [H:]MM:SS
        elapsed = 60 * elapsed + int(part)
    assert 10 <= len(lines) <= 11 + elapsed // 30, lines  # one per tenth of the class, and one more per 30 s at most
    shown = Counter({status: int(k) for k, status in (s.split(' ', 1) for s in lines[-1].split(' so far: ')[1].split(', '))})
    assert shown == statuses, (lines[-1], statuses)


def test_the_class_was_graded_with_warm_kernels_where_they_can_run(graded):
    """The fast path is what graded the corpus above wherever it can run (in the sandbox, as root or as a user with user
    namespaces: course.isolation.warm.available()), and every results record says so."""
    warm = graded.sandboxed and warm_kernels_available()
    assert ('grading with warm kernels' in graded.out) == warm, graded.out[-2000:]
    kinds = {r['kernel'] for r in graded.rows.values() if r['status'] != 'not submitted'}
    assert kinds == {'warm' if warm else 'cold' if graded.sandboxed else 'unsandboxed'}, kinds
