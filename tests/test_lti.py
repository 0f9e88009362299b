"""An LTI class's grades and roster back to its LMS by LTI Advantage (course.classroom.lms_lti13, course.reports.passback;
docs/lti.md), against the stand-in platform of tests/support/ltiplatform.py on loopback: everything on the course's side is the
real thing (pylti1p3, nbgrader's gradebook, the passback command's code).

The gradebook is built with nbgrader's own API (a graded class, without running the grader): each step one notebook with
an autograded test cell and a written answer; scores, late penalties and the written answers' grading set as a grader
would leave them. The launch, on the real hub, is tests/hub/test_lti_launch.py's.
"""

import shutil
import time

import pytest
from nbgrader.api import Gradebook

from course.classroom import lms_lti13
from course.classroom.lms_lti13 import student_id
from course.layout import copy_course
from course.reports import passback
from support.lticlass import CLASS, STEP, add_class, gradebook, ledger, run, toml_table
from support.ltiplatform import StandIn


@pytest.fixture(scope='module')
def empty_gradebook(tmp_path_factory):
    """An empty gradebook made once (nbgrader makes its tables and stamps its schema: seconds), copied by each test."""
    path = tmp_path_factory.mktemp('template') / 'gradebook.db'
    Gradebook(f'sqlite:///{path}').close()
    return path


@pytest.fixture
def course(tmp_path, empty_gradebook):
    root = copy_course(tmp_path / 'course')
    shutil.copy(empty_gradebook, root / 'gradebook.db')
    with StandIn() as lms:
        with open(root / 'course.toml', 'a') as f:  # before anything reads it (course.layout.settings keeps what it read)
            f.write(toml_table(lms.settings()))
        lms.tool_jwk = lms_lti13.new_key(root)  # as the LMS registers the tool: its public key
        yield root, lms


def test_each_submitted_step_posts_its_score_progress_and_time_to_its_line_item(course):
    root, lms = course
    add_class(root, lms, CLASS)
    lines, failed = run(root)
    assert failed == 0, lines
    [item] = lms.lineitems.values()
    assert (item['resourceId'], item['scoreMaximum']) == (STEP, 15.0), item
    got = {user: lms.scores[(item['id'], user)] for user in CLASS if (item['id'], user) in lms.scores}
    assert sorted(got) == ['u-alice', 'u-bob', 'u-carol'], 'Dan submitted nothing: nothing is posted (the LMS shows missing)'
    assert (got['u-alice']['scoreGiven'], got['u-alice']['gradingProgress']) == (14.0, 'FullyGraded'), got['u-alice']
    assert (got['u-bob']['scoreGiven'], got['u-bob']['gradingProgress']) == (6.0, 'PendingManual'), got['u-bob']
    assert got['u-carol']['scoreGiven'] == 0.0, 'three hours late: nbgrader\'s penalty (zero) took every point'
    assert {g['activityProgress'] for g in got.values()} == {'Submitted'}
    assert got['u-carol']['timestamp'] == '2027-02-08T10:00:00.000+00:00', 'the graded submission\'s own time, in UTC'
    assert all(got[u]['scoreMaximum'] == 15.0 for u in got)


def test_a_second_run_posts_only_what_changed(course):
    root, lms = course
    add_class(root, lms, CLASS)
    run(root)
    before = len(lms.accepted)
    lines, _ = run(root)
    assert len(lms.accepted) == before and lines[-1].startswith('passback: 0 posted, 3 unchanged'), lines
    with gradebook(root) as gb:  # a grader grades Bob's written answer
        bob = student_id(lms.issuer, 'u-bob')
        answer = gb.find_grade('answer', f'{STEP}_nb', STEP, bob)
        answer.manual_score, answer.needs_manual_grade = 3.0, False
        gb.db.commit()
    lines, _ = run(root)
    assert [a[1] for a in lms.accepted[before:]] == ['u-bob'], lines
    assert lms.accepted[-1][2]['gradingProgress'] == 'FullyGraded' and lms.accepted[-1][2]['scoreGiven'] == 9.0
    assert ledger(root)[(STEP, bob)]['score_given'] == 9.0


def test_faults_are_retried_and_each_grade_is_posted_once(course):
    """The platform answers 500 then 200; the access token expires in the middle of the run; a student left the course.
    Each remaining grade is accepted exactly once and recorded once; the one who left is reported, not posted."""
    root, lms = course
    add_class(root, lms, {**CLASS, 'u-erin': ('Erin', 'Eze', 9.0, 5.0, 0, True), 'u-finn': ('Finn', 'Fox', 8.0, 2.0, 0, True)})
    lms.remove('u-finn')
    lms.fail('scores', 500)
    lms.expire_tokens_after(2)
    lines, failed = run(root)
    assert failed == 0, lines
    counts = {}
    for _, user, _ in lms.accepted:
        counts[user] = counts.get(user, 0) + 1
    assert counts == {'u-alice': 1, 'u-bob': 1, 'u-carol': 1, 'u-erin': 1}, (counts, lines)
    statuses = [s for m, p, s in lms.requests if p.endswith('/scores')]
    assert 500 in statuses and 401 in statuses, statuses
    tokens = sum(1 for m, p, s in lms.requests if p == '/token' and s == 200)
    assert tokens == 3, f'{tokens} access tokens: one for the roster, one for the scores, one after it expired'
    finn = student_id(lms.issuer, 'u-finn')
    assert any(line.startswith(f'not posted: {finn} {STEP}: dropped') for line in lines), lines
    assert sorted(k[1] for k in ledger(root)) == sorted(student_id(lms.issuer, u) for u in counts)


