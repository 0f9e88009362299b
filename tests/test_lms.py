"""A Colab class through an LMS (course.classroom.lms, course.classroom.collect; docs/lms.md): Canvas and Moodle
downloads built as each LMS names its files (tests/support/lmsclass.py) are collected with nbgrader's zip_collect into
submitted/, every file not collected is listed, hostile zips are refused with one line and nothing collected is lost;
then one step of a small class is graded and its grades, statuses and late penalties go back as each LMS imports them,
checked against nbgrader's own export."""

import csv
import hashlib
import re
import shutil
import zipfile
from datetime import timedelta, timezone

import pytest

from course import runner
from course.classroom import lms
from course.layout import copy_course, notebooks
from support import lmsclass as L

DUE = '2026-12-01 23:59:00+00:00'


@pytest.fixture(scope='module')
def empty_gradebook(tmp_path_factory):
    """An empty nbgrader gradebook, made once: nbgrader creates one by running alembic in a process of its own (a few
    seconds); each test's course starts with a copy."""
    from nbgrader.api import Gradebook

    runner.on_path()  # nbgrader runs alembic (this venv's) when it creates a gradebook
    path = tmp_path_factory.mktemp('gradebook') / 'gradebook.db'
    Gradebook(f'sqlite:///{path}', 'transformer-from-scratch').close()
    return path


@pytest.fixture
def course(tmp_path, empty_gradebook):
    root = copy_course(tmp_path / 'course')
    L.write_roster(root / 'roster.csv')
    shutil.copy(empty_gradebook, root / 'gradebook.db')
    return root


def collect(root, zip_path, name, *flags):
    """python -m course.classroom.collect as make collect runs it, in this process (nbgrader imported once): (exit status, stdout
    lines, stderr)."""
    import contextlib
    import io

    from course.classroom import collect as command

    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(root):
        try:
            command.main(['--lms', name, '--zip', str(zip_path), '--roster', str(root / 'roster.csv'), *flags], root)
        except SystemExit as e:
            code, message = (e.code, None) if isinstance(e.code, int) else (1, e.code)
            if message:
                print(message, file=err)
    return code, out.getvalue().splitlines(), err.getvalue()


def sent_by(root, student):
    """Who sent the notebook collected for student (the marker lmsclass.notebook() writes), or None."""
    import json

    path = root / 'submitted' / student / L.STEP / L.NOTEBOOK
    return json.loads(path.read_text())['metadata'].get('sent_by') if path.exists() else None


