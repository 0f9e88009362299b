"""Where things are: the course root, its steps (every folder of source/ with a notebook), their notebooks, the
grader-only material of each step (source/<step>/instructor/), and the folders grading writes.

A step is one folder, source/<step>/:
  <notebook>.ipynb          the nbgrader source (solution regions, locked test cells, hidden tests, written answers)
  instructor/checks.py      optional: make_inputs(), probe(), a @claim per test cell: out-of-process checks
  instructor/bank.py        MUTANTS and ALTERNATIVES (Variant(student, edits, caught_by, notebook)): the kill matrix
  anything else             shipped to students with the notebook (nbgrader copies it into release/<step>/)
nbgrader_config.py lists `instructor` in CourseDirectory.ignore, so nothing of instructor/ reaches release/ or autograded/.
"""

import importlib.util
import shutil
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTOR = 'instructor'  # source/<step>/instructor/: the grader's alone


@cache
def settings(root=ROOT):
    """course.toml: the repository the Colab badges point at, and the data's URL and sha256."""
    return tomllib.loads((Path(root) / 'course.toml').read_text())


def steps(root=ROOT):
    """Every folder of source/ that holds a notebook is a step (an nbgrader assignment), in name order."""
    return sorted(p.name for p in (Path(root) / 'source').iterdir() if p.is_dir() and any(p.glob('*.ipynb')))


def notebooks(step, root=ROOT):
    """The notebook file names of a step."""
    return sorted(p.name for p in (Path(root) / 'source' / step).glob('*.ipynb'))


def instructor_module(step, name, root=ROOT):
    """source/<step>/instructor/<name>.py imported (checks or bank), or None if the step has none."""
    path = Path(root) / 'source' / step / INSTRUCTOR / f'{name}.py'
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f'{step}_{INSTRUCTOR}_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def colab_url(path, root=ROOT):
    """The Colab address of a committed notebook, from course.toml's one repository setting."""
    s = settings(root)
    return f"https://colab.research.google.com/github/{s['github']}/blob/{s['branch']}/{path}"


def log_path(step, student, root=ROOT):
    """nbgrader's log (and the kernel's stderr) of one submission's grading."""
    return Path(root) / '.build' / 'logs' / step / f'{student}.log'


def result_path(step, student, root=ROOT):
    """The outcome of one submission's grading, as JSON (course.reports.results)."""
    return Path(root) / 'results' / step / f'{student}.json'


def copy_course(dest, root=ROOT):
    """A working copy of the course in dest: what building and grading read, none of the class or the gradebook."""
    dest = Path(dest)
    for folder in ('source', 'release', 'course'):
        shutil.copytree(Path(root) / folder, dest / folder, ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('nbgrader_config.py', 'course.toml', 'input.txt'):
        shutil.copy(Path(root) / name, dest / name)
    return dest


def autograded_points(step, root=ROOT):
    """{grade_id: points} of every autograded test cell of a step's source notebooks, in notebook order."""
    from course.cells import autograded_points as points

    return points(Path(root) / 'source' / step / name for name in notebooks(step, root))
