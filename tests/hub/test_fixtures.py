"""The shared fixtures themselves: a test user runs the course's nbgrader, the exchange is as nbgrader documents it, and
the PostgreSQL server lets the instructor in and keeps a student out."""

import stat

import hubkit


def test_a_student_runs_nbgrader_with_the_global_config(unix_users, user_python, exchange):
    student = unix_users('fixture-student')
    done = hubkit.as_user(student, ['nbgrader', 'list'], hubkit.user_env(student, user_python, **exchange.env))
    assert 'Released assignments' in done.stdout + done.stderr, done.stdout + done.stderr
    mode = exchange.root.stat()
    assert (mode.st_uid, stat.S_IMODE(mode.st_mode)) == (0, 0o777), 'the exchange: root-owned, 0777 (nbgrader docs)'


def test_postgres_lets_the_grader_in_and_keeps_a_student_out(unix_users, user_python, postgres, monkeypatch):
    import sqlalchemy

    from course.classroom import gradebook

    monkeypatch.setenv(gradebook.ENV, postgres.database('fixtures'))
    url = gradebook.url()  # the course's one setting, as nbgrader_config.py reads it: root connects through psycopg 3
    with sqlalchemy.create_engine(url).connect() as db:
        assert db.execute(sqlalchemy.text('select current_user')).scalar() == postgres.ROLE
    student = unix_users('fixture-pgstudent')
    probe = [postgres.bin / 'psql', '-h', postgres.socket, '-U', postgres.ROLE, '-d', 'fixtures', '-Atc', 'select 1']
    refused = hubkit.as_user(student, probe, hubkit.user_env(student, user_python), check=False)
    assert refused.returncode != 0 and 'authentication failed' in refused.stderr, refused.stderr
    grader = unix_users('fixture-pggrader')
    postgres.allow(grader)
    assert hubkit.as_user(grader, probe, hubkit.user_env(grader, user_python)).stdout.strip() == '1'
    assert url.startswith('postgresql+psycopg://gradebook@/fixtures?host=')