def tree(root):
    """sha256 of every file under submitted/."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / 'submitted').rglob('*')) if p.is_file()}


def students_in_gradebook(root):
    from nbgrader.api import Gradebook

    with Gradebook(f'sqlite:///{root / "gradebook.db"}') as gb:
        return {s.id: (s.first_name, s.last_name, s.email, s.lms_user_id) for s in gb.students}


def test_canvas_download_collects_the_newest_file_of_each_rostered_student_and_lists_every_other_file(course, tmp_path):
    code, out, err = collect(course, L.canvas_download(tmp_path / 'canvas.zip'), 'canvas', '--due', DUE)
    assert code == 0, err
    assert {s: sent_by(course, s) for s in ('alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'mallory')} == {
        'alice': 'alice', 'bob': 'bob-new', 'carol': 'carol', 'dave': None, 'erin': None, 'frank': None, 'mallory': None}
    # Canvas marks Carol's file late, without a time: 1 s past the due date, for nbgrader's late penalty
    assert (course / 'submitted' / 'carol' / L.STEP / 'timestamp.txt').read_text() == '2026-12-01 23:59:01'
    assert not (course / 'submitted' / 'alice' / L.STEP / 'timestamp.txt').exists()
    listed = [line for line in out if line.startswith('not collected: ')]
    assert sorted(line.split(': ')[1] for line in listed) == sorted([
        L.canvas(L.BOB, 400, L.NOTEBOOK), L.canvas(L.DAVE, 430, 'my notes.pdf'),
        L.canvas(L.FRANK, 440, 'Untitled0.ipynb'), L.canvas(L.MALLORY, 450, L.NOTEBOOK)]), out
    why = {line.split(': ')[1]: line for line in listed}
    assert 'older file' in why[L.canvas(L.BOB, 400, L.NOTEBOOK)]
    assert 'not a notebook' in why[L.canvas(L.DAVE, 430, 'my notes.pdf')]
    assert 'not on the roster' in why[L.canvas(L.MALLORY, 450, L.NOTEBOOK)]
    assert 'no step' in why[L.canvas(L.FRANK, 440, 'Untitled0.ipynb')]
    assert sorted(line.split(': ')[1].split()[0] for line in out if line.startswith('collected: ')) == ['alice', 'bob', 'carol']
    # the roster is in the gradebook, with the LMS ids, including those who sent nothing
    people = students_in_gradebook(course)
    assert people == {p.id: (p.first, p.last, f'{p.id}@example.edu', p.lms_id) for p in L.ROSTER}
    report = sorted((course / 'lms').glob('collect-*.txt'))
    assert len(report) == 1 and report[0].read_text().splitlines() == out


def test_without_due_the_step_is_due_when_the_student_readme_says(course, tmp_path):
    """No DUE and no due date in the gradebook: course.toml's [schedule] date (the one make publish shows students) goes
    into the gradebook, is said in a note, and is what Canvas's late mark is counted from."""
    from nbgrader.api import Gradebook

    from course.classroom.lms import scheduled_due
    from course.settings import load

    due = load(course).schedule[L.STEP].due
    code, out, err = collect(course, L.canvas_download(tmp_path / 'canvas.zip'), 'canvas')
    assert code == 0, err
    assert scheduled_due(L.STEP, course) == due.astimezone(timezone.utc).replace(tzinfo=None)
    with Gradebook(f'sqlite:///{course / "gradebook.db"}') as gb:
        assert gb.find_assignment(L.STEP).duedate == scheduled_due(L.STEP, course)
    assert [line for line in out if line.startswith(f'note: {L.STEP} is due')], out
    late = due.astimezone(timezone.utc) + timedelta(seconds=1)
    assert (course / 'submitted' / 'carol' / L.STEP / 'timestamp.txt').read_text() == late.strftime('%Y-%m-%d %H:%M:%S')


def test_moodle_download_needs_the_instructors_times_to_choose_between_two_files_and_to_know_late_work(course, tmp_path):
    download = L.moodle_download(tmp_path / 'moodle.zip')
    code, out, err = collect(course, download, 'moodle', '--due', DUE)
    assert code == 0, err
    assert [sent_by(course, s) for s in ('alice', 'bob', 'carol')] == ['alice', None, 'carol']
    bob = [line for line in out if line.startswith('not collected: ') and "Bob Brown_102" in line]
    assert len(bob) == 1 and 'no time to tell the newest' in bob[0] and '--times' in bob[0], out
    assert not list((course / 'submitted').rglob('timestamp.txt')), 'Moodle carries no time: none is made up'
    times = tmp_path / 'times.csv'
    times.write_text('file,timestamp\n'
                     f'{L.moodle(L.BOB, L.NOTEBOOK)},2026-12-01 20:00:00+00:00\n'
                     f'"{L.moodle(L.BOB, L.STEM + " (1).ipynb")}",2026-12-01 21:00:00+00:00\n'
                     f'{L.moodle(L.CAROL, L.STEM.replace("_", " ") + ".ipynb")},2026-12-02 01:30:00+01:00\n'
                     f'{L.moodle(L.CAROL, L.NOTEBOOK)},2026-12-03 00:00:00\n')  # a typo: no such file
    code, out, err = collect(course, download, 'moodle', '--times', str(times))
    assert code == 0, err
    assert [sent_by(course, s) for s in ('alice', 'bob', 'carol')] == ['alice', 'bob-new', 'carol']
    assert (course / 'submitted' / 'carol' / L.STEP / 'timestamp.txt').read_text() == '2026-12-02 00:30:00'
    assert [line for line in out if line.startswith('note: ')] == [
        f'note: {times}: {L.moodle(L.CAROL, L.NOTEBOOK)!r} names no file of the download: its time was not used (check the '
        'name)'], out
    assert (course / 'submitted' / 'bob' / L.STEP / 'timestamp.txt').read_text() == '2026-12-01 21:00:00'
    # Carol's file now has a time: the new copy replaced the first, which is kept; Alice's is unchanged
    assert any(line.startswith('replaced: carol') for line in out) and any(line.startswith('unchanged: alice') for line in out)
    kept = list((course / 'lms' / 'replaced').glob(f'*/carol/{L.STEP}/{L.NOTEBOOK}'))
    assert len(kept) == 1 and not (kept[0].parent / 'timestamp.txt').exists()
    manifest = {r['student_id']: r for r in csv.DictReader(open(lms.manifest_path(L.STEP, course)))}
    assert {s: r['lms_id'] for s, r in manifest.items()} == {'alice': '101', 'bob': '102', 'carol': '103'}


