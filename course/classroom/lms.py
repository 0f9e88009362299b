"""A class through an LMS: the glue nbgrader's own `zip_collect` lacks (docs/lms.md), and the platforms' registry.

Each LMS is one module, course/classroom/lms_<key>.py, holding PLATFORM: a Platform (below), the small interface the rest
of the course calls (how its bulk download names files, the collector plugin, the grade file or the passback, the
feedback package, where to upload what it wrote). platforms() finds them all: adding Blackboard is lms_blackboard.py.
Today: lms_canvas (Canvas), lms_moodle (Moodle), lms_lti13 (any LMS by LTI 1.3 Advantage: grades and roster by its
services, docs/lti.md).

nbgrader's ZipCollectApp does the collecting: it extracts the download (SafeExtractor, an ExtractorPlugin that refuses
what no LMS writes, before writing anything) and asks its collector plugin, for each file, whose work it is and which
notebook: CanvasCollector or MoodleCollector, FileNameCollectorPlugins whose `named_regexp` is the LMS's documented
naming. Ours add what a Colab class needs: the student through the roster (the LMS's user id), the step through the
notebook's name as Colab and browsers rename it (`Copy of ...`, ` (1)`, spaces), the newest of several files, the
LMS's late mark or the instructor's times, and one report line for every file not collected (never dropped silently,
never guessed). The roster goes into the gradebook with nbgrader's Gradebook.update_or_create_student.

Refused inputs raise Refused, one line naming the file; nothing is written before the checks pass.
"""

import contextlib
import csv
import functools
import importlib
import pkgutil
import re
import shutil
import stat
import unicodedata
import zipfile
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from traitlets import Int, Unicode

from course import gate
from course.layout import ROOT, feedback_path, lms_path, notebooks, steps, submitted_path

ROSTER_COLUMNS = ('id', 'first_name', 'last_name', 'email', 'lms_id')
STUDENT_ID = gate.STUDENT_ID  # a student id is a folder name in submitted/: the one pattern every way in uses


class Refused(Exception):
    """Input refused before anything was written: str() is the one line to show (the file, and what to do)."""


class Student(NamedTuple):
    id: str
    first_name: str
    last_name: str
    email: str
    lms_id: str


def read_table(path, columns, what):
    """[(value of each column, stripped)] of each row of a CSV the instructor wrote (UTF-8, a header row naming at least
    columns); Refused, naming the file: none there, not a UTF-8 CSV, or a column missing."""
    path = Path(path)
    if not path.is_file():
        raise Refused(f'{path}: no such {what}: write a CSV with the columns {", ".join(columns)}')
    try:
        with open(path, newline='', encoding='utf-8-sig') as f:
            reader = csv.DictReader(f)
            rows, header = list(reader), reader.fieldnames or []
    except (UnicodeDecodeError, csv.Error) as e:
        raise Refused(f'{path}: not a UTF-8 CSV ({e}): save the {what} as CSV UTF-8') from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise Refused(f'{path}: no column {", ".join(missing)} (a {what} has the columns {", ".join(columns)})')
    return [tuple((row[c] or '').strip() for c in columns) for row in rows]


def read_roster(path):
    """{lms_id: Student} from a roster CSV (ROSTER_COLUMNS, one header row), or from Canvas's gradebook export as it is
    (read_canvas_export); Refused on a missing column, an id that is not a plain folder name, or an id or LMS id given
    twice. An empty email is accepted: Canvas matches grades by its user id, Moodle's worksheet by the participant id;
    only Moodle's gradebook import (by email) leaves such a student out."""
    if canvas_export(path):
        rows = read_canvas_export(path)
    else:
        rows = read_table(path, ROSTER_COLUMNS, 'roster')
    out, ids = {}, set()
    for line, row in enumerate(rows, start=2):
        s = Student(*row)
        if not STUDENT_ID.fullmatch(s.id):
            raise Refused(f'{path}, line {line}: id {s.id!r} is not a plain name (letters, digits, . _ -): fix it')
        if not s.lms_id.isdigit():
            raise Refused(f'{path}, line {line}: lms_id {s.lms_id!r} is not the LMS user id (a number): fix it')
        if s.id in ids or s.lms_id in out:
            raise Refused(f'{path}, line {line}: {s.id if s.id in ids else "lms_id " + s.lms_id} is given twice: keep one'
                          + (' (two SIS Login IDs give that id: write a roster.csv, docs/lms.md)' if s.id in ids and
                             canvas_export(path) else ''))
        ids.add(s.id)
        out[s.lms_id] = s
    return out


