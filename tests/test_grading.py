"""Autograding through nbgrader, for every step: the demo class's grades, feedback and CSV tables, the kill matrix of each
step's bank, the late penalty as nbgrader's own export applies it, and our grades against plain nbgrader's."""

import csv
import shutil
from pathlib import Path

import nbformat
import pytest

from conftest import can_sandbox
from course import runner
from course.authoring.demo import bank, sampled
from course.layout import autograded_points, notebooks, steps

STEPS = steps()
BANKS = {step: bank(step) for step in STEPS}
# The graded class holds a sample of each bank, a mistake and an alternative per graded function (course.authoring.demo.sampled):
# grading every bank would not fit make test's budget. make mutants grades, and prints the kill matrix of, whole banks.
SAMPLES = {step: sampled(step) for step in STEPS}
MISTAKES = [(step, v) for step, vs in SAMPLES.items() for v in vs if v.caught_by]
ALTERNATIVES = [(step, v) for step, vs in SAMPLES.items() for v in vs if not v.caught_by]


def full(row):
    return float(row['autograded']) == float(row['autograded_max']) > 0


@pytest.mark.parametrize('step', STEPS)
def test_perfect_submission_gets_full_autograded_marks_and_awaits_manual_grading(graded, step):
    row = graded.rows[(step, 'perfect')]
    assert row['status'] == 'graded' and full(row), row
    assert row['needs_manual_grading'] == 'True', 'the written answers of a perfect submission await a human'


@pytest.mark.parametrize('step', STEPS)
def test_blank_submission_scores_zero_and_is_flagged_blank_not_ungradable(graded, step):
    row = graded.rows[(step, 'blank')]
    assert (row['status'], float(row['score']), float(row['autograded'])) == ('blank', 0.0, 0.0), row


@pytest.mark.parametrize('step', STEPS)
def test_blank_submission_fails_each_test_only_for_the_missing_work(graded, step):
    """The untouched release (the demo class's blank student) fails every test cell with the stub's NotImplementedError,
    not a NameError or a crash: what a student who runs a test before doing the work sees. (That the solution passes
    every test is make build's execution, which stops at the first error, checked fresh by test_generated and re-run
    by nbval; the browser test presses nbgrader's Validate on the release.)"""
    from course.cells import STUB_MESSAGE
    from course.reports import results

    failures = results.load(step, 'blank', graded.course)['failures']
    stub = f'NotImplementedError: {STUB_MESSAGE}'
    tests = list(autograded_points(step))
    wrong = {g: failures.get(g, 'passed') for g in tests if failures.get(g) != stub}
    assert tests and not wrong, f'test cells of the untouched release that do not fail with {stub!r}: {wrong}'


@pytest.mark.parametrize('step, mistake', MISTAKES, ids=[f'{s}-{m.student}' for s, m in MISTAKES])
def test_mistake_loses_points_in_every_cell_meant_to_catch_it(graded, step, mistake):
    row = graded.rows[(step, mistake.student)]
    points = autograded_points(step)
    kept = [c for c in mistake.caught_by if float(row[c]) == points[c]]
    assert row['status'] == 'graded' and mistake.caught_by and not kept, (
        f'{mistake.student} kept full points in {kept} of {mistake.caught_by} ({row["status"]})')


@pytest.mark.parametrize('step, alternative', ALTERNATIVES, ids=[f'{s}-{a.student}' for s, a in ALTERNATIVES])
def test_correct_alternative_keeps_full_marks(graded, step, alternative):
    row = graded.rows[(step, alternative.student)]
    lost = [c for c, points in autograded_points(step).items() if float(row[c]) < points]
    assert row['status'] == 'graded' and not lost, f'{alternative.student} lost points in {lost} ({row["status"]})'


@pytest.mark.parametrize('step', STEPS)
def test_kill_matrix_is_printed_with_its_kill_rate(graded, step):
    n, k = sum(bool(v.caught_by) for v in SAMPLES[step]), sum(not v.caught_by for v in SAMPLES[step])
    assert f'{step} kill matrix: ' in graded.out, graded.out[-3000:]
    rate = graded.out.split(f'{step} kill matrix: ', 1)[1].split('kill rate: ', 1)[1].splitlines()[0]
    assert rate == f'{n}/{n} mistakes lose points where expected; {k}/{k} correct alternatives keep full marks', rate


