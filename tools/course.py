"""Shared glue: the course root, its assignments, nbgrader runs, and the nbgrader cell roles of a notebook."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / 'course.toml').read_text())
MARKER = re.compile(r'^[ \t]*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)[ \t]*\n?', re.M)


def assignments():
    """Every folder of source/ that holds a notebook is an assignment."""
    return sorted(p.name for p in (ROOT / 'source').iterdir() if p.is_dir() and any(p.glob('*.ipynb')))


def notebooks(aid):
    """The notebook file names of assignment aid."""
    return sorted(p.name for p in (ROOT / 'source' / aid).glob('*.ipynb'))


def colab_url(path):
    """The Colab address of a committed notebook, from course.toml's one repository setting."""
    return f"https://colab.research.google.com/github/{CONFIG['github']}/blob/{CONFIG['branch']}/{path}"


def nbgrader_env():
    """The environment an nbgrader command needs: this venv's bin on PATH (nbgrader runs alembic), our plugins importable."""
    return {**os.environ, 'PATH': f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}',
            'PYTHONPATH': str(ROOT / 'tools')}


def nbgrader(*args, check=True, cwd=ROOT, **kw):
    """Run one nbgrader command in the course root (or cwd); return the CompletedProcess (exit with its log if check fails)."""
    done = subprocess.run([sys.executable, '-m', 'nbgrader', *args], cwd=cwd, env=nbgrader_env(), capture_output=True,
                          text=True, **kw)
    if check and done.returncode:
        sys.exit(f'error: nbgrader {" ".join(args[:2])} failed:\n{done.stdout}{done.stderr}')
    return done


def role(cell):
    """'test', 'solution', 'answer' (written, graded by hand), 'locked' or None, from a cell's nbgrader metadata."""
    m = cell.get('metadata', {}).get('nbgrader', {})
    if m.get('solution'):
        return 'answer' if m.get('grade') else 'solution'
    if m.get('grade'):
        return 'test'
    return 'locked' if m.get('locked') else None


def copy_course(dest):
    """A working copy of the course in dest, with what building and grading read and none of the real class or gradebook."""
    dest = Path(dest)
    for folder in ('source', 'release', 'tools'):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('nbgrader_config.py', 'course.toml', 'input.txt'):
        shutil.copy(ROOT / name, dest / name)
    return dest


INSTRUCTOR = 'instructor'  # source/<aid>/instructor/: what only the grader sees (nbgrader_config.py keeps it out of release/)


def instructor_module(aid, name):
    """source/<aid>/instructor/<name>.py (checks: the out-of-process checks; bank: the mistakes and correct alternatives),
    imported, or None if the assignment has none."""
    path = ROOT / 'source' / aid / INSTRUCTOR / f'{name}.py'
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f'{aid}_{INSTRUCTOR}_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