CANVAS_EXPORT = ('Student', 'ID', 'SIS User ID', 'SIS Login ID')  # the first columns of Canvas's gradebook export


def canvas_export(path):
    """Whether path is Canvas's gradebook export (Grades > Export > Export Entire Gradebook): its header starts so."""
    try:
        with open(path, newline='', encoding='utf-8-sig') as f:
            return tuple(next(csv.reader(f), [])[:4]) == CANVAS_EXPORT
    except (OSError, UnicodeDecodeError, csv.Error):
        return False


def read_canvas_export(path):
    """Roster rows (ROSTER_COLUMNS) from Canvas's gradebook export: Student is "Last, First" (Canvas's sortable name), ID
    the Canvas user id (lms_id). The student's id in the course is their SIS Login ID (its part before an @), else
    canvas-<ID>; the email is the SIS Login ID when it is one, else empty (the export has no email column). The
    "Points Possible" row and Canvas's Test Student are left out."""
    out = []
    for name, lms_id, _sis_user, login in read_table(path, CANVAS_EXPORT, "Canvas's gradebook export"):
        if not lms_id or name == 'Points Possible' or name in ('Student, Test', 'Test Student'):
            continue
        last, _, first = name.partition(', ')
        local = login.split('@')[0]
        sid = local if STUDENT_ID.fullmatch(local) else f'canvas-{lms_id}'
        out.append((sid, first.strip(), last.strip(), login if '@' in login else '', lms_id))
    return out


def import_roster(roster, gradebook):
    """Every student of the roster into the gradebook (nbgrader's update_or_create_student), with the LMS id."""
    for s in roster.values():
        gradebook.update_or_create_student(s.id, first_name=s.first_name, last_name=s.last_name, email=s.email,
                                           lms_user_id=s.lms_id)


def normalised(name):
    """A notebook's name as Colab and browsers rename it, reduced to compare: 'Copy of step2_bigram (1).ipynb',
    'step2 bigram-1.ipynb' and 'step2_bigram.ipynb' are all 'step2_bigram'."""
    stem = unicodedata.normalize('NFKC', PurePosixPath(name).stem).casefold().strip()
    while True:
        shorter = re.sub(r'^copy[\s_-]+of[\s_-]+', '', stem)  # Colab's File > Save a copy
        shorter = re.sub(r'(\s*\(\d+\)|-\d+)$', '', shorter).strip()  # a browser's ' (1)', Canvas's '-1'
        if shorter == stem:
            return re.sub(r'[\s_.+-]+', '_', stem).strip('_')
        stem = shorter


def notebook_of(name, root=ROOT):
    """(step, notebook) whose release notebook name name is, once normalised; None if none."""
    want = normalised(name)
    for step in steps(root):
        for nb in notebooks(step, root):
            if normalised(nb) == want:
                return step, nb
    return None


class Entry(NamedTuple):
    """One file of an LMS download, as its name says."""
    path: str  # inside the download
    lms_id: str
    original: str  # the file's name as the student uploaded it
    order: int  # the LMS's number of the file (Canvas: its attachment id), higher is newer; 0 if none
    late: bool  # the LMS marks it late


