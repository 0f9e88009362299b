"""nbgrader's collect, refusing a submission that another account put in the exchange under a student's name.

The exchange's inbound folder is writable by every account (nbgrader's design: each student drops a folder named
<student>+<assignment>+<timestamp>+<random> there). nbgrader's own collect compares the folder's Unix owner with the
student it names but only logs a warning and collects it anyway, so one student could submit as another. This collect
skips such a folder, with the warning, and never lets it hide the student's own submissions. Configured in
nbgrader_config.py (c.ExchangeFactory.collect); on a machine without Unix accounts (Windows) it is nbgrader's.

It also copies what it collects through the course's gate (course.gate.copy), never as nbgrader's copytree does: it
runs as the instructor, on a folder the student can still change while it runs, so every folder and file is opened
relative to its parent without following a link (a file or folder swapped for a link meanwhile fails to open), what is
read is what was checked, and a submission holding a link, a fifo, a hard link, a name that is not a plain one, or more
than its budget, arrives as a folder that says only why (course.gate.MARK): make grade shows it as 'refused (...)'.
A student id that is not a plain name (course.gate.STUDENT_ID) is never collected: nbgrader would make it a path.
The time nbgrader takes from the folder's name (and the timestamp.txt inside) is the student's to write: where the
files were last changed (their ctime, which no account can set back) more than CLOCK_SLACK later, that time is kept.
"""

import datetime
import os
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect, pwd
from nbgrader.utils import parse_utc
from traitlets import Bool

from course import gate

CLOCK_SLACK = datetime.timedelta(minutes=1)  # between the time nbgrader submit writes and its files' ctime


class OwnerCheckedCollect(ExchangeCollect):
    refuse_foreign = Bool(True, help='Skip (not only warn about) a submission whose folder is not owned by the Unix '
                                     'account of the student it names: someone else put it there.').tag(config=True)

    def _path_to_record(self, path):
        try:
            record = super()._path_to_record(path)
        except (ValueError, OverflowError):  # the name's time is the student's to write: 'alice+step1+not-a-time+x'
            name = os.path.basename(path)
            return {'username': name.split('+')[0], 'filename': name, 'timestamp': datetime.datetime.min,
                    'foreign': None, 'why': 'the time in its name is not a time'}
        if verdict := gate.check_id(record['username']):  # never a path nor a pattern: dropped before copying, and said
            record.update(foreign=None, why=verdict.detail, timestamp=datetime.datetime.min.replace(
                tzinfo=record['timestamp'].tzinfo))
            return record
        if self.refuse_foreign and pwd is not None:
            try:
                owner = pwd.getpwuid(os.stat(path).st_uid).pw_name
            except (KeyError, OSError):
                owner = None
            if owner != record['username']:
                # sorted last among the student's submissions, so it never hides one of theirs; dropped before copying
                record.update(foreign=owner, timestamp=datetime.datetime.min.replace(tzinfo=record['timestamp'].tzinfo))
        return record

    def copy_files(self):
        for record in [r for r in self.src_records if 'foreign' in r]:
            if 'why' in record:
                self.log.warning('Not collected: %s: %s', gate.printable(record['filename']), record['why'])
                continue
            self.log.warning('Not collected: %s names %s but was put there by %s', gate.printable(record['filename']),
                             gate.printable(record['username']), gate.printable(record['foreign'] or 'an unknown account'))
        self.src_records = [r for r in self.src_records if 'foreign' not in r]
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        """The submission's folder src copied to dest through course.gate.copy() (see the module), not copytree; its
        time kept honest (timestamp.txt)."""
        copied = gate.copy(src, dest, ignore=self.coursedir.ignore)
        if copied.verdict:
            self.log.warning('Refused: %s: %s (make grade shows it)', gate.printable(Path(src).name), copied.verdict)
            return
        stamp = Path(dest) / 'timestamp.txt'
        changed = datetime.datetime.fromtimestamp(copied.latest, datetime.timezone.utc)
        try:
            claimed = parse_utc(gate.read_file(stamp, 100).decode().strip())
        except (OSError, ValueError, OverflowError, gate.Refused):
            claimed = None
        if claimed is None or changed - claimed.replace(tzinfo=claimed.tzinfo or datetime.timezone.utc) > CLOCK_SLACK:
            if claimed is not None:
                self.log.warning('%s says it was handed in at %s, but its files changed at %s: that time is kept',
                                 gate.printable(Path(src).name), claimed, changed)
            stamp.unlink(missing_ok=True)
            stamp.write_text(changed.strftime('%Y-%m-%d %H:%M:%S.%f %Z'))
