"""`nbgrader export` for the course (nbgrader_config.py sets ExportApp.plugin_class to CellCsvExport): three CSV tables,
each with one header row, readable by csv, pandas and a spreadsheet.

  grades.csv          one row per student and step: status, kernel, raw score, late penalty, score, autograded points,
                      whether written answers await a human. Scores as nbgrader's own CsvExportPlugin gives them
                      (score = max(0, raw score - late penalty)); students from the gradebook, so a student with no
                      submission of a step gets a row with status 'not submitted' and 0.
  grades-cells.csv    one row per student, step and graded cell (test cells and written answers): its score.
  grades-total.csv    one row per student: the score of each step (a column each) and the course total.
When the gradebook holds LMS ids (a roster imported by course.classroom.collect, docs/lms.md), the same scores for the
LMS, in lms/:
  grades-canvas.csv   Canvas's gradebook import: Student, ID (the Canvas user id), SIS User ID, SIS Login ID, Section, a
                      Points Possible row, a column per step, and Final Points (the course total; read-only in Canvas).
  grades-moodle.csv   Moodle's gradebook import (Grades > Import > CSV file, users by email): a column per step and the
                      course total.
  moodle-worksheet-<step>.csv  Moodle's assignment grading worksheet (Upload grading worksheet): Identifier
                      (Participant <id>), Grade, Last modified (grade), ...; for a step collected from Moodle.
  and each student's feedback pages packaged for the LMS (course.classroom.lms.package_feedback).
The status comes from results/<step>/<student>.json (course.reports.results).
"""

import csv
from pathlib import Path

from nbgrader.plugins import ExportPlugin

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
    that wait for a human) and 'record' (results/, or None)."""
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
                'record': record,
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


def score(x):
    return f'{x:.2f}'.rstrip('0').rstrip('.')


def write_lms(gradebook, table, root=ROOT):
    """lms/grades-canvas.csv, lms/grades-moodle.csv and each Moodle step's worksheet, from table (rows()) and the
    gradebook's LMS ids; then the feedback packages. Nothing if no student has an LMS id."""
    from datetime import datetime, timezone

    from course.classroom import lms

    people = {s.id: s for s in gradebook.students if s.lms_user_id}
    if not people:
        return
    folder = Path(root) / lms.LMS_FOLDER
    folder.mkdir(exist_ok=True)
    step_names = course_steps(gradebook, root)
    total = {t['student_id']: t for t in totals(table) if t['student_id'] in people}
    maxima = {r['step']: r['max_score'] for r in table}
    with open(folder / 'grades-canvas.csv', 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['Student', 'ID', 'SIS User ID', 'SIS Login ID', 'Section', *step_names, 'Final Points'])
        w.writerow(['    Points Possible', '', '', '', '', *(score(maxima[s]) for s in step_names),
                    score(sum(maxima.values()))])
        for sid, t in sorted(total.items(), key=lambda kv: (kv[1]['last_name'].casefold(), kv[0])):
            w.writerow([f"{t['last_name']}, {t['first_name']}", people[sid].lms_user_id, '', '', '',
                        *(score(t[s]) for s in step_names), score(t['total'])])
    with open(folder / 'grades-moodle.csv', 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['Email address', 'First name', 'Last name', *step_names, 'Course total'])
        for _, t in sorted(total.items()):
            w.writerow([t['email'], t['first_name'], t['last_name'], *(score(t[s]) for s in step_names), score(t['total'])])
    modified = datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')
    for step in step_names:
        collected = lms.read_manifest(step, root)
        worksheet = folder / f'moodle-worksheet-{step}.csv'
        if not any(r['lms'] == 'moodle' for r in collected.values()):
            worksheet.unlink(missing_ok=True)
            continue
        with open(worksheet, 'w', newline='') as f:
            w = csv.writer(f)
            w.writerow(['Identifier', 'Full name', 'Email address', 'Status', 'Grade', 'Maximum Grade',
                        'Grade can be changed', 'Last modified (grade)', 'Feedback comments'])
            for r in sorted((r for r in table if r['step'] == step and r['student_id'] in people),
                            key=lambda r: r['student_id']):
                pid = collected.get(r['student_id'], {}).get('lms_id') or people[r['student_id']].lms_user_id
                w.writerow([f'Participant {pid}', f"{r['first_name']} {r['last_name']}", r['email'], r['status'],
                            score(r['score']), score(r['max_score']), 'Yes', modified,
                            f"late: {score(r['late_submission_penalty'])} points off" if r['late_submission_penalty'] else ''])
    lms.package_feedback(gradebook, root)


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
    write_lms(gradebook, table, root)
    return table


class CellCsvExport(ExportPlugin):
    """nbgrader export plugin: grades.csv (a row per student and step), grades-cells.csv (a row per graded cell) and
    grades-total.csv (a row per student, with the course total); see this module's docstring."""

    def export(self, gradebook):
        coursedir = getattr(self.parent, 'coursedir', None)
        root = Path(coursedir.root) if coursedir else Path.cwd()
        write_all(gradebook, self.to or root / 'grades.csv', root)