def test_a_class_of_30_from_canvas_and_from_moodle_is_collected_whole(course, tmp_path):
    """30 students on the roster, each with one notebook under one of Colab's and the browsers' names (some twice, some
    late on Canvas): every one is collected, the newest of each, from either LMS."""
    people = [L.Person(f's{i:02d}', f'First{i}', f'Last{i}', str(5000 + i)) for i in range(30)]
    L.write_roster(course / 'roster.csv', people)
    names = [f'Copy of {L.NOTEBOOK}', f'{L.STEM} (1).ipynb', f'{L.STEM.replace("_", " ")}.ipynb', L.NOTEBOOK]
    canvas, moodle, times = {}, {}, ['file,timestamp']
    for i, p in enumerate(people):
        canvas[L.canvas(p, 7000 + i, names[i % 4], late=i % 7 == 0)] = L.notebook(p.id)
        moodle[L.moodle(p, names[i % 4])] = L.notebook(p.id)
        if i % 5 == 0:  # an earlier upload too
            canvas[L.canvas(p, 6000 + i, L.NOTEBOOK)] = L.notebook('older')
            moodle[L.moodle(p, f'Copy of {L.STEM} (2).ipynb')] = L.notebook('older')
            times += [f'"{L.moodle(p, f"Copy of {L.STEM} (2).ipynb")}",2026-11-30 10:00:00',
                      f'"{L.moodle(p, names[i % 4])}",2026-11-30 11:00:00']
    (tmp_path / 'times.csv').write_text('\n'.join(times) + '\n')
    runs = (('canvas', canvas, ['--due', DUE]), ('moodle', moodle, ['--times', str(tmp_path / 'times.csv')]))
    for name, entries, flags in runs:
        shutil.rmtree(course / 'submitted', ignore_errors=True)
        code, out, err = collect(course, L.write_zip(tmp_path / f'{name}.zip', entries), name, *flags)
        assert code == 0, err
        assert {p.id: sent_by(course, p.id) for p in people} == {p.id: p.id for p in people}, name
        assert len([line for line in out if line.startswith('collected: ')]) == 30, out
        assert len([line for line in out if 'an older file' in line]) == 6, out
    late = sorted(p.parent.parent.name for p in (course / 'submitted').rglob('timestamp.txt'))
    assert late == [p.id for i, p in enumerate(people) if i % 5 == 0], 'Moodle: the times given, and only those'


@pytest.mark.parametrize('colab_name', [f'Copy of {L.NOTEBOOK}', f'{L.STEM} (2).ipynb', f'Copy of {L.STEM} (1).ipynb',
                                        f'{L.STEM.replace("_", " ")}.ipynb', f'{L.STEM}-1.ipynb', L.NOTEBOOK.upper()])
def test_colab_and_browser_renames_find_their_step(colab_name):
    assert lms.notebook_of(colab_name) == (L.STEP, L.NOTEBOOK)


@pytest.mark.parametrize('other', ['Untitled0.ipynb', 'Copy of Untitled0.ipynb', f'{L.STEM}_v2.ipynb', f'{L.STEP}.ipynb'])
def test_a_name_that_is_not_a_steps_notebook_is_not_guessed(other):
    assert lms.notebook_of(other) is None