class Naming:
    """An LMS's bulk-download naming: a regular expression over a file's path in the download (named groups lms_id,
    original; optionally order and late). ordered: the names tell the newest of a student's files (an upload number);
    without it, only the instructor's times do."""

    def __init__(self, name, regexp, ordered=True):
        self.name, self.regexp, self.ordered = name, re.compile(regexp), ordered

    def parse(self, path):
        m = self.regexp.fullmatch(path)
        if not m:
            return None
        g = m.groupdict()
        return Entry(path, g['lms_id'], g['original'], int(g.get('order') or 0), bool(g.get('late')))


class Platform:
    """One LMS, as the course meets it; each course/classroom/lms_<key>.py holds one as PLATFORM (platforms() finds it).
    The defaults do nothing: a platform overrides what it has."""

    key = ''  # its name in commands: make collect LMS=<key>
    name = ''  # as people write it
    naming = None  # a Naming: how its bulk download names each file (None: it has no download to collect)
    collector = None  # the nbgrader FileNameCollectorPlugin (an LmsCollector) that reads that download
    by_services = False  # grades and roster go by the LMS's web services (LTI Advantage), not files

    def used(self, gradebook, root=ROOT):
        """Whether this class goes through this LMS (what export writes for it, and make grade names)."""
        return False

    def write_grades(self, gradebook, table, root=ROOT):
        """Write what the LMS imports from table (course.reports.export.rows()); return the paths written."""
        return []

    def package_feedback(self, gradebook, root=ROOT):
        """Write the students' feedback pages packaged as the LMS takes them back; return the paths written."""
        return []

    def upload_hint(self, root=ROOT):
        """Lines saying which file written in lms/ goes where in the LMS (make grade prints them)."""
        return []


class DownloadPlatform(Platform):
    """A platform whose class hands in through its bulk download (make collect): it serves a class as lms_class() says."""

    def used(self, gradebook, root=ROOT):
        return lms_class(gradebook, self.key, root)


def points(x):
    """A score as the LMS's files write it: 19, 19.5, 19.25."""
    return f'{x:.2f}'.rstrip('0').rstrip('.')


@functools.cache
def platforms():
    """{key: Platform} of every course/classroom/lms_<key>.py (its PLATFORM), by key."""
    from course import classroom

    found = [importlib.import_module(f'course.classroom.{m.name}').PLATFORM
             for m in pkgutil.iter_modules(classroom.__path__) if m.name.startswith('lms_')]
    return {p.key: p for p in sorted(found, key=lambda p: p.key)}


def downloads():
    """{key: Platform} of the platforms whose bulk download make collect takes."""
    return {k: p for k, p in platforms().items() if p.naming is not None}


def used(gradebook, root=ROOT):
    """The platforms this class goes through."""
    return [p for p in platforms().values() if p.used(gradebook, root)]


def where_to_upload(root=ROOT):
    """What make grade prints last: for each platform whose files are in lms/, which goes where in the LMS ('' if none)."""
    lines = [line for p in platforms().values() for line in p.upload_hint(root)]
    return ''.join(f'{line}\n' for line in ['', 'for the LMS:', *lines] if lines)


def lms_class(gradebook, key, root=ROOT):
    """Whether a class collected from LMS downloads goes through platform key: some student has an LMS id (a roster
    was imported) and no file was collected from another LMS's download; no platform that takes the grades by its own
    services (LTI) serves the class."""
    if not any(s.lms_user_id for s in gradebook.students) or any(
            p.by_services and p.used(gradebook, root) for p in platforms().values()):
        return False
    sources = {r['lms'] for m in sorted(lms_path(root).glob('collected-*.csv'))
               for r in read_manifest(m.stem.removeprefix('collected-'), root).values()}
    return not sources or key in sources


