"""course.reports.export.rows(): the grade table that grades.csv, the grade table printed by make grade and the class
report all read. Checked against nbgrader's own ORM properties (the score, the late penalty, whether a written answer
waits), on a gradebook built with nbgrader's API; and its cost in SQL statements does not grow with the class."""

from datetime import datetime, timezone

import pytest
from nbgrader.api import Gradebook
from sqlalchemy import event

from course.reports.export import rows

STEPS = ('stepA', 'stepB')


def build(tmp_path, students):
    """A gradebook of two steps (two test cells and a written answer in one notebook, a test cell in a second), with
    students whose scores, late penalties and manual grades differ."""
    gb = Gradebook(f'sqlite:///{tmp_path / "gradebook.db"}')
    for step in STEPS:
        (tmp_path / 'source' / step).mkdir(parents=True)  # the course's steps, in source/ (no notebook: no test points)
        gb.add_assignment(step, duedate=datetime(2026, 1, 1, tzinfo=timezone.utc))
        gb.add_notebook('main', step)
        gb.add_notebook('extra', step)
        gb.add_grade_cell('test_a', 'main', step, max_score=2, cell_type='code')
        gb.add_grade_cell('test_b', 'main', step, max_score=3, cell_type='code')
        gb.add_grade_cell('answer', 'main', step, max_score=4, cell_type='markdown')
        gb.add_grade_cell('test_c', 'extra', step, max_score=1, cell_type='code')
    for i in range(students):
        sid = f's{i:03d}'
        gb.add_student(sid, first_name=f'F{i}', last_name=f'L{i}', email=f'{sid}@example.edu')
        for k, step in enumerate(STEPS):
            if (i + k) % 4 == 3:
                continue  # this student did not submit this step
            gb.add_submission(step, sid, timestamp='2026-01-02 10:00:00 UTC')
            for j, grade in enumerate(g for nb in gb.find_submission(step, sid).notebooks for g in nb.grades):
                grade.auto_score = float((i + j + k) % (int(grade.max_score) + 1)) if grade.cell_type == 'code' else None
                grade.manual_score = 1.5 if grade.cell_type == 'markdown' and i % 3 == 0 else None
                grade.needs_manual_grade = grade.cell_type == 'markdown' and i % 3 != 0
            gb.find_submission_notebook('main', step, sid).late_submission_penalty = float(i % 2)
            gb.db.commit()
    return gb


def test_rows_agree_with_nbgraders_own_scores_penalties_and_manual_grading_flags(tmp_path):
    """Check that each row gives the score, late penalty, graded cells and written answers awaiting a human that
    nbgrader's own ORM properties give for that submission, and 'not submitted' with 0 for a missing one."""
    with build(tmp_path, 8) as gb:
        table = {(r['step'], r['student_id']): r for r in rows(gb, tmp_path)}
        assert len(table) == 8 * len(STEPS), f'expected a row per student and step, saw {len(table)}'
        for (step, sid), row in table.items():
            subs = [s for s in gb.find_student(sid).submissions if s.assignment.name == step]
            if not subs:
                assert (row['status'], row['score'], row['graded_cells']) == ('not submitted', 0.0, []), row
                continue
            sub = subs[0]
            expected = (sub.score, sub.late_submission_penalty, max(0.0, sub.score - sub.late_submission_penalty),
                        sub.needs_manual_grade, sub.assignment.max_score)
            seen = (row['raw_score'], row['late_submission_penalty'], row['score'], row['needs_manual_grading'],
                    row['max_score'])
            assert seen == pytest.approx(expected), f'{step}/{sid}: expected {expected} as nbgrader gives them, saw {seen}'
            cells = {(nb.name, g.name, g.score, g.max_score, 'test' if g.cell_type == 'code' else 'answer')
                     for nb in sub.notebooks for g in nb.grades}
            seen_cells = {(c['notebook'], c['grade_id'], c['score'], c['max_score'], c['kind']) for c in row['graded_cells']}
            assert seen_cells == cells, f'{step}/{sid}: graded cells differ from the gradebook\'s: {seen_cells ^ cells}'
            waiting = {(nb.name, g.name) for nb in sub.notebooks for g in nb.grades if g.needs_manual_grade}
            assert set(row['awaiting']) == waiting, f'{step}/{sid}: expected {waiting} awaiting, saw {row["awaiting"]}'


def statements(gb, table_of):
    count = []
    listener = lambda *args: count.append(1)  # noqa: E731
    event.listen(gb.engine, 'before_cursor_execute', listener)
    try:
        table_of(gb)
    finally:
        event.remove(gb.engine, 'before_cursor_execute', listener)
    return len(count)


def test_rows_costs_the_same_statements_for_a_class_of_4_and_of_24(tmp_path):
    """Check that rows() reads the gradebook in a number of SQL statements that does not grow with the class (a query
    per submission and notebook costs seconds in a class of hundreds, on every make grade and class report)."""
    (tmp_path / 'small').mkdir()
    (tmp_path / 'large').mkdir()
    with build(tmp_path / 'small', 4) as small, build(tmp_path / 'large', 24) as large:
        few = statements(small, lambda gb: rows(gb, tmp_path / 'small'))
        many = statements(large, lambda gb: rows(gb, tmp_path / 'large'))
    assert many == few, f'expected as many SQL statements for 24 students as for 4 ({few}), saw {many}: a query per row?'
