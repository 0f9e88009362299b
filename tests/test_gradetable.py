"""course.reports.gradetable: the grade table make grade prints in the terminal, from rows as course.reports.export.rows()
gives them (built here by hand: the rows themselves are tests/test_export.py's). The table printed by a real grading run
is checked on the graded class (tests/test_submissions.py: hostile names; tests/hub/test_exchange.py: a student who never
submitted)."""

from course.reports.gradetable import step_block, total_block

POINTS = {'test_shape': 2.0, 'test_values': 3.0}


def row(student, step, status, cells, penalty=0.0, manual=False):
    """One row of export.rows() for a step of POINTS' two test cells and a written answer of 4 points."""
    auto = sum(cells.values())
    score = 0.0 if status == 'not submitted' else max(0.0, auto + (1.5 if manual else 0.0) - penalty)
    return {'student_id': student, 'last_name': '', 'first_name': '', 'email': '', 'step': step, 'status': status,
            'cells': cells, 'autograded': auto, 'autograded_max': sum(POINTS.values()), 'late_submission_penalty': penalty,
            'needs_manual_grading': manual, 'score': score, 'max_score': 9.0}


ADA = row('ada', 'stepA', 'graded', {'test_shape': 2.0, 'test_values': 3.0})
BO = row('bo', 'stepA', 'graded (1 repair)', {'test_shape': 2.0, 'test_values': 0.0}, penalty=1.0, manual=True)
CY = row('cy', 'stepA', 'not submitted', {'test_shape': 0.0, 'test_values': 0.0})


def line_of(lines, student):
    found = [line for line in lines if line.split()[0] == student]
    assert len(found) == 1, f'expected one line for {student}, got {found} in:\n' + '\n'.join(lines)
    return found[0].split()


def test_a_steps_block_gives_each_student_status_points_per_cell_in_order_and_the_autograded_total():
    lines = step_block('stepA', [ADA, BO, CY], POINTS)
    assert lines[0].startswith('stepA: points per autograded test cell 1..2'), lines[0]
    assert line_of(lines, 'ada') == ['ada', 'graded', '2', '3', '5/5'], lines
    assert line_of(lines, 'bo')[:7] == ['bo', 'graded', '(1', 'repair)', '2', '0', '2/5'], lines
    assert lines[-1] == 'legend: 1 test_shape (2), 2 test_values (3)', 'the legend names each column\'s cell and points'
    at = lines[1].index('status')
    assert all(line[at:].startswith(r['status']) for line, r in zip(lines[2:5], (ADA, BO, CY), strict=True)), (
        'the status column does not line up under its heading:\n' + '\n'.join(lines))


def test_a_student_who_submitted_nothing_is_missing_not_zero():
    assert line_of(step_block('stepA', [ADA, CY], POINTS), 'cy') == ['cy', 'not', 'submitted', '-', '-', 'missing']


def test_a_late_penalty_and_written_answers_awaiting_a_grader_are_shown():
    bo = ' '.join(line_of(step_block('stepA', [ADA, BO], POINTS), 'bo'))
    assert bo.endswith('2/5 to grade late: -1'), bo
    assert 'to grade' not in ' '.join(line_of(step_block('stepA', [ADA, BO], POINTS), 'ada'))


def test_a_hostile_student_id_prints_on_one_line_escaped():
    """A student id with a newline and a terminal escape (the gate refuses such a folder; the gradebook may still hold the
    id): printed escaped, one line, nothing that moves or retitles the terminal, no forged row."""
    evil = row('evil\nada  graded  5/5\x1b]0;owned\x07', 'stepA', 'graded\n\x1b[2J', {'test_shape': 0.0, 'test_values': 0.0})
    for lines in (step_block('stepA', [ADA, evil], POINTS), total_block([ADA, evil])):
        text = '\n'.join(lines)
        assert '\x1b' not in text and '\x07' not in text, text
        assert [line.split()[0] for line in lines].count('ada') == 1, f'a forged row of ada:\n{text}'
        assert any(line.startswith('evil\\nada') for line in lines), text


def test_the_course_total_gives_each_steps_score_after_penalties_and_says_missing():
    """Each step's score (late penalty off, the written answer's hand grade in) and the sum over the course's maximum;
    'missing' for a step not submitted and for a step the student has no row of."""
    later = row('ada', 'stepB', 'graded', {'test_shape': 1.0, 'test_values': 3.0})
    lines = total_block([ADA, BO, CY, later])
    assert lines[1].split() == ['student', 'stepA', 'stepB', 'total'], lines
    assert line_of(lines, 'ada') == ['ada', '5', '4', '9/18'], lines
    assert line_of(lines, 'bo') == ['bo', '2.5', 'missing', '2.5/9'], lines
    assert line_of(lines, 'cy') == ['cy', 'missing', 'missing', '0/9'], lines


def test_a_step_nobody_is_in_says_so():
    assert step_block('stepA', [], POINTS) == ['stepA: nobody in the gradebook']
