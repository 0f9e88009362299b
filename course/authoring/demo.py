"""The demo class, generated from source/: for every step, a perfect submission, a blank one, and one per variant of the
step's bank of mistakes and correct alternatives (source/<step>/instructor/bank.py). `python -m course.grader.grade --demo
--kill-matrix` (make mutants) puts it in submitted/ and grades it; the kill matrix (course.grader.killmatrix) reads its grades.
`make demo` grades a small class instead (small_class()): what the course does, in a minute or two. Either is graded in
the demo's own course, demo/ (course()): its class, gradebook and reports are never a real class's."""

import copy
import shutil
import sys
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

import nbformat

from course.cells import MARKER, grade_id, read, role
from course.layout import (
    DEMO_COURSE,
    DEMO_MARK,
    ROOT,
    copy_course,
    demo_root,
    instructor_module,
    is_demo,
    notebooks,
    steps,
)


class Variant(NamedTuple):
    """One submission of a step's bank (source/<step>/instructor/bank.py: MUTANTS and ALTERNATIVES): the perfect
    submission with a few edits, made as a student would make them. `make mutants` (and tests/test_grading.py) autograde
    every one through nbgrader: a mistake must lose points in every cell of `caught_by`, and an alternative must keep
    full marks."""

    student: str  # its id in the demo class and the kill matrix
    edits: tuple  # (grade_id of the solution cell, old text, new text), ...
    caught_by: tuple = ()  # grade_ids of the test cells that must lose points; empty for a correct alternative
    notebook: str = None  # None: the assignment's only notebook


def in_cell(gid):
    """A bank's shorthand for the edits of one solution cell: in_cell('head')((old, new), ...) is
    (('head', old, new), ...)."""
    return lambda *pairs: tuple((gid, old, new) for old, new in pairs)


def bank(step, root=ROOT):
    """source/<step>/instructor/bank.py (MUTANTS, ALTERNATIVES), or None if the step has none."""
    return instructor_module(step, 'bank', root)


def solved(step, name, root=ROOT, release=None, only=None):
    """The release notebook (or the one at release: the student repository's copy, say) with every solution region and
    written answer filled in from the source, as a student would; with only (grade_ids), just those cells."""
    source = {grade_id(c): c for c in read(root / 'source' / step / name).cells if role(c)}
    nb = read(release or root / 'release' / step / name)
    for cell in nb.cells:
        if role(cell) in ('solution', 'answer') and (only is None or grade_id(cell) in only):
            cell.source = MARKER.sub('', source[grade_id(cell)].source)
    return nb


def tasks(cells):
    """The tasks of a notebook, in order: each a list of the grade_ids of its solution cells, the consecutive ones that
    come before the same tests (Step 3's three averages are one task), with the indices of the test cells that follow
    it up to the next task."""
    out = []
    for i, cell in enumerate(cells):
        if role(cell) == 'solution':
            if out and not out[-1][1]:
                out[-1][0].append(grade_id(cell))
            else:
                out.append(([grade_id(cell)], []))
        elif role(cell) == 'test' and out:
            out[-1][1].append(i)
    return out


def edited(nb, edits):
    """A copy of nb with each (grade_id, old, new) edit applied to that cell; old must occur in it exactly once."""
    nb = copy.deepcopy(nb)
    cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
    for gid, old, new in edits:
        if gid not in cells:
            raise ValueError(f'edit of cell {gid}: no cell has that grade_id')
        count = cells[gid].source.count(old)
        if count != 1:
            raise ValueError(f'edit of cell {gid}: {old!r} occurs {count} times, not once')
        cells[gid].source = cells[gid].source.replace(old, new)
    return nb


def variants(step, root=ROOT):
    """Every Variant of the step's bank: its MUTANTS, then its ALTERNATIVES (empty if it has no bank)."""
    b = bank(step, root)
    return [*getattr(b, 'MUTANTS', []), *getattr(b, 'ALTERNATIVES', [])]


