"""The hub's admin commands (hub/admin.py) where they need no root: a roster is read and refused line by line before
anything is done, hub.env's settings with their defaults, and what a restore may write whatever an archive says.
Making accounts, backups and restores for real is tests/hub/test_service.py's (as root, in a machine)."""

import importlib.util
from pathlib import Path

import pytest

from course.layout import ROOT


@pytest.fixture
def admin(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location('hub_admin', ROOT / 'hub' / 'admin.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, 'ETC', tmp_path / 'etc')
    monkeypatch.setattr(module, 'STATE', tmp_path / 'state')
    return module


def roster(tmp_path, text):
    path = tmp_path / 'roster.csv'
    path.write_text(text)
    return path


def test_a_roster_is_read_with_its_roles_and_names(admin, tmp_path):
    path = roster(tmp_path, 'username,role,name\nalice,student,Alice A\nta1,Grader,\n\n')
    assert admin.read_roster(path) == [('alice', 'student', 'Alice A'), ('ta1', 'grader', '')]


@pytest.mark.parametrize('text, said', [
    ('user,role\nalice,student\n', 'the first line should be the header username,role,name'),
    ('username,role\nAlice,student\n', "roster.csv:2: 'Alice' is not a Unix user name"),
    ('username,role\nalice,student\n-rf,student\n', "roster.csv:3: '-rf' is not a Unix user name"),
    ('username,role\nalice,teacher\n', "roster.csv:2: role 'teacher' for alice: write student or grader"),
    ('username,role\nalice,student\nalice,grader\n', 'roster.csv:3: alice is listed twice'),
    ('username,role,name\nalice,student,"A:B"\n', 'roster.csv:2: the name of alice holds a ":" or ","'),
])
def test_a_bad_roster_line_is_named_before_anything_is_done(admin, tmp_path, text, said):
    with pytest.raises(admin.Refused) as refused:
        admin.read_roster(roster(tmp_path, text))
    assert said in str(refused.value), str(refused.value)


def test_a_missing_roster_says_what_to_give(admin, tmp_path):
    with pytest.raises(admin.Refused) as refused:
        admin.read_roster(tmp_path / 'nowhere.csv')
    assert 'nowhere.csv: No such file or directory: give the roster CSV' in str(refused.value)


def test_settings_are_hub_envs_with_the_configs_defaults(admin, tmp_path):
    (tmp_path / 'etc').mkdir()
    (tmp_path / 'etc' / 'hub.env').write_text('# a comment\nCOURSE_INSTRUCTOR=\nCOURSE_STUDENTS_GROUP="cs101"\n'
                                               'COURSE_ROOT=/srv/course\n')
    conf = admin.settings()
    assert conf['COURSE_STUDENTS_GROUP'] == 'cs101' and conf['COURSE_GRADERS_GROUP'] == 'transformer-graders'
    assert 'COURSE_INSTRUCTOR' not in conf and conf['COURSE_ROOT'] == '/srv/course'


def test_a_restore_writes_only_the_hubs_files_and_the_gradebook(admin, tmp_path):
    conf = {'COURSE_ROOT': '/home/teacher/course'}
    assert admin.restorable(tmp_path / 'state' / 'jupyterhub.sqlite', conf)
    assert admin.restorable(tmp_path / 'etc' / 'hub.env', conf)
    assert admin.restorable(Path('/home/teacher/course/gradebook.db'), conf)
    for elsewhere in ('/etc/shadow', '/root/.ssh/authorized_keys', '/home/teacher/course/nbgrader_config.py',
                      str(tmp_path / 'state' / 'sub' / 'x')):
        assert not admin.restorable(Path(elsewhere), conf), elsewhere