def iso_utc(text):
    """An ISO 8601 date-time (without an offset: UTC) as a UTC datetime without tzinfo, as nbgrader keeps times;
    ValueError for anything else. nbgrader's parse_utc would guess (dateutil reads 'monday' as a date, and 02/12/2026 as
    February): a time that decides a late penalty is never guessed."""
    t = datetime.fromisoformat(text.strip())
    return t.astimezone(timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def read_times(path):
    """{path in the download: UTC datetime (naive)} from the instructor's times CSV (columns file, timestamp: ISO 8601;
    without an offset, UTC)."""
    if not path:
        return {}
    out = {}
    for line, (name, when) in enumerate(read_table(path, ('file', 'timestamp'), 'times file'), start=2):
        try:
            out[name] = iso_utc(when)
        except (ValueError, OverflowError):
            raise Refused(f'{path}, line {line}: {when!r} is not a time (write 2026-12-01 23:59:00+00:00)') from None
    return out


class Decision(NamedTuple):
    entry: Entry
    student: str
    step: str
    notebook: str
    timestamp: datetime  # UTC, naive; None: on time as far as anyone knows
    note: str  # how the time was found


def classify(paths, lms, roster, times, due, root=ROOT, regexp=None):
    """Decide, for every file of a download (paths inside it, directories excluded), what collect does with it:
    ({path: Decision} of the files collected, one per student and notebook; [report line] for every other file).
    due: {step: UTC due date (naive) or None}; regexp: the naming, if not the LMS's own (its platform's)."""
    own = platforms()[lms].naming
    naming = Naming(own.name, regexp, own.ordered) if regexp else own
    lines, candidates = [], {}
    for path in sorted(paths):
        entry = naming.parse(path)
        if entry is None:
            lines.append(f'not collected: {path}: not named as {naming.name} names a submission')
            continue
        student = roster.get(entry.lms_id)
        if student is None:
            lines.append(f'not collected: {path}: {naming.name} user {entry.lms_id} is not on the roster (add them, '
                         'then collect again)')
            continue
        if PurePosixPath(entry.original).suffix.casefold() != '.ipynb':
            lines.append(f'not collected: {path}: {student.id} uploaded {entry.original!r}, not a notebook')
            continue
        found = notebook_of(entry.original, root)
        if found is None:
            lines.append(f'not collected: {path}: {student.id} uploaded {entry.original!r}, the name of no step\'s '
                         'notebook (if it is one, copy it to submitted/<student>/<step>/<notebook> by hand)')
            continue
        candidates.setdefault((student.id, *found), []).append(entry)
    chosen = {}
    for (student, step, nb), entries in sorted(candidates.items()):
        timed = [e for e in entries if e.path in times]
        if len(entries) > 1 and len(timed) < len(entries) and not naming.ordered:
            names = ', '.join(e.path for e in entries)
            lines.append(f'not collected: {names}: {len(entries)} files of {step} from {student} and no time to tell '
                         'the newest (give each one a time in --times)')
            continue
        # newest: the instructor's time first, then the LMS's own order (Canvas: the attachment id)
        ranked = sorted(entries, key=lambda e: (times.get(e.path, datetime.min), e.order))
        winner = ranked[-1]
        for e in ranked[:-1]:
            lines.append(f'not collected: {e.path}: an older file of {step} from {student} than {winner.path}')
        stamp, note = times.get(winner.path), 'time given in --times' if winner.path in times else ''
        if stamp is None and winner.late:
            if due.get(step) is None:
                lines.append(f'note: {winner.path}: {naming.name} marks it late but {step} has no due date (give '
                             '--due): graded as on time')
            else:  # the download says late, not how late: one second past the due date, unless --times says more
                stamp, note = due[step] + timedelta(seconds=1), f'marked late by {naming.name}, which gives no ' \
                    'time: 1 s past the due date; give its time in --times to say how late'
        chosen[winner.path] = Decision(winner, student, step, nb, stamp, note)
    return chosen, lines


class SafeExtractor(ExtractorPlugin):
    """nbgrader's ExtractorPlugin for an LMS download: a zip is checked whole before anything is written, and refused
    (Refused, naming the zip and the entry) if an entry would land outside the folder (an absolute path, `..`) or is a
    symlink, neither of which an LMS writes. An entry over max_file_bytes (by the size the zip declares, and as it is
    written), past max_total_bytes in all, or damaged, is not extracted and is listed. Nested archives are not opened:
    a student's zip is not a notebook."""

    max_file_bytes = Int(50 << 20, help='the largest file of a download that is extracted (bytes); larger ones are '
                                         'listed, not extracted').tag(config=True)
    max_total_bytes = Int(4 << 30, help='the most bytes extracted from one download; the files past it are listed, '
                                         'not extracted').tag(config=True)
    max_entries = Int(20000, help='the most entries a download may hold').tag(config=True)

    def extract(self, archive_path, extracted_path):
        self.skipped = getattr(self, 'skipped', [])
        for archive in sorted(Path(archive_path).iterdir()):
            dest, total = Path(extracted_path) / archive.stem, 0
            for info in check_zip(archive, self.max_entries):
                name = info.filename
                if info.is_dir():
                    continue
                if info.file_size > self.max_file_bytes:
                    self.skipped.append(f'not collected: {name}: {size(info.file_size)}, over the '
                                        f'{size(self.max_file_bytes)} a file may hold (not extracted)')
                    continue
                if total + info.file_size > self.max_total_bytes:
                    self.skipped.append(f'not collected: {name}: the files before it hold {size(total)}, and one '
                                        f'download may hold {size(self.max_total_bytes)} (not extracted)')
                    continue
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with zipfile.ZipFile(archive) as z, z.open(info) as src, open(target, 'wb') as out:
                        copied = copy_capped(src, out, self.max_file_bytes)
                except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
                    target.unlink(missing_ok=True)
                    self.skipped.append(f'not collected: {name}: damaged in the zip ({e}); download it again')
                    continue
                if copied is None:  # its data is larger than the zip declares
                    target.unlink()
                    self.skipped.append(f'not collected: {name}: holds more than the {size(self.max_file_bytes)} a '
                                        'file may hold (not extracted)')
                    continue
                total += copied


def size(n):
    return f'{n / (1 << 30):.1f} GB' if n >= 1 << 30 else f'{n / (1 << 20):.0f} MB'


def copy_capped(src, out, limit):
    """Copy src to out, stopping past limit bytes: the bytes copied, or None past the limit."""
    total = 0
    while chunk := src.read(1 << 20):
        total += len(chunk)
        if total > limit:
            return None
        out.write(chunk)
    return total


def check_zip(path, max_entries=20000):
    """The ZipInfo of every entry of an LMS download, or Refused: not a zip, too many entries, an entry outside the
    folder (absolute, `..`, a drive letter) or a symlink."""
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise Refused(f'{path}: not a zip file: give the file the LMS\'s "download all submissions" saved')
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
    if len(infos) > max_entries:
        raise Refused(f'{path}: {len(infos)} entries, over {max_entries}: not an LMS download of one class')
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name.replace('\\', '/')).parts
        if name.startswith(('/', '\\')) or '..' in parts or re.match(r'^[A-Za-z]:', name):
            raise Refused(f'{path}: entry {name!r} would be written outside the folder: no LMS writes that; nothing '
                          'was collected (download it again from the LMS)')
        if stat.S_ISLNK(info.external_attr >> 16):
            raise Refused(f'{path}: entry {name!r} is a symlink: no LMS writes that; nothing was collected (download '
                          'it again from the LMS)')
    return infos


