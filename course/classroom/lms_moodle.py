"""Moodle (docs/lms.md): its bulk download's naming and collector, its gradebook import and grading worksheet, and
feedback back through its "Upload multiple feedback files in a zip"."""

import zipfile
from datetime import datetime, timezone

from traitlets import Unicode

from course.classroom.lms import (
    ROOT,
    DownloadPlatform,
    LmsCollector,
    Naming,
    SafeWriter,
    collected_rows,
    feedback_pages,
    plain,
    points,
    read_manifest,
    totals,
)
from course.layout import LMS, lms_path

# Moodle (Download all submissions, in folders, since 3.1): <Full Name>_<participant id>_assignsubmission_file[_]/<file>;
# Moodle before 3.1, or with folders off: <Full Name>_<participant id>_assignsubmission_file_<file>. No times, no late mark.
MOODLE = r'(?:.*/)?(?P<full_name>[^/]+?)_(?P<lms_id>\d+)_assignsubmission_file(?:_?/|_)(?P<original>[^/]+)'
GRADES = 'grades-moodle.csv'


class MoodleCollector(LmsCollector):
    lms = 'moodle'
    named_regexp = Unicode(MOODLE, help="Moodle's bulk-download naming, matched to each file's path in the download: "
                           'named groups lms_id (the participant id), original (the uploaded name)').tag(config=True)


class Moodle(DownloadPlatform):
    key, name = 'moodle', 'Moodle'
    naming = Naming('Moodle', MOODLE, ordered=False)  # no times and no upload number: the instructor's times tell
    collector = MoodleCollector

    def write_grades(self, gradebook, table, root=ROOT):
        """lms/grades-moodle.csv (Grades > Import > CSV file, users by email: a column per step and the course total),
        and lms/moodle-worksheet-<step>.csv, the grading worksheet of each step collected from Moodle (Identifier
        Participant <id>, Grade, Last modified (grade), the late penalty as a feedback comment)."""
        folder = lms_path(root)
        if not self.used(gradebook, root):
            (folder / GRADES).unlink(missing_ok=True)
            for old in folder.glob('moodle-worksheet-*.csv'):
                old.unlink()
            return []
        people = {s.id: s for s in gradebook.students if s.lms_user_id}
        step_names = list(dict.fromkeys(r['step'] for r in table))
        folder.mkdir(exist_ok=True)
        written = [folder / GRADES]
        with open(folder / GRADES, 'w', newline='') as f:
            w = SafeWriter(f)
            w.writerow(['Email address', 'First name', 'Last name', *step_names, 'Course total'])
            for t in sorted((t for t in totals(table) if t['student_id'] in people), key=lambda t: t['student_id']):
                w.writerow([t['email'], t['first_name'], t['last_name'], *(points(t[s]) for s in step_names),
                            points(t['total'])])
        modified = datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')
        for step in step_names:
            collected = read_manifest(step, root)
            worksheet = folder / f'moodle-worksheet-{step}.csv'
            if not any(r['lms'] == self.key for r in collected.values()):
                worksheet.unlink(missing_ok=True)
                continue
            with open(worksheet, 'w', newline='') as f:
                w = SafeWriter(f)
                w.writerow(['Identifier', 'Full name', 'Email address', 'Status', 'Grade', 'Maximum Grade',
                            'Grade can be changed', 'Last modified (grade)', 'Feedback comments'])
                for r in sorted((r for r in table if r['step'] == step and r['student_id'] in people),
                                key=lambda r: r['student_id']):
                    pid = collected.get(r['student_id'], {}).get('lms_id') or people[r['student_id']].lms_user_id
                    penalty = r['late_submission_penalty']
                    w.writerow([f'Participant {pid}', f"{r['first_name']} {r['last_name']}", r['email'], r['status'],
                                points(r['score']), points(r['max_score']), 'Yes', modified,
                                f'late: {points(penalty)} points off' if penalty else ''])
            written.append(worksheet)
        return written

    def package_feedback(self, gradebook, root=ROOT):
        """lms/feedback-moodle-<step>.zip for the assignment's "Upload multiple feedback files in a zip": a folder
        <Full Name>_<participant id>_assignfeedback_file_/ per student (the id from the download), holding their pages."""
        people = {s.id: s for s in gradebook.students}
        folder = lms_path(root)
        for old in folder.glob('feedback-moodle-*.zip'):
            old.unlink()
        written = []
        for step, rows in collected_rows(self.key, root).items():
            rows = [r for r in rows if feedback_pages(step, r['student_id'], root)]
            if not rows:
                continue
            target = folder / f'feedback-moodle-{step}.zip'
            with zipfile.ZipFile(target, 'w', zipfile.ZIP_DEFLATED) as z:
                for r in rows:
                    s = people.get(r['student_id'])
                    name = f'{s.first_name} {s.last_name}'.strip() if s else r['student_id']
                    entry = f'{plain(name).replace("_", " ")}_{r["lms_id"]}_assignfeedback_file_'
                    for page in feedback_pages(step, r['student_id'], root):
                        z.write(page, f'{entry}/{page.name}')
            written.append(target)
        return written

    def upload_hint(self, root=ROOT):
        folder = lms_path(root)
        lines = []
        if (folder / GRADES).exists():
            lines.append(f'  {LMS}/{GRADES}  ->  Moodle: Grades > Import > CSV file (users by Email address)')
        for w in sorted(folder.glob('moodle-worksheet-*.csv')):
            lines.append(f'  {LMS}/{w.name}  ->  Moodle: the assignment\'s View all submissions > Grading action > '
                         'Upload grading worksheet')
        for z in sorted(folder.glob('feedback-moodle-*.zip')):
            lines.append(f'  {LMS}/{z.name}  ->  Moodle: the assignment\'s View all submissions > Grading action > '
                         'Upload multiple feedback files in a zip')
        return lines


PLATFORM = Moodle()
