"""Damaged, broken and hostile submissions (tests/support/corpus.py), graded on every step in one batch with the demo class by the
real command: each gets its status and points, clean students' grades do not move, nothing outside a student's folder
changes, no process a student started is left running, and the hostile network attempt never reaches a real listener."""

import os
import sqlite3

import pytest

from conftest import running
from course.cells import read
from course.gate import STUDENT_ID, printable
from course.isolation.warm import available as warm_kernels_available
from course.layout import notebooks, steps
from course.reports.results import load
from support import synthetic
from support.corpus import LEAKS, LINKED, MARK, NAMED, SIZED, cases, expected_status, placed
from support.leaks import hidden_lines, page_text

# the grader's own cases on the synthetic step (tests/support/synthetic.py), the rest on every step
CASES = placed(cases(), steps())


@pytest.mark.parametrize('step, case', CASES, ids=[f'{s}-{c.student}' for s, c in CASES])
def test_case_gets_its_expected_status_and_points(graded, step, case):
    if case.student not in {c.student for c in graded.cases[step]}:
        pytest.skip('needs the bubblewrap sandbox, which this machine cannot run')
    row = graded.rows[(step, printable(case.student))]
    name = notebooks(step, graded.course)[0]
    status = expected_status(case, read(graded.course / 'release' / step / name), step, name)
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
    from support.classroom import snapshot

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
    report = page_text(graded.course / 'reports' / 'index.html')
    shown = {step: [line for name in notebooks(step, graded.course) for line in hidden_lines(step, name, graded.course)
                    if line in report] for step in steps(graded.course)}
    assert not any(shown.values()), f'the class report shows hidden test lines: {shown}'


def test_code_that_prints_the_cells_it_runs_gets_its_full_marks_and_a_page_without_them(graded):
    """The LEAKS cases print every cell's source (hidden tests included) in every way an output can hold it: each is
    graded as the honest work it holds, its feedback page is written (test_hidden_tests_never_reach_feedback reads it),
    and the grader says what it removed."""
    from course.reports.feedback import SCRUBBED

    for step, case in placed(LEAKS, steps()):
        row = graded.rows[(step, case.student)]
        pages = list((graded.course / 'feedback' / case.student / step).glob('*.html'))
        assert row['status'] == 'graded' and pages, (case.student, step, row['status'])
        if case.student != 'hostile_prints_the_hidden_test_marker':
            assert any(SCRUBBED in page_text(p) for p in pages), f'{case.student} {step}: nothing was removed?'


def test_the_sandbox_is_on_or_a_warning_says_it_is_off(graded):
    assert graded.sandboxed != ('WITHOUT a sandbox' in graded.out), graded.out[-2000:]


def test_what_student_work_costs_the_grader_is_bounded(graded):
    """The submissions built to cost the grader memory (tests/support/corpus.py's BUDGET: a record bomb, 20,000 entries,
    a deep-nested notebook, 50 MiB of saved outputs, 48 MiB printed) each cost its grading worker at most 512 MiB more
    than the most any demo student of the step cost (measured: VmHWM, reset before each submission). Unbounded, the
    record bomb alone took 2 GiB more."""
    from course.reports.results import load
    from support.corpus import BUDGET

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
    statuses = Counter(r['status'].split(' (')[0] for r in graded.rows.values()
                       if r['status'] != 'not submitted' and not r['status'].startswith(REFUSED))  # never graded
    n = sum(statuses.values())
    assert lines and lines[-1].startswith(f'grading {n}/{n} (100%), '), graded.out[-3000:]
    elapsed = 0
    for part in lines[-1].split(' so far: ')[0].rsplit(' ', 1)[1].split(':'):  # [H:]MM:SS
        elapsed = 60 * elapsed + int(part)
    assert 10 <= len(lines) <= 11 + elapsed // 30, lines  # one per tenth of the class, and one more per 30 s at most
    shown = Counter({status: int(k) for k, status in (s.split(' ', 1) for s in lines[-1].split(' so far: ')[1].split(', '))})
    assert shown == statuses, (lines[-1], statuses)


REFUSED = ('refused', 'over budget (more than', 'over budget (its files', 'over budget (data.bin')


