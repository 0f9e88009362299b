"""A Colab class through an LMS (Canvas, Moodle): the glue nbgrader's own `zip_collect` lacks (docs/lms.md).

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

from course.layout import ROOT, notebooks, steps

ROSTER_COLUMNS = ('id', 'first_name', 'last_name', 'email', 'lms_id')
LMS_FOLDER = 'lms'  # what the LMS gets back, and what collect saw: lms/ at the course root (docs/lms.md)
STUDENT_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,63}')  # a student id is a folder name in submitted/


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
    """{lms_id: Student} from a roster CSV (ROSTER_COLUMNS, one header row); Refused on a missing column, an id that is
    not a plain folder name, or an id or LMS id given twice."""
    rows = read_table(path, ROSTER_COLUMNS, 'roster')
    out, ids = {}, set()
    for line, row in enumerate(rows, start=2):
        s = Student(*row)
        if not STUDENT_ID.fullmatch(s.id):
            raise Refused(f'{path}, line {line}: id {s.id!r} is not a plain name (letters, digits, . _ -): fix it')
        if not s.lms_id.isdigit():
            raise Refused(f'{path}, line {line}: lms_id {s.lms_id!r} is not the LMS user id (a number): fix it')
        if s.id in ids or s.lms_id in out:
            raise Refused(f'{path}, line {line}: {s.id if s.id in ids else "lms_id " + s.lms_id} is given twice: keep one')
        ids.add(s.id)
        out[s.lms_id] = s
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
    original; optionally order and late)."""

    def __init__(self, name, regexp):
        self.name, self.regexp = name, re.compile(regexp)

    def parse(self, path):
        m = self.regexp.fullmatch(path)
        if not m:
            return None
        g = m.groupdict()
        return Entry(path, g['lms_id'], g['original'], int(g.get('order') or 0), bool(g.get('late')))


