"""The class that tests/test_grading.py and tests/test_submissions.py (collected through it) grade once, together, through
the real command (python -m course.grader.grade): for every step, its demo class and its damaged, broken and hostile corpus
(the grader's own cases on the synthetic step, tests/support/synthetic.py, added to the course for them); and one demo student
per step graded by plain serial nbgrader, to compare with."""

import csv
import hashlib
import shutil
import subprocess
import sys
from typing import NamedTuple

import nbformat

from conftest import can_sandbox
from course import runner
from course.authoring.demo import DEMO_MARK, bank, demo_class, edited, sampled, solved, write_class
from course.cells import read
from course.layout import ROOT, copy_course, notebooks, steps
from support import synthetic
from support.corpus import cases, placed


class Graded(NamedTuple):
    course: object  # the course copy
    rows: dict  # (step, student) -> grades.csv row, with each test cell's score from grades-cells.csv
    out: str  # what course.grader.grade printed
    alone: dict  # (step, student) -> row, for clean_students() graded alone first
    cases: dict  # step -> the corpus cases graded on it (without the sandbox: those that do not need it), the synthetic
    # step's included
    before: dict  # snapshot() before the batch
    sandboxed: bool
    source: dict  # source_snapshot() before the batch, source/ made read-only


def write(folder, files, **fields):
    """files into folder: {path: bytes, a notebook, or one of tests/support/corpus.py's Link, HardLink, Fifo, Sparse}; each path
    and link target with fields ({step}, {name}) filled in. The path '' is the folder itself (a link, say)."""
    import os

    from support.corpus import Fifo, HardLink, Link, Sparse

    for name, data in files.items():
        name = name.format(**fields) if fields else name
        path = folder / name if name else folder
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, Link):
            path.symlink_to(data.target.format(**fields))
        elif isinstance(data, HardLink):
            os.link(path.parent / data.target.format(**fields), path)
        elif isinstance(data, Fifo):
            os.mkfifo(path)
        elif isinstance(data, Sparse):
            with open(path, 'wb') as f:
                f.truncate(data.size)
        elif isinstance(data, bytes):
            path.write_bytes(data)
        else:
            nbformat.write(data, path)
    if files and '' not in files:
        folder.mkdir(parents=True, exist_ok=True)


def snapshot(course):
    """sha256 of every file outside the students' folders and what grading itself writes."""
    own = ('submitted', 'autograded', 'feedback', 'repairs', 'results', 'reports', '.build', 'gradebook.db', 'grades')
    return {str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in course.rglob('*') if p.is_file() and not str(p.relative_to(course)).startswith(own)
            and '__pycache__' not in p.parts}