def test_a_failure_that_outlasts_the_retries_is_reported_not_recorded_and_posted_next_run(course):
    root, lms = course
    add_class(root, lms, CLASS)
    lms.fail('scores', 503, 503, 503, 503)  # four tries for the first score: all refused
    lines, failed = run(root)
    assert failed == 1 and any('503' in line and '4 tries' in line for line in lines), lines
    assert len(ledger(root)) == 2
    lines, failed = run(root)
    assert failed == 0 and len(ledger(root)) == 3 and lines[-1].startswith('passback: 1 posted, 2 unchanged'), lines
    assert len(lms.accepted) == 3, 'each grade accepted once'


def test_the_roster_comes_from_the_lms_and_a_student_who_left_is_marked_not_deleted(course):
    root, lms = course
    lms.page_size = 2  # the memberships in pages, as an LMS serves a large course
    add_class(root, lms, CLASS)
    lms.enrol('u-gus', 'Gus', 'Gray', email='gus@uni.example')
    lms.enrol('u-teacher', 'Tess', 'Teacher', role='Instructor')
    lines, _ = run(root, scores=False)
    with gradebook(root) as gb:
        students = {s.id: s for s in gb.students}
    gus = student_id(lms.issuer, 'u-gus')
    assert (students[gus].first_name, students[gus].last_name, students[gus].email, students[gus].lms_user_id) == (
        'Gus', 'Gray', 'gus@uni.example', 'u-gus')
    assert students[student_id(lms.issuer, 'u-dan')].email is None, 'Dan\'s LMS shares no email: none is made up'
    assert student_id(lms.issuer, 'u-teacher') not in students, 'an Instructor is no student'
    assert sum(1 for m, p, s in lms.requests if '/memberships' in p) == 3, 'five members, two a page: three pages'
    lms.remove('u-alice')
    lines, _ = run(root, scores=False)
    alice = student_id(lms.issuer, 'u-alice')
    assert any(line.startswith(f'roster: {alice} dropped') for line in lines), lines
    with gradebook(root) as gb:
        assert gb.find_submission(STEP, alice).score == 14.0, 'her grades stay in the gradebook'
        assert lms_lti13.dropped(gb) == {alice}


def test_the_course_id_is_the_hubs_account_name_from_sub():
    """The hub names the account of a launch as lms_lti13 names the student (hub/lti_config.py's username())."""
    import importlib.util

    from course.layout import ROOT

    spec = importlib.util.spec_from_file_location('lti_config', ROOT / 'hub' / 'lti_config.py')
    hub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hub)
    for sub in ('u-alice', '7f3c5a60-8c1e-4b7e-9f1d-3b1a9c2e4d5f', '1234'):
        assert hub.username('https://canvas.instructure.com', sub) == student_id('https://canvas.instructure.com', sub)
    assert len(student_id('https://x', 'y')) < 32 and student_id('https://x', 'y') == student_id('https://x', 'y')


def test_600_scores_are_posted_on_loopback(course):
    """100 students, six steps: 600 scores to six line items, bounded (loopback; the retries' waits short). The time is
    printed, not judged."""
    root, lms = course
    steps = tuple(f'step{i}' for i in range(1, 7))
    add_class(root, lms, {f'u-{i:03d}': (f'S{i:03d}', 'Load', float(i % 11), 5.0, 0, True) for i in range(100)}, steps)
    start = time.monotonic()
    lines, failed = run(root, roster=False)
    seconds = time.monotonic() - start
    print(f'\n600 scores posted in {seconds:.1f} s ({600 / seconds:.0f} a second), {len(lms.requests)} requests')
    assert failed == 0 and len(lms.accepted) == 600 and len(lms.lineitems) == 6, lines[-3:]
    assert len(ledger(root)) == 600
    assert run(root, roster=False)[0][-1] == 'passback: 0 posted, 600 unchanged since the last run, 0 failed'


def test_without_lti_settings_passback_says_what_to_set(tmp_path):
    root = copy_course(tmp_path / 'course')
    with pytest.raises(SystemExit) as e:
        passback.main([], root)
    assert 'course.toml: [lti] has no issuer' in str(e.value) and 'docs/lti.md' in str(e.value)
