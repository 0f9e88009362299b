"""Two graders at once on one PostgreSQL gradebook: the course's grader (python -m course.grader.grade, its --jobs workers)
autogrades one step while a teaching assistant enters manual grades and comments for the written answers of another
step through the formgrader's own REST API, in a real Jupyter server started from the course (what the formgrader's
page sends when a grader types a score). Nothing is lost (every score and comment the assistant entered last is in the
gradebook, every submission of the graded step has its autograded scores) and no batch aborts on a lock.

The check of lost writes is itself checked (test_the_lost_write_check_sees_a_last_writer_wins): on a copy of the
gradebook, a grader that holds a stale copy of the grades and writes all of it back at the end (last writer wins)
must be caught by it."""

import json
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from course.authoring.demo import demo_class, sampled, write_class
from course.isolation import sandbox
from course.layout import autograded_points, steps
from support.hub.classloop import Course, read_csv
from support.hub.hubkit import NO_SANDBOX

GRADED, MANUAL = steps()[0], steps()[1]  # the step the course's grader grades; the step the assistant grades by hand

pytestmark = pytest.mark.skipif(not sandbox.available(), reason=NO_SANDBOX)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def start_formgrader(course, home):
    """(base URL, token, process, log path): jupyter server with the formgrader on the course, ready."""
    port, token = free_port(), secrets.token_hex(16)
    (home / 'exchange').mkdir()  # the formgrader looks for an exchange on every request (and logs when it has none)
    (home / 'nbgrader_config.py').write_text(f'c = get_config()  # noqa\nc.Exchange.root = {str(home / "exchange")!r}\n')
    env = {**course.env, 'JUPYTER_CONFIG_DIR': str(home), 'JUPYTER_RUNTIME_DIR': str(home / 'runtime'),
           'JUPYTER_DATA_DIR': str(home / 'data')}
    log_path = home / 'server.log'
    log = open(log_path, 'w')
    server = subprocess.Popen([sys.executable, '-m', 'jupyter_server', '--no-browser', '--allow-root', '--ip=127.0.0.1',
                               f'--port={port}', f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={course.root}'],
                              cwd=course.root, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    base = f'http://127.0.0.1:{port}'
    deadline = time.monotonic() + 300
    while True:  # until it answers (a loaded machine can take a minute to start it)
        try:
            api(base, token, 'GET', '/formgrader/api/status')
            return base, token, server, log_path
        except urllib.error.HTTPError as e:
            raise AssertionError(f'the formgrader answered {e.code}: {log_path.read_text()[-3000:]}') from e
        except OSError:  # not listening yet
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.3)


def api(base, token, method, path, body=None):
    request = urllib.request.Request(base + path, method=method, headers={'Authorization': f'token {token}'},
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def to_grade(base, token):
    """[(grade id, max score)] and [comment id] of every written answer of MANUAL's submissions, as the formgrader's
    pages list them."""
    answers, comments = [], []
    for sub in api(base, token, 'GET', f'/formgrader/api/submissions/{MANUAL}'):
        for nb in api(base, token, 'GET', f'/formgrader/api/student_notebook_submissions/{sub["student"]}/{MANUAL}'):
            grades = api(base, token, 'GET', f'/formgrader/api/grades?submission_id={nb["id"]}')
            answers += [(g['id'], g['max_score']) for g in grades if g['auto_score'] is None]
            comments += [c['id'] for c in api(base, token, 'GET', f'/formgrader/api/comments?submission_id={nb["id"]}')]
    return answers, comments


def lost_writes(db_url, entered, comments):
    """The manual scores and comments entered that the gradebook does not hold: [(grade or comment id, entered, held)]."""
    from nbgrader.api import Comment, Grade, Gradebook

    with Gradebook(db_url) as gb:
        held = dict(gb.db.query(Grade.id, Grade.manual_score).filter(Grade.id.in_(list(entered))))
        said = dict(gb.db.query(Comment.id, Comment.manual_comment).filter(Comment.id.in_(list(comments))))
    return ([(g, v, held.get(g)) for g, v in entered.items() if held.get(g) != v]
            + [(c, v, said.get(c)) for c, v in comments.items() if said.get(c) != v])


@pytest.fixture(scope='module')
def race(tmp_path_factory, postgres):
    base = tmp_path_factory.mktemp('two-graders')
    db_url = postgres.database('two_graders')
    course = Course(base / 'course', None, db_url)  # no exchange: the class is put in submitted/ directly
    # GRADED: its demo class, a sample of its bank; MANUAL: two students, whose written answers the assistant grades
    cls = demo_class([GRADED], sample=True)
    for student, work in demo_class([MANUAL]).items():
        if student in ('perfect', 'blank'):
            cls[student].update(work)
    write_class(cls, course.root / 'submitted')
    course.grade('--step', MANUAL)  # the assistant's step, graded before: its answers await a human
    before = snapshot(db_url)
    home = base / 'jupyter'
    home.mkdir()
    url, token, server, log = start_formgrader(course, home)
    try:
        answers, comment_ids = to_grade(url, token)
        grading = subprocess.Popen([sys.executable, '-m', 'course.grader.grade', '--cell-timeout=60', '--timeout=600',
                                    '--step', GRADED], cwd=course.root, env=course.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        entered, comments, during, rounds = {}, {}, 0, 0
        while grading.poll() is None or not rounds:  # round after round while the course's grader runs, one at least
            rounds += 1
            for i, (gid, most) in enumerate(answers):
                score = float((rounds + i) % (int(most) + 1))
                entered[gid] = api(url, token, 'PUT', f'/formgrader/api/grade/{gid}', {'manual_score': score})['manual_score']
                during += grading.poll() is None
            for i, cid in enumerate(comment_ids):
                text = f'round {rounds}, answer {i}: see the model answer'
                comments[cid] = api(url, token, 'PUT', f'/formgrader/api/comment/{cid}', {'manual_comment': text})[
                    'manual_comment']
        out = grading.communicate()[0]
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {'course': course, 'db_url': db_url, 'entered': entered, 'comments': comments, 'during': during,
            'rounds': rounds, 'out': out, 'code': grading.returncode, 'answers': answers, 'before': before,
            'postgres': postgres}


def snapshot(db_url):
    """{grade id: manual score} of every grade: what a grader holding a copy of the gradebook has."""
    from nbgrader.api import Grade, Gradebook

    with Gradebook(db_url) as gb:
        return dict(gb.db.query(Grade.id, Grade.manual_score))


def test_the_assistant_wrote_while_the_course_grader_graded(race):
    assert race['answers'], f'{MANUAL} has no written answers to grade'
    assert race['during'] >= len(race['answers']), (
        f"only {race['during']} of the assistant's writes overlapped the grading: the race did not happen")


def test_no_batch_aborts_on_a_lock(race):
    """The course's grader finished, and graded every submission of its step (none 'not graded': a lock error)."""
    assert race['code'] == 0, race['out'][-5000:]
    rows = read_csv(race['course'].root / 'grades.csv', ('step', 'student_id'))
    submitted = {p.name for p in (race['course'].root / 'submitted').iterdir() if (p / GRADED).is_dir()}
    statuses = {k[1]: r['status'] for k, r in rows.items() if k[0] == GRADED and k[1] in submitted}
    assert sorted(statuses) == sorted(submitted), 'a row for every submission of the graded step'
    assert statuses and all(s in ('graded', 'blank') for s in statuses.values()), statuses


def test_no_manual_grade_or_comment_is_lost(race):
    lost = lost_writes(race['db_url'], race['entered'], race['comments'])
    assert not lost, f'{len(lost)} writes lost: {lost[:10]}'


def test_no_autograded_score_is_lost(race):
    """Every submission of the graded step holds the scores its bank says: full marks for the perfect submission and
    the alternatives, points lost in every cell each mistake must lose them in."""
    cells = read_csv(race['course'].root / 'grades-cells.csv', ('student_id', 'step', 'grade_id'))
    scores = {}
    for (student, step, gid), r in cells.items():
        if step == GRADED:
            scores.setdefault(student, {})[gid] = float(r['score'])
    points = autograded_points(GRADED)
    wrong = [('perfect', g) for g in points if scores['perfect'][g] != points[g]]
    for v in sampled(GRADED):
        got = scores[v.student]
        wrong += [(v.student, g) for g in (v.caught_by or points) if (got[g] >= points[g]) == bool(v.caught_by)]
    assert not wrong, wrong


def test_the_lost_write_check_sees_a_last_writer_wins(race):
    """A positive control: in a copy of the gradebook, a grader that read the grades before the race and writes its
    copy back after (last writer wins) loses the assistant's scores, and lost_writes() reports every one."""
    postgres = race['postgres']
    postgres.psql('postgres', 'create database two_graders_control template two_graders owner gradebook')
    control = postgres.url('two_graders_control')
    from nbgrader.api import Grade, Gradebook

    with Gradebook(control) as gb:
        for grade in gb.db.query(Grade).filter(Grade.id.in_(list(race['entered']))):
            grade.manual_score = race['before'][grade.id]
        gb.db.commit()
    lost = lost_writes(control, race['entered'], {})
    assert len(lost) == len(race['entered']) > 0, lost
