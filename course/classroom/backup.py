"""A class's state backed up, restored, and removed only after a backup (docs/grading.md, "Backing up the class").

  python -m course.classroom.backup                  write backups/<UTC time>/: the gradebook and the class's folders
                                                     (make backup)
  python -m course.classroom.backup --restore DIR    put a backup back into a course that has no class   (make restore)
  python -m course.classroom.backup --remove-class   a backup first, then remove the class's state   (make clean-class)

The gradebook is copied by its engine's own consistent backup, safe while nbgrader writes to it: SQLite's online backup
(gradebook.db) or PostgreSQL's pg_dump (gradebook.pgdump, its custom format, which pg_restore reads). The class's folders
(course.layout.class_state: submitted/, autograded/, feedback/, results/, repairs/, reports/, lms/, the grading logs,
grades*.csv) go into class.tar.gz, their files and folders only (a link is left out, and listed). backup.json records what
the backup holds, with the sha256 of each file: a restore checks them first.
"""

import argparse
import contextlib
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from datetime import datetime, timezone
from pathlib import Path

from course.classroom import gradebook
from course.layout import BACKUPS, GRADEBOOK, ROOT, class_state

MANIFEST = 'backup.json'
SQLITE_COPY = GRADEBOOK  # a SQLite gradebook's copy keeps its name
PG_DUMP = 'gradebook.pgdump'
FOLDERS = 'class.tar.gz'


class BackupError(Exception):
    """What stops a backup, a restore or a removal before anything is lost: one line, naming the file and what to do."""


