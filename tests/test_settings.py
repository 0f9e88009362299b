"""course.settings, the one reader of course.toml: every setting typed and described, every bad value refused on load in
one line that names the file and the key; and course.layout, the one owner of a class's folders."""

import ast
import re
import subprocess
import sys
from datetime import datetime, timezone
from itertools import count

import pytest

from course import layout, runner
from course.classroom import gradebook
from course.layout import ROOT
from course.settings import PLACEHOLDER_STUDENT_REPOSITORY, Data, Dates, Lti, Publish, Settings, SettingsError, load, parse

FIRST = layout.steps()[0]  # a step of the course's source/, as a schedule must name (any one)
ABSENT = next(f'step{n}' for n in count(1) if f'step{n}' not in layout.steps())  # a step source/ does not have
FIRST_DATED = f'{FIRST} = {{ release = 2027-01-11T09:00:00+00:00, due = 2027-01-18T08:00:00+00:00, solution = true }}'


def toml(schedule=FIRST_DATED, publish=''):
    """A course.toml, good unless given a bad [schedule] line or an extra [publish] line."""
    return f'''github = "someone/course"
[data]
url = "https://example.org/input.txt"
sha256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
[publish]
github = "someone/course-students"
{publish}
[schedule]
{schedule}
'''


GOOD = toml()


def course(tmp_path, text):
    """A course at tmp_path with this course.toml and the course's own steps (source/)."""
    (tmp_path / 'source').symlink_to(ROOT / 'source')
    (tmp_path / 'course.toml').write_text(text)
    return tmp_path


def test_the_course_toml_of_the_course_loads_and_every_setting_says_what_it_does():
    s = load()
    assert s.github and s.data.sha256 and set(s.schedule) <= set(layout.steps())
    for cls in (Settings, Data, Publish, Dates, Lti):
        for f in cls.__dataclass_fields__.values():
            if f.name not in ('data', 'publish', 'schedule', 'lti', 'file'):
                assert len(f.metadata.get('help', '')) > 20, f'{cls.__name__}.{f.name} has no description'
    assert isinstance(s.schedule[FIRST].due, datetime) and s.schedule[FIRST].due.tzinfo is not None


def test_a_good_file_reads_typed(tmp_path):
    s = load(course(tmp_path, GOOD))
    assert s.publish.github == 'someone/course-students' and s.publish.handin == 'lms' and s.publish.hidden_tests is False
    assert s.schedule[FIRST].due_utc == datetime(2027, 1, 18, 8) and s.schedule[FIRST].solution is True
    assert s.student_repository() == 'someone/course-students'


# (what course.toml says, a regular expression the one line must match after the file's name)
BAD = [
    (f'{FIRST} = {{ release = 2027-01-11T09:00:00, due = 2027-01-18T08:00:00+00:00 }}',
     rf'\[schedule\] {FIRST} release: 2027-01-11T09:00:00 has no timezone: add one'),
    (f'{FIRST} = {{ release = 2027-01-11, due = 2027-01-18T08:00:00+00:00 }}',
     rf'\[schedule\] {FIRST} release: 2027-01-11 has no time and timezone'),
    (f'{FIRST} = {{ release = "next monday", due = 2027-01-18T08:00:00+00:00 }}',
     rf"\[schedule\] {FIRST} release: 'next monday' is not an ISO 8601 date-time"),
    (f'{ABSENT} = {{ release = 2027-01-11T09:00:00+00:00, due = 2027-01-18T08:00:00+00:00 }}',
     rf'\[schedule\] {ABSENT}: there is no step {ABSENT} in source/'),
    (f'{FIRST} = {{ release = 2027-01-18T09:00:00+00:00, due = 2027-01-11T09:00:00+00:00 }}',
     rf'\[schedule\] {FIRST}: due \(2027-01-11T09:00:00\+00:00\) is not after release'),
    (f'{FIRST} = {{ due = 2027-01-18T08:00:00+00:00 }}', rf'\[schedule\] {FIRST}: give both release and due'),
    (f'{FIRST} = {{ relase = 2027-01-11T09:00:00+00:00 }}', rf'\[schedule\] {FIRST} has relase: only release, due and solution'),
    (f'{FIRST} = {{ solution = "false" }}', rf"\[schedule\] {FIRST} solution is 'false': write true or false, unquoted"),
]
BAD_PUBLISH = [
    ('lsm = "Canvas"', r'\[publish\] lsm is not a setting here: the keys are github, branch'),
    ('handin = "email"', r"\[publish\] handin is 'email': say 'lms' or 'hub'"),
    ('handin_url = "the usual place"', r"\[publish\] handin_url is 'the usual place': give a full address"),
    ('handin_url = 3', r'\[publish\] handin_url is 3: write text in quotes'),
    ('hidden_tests = "yes"', r"\[publish\] hidden_tests is 'yes': write true or false, unquoted"),
    ('folder = "/tmp/students"', r"\[publish\] folder is '/tmp/students': name a folder inside the course"),
]


@pytest.mark.parametrize('text, said', [(toml(schedule=line), said) for line, said in BAD]
                         + [(toml(publish=line), said) for line, said in BAD_PUBLISH])
def test_each_kind_of_bad_value_is_refused_in_one_line_naming_the_file_and_the_key(tmp_path, text, said):
    root = course(tmp_path, text)
    with pytest.raises(SettingsError) as e:
        load(root)
    message = str(e.value)
    assert '\n' not in message and re.match(rf'{re.escape(str(root / "course.toml"))}: {said}', message), message
    assert e.value.code == f'error: {message}', 'a command stops with the line, not a traceback'


