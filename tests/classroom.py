"""The class that tests/test_grading.py and tests/test_submissions.py grade once, together, through tools/grade.py; and the
demo class graded by plain serial nbgrader, to compare with."""

import csv
import hashlib
import shutil
import subprocess
import sys
from typing import NamedTuple

import nbformat
from corpus import CASES

from benchmark import grades
from conftest import ensure_sandbox
from course import ROOT, assignments, copy_course, nbgrader, notebooks
from grade import DEMO_MARK, demo_class, edited, mutants, solved, write_class

AID = 'step4'
CLEAN = ('perfect', 'no_scaling', 'trap_permutes_X_not_tokens')  # graded alone first, then in the batch


class Graded(NamedTuple):
    course: object  # the course copy
    rows: dict  # (assignment, student) -> grades.csv row
    out: str  # what tools/grade.py printed
    alone: dict  # student -> row, for the CLEAN students graded alone
    cases: list  # the corpus cases graded (without the sandbox: those that do not need it)
    before: dict  # snapshot() before the batch
    sandboxed: bool


def write(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if isinstance(data, bytes):
            (folder / name).write_bytes(data)
        else:
            nbformat.write(data, folder / name)


def snapshot(course):
    """sha256 of every file outside the students' folders and what grading itself writes."""
    own = ('submitted', 'autograded', 'feedback', 'repairs', '.build', 'gradebook.db', 'grades.csv')
    return {str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in course.rglob('*') if p.is_file() and not str(p.relative_to(course)).startswith(own)
            and '__pycache__' not in p.parts}


def run(course, *flags):
    done = subprocess.run([sys.executable, 'tools/grade.py', '--cell-timeout=10', '--timeout=90', *flags],
                          cwd=course, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(course / 'grades.csv', newline='') as f:
        return {(r['assignment'], r['student_id']): r for r in csv.DictReader(f)}, done.stdout + done.stderr


def grade_class(course):
    copy_course(course)
    can_sandbox = ensure_sandbox()
    bank = {m.student: m for aid in assignments() for m in mutants(aid).MUTANTS}
    name = notebooks(AID)[0]
    perfect = solved(AID, name)
    for student in CLEAN:
        nb = perfect if student == 'perfect' else edited(perfect, bank[student].edits)
        write(course / 'submitted' / student / AID, {name: nb})
    alone, _ = run(course)
    shutil.rmtree(course / 'submitted')
    write_class(demo_class(), course / 'submitted')
    (course / 'submitted' / DEMO_MARK).unlink()
    release = nbformat.read(ROOT / 'release' / AID / name, as_version=4)
    cases = [c for c in CASES if can_sandbox or not c.needs_sandbox]
    for case in cases:
        write(course / 'submitted' / case.student / AID, case.make(name, release, perfect))
    before = snapshot(course)
    rows, out = run(course, '--kill-matrix')
    return Graded(course, rows, out, {s: alone[(AID, s)] for s in CLEAN}, cases, before, can_sandbox)


def grade_plain(course):
    """The demo class graded by plain serial `nbgrader autograde` (nbgrader's own command and kernel, no sandbox, one
    notebook after another) in a copy of the course: {(assignment, student): {test cell: score}}, as benchmark.grades()
    reads it (None for a submission it did not grade)."""
    copy_course(course)
    cls = demo_class()
    write_class(cls, course / 'submitted')
    for aid in assignments():
        nbgrader('generate_assignment', aid, '--force', '--CourseDirectory.release_directory=.build/release', cwd=course)
        nbgrader('autograde', aid, '--force', cwd=course)
    return grades(course, cls)