def names_students_are_told():
    """The file names docs/lms.md's For students section (the student README's text) says are taken, and those it says
    are not: the backquoted names after "taken as Step N:" and after "These are not"."""
    from course.authoring.publish import student_text

    text = ' '.join(student_text('lms').split())
    taken, refused = text.split('taken as ', 1)[1].split('These are not', 1)
    step = 'step' + re.match(r'Step (\d+)', taken)[1]
    names = [re.findall(r'`([^`]+)`', re.split(r'`\.(?:\s|$)', part, maxsplit=1)[0] + '`') for part in (taken, refused)]
    return step, names[0], names[1]


def test_the_names_students_are_told_are_what_collect_takes():
    step, taken, refused = names_students_are_told()
    assert len(taken) >= 3 and len(refused) >= 2, (taken, refused)
    assert {name: lms.notebook_of(name) for name in taken} == {name: (step, notebooks(step)[0]) for name in taken}
    assert {name: lms.notebook_of(name) for name in refused} == dict.fromkeys(refused)


def hostile(tmp_path, kind):
    """A Canvas download that is fine but for one entry: '../' out of the folder, a symlink, or one that claims 2 GB."""
    path = L.write_zip(tmp_path / f'{kind}.zip', {L.canvas(L.ALICE, 900, L.NOTEBOOK): L.notebook('alice-again')})
    if kind == 'escape':
        with zipfile.ZipFile(path, 'a') as z:
            z.writestr(f'../../{L.canvas(L.BOB, 901, L.NOTEBOOK)}', L.notebook('bob-escaped'))
    elif kind == 'symlink':
        L.symlink_entry(path, L.canvas(L.BOB, 902, L.NOTEBOOK), '/etc/passwd')
    else:
        name = L.canvas(L.BOB, 903, L.NOTEBOOK)
        with zipfile.ZipFile(path, 'a') as z:
            z.writestr(name, b'{}')
        L.claims_size(path, name, 2 << 30)
    return path


@pytest.mark.parametrize('kind', ['escape', 'symlink'])
def entries_read(monkeypatch):
    """The names of the zip entries whose data is read from now on (what extracting them does), in a list."""
    read, real = [], zipfile.ZipFile.open

    def recording(self, name, *args, **kwargs):
        read.append(getattr(name, 'filename', name))
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, 'open', recording)
    return read


@pytest.mark.parametrize('kind', ['escape', 'symlink'])
def test_a_zip_an_lms_never_writes_is_refused_with_one_line_and_nothing_collected_is_lost(course, tmp_path, kind,
                                                                                          monkeypatch):
    assert collect(course, L.canvas_download(tmp_path / 'canvas.zip'), 'canvas', '--due', DUE)[0] == 0
    before = tree(course)
    zipped = hostile(tmp_path, kind)
    read = entries_read(monkeypatch)
    code, out, err = collect(course, zipped, 'canvas')
    errors = err.strip().splitlines()
    assert code != 0 and not out and len(errors) == 1, (code, out, err)
    assert f'{kind}.zip' in errors[0] and L.canvas(L.BOB, 901 if kind == 'escape' else 902, L.NOTEBOOK) in errors[0]
    assert tree(course) == before and sent_by(course, 'alice') == 'alice'
    assert read == [], f'refused only after extracting {read}: the zip is checked whole before anything is written'


def test_an_entry_that_claims_2_GB_is_listed_and_never_extracted(course, tmp_path, monkeypatch):
    path = hostile(tmp_path, 'huge')
    assert path.stat().st_size < 1 << 20
    read = entries_read(monkeypatch)
    code, out, err = collect(course, path, 'canvas')
    assert code == 0, err
    line = [line for line in out if L.canvas(L.BOB, 903, L.NOTEBOOK) in line]
    assert len(line) == 1 and line[0].startswith('not collected: ') and '2.0 GB' in line[0], out
    assert sent_by(course, 'alice') == 'alice-again' and sent_by(course, 'bob') is None
    assert L.canvas(L.ALICE, 900, L.NOTEBOOK) in read and L.canvas(L.BOB, 903, L.NOTEBOOK) not in read, read