@pytest.mark.parametrize('text, said', [
    (GOOD.replace('github = "someone/course"\n', 'github = "someone/course"\nrepository = "x/y"\n'),
     r'repository is not a setting here'),
    (GOOD.replace('sha256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"\n', ''),
     r'\[data\] sha256 is missing'),
    (GOOD.replace('github = "someone/course"', 'github = "someone"'), r"github is 'someone': name a GitHub repository"),
    ('gradebook_url = "mysql://db/course"\n' + GOOD, r"gradebook_url is 'mysql://db/course': the gradebook is SQLite"),
    ('publish = 3\n' + GOOD.split('[publish]')[0], r'publish should be a table'),
    (GOOD.replace('[data]', '[data'), r'.*fix it'),
])
def test_other_bad_files_are_refused_in_one_line_too(tmp_path, text, said):
    root = course(tmp_path, text)
    with pytest.raises(SettingsError) as e:
        load(root)
    assert '\n' not in str(e.value) and re.match(rf'{re.escape(str(root / "course.toml"))}: {said}', str(e.value)), e.value


def test_publishing_refuses_the_placeholder_student_repository_naming_the_key(tmp_path):
    s = load(course(tmp_path, GOOD.replace('someone/course-students', PLACEHOLDER_STUDENT_REPOSITORY)))
    with pytest.raises(SettingsError, match=r'course.toml: \[publish\] github is build-a-transformer/course-students, the '
                                            r'placeholder the course ships with: set it to your student repository'):
        s.student_repository()
    assert load().publish.github == PLACEHOLDER_STUDENT_REPOSITORY, 'the course ships the placeholder, so make publish refuses it'
    same = parse({'github': 'a/b', 'data': {'url': 'https://x.org/i', 'sha256': '0' * 64}, 'publish': {'github': 'a/b'}})
    with pytest.raises(SettingsError, match="this repository's own github setting"):
        same.student_repository()


def test_a_changed_file_is_read_again(tmp_path):
    root = course(tmp_path, GOOD)
    assert load(root).publish.lms == 'Canvas'
    (root / 'course.toml').write_text(toml(publish='lms = "Moodle"'))
    assert load(root).publish.lms == 'Moodle'


def test_only_the_settings_module_reads_course_toml():
    """No other module of the package parses TOML, and none but course.layout (where things are) names the file: they
    ask course.settings."""
    readers = []
    for path in sorted((ROOT / 'course').rglob('*.py')):
        if path in (ROOT / 'course' / 'settings.py', ROOT / 'course' / 'layout.py'):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split('.')[0] in ('tomllib', 'tomli', 'toml') for n in names):
                    readers.append(f'{path.relative_to(ROOT)}:{node.lineno} imports a TOML parser')
            if isinstance(node, ast.Constant) and node.value == 'course.toml':
                readers.append(f'{path.relative_to(ROOT)}:{node.lineno} names the file')
    assert not readers, 'course.toml is read outside course/settings.py (use course.settings.load()):\n' + '\n'.join(readers)


def test_the_class_folders_are_nbgraders_own_names():
    """layout's submitted/, autograded/, feedback/ are the folders nbgrader itself uses, as this course configures it."""
    from course import runner

    c = runner.config()
    from nbgrader.coursedir import CourseDirectory

    d = CourseDirectory(config=c)
    assert (d.submitted_directory, d.autograded_directory, d.feedback_directory) == (
        layout.SUBMITTED, layout.AUTOGRADED, layout.FEEDBACK)
    assert layout.submitted_path('ada', FIRST, ROOT) == ROOT / 'submitted' / 'ada' / FIRST
    assert layout.result_path(FIRST, 'ada') == ROOT / 'results' / FIRST / 'ada.json'


def test_the_demo_course_always_has_its_own_sqlite_gradebook(tmp_path, monkeypatch):
    """Whatever course.toml or the environment say, the demo's course grades into its own gradebook.db: the demo never
    writes a real class's gradebook (a PostgreSQL one included)."""
    root = course(tmp_path, 'gradebook_url = "postgresql://grader@db.example.edu/course"\n' + GOOD)
    monkeypatch.setenv(gradebook.ENV, 'postgresql://gradebook@/course?host=/run/postgresql')
    assert gradebook.url(root).startswith('postgresql+psycopg://')
    (root / layout.DEMO_COURSE).write_text('')
    assert gradebook.url(root) == gradebook.SQLITE


def test_python_m_course_settings_describes_every_setting(capsys):
    from course.settings import main

    main([])
    out = capsys.readouterr().out
    for key in ('github', 'gradebook_url', '[data] sha256', '[publish] github', '[publish] hidden_tests', '[publish] lms',
                '[publish] files_url'):
        assert f'\n{key} = ' in out, key
    assert datetime(2027, 1, 11, 9, tzinfo=timezone.utc).isoformat() in out


def test_make_publish_checks_the_settings_first_and_stops_at_the_placeholder():
    """make publish's first command (python -m course.settings --publish) stops in one line on the placeholder the course
    ships with, before the seconds make check takes."""
    done = subprocess.run([sys.executable, '-m', 'course.settings', '--publish'], cwd=ROOT, capture_output=True, text=True,
                          env=runner.env(ROOT))
    assert done.returncode == 1 and done.stderr.startswith('error: course.toml: [publish] github is ') \
        and done.stderr.count('\n') == 1, done.stderr
    makefile = (ROOT / 'Makefile').read_text()
    recipe = makefile.split('\npublish:', 1)[1].split('\n\n', 1)[0].splitlines()[1:]
    assert 'course.settings --publish' in recipe[0] and 'build --check' in recipe[1], recipe
