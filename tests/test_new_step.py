"""Adding a step is adding a folder: a synthetic second step (tests/support/synthetic.py), with its own notebook, shipped file,
checks and mistakes, is added to a temporary course holding the first real step; `make build`, `make check` and
`make mutants` (their modules) handle it with no change to the tooling."""

import csv
import subprocess
import sys

import pytest

from course import runner
from course.cells import STUB_LINE, read, role
from course.layout import copy_course, demo_root, steps
from support import synthetic

FIRST = steps()[0]


def module(course, *args):
    done = subprocess.run([sys.executable, '-m', *args], cwd=course, capture_output=True, text=True, env=runner.env(course))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope='module')
def course(tmp_path_factory):
    """A course with the first real step (its bank removed: a small demo class) and the synthetic one, built and graded."""
    import shutil

    root = copy_course(tmp_path_factory.mktemp('newstep'))
    for step in steps():
        if step != FIRST:
            shutil.rmtree(root / 'source' / step)
            shutil.rmtree(root / 'release' / step, ignore_errors=True)
    (root / 'source' / FIRST / 'instructor' / 'bank.py').unlink()
    synthetic.add_to(root)
    synthetic.unschedule(root)
    built = module(root, 'course.authoring.build')
    checked = module(root, 'course.authoring.build', '--check')
    graded = module(root, 'course.grader.grade', '--demo', '--kill-matrix', '--cell-timeout=60', '--timeout=600')
    return root, built, checked, graded


def test_build_generates_the_release_and_the_executed_solution_of_the_new_step(course):
    root, built, checked, _ = course
    release = root / 'release' / synthetic.STEP
    assert f'release/{synthetic.STEP}/{synthetic.NAME}' in built and f'notebooks/{synthetic.NAME}' in built, built
    nb = read(release / synthetic.NAME)
    solution = next(c for c in nb.cells if role(c) == 'solution')
    assert STUB_LINE in solution.source and 'return a + b' not in solution.source, solution.source
    assert (release / 'numbers.txt').read_text() == '1 2 3\n', 'the file the step ships reaches students'
    assert not (release / 'instructor').exists(), 'instructor/ (checks, bank) must never reach the release'
    executed = read(root / 'notebooks' / synthetic.NAME)
    assert next(c for c in executed.cells if c.id == 'shipped').outputs[0]['text'] == '1 2 3\n'
    assert 'up to date' in checked, checked


def test_grading_and_the_kill_matrix_cover_the_new_step(course):
    root, _, _, graded = course
    n, k = len(synthetic.MISTAKES), len(synthetic.ALTERNATIVES)
    assert f'{synthetic.STEP} kill matrix: ' in graded, graded
    rate = graded.split(f'{synthetic.STEP} kill matrix: ', 1)[1].split('kill rate: ', 1)[1].splitlines()[0]
    assert rate == f'{n}/{n} mistakes lose points where expected; {k}/{k} correct alternatives keep full marks', rate
    assert f'{FIRST}: no kill matrix: source/{FIRST}/instructor/bank.py is missing' in graded


def test_grades_csv_has_the_new_step_as_rows_and_the_total_as_a_column(course):
    root = demo_root(course[0])  # --demo grades in the demo's own course
    with open(root / 'grades.csv', newline='') as f:
        rows = {(r['step'], r['student_id']): r for r in csv.DictReader(f)}
    assert rows[(synthetic.STEP, 'perfect')]['autograded'] == '3.0' and rows[(synthetic.STEP, 'perfect')]['status'] == 'graded'
    assert rows[(synthetic.STEP, 'blank')]['status'] == 'blank'
    assert rows[(FIRST, 'subtracts')]['status'] == 'not submitted', 'a student of one step only has a row for the other'
    with open(root / 'grades-total.csv', newline='') as f:
        totals = {r['student_id']: r for r in csv.DictReader(f)}
    perfect = totals['perfect']
    assert float(perfect['total']) == float(perfect[FIRST]) + float(perfect[synthetic.STEP]) > 0


def test_results_record_each_submission_of_the_new_step(course):
    import json

    root = demo_root(course[0])
    record = json.loads((root / 'results' / synthetic.STEP / 'subtracts.json').read_text())
    assert record['status'] == 'graded' and record['autograde']['success'] and record['seconds']['autograde'] > 0, record
