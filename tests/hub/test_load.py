"""A load test, bounded in count and time, on this machine only: 30 students (Unix users) submit one step through
nbgrader's exchange (the nbgrader command, as themselves), all at once, six at a time; the instructor collects and grades
with the course's grader. Every submission is collected and graded, each as its own student's work, none lost.

How long the 30 submissions took is printed (a measurement, not a pass/fail limit: CI is a busy 2-core machine); the
count and per-command timeouts bound the test."""

import time

import pytest

from course.cells import role
from course.isolation import sandbox
from course.layout import autograded_points, steps
from support.hub.classloop import Course, Student, in_parallel, read_csv, work_for
from support.hub.hubkit import NO_SANDBOX

STEP = steps()[0]
CLASS = 30

pytestmark = pytest.mark.skipif(not sandbox.available(), reason=NO_SANDBOX)


def signed(student):
    """The step's solution, with the student's name in its first written answer: the graded notebook shows whose it is."""
    work = work_for(STEP, 'mistake' if student.endswith(('5', '0')) else 'solution')
    for nb in work.values():
        answer = next(c for c in nb.cells if role(c) == 'answer')
        answer.source += f'\n\nHanded in by {student}.'
    return work


@pytest.fixture(scope='module')
def load(tmp_path_factory, unix_users, user_python, exchange, postgres):
    course = Course(tmp_path_factory.mktemp('load') / 'course', exchange, postgres.database('load'))
    students = [Student(unix_users(f'load{i:02d}'), user_python, exchange) for i in range(1, CLASS + 1)]
    course.nbgrader('release_assignment', STEP)
    # Each student's work is put in ~/<step>/ by the student (fetching is test_exchange.py's: here, submitting is tested)
    for s in students:
        for name, nb in signed(s.user.name).items():
            s.work(STEP, name, nb)
    start = time.monotonic()
    in_parallel([lambda s=s: s.submit(STEP) for s in students], workers=6)
    seconds = time.monotonic() - start
    print(f'\n{CLASS} submissions through the exchange in {seconds:.1f} s (6 at a time)')
    course.nbgrader('collect', STEP)
    out = course.grade('--step', STEP)
    return {'course': course, 'students': [s.user.name for s in students], 'inbound': course.inbound(), 'out': out,
            'rows': read_csv(course.root / 'grades.csv', ('step', 'student_id'))}


def test_every_submission_reached_the_exchange(load):
    assert sorted(k[0] for k in load['inbound']) == sorted(load['students'])
    assert all(len(v) == 1 for v in load['inbound'].values())


def test_every_submission_was_collected_and_graded(load):
    rows = {k[1]: r for k, r in load['rows'].items() if k[0] == STEP}
    assert sorted(rows) == sorted(load['students']), 'one row per student, nobody else'
    full = sum(autograded_points(STEP).values())
    wrong = [(s, r['status'], r['autograded']) for s, r in rows.items()
             if r['status'] != 'graded' or (float(r['autograded']) == full) == s.endswith(('5', '0'))]
    assert not wrong, f'(student, status, autograded of {full}): {wrong}'


def test_each_graded_notebook_is_its_own_students_work(load):
    root = load['course'].root
    swapped = [s for s in load['students']
               if f'Handed in by {s}.' not in ''.join(p.read_text() for p in (root / 'autograded' / s / STEP).glob('*.ipynb'))]
    assert not swapped, swapped
