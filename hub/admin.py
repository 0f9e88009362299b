"""The hub's admin commands, as root (make hub installs them as /usr/local/sbin/transformer-hub; docs/hub.md):

  transformer-hub accounts ROSTER.csv      accounts, groups and initial passwords from a roster (safe to run again)
  transformer-hub backup [--to DIR]        the gradebook, the hub's state and its configuration, into one archive
  transformer-hub restore ARCHIVE          put them back (the hub is stopped meanwhile, and started again)

The settings (groups, instructor, course directory) are the hub's own: /etc/transformer-hub/hub.env.
"""

import argparse
import csv
import datetime
import grp
import io
import json
import os
import pwd
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ETC = Path(os.environ.get('HUB_ETC', '/etc/transformer-hub'))
STATE = Path(os.environ.get('HUB_STATE', '/var/lib/transformer-hub'))
UNIT = 'transformer-hub'
NAME = re.compile(r'[a-z_][a-z0-9_-]{0,31}')
ROLES = ('student', 'grader')


class Refused(Exception):
    """A one-line reason, naming the file and what to do; nothing was changed."""


def settings():
    """hub.env's settings (KEY=VALUE lines), with the defaults hub/jupyterhub_config.py gives the ones left out."""
    found = {}
    path = ETC / 'hub.env'
    if path.is_file():
        for line in path.read_text().splitlines():
            key, sep, value = line.strip().partition('=')
            if sep and not key.startswith('#'):
                found[key.strip()] = value.strip().strip('"\'')
    found = {k: v for k, v in found.items() if v}
    out = {'COURSE_ID': 'transformer-from-scratch', 'COURSE_STUDENTS_GROUP': 'transformer-students',
           'COURSE_GRADERS_GROUP': 'transformer-graders', 'COURSE_EXCHANGE': '/srv/nbgrader/exchange', **found}
    if out.get('COURSE_INSTRUCTOR') and 'COURSE_ROOT' not in out:
        try:
            out['COURSE_ROOT'] = str(Path(pwd.getpwnam(out['COURSE_INSTRUCTOR']).pw_dir) / out['COURSE_ID'])
        except KeyError:
            pass
    return out


def run(*argv, input=None):
    done = subprocess.run([str(a) for a in argv], input=input, capture_output=True, text=True)
    if done.returncode:
        raise Refused(f'{" ".join(map(str, argv[:3]))} failed: {(done.stderr or done.stdout).strip()}')
    return done.stdout


# --- accounts ---------------------------------------------------------------------------------------------------------

def read_roster(path):
    """[(username, role, full name)] from a CSV with a header: username, role (student or grader), and name (optional).
    Every line is checked before anything is done."""
    path = Path(path)
    try:
        text = path.read_text(encoding='utf-8-sig')
    except OSError as e:
        raise Refused(f'{path}: {e.strerror}: give the roster CSV (username,role,name)') from None
    rows = list(csv.DictReader(io.StringIO(text)))
    header = [h.strip().lower() for h in (csv.DictReader(io.StringIO(text)).fieldnames or [])]
    if 'username' not in header or 'role' not in header:
        raise Refused(f'{path}: the first line should be the header username,role,name (it is {",".join(header)!r})')
    out, seen = [], set()
    for number, row in enumerate(rows, start=2):
        row = {(k or '').strip().lower(): (v or '').strip() for k, v in row.items()}
        name, role, full = row.get('username', ''), row.get('role', '').lower(), row.get('name', '')
        if not name and not role:
            continue
        if not NAME.fullmatch(name):
            raise Refused(f'{path}:{number}: {name!r} is not a Unix user name (lower-case letters, digits, - and _, '
                          'up to 32, not starting with a digit or -): correct it, then run again')
        if role not in ROLES:
            raise Refused(f'{path}:{number}: role {role!r} for {name}: write student or grader')
        if name in seen:
            raise Refused(f'{path}:{number}: {name} is listed twice: keep one line')
        if re.search(r'[:,\n]', full):
            raise Refused(f'{path}:{number}: the name of {name} holds a ":" or ",": remove it')
        seen.add(name)
        out.append((name, role, full))
    return out


def group_members(group):
    try:
        return set(grp.getgrnam(group).gr_mem)
    except KeyError:
        return set()