def test_refused_submissions_were_never_read_copied_repaired_nor_given_feedback(graded):
    """Each submission the gate refused (tests/support/corpus.py's LINKED, NAMED, SIZED): nothing of it in autograded/, feedback/,
    repairs/, no .original/ in its folder (the repair never ran), no record of a kernel; and no other student's work was
    touched by its name (the perfect student, whom 'perfect*' matches as a pattern, was graded once, as usual)."""
    touched = []
    for step, case in placed(LINKED + NAMED + SIZED, steps()):
        folder = graded.course / 'submitted' / case.student / step
        for left in (graded.course / 'autograded' / case.student / step, graded.course / 'feedback' / case.student / step,
                     graded.course / 'repairs' / case.student / f'{step}.txt', folder / '.original'):
            if os.path.lexists(left):
                touched.append(str(left))
        record = load(step, case.student, graded.course) if STUDENT_ID.fullmatch(case.student) else None
        if record and (record['autograde'] or record['graded']):
            touched.append(f'{case.student} {step} graded: {record}')
    assert not touched, touched
    for step in steps(graded.course):
        row = graded.rows[(step, 'perfect')]
        assert row['status'] == 'graded' and float(row['autograded']) == float(row['autograded_max']), row


def test_the_instructors_source_stayed_read_only_and_unchanged(graded):
    """source/ was made read-only before the class was graded (tests/support/classroom.py): every file and folder in it, its
    mode, size, time and content, is as it was, and nothing was added (no __pycache__ of the instructor's modules)."""
    from support.classroom import source_snapshot

    after = source_snapshot(graded.course)
    assert graded.source and after == graded.source, sorted(set(after.items()) ^ set(graded.source.items()))[:10]
    assert not any(mode & 0o222 for mode, *_ in after.values())


def test_nothing_of_the_instructors_reaches_a_student_visible_file(graded):
    """No feedback page holds a copy of an instructor's file (source/, its checks and banks, the gradebook), and neither
    do autograded/ and submitted/ (nbgrader's copies, the repair's): a link in a submission is never followed."""
    import hashlib

    def digest(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    shipped = {digest(p) for p in (graded.course / 'release').rglob('*') if p.is_file()}  # given to students anyway
    secret = {digest(p): str(p.relative_to(graded.course)) for p in (graded.course / 'source').rglob('*')
              if p.is_file() and digest(p) not in shipped}
    found = []
    for top in ('feedback', 'autograded', 'submitted'):
        for p in (graded.course / top).rglob('*'):
            if p.is_file() and not p.is_symlink() and p.stat().st_nlink == 1 and p.stat().st_size < (64 << 20):
                if digest(p) in secret:
                    found.append(f'{p.relative_to(graded.course)} is {secret[digest(p)]}')
    assert not found, found


def test_names_print_safely_in_the_grade_table(graded):
    """The refused ids with a newline and with escape codes are printed with them escaped: one line each, no escape
    character anywhere in what make grade printed, and no forged row."""
    assert '\x1b' not in graded.out and '\x07' not in graded.out, 'an escape code reached the terminal'
    assert not any(line.startswith('perfect  graded  27 of 27') for line in graded.out.splitlines())
    for case in NAMED:
        if not STUDENT_ID.fullmatch(case.student):
            assert any(line.startswith(printable(case.student) + ' ') for line in graded.out.splitlines()), case.student
    import csv

    with open(graded.course / 'grades.csv', newline='') as f:
        ids = [r['student_id'] for r in csv.DictReader(f)]
    assert all(i.isprintable() for i in ids), [i for i in ids if not i.isprintable()]


def test_the_logs_hold_no_control_character_a_kernel_wrote(graded):
    """hostile_escape_codes_on_stderr wrote escape codes to its kernel's stderr, which goes to its log: every log is
    written back with them escaped (course.grader.workers.printable_log)."""
    logs = list((graded.course / '.build' / 'logs').rglob('*.log'))
    raw = [str(p) for p in logs if b'\x1b' in p.read_bytes() or b'\x07' in p.read_bytes()]
    assert logs and not raw, raw
    log = graded.course / '.build' / 'logs' / synthetic.STEP / 'hostile_escape_codes_on_stderr.log'
    assert '\\x1b]0;pwned\\x07' in log.read_text(), log.read_text()[-2000:]


def test_the_grade_table_says_when_kernels_ran_without_a_memory_cap(graded):
    from course.grader.workers import memory_capped

    kind = next(k for k in ('warm', 'cold', 'unsandboxed') if f'grading with {k} kernels' in graded.out)
    assert ('ran without a memory cap of their own' in graded.out) == (not memory_capped(kind)), graded.out[-3000:]


def test_the_class_was_graded_with_warm_kernels_where_they_can_run(graded):
    """The fast path is what graded the corpus above wherever it can run (in the sandbox, as root or as a user with user
    namespaces: course.isolation.warm.available()), and every results record says so."""
    warm = graded.sandboxed and warm_kernels_available()
    assert ('grading with warm kernels' in graded.out) == warm, graded.out[-2000:]
    kinds = {r['kernel'] for r in graded.rows.values() if r['status'] != 'not submitted' and not r['status'].startswith(REFUSED)}
    assert kinds == {'warm' if warm else 'cold' if graded.sandboxed else 'unsandboxed'}, kinds
