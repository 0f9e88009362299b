"""The gate for what a submission is, checked before anything reads it, on every way in: submitted/ filled by hand,
make collect (course.classroom.lms), the hub's collect (course.classroom.exchange_collect), the demo class. docs/security.md.

A submission is a folder of regular files and folders, nothing else:
  - no symbolic link, hard link, fifo, socket or device anywhere in it;
  - every name matches FILE_NAME (none of a pattern's characters, no control character, no separator), none is
    RESERVED, no folder is named like a notebook; the student's id matches STUDENT_ID (the pattern make collect's roster
    uses), so no id can be read as a glob pattern by nbgrader, nor print as anything but itself;
  - at most MAX_ENTRIES entries, MAX_DEPTH folders deep, each file at most MAX_FILE bytes and all of them MAX_TOTAL,
    measured on the opened file (fstat), never on a link's own size.
Anything else is refused: check() returns a Verdict ('refused' or 'over budget', and a detail naming the file, printed
safely), and the submission is not read, nor graded.

The walk never follows a link: each folder and file is opened relative to its parent's descriptor with O_NOFOLLOW (and a
file with O_NONBLOCK, so that a fifo put in place of a file while it runs cannot block it), and what is read is what was
checked (fstat of the descriptor). So copy() can copy from a folder its owner is still changing (the hub's inbound,
collected by the instructor's account) without being redirected: a file or folder swapped for a link meanwhile fails to
open, and the submission is refused.

Only the standard library: every layer of the course uses it.
"""

import errno
import fnmatch
import os
import re
import shutil
import stat
import unicodedata
from pathlib import Path
from typing import NamedTuple

from course.layout import GRADEBOOK

# A student id is a folder name in submitted/ and a name nbgrader puts in paths and glob patterns: letters, digits and
# . _ - (no *, ?, [, no space, no control character), starting with a letter or digit.
STUDENT_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,63}')
# A name in a submission: the same characters, and the space and parentheses of a browser's or Colab's copy
# ('step2_bigram (1).ipynb'); a leading dot or underscore ('.ipynb_checkpoints', '__pycache__').
FILE_NAME = re.compile(r'[A-Za-z0-9._][A-Za-z0-9 ._()+-]{0,127}')
# Names that would make a grading kernel's folder look like a course root (course.isolation.sandbox refuses to start
# there): refused here, with a status that says so, rather than failing later as 'not graded'.
RESERVED = frozenset({'nbgrader_config.py', GRADEBOOK, '.', '..'})
MAX_FILE = 64 << 20  # the largest file (a notebook with its outputs) the grader reads: course.cells.NOTEBOOK_BUDGET
MAX_TOTAL = 128 << 20  # all of a submission's files together
MAX_ENTRIES = 1000  # files and folders
MAX_DEPTH = 8  # folders below the submission's own
MARK = '.course-refused'  # what copy() leaves in place of a refused submission: the verdict, read back by check()

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Verdict(NamedTuple):
    status: str  # 'refused' or 'over budget'
    detail: str  # what, naming the file (printable())

    def __str__(self):
        return f'{self.status} ({self.detail})'


class Refused(Exception):
    """Raised by the walk; .verdict says why."""

    def __init__(self, status, detail):
        super().__init__(f'{status} ({detail})')
        self.verdict = Verdict(status, detail)


# Unicode categories that move a terminal's cursor, change its state, or hide text: control characters (newline,
# escape), format characters (right-to-left overrides, zero-width joiners), line and paragraph separators, surrogates,
# private use and unassigned code points.
HIDDEN = frozenset({'Cc', 'Cf', 'Zl', 'Zp', 'Cs', 'Co', 'Cn'})


def printable(text):
    """text with every character of HIDDEN written as its escape sequence (a newline as \\n, an escape as \\x1b, a
    right-to-left override as \\u202e), so that it stays one line and cannot move or restyle the terminal, the log or
    the spreadsheet that shows it."""
    text = str(text)
    if all(unicodedata.category(ch) not in HIDDEN for ch in text):
        return text
    return ''.join(ch.encode('unicode_escape').decode('ascii') if unicodedata.category(ch) in HIDDEN else ch
                   for ch in text)