def test_a_damaged_entry_and_another_steps_notebook_are_listed_and_the_rest_collected(course, tmp_path):
    """A file whose bytes no longer match the zip's checksum (a broken download) is listed, not collected; with --step, a
    notebook of another step is listed, not collected."""
    from course.layout import steps

    other_step = steps()[1]
    other = L.canvas(L.CAROL, 810, notebooks(other_step)[0])
    path = L.write_zip(tmp_path / 'canvas.zip', {L.canvas(L.ALICE, 800, L.NOTEBOOK): L.notebook('alice'),
                                                 L.canvas(L.BOB, 801, L.NOTEBOOK): L.notebook('bob'),
                                                 other: L.notebook('carol')})
    data = bytearray(path.read_bytes())
    at = data.index(b'"bob"')
    data[at + 1] = ord('B')  # stored, not compressed: the checksum no longer matches
    path.write_bytes(bytes(data))
    code, out, err = collect(course, path, 'canvas', '--step', L.STEP)
    assert code == 0, err
    assert [sent_by(course, s) for s in ('alice', 'bob', 'carol')] == ['alice', None, None]
    bob = [line for line in out if L.canvas(L.BOB, 801, L.NOTEBOOK) in line]
    assert len(bob) == 1 and bob[0].startswith('not collected: ') and 'damaged' in bob[0], out
    carol = [line for line in out if other in line]
    assert carol == [f'not collected: {other}: a notebook of {other_step}, and --step is {L.STEP}'], out


@pytest.mark.parametrize('roster, says', [
    ('id,first_name,last_name,email\nalice,A,A,a@x\n', 'no column lms_id'),
    ('id,first_name,last_name,email,lms_id\nalice,A,A,a@x,101\nbob,B,B,b@x,101\n', 'line 3: lms_id 101 is given twice'),
    ('id,first_name,last_name,email,lms_id\n../alice,A,A,a@x,101\n', "line 2: id '../alice' is not a plain name"),
])
def test_a_bad_roster_is_refused_with_one_line_naming_it(course, tmp_path, roster, says):
    (course / 'roster.csv').write_text(roster)
    code, out, err = collect(course, L.canvas_download(tmp_path / 'canvas.zip'), 'canvas')
    errors = err.strip().splitlines()
    assert code != 0 and len(errors) == 1 and 'roster.csv' in errors[0] and says in errors[0], err
    assert not (course / 'submitted').exists() and students_in_gradebook(course) == {}


@pytest.mark.parametrize('times, says', [
    (b'file,timestamp\nsomeone.ipynb\n', "line 2: '' is not a time"),
    (b'file,timestamp\nsomeone.ipynb,monday\n', "line 2: 'monday' is not a time"),  # dateutil would read a date
    (b'file,timestamp\nsomeone.ipynb,02/12/2026 10:00\n', "line 2: '02/12/2026 10:00' is not a time"),  # or guess the month
    ('file,timestamp\nd\xe9j\xe0.ipynb,2026-12-01\n'.encode('latin-1'), 'not a UTF-8 CSV'),
])
def test_a_bad_times_file_is_refused_with_one_line_naming_it(course, tmp_path, times, says):
    (tmp_path / 'times.csv').write_bytes(times)
    code, out, err = collect(course, L.canvas_download(tmp_path / 'canvas.zip'), 'canvas', '--times',
                             str(tmp_path / 'times.csv'))
    errors = err.strip().splitlines()
    assert code != 0 and len(errors) == 1 and 'times.csv' in errors[0] and says in errors[0], err
    assert not (course / 'submitted').exists()


def test_a_file_name_with_control_characters_is_reported_on_one_line_escaped(course, tmp_path):
    """A student names the file they upload: a newline or a terminal escape in it is shown escaped, one line a file."""
    name = L.canvas(L.DAVE, 431, 'notes\x1b[2J\nnot collected: fake.pdf')
    code, out, err = collect(course, L.write_zip(tmp_path / 'canvas.zip', {name: b'%PDF-1.4\n'}), 'canvas')
    assert code == 0, err
    assert not [line for line in out if any(ord(ch) < 32 for ch in line)], out
    dave = [line for line in out if '431_notes' in line]
    assert len(dave) == 1 and '\\x1b[2J\\nnot collected: fake.pdf' in dave[0], out


