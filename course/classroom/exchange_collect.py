"""nbgrader's collect, refusing a submission that another account put in the exchange under a student's name.

The exchange's inbound folder is writable by every account (nbgrader's design: each student drops a folder named
<student>+<assignment>+<timestamp>+<random> there). nbgrader's own collect compares the folder's Unix owner with the
student it names but only logs a warning and collects it anyway, so one student could submit as another. This collect
skips such a folder, with the warning, and never lets it hide the student's own submissions. Configured in
nbgrader_config.py (c.ExchangeFactory.collect); on a machine without Unix accounts (Windows) it is nbgrader's.
"""

import datetime
import os

from nbgrader.exchange.default.collect import ExchangeCollect, pwd
from traitlets import Bool


class OwnerCheckedCollect(ExchangeCollect):
    refuse_foreign = Bool(True, help='Skip (not only warn about) a submission whose folder is not owned by the Unix '
                                     'account of the student it names: someone else put it there.').tag(config=True)

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
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
            self.log.warning('Not collected: %s names %s but was put there by %s', record['filename'], record['username'],
                             record['foreign'] or 'an unknown account')
        self.src_records = [r for r in self.src_records if 'foreign' not in r]
        super().copy_files()