def check_id(student):
    """None if student is a plain id (STUDENT_ID), else the Verdict that refuses it."""
    if STUDENT_ID.fullmatch(student):
        return None
    return Verdict('refused', f"student id '{printable(student)}' is not a plain name")


def kind(mode):
    """What a file that is not a regular file or a folder is, in words."""
    for test, name in ((stat.S_ISLNK, 'symbolic link'), (stat.S_ISFIFO, 'fifo'), (stat.S_ISSOCK, 'socket'),
                       (stat.S_ISCHR, 'device'), (stat.S_ISBLK, 'device')):
        if test(mode):
            return name
    return 'not a regular file'


def over(path, size, budget):
    return f'{printable(path)} is {size:,} bytes, over the {budget:,} the grader reads'


class Walk:
    """One walk of a submission's tree from an open folder descriptor: every entry checked (see the module), each
    regular file opened and handed to on_file(path, fd, st), each folder to on_folder(path, st), in name order.
    Raises Refused at the first entry that is not allowed."""

    def __init__(self, on_file=None, on_folder=None, max_file=MAX_FILE, max_total=MAX_TOTAL, max_entries=MAX_ENTRIES,
                 max_depth=MAX_DEPTH):
        self.on_file, self.on_folder = on_file, on_folder
        self.max_file, self.max_total, self.max_entries, self.max_depth = max_file, max_total, max_entries, max_depth
        self.entries = self.total = 0
        self.latest = 0.0  # the latest st_ctime seen (a change no account can backdate)

    def folder(self, dirfd, prefix='', depth=0):
        for name in sorted(os.listdir(dirfd)):
            path = prefix + name
            self.entries += 1
            if self.entries > self.max_entries:
                raise Refused('over budget', f'more than {self.max_entries:,} files and folders')
            if not FILE_NAME.fullmatch(name) or name in RESERVED:
                raise Refused('refused', f'file name: {printable(path)}')
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                raise Refused('refused', f'changed while read: {printable(path)}') from None
            self.latest = max(self.latest, st.st_ctime)
            if stat.S_ISDIR(st.st_mode):
                if name.endswith('.ipynb'):
                    raise Refused('refused', f'a folder named like a notebook: {printable(path)}')
                if depth + 1 > self.max_depth:
                    raise Refused('refused', f'folders nested over {self.max_depth} deep: {printable(path)}')
                fd = self.open(name, dirfd, _OPEN_DIR, path)
                try:
                    if self.on_folder:
                        self.on_folder(path, os.fstat(fd))
                    self.folder(fd, path + '/', depth + 1)
                finally:
                    os.close(fd)
            elif stat.S_ISREG(st.st_mode):
                fd = self.open(name, dirfd, _OPEN_FILE, path)
                try:
                    self.file(path, fd)
                finally:
                    os.close(fd)
            else:
                raise Refused('refused', f'{kind(st.st_mode)}: {printable(path)}')

    def open(self, name, dirfd, flags, path):
        """name opened relative to dirfd without following a link; Refused if it became one (or went) meanwhile."""
        try:
            return os.open(name, flags, dir_fd=dirfd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise Refused('refused', f'symbolic link: {printable(path)}') from None
            raise Refused('refused', f'changed while read: {printable(path)} ({os.strerror(e.errno)})') from None

    def file(self, path, fd):
        st = os.fstat(fd)  # what is read, not what a name said a moment ago
        if not stat.S_ISREG(st.st_mode):
            raise Refused('refused', f'{kind(st.st_mode)}: {printable(path)}')
        if st.st_nlink > 1:  # another name of a file elsewhere (an instructor's, say): not the student's own copy
            raise Refused('refused', f'hard link: {printable(path)}')
        if st.st_size > self.max_file:
            raise Refused('over budget', over(path, st.st_size, self.max_file))
        self.total += st.st_size
        if self.total > self.max_total:
            raise Refused('over budget', f'its files hold over the {self.max_total:,} bytes the grader reads')
        if self.on_file:
            self.on_file(path, fd, st)


def open_folder(base, *parts):
    """A descriptor of base/parts..., each of parts opened without following a link (base is the instructor's own, such
    as submitted/). Refused if one is a link or not a folder."""
    fd = os.open(base, _OPEN_DIR)
    for i, part in enumerate(parts):
        try:
            nxt = os.open(part, _OPEN_DIR, dir_fd=fd)
        except OSError as e:
            shown = printable('/'.join(parts[:i + 1]))
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                except OSError:
                    link = False
                os.close(fd)
                raise Refused('refused', f'{"symbolic link" if link else "not a folder"}: {shown}') from None
            os.close(fd)
            raise
        os.close(fd)
        fd = nxt
    return fd


def marked(dirfd):
    """The Verdict copy() left in a refused submission's folder (MARK), or None."""
    try:
        fd = os.open(MARK, _OPEN_FILE, dir_fd=dirfd)
    except OSError:
        return None
    with os.fdopen(fd, 'rb') as f:
        status, _, detail = f.read(1000).decode('utf-8', 'replace').partition('\n')
    return Verdict('over budget' if status == 'over budget' else 'refused', printable(detail.strip() or 'by collect'))


def check(base, *parts, **limits):
    """None if base/parts... (parts below base: the student's id and the step, say) is a submission the grader may read,
    else the Verdict that refuses it, naming the file. limits: Walk's max_file, max_total, max_entries, max_depth."""
    try:
        fd = open_folder(base, *parts)
    except Refused as e:
        return e.verdict
    try:
        verdict = marked(fd)
        if verdict:
            return verdict
        Walk(**limits).folder(fd)
    except Refused as e:
        return e.verdict
    finally:
        os.close(fd)
    return None


def read_file(path, limit=MAX_FILE):
    """The bytes of the regular file at path, opened without following a link and measured by fstat: OSError if it is a
    link (ELOOP) or not a regular file; Refused ('over budget') if it holds more than limit bytes (then nothing is read)."""
    fd = os.open(path, _OPEN_FILE)
    with os.fdopen(fd, 'rb') as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f'{kind(st.st_mode)}, not a regular file', str(path))
        if st.st_size > limit:
            raise Refused('over budget', over(Path(path).name, st.st_size, limit))
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew since
        raise Refused('over budget', over(Path(path).name, len(data), limit))
    return data


