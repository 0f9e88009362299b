"""course.grader.benchmark's table (not the timings, which are make bench's to print): a row reads with and without
plain nbgrader's run to compare against."""

from course.grader.benchmark import line


def test_a_row_without_plain_nbgraders_run_has_no_ratio():
    """Check that a row is printed when the benchmark ran without --plain (python -m course.grader.benchmark, its
    default): the times per submission and per floor, and no ratio column."""
    row = line('course.grader.grade (make grade)', 'with feedback', 60.0, 30, 3.0, {})
    assert row.split()[-3:] == ['60.0', '2.00', '0.67'], f'expected total, per submission and per floor last, saw {row!r}'


def test_a_row_with_plain_nbgraders_run_ends_with_the_ratio_for_the_same_work():
    """Check that with --plain a row ends with plain nbgrader's seconds for the same kind of work over the command's."""
    row = line('course.grader.grade --no-feedback', 'autograde', 50.0, 25, 2.0, {'autograde': 200.0, 'with feedback': 300.0})
    assert row.endswith('4.00x'), f'expected the autograde ratio 200/50 = 4.00x at the end, saw {row!r}'
