"""The shared fixtures themselves: a test user runs the course's nbgrader, the exchange is as nbgrader documents it, and
the PostgreSQL server lets the instructor in and keeps a student out."""

import stat
import time

from support.hub import hubkit


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


def test_removing_a_test_user_kills_its_processes_here_and_none_in_a_machine_beside(unix_users):
    """A process of the same user id in another PID namespace (a container's; a hub test's systemd machine shares the
    host's kernel, though machine.IDS keeps its accounts' ids apart) survives hubkit.kill_processes_of; the user's own
    process here does not."""
    import subprocess

    user = unix_users('fixture-pkill')
    beside = subprocess.Popen(['unshare', '--pid', '--fork', '--mount-proc', 'runuser', '-u', user.name, '--',
                               'sleep', '600'])
    here = subprocess.Popen(['runuser', '-u', user.name, '--', 'sleep', '600'])
    try:
        def sleeping():
            found = subprocess.run(['pgrep', '-u', user.name, '-x', 'sleep'], capture_output=True, text=True)
            return len(found.stdout.split())

        deadline = time.monotonic() + 60
        while sleeping() < 2 and time.monotonic() < deadline:  # both started: their sleep runs as the user
            time.sleep(0.05)
        assert sleeping() == 2, 'the two processes did not start'
        hubkit.kill_processes_of(user.name)
        assert here.wait(timeout=60) != 0, 'the process in this PID namespace should be killed'
        assert beside.poll() is None and sleeping() == 1, 'the process in another PID namespace was killed too'
    finally:
        beside.kill()
        subprocess.run(['pkill', '-KILL', '-u', user.name], capture_output=True)
        beside.wait()