def sampled(step, root=ROOT):
    """A sample of the step's bank that still reaches every graded function: for each solution cell its mistakes edit
    first, the first of them (the bank's order), and the bank's first correct alternative. `make test` grades this
    sample; `make mutants` grades the whole bank."""
    seen, out = set(), []
    b = bank(step, root)
    for v in getattr(b, 'MUTANTS', []):
        if v.edits[0][0] not in seen:
            seen.add(v.edits[0][0])
            out.append(v)
    return out + list(getattr(b, 'ALTERNATIVES', [])[:1])


# The small demo class (make demo): per step, the perfect and the blank submission, a perfect one handed in late, and the
# first TYPICAL mistakes of sampled() (each in a different function where the bank has them).
TYPICAL = 3
LATE = 'late'  # the late student: its submission's timestamp is after the step's demo due date
DUE = datetime(2026, 1, 15, 17, 0, tzinfo=timezone.utc)  # every step's due date in the demo class (course.grader.grade --demo)
LATE_BY = timedelta(days=2)


def small_class(selected=None, root=ROOT):
    """{student: {step: {notebook name: notebook}}}: per step of selected, the perfect and blank submissions, 'late' (the
    perfect one, handed in LATE_BY after DUE: write_class() gives it nbgrader's timestamp.txt) and the first TYPICAL
    mistakes of sampled(), so that the grade table, the feedback pages and the class report have something to show."""
    cls = {}
    for step in selected or steps(root):
        mistakes = [v for v in sampled(step, root) if v.caught_by][:TYPICAL]
        for name in notebooks(step, root):
            perfect = solved(step, name, root)
            students = {'perfect': perfect, 'blank': read(root / 'release' / step / name), LATE: perfect}
            for v in mistakes:
                if v.notebook in (None, name):
                    students[v.student] = edited(perfect, v.edits)
            for student, nb in students.items():
                cls.setdefault(student, {}).setdefault(step, {})[name] = nb
    return cls


def demo_class(selected=None, root=ROOT, sample=False):
    """{student: {step: {notebook name: notebook}}}: a perfect and a blank submission, and one per bank variant (with
    sample, one per variant of sampled()), for each step of selected (default: all)."""
    cls = {}
    for step in selected or steps(root):
        for name in notebooks(step, root):
            perfect = solved(step, name, root)
            students = {'perfect': perfect, 'blank': read(root / 'release' / step / name)}
            for v in sampled(step, root) if sample else variants(step, root):
                if v.notebook in (None, name):
                    students[v.student] = edited(perfect, v.edits)
            for student, nb in students.items():
                cls.setdefault(student, {}).setdefault(step, {})[name] = nb
    return cls


def write_class(cls, folder):
    """Replace folder (submitted/) with cls, unless it holds a real class, which is never overwritten."""
    if folder.exists() and any(folder.iterdir()) and not (folder / DEMO_MARK).exists():
        sys.exit(f'error: {folder} holds a class that is not the demo; move it away first (make grade grades it as it is).')
    shutil.rmtree(folder, ignore_errors=True)
    for student, work in cls.items():
        for step, nbs in work.items():
            for name, nb in nbs.items():
                (folder / student / step).mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, folder / student / step / name)
            if student == LATE:  # nbgrader reads when a submission was handed in from timestamp.txt beside it
                (folder / student / step / 'timestamp.txt').write_text(f'{DUE + LATE_BY:%Y-%m-%d %H:%M:%S %Z}\n')
    (folder / DEMO_MARK).write_text('generated by python -m course.grader.grade --demo\n')


def course(root=ROOT):
    """The demo's own course, demo/ (course.layout.demo_root), made afresh from the course at root: a copy of what
    building and grading read (course.layout.copy_course), marked as the demo's (course.layout.is_demo), so that its
    gradebook is its own SQLite file whatever course.toml or the environment say (course.classroom.gradebook)."""
    dest = demo_root(root)
    if dest.exists() or dest.is_symlink():
        if not is_demo(dest):
            sys.exit(f'error: {dest} is not the demo\'s course (no {DEMO_COURSE} in it), and make demo writes its course '
                     'there: move it away, then run make demo again')
        shutil.rmtree(dest)
    copy_course(dest, root)
    (dest / DEMO_COURSE).write_text('the demo\'s own course, made by make demo (course.authoring.demo.course): make clean '
                                    'removes it\n')
    return dest