def source_snapshot(course):
    """{path: (mode, size, mtime, sha256 or None for a folder)} of everything under source/, __pycache__ included."""
    out = {}
    for p in sorted((course / 'source').rglob('*')):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else None
        out[str(p.relative_to(course))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def read_only(folder):
    """Take every write permission off folder and all in it (the instructor's source/, while a class is graded)."""
    import os
    import stat

    for p in [folder, *folder.rglob('*')]:
        os.chmod(p, stat.S_IMODE(p.lstat().st_mode) & ~0o222)


def read_grades(course):
    """{(step, student): row of grades.csv, plus each test cell's score (grades-cells.csv) under its grade_id}."""
    with open(course / 'grades.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    keys = [(r['step'], r['student_id']) for r in rows]
    assert len(keys) == len(set(keys)), f'grades.csv repeats (step, student) rows: {len(keys)} rows, {len(set(keys))} keys'
    table = {(r['step'], r['student_id']): r for r in rows}
    with open(course / 'grades-cells.csv', newline='') as f:
        for c in csv.DictReader(f):
            table[(c['step'], c['student_id'])][c['grade_id']] = c['score']
    return table


def run(course, *flags):
    # --timeout=600: a whole submission's limit, far above what one takes (seconds), so that only a hung one meets it, even
    # on a machine loaded many times over (a hung cell meets --cell-timeout first). --cell-timeout=60, a cap far above what
    # a cell takes: a solution cell of under 1 s took up to 19 s on the 2-core machine at a load average of 15, Step 3's
    # training cell over 30 s at 25, and a probe cell that times out fails the checks it did not reach (its status
    # says so); only the corpus's hung cells should meet it
    # where no sandbox works, make grade refuses a real class: the corpus cases that do not need one are graded without
    unsandboxed = () if can_sandbox() else ('--no-sandbox',)
    done = subprocess.run([sys.executable, '-m', 'course.grader.grade', '--cell-timeout=60', '--timeout=600',
                           *unsandboxed, *flags],
                          cwd=course, capture_output=True, text=True, env=runner.env(course))
    assert done.returncode == 0, done.stdout + done.stderr
    return read_grades(course), done.stdout + done.stderr


def clean_students(step, root=ROOT):
    """(student, notebook) graded alone, then in the batch: the perfect submission, the bank's first mistake and first
    correct alternative."""
    b = bank(step, root)
    name = notebooks(step, root)[0]
    perfect = solved(step, name, root)
    out = [('perfect', perfect)]
    for v in [*getattr(b, 'MUTANTS', [])[:1], *getattr(b, 'ALTERNATIVES', [])[:1]]:
        if v.notebook in (None, name):
            out.append((v.student, edited(perfect, v.edits)))
    return out


def grade_class(course, port):
    """The course copied into course with the synthetic step added (tests/support/synthetic.py: the grader's own cases are graded
    on it, a real step's run costing many times its own), and its class graded."""
    synthetic.built(copy_course(course))
    sandboxed = can_sandbox()
    # the grader's property, not the step's: on one step, the synthetic one
    clean = {step: clean_students(step, course) for step in [synthetic.STEP]}
    for step, students in clean.items():
        for student, nb in students:
            write(course / 'submitted' / student / step, {notebooks(step, course)[0]: nb})
    alone, _ = run(course)
    shutil.rmtree(course / 'submitted')
    # every step's bank sampled (make mutants grades them whole), the synthetic step's too
    write_class(demo_class(root=course, sample=True), course / 'submitted')
    (course / 'submitted' / DEMO_MARK).unlink()
    graded_cases = {}
    for step, case in placed([c for c in cases(port) if sandboxed or not c.needs_sandbox], steps()):
        name = notebooks(step, course)[0]
        release, perfect = read(course / 'release' / step / name), solved(step, name, course)
        fake = getattr(bank(step, course), 'FAKE', '')
        graded_cases.setdefault(step, []).append(case)
        write(course / 'submitted' / case.student / step, case.make(name, release, perfect, fake), step=step, name=name)
    before = snapshot(course)
    read_only(course / 'source')  # the instructor's: grading must not write there (nor could, as a plain account)
    source = source_snapshot(course)
    rows, out = run(course, '--kill-matrix')  # prints the kill matrix of each step's sample
    alone = {(step, s): alone[(step, s)] for step, students in clean.items() for s, _ in students}
    return Graded(course, rows, out, alone, graded_cases, before, sandboxed, source)


def plain_sample(cls):
    """One student of each step of the demo class, the first mistake of its sample: it loses points in some test cells
    and keeps them in the rest, so that both kinds of score are compared. {student: {step: notebooks}}."""
    out = {}
    for step in steps():
        student = next(v.student for v in sampled(step) if v.caught_by)
        out.setdefault(student, {})[step] = cls[student][step]
    return out


def grade_plain(course):
    """One demo student per step (plain_sample) graded by plain serial `nbgrader autograde` (nbgrader's own command and kernel,
    no sandbox, one notebook after another) in a copy of the course: {(step, student): {test cell: score}}, None for a
    submission it did not grade. The whole class is compared in `make bench`."""
    from course.grader.benchmark import grades

    copy_course(course)
    cls = plain_sample(demo_class(sample=True))
    write_class(cls, course / 'submitted')
    for step in steps():
        runner.run('generate_assignment', step, '--force', '--CourseDirectory.release_directory=.build/release', cwd=course)
        # a cap on each cell far above what one takes (nbgrader_config.py's 30 s, which Step 3's training cell passed on the
        # 2-core machine at a load average of 25): this compares scores, and no cell of the sample hangs
        runner.run('autograde', step, '--force', '--Execute.timeout=300', cwd=course)
    return grades(course, cls)