def test_the_wrong_lms_collects_nothing_and_says_so(course, tmp_path):
    code, out, err = collect(course, L.canvas_download(tmp_path / 'canvas.zip'), 'moodle')
    assert code == 0 and not (course / 'submitted').exists(), err
    assert len(out) == 8 and all(line.startswith('not collected: ') for line in out[:7]), out
    assert out[-1].startswith('nothing collected from ') and 'is it a Canvas download?' in out[-1], out


def test_not_a_zip_is_refused_with_one_line(course, tmp_path):
    fake = tmp_path / 'submissions.zip'
    fake.write_text('<html>login page</html>')
    code, out, err = collect(course, fake, 'canvas')
    assert code != 0 and err.strip().count('\n') == 0 and 'submissions.zip: not a zip file' in err, err


def test_feedback_goes_back_in_one_zip_per_step_as_moodle_and_canvas_take_it(course):
    """Moodle: "Upload multiple feedback files in a zip" matches each file to its participant by the folder name
    <Full Name>_<participant id>_assignfeedback_file_/. Canvas: "Re-Upload Submissions" reads the first two numbers of
    each name (user id, attachment id: as the file was downloaded) and attaches it to that submission."""
    for student in ('alice', 'bob'):
        page = course / 'feedback' / student / L.STEP / L.NOTEBOOK.replace('.ipynb', '.html')
        page.parent.mkdir(parents=True)
        page.write_text(f'<p>feedback for {student}</p>')
    lms.write_manifest(L.STEP, {s: {'student_id': s, 'step': L.STEP, 'notebook': L.NOTEBOOK, 'lms': 'moodle',
                                    'lms_id': pid, 'file': 'x', 'timestamp': '', 'late': False, 'note': ''}
                                for s, pid in (('alice', '7001'), ('bob', '7002'))}, course)
    from nbgrader.api import Gradebook

    with Gradebook(f'sqlite:///{course / "gradebook.db"}') as gb:
        lms.import_roster(lms.read_roster(course / 'roster.csv'), gb)
        written = lms.package_feedback(gb, course)
    with zipfile.ZipFile(course / 'lms' / f'feedback-moodle-{L.STEP}.zip') as z:
        names = sorted(z.namelist())
        assert z.read(names[0]) == b'<p>feedback for alice</p>'
    page = L.NOTEBOOK.replace('.ipynb', '.html')
    assert names == [f'Alice Ashby_7001_assignfeedback_file_/{page}', f'Bob Brown_7002_assignfeedback_file_/{page}']
    downloaded = f'ashbyalice_LATE_101_311_Copy of {L.NOTEBOOK}'
    lms.write_manifest(L.STEP, {'alice': {**lms.read_manifest(L.STEP, course)['alice'], 'lms': 'canvas',
                                          'lms_id': '101', 'file': downloaded}}, course)
    with Gradebook(f'sqlite:///{course / "gradebook.db"}') as gb:
        written = lms.package_feedback(gb, course)
    assert {p.relative_to(course).as_posix() for p in written} == {f'lms/feedback-canvas-{L.STEP}.zip',
                                                                   f'lms/feedback-moodle-{L.STEP}.zip'}
    with zipfile.ZipFile(course / 'lms' / f'feedback-canvas-{L.STEP}.zip') as z:
        assert z.namelist() == [f'ashbyalice_LATE_101_311_{page}'] and z.read(z.namelist()[0]) == b'<p>feedback for alice</p>'
    digits = [part for part in f'ashbyalice_LATE_101_311_{page}'.split('_') if part.isdigit()][:2]
    assert digits == ['101', '311'], 'Canvas takes the first two all-digit parts as the user and the attachment id'


def test_canvas_gradebook_export_is_read_as_the_roster(tmp_path):
    """Canvas's Grades > Export as it is: Student is "Last, First", ID the Canvas user id, no email column; the Points
    Possible row and the Test Student left out; the id from the SIS Login ID, else canvas-<ID>."""
    export = tmp_path / 'canvas-gradebook.csv'
    export.write_text('Student,ID,SIS User ID,SIS Login ID,Section,Week 1 (1234)\n'
                      '    Points Possible,,,,,25\n'
                      '"Ashby, Alice",101,S1,alice@uni.example,Sec A,\n'
                      '"Brown, Bob",102,,,Sec A,\n'
                      '"Student, Test",999,,,Sec A,\n', encoding='utf-8')
    roster = lms.read_roster(export)
    assert roster == {'101': lms.Student('alice', 'Alice', 'Ashby', 'alice@uni.example', '101'),
                      '102': lms.Student('canvas-102', 'Bob', 'Brown', '', '102')}


