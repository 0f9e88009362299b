"""course.classroom.gradebook: the one setting that moves the gradebook from SQLite to PostgreSQL (docs/gradebook.md). No server
here: tests/hub/ grades against a real PostgreSQL."""

import pytest

from course import runner
from course.classroom import gradebook
from course.layout import ROOT


def course_with(tmp_path, toml=''):
    (tmp_path / 'course.toml').write_text(toml + (ROOT / 'course.toml').read_text())  # top level: before [data]
    (tmp_path / 'source').symlink_to(ROOT / 'source')  # the steps its [schedule] names
    return tmp_path


def test_sqlite_beside_the_course_is_the_default(tmp_path, monkeypatch):
    monkeypatch.delenv(gradebook.ENV, raising=False)
    assert gradebook.url(course_with(tmp_path)) == gradebook.SQLITE
    assert runner.config(root=ROOT).CourseDirectory.db_url == f'sqlite:///{ROOT / "gradebook.db"}?timeout=60'


def test_course_toml_switches_to_postgresql_through_psycopg(tmp_path, monkeypatch):
    monkeypatch.delenv(gradebook.ENV, raising=False)
    root = course_with(tmp_path, 'gradebook_url = "postgresql://grader@db.example.edu/course"\n')
    assert gradebook.url(root) == 'postgresql+psycopg://grader@db.example.edu/course'


def test_the_environment_wins_over_course_toml(tmp_path, monkeypatch):
    root = course_with(tmp_path, 'gradebook_url = "postgresql://grader@db.example.edu/course"\n')
    monkeypatch.setenv(gradebook.ENV, 'postgresql://gradebook@/course?host=/run/postgresql')
    assert gradebook.url(root) == 'postgresql+psycopg://gradebook@/course?host=/run/postgresql'


def test_another_engine_is_refused_in_one_line_naming_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv(gradebook.ENV, 'mysql://grader@db/course')
    with pytest.raises(SystemExit) as e:
        gradebook.url(course_with(tmp_path))
    message = str(e.value)
    assert '\n' not in message and gradebook.ENV in message and 'mysql://' in message and 'docs/gradebook.md' in message


def test_only_a_sqlite_gradebook_can_be_missing(tmp_path):
    assert 'grade the class first' in gradebook.missing(f'sqlite:///{tmp_path / "gradebook.db"}')
    assert gradebook.missing('postgresql+psycopg://gradebook@/course?host=/run/postgresql') is None