@pytest.mark.parametrize('step', STEPS)
def test_feedback_shows_each_failed_test_and_its_message_without_hidden_test_source(graded, step):
    """For the bank's first mistake: its feedback page shows, as text, the failed test cell and the message of its error,
    and no hidden test line; its summary, at the top, names the failed claim (its docstring's first line) and gives that
    message."""
    from bs4 import BeautifulSoup

    from course.cells import read
    from course.layout import ROOT
    from course.reports.feedback import claim_name
    from support.leaks import hidden_lines, page_text

    mistake = BANKS[step].MUTANTS[0]
    name = notebooks(step)[0]
    page = graded.course / 'feedback' / mistake.student / step / name.replace('.ipynb', '.html')
    text = page_text(page)
    graded_nb = read(graded.course / 'autograded' / mistake.student / step / name)
    failed = [c for c in graded_nb.cells if c.metadata.get('nbgrader', {}).get('grade_id') == mistake.caught_by[0]][0]
    error = next(o for o in failed.outputs if o.output_type == 'error')
    assert failed.source.splitlines()[0] in text, 'the feedback should show the failed test cell'
    assert error.evalue.splitlines()[0][:80] in text, 'and its error message'
    source = next(c for c in read(ROOT / 'source' / step / name).cells
                  if c.metadata.get('nbgrader', {}).get('grade_id') == mistake.caught_by[0])
    summary = BeautifulSoup(page.read_text(), 'html.parser').find(id='summary')
    item = summary and summary.select_one(f'ol.failed > li:has(a[href="#{mistake.caught_by[0]}"])')
    assert item and item.a.get_text() == claim_name(source.source, mistake.caught_by[0]), (
        f'the summary should name the claim of {mistake.caught_by[0]}: {summary and summary.get_text()[:1000]}')
    assert error.evalue.splitlines()[0][:80] in item.select_one('.message').get_text(), item.get_text()
    leaked = [line for line in hidden_lines(step, name) if line in text]
    assert not leaked, f'feedback of {mistake.student} shows hidden test lines: {leaked[:3]}'


def test_grades_csv_is_one_table_with_a_row_per_student_and_step(graded):
    """grades.csv: one header row, then one row per student of the gradebook and step, readable by csv (and so pandas and
    a spreadsheet); grades-total.csv: one row per student, a column per step and the total."""
    with open(graded.course / 'grades.csv', newline='') as f:
        lines = list(csv.reader(f))
    header, body = lines[0], lines[1:]
    assert header[:5] == ['student_id', 'last_name', 'first_name', 'email', 'step'] and header not in body
    assert all(len(r) == len(header) for r in body), 'every row has the header\'s columns'
    every = steps(graded.course)  # the synthetic step of the grader's own cases too
    refused = [k for k, r in graded.rows.items() if r['status'].startswith("refused (student id '")]  # no student's
    students = {s for _, s in graded.rows} - {s for _, s in refused}
    assert len(body) == len(students) * len(every) + len(refused), (
        f'{len(body)} rows for {len(students)} students and {len(every)} steps, and {len(refused)} of refused ids')
    with open(graded.course / 'grades-total.csv', newline='') as f:
        totals = list(csv.DictReader(f))
    assert len(totals) == len(students) and all(step in totals[0] for step in every)
    for t in totals:
        assert abs(float(t['total']) - sum(float(t[step]) for step in every)) < 1e-9, t


