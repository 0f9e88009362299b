"""Damaged, broken and hostile submissions (tests/corpus.py), graded in one batch with the demo class by the real command:
each gets its status and points, clean students' grades do not move, nothing outside a student's folder changes, and no
process a student started is left running."""

import os
import sqlite3

import pytest
from classroom import AID, CLEAN, snapshot
from corpus import CASES, MARK, Case

from conftest import ROOT, running
from course import notebooks

NAME = notebooks(AID)[0]


@pytest.mark.parametrize('case', CASES, ids=[c.student for c in CASES])
def test_case_gets_its_expected_status_and_points(graded, case: Case):
    if case not in graded.cases:
        pytest.skip('needs the bubblewrap sandbox, which this machine cannot run')
    row = graded.rows[(AID, case.student)]
    expected = row['autograded_max'] if case.points == 'full' else row['autograded'] if case.points is None else case.points
    assert row['status'].startswith(case.status) and float(row['autograded']) == float(expected), (
        f"{case.student}: expected status {case.status!r}... and {expected} points; got {row['status']!r} and "
        f"{row['autograded']} (see {graded.course}/.build/logs/{AID}/{case.student}.log)")


def test_clean_students_grades_are_those_of_a_clean_run(graded):
    assert {s: graded.rows[(AID, s)] for s in CLEAN} == graded.alone


def test_nothing_outside_the_students_folders_changed(graded):
    assert snapshot(graded.course) == graded.before
    assert not (graded.course / 'pwned.txt').exists() and not (graded.course.parent / 'pwned.txt').exists()
    db = sqlite3.connect(graded.course / 'gradebook.db')
    tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    assert 'pwned' not in tables, 'student code created a table in the gradebook'


def test_no_process_started_by_student_code_is_still_running(graded):
    left = running(MARK)
    assert not left, 'left running:\n' + '\n'.join(left)


def test_hidden_tests_never_reach_feedback(graded):
    """Neither nbgrader's feedback nor a student who tries to read source/ may show the hidden tests' source."""
    source = (ROOT / 'source' / AID / NAME).read_text()
    secrets = ['cases = [  # (B, T, T_max, d, head_size', 'for i, (B_, T_, T_max, d_, hs, causal, dtype, scale, tol, what)']
    assert all(s in source for s in secrets), 'the hidden tests changed: update these lines'
    leaks = {page.parent.parent.name: [s for s in secrets if s in page.read_text()]
             for page in (graded.course / 'feedback').glob(f'*/{AID}/*.html')}
    assert not any(leaks.values()), f'feedback shows hidden test lines: {leaks}'


def test_the_sandbox_is_on_or_a_warning_says_it_is_off(graded):
    assert graded.sandboxed != ('WITHOUT a sandbox' in graded.out), graded.out[-2000:]


def test_the_class_was_graded_with_warm_kernels_where_they_can_run(graded):
    """The fast path is what graded the corpus above: warm kernels, in the sandbox (as root, where they can run)."""
    warm = graded.sandboxed and os.geteuid() == 0
    assert ('grading with warm kernels' in graded.out) == warm, graded.out[-2000:]
