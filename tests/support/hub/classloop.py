"""A class run through nbgrader's exchange, as its people run it (tests/hub/test_exchange.py and test_load.py): the
instructor (root, in a copy of the course) releases and collects with the nbgrader command, grades with the course's own
grader (python -m course.grader.grade: sandboxed, warm kernels, feedback pages, class report) and releases the feedback; each
student, a real Unix user, fetches, works and submits with the nbgrader command as themselves."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from course import runner
from course.authoring.demo import edited, sampled, solved
from course.classroom import gradebook
from course.layout import copy_course, notebooks
from support.hub import hubkit


class Course:
    """The instructor's side: a copy of the course at root, its gradebook at db_url, the exchange in exchange."""

    def __init__(self, root, exchange, db_url):
        self.root = copy_course(root)
        self.exchange = exchange
        self.env = {**runner.env(self.root), **(exchange.env if exchange else {}), gradebook.ENV: db_url}

    def nbgrader(self, *args, timeout=300):
        """An nbgrader command as the instructor, in the course; its output. Fails with the output if it fails."""
        done = subprocess.run([sys.executable, '-m', 'nbgrader', *args], cwd=self.root, env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, f'nbgrader {" ".join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}'
        return done.stdout + done.stderr

    def grade(self, *flags, timeout=1200):
        """python -m course.grader.grade, as make grade runs it; its output. Fails with the output if it fails."""
        done = subprocess.run([sys.executable, '-m', 'course.grader.grade', '--cell-timeout=60', '--timeout=600', *flags],
                              cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
        return done.stdout + done.stderr

    def inbound(self):
        """{(student, step): [timestamps of each submission in the exchange's inbound, in order]}."""
        out = {}
        for path in sorted((self.exchange.root / hubkit.COURSE_ID / 'inbound').iterdir()):
            student, step, timestamp, _ = path.name.split('+')
            out.setdefault((student, step), []).append(timestamp)
        return {k: sorted(v) for k, v in out.items()}


class Student:
    """One student: a Unix user who runs the nbgrader command as themselves."""

    def __init__(self, user, python_bin, exchange):
        self.user = user
        self.env = hubkit.user_env(user, python_bin, **exchange.env)

    def run(self, *argv, **kw):
        return hubkit.as_user(self.user, argv, self.env, **kw)

    def fetch(self, *steps):
        return self.run('nbgrader', 'fetch_assignment', *steps)  # one command fetches several (3 s of CPU each)

    def work(self, step, name, nb):
        """Put nb in the fetched assignment as the student's own file (the student writes it)."""
        self.run('sh', '-c', 'mkdir -p "$(dirname "$0")" && cat > "$0"', f'{step}/{name}',  # not /dev/stdin: root's pipe
                 input=nbformat.writes(nb))

    def submit(self, step):
        return self.run('nbgrader', 'submit', step)

    def fetch_feedback(self, *steps):
        return self.run('nbgrader', 'fetch_feedback', *steps)

    def feedback(self, step):
        """{timestamp folder: {file name: text}} of the feedback fetched into ~/<step>/feedback/ (read as the student)."""
        listing = self.run('python', '-c', LIST_FEEDBACK, step).stdout
        return json.loads(listing)


# Run as the student, with their rights: what fetch_feedback put in their home.
LIST_FEEDBACK = """
import json, sys
from pathlib import Path
base = Path(sys.argv[1]) / 'feedback'
print(json.dumps({d.name: {f.name: f.read_text() for f in d.iterdir() if f.suffix == '.html'}
                  for d in sorted(base.iterdir())} if base.is_dir() else {}))
"""


def work_for(step, kind):
    """{notebook name: notebook} a student hands in: 'solution' (every answer from the source, as course.authoring.demo makes
    the perfect submission) or 'mistake' (the first mistake of the step's bank)."""
    out = {}
    for name in notebooks(step):
        nb = solved(step, name)
        if kind == 'mistake':
            mistake = next(v for v in sampled(step) if v.caught_by and v.notebook in (None, name))
            nb = edited(nb, mistake.edits)
        out[name] = nb
    return out


def mistake_cells(step):
    """The test cells the first mistake of the step's bank must lose points in."""
    return next(v for v in sampled(step) if v.caught_by).caught_by


def in_parallel(jobs, workers=4):
    """Run each zero-argument callable of jobs, workers at a time; their results, in order (the first error raised)."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: job(), jobs))


def read_csv(path, key):
    import csv

    with open(path, newline='') as f:
        return {tuple(r[k] for k in key): r for r in csv.DictReader(f)}


def theirs(course):
    """nbgrader's own export (CsvExportPlugin) of the course's gradebook: {(assignment, student): row}."""
    course.nbgrader('export', '--ExportApp.plugin_class=nbgrader.plugins.CsvExportPlugin', '--to=nbgrader-export.csv')
    return read_csv(Path(course.root) / 'nbgrader-export.csv', ('assignment', 'student_id'))
