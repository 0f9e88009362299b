"""Shared fixtures: the course's notebooks, parametrized over every assignment in source/."""

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'tools'))

from course import assignments, notebooks  # noqa: E402

NOTEBOOKS = [(aid, name) for aid in assignments() for name in notebooks(aid)]


@pytest.fixture(params=NOTEBOOKS, ids=[f'{a}/{n}' for a, n in NOTEBOOKS])
def notebook(request):
    """(assignment id, notebook name) of every source notebook."""
    return request.param


def read(path):
    return nbformat.read(path, as_version=4)
