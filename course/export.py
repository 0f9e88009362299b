"""`nbgrader export` for the course (nbgrader_config.py sets ExportApp.plugin_class to CellCsvExport): three CSV tables,
each with one header row, readable by csv, pandas and a spreadsheet.

  grades.csv          one row per student and step: status, kernel, raw score, late penalty, score, autograded points,
                      whether written answers await a human. Scores as nbgrader's own CsvExportPlugin gives them
                      (score = max(0, raw score - late penalty)); students from the gradebook, so a student with no
                      submission of a step gets a row with status 'not submitted' and 0.
  grades-cells.csv    one row per student, step and graded cell (test cells and written answers): its score.
  grades-total.csv    one row per student: the score of each step (a column each) and the course total.
The status comes from results/<step>/<student>.json (course.results).
"""

import csv
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from course import results
from course.layout import ROOT, autograded_points, steps

STEP_COLUMNS = ['student_id', 'last_name', 'first_name', 'email', 'step', 'duedate', 'timestamp', 'status', 'kernel',
                'raw_score', 'late_submission_penalty', 'score', 'max_score', 'autograded', 'autograded_max',
                'needs_manual_grading']
CELL_COLUMNS = ['student_id', 'step', 'notebook', 'grade_id', 'kind', 'score', 'max_score']


def course_steps(gradebook, root=ROOT):
    """The steps of the gradebook, in source/ order (a step no longer in source/ last)."""
    known = [a.name for a in gradebook.assignments]
    order = steps(root)
    return sorted(known, key=lambda s: (order.index(s) if s in order else len(order), s))


def rows(gradebook, root=ROOT):
    """One dict per student of the gradebook and step: STEP_COLUMNS, plus 'cells' ({grade_id: autograded score}, every
    test cell of the step) and 'graded_cells' (CELL_COLUMNS rows)."""
    out = []
    for step in course_steps(gradebook, root):
        assignment = gradebook.find_assignment(step)
        points = autograded_points(step, root) if (Path(root) / 'source' / step).is_dir() else {}
        for student in sorted(gradebook.students, key=lambda s: s.id):
            try:
                sub = gradebook.find_submission(step, student.id)
            except MissingEntry:
                sub = None
            # a record without a gradebook submission: graded but nbgrader kept nothing (no notebook to grade, say)
            record = results.load(step, student.id, root)
            grades = [g for nb in (sub.notebooks if sub else []) for g in nb.grades]
            scores = {g.name: g.score for g in grades if g.cell_type == 'code'}
            raw = sub.score if sub else 0.0
            penalty = (sub.late_submission_penalty or 0.0) if sub else 0.0
            out.append({
                'student_id': student.id, 'last_name': student.last_name or '', 'first_name': student.first_name or '',
                'email': student.email or '', 'step': step, 'duedate': assignment.duedate or '',
                'timestamp': (sub.timestamp if sub else None) or '',
                'status': results.label(record) if sub or record else 'not submitted',
                'kernel': (record or {}).get('kernel') or '',
                'raw_score': raw, 'late_submission_penalty': penalty, 'score': max(0.0, raw - penalty),
                'max_score': assignment.max_score,
                'autograded': sum(scores.get(g, 0.0) for g in points), 'autograded_max': sum(points.values()),
                'needs_manual_grading': bool(sub and sub.needs_manual_grade),
                'cells': {g: scores.get(g, 0.0) for g in points},
                'graded_cells': [{'student_id': student.id, 'step': step, 'notebook': g.notebook.name, 'grade_id': g.name,
                                  'kind': 'test' if g.cell_type == 'code' else 'answer', 'score': g.score,
                                  'max_score': g.max_score} for g in grades],
            })
    return out


def totals(table):
    """One dict per student: the score of each step, and the course total (score and max)."""
    out = {}
    for r in table:
        t = out.setdefault(r['student_id'], {'student_id': r['student_id'], 'last_name': r['last_name'],
                                             'first_name': r['first_name'], 'email': r['email']})
        t[r['step']] = r['score']
        t['total'] = t.get('total', 0.0) + r['score']
        t['total_max'] = t.get('total_max', 0.0) + r['max_score']
    return list(out.values())


def write(path, columns, table):
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, columns, extrasaction='ignore')
        w.writeheader()
        w.writerows(table)


def write_all(gradebook, to, root=ROOT):
    """Write grades.csv at to, and grades-cells.csv and grades-total.csv beside it; return the rows."""
    to = Path(to)
    table = rows(gradebook, root)
    write(to, STEP_COLUMNS, table)
    write(to.with_name(f'{to.stem}-cells.csv'), CELL_COLUMNS, [c for r in table for c in r['graded_cells']])
    step_names = course_steps(gradebook, root)
    write(to.with_name(f'{to.stem}-total.csv'), ['student_id', 'last_name', 'first_name', 'email', *step_names, 'total',
                                                 'total_max'], totals(table))
    return table


class CellCsvExport(ExportPlugin):
    """nbgrader export plugin: grades.csv (a row per student and step), grades-cells.csv (a row per graded cell) and
    grades-total.csv (a row per student, with the course total); see this module's docstring."""

    def export(self, gradebook):
        coursedir = getattr(self.parent, 'coursedir', None)
        root = Path(coursedir.root) if coursedir else Path.cwd()
        write_all(gradebook, self.to or root / 'grades.csv', root)
