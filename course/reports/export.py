"""`nbgrader export` for the course (nbgrader_config.py sets ExportApp.plugin_class to CellCsvExport): three CSV tables,
each with one header row, readable by csv, pandas and a spreadsheet.

  grades.csv          one row per student and step: status, kernel, raw score, late penalty, score, autograded points,
                      whether written answers await a human. Scores as nbgrader's own CsvExportPlugin gives them
                      (score = max(0, raw score - late penalty)); students from the gradebook, so a student with no
                      submission of a step gets a row with status 'not submitted' and 0.
  grades-cells.csv    one row per student, step and graded cell (test cells and written answers): its score.
  grades-total.csv    one row per student: the score of each step (a column each) and the course total.
When the class goes through an LMS (a roster with LMS ids imported by course.classroom.collect, docs/lms.md), the same
scores for that LMS, in lms/, as each platform of course.classroom.lms writes them (Platform.write_grades: Canvas's
grades-canvas.csv, Moodle's grades-moodle.csv and grading worksheets), and each student's feedback pages packaged for
it (Platform.package_feedback). An LTI class's grades go back by `make passback` instead (docs/lti.md).
The status comes from results/<step>/<student>.json (course.reports.results).
"""

import csv
from pathlib import Path

from nbgrader.plugins import ExportPlugin

from course import gate
from course.classroom.lms import totals
from course.layout import ROOT, autograded_points, steps
from course.reports import results

STEP_COLUMNS = ['student_id', 'last_name', 'first_name', 'email', 'step', 'duedate', 'timestamp', 'status', 'kernel',
                'raw_score', 'late_submission_penalty', 'score', 'max_score', 'autograded', 'autograded_max',
                'needs_manual_grading']
CELL_COLUMNS = ['student_id', 'step', 'notebook', 'grade_id', 'kind', 'score', 'max_score']


def course_steps(gradebook, root=ROOT):
    """The steps of the gradebook, in source/ order (a step no longer in source/ last)."""
    known = [a.name for a in gradebook.assignments]
    order = steps(root)
    return sorted(known, key=lambda s: (order.index(s) if s in order else len(order), s))


def graded(gradebook):
    """The gradebook's submissions and grades in two queries, whatever the size of the class (one query per submission
    and per notebook, as the ORM's relationships load them, costs seconds in a class of hundreds):
    ({(step, student): submission dict}, {(step, student): [grade dicts]}), the grades by notebook, then grade id."""
    from nbgrader.api import Assignment, BaseCell, Grade, Notebook, SubmittedAssignment, SubmittedNotebook

    db = gradebook.db
    subs = {(step, sid): {'timestamp': ts, 'score': score, 'penalty': penalty}
            for step, sid, ts, score, penalty in
            db.query(Assignment.name, SubmittedAssignment.student_id, SubmittedAssignment.timestamp,
                     SubmittedAssignment.score, SubmittedAssignment.late_submission_penalty)
            .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)}
    grades = {}
    query = (db.query(Assignment.name, SubmittedAssignment.student_id, Notebook.name, BaseCell.name, Grade.cell_type,
                      Grade.score, Grade.max_score, Grade.needs_manual_grade)
             .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
             .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
             .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
             .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
             .join(BaseCell, Grade.cell_id == BaseCell.id)
             .order_by(Assignment.name, SubmittedAssignment.student_id, Notebook.name, BaseCell.name))
    for step, sid, notebook, name, cell_type, score, max_score, manual in query:
        grades.setdefault((step, sid), []).append({'notebook': notebook, 'name': name, 'cell_type': cell_type,
                                                   'score': score, 'max_score': max_score, 'manual': manual})
    return subs, grades