# Canvas (Download Submissions): <lastnamefirstname>_[late_|LATE_]<user id>_<attachment id>_<file name as uploaded>,
# every file at the top of the zip. The attachment id grows with each upload: the higher, the newer.
CANVAS = r'(?:.*/)?(?P<sortable>[^/_]*)_(?:(?P<late>(?i:late))_)?(?P<lms_id>\d+)_(?P<order>\d+)_(?P<original>[^/]+)'
# Moodle (Download all submissions, in folders, since 3.1): <Full Name>_<participant id>_assignsubmission_file[_]/<file>;
# Moodle before 3.1, or with folders off: <Full Name>_<participant id>_assignsubmission_file_<file>. No times, no late mark.
MOODLE = r'(?:.*/)?(?P<full_name>[^/]+?)_(?P<lms_id>\d+)_assignsubmission_file(?:_?/|_)(?P<original>[^/]+)'
NAMINGS = {'canvas': Naming('Canvas', CANVAS), 'moodle': Naming('Moodle', MOODLE)}


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
    due: {step: UTC due date (naive) or None}; regexp: the naming, if not the LMS's own (NAMINGS)."""
    naming = Naming(NAMINGS[lms].name, regexp) if regexp else NAMINGS[lms]
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
        if len(entries) > 1 and len(timed) < len(entries) and lms == 'moodle':
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
                lines.append(f'note: {winner.path}: {NAMINGS[lms].name} marks it late but {step} has no due date (give '
                             '--due): graded as on time')
            else:  # the download says late, not how late: one second past the due date, unless --times says more
                stamp, note = due[step] + timedelta(seconds=1), f'marked late by {NAMINGS[lms].name}, which gives no ' \
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
    due = Unicode('', help="the step's due date (ISO 8601; UTC without an offset), for a file the LMS marks late"
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


class CanvasCollector(LmsCollector):
    lms = 'canvas'
    named_regexp = Unicode(CANVAS, help="Canvas's bulk-download naming, matched to each file's path in the download: "
                           'named groups lms_id, original (the uploaded name), order (newer is higher), late').tag(config=True)


class MoodleCollector(LmsCollector):
    lms = 'moodle'
    named_regexp = Unicode(MOODLE, help="Moodle's bulk-download naming, matched to each file's path in the download: "
                           'named groups lms_id (the participant id), original (the uploaded name)').tag(config=True)


COLLECTORS = {'canvas': CanvasCollector, 'moodle': MoodleCollector}


MANIFEST_COLUMNS = ['student_id', 'step', 'notebook', 'lms', 'lms_id', 'file', 'timestamp', 'late', 'note']


def manifest_path(step, root=ROOT):
    """What collect took for a step, one row per student (MANIFEST_COLUMNS): lms/collected-<step>.csv."""
    return Path(root) / LMS_FOLDER / f'collected-{step}.csv'


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
    extra.CourseDirectory.submitted_directory = str(rel / 'submitted')
    extra.ZipCollectApp.downloaded_directory = str(rel / 'downloaded')
    extra.ZipCollectApp.extractor_plugin = SafeExtractor
    extra.ZipCollectApp.collector_plugin = COLLECTORS[lms]
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
    from course.authoring.publish import PublishError, _when
    from course.layout import settings

    entry = (settings(root).get('schedule') or {}).get(step)
    if not isinstance(entry, dict) or 'due' not in entry:
        return None
    try:
        return _when(entry['due'], f'course.toml: [schedule] {step} due').astimezone(timezone.utc).replace(tzinfo=None)
    except PublishError as e:
        raise Refused(str(e)) from None


def collect(zip_path, lms, roster_path, times_path=None, due=None, only_step=None, root=ROOT):
    """Collect an LMS download into submitted/<student>/<step>/ with nbgrader's zip_collect: the roster into the
    gradebook, due (a string, for every step the download holds, or only_step) into it too; a student's earlier copy
    that differs is moved to lms/replaced/<time>/. Returns the report lines (also written to lms/collect-<time>.txt)."""
    from nbgrader.api import Gradebook, MissingEntry

    from course import runner
    from course.authoring.demo import DEMO_MARK

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
    submitted = root / 'submitted'
    if (submitted / DEMO_MARK).exists():
        raise Refused(f'{submitted}: holds the demo class (make demo): move it away or run make clean, then collect')
    chosen, scanned = classify([i.filename for i in infos if not i.is_dir()], lms, roster, times, {}, root)
    present = [only_step] if only_step else sorted({d.step for d in chosen.values()})
    if not present:
        other = next(n for n in NAMINGS if n != lms)
        return [printable(line) for line in scanned + [
            f'nothing collected from {zip_path}: no file in it is a rostered student\'s notebook named as '
            f'{NAMINGS[lms].name} names them (is it a {NAMINGS[other].name} download?)']]
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
            for folder in sorted((work / step / 'submitted').glob(f'*/{step}')):
                student, target = folder.parent.name, submitted / folder.parent.name / step
                if target.exists():
                    if same(folder, target):
                        lines.append(f'unchanged: {student} {step}: the same file as already collected')
                        continue
                    keep = root / LMS_FOLDER / 'replaced' / stamp / student / step
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
    report = root / LMS_FOLDER / f'collect-{stamp}.txt'
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(''.join(f'{line}\n' for line in unique))
    return unique


def printable(line):
    """line with every control character (a newline, an escape) written as its escape sequence."""
    return ''.join(repr(ch)[1:-1] if unicodedata.category(ch) == 'Cc' else ch for ch in line)


def plain(name):
    """A name (a student's, from the roster) as one folder name: no separators, no leading dot."""
    return re.sub(r'[/\\\x00-\x1f]', '-', name).lstrip('.').strip() or '-'


def feedback_pages(step, student, root=ROOT):
    """The feedback pages make grade wrote for a student's step (feedback/<student>/<step>/*.html)."""
    return sorted((Path(root) / 'feedback' / student / step).glob('*.html'))


def package_feedback(gradebook, root=ROOT):
    """Each collected student's feedback pages, as their LMS takes them back: for Moodle, a zip per step for its "Upload
    multiple feedback files in a zip" (a folder <Full Name>_<participant id>_assignfeedback_file_/ per student, the id
    from the download); otherwise (Canvas) a folder per student, lms/feedback-canvas/<Last First (LMS id)>/<step>/.
    Returns the paths written (old packages replaced)."""
    root = Path(root)
    out_dir = root / LMS_FOLDER
    people = {s.id: s for s in gradebook.students}
    written = []
    canvas_dir = out_dir / 'feedback-canvas'
    shutil.rmtree(canvas_dir, ignore_errors=True)
    for manifest in sorted(out_dir.glob('collected-*.csv')):
        step = manifest.stem.removeprefix('collected-')
        rows = read_manifest(step, root)
        moodle = [r for r in rows.values() if r['lms'] == 'moodle' and feedback_pages(step, r['student_id'], root)]
        target = out_dir / f'feedback-moodle-{step}.zip'
        target.unlink(missing_ok=True)
        if moodle:
            with zipfile.ZipFile(target, 'w', zipfile.ZIP_DEFLATED) as z:
                for r in moodle:
                    s = people.get(r['student_id'])
                    name = f'{s.first_name} {s.last_name}'.strip() if s else r['student_id']
                    folder = f'{plain(name).replace("_", " ")}_{r["lms_id"]}_assignfeedback_file_'
                    for page in feedback_pages(step, r['student_id'], root):
                        z.write(page, f'{folder}/{page.name}')
            written.append(target)
        for r in rows.values():
            if r['lms'] == 'moodle':
                continue
            s = people.get(r['student_id'])
            folder = canvas_dir / plain(f'{s.last_name} {s.first_name} ({s.lms_user_id})' if s else r['student_id']) / step
            for page in feedback_pages(step, r['student_id'], root):
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copy(page, folder / page.name)
                written.append(folder / page.name)
    return written
