"""make backup, make restore, make clean-class (course.classroom.backup) on a SQLite gradebook, and make clean, which
never touches a class: a class's state survives everything but clean-class, and clean-class backs it up first. The same
round trip on PostgreSQL (pg_dump, pg_restore): tests/hub/test_backup_postgres.py."""

import hashlib
import shutil
import subprocess
import tarfile
from datetime import datetime

import pytest

from course import layout
from course.classroom import backup, gradebook
from course.layout import ROOT, notebooks, steps

STEP = steps()[0]  # the class's step: a step of the course (any one)
STEM = notebooks(STEP)[0].removesuffix('.ipynb')


def make_course(root):
    """A course at root (course.toml, nbgrader_config.py, its steps) and a class in it: a gradebook with two students'
    grades of STEP, their submissions, feedback, records, a report, the grade tables, an LMS folder."""
    for name in ('course.toml', 'nbgrader_config.py'):
        shutil.copy(ROOT / name, root / name)
    (root / 'source').symlink_to(ROOT / 'source')
    (root / 'autograded').mkdir()
    shutil.copy(ROOT / 'autograded' / 'README.md', root / 'autograded' / 'README.md')
    fill_gradebook(gradebook.configured(root), ['ada', 'bo'])
    for student in ('ada', 'bo'):
        for folder, name in (('submitted', f'{STEM}.ipynb'), ('autograded', f'{STEM}.ipynb'),
                             ('feedback', f'{STEM}.html')):
            path = layout.class_path(folder, student, STEP, root) / name
            path.parent.mkdir(parents=True)
            path.write_text(f'{folder} of {student}\n')
        layout.result_path(STEP, student, root).parent.mkdir(parents=True, exist_ok=True)
        layout.result_path(STEP, student, root).write_text('{"status": "graded"}\n')
        layout.log_path(STEP, student, root).parent.mkdir(parents=True, exist_ok=True)
        layout.log_path(STEP, student, root).write_text('log\n')
    layout.repairs_path(STEP, 'bo', root).parent.mkdir(parents=True)
    layout.repairs_path(STEP, 'bo', root).write_text('renamed the notebook\n')
    layout.report_path(root).parent.mkdir()
    layout.report_path(root).write_text('<html></html>\n')
    (layout.lms_path(root) / 'replaced').mkdir(parents=True)
    (layout.lms_path(root) / 'collect-1.txt').write_text('collected\n')
    (root / 'grades.csv').write_text(f'student_id,step,score\nada,{STEP},9\nbo,{STEP},4\n')
    (root / 'roster.csv').write_text('id,name\n')  # the instructor's input, not the class's state
    return root


@pytest.fixture(scope='module')
def template(tmp_path_factory):
    return make_course(tmp_path_factory.mktemp('class'))


@pytest.fixture
def course(template, tmp_path):
    """A copy of the template course and its class (making a gradebook costs seconds; copying it, nothing)."""
    return shutil.copytree(template, tmp_path / 'course', symlinks=True)


def fill_gradebook(db_url, students):
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(STEP, duedate=datetime(2027, 1, 18, 8))
        for student in students:
            gb.update_or_create_student(student, first_name=student.title(), email=f'{student}@example.edu')


def students(db_url):
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return sorted(s.id for s in gb.students), [str(a.duedate) for a in gb.assignments]


def files(root):
    """{path: sha256} of every file of the class's state, and the gradebook's rows."""
    out = {}
    for top in layout.class_state(root):
        for p in [top, *top.rglob('*')] if top.is_dir() else [top]:
            if p.is_file():
                out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_backup_then_clean_class_then_restore_gives_the_class_back(course):
    root = course
    db_url = gradebook.configured(root)
    before, rows = files(root), students(db_url)
    assert rows == (['ada', 'bo'], ['2027-01-18 08:00:00']) and len(before) == 14, (rows, before)
    first, lines = backup.backup(root)
    assert first.parent == root / layout.BACKUPS and 'online backup' in lines[0], lines
    fill_gradebook(db_url, ['cy'])  # graded on after the backup: clean-class backs that up too
    second, _ = backup.remove_class(root)
    assert second != first and second.parent == first.parent
    assert layout.class_state(root) == [] and not gradebook.sqlite_file(db_url).exists() and backup.has_class(root) is None
    assert (root / 'autograded' / 'README.md').is_file() and (root / 'roster.csv').is_file() and (root / 'source').is_dir()
    backup.restore(first, root)
    assert files(root) == before and students(db_url) == rows
    with pytest.raises(backup.BackupError, match='holds a class .*make clean-class first'):
        backup.restore(second, root)
    backup.remove_class(root)
    backup.restore(second, root)
    assert students(db_url) == (['ada', 'bo', 'cy'], ['2027-01-18 08:00:00'])


def test_a_damaged_backup_restores_nothing(course, tmp_path):
    root = course
    dest, _ = backup.remove_class(root)
    with open(dest / backup.FOLDERS, 'ab') as f:
        f.write(b'\0')
    with pytest.raises(backup.BackupError, match=r'class.tar.gz: missing, or not the file the backup wrote'):
        backup.restore(dest, root)
    assert layout.class_state(root) == [] and not gradebook.sqlite_file(gradebook.configured(root)).exists()
    with pytest.raises(backup.BackupError, match='backup.json: missing or unreadable'):
        backup.restore(tmp_path / 'nowhere', root)


def test_a_backup_that_escapes_the_course_is_refused(course, tmp_path):
    root = course
    dest, _ = backup.remove_class(root)
    evil = tmp_path / 'evil'
    evil.write_text('x')
    with tarfile.open(dest / backup.FOLDERS, 'w:gz') as tar:
        tar.add(evil, arcname='../escaped.txt')
    manifest = (dest / backup.MANIFEST).read_text()
    old = manifest.split(f'"{backup.FOLDERS}": "')[1].split('"')[0]
    (dest / backup.MANIFEST).write_text(manifest.replace(old, backup._sha(dest / backup.FOLDERS)))
    with pytest.raises(backup.BackupError, match='is not a file or folder inside the course'):
        backup.restore(dest, root)
    assert not (root.parent / 'escaped.txt').exists()


def test_make_clean_removes_the_demo_and_build_products_and_never_a_class(course):
    """make clean is what a newcomer runs: it must not cost a class. It removes demo/, test-artifacts/, .build/ (but the
    grading logs) and previews; the gradebook, every folder of the class, backups/ and the student repository stay."""
    root = course
    shutil.copy(ROOT / 'Makefile', root / 'Makefile')
    shutil.copy(ROOT / 'requirements.txt', root / 'requirements.txt')
    for folder in ('demo/submitted/ada', f'.build/release/{STEP}', 'test-artifacts/browser', f'student-preview/{STEP}',
                   f'student/{STEP}', 'backups/2027-01-01T000000Z'):
        (root / folder).mkdir(parents=True)
        (root / folder / 'file').write_text('x\n')
    before = files(root)
    done = subprocess.run(['make', '-s', 'clean'], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert files(root) == before and gradebook.sqlite_file(gradebook.configured(root)).is_file()
    gone = [f for f in ('demo', '.build/release', 'test-artifacts', 'student-preview') if (root / f).exists()]
    assert not gone, f'make clean left {gone}'
    assert (root / 'student' / STEP / 'file').is_file() and (root / 'backups' / '2027-01-01T000000Z' / 'file').is_file()