def test_scores_and_late_penalty_are_those_of_nbgraders_own_export(graded, tmp_path):
    """A copy of the graded gradebook, with a late penalty on one submission and a student who submitted nothing: our
    export's raw_score, late_submission_penalty and score equal nbgrader's CsvExportPlugin's for every student and step."""
    from nbgrader.api import Gradebook

    course = tmp_path / 'course'
    shutil.copytree(graded.course, course, ignore=shutil.ignore_patterns('autograded', 'feedback', 'submitted'))
    step = STEPS[0]
    with Gradebook(f'sqlite:///{course / "gradebook.db"}') as gb:
        sub = gb.find_submission(step, 'perfect')
        sub.notebooks[0].late_submission_penalty = 2.5  # the assignment's penalty is the sum of its notebooks'
        gb.db.commit()
        gb.update_or_create_student('never_submitted')
    runner.export(course / 'ours.csv', course)
    done = runner.run('export', '--ExportApp.plugin_class=nbgrader.plugins.CsvExportPlugin', '--to=theirs.csv', cwd=course)
    assert (course / 'theirs.csv').exists(), done.stdout + done.stderr
    with open(course / 'ours.csv', newline='') as f:
        ours = {(r['step'], r['student_id']): r for r in csv.DictReader(f)
                if not r['status'].startswith("refused (student id '")}  # in no gradebook: nbgrader's export has none
    with open(course / 'theirs.csv', newline='') as f:
        theirs = {(r['assignment'], r['student_id']): r for r in csv.DictReader(f)}
    assert set(ours) == set(theirs), 'the same students and steps (from the gradebook)'
    differ = [(k, c, ours[k][c], theirs[k][c]) for k in theirs for c in ('raw_score', 'late_submission_penalty', 'score')
              if float(ours[k][c]) != float(theirs[k][c] or 0)]
    assert not differ, differ
    late = ours[(step, 'perfect')]
    assert float(late['score']) == float(late['raw_score']) - 2.5 and ours[(step, 'never_submitted')]['status'] == 'not submitted'


def test_grades_are_those_of_plain_serial_nbgrader_autograde(graded, plain):
    """course.grader.grade (warm kernels, --jobs at a time, sandboxed, with its repairs and out-of-process checks) gives one
    demo student per step the score that plain serial `nbgrader autograde` gives, in every test cell."""
    missing = [key for key, cells in plain.items() if cells is None]
    assert not missing, f'plain nbgrader did not grade {missing}'
    differ = [(key, cell, float(graded.rows[key][cell]), score)
              for key, cells in plain.items() for cell, score in cells.items() if float(graded.rows[key][cell]) != score]
    assert sorted(step for step, _ in plain) == sorted(STEPS), f'plain nbgrader graded only {sorted(plain)}'
    assert not differ, f'(step, student), cell, ours, plain nbgrader: {differ}'
    scores = [s for cells in plain.values() for s in cells.values()]
    assert 0 in scores and any(s > 0 for s in scores), f'the sample should hold lost and kept points: {plain}'


# Run where a read-only mount covers /proc/sys, as a container's does, made in a user and mount namespace (the outer
# one here) and so locked in the inner one the command runs in: bwrap still runs there, but the kernel refuses the fresh
# /proc every sandbox mounts.
COVERED_PROC = ['unshare', '--user', '--map-root-user', '--mount', '--', 'sh', '-c',
                'mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && '
                'exec unshare --user --map-root-user --mount -- "$@"', 'covered']