def size(path):
    """The size of the file at path as fstat gives it, opened without following a link (OSError for a link)."""
    fd = os.open(path, _OPEN_FILE)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


class Copied(NamedTuple):
    verdict: Verdict  # None if copied
    latest: float  # the latest change time (st_ctime) of anything in the copied tree: when it was last handed in


def copy(src, dest, ignore=(), **limits):
    """Copy the submission folder src to dest (made; it must not exist) through one Walk: never following a link,
    reading each file from the descriptor that was checked, at most its budget. ignore: fnmatch patterns of names not
    copied (nbgrader's CourseDirectory.ignore); they are checked all the same. If src is refused, dest holds only MARK,
    with the verdict, which check() reads back: the grade table then shows why. Returns Copied."""
    dest = Path(dest)
    made = []

    def ignored(path):
        return any(fnmatch.fnmatch(part, pat) for part in path.split('/') for pat in ignore)

    def on_folder(path, st):
        if not ignored(path):
            (dest / path).mkdir()
            made.append(path)

    def on_file(path, fd, st):
        if ignored(path):
            return
        left = walk.max_file
        with open(dest / path, 'xb') as out:
            while chunk := os.read(fd, min(1 << 20, left + 1)):
                left -= len(chunk)
                if left < 0:  # it grew while read
                    raise Refused('over budget', over(path, walk.max_file - left, walk.max_file))
                out.write(chunk)

    walk = Walk(on_file, on_folder, **limits)
    dest.mkdir(parents=True)
    try:
        fd = open_folder(src)
    except Refused:
        verdict = Verdict('refused', 'symbolic link: the submission\'s folder itself')
    else:
        try:
            walk.latest = os.fstat(fd).st_ctime
            walk.folder(fd)
            verdict = None
        except Refused as e:
            verdict = e.verdict
        finally:
            os.close(fd)
    if verdict:
        shutil.rmtree(dest)
        dest.mkdir()
        (dest / MARK).write_text(f'{verdict.status}\n{verdict.detail}\n')
    return Copied(verdict, walk.latest)

