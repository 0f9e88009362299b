"""The whole loop through nbgrader's exchange, for every step of source/, with real Unix users and the gradebook on
PostgreSQL: the instructor releases (nbgrader release_assignment); five students fetch, work and submit as themselves
(one on time with the solution, one on time with a mistake from the step's bank, one twice: a mistake then the solution,
one after the due date, one never); the instructor collects, grades with the course's own grader (sandboxed, warm, with
its feedback pages and class report) and releases the feedback; the students fetch it.

The due date is nbgrader's, in the gradebook, set between the on-time submissions and the late one (no waiting for a
deadline in real time); lateness is judged from the timestamps nbgrader's submit wrote. The course's policy
(nbgrader_config.py): a late submission scores zero (nbgrader's LateSubmissionPlugin), so that a late penalty shows."""

import datetime
import os
import re

import pytest

from course.isolation import sandbox
from course.layout import autograded_points, notebooks, steps
from support.hub.classloop import Course, Student, in_parallel, mistake_cells, theirs, work_for
from support.hub.hubkit import NO_SANDBOX

# Every step of source/ (CI); HUB_STEPS="step1 step4" runs the loop on those only, for a quicker run by hand.
STEPS = os.environ.get('HUB_STEPS', '').split() or steps()
ROLES = ('ontime', 'mistake', 'twice', 'late', 'never')

pytestmark = pytest.mark.skipif(not sandbox.available(), reason=NO_SANDBOX)


@pytest.fixture(scope='module')
def loop(tmp_path_factory, unix_users, user_python, exchange, postgres):
    course = Course(tmp_path_factory.mktemp('exchange') / 'course', exchange, postgres.database('exchange_loop'))
    students = {role: Student(unix_users(role), user_python, exchange) for role in ROLES}
    ids = {role: s.user.name for role, s in students.items()}
    # the roster, as an instructor enters it: every student is in the gradebook, whether they submit or not
    roster = course.root / 'roster.csv'
    roster.write_text('id,last_name,first_name\n' + ''.join(f'{ids[role]},{role},Student\n' for role in ROLES))
    course.nbgrader('db', 'student', 'import', roster)
    for step in STEPS:  # one at a time, as nbgrader expects: two at once race to make the exchange's folders
        course.nbgrader('release_assignment', step)

    def on_time(role):
        s = students[role]
        if role != 'never':  # the student who never submits never fetches either
            s.fetch(*STEPS)
        for step in STEPS:
            for kind in {'ontime': ['solution'], 'mistake': ['mistake'], 'twice': ['mistake', 'solution'],
                         'late': [], 'never': []}[role]:
                for name, nb in work_for(step, kind).items():
                    s.work(step, name, nb)
                s.submit(step)

    in_parallel([lambda role=role: on_time(role) for role in ROLES])
    # the due date: after every on-time submission, before the late one
    due = datetime.datetime.now(datetime.timezone.utc)
    dates = course.root / 'duedates.csv'
    dates.write_text('name,duedate\n' + ''.join(f'{step},{due.isoformat()}\n' for step in STEPS))
    course.nbgrader('db', 'assignment', 'import', dates)

    def late(step):
        for name, nb in work_for(step, 'solution').items():
            students['late'].work(step, name, nb)
        students['late'].submit(step)

    for step in STEPS:  # one student: one command at a time, as a person (two submits at once race on its cache folder)
        late(step)
    for step in STEPS:
        course.nbgrader('collect', step)
    graded = course.grade()
    for step in STEPS:  # (two release_feedback at once: one fails making the exchange's feedback folder)
        course.nbgrader('release_feedback', step)
    in_parallel([lambda s=students[role]: s.fetch_feedback(*STEPS) for role in ('ontime', 'mistake', 'twice', 'late')])
    return {'course': course, 'students': students, 'ids': ids, 'due': due, 'out': graded,
            'inbound': course.inbound(), 'ours': read_ours(course), 'theirs': theirs(course)}


def read_ours(course):
    from support.hub.classloop import read_csv

    return read_csv(course.root / 'grades.csv', ('step', 'student_id'))


def test_the_course_grader_graded_the_exchange_class_in_warm_sandboxed_kernels(loop):
    assert 'grading with warm kernels' in loop['out'], loop['out'][-3000:]
    assert (loop['course'].root / 'reports' / 'index.html').is_file(), 'the class report'


def test_collect_took_each_students_latest_submission(loop):
    """Every student who submitted is in submitted/ with their last submission's timestamp; the resubmission replaced
    the first; the student who never submitted is not there."""
    root, ids = loop['course'].root, loop['ids']
    wrong = []
    for (student, step), stamps in loop['inbound'].items():
        collected = (root / 'submitted' / student / step / 'timestamp.txt').read_text().strip()
        if collected.replace(' ', '') != stamps[-1].replace(' ', ''):
            wrong.append((student, step, collected, stamps))
    assert not wrong, wrong
    assert all(len(loop['inbound'][(ids['twice'], step)]) == 2 for step in STEPS), 'the twice student submitted twice'
    assert not (root / 'submitted' / ids['never']).exists(), 'the student who never submitted is not in submitted/'


