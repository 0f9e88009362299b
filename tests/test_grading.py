"""Autograding through nbgrader: the demo class's grade table, feedback and CSV, and the kill matrix of tests/mutants/."""

import csv
import subprocess
import sys

import pytest

import grade
from conftest import ROOT
from course import assignments, copy_course

BANKS = {aid: grade.mutants(aid) for aid in assignments() if grade.mutants(aid)}
MISTAKES = [(aid, m) for aid, bank in BANKS.items() for m in bank.MUTANTS]
ALTERNATIVES = [(aid, a) for aid, bank in BANKS.items() for a in bank.ALTERNATIVES]


@pytest.fixture(scope='module')
def demo(tmp_path_factory):
    """The demo class (perfect, blank, every mistake and alternative) graded by `tools/grade.py --demo` in a course copy."""
    course = copy_course(tmp_path_factory.mktemp('course'))
    done = subprocess.run([sys.executable, 'tools/grade.py', '--demo', '--kill-matrix'],
                          cwd=course, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(course / 'grades.csv', newline='') as f:
        table = {(r['assignment'], r['student_id']): r for r in csv.DictReader(f)}
    return course, table, done.stdout


def test_perfect_submission_gets_full_autograded_marks_and_awaits_manual_grading(demo):
    _, table, _ = demo
    for aid in assignments():
        row = table[(aid, 'perfect')]
        assert row['status'] == 'graded' and float(row['autograded']) == float(row['autograded_max']), row
        assert row['needs_manual_grading'] == 'True', 'the written answers of a perfect submission await a human'


def test_blank_submission_scores_zero_and_is_flagged_blank_not_ungradable(demo):
    _, table, _ = demo
    for aid in assignments():
        row = table[(aid, 'blank')]
        assert (row['status'], float(row['score'])) == ('blank', 0.0), row


@pytest.mark.parametrize('aid, mistake', MISTAKES, ids=[m.student for _, m in MISTAKES])
def test_mistake_loses_points_in_every_cell_meant_to_catch_it(demo, aid, mistake):
    _, table, _ = demo
    row = table[(aid, mistake.student)]
    cells = grade.test_cells(aid)
    kept = [c for c in mistake.caught_by if float(row[c]) == cells[c]]
    assert row['status'] == 'graded' and not kept, f'{mistake.student} kept full points in {kept} ({row["status"]})'


@pytest.mark.parametrize('aid, alternative', ALTERNATIVES, ids=[a.student for _, a in ALTERNATIVES])
def test_correct_alternative_keeps_full_marks(demo, aid, alternative):
    _, table, _ = demo
    row = table[(aid, alternative.student)]
    lost = [c for c, points in grade.test_cells(aid).items() if float(row[c]) < points]
    assert row['status'] == 'graded' and not lost, f'{alternative.student} lost points in {lost} ({row["status"]})'


def test_kill_matrix_is_printed_with_its_kill_rate(demo):
    _, _, out = demo
    n, k = len(MISTAKES), len(ALTERNATIVES)
    assert f'kill rate: {n}/{n} mistakes lose points where expected; {k}/{k} correct alternatives keep full marks' in out, out


def test_feedback_names_each_failed_test_and_its_message_without_hidden_test_source(demo):
    course, _, _ = demo
    html = (course / 'feedback' / 'mask_not_sliced_to_T' / 'step4' / 'step4_attention_head.html').read_text()
    assert 'head_matches_sdpa_reference' in html or 'Check that Head matches' in html
    assert 'The size of tensor a (12) must match the size of tensor b (5)' in html, 'the failed hidden test should show its error'
    source = (ROOT / 'source' / 'step4' / 'step4_attention_head.ipynb').read_text()
    for hidden in ("T &lt; T_max: slice the mask", 'cases = [', 'for i, (B_, T_, T_max'):
        assert hidden.replace('&lt;', '<') in source and hidden not in html, f'feedback quotes the hidden test line {hidden!r}'