def rows(gradebook, root=ROOT):
    """One dict per student of the gradebook and step: STEP_COLUMNS, plus 'cells' ({grade_id: autograded score}, every
    test cell of the step), 'graded_cells' (CELL_COLUMNS rows), 'awaiting' ([(notebook, grade_id)] of the written answers
    that wait for a human), 'submitted' (the gradebook holds a submission) and 'record' (results/, or None)."""
    subs, all_grades = graded(gradebook)
    assignments = {a.name: a for a in gradebook.assignments}
    students = sorted(gradebook.students, key=lambda s: s.id)
    out = []
    for step in course_steps(gradebook, root):
        assignment = assignments[step]
        points = autograded_points(step, root) if (Path(root) / 'source' / step).is_dir() else {}
        for student in students:
            sub = subs.get((step, student.id))
            # a record without a gradebook submission: graded but nbgrader kept nothing (no notebook to grade, say)
            record = results.load(step, student.id, root)
            grades = all_grades.get((step, student.id), [])
            scores = {g['name']: g['score'] for g in grades if g['cell_type'] == 'code'}
            raw = sub['score'] if sub else 0.0
            penalty = (sub['penalty'] or 0.0) if sub else 0.0
            out.append({
                'student_id': student.id, 'last_name': student.last_name or '', 'first_name': student.first_name or '',
                'email': student.email or '', 'step': step, 'duedate': assignment.duedate or '',
                'timestamp': (sub['timestamp'] if sub else None) or '',
                'status': results.label(record) if sub or record else 'not submitted',
                'kernel': (record or {}).get('kernel') or '',
                'raw_score': raw, 'late_submission_penalty': penalty, 'score': max(0.0, raw - penalty),
                'max_score': assignment.max_score,
                'autograded': sum(scores.get(g, 0.0) for g in points), 'autograded_max': sum(points.values()),
                'needs_manual_grading': any(g['manual'] for g in grades),
                'cells': {g: scores.get(g, 0.0) for g in points},
                'graded_cells': [{'student_id': student.id, 'step': step, 'notebook': g['notebook'], 'grade_id': g['name'],
                                  'kind': 'test' if g['cell_type'] == 'code' else 'answer', 'score': g['score'],
                                  'max_score': g['max_score']} for g in grades],
                'awaiting': [(g['notebook'], g['name']) for g in grades if g['manual']],
                'submitted': sub is not None,
                'record': record,
            })
        for bad in results.refused_ids(step, root):  # an id the gate refused: no gradebook entry, no record, no points
            out.append({
                'student_id': bad['student'], 'last_name': '', 'first_name': '', 'email': '', 'step': step,
                'duedate': assignment.duedate or '', 'timestamp': '', 'status': f"refused ({bad['detail']})", 'kernel': '',
                'raw_score': 0.0, 'late_submission_penalty': 0.0, 'score': 0.0, 'max_score': assignment.max_score,
                'autograded': 0.0, 'autograded_max': sum(points.values()), 'needs_manual_grading': False,
                'cells': dict.fromkeys(points, 0.0), 'graded_cells': [], 'awaiting': [], 'record': None,
                'refused_id': True,
            })
    return out


def write_lms(gradebook, table, root=ROOT):
    """What each LMS the class goes through imports (course.classroom.lms: each platform's grade file), and its
    feedback packages."""
    from course.classroom import lms

    for platform in lms.platforms().values():
        platform.write_grades(gradebook, table, root)
    lms.package_feedback(gradebook, root)


def write(path, columns, table):
    """A CSV of table's rows, every text written by course.gate.printable(): a name or a status with a newline or an
    escape code stays one cell of one row, and shows as what it is."""
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, columns, extrasaction='ignore')
        w.writeheader()
        w.writerows({k: gate.printable(v) if isinstance(v, str) else v for k, v in row.items()} for row in table)


def write_all(gradebook, to, root=ROOT):
    """Write grades.csv at to, and grades-cells.csv and grades-total.csv beside it; return the rows."""
    to = Path(to)
    table = rows(gradebook, root)
    write(to, STEP_COLUMNS, table)
    write(to.with_name(f'{to.stem}-cells.csv'), CELL_COLUMNS, [c for r in table for c in r['graded_cells']])
    step_names = course_steps(gradebook, root)
    write(to.with_name(f'{to.stem}-total.csv'), ['student_id', 'last_name', 'first_name', 'email', *step_names, 'total',
                                                 'total_max'], totals(table))
    write_lms(gradebook, table, root)
    return table


class CellCsvExport(ExportPlugin):
    """nbgrader export plugin: grades.csv (a row per student and step), grades-cells.csv (a row per graded cell) and
    grades-total.csv (a row per student, with the course total); see this module's docstring."""

    def export(self, gradebook):
        coursedir = getattr(self.parent, 'coursedir', None)
        root = Path(coursedir.root) if coursedir else Path.cwd()
        write_all(gradebook, self.to or root / 'grades.csv', root)
