"""Canvas (docs/lms.md): its bulk download's naming and collector, its gradebook import, and feedback back through its
"Re-Upload Submissions" (one zip per step, each page named as the student's file was downloaded)."""

import zipfile
from pathlib import Path

from traitlets import Unicode

from course.classroom.lms import (
    ROOT,
    DownloadPlatform,
    LmsCollector,
    Naming,
    SafeWriter,
    collected_rows,
    feedback_pages,
    points,
    totals,
)
from course.layout import LMS, lms_path

# Canvas (Download Submissions): <lastnamefirstname>_[late_|LATE_]<user id>_<attachment id>_<file name as uploaded>,
# every file at the top of the zip. The attachment id grows with each upload: the higher, the newer.
CANVAS = r'(?:.*/)?(?P<sortable>[^/_]*)_(?:(?P<late>(?i:late))_)?(?P<lms_id>\d+)_(?P<order>\d+)_(?P<original>[^/]+)'
GRADES = 'grades-canvas.csv'


class CanvasCollector(LmsCollector):
    lms = 'canvas'
    named_regexp = Unicode(CANVAS, help="Canvas's bulk-download naming, matched to each file's path in the download: "
                           'named groups lms_id, original (the uploaded name), order (newer is higher), late').tag(config=True)


def feedback_zip(step, root=ROOT):
    return lms_path(root) / f'feedback-canvas-{step}.zip'


class Canvas(DownloadPlatform):
    key, name = 'canvas', 'Canvas'
    naming = Naming('Canvas', CANVAS)
    collector = CanvasCollector

    def write_grades(self, gradebook, table, root=ROOT):
        """lms/grades-canvas.csv, Canvas's gradebook import: Student, ID (the Canvas user id), SIS User ID, SIS Login ID,
        Section, a Points Possible row, a column per step, and Final Points (the course total; read-only in Canvas)."""
        path = lms_path(root) / GRADES
        if not self.used(gradebook, root):
            path.unlink(missing_ok=True)
            return []
        people = {s.id: s for s in gradebook.students if s.lms_user_id}
        step_names = list(dict.fromkeys(r['step'] for r in table))
        total = {t['student_id']: t for t in totals(table) if t['student_id'] in people}
        maxima = {r['step']: r['max_score'] for r in table}
        path.parent.mkdir(exist_ok=True)
        with open(path, 'w', newline='') as f:
            w = SafeWriter(f)
            w.writerow(['Student', 'ID', 'SIS User ID', 'SIS Login ID', 'Section', *step_names, 'Final Points'])
            w.writerow(['    Points Possible', '', '', '', '', *(points(maxima[s]) for s in step_names),
                        points(sum(maxima.values()))])
            for sid, t in sorted(total.items(), key=lambda kv: (kv[1]['last_name'].casefold(), kv[0])):
                w.writerow([f"{t['last_name']}, {t['first_name']}", people[sid].lms_user_id, '', '', '',
                            *(points(t[s]) for s in step_names), points(t['total'])])
        return [path]

    def package_feedback(self, gradebook, root=ROOT):
        """lms/feedback-canvas-<step>.zip for the step's "Re-Upload Submissions" (Grades, the step's column menu): each
        student's feedback pages, named as Canvas named the file collected from them (`<name>_[LATE_]<user id>_<attachment
        id>_`) and then the page's name. Canvas reads the first two numbers of a name (the user and the attachment it
        was downloaded as) and attaches the page to that student's submission as a comment (docs/lms.md)."""
        written = []
        for old in (lms_path(root)).glob('feedback-canvas-*.zip'):
            old.unlink()
        for step, rows in collected_rows(self.key, root).items():
            # named as downloaded: Canvas finds the submission by it (a name not of Canvas's download cannot be)
            pages = [(r, page) for r in sorted(rows, key=lambda r: r['student_id'])
                     if self.naming.parse(Path(r['file']).name) for page in feedback_pages(step, r['student_id'], root)]
            if not pages:
                continue
            with zipfile.ZipFile(feedback_zip(step, root), 'w', zipfile.ZIP_DEFLATED) as z:
                for r, page in pages:
                    entry = self.naming.parse(Path(r['file']).name)
                    z.write(page, Path(r['file']).name[:-len(entry.original)] + page.name)
            written.append(feedback_zip(step, root))
        return written

    def upload_hint(self, root=ROOT):
        folder = lms_path(root)
        lines = []
        if (folder / GRADES).exists():
            lines.append(f'  {LMS}/{GRADES}  ->  Canvas: Grades > Import (matched by the ID column)')
        for z in sorted(folder.glob('feedback-canvas-*.zip')):
            step = z.stem.removeprefix('feedback-canvas-')
            lines.append(f'  {LMS}/{z.name}  ->  Canvas: Grades, the {step} column\'s menu > Re-Upload Submissions')
        return lines


PLATFORM = Canvas()