def test_the_registry_finds_every_platform_module():
    from course.classroom import lms_canvas, lms_lti13, lms_moodle

    assert lms.platforms() == {'canvas': lms_canvas.PLATFORM, 'lti13': lms_lti13.PLATFORM, 'moodle': lms_moodle.PLATFORM}
    assert sorted(lms.downloads()) == ['canvas', 'moodle'], 'LTI has no download to collect'


# The class graded end to end: four on the roster; from Moodle, Alice's perfect notebook on time, Bob's with the step's
# first sampled mistake, Carol's perfect one three hours late (the instructor's time); Erin sends nothing.
CLASS = (L.ALICE, L.BOB, L.CAROL, L.ERIN)
LATE = '2026-12-02 02:59:00+00:00'


@pytest.fixture(scope='module')
def graded_class(tmp_path_factory):
    """collect (Moodle) -> make grade (one step) -> nbgrader's own export (CsvExportPlugin), in a copy of the course:
    (course, {student: our grades.csv row}, {student: nbgrader's row}, collect's lines)."""
    from course.authoring.demo import edited, sampled, solved
    from support.classroom import run

    tmp = tmp_path_factory.mktemp('lms')
    root = copy_course(tmp / 'course')
    L.write_roster(root / 'roster.csv', CLASS)
    perfect = solved(L.STEP, L.NOTEBOOK)
    mistake = next(v for v in sampled(L.STEP) if v.caught_by)
    import nbformat

    carol = L.moodle(L.CAROL, f'Copy of {L.NOTEBOOK}')
    download = L.write_zip(tmp / 'moodle.zip', {
        L.moodle(L.ALICE, f'{L.STEM} (1).ipynb'): nbformat.writes(perfect).encode(),
        L.moodle(L.BOB, L.NOTEBOOK): nbformat.writes(edited(perfect, mistake.edits)).encode(),
        carol: nbformat.writes(perfect).encode()})
    (tmp / 'times.csv').write_text(f'file,timestamp\n{carol},{LATE}\n')
    runner.on_path()
    code, lines, err = collect(root, download, 'moodle', '--due', DUE, '--times', str(tmp / 'times.csv'))
    assert code == 0, err
    rows, out = run(root, '--step', L.STEP, '--jobs', '2')
    ours = {student: row for (step, student), row in rows.items() if step == L.STEP}
    done = runner.run('export', '--ExportApp.plugin_class=nbgrader.plugins.CsvExportPlugin', '--to=theirs.csv', cwd=root)
    assert (root / 'theirs.csv').exists(), done.stdout + done.stderr
    with open(root / 'theirs.csv', newline='') as f:
        theirs = {r['student_id']: r for r in csv.DictReader(f) if r['assignment'] == L.STEP}
    return root, ours, theirs, lines


def test_every_grade_status_and_late_penalty_of_the_collected_class_is_nbgraders_own(graded_class):
    root, ours, theirs, lines = graded_class
    assert sorted(ours) == sorted(theirs) == sorted(p.id for p in CLASS)
    differ = [(s, c, ours[s][c], theirs[s][c]) for s in theirs for c in ('raw_score', 'late_submission_penalty', 'score')
              if float(ours[s][c]) != float(theirs[s][c] or 0)]
    assert not differ, differ
    status = {s: r['status'] for s, r in ours.items()}
    assert status == {'alice': 'graded', 'bob': 'graded', 'carol': 'graded', 'erin': 'not submitted'}, status
    alice, bob, carol = (ours[s] for s in ('alice', 'bob', 'carol'))
    assert float(alice['autograded']) == float(alice['autograded_max']) > float(bob['autograded']), (alice, bob)
    # Carol's perfect work, three hours late: nbgrader's penalty ('zero') takes all of it; Alice's, on time, none
    assert float(carol['raw_score']) == float(alice['raw_score']) > 0 and float(carol['score']) == 0.0, carol
    assert float(carol['late_submission_penalty']) == float(carol['raw_score']) and float(alice['late_submission_penalty']) == 0
    assert theirs['carol']['timestamp'].startswith('2026-12-02 02:59:00') and theirs['carol']['duedate'].startswith(
        '2026-12-01 23:59:00'), theirs['carol']
    assert float(ours['erin']['score']) == 0.0


