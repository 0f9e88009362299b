"""make backup, make clean-class and make restore (course.classroom.backup) on a PostgreSQL gradebook: pg_dump writes
the backup, clean-class drops nbgrader's tables only after it, pg_restore puts every row back. The SQLite round trip, and
the class's folders: tests/test_backup.py."""

import shutil
from datetime import datetime

from course.classroom import backup, gradebook
from course.layout import ROOT, class_path, class_state, notebooks, steps

STEP = steps()[0]  # the class's step: a step of the course (any one)


def rows(db_url):
    """(students with their emails, assignments with their due dates) of the gradebook at db_url."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return (sorted((s.id, s.email) for s in gb.students), sorted((a.name, str(a.duedate)) for a in gb.assignments))


def test_a_postgresql_gradebook_goes_through_backup_clean_class_and_restore(postgres, tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    monkeypatch.setenv(gradebook.ENV, postgres.database('backup_round_trip'))
    root = tmp_path
    for name in ('course.toml', 'nbgrader_config.py'):
        shutil.copy(ROOT / name, root / name)
    (root / 'source').symlink_to(ROOT / 'source')
    db_url = gradebook.configured(root)
    assert db_url.startswith('postgresql+psycopg://'), db_url
    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(STEP, duedate=datetime(2027, 1, 18, 8))
        for student in ('ada', 'bo'):
            gb.update_or_create_student(student, email=f'{student}@example.edu')
    (class_path('submitted', 'ada', STEP, root)).mkdir(parents=True)
    (class_path('submitted', 'ada', STEP, root) / notebooks(STEP)[0]).write_text('{}\n')
    before = rows(db_url)
    assert before == ([('ada', 'ada@example.edu'), ('bo', 'bo@example.edu')], [(STEP, '2027-01-18 08:00:00')])

    dest, lines = backup.remove_class(root)
    assert (dest / backup.PG_DUMP).stat().st_size > 0 and 'pg_dump' in lines[0], lines
    assert backup.has_class(root) is None and class_state(root) == []
    assert postgres.psql('backup_round_trip', "select count(*) from pg_tables where schemaname = 'public'").strip() == '0'

    backup.restore(dest, root)
    assert rows(db_url) == before
    assert (class_path('submitted', 'ada', STEP, root) / notebooks(STEP)[0]).read_text() == '{}\n'
    with Gradebook(db_url) as gb:  # nbgrader goes on using the restored gradebook
        gb.update_or_create_student('cy')
    assert [s for s, _ in rows(db_url)[0]] == ['ada', 'bo', 'cy']
