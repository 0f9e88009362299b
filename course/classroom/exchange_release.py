"""nbgrader's release of a step and of feedback through the exchange, as the course needs them on a hub (docs/hub.md).

- ScheduledRelease: releasing a step also writes its due date from course.toml's [schedule] (what the student README
  shows) into the gradebook, so that the formgrader and the late rule read the date students were given, never one
  typed by hand or left by another run. Without a date in the schedule, the gradebook's is left as it is.
- PartialReleaseFeedback: Release feedback releases each student's feedback on its own; a student whose feedback folder
  lacks what nbgrader needs (timestamp.txt, submission_secret.txt: feedback generated from a submission that did not
  come through the exchange) is skipped, named in one line saying what to do, and the others are released. nbgrader's
  own stops at the first such folder with a traceback.

Both are set in nbgrader_config.py (c.ExchangeFactory); they run wherever nbgrader's do: the formgrader's buttons, and
the nbgrader commands in the course directory.
"""

import glob
import os

from nbgrader.api import Gradebook
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback


class ScheduledRelease(ExchangeReleaseAssignment):
    def copy_files(self):
        from course.classroom.lms import scheduled_due
        from course.settings import SettingsError

        step = self.coursedir.assignment_id
        root = self.coursedir.root
        try:
            due = scheduled_due(step, root)  # course.settings, the one reader of course.toml
        except SettingsError as e:
            self.fail(f'{e}: correct course.toml, then release again')
        if due is not None:
            with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
                gb.update_or_create_assignment(step, duedate=due)
            self.log.info(f'{step} is due {due:%Y-%m-%d %H:%M} UTC (course.toml [schedule]): its due date in the gradebook')
        super().copy_files()


class PartialReleaseFeedback(ExchangeReleaseFeedback):
    NEEDED = ('timestamp.txt', 'submission_secret.txt')

    def copy_files(self):
        everyone = self.src_path
        released, skipped = [], []
        for folder in sorted(glob.glob(everyone)):
            student = os.path.basename(os.path.dirname(folder))
            if not glob.glob(os.path.join(glob.escape(folder), '*.html')):
                continue
            missing = [f for f in self.NEEDED if not os.path.isfile(os.path.join(folder, f))]
            if missing:
                skipped.append(student)
                self.log.warning(f'Not released: {student}: {" and ".join(missing)} missing in {folder} (its feedback was '
                                 'not generated from a submission collected through the exchange): collect and grade '
                                 'it again, or hand that page to the student yourself')
                continue
            self.src_path = folder
            try:
                super().copy_files()
            finally:
                self.src_path = everyone
            released.append(student)
        step = self.coursedir.assignment_id
        self.log.info(f'{step}: feedback released to {len(released)} student(s)'
                      + (f'; skipped {len(skipped)}: {", ".join(skipped)}' if skipped else ''))