def test_grades_go_back_as_canvas_and_moodle_import_them(graded_class, tmp_path):
    """The class collected from Moodle gets Moodle's files and no Canvas file; the same class as if collected from Canvas
    (its manifest saying so, in a copy of the course) gets Canvas's gradebook import."""
    root, ours, theirs, _ = graded_class
    people = {p.lms_id: p for p in CLASS}
    assert not (root / 'lms' / 'grades-canvas.csv').exists(), 'a Moodle class needs no Canvas grade file'
    copy = tmp_path / 'course'
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns('.build', 'submitted', 'autograded'))
    manifest = lms.read_manifest(L.STEP, copy)
    lms.write_manifest(L.STEP, {s: {**r, 'lms': 'canvas'} for s, r in manifest.items()}, copy)
    from nbgrader.api import Gradebook

    from course.reports.export import write_all

    with Gradebook(f'sqlite:///{copy / "gradebook.db"}') as gb:
        write_all(gb, copy / 'grades.csv', copy)
    assert not (copy / 'lms' / 'grades-moodle.csv').exists(), 'a Canvas class needs no Moodle grade file'
    # make grade ends by naming each file and where it goes in the LMS
    said = lms.where_to_upload(root).splitlines()
    assert said[:3] == ['', 'for the LMS:', '  lms/grades-moodle.csv  ->  Moodle: Grades > Import > CSV file (users by '
                        'Email address)'] and any(f'moodle-worksheet-{L.STEP}.csv' in line for line in said), said
    assert lms.where_to_upload(copy).splitlines()[2] == ('  lms/grades-canvas.csv  ->  Canvas: Grades > Import (matched '
                                                         'by the ID column)')
    with open(copy / 'lms' / 'grades-canvas.csv', newline='') as f:
        table = list(csv.reader(f))
    assert table[0] == ['Student', 'ID', 'SIS User ID', 'SIS Login ID', 'Section', L.STEP, 'Final Points']
    assert table[1][0].strip() == 'Points Possible' and float(table[1][5]) == float(theirs['alice']['max_score'])
    canvas = {people[r[1]].id: r for r in table[2:]}
    assert sorted(canvas) == sorted(theirs)
    for s, r in canvas.items():
        p = people[r[1]]
        assert r[0] == f'{p.last}, {p.first}' and float(r[5]) == float(r[6]) == float(theirs[s]['score']), (s, r)
    with open(root / 'lms' / 'grades-moodle.csv', newline='') as f:
        moodle = {r['Email address']: r for r in csv.DictReader(f)}
    assert {e: (float(r[L.STEP]), float(r['Course total'])) for e, r in moodle.items()} == {
        f'{s}@example.edu': (float(theirs[s]['score']),) * 2 for s in theirs}
    with open(root / 'lms' / f'moodle-worksheet-{L.STEP}.csv', newline='') as f:
        sheet = {r['Identifier']: r for r in csv.DictReader(f)}
    assert {i: float(r['Grade']) for i, r in sheet.items()} == {
        f'Participant {p.lms_id}': float(theirs[p.id]['score']) for p in CLASS}
    assert {'Last modified (grade)', 'Maximum Grade', 'Status'} <= set(sheet['Participant 103'])


def test_feedback_goes_back_in_moodles_bulk_upload_zip(graded_class):
    root, _, _, _ = graded_class
    page = L.NOTEBOOK.replace('.ipynb', '.html')
    with zipfile.ZipFile(root / 'lms' / f'feedback-moodle-{L.STEP}.zip') as z:
        names = sorted(z.namelist())
        assert z.read(f'Bob Brown_102_assignfeedback_file_/{page}') == (root / 'feedback' / 'bob' / L.STEP / page).read_bytes()
    assert names == [f'{p.first} {p.last}_{p.lms_id}_assignfeedback_file_/{page}' for p in (L.ALICE, L.BOB, L.CAROL)]
