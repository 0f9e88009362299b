"""Autograding through nbgrader: the demo class's grade table, feedback and CSV, and the kill matrix of
each step's instructor/bank.py."""

import pytest

import grade
from course import assignments

BANKS = {aid: grade.mutants(aid) for aid in assignments() if grade.mutants(aid)}
MISTAKES = [(aid, m) for aid, bank in BANKS.items() for m in bank.MUTANTS]
ALTERNATIVES = [(aid, a) for aid, bank in BANKS.items() for a in bank.ALTERNATIVES]


def full(row):
    return float(row['autograded']) == float(row['autograded_max'])


def test_perfect_submission_gets_full_autograded_marks_and_awaits_manual_grading(graded):
    for aid in assignments():
        row = graded.rows[(aid, 'perfect')]
        assert row['status'] == 'graded' and full(row), row
        assert row['needs_manual_grading'] == 'True', 'the written answers of a perfect submission await a human'


def test_blank_submission_scores_zero_and_is_flagged_blank_not_ungradable(graded):
    for aid in assignments():
        row = graded.rows[(aid, 'blank')]
        assert (row['status'], float(row['score'])) == ('blank', 0.0), row


@pytest.mark.parametrize('aid, mistake', MISTAKES, ids=[m.student for _, m in MISTAKES])
def test_mistake_loses_points_in_every_cell_meant_to_catch_it(graded, aid, mistake):
    row = graded.rows[(aid, mistake.student)]
    kept = [c for c in mistake.caught_by if float(row[c]) == grade.test_cells(aid)[c]]
    assert row['status'] == 'graded' and not kept, f'{mistake.student} kept full points in {kept} ({row["status"]})'


@pytest.mark.parametrize('aid, alternative', ALTERNATIVES, ids=[a.student for _, a in ALTERNATIVES])
def test_correct_alternative_keeps_full_marks(graded, aid, alternative):
    row = graded.rows[(aid, alternative.student)]
    lost = [c for c, points in grade.test_cells(aid).items() if float(row[c]) < points]
    assert row['status'] == 'graded' and not lost, f'{alternative.student} lost points in {lost} ({row["status"]})'


def test_kill_matrix_is_printed_with_its_kill_rate(graded):
    n, k = len(MISTAKES), len(ALTERNATIVES)
    assert f'kill rate: {n}/{n} mistakes lose points where expected; {k}/{k} correct alternatives keep full marks' in graded.out


def test_feedback_names_each_failed_test_and_its_message_without_hidden_test_source(graded):
    html = (graded.course / 'feedback' / 'mask_not_sliced_to_T' / 'step4' / 'step4_attention_head.html').read_text()
    assert 'Check that Head matches' in html, 'the feedback should show the failed test cell'
    assert 'The size of tensor a (12) must match the size of tensor b (5)' in html, 'and its error message'
    assert 'for i, (B_, T_, T_max, d_, hs, causal, dtype, scale, tol, what)' not in html, 'but not the hidden test source'


def test_grades_csv_has_one_row_per_student_with_every_test_cell_and_the_manual_flag(graded):
    students = {s for _, s in graded.rows}
    assert len(graded.rows) == len(students), 'one row per student'
    row = graded.rows[('step4', 'perfect')]
    assert set(grade.test_cells('step4')) <= set(row) and 'needs_manual_grading' in row and 'status' in row


def test_grades_are_those_of_plain_serial_nbgrader_autograde(graded, plain):
    """tools/grade.py (warm kernels, --jobs at a time, sandboxed, with its repairs and out-of-process checks) gives every
    demo student the score that plain serial `nbgrader autograde` gives, in every test cell."""
    missing = [key for key, cells in plain.items() if cells is None]
    assert not missing, f'plain nbgrader did not grade {missing}'
    differ = [(key, cell, float(graded.rows[key][cell]), score)
              for key, cells in plain.items() for cell, score in cells.items() if float(graded.rows[key][cell]) != score]
    assert len(plain) >= 40 and not differ, f'(assignment, student), cell, ours, plain nbgrader: {differ}'