def accounts(roster_path, passwords_path=None):
    """Make the roster's accounts (home 0700, a random initial password, printed once into a root-only file), put each
    in their role's group and out of the other's, make the groups if missing. Accounts that exist keep their password.
    Returns report lines."""
    conf = settings()
    roster = read_roster(roster_path)
    groups = {'student': conf['COURSE_STUDENTS_GROUP'], 'grader': conf['COURSE_GRADERS_GROUP']}
    lines, passwords = [], []
    for group in groups.values():
        try:
            grp.getgrnam(group)
        except KeyError:
            run('groupadd', group)
            lines.append(f'group {group}: created')
    for name, role, full in roster:
        try:
            entry = pwd.getpwnam(name)
            made = False
        except KeyError:
            run('useradd', '--create-home', '--shell', '/bin/bash', '--user-group', '--comment', full, name)
            entry = pwd.getpwnam(name)
            made = True
            password = secrets.token_urlsafe(9)
            run('chpasswd', input=f'{name}:{password}\n')
            passwords.append((name, role, password))
        home = Path(entry.pw_dir)
        if home.is_dir() and (home.stat().st_mode & 0o077):
            home.chmod(0o700)  # no one reads another's home
        want, other = groups[role], groups['grader' if role == 'student' else 'student']
        changed = []
        if name not in group_members(want):
            run('gpasswd', '-a', name, want)
            changed.append(f'added to {want}')
        if name in group_members(other):
            run('gpasswd', '-d', name, other)
            changed.append(f'removed from {other}')
        if made:
            lines.append(f'{name}: account created ({role}), {", ".join(changed)}')
        elif changed:
            lines.append(f'{name}: {", ".join(changed)}')
    listed = {name for name, _, _ in roster}
    for group in groups.values():
        extra = sorted(group_members(group) - listed)
        if extra:
            lines.append(f'note: in {group} but not in {roster_path}: {", ".join(extra)} (left as they are)')
    if passwords:
        stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
        out = Path(passwords_path or f'/root/transformer-hub-passwords-{stamp}.csv')
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'w', newline='') as f:
            writer = csv.writer(f)
            writer.writerow(['username', 'role', 'initial_password'])
            writer.writerows(passwords)
        lines.append(f'{len(passwords)} initial passwords in {out} (root only): hand each to its owner, who changes it '
                     'with passwd in a hub terminal; delete the file after')
    lines.append(f'{len(roster)} accounts in {roster_path}: {sum(r == "student" for _, r, _ in roster)} students, '
                 f'{sum(r == "grader" for _, r, _ in roster)} graders; nothing else to do (no restart)')
    return lines


# --- backup and restore -----------------------------------------------------------------------------------------------

def sqlite_copy(source, dest):
    """A consistent copy of a SQLite database that may be in use (SQLite's online backup)."""
    with sqlite3.connect(f'file:{source}?mode=ro', uri=True) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)


def what_to_back_up(conf):
    """[(name in the archive, path on this machine, is SQLite)]: the hub's state, its configuration, the gradebook."""
    items = [(f'state/{p.name}', p, p.suffix == '.sqlite') for p in sorted(STATE.glob('*'))
             if p.is_file() and p.name in ('jupyterhub.sqlite', 'jupyterhub_cookie_secret')]
    items += [(f'etc/{p.name}', p, False) for p in sorted(ETC.glob('*')) if p.is_file()]
    gradebook = course_gradebook(conf)
    if gradebook and gradebook.is_file() and not gradebook.is_symlink():  # the instructor's folder: never a link followed
        items.append(('course/gradebook.db', gradebook, True))
    return items


def course_gradebook(conf):
    root = conf.get('COURSE_ROOT')
    return Path(root, 'gradebook.db') if root else None


def restorable(path, conf):
    """Whether restore may write path: only where backup reads from (the hub's state and configuration, the course's
    gradebook), whatever an archive says."""
    return (path.parent in (STATE, ETC) and path.name != 'manifest.json') or path == course_gradebook(conf)