class LmsCollector(FileNameCollectorPlugin):
    """nbgrader's FileNameCollectorPlugin for an LMS download: named_regexp is the LMS's naming; each file goes to its
    student through the roster and to its notebook through its name (course.classroom.lms.classify), or is reported."""

    lms = ''
    roster = Unicode('roster.csv', help='the roster CSV (id, first_name, last_name, email, lms_id)').tag(config=True)
    times = Unicode('', help='a CSV of times (file, timestamp) for files whose download carries none').tag(config=True)
    due = Unicode('', help="the step's due date (ISO 8601 with its offset; without one, UTC), for a file the LMS marks late"
                  ).tag(config=True)

    def decide(self):
        """classify() every file the extractor wrote (once)."""
        if getattr(self, 'decisions', None) is None:
            app = self.parent
            self.extracted = Path(app._format_collect_path(app.extracted_directory))
            archive = next(Path(app._format_collect_path(app.archive_directory)).iterdir())
            self.prefix = self.extracted / archive.stem
            paths = [p.relative_to(self.prefix).as_posix() for p in self.prefix.rglob('*') if p.is_file()]
            due = {app.coursedir.assignment_id: iso_utc(self.due) if self.due else None}
            chosen, self.lines = classify(paths, self.lms, read_roster(self.roster), read_times(self.times), due,
                                          Path(app.coursedir.root), self.named_regexp)
            step = app.coursedir.assignment_id
            self.decisions = {p: d for p, d in chosen.items() if d.step == step}
        return self.decisions

    def collect(self, submitted_file):
        d = self.decide().get(Path(submitted_file).relative_to(self.prefix).as_posix())
        if d is None:
            return None
        return {'student_id': d.student, 'file_id': d.notebook,
                'timestamp': d.timestamp.replace(tzinfo=timezone.utc).isoformat(' ') if d.timestamp else None}




