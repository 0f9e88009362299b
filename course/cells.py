"""The nbgrader cells of a notebook: each cell's role and grade_id, the marker lines of solution regions and hidden
tests, and the stub students see in place of a solution (nbgrader_config.py sets nbgrader's ClearSolutions from here)."""

import re

import nbformat

from course import gate

# The ### BEGIN/END SOLUTION and ### BEGIN/END HIDDEN TESTS lines, with their newline.
MARKER = re.compile(r'^[ \t]*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)[ \t]*\n?', re.M)
STUB_MESSAGE = 'replace this line with your code'
CODE_STUB = f"# YOUR CODE HERE\nraise NotImplementedError('{STUB_MESSAGE}')"  # in place of each solution region
STUB_LINE = CODE_STUB.splitlines()[-1]
STUB_ERROR = f"NotImplementedError('{STUB_MESSAGE}')"  # what an untouched stub raises, as ename('evalue')
TEXT_STUB = 'YOUR ANSWER HERE'  # in place of each written answer


# The largest submitted notebook the grader reads (a few MB with outputs and plots are usual; nbformat holds about 5 bytes
# per byte of file): a larger one is not read, nor graded, and gets the status 'over budget'.
NOTEBOOK_BUDGET = gate.MAX_FILE


def read(path):
    return nbformat.read(path, as_version=4)


def read_submitted(path, budget=NOTEBOOK_BUDGET):
    """A submitted notebook, read through course.gate.read_file(): never through a link, never more than budget bytes
    (course.gate.Refused past it, before anything is read)."""
    return nbformat.reads(gate.read_file(path, budget).decode('utf-8'), as_version=4)


def grade_id(cell):
    """The cell's nbgrader grade_id, or None."""
    return cell.get('metadata', {}).get('nbgrader', {}).get('grade_id')


def role(cell):
    """'test', 'solution', 'answer' (written, graded by hand), 'locked' or None, from a cell's nbgrader metadata."""
    m = cell.get('metadata', {}).get('nbgrader', {})
    if m.get('solution'):
        return 'answer' if m.get('grade') else 'solution'
    if m.get('grade'):
        return 'test'
    return 'locked' if m.get('locked') else None


def autograded_points(paths):
    """{grade_id: points} of every autograded test cell of the notebooks at paths, in notebook order."""
    return {grade_id(c): c.metadata.nbgrader.points for path in paths for c in read(path).cells if role(c) == 'test'}
