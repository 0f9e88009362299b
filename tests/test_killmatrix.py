"""course.grader.killmatrix: the kill matrix the grading command prints after a step's grade table, from the rows of the
grade table: the whole bank's, a sample's, or why there is none (tests/test_grading.py checks it on a graded class)."""

from course.authoring.demo import bank, sampled
from course.grader.killmatrix import step_kill_matrix
from course.layout import autograded_points, steps

STEP = steps()[0]


def rows(variants, points, lose=()):
    """Grade-table rows of variants, each mistake losing every point of the cells meant to catch it (but the students of
    lose, which keep them)."""
    out = []
    for v in variants:
        cells = {g: 0 if g in v.caught_by and v.student not in lose else p for g, p in points.items()}
        out.append({'student_id': v.student, 'cells': cells})
    return out


def test_the_whole_banks_matrix_marks_each_mistake_and_its_kill_rate():
    points, whole = autograded_points(STEP), bank(STEP)
    lines = step_kill_matrix(STEP, rows([*whole.MUTANTS, *whole.ALTERNATIVES], points))
    assert lines[0] == f'{STEP} kill matrix: X lost points in a cell meant to catch it, x in another cell, ! expected but kept'
    n, k = len(whole.MUTANTS), len(whole.ALTERNATIVES)
    assert lines[-1] == f'kill rate: {n}/{n} mistakes lose points where expected; {k}/{k} correct alternatives keep full marks'


def test_a_sample_is_named_as_one_and_a_mistake_that_kept_its_points_counts_against_the_rate():
    points, whole, sample = autograded_points(STEP), bank(STEP), sampled(STEP)
    kept = next(v.student for v in sample if v.caught_by)
    lines = step_kill_matrix(STEP, rows(sample, points, lose={kept}))
    n = sum(bool(v.caught_by) for v in sample)
    assert lines[0].startswith(f'{STEP}: the kill matrix of a sample of its bank, {n} of {len(whole.MUTANTS)} mistakes')
    assert lines[1] == '' and lines[2].startswith(f'{STEP} kill matrix: ')
    assert lines[-1].startswith(f'kill rate: {n - 1}/{n} mistakes'), lines[-1]
    assert '!' in next(line for line in lines if line.startswith(kept)), lines


def test_a_timed_out_submission_counts_neither_as_a_kill_nor_as_a_kept_alternative():
    """A mistake or an alternative whose grading timed out scored 0 everywhere: the matrix shows '?' for it, the rate
    counts it neither way, and the last line names it to be graded again."""
    points, whole = autograded_points(STEP), bank(STEP)
    table = rows([*whole.MUTANTS, *whole.ALTERNATIVES], points)
    slow_mistake, slow_alternative = whole.MUTANTS[0].student, whole.ALTERNATIVES[0].student
    for row in table:
        if row['student_id'] in (slow_mistake, slow_alternative):
            row['status'] = 'timeout (autograde took over 180 s and was stopped)'
            row['cells'] = {g: 0 for g in points}
    lines = step_kill_matrix(STEP, table)
    n, k = len(whole.MUTANTS), len(whole.ALTERNATIVES)
    assert lines[-1].startswith(f'kill rate: {n - 1}/{n} mistakes lose points where expected; {k - 1}/{k} correct '
                                'alternatives keep full marks; not graded'), lines[-1]
    assert slow_mistake in lines[-1] and slow_alternative in lines[-1], lines[-1]
    assert set(next(line for line in lines if line.startswith(slow_mistake + ' ')).split()[1:]) == {'?'}


def test_a_class_that_is_not_the_demo_class_has_no_matrix_and_says_why():
    lines = step_kill_matrix(STEP, [{'student_id': 'alice', 'cells': {}}])
    assert lines == [f'{STEP}: no kill matrix: the class is not the demo class (make mutants grades it)'], lines