MANIFEST_COLUMNS = ['student_id', 'step', 'notebook', 'lms', 'lms_id', 'file', 'timestamp', 'late', 'note']


def manifest_path(step, root=ROOT):
    """What collect took for a step, one row per student (MANIFEST_COLUMNS): lms/collected-<step>.csv."""
    return lms_path(root) / f'collected-{step}.csv'


def read_manifest(step, root=ROOT):
    path = manifest_path(step, root)
    if not path.exists():
        return {}
    with open(path, newline='') as f:
        return {r['student_id']: r for r in csv.DictReader(f)}


def write_manifest(step, rows, root=ROOT):
    path = manifest_path(step, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = {**read_manifest(step, root), **rows}
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, MANIFEST_COLUMNS)
        w.writeheader()
        w.writerows(merged[k] for k in sorted(merged))


def now():
    return datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')


def same(staged, target):
    """Whether every file of staged is in target as it is (or as collected: course.grader.repair keeps it in .original/)."""
    for p in staged.rglob('*'):
        if p.is_file():
            rel = p.relative_to(staged)
            data = p.read_bytes()
            if not any(q.is_file() and q.read_bytes() == data for q in (target / rel, target / '.original' / rel)):
                return False
    return True


def zip_collect(step, zip_path, lms, roster_path, times_path, due, staging, root):
    """nbgrader's ZipCollectApp on one step, in this process, into staging/submitted: our extractor and collector
    plugins, the zip linked into staging/downloaded/<step>/archive/. Returns (decisions, report lines)."""
    from nbgrader.apps import ZipCollectApp
    from traitlets.config import Config

    from course import runner

    rel = staging.relative_to(root)
    archive = staging / 'downloaded' / step / 'archive'
    archive.mkdir(parents=True)
    (archive / zip_path.name).symlink_to(zip_path)
    extra = Config()
    extra.Application.log_level = 'ERROR'
    extra.CourseDirectory.submitted_directory = str(submitted_path(root=rel))
    extra.ZipCollectApp.downloaded_directory = str(rel / 'downloaded')
    extra.ZipCollectApp.extractor_plugin = SafeExtractor
    extra.ZipCollectApp.collector_plugin = platforms()[lms].collector
    extra.LmsCollector.roster = str(roster_path)
    extra.LmsCollector.times = str(times_path or '')
    extra.LmsCollector.due = due.isoformat(' ') + '+00:00' if due else ''
    app = ZipCollectApp(config=runner.config(extra, root))
    with contextlib.chdir(root):  # the app reads nbgrader_config.py from its cwd
        app.initialize([step])
        app.start()
    collector = app.collector_plugin_inst  # decisions and lines exist once it was asked about a file
    decisions = getattr(collector, 'decisions', None) or {}
    return decisions, getattr(app.extractor_plugin_inst, 'skipped', []) + getattr(collector, 'lines', [])


