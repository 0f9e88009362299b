"""The grade table that `make grade` prints in the terminal after grading (course.grader.grade): one block per step (a row
per student: status, each test cell's points, the autograded total), then the course total per student. The same rows
go to grades.csv (course.reports.export); the class report's page is course.reports.classreport.
"""

from course.gate import printable
from course.reports.export import totals


def step_block(step, table, points):
    """The lines of one step's block; table: course.reports.export.rows() of that step. Every name and status is
    printed by course.gate.printable(): one line each, none able to move or restyle the terminal."""
    if not table:
        return [f'{step}: nobody in the gradebook']
    table = [{**r, 'student_id': printable(r['student_id']), 'status': printable(r['status'])} for r in table]
    width = max(len('student'), *(len(r['student_id']) for r in table))
    swidth = max(len('status'), *(len(r['status']) for r in table))
    lines = [f'{step}: points per autograded test cell 1..{len(points)} (legend below); '
             '"to grade": written answers await a human',
             f"{'student':<{width}}  {'status':<{swidth}}  " + ' '.join(f'{i:>2}' for i in range(1, len(points) + 1)) + '   auto']
    for r in table:
        if r['status'] == 'not submitted':  # missing, not a submission that scored zero
            scores, auto = ' '.join(' -' for _ in r['cells']), 'missing'
        else:
            scores = ' '.join(f'{p:>2g}' for p in r['cells'].values())
            auto = f"{r['autograded']:>3g}/{r['autograded_max']:g}"
        late = f"  late: -{r['late_submission_penalty']:g}" if r.get('late_submission_penalty') else ''
        lines.append(f"{r['student_id']:<{width}}  {r['status']:<{swidth}}  {scores}  {auto}"
                     f"{'  to grade' if r['needs_manual_grading'] else ''}{late}")
    lines.append('legend: ' + ', '.join(f'{i} {gid} ({p:g})' for i, (gid, p) in enumerate(points.items(), 1)))
    return lines


def total_block(table):
    """The course total per student: each step's score (late penalties applied; 'missing' where the student submitted
    nothing, which counts 0 in the sum) and the sum."""
    students = [{**t, 'student_id': printable(t['student_id'])} for t in totals(table)]
    table = [{**r, 'student_id': printable(r['student_id'])} for r in table]
    stepnames = list(dict.fromkeys(r['step'] for r in table))
    missing = {(r['student_id'], r['step']) for r in table if r['status'] == 'not submitted'}
    missing |= {(t['student_id'], s) for t in students for s in stepnames if s not in t}  # a row of one step only
    width = max(len('student'), *(len(t['student_id']) for t in students))
    lines = ['course total (score per step after late penalties; written answers count once graded by hand)',
             f"{'student':<{width}}  " + '  '.join(f'{s:>8}' for s in stepnames) + '     total']
    for t in students:
        lines.append(f"{t['student_id']:<{width}}  "
                     + '  '.join(f"{'missing' if (t['student_id'], s) in missing else format(t[s], 'g'):>8}" for s in stepnames)
                     + f"  {t['total']:>4g}/{t['total_max']:g}")
    return lines
