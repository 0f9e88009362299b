"""Where the gradebook lives. By default a SQLite file beside nbgrader_config.py, for one instructor on one machine; for a
class graded by several people at once (a course grader and teaching assistants in the formgrader), a PostgreSQL
database. One setting switches (docs/gradebook.md), read by nbgrader_config.py:

  COURSE_GRADEBOOK_URL=postgresql://gradebook@/gradebook?host=/run/postgresql   (the environment: a hub's spawner, CI)
  gradebook_url = "postgresql://gradebook@/gradebook?host=/run/postgresql"       (course.toml, for everyone of the course)

The environment wins over course.toml. The demo's own course (demo/, make demo) always has its own SQLite gradebook,
whatever either says: the demo never writes a real class's gradebook. A PostgreSQL URL is used through psycopg 3
(requirements.txt); keep the password out of it (libpq's ~/.pgpass or peer authentication on the server's unix socket).
"""

import contextlib
import os
import sqlite3
from pathlib import Path

from course.layout import GRADEBOOK, ROOT, SETTINGS, is_demo
from course.settings import load, shown

ENV = 'COURSE_GRADEBOOK_URL'
KEY = 'gradebook_url'
# One gradebook next to nbgrader_config.py; timeout=60 lets a busy SQLite wait instead of aborting a write after 5 s.
SQLITE = f'sqlite:///{GRADEBOOK}?timeout=60'
POSTGRES = ('postgresql+psycopg://', 'postgresql://', 'postgres://')  # the last two are given psycopg 3, the driver pinned


def url(root=ROOT):
    """The gradebook's SQLAlchemy URL as configured: $COURSE_GRADEBOOK_URL, else course.toml's gradebook_url, else SQLITE
    (relative to the course: course.runner.config() makes it absolute); SQLITE in the demo's own course, always. Exits
    with one line naming the setting if it is neither SQLite nor PostgreSQL."""
    if is_demo(root):
        return SQLITE
    toml = Path(root) / SETTINGS
    where, chosen = next(((w, v) for w, v in ((f'${ENV}', os.environ.get(ENV)),
                                             (f'{shown(toml)}: {KEY}', toml.is_file() and load(root).gradebook_url)) if v),
                         ('', SQLITE))
    if chosen.startswith('sqlite:///'):
        return chosen
    for prefix in POSTGRES:
        if chosen.startswith(prefix):
            return 'postgresql+psycopg://' + chosen.removeprefix(prefix)
    raise SystemExit(f'error: {where} is {chosen.split("://")[0]}://...: the gradebook is SQLite (leave it unset) or '
                     'PostgreSQL (postgresql://user@host/database); set it to one of them (docs/gradebook.md)')


def is_sqlite(db_url):
    return db_url.startswith('sqlite:')


def sqlite_file(db_url):
    """The file of a SQLite URL (None for another engine, or an in-memory database)."""
    if not is_sqlite(db_url):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(db_url).database
    return Path(database) if database else None


def prepare_for_workers(db_url):
    """Ready the gradebook for several nbgrader processes at once. SQLite: write-ahead logging, so that they read while
    one writes instead of waiting for it. PostgreSQL needs nothing: it locks rows, not the database."""
    path = sqlite_file(db_url)
    if path is not None:
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute('pragma journal_mode=wal')


def missing(db_url):
    """Why there is no gradebook to read yet (a line for the user), or None. Only a SQLite file can be missing: a
    PostgreSQL database is created by its administrator, and nbgrader makes the tables on first use."""
    path = sqlite_file(db_url)
    if path is not None and not path.is_file():
        return f'{path} does not exist: grade the class first (make grade)'
    return None


def configured(root=ROOT):
    """The URL nbgrader uses for the course at root: nbgrader_config.py's db_url (hence url()), made absolute; url()'s
    where the course has no nbgrader_config.py (a gradebook made by hand)."""
    from course import runner

    if (Path(root) / 'nbgrader_config.py').is_file():
        return runner.config(root=root).CourseDirectory.db_url
    chosen = url(root)
    path = sqlite_file(chosen)
    return chosen if path is None or path.is_absolute() else chosen.replace(str(path), str(Path(root).resolve() / path), 1)