@pytest.mark.parametrize('machine', ['without bwrap', 'with /proc covered'])
def test_without_a_sandbox_make_grade_refuses_before_any_student_code_runs(tmp_path, machine):
    """On a machine without a working sandbox, grading a real class stops at once, with one line saying how to get one,
    and nothing of the class ran: the submission's code, which would leave a file in the course root, did not; no kernel,
    no worker, no results, no gradebook. Without bubblewrap (here, a PATH without bwrap), and where bwrap runs but cannot
    mount the fresh /proc a kernel's sandbox needs (COVERED_PROC)."""
    import subprocess
    import sys

    from course.cells import read
    from course.layout import ROOT, copy_course

    course = copy_course(tmp_path / 'course')
    step, name = STEPS[0], notebooks(STEPS[0])[0]
    nb = read(ROOT / 'release' / step / name)
    nb.cells.insert(0, nbformat.v4.new_code_cell("open('../../../student-code-ran.txt', 'w').write('ran')"))
    (course / 'submitted' / 'alice' / step).mkdir(parents=True)
    nbformat.write(nb, course / 'submitted' / 'alice' / step / name)
    if machine == 'without bwrap':
        env, wrap = {**runner.env(course), 'PATH': str(Path(sys.executable).parent)}, []  # this venv's commands only
    else:
        if not can_sandbox() or subprocess.run([*COVERED_PROC, 'true'], capture_output=True).returncode:
            pytest.skip('needs a working sandbox, and user namespaces to cover /proc/sys in')
        env, wrap = runner.env(course), COVERED_PROC
    done = subprocess.run([*wrap, sys.executable, '-m', 'course.grader.grade'], cwd=course, env=env, capture_output=True,
                          text=True)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0 and len(errors) == 1, f'exit {done.returncode}; stderr:\n{done.stderr}{done.stdout}'
    assert 'apt-get install bubblewrap' in errors[0] and 'make system' in errors[0] and '--no-sandbox' in errors[0], errors
    left = sorted(p.name for p in course.iterdir())
    assert left == ['course', 'course.toml', 'input.txt', 'nbgrader_config.py', 'release', 'source', 'submitted'], (
        f'the refused run left {left}: something of the class ran')


def test_a_notebook_over_the_budget_is_never_read_nor_graded_and_says_why(tmp_path):
    """A submitted notebook larger than course.cells.NOTEBOOK_BUDGET (here a sparse file: its size, no disk) is
    not read (neither repaired nor sent to a worker) and gets the status 'over budget', naming the file and the budget;
    the student beside it is prepared as usual."""
    from course.cells import NOTEBOOK_BUDGET, read
    from course.grader import workers
    from course.layout import ROOT, copy_course
    from course.reports import results

    course = copy_course(tmp_path / 'course')
    step, name = STEPS[0], notebooks(STEPS[0])[0]
    for student in ('alice', 'bob'):
        (course / 'submitted' / student / step).mkdir(parents=True)
    nbformat.write(read(ROOT / 'release' / step / name), course / 'submitted' / 'alice' / step / name)
    with open(course / 'submitted' / 'bob' / step / name, 'wb') as f:
        f.truncate(NOTEBOOK_BUDGET + 1)
    jobs = workers.prepare([step], 'warm', course)
    bob = results.load(step, 'bob', course)
    assert jobs == [(step, 'alice')], jobs
    over = f'{name} is {NOTEBOOK_BUDGET + 1:,} bytes, over the {NOTEBOOK_BUDGET:,} the grader reads'
    assert (bob['status'], bob['detail']) == ('over budget', over), bob
    assert not (course / 'repairs' / 'bob').exists() and not (course / 'submitted' / 'bob' / step / '.original').exists()


def test_a_grading_worker_cannot_grow_past_its_memory_limit():
    """course.grader.workers.limit_memory() (what each grading worker calls first) makes an allocation past
    WORKER_MEMORY fail with MemoryError in that process, instead of the machine running out; without it, the same one
    succeeds (numpy.empty: asked for, never touched)."""
    import subprocess
    import sys

    from course.grader.workers import WORKER_MEMORY

    grow = f'import numpy; numpy.empty({WORKER_MEMORY + (1 << 30)}, numpy.uint8); print("grew")'
    limited = subprocess.run([sys.executable, '-c', f'from course.grader import workers; workers.limit_memory(); {grow}'],
                             capture_output=True, text=True, env=runner.env())
    unlimited = subprocess.run([sys.executable, '-c', grow], capture_output=True, text=True, env=runner.env())
    assert limited.returncode and 'MemoryError' in limited.stderr and 'grew' not in limited.stdout, limited.stderr
    assert unlimited.stdout == 'grew\n', unlimited.stderr


# The damaged, broken and hostile corpus's tests (tests/test_submissions.py) and the class report's
# (tests/test_classreport_demo.py) share this module's graded class: collected here (tests/conftest.py's collect_ignore
# keeps them from being collected on their own), they run on the same pytest-xdist worker (--dist loadfile), which grades
# the class once.
from test_classreport_demo import *  # noqa: E402, F401, F403
from test_submissions import *  # noqa: E402, F401, F403