def _sha(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def postgres_tool(name):
    """The path of PostgreSQL's pg_dump or pg_restore: on PATH, else Debian's newest in /usr/lib/postgresql."""
    found = shutil.which(name) or next(iter(sorted(Path('/usr/lib/postgresql').glob(f'*/bin/{name}'), reverse=True,
                                                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)), None)
    if not found:
        raise BackupError(f'no {name}: the gradebook is PostgreSQL, and {name} is its backup tool: install PostgreSQL\'s '
                          'client (apt install postgresql-client), then run this again')
    return str(found)


def libpq_url(db_url):
    """A SQLAlchemy PostgreSQL URL (postgresql+psycopg://...) as libpq's tools take it (postgresql://...)."""
    return 'postgresql://' + db_url.split('://', 1)[1]


def _run(*args):
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines() or ['(no message)']
        raise BackupError(f'{Path(args[0]).name} failed: {lines[-1]}')


def stamp():
    return datetime.now(timezone.utc).strftime('%Y-%m-%dT%H%M%SZ')


def backup(root=ROOT, dest=None):
    """Write a backup of the class at root into dest (default backups/<UTC time>/, never over another); return
    (dest, lines to print)."""
    root = Path(root)
    db_url = gradebook.configured(root)
    if dest is None:
        base = root / BACKUPS / stamp()
        dest, n = base, 1
        while dest.exists():
            n += 1
            dest = base.with_name(f'{base.name}-{n}')
    dest = Path(dest)
    dest.mkdir(parents=True)
    lines, files = [], {}
    if gradebook.is_sqlite(db_url):
        path = gradebook.sqlite_file(db_url)
        if path is not None and path.is_file():
            with contextlib.closing(sqlite3.connect(path)) as db, contextlib.closing(
                    sqlite3.connect(dest / SQLITE_COPY)) as copy:
                db.backup(copy)  # SQLite's online backup: a consistent snapshot, even while nbgrader writes
            files[SQLITE_COPY] = _sha(dest / SQLITE_COPY)
            lines.append(f'the gradebook, {path.name}: SQLite\'s online backup, {SQLITE_COPY}')
        else:
            lines.append(f'no gradebook yet ({path}): nothing of it to back up')
    else:
        _run(postgres_tool('pg_dump'), '--format=custom', '--no-owner', '--no-privileges', '--file', str(dest / PG_DUMP),
             '--dbname', libpq_url(db_url))
        files[PG_DUMP] = _sha(dest / PG_DUMP)
        lines.append(f'the gradebook on PostgreSQL: pg_dump, {PG_DUMP}')
    skipped = []
    with tarfile.open(dest / FOLDERS, 'w:gz') as tar:
        count = 0
        for top in class_state(root):
            for path in [top, *sorted(top.rglob('*'))] if top.is_dir() and not top.is_symlink() else [top]:
                if path.is_symlink() or not (path.is_file() or path.is_dir()):
                    skipped.append(path.relative_to(root).as_posix())
                    continue
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
                count += path.is_file()
    files[FOLDERS] = _sha(dest / FOLDERS)
    lines.append(f'the class\'s folders: {count} files in {FOLDERS}'
                 + (f' (left out, not files: {", ".join(skipped[:5])}{" ..." if len(skipped) > 5 else ""})' if skipped
                    else ''))
    engine = 'sqlite' if gradebook.is_sqlite(db_url) else 'postgresql'
    (dest / MANIFEST).write_text(json.dumps({'made': datetime.now(timezone.utc).isoformat(timespec='seconds'),
                                             'gradebook': engine, 'files': files}, indent=1) + '\n')
    return dest, lines


def has_class(root=ROOT):
    """What of a class the course at root holds (a line), or None: its folders, or a gradebook with nbgrader's tables."""
    root = Path(root)
    state = class_state(root)
    if state:
        return f'{", ".join(p.relative_to(root).as_posix() for p in state[:4])}{" ..." if len(state) > 4 else ""}'
    db_url = gradebook.configured(root)
    if gradebook.is_sqlite(db_url):
        path = gradebook.sqlite_file(db_url)
        return path.name if path is not None and path.is_file() else None
    import sqlalchemy

    engine = sqlalchemy.create_engine(db_url)
    try:
        return 'the gradebook\'s tables on PostgreSQL' if sqlalchemy.inspect(engine).has_table('assignment') else None
    finally:
        engine.dispose()


def restore(source, root=ROOT):
    """Put the backup at source back into the course at root, which must hold no class; return the lines to print."""
    root, source = Path(root), Path(source)
    try:
        manifest = json.loads((source / MANIFEST).read_text())
        files = manifest['files']
    except (OSError, ValueError, KeyError, TypeError):
        raise BackupError(f'{source / MANIFEST}: missing or unreadable: give the folder make backup wrote '
                          f'({BACKUPS}/<time>)') from None
    for name, sha in files.items():
        if not (source / name).is_file() or _sha(source / name) != sha:
            raise BackupError(f'{source / name}: missing, or not the file the backup wrote (its sha256 differs): nothing '
                              'was restored')
    present = has_class(root)
    if present:
        raise BackupError(f'{root} holds a class ({present}): make clean-class first (it backs that class up), then '
                          'restore')
    db_url = gradebook.configured(root)
    lines = []
    if SQLITE_COPY in files or PG_DUMP in files:
        if gradebook.is_sqlite(db_url) != (SQLITE_COPY in files):
            raise BackupError(f'{source} holds a {manifest.get("gradebook")} gradebook, and this course\'s is '
                              f'{"SQLite" if gradebook.is_sqlite(db_url) else "PostgreSQL"}: restore it with the same '
                              'engine (docs/gradebook.md)')
        if SQLITE_COPY in files:
            target = gradebook.sqlite_file(db_url)
            for stale in target.parent.glob(f'{target.name}-*'):  # a removed gradebook's -wal, -shm, -journal
                stale.unlink()
            with contextlib.closing(sqlite3.connect(source / SQLITE_COPY)) as copy, contextlib.closing(
                    sqlite3.connect(target)) as db:
                copy.backup(db)
            lines.append(f'the gradebook: {target.name}, from {SQLITE_COPY}')
        else:
            _run(postgres_tool('pg_restore'), '--no-owner', '--no-privileges', '--exit-on-error', '--dbname',
                 libpq_url(db_url), str(source / PG_DUMP))
            lines.append(f'the gradebook on PostgreSQL, from {PG_DUMP}')
    with tarfile.open(source / FOLDERS, 'r:gz') as tar:
        members = tar.getmembers()
        for m in members:  # ours, but checked as any archive: inside the course, files and folders only
            parts = Path(m.name).parts
            if Path(m.name).is_absolute() or '..' in parts or not (m.isfile() or m.isdir()):
                raise BackupError(f'{source / FOLDERS}: {m.name!r} is not a file or folder inside the course: nothing of '
                                  'the folders was restored')
        safe = {'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}  # Python 3.11.4 on: tarfile's own check too
        for m in members:
            tar.extract(m, root, set_attrs=False, **safe)
    lines.append(f'the class\'s folders: {sum(m.isfile() for m in members)} files')
    return lines


def remove_class(root=ROOT):
    """Back up the class at root, then remove it: the gradebook (the SQLite file; on PostgreSQL, nbgrader's tables) and
    the class's folders. Returns (the backup's folder, lines to print)."""
    root = Path(root)
    dest, lines = backup(root)
    db_url = gradebook.configured(root)
    if gradebook.is_sqlite(db_url):
        path = gradebook.sqlite_file(db_url)
        for p in [path, *path.parent.glob(f'{path.name}-*')] if path is not None else []:
            p.unlink(missing_ok=True)
    else:
        import sqlalchemy
        from nbgrader.api import Base

        engine = sqlalchemy.create_engine(db_url)
        try:
            Base.metadata.drop_all(engine)
            with engine.begin() as db:
                db.execute(sqlalchemy.text('drop table if exists alembic_version'))
        finally:
            engine.dispose()
    for path in class_state(root):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return dest, lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.classroom.backup', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group()
    what.add_argument('--restore', metavar='DIR', help=f'put the backup in DIR ({BACKUPS}/<time>) back')
    what.add_argument('--remove-class', action='store_true',
                      help='back the class up, then remove it: the gradebook and its folders (a new term)')
    args = ap.parse_args(argv)
    try:
        if args.restore:
            lines = restore(args.restore)
            print(f'restored from {args.restore}: ' + '; '.join(lines))
            return
        dest, lines = remove_class() if args.remove_class else backup()
    except BackupError as e:
        sys.exit(f'error: {e}')
    shown = dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest
    print(f'wrote {shown}/: ' + '; '.join(lines))
    if args.remove_class:
        print(f'removed the class: the gradebook ({GRADEBOOK}, or its tables on PostgreSQL) and its folders; '
              f'make restore BACKUP={shown} puts them back')
    else:
        print(f'make restore BACKUP={shown} puts it back (into a course with no class: make clean-class first)')


if __name__ == '__main__':
    main()