def scheduled_due(step, root=ROOT):
    """The step's due date in course.toml's [schedule] (what the student README shows), in UTC without an offset, as
    nbgrader keeps it; None if the schedule gives none."""
    from course.settings import load

    dates = load(root).schedule.get(step)  # checked on load: a bad date stops with one line naming it
    return dates.due_utc if dates else None


def collect(zip_path, lms, roster_path, times_path=None, due=None, only_step=None, root=ROOT):
    """Collect an LMS download into submitted/<student>/<step>/ with nbgrader's zip_collect: the roster into the
    gradebook, due (a string, for every step the download holds, or only_step) into it too; a student's earlier copy
    that differs is moved to lms/replaced/<time>/. Returns the report lines (also written to lms/collect-<time>.txt)."""
    from nbgrader.api import Gradebook, MissingEntry

    from course import runner
    from course.layout import DEMO_MARK

    root = Path(root).resolve()
    zip_path = Path(zip_path).resolve()
    if not zip_path.is_file():
        raise Refused(f'{zip_path}: no such file: give the zip the LMS\'s "download all submissions" saved')
    roster_path = Path(roster_path).resolve()
    roster, times = read_roster(roster_path), read_times(times_path)
    infos = check_zip(zip_path)
    try:
        due_at = iso_utc(due) if due else None
    except (ValueError, OverflowError):
        raise Refused(f'--due {due!r}: not a time (write 2026-12-01 23:59:00+00:00)') from None
    submitted = submitted_path(root=root)
    if (submitted / DEMO_MARK).exists():
        raise Refused(f'{submitted}: holds a demo class that an older make demo left there (make demo now grades in demo/): '
                      'make clean-class (it backs it up first), then collect')
    chosen, scanned = classify([i.filename for i in infos if not i.is_dir()], lms, roster, times, {}, root)
    present = [only_step] if only_step else sorted({d.step for d in chosen.values()})
    if not present:
        others = ' or '.join(p.name for k, p in downloads().items() if k != lms)
        return [printable(line) for line in scanned + [
            f'nothing collected from {zip_path}: no file in it is a rostered student\'s notebook named as '
            f'{platforms()[lms].name} names them (is it a {others} download?)']]
    others = [f'not collected: {path}: a notebook of {d.step}, and --step is {only_step}'
              for path, d in sorted(chosen.items()) if d.step not in present]
    names = {i.filename for i in infos}
    others += [f'note: {times_path}: {name!r} names no file of the download: its time was not used (check the name)'
               for name in sorted(times) if name not in names]
    planned = {step: scheduled_due(step, root) for step in present}
    c = runner.config(root=root)
    with Gradebook(c.CourseDirectory.db_url, c.CourseDirectory.course_id) as gb:
        import_roster(roster, gb)
        dues = {}
        for step in present:
            if due_at:
                gb.update_or_create_assignment(step, duedate=due_at)
            try:
                dues[step] = gb.find_assignment(step).duedate
            except MissingEntry:
                dues[step] = None
            if dues[step] is None and planned[step]:  # the date students were given, rather than none
                gb.update_or_create_assignment(step, duedate=planned[step])
                dues[step] = planned[step]
                others.append(f'note: {step} is due {planned[step]} UTC by course.toml\'s [schedule], as the student '
                              'README says: that is its due date in the gradebook now (DUE= gives another)')
    stamp = now()
    lines, rows = [], {}
    work = root / '.build' / 'collect' / stamp
    try:
        for step in present:
            decisions, found = zip_collect(step, zip_path, lms, roster_path, times_path, dues[step], work / step, root)
            lines += found
            for folder in sorted(submitted_path(root=work / step).glob(f'*/{step}')):
                student, target = folder.parent.name, submitted / folder.parent.name / step
                if verdict := gate.check(folder.parent.parent, student, step):  # what every way in is held to
                    lines.append(f'not collected: {student} {step}: {verdict}')
                    continue
                if target.exists():
                    if same(folder, target):
                        lines.append(f'unchanged: {student} {step}: the same file as already collected')
                        continue
                    keep = lms_path(root) / 'replaced' / stamp / student / step
                    keep.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(target, keep)
                    lines.append(f'replaced: {student} {step}: the earlier copy is in {keep.relative_to(root)}')
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(folder, target)
            for path, d in decisions.items():
                rows.setdefault(d.step, {})[d.student] = {
                    'student_id': d.student, 'step': d.step, 'notebook': d.notebook, 'lms': lms,
                    'lms_id': d.entry.lms_id, 'file': path, 'late': d.entry.late, 'note': d.note,
                    'timestamp': d.timestamp.isoformat(' ') + '+00:00' if d.timestamp else ''}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for step, step_rows in rows.items():
        write_manifest(step, step_rows, root)
    taken = sorted(f'collected: {r["student_id"]} {r["step"]}: {r["file"]}' + (f' ({r["note"]})' if r['note'] else '')
                   for step_rows in rows.values() for r in step_rows.values())
    # a file's name is the student's: shown with its control characters escaped, so that each stays one line and none
    # can move the instructor's terminal about
    unique = list(dict.fromkeys(printable(line) for line in taken + lines + others))
    report = lms_path(root) / f'collect-{stamp}.txt'
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(''.join(f'{line}\n' for line in unique))
    return unique


