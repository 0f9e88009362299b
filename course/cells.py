"""The nbgrader cells of a notebook: each cell's role and grade_id, the marker lines of solution regions and hidden
tests, and the stub students see in place of a solution (nbgrader_config.py sets nbgrader's ClearSolutions from here)."""

import re

import nbformat

# The ### BEGIN/END SOLUTION and ### BEGIN/END HIDDEN TESTS lines, with their newline.
MARKER = re.compile(r'^[ \t]*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)[ \t]*\n?', re.M)
STUB_MESSAGE = 'replace this line with your code'
CODE_STUB = f"# YOUR CODE HERE\nraise NotImplementedError('{STUB_MESSAGE}')"  # in place of each solution region
STUB_LINE = CODE_STUB.splitlines()[-1]
STUB_ERROR = f"NotImplementedError('{STUB_MESSAGE}')"  # what an untouched stub raises, as ename('evalue')
TEXT_STUB = 'YOUR ANSWER HERE'  # in place of each written answer


def read(path):
    return nbformat.read(path, as_version=4)


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
