"""Generate release/ (student) and notebooks/ (solution, executed) from every assignment in source/ with nbgrader.

  python tools/build.py            regenerate both, executing the solutions
  python tools/build.py --check    regenerate into a temporary folder and fail if a committed file is stale
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from course import MARKER, ROOT, assignments, colab_url, nbgrader

BADGE = '(COLAB_URL)'


def set_badge(nb, path):
    """Point the Colab badge placeholder of nb's markdown cells at path (relative to the repository root)."""
    for cell in nb.cells:
        if cell.cell_type == 'markdown':
            cell.source = cell.source.replace(BADGE, f'({colab_url(path)})')


def generate(command, aid, out):
    """nbgrader generate_assignment/generate_solution for aid, writing under out (release, solution and a scratch gradebook)."""
    (out / '.build').mkdir(parents=True, exist_ok=True)
    nbgrader(command, aid, '--force', '--log-level=WARN',
             f'--CourseDirectory.release_directory={out / "release"}',
             f'--CourseDirectory.solution_directory={out / ".build" / "solution"}',
             f'--CourseDirectory.db_url=sqlite:///{out / ".build" / "gradebook.db"}')


def execute(nb, cwd):
    """Run nb top to bottom in cwd; any error stops the build."""
    NotebookClient(nb, timeout=120, kernel_name='python3', record_timing=False,
                   resources={'metadata': {'path': str(cwd)}}).execute()
    CoalesceStreamsPreprocessor().preprocess(nb, {})  # one output per stream, however the kernel flushed it


def build(out, run=True):
    """Write release/<aid>/ and notebooks/<name>.ipynb under out; return the paths written, relative to out."""
    written = []
    for aid in assignments():
        generate('generate_assignment', aid, out)
        generate('generate_solution', aid, out)
        for src in sorted((ROOT / 'source' / aid).glob('*.ipynb')):
            rel = Path('release') / aid / src.name
            nb = nbformat.read(out / rel, as_version=4)
            set_badge(nb, rel)
            nbformat.write(nb, out / rel)
            written.append(rel)

            rel = Path('notebooks') / src.name
            if rel in written:
                sys.exit(f'error: two assignments have a notebook named {src.name}; notebooks/ is flat, rename one.')
            nb = nbformat.read(out / '.build' / 'solution' / aid / src.name, as_version=4)
            for cell in nb.cells:
                cell.source = MARKER.sub('', cell.source)
            set_badge(nb, rel)
            (out / 'notebooks').mkdir(exist_ok=True)
            if run:
                execute(nb, out / 'notebooks')
            nbformat.write(nb, out / rel)
            written.append(rel)
    return written


def comparable(path, outputs):
    """The notebook at path as JSON, without what the check ignores (outputs unless asked, volatile metadata)."""
    nb = json.loads(Path(path).read_text())
    if not outputs:
        nb['metadata'].pop('language_info', None)  # written by the kernel that executed it
    for cell in nb['cells']:
        cell['metadata'].pop('execution', None)
        if not outputs and cell['cell_type'] == 'code':
            cell['outputs'], cell['execution_count'] = [], None
    return nb


def check():
    """Problems with the committed generated files, one line each (empty when all are fresh)."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        written = build(Path(tmp), run=False)
        for rel in written:
            committed = ROOT / rel
            fresh = Path(tmp) / rel
            executed = rel.parts[0] == 'notebooks'
            if not committed.exists():
                problems.append(f'{rel} is missing: run make build and commit it')
            elif comparable(committed, not executed) != comparable(fresh, not executed):
                problems.append(f'{rel} is stale (it differs from what source/ generates): run make build and commit it')
            elif executed and any(c.get('execution_count') is None
                                  for c in comparable(committed, True)['cells'] if c['cell_type'] == 'code'):
                problems.append(f'{rel} is not executed: run make build and commit it')
    generated = {p.relative_to(ROOT) for p in (ROOT / 'release').rglob('*') if p.is_file()}
    generated |= {p.relative_to(ROOT) for p in (ROOT / 'notebooks').glob('*.ipynb')}
    problems += [f'{rel} is not generated from source/: delete it' for rel in sorted(generated - set(written))]
    return problems


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--check', action='store_true', help='fail if a committed generated file is stale; write nothing')
    if ap.parse_args().check:
        problems = check()
        print('\n'.join(problems) or 'release/ and notebooks/ are up to date with source/')
        sys.exit(1 if problems else 0)
    for rel in build(ROOT):
        print(f'wrote {rel}')