printable = gate.printable  # every control character (a newline, an escape) written as its escape sequence


def plain(name):
    """A name (a student's, from the roster) as one folder name: no separators, no leading dot."""
    return re.sub(r'[/\\\x00-\x1f]', '-', name).lstrip('.').strip() or '-'


def feedback_pages(step, student, root=ROOT):
    """The feedback pages make grade wrote for a student's step (feedback/<student>/<step>/*.html)."""
    return sorted(feedback_path(student, step, root).glob('*.html'))


class SafeWriter:
    """csv.writer whose every text is written by course.gate.printable(): a name from the roster (an LMS's, which the
    student may set) with a newline or an escape code stays one cell and shows as what it is."""

    def __init__(self, f):
        self.w = csv.writer(f)

    def writerow(self, row):
        self.w.writerow([gate.printable(v) if isinstance(v, str) else v for v in row])


def totals(table):
    """One dict per student of table (course.reports.export.rows()): the score of each step, and the course total (score
    and max)."""
    out = {}
    for r in table:
        if r.get('refused_id'):  # an id the gate refused is no student's: it has no total
            continue
        t = out.setdefault(r['student_id'], {'student_id': r['student_id'], 'last_name': r['last_name'],
                                             'first_name': r['first_name'], 'email': r['email']})
        t[r['step']] = r['score']
        t['total'] = t.get('total', 0.0) + r['score']
        t['total_max'] = t.get('total_max', 0.0) + r['max_score']
    return list(out.values())


def package_feedback(gradebook, root=ROOT):
    """Each platform's feedback packages of the students it collected (Platform.package_feedback); the paths written."""
    return [path for p in platforms().values() for path in p.package_feedback(gradebook, root)]


def collected_rows(key, root=ROOT):
    """{step: [manifest row]} of the files make collect took from platform key's download."""
    out = {}
    for manifest in sorted(lms_path(root).glob('collected-*.csv')):
        step = manifest.stem.removeprefix('collected-')
        rows = [r for r in read_manifest(step, root).values() if r['lms'] == key]
        if rows:
            out[step] = rows
    return out
