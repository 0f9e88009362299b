"""The hub's collect holds a submission to the course's gate (course.gate, through
course.classroom.exchange_collect.OwnerCheckedCollect.do_copy): real student accounts, after submitting, put links in
their own folder of the exchange's inbound (to the instructor's source notebook and checks, which the student cannot
read but the instructor's collect could), or keep swapping a file for a link while the instructor collects; nothing a
link points to is ever collected, and make grade's table names the link. One step, two students, no kernel: cheap."""

import subprocess

import pytest

from course import gate
from course.layout import notebooks, steps
from support.hub.classloop import Course, Student

STEP = steps()[0]
NAME = notebooks(STEP)[0]


@pytest.fixture(scope='module')
def hub(tmp_path_factory, unix_users, user_python, exchange):
    root = tmp_path_factory.mktemp('links') / 'course'
    course = Course(root, exchange, f'sqlite:///{root}/gradebook.db')
    course.nbgrader('release_assignment', STEP)
    students = {role: Student(unix_users(role), user_python, exchange) for role in ('linker', 'racer')}
    for s in students.values():
        s.fetch(STEP)
        s.run('sh', '-c', 'echo "my own notes" > "$0/notes.txt"', STEP)
        s.submit(STEP)
    return course, students


def inbound_folder(course, student):
    """The student's folder in the exchange's inbound (one submission)."""
    found = [p for p in (course.exchange.root / 'transformer-from-scratch' / 'inbound').iterdir()
             if p.name.startswith(f'{student.user.name}+{STEP}+')]
    assert len(found) == 1, found
    return found[0]


SECRETS = ('source/{step}/{name}', 'source/{step}/instructor/checks.py')


def secret_bytes(course):
    return [(course.root / s.format(step=STEP, name=NAME)).read_bytes() for s in SECRETS]


def collected(course, student):
    """{path: bytes} of every regular file collect put in submitted/<student>/<step>/."""
    folder = course.root / 'submitted' / student.user.name / STEP
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob('*') if p.is_file() and not p.is_symlink()}


def test_links_a_student_put_in_the_inbound_are_refused_by_name_and_never_followed(hub):
    course, students = hub
    s = students['linker']
    folder = inbound_folder(course, s)
    # as the student, in their own folder: the notebook becomes a link to the instructor's source notebook, the notes a
    # link to the step's checks (neither readable by the student; both by the instructor's collect)
    s.run('sh', '-c', 'chmod -R u+w "$0" && ln -sfn "$1" "$0/$2" && ln -sfn "$3" "$0/notes.txt"', folder,
          course.root / 'source' / STEP / NAME, NAME, course.root / 'source' / STEP / 'instructor' / 'checks.py')
    # and a folder of its own whose name's time is not a time: nbgrader's collect failed on it, for the whole class
    s.run('mkdir', course.exchange.root / 'transformer-from-scratch' / 'inbound' / f'{s.user.name}2+{STEP}+not-a-time+x')
    out = course.nbgrader('collect', STEP)  # (fails the test if collect fails)
    assert 'the time in its name is not a time' in out, out[-2000:]
    files = collected(course, s)
    assert list(files) == [gate.MARK], files  # only the verdict
    assert not any(secret in data for data in files.values() for secret in secret_bytes(course))
    assert gate.check(course.root / 'submitted', s.user.name, STEP) == ('refused', 'symbolic link: notes.txt')
    assert 'Refused' in out and 'symbolic link: notes.txt' in out, out[-2000:]


def test_a_file_swapped_for_a_link_while_collect_runs_is_never_followed(hub):
    """The student keeps replacing notes.txt by a link to the instructor's checks and back (each an atomic rename) while
    the instructor collects, three times over: each collected copy is the student's own notes, or the verdict that names
    the link; never the checks."""
    course, students = hub
    s = students['racer']
    folder = inbound_folder(course, s)
    target = course.root / 'source' / STEP / 'instructor' / 'checks.py'
    flip = ('chmod -R u+w "$0"; cd "$0"; while :; do echo "my own notes" > .n && mv -fT .n notes.txt; '
            'ln -sfn "$1" .l && mv -fT .l notes.txt; done')
    racer = subprocess.Popen(['runuser', '-u', s.user.name, '--', 'sh', '-c', flip, str(folder), str(target)])
    outcomes = []
    try:
        for _ in range(3):
            subprocess.run(['rm', '-rf', course.root / 'submitted' / s.user.name], check=True)
            course.nbgrader('collect', STEP)
            files = collected(course, s)
            assert not any(secret in data for data in files.values() for secret in secret_bytes(course)), list(files)
            outcomes.append(gate.check(course.root / 'submitted', s.user.name, STEP))
    finally:
        racer.kill()
        racer.wait()
    # each one the student's own notes, or refused naming a link (notes.txt, or the link before its rename) or a file
    # gone while it was read
    assert all(o is None or o.status == 'refused' and o.detail.startswith(('symbolic link: ', 'changed while read: '))
               for o in outcomes), outcomes


def test_make_grade_shows_the_refused_submission_in_its_table(hub):
    course, students = hub
    subprocess.run(['rm', '-rf', course.root / 'submitted' / students['racer'].user.name], check=True)
    out = course.grade('--step', STEP, '--no-feedback')
    row = next(line for line in out.splitlines() if line.startswith(students['linker'].user.name + ' '))
    assert 'refused (symbolic link: notes.txt)' in row, row