@pytest.mark.parametrize('step', STEPS)
def test_grades_late_penalties_and_statuses(loop, step):
    rows = {role: loop['ours'][(step, loop['ids'][role])] for role in ROLES}
    points = autograded_points(step)
    full = sum(points.values())
    for role in ('ontime', 'twice'):  # the twice student's second submission, the solution, is what was graded
        r = rows[role]
        assert (r['status'], float(r['autograded']), float(r['late_submission_penalty'])) == ('graded', full, 0), (role, r)
    r = rows['mistake']
    cells = loop['course'].root / 'grades-cells.csv'
    from support.hub.classloop import read_csv

    scores = {k[2]: float(v['score']) for k, v in read_csv(cells, ('student_id', 'step', 'grade_id')).items()
              if k[:2] == (loop['ids']['mistake'], step)}
    lost = [g for g in mistake_cells(step) if scores[g] >= points[g]]
    assert r['status'] == 'graded' and not lost, f'the mistake should lose points in {lost}: {scores}'
    r = rows['late']  # graded in full, then zeroed by the class's late policy
    assert r['status'] == 'graded' and float(r['autograded']) == full, r
    assert float(r['late_submission_penalty']) == float(r['raw_score']) > 0 and float(r['score']) == 0, r
    assert r['timestamp'] > r['duedate'], r
    r = rows['never']
    assert (r['status'], r['timestamp']) == ('not submitted', ''), r
    on_time = [rows[role] for role in ('ontime', 'mistake', 'twice')]
    assert all(x['timestamp'] <= x['duedate'] for x in on_time), on_time


def test_scores_are_those_of_nbgraders_own_export(loop):
    """raw score, late penalty, score and timestamp of every student and step, ours (grades.csv) against nbgrader's
    CsvExportPlugin on the same gradebook."""
    ours, theirs = loop['ours'], loop['theirs']
    # (course.grader.grade prepares every step of source/, so the gradebook has them all, whichever STEPS the class submitted)
    assert set(ours) == set(theirs) and {k for k in ours if k[0] in STEPS} == {(step, i) for step in STEPS
                                                                             for i in loop['ids'].values()}, sorted(ours)
    differ = [(k, c, ours[k][c], theirs[k][c]) for k in theirs for c in ('raw_score', 'late_submission_penalty', 'score')
              if float(ours[k][c] or 0) != float(theirs[k][c] or 0)]
    differ += [(k, 'timestamp', ours[k]['timestamp'], theirs[k]['timestamp']) for k in theirs
               if ours[k]['timestamp'][:19] != (theirs[k]['timestamp'] or '')[:19]]
    assert not differ, differ


def test_a_missing_submission_shows_as_missing_not_as_zero(loop):
    """The student who never submitted: 'missing' in each step's grade table and in the course total, where the late
    student, who scored zero, shows 0."""
    never, late = loop['ids']['never'], loop['ids']['late']
    lines = loop['out'].splitlines()
    tables = {who: [line.split() for line in lines if line.startswith(who + ' ') and ' graded ' in line
                    or line.startswith(who + ' ') and ' not submitted ' in line] for who in (never, late)}
    assert len(tables[never]) == len(tables[late]) == len(steps()), tables  # a row in each step's table
    assert all(row[-1] == 'missing' and row[1:3] == ['not', 'submitted'] for row in tables[never]), tables[never]
    at = next(i for i, line in enumerate(lines) if line.startswith('student ') and line.rstrip().endswith('total'))
    header = lines[at].split()  # the course total: student, a column per step, total
    totals = {line.split()[0]: dict(zip(header[1:], line.split()[1:], strict=True)) for line in lines[at + 1:]
              if line.split() and line.split()[0] in (never, late)}
    assert all(totals[never][step] == 'missing' for step in STEPS), totals
    assert all(totals[late][step] == '0' for step in STEPS), totals


@pytest.mark.parametrize('role', ('ontime', 'mistake', 'twice', 'late'))
def test_students_fetch_the_feedback_of_their_graded_submission(loop, role):
    """Each student who submitted fetched one feedback page per notebook of each step, for the submission that was
    graded (the resubmission's, not the first's), showing the score the gradebook holds."""
    s, student = loop['students'][role], loop['ids'][role]
    for step in STEPS:
        fetched = s.feedback(step)
        last = loop['inbound'][(student, step)][-1]
        assert list(fetched) == [last], f'{student} {step}: feedback for {list(fetched)}, graded submission {last}'
        pages = fetched[last]
        assert sorted(pages) == [n.replace('.ipynb', '.html') for n in notebooks(step)], pages.keys()
        row = loop['ours'][(step, student)]
        # the page's heading: the score after the late penalty, as grades.csv's score, out of the step's points
        shown = re.findall(r'Score: ([\d.]+) / ([\d.]+)', ' '.join(pages.values()))[:1]
        assert shown and tuple(map(float, shown[0])) == (float(row['score']), float(row['max_score'])), (student, step,
                                                                                                       shown, row)


def test_the_student_who_never_submitted_fetches_no_feedback(loop):
    s, step = loop['students']['never'], STEPS[0]
    done = s.run('nbgrader', 'fetch_feedback', step, check=False)
    assert s.feedback(step) == {}, done.stdout + done.stderr
