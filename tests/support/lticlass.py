"""An LTI class's gradebook, for the passback tests (tests/test_lti.py, tests/hub/test_lti_launch.py): a graded class
built with nbgrader's own ORM (without running the grader), each student enrolled in the stand-in platform
(tests/support/ltiplatform.py), and the course's [lti] table naming that platform."""

import json
from datetime import datetime, timedelta

from nbgrader.api import Gradebook

from course.classroom import lms_lti13
from course.classroom.lms_lti13 import student_id
from course.reports import passback

DUE = datetime(2027, 2, 8, 8, 0)
STEP = 'stepA'  # the class's step: its own cells (below), none of source/'s, whose line item passback makes
FAST = {'backoff': 0.01}  # the retries' waits, short on loopback


def toml_table(settings):
    return '\n[lti]\n' + ''.join(f'{k} = {json.dumps(v)}\n' for k, v in settings.items())


def gradebook(root):
    from course import runner

    c = runner.config(root=root)
    return Gradebook(c.CourseDirectory.db_url, c.CourseDirectory.course_id)


def add_class(root, lms, students, steps=(STEP,), when=DUE - timedelta(hours=1)):
    """steps, each one notebook with a test cell (10 points) and a written answer (5), and students (user_id: (given,
    family, auto score, manual score or None: not graded yet, hours late or 0, submitted)), enrolled in the stand-in.
    The submissions as nbgrader's ORM holds them after grading, added in one transaction."""
    from nbgrader.api import Grade, SubmittedAssignment, SubmittedNotebook

    with gradebook(root) as gb:
        cells = {}
        for step in steps:
            gb.update_or_create_assignment(step, duedate=DUE)
            notebook = gb.add_notebook(f'{step}_nb', step)
            cells[step] = (notebook, gb.add_grade_cell('test_it', f'{step}_nb', step, max_score=10, cell_type='code'),
                           gb.add_grade_cell('answer', f'{step}_nb', step, max_score=5, cell_type='markdown'))
        for user, (given, family, auto, manual, late, submitted) in students.items():
            lms.enrol(user, given, family, email=f'{given.lower()}@uni.example' if given != 'Dan' else None)
            student = gb.update_or_create_student(student_id(lms.issuer, user), first_name=given, last_name=family,
                                                  lms_user_id=user)
            for step in steps if submitted else ():
                notebook, test, answer = cells[step]
                sub = SubmittedAssignment(assignment=gb.find_assignment(step), student=student,
                                          timestamp=when + timedelta(hours=late))
                nb = SubmittedNotebook(assignment=sub, notebook=notebook,
                                       late_submission_penalty=auto + (manual or 0) if late else None)  # late: 0
                Grade(notebook=nb, cell=test, auto_score=auto, needs_manual_grade=False)
                Grade(notebook=nb, cell=answer, manual_score=manual, needs_manual_grade=manual is None)
                gb.db.add(sub)
        gb.db.commit()


CLASS = {  # user_id: given, family, autograded, written answer (None: awaits a grader), hours late, submitted
    'u-alice': ('Alice', 'Ashby', 10.0, 4.0, 0, True),
    'u-bob': ('Bob', 'Brown', 6.0, None, 0, True),
    'u-carol': ('Carol', 'Chen', 10.0, 5.0, 3, True),
    'u-dan': ('Dan', 'Diaz', 0.0, None, 0, False),
}


def run(root, **kw):
    return passback.run(root, **{**FAST, **kw})


def ledger(root):
    with gradebook(root) as gb:
        return {(r['step'], r['student_id']): r for r in lms_lti13.read(gb, lms_lti13.tables(gb)[1])}