def backup(dest_dir):
    """Write one archive (0600) of the hub's state, its configuration and the course's SQLite gradebook; its path."""
    conf = settings()
    items = what_to_back_up(conf)
    if not any(name == 'course/gradebook.db' for name, _, _ in items):
        print(f'note: no gradebook.db in COURSE_ROOT={conf.get("COURSE_ROOT")}: a PostgreSQL gradebook is backed up '
              'with pg_dump (docs/gradebook.md)', file=sys.stderr)
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
    out = dest_dir / f'transformer-hub-backup-{stamp}.tar.gz'
    manifest = []
    with tempfile.TemporaryDirectory() as tmp:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as f, tarfile.open(fileobj=f, mode='w:gz') as tar:
            for name, path, is_sqlite in items:
                st = path.stat()
                source = path
                if is_sqlite:
                    source = Path(tmp, name.replace('/', '_'))
                    sqlite_copy(path, source)
                tar.add(source, arcname=name)
                manifest.append({'name': name, 'path': str(path), 'uid': st.st_uid, 'gid': st.st_gid,
                                 'mode': st.st_mode & 0o7777})
            data = json.dumps({'made': stamp, 'files': manifest}, indent=1).encode()
            info = tarfile.TarInfo('manifest.json')
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def systemd_active():
    return Path('/run/systemd/system').is_dir() and shutil.which('systemctl')


def restore(archive):
    """Put back every file of an archive made by backup, as it was (owner, mode), the hub stopped meanwhile."""
    archive = Path(archive)
    try:
        tar = tarfile.open(archive, 'r:gz')
    except (OSError, tarfile.TarError) as e:
        raise Refused(f'{archive}: not a backup made by transformer-hub backup ({e})') from None
    with tar:
        try:
            manifest = json.load(tar.extractfile('manifest.json'))
        except (KeyError, ValueError):
            raise Refused(f'{archive}: no manifest.json in it: not a backup made by transformer-hub backup') from None
        names = set(tar.getnames())
        entries = manifest.get('files', [])
        conf = settings()
        for e in entries:
            if e['name'] not in names or Path(e['path']).name != Path(e['name']).name:
                raise Refused(f'{archive}: {e["name"]} is listed but not there: the archive is damaged; nothing restored')
            if not restorable(Path(e['path']), conf):
                raise Refused(f'{archive}: names {e["path"]}, not a file of the hub ({STATE}, {ETC}) or the course\'s '
                              'gradebook (COURSE_ROOT in hub.env): nothing restored')
        running = systemd_active() and subprocess.run(['systemctl', 'is-active', '--quiet', UNIT]).returncode == 0
        if running:
            run('systemctl', 'stop', UNIT)
        try:
            for e in entries:
                path = Path(e['path'])
                if path.parent in (STATE, ETC):
                    path.parent.mkdir(mode=0o700 if path.parent == STATE else 0o755, parents=True, exist_ok=True)
                part = path.with_name(path.name + '.restoring')
                part.unlink(missing_ok=True)  # (a link left there is removed, never followed)
                fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with tar.extractfile(e['name']) as src, os.fdopen(fd, 'wb') as dst:
                    shutil.copyfileobj(src, dst)
                    os.fchown(dst.fileno(), e['uid'], e['gid'])
                    os.fchmod(dst.fileno(), e['mode'])
                for stale in (path.with_name(path.name + s) for s in ('-wal', '-shm', '-journal')):
                    stale.unlink(missing_ok=True)  # a SQLite database's log of the state being replaced
                part.replace(path)
        finally:
            if running:
                run('systemctl', 'start', UNIT)
    return [f'restored {e["path"]}' for e in entries] + [f'from {archive} (made {manifest.get("made")})'
                                                          + ('; the hub restarted' if running else '')]


def main(argv=None):
    ap = argparse.ArgumentParser(prog='transformer-hub', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='command', required=True)
    a = sub.add_parser('accounts', help='accounts, groups and initial passwords from a roster CSV (username,role,name)')
    a.add_argument('roster', help='CSV with a header: username, role (student or grader), name')
    a.add_argument('--passwords', help='where to write the new accounts\' initial passwords (default /root/...)')
    b = sub.add_parser('backup', help='the gradebook, the hub\'s state and configuration into one archive')
    b.add_argument('--to', default='/var/backups/transformer-hub', help='folder of the archive')
    r = sub.add_parser('restore', help='put back what an archive made by backup holds (stops and starts the hub)')
    r.add_argument('archive')
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit('error: transformer-hub: run as root (it manages accounts and the hub\'s files)')
    try:
        if args.command == 'accounts':
            print('\n'.join(accounts(args.roster, args.passwords)))
        elif args.command == 'backup':
            print(f'backup: {backup(args.to)} (restore with: transformer-hub restore <that file>)')
        else:
            print('\n'.join(restore(args.archive)))
    except Refused as e:
        sys.exit(f'error: transformer-hub {args.command}: {e}')


if __name__ == '__main__':
    main()
