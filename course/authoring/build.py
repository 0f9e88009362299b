"""Generate release/ (students' notebooks) and notebooks/ (solutions, executed) from every step of source/ with nbgrader.

  python -m course.authoring.build            regenerate both, executing the solutions whose source changed   (make build)
  python -m course.authoring.build --force    execute every solution again, changed or not   (make build FORCE=1)
  python -m course.authoring.build --check    regenerate into a temporary folder and fail if a committed file is stale
                                              (make check)

An executed solution whose notebook, without its outputs, is what source/ generates, and whose step ships the same files
as when it was executed, is kept as committed: its outputs hold wall-clock times and figures that differ from run to run,
so executing it again would change a committed file that nothing changed (make demo, which builds first, leaves a clone's
git status clean).
"""

import argparse
import copy
import logging
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import ClearMetadataPreprocessor, ClearOutputPreprocessor, CoalesceStreamsPreprocessor
from traitlets.config import Config

from course import runner
from course.cells import MARKER, read
from course.layout import GRADEBOOK, ROOT, colab_url, notebooks, steps
from course.settings import load

BADGE = '(COLAB_URL)'  # the Colab badge placeholder in the source notebooks
# README.md's table of steps lies between these lines; build() writes it, check() compares it.
TABLE_START, TABLE_END = '<!-- steps: written by make build from source/ -->', '<!-- /steps -->'


# Links to a file of a GitHub repository, three ways: Colab's, the raw file's, and GitHub's own page.
_REPO, _BRANCH, _PATH = r'(?P<repo>[\w.-]+/[\w.-]+)', r'(?P<branch>[\w.-]+)', r'(?P<path>[^\s)\'"\]>#?]+)'
REPO_LINK = re.compile(rf'(?P<pre>https://colab\.research\.google\.com/github/){_REPO}(?P<sep>/blob/){_BRANCH}/{_PATH}'
                       rf'|(?P<pre2>https://raw\.githubusercontent\.com/){_REPO.replace("repo", "repo2")}(?P<sep2>/)'
                       rf'{_BRANCH.replace("branch", "branch2")}/{_PATH.replace("path", "path2")}'
                       rf'|(?P<pre3>https://github\.com/){_REPO.replace("repo", "repo3")}(?P<sep3>/(?:blob|tree)/)'
                       rf'{_BRANCH.replace("branch", "branch3")}/{_PATH.replace("path", "path3")}')


def _parts(m):
    """(prefix, repository, separator, branch, path) of a REPO_LINK match, whichever of its three forms matched."""
    k = next(k for k in ('', '2', '3') if m[f'pre{k}'])
    return m[f'pre{k}'], m[f'repo{k}'], m[f'sep{k}'], m[f'branch{k}'], m[f'path{k}']


def repo_links(text, root=ROOT):
    """[(repository, branch, path)] of every link in text to a file that exists in this repository (a link to another
    project's file, such as char-rnn's data, is not one)."""
    links = [_parts(m) for m in REPO_LINK.finditer(text)]
    return [(repo, branch, path) for _, repo, _, branch, path in links if (Path(root) / path).exists()]


def with_course_links(text, root=ROOT):
    """text with every link to a file of this repository pointed at course.toml's repository and branch."""
    s = load(root)

    def point(m):
        pre, _, sep, _, path = _parts(m)
        return f'{pre}{s.github}{sep}{s.branch}/{path}' if (Path(root) / path).exists() else m[0]

    return REPO_LINK.sub(point, text)


def with_course_links_nb(nb, root=ROOT):
    """nb (changed in place) with every cell's links to this repository pointed at course.toml's; True if any changed."""
    changed = False
    for cell in nb.cells:
        new = with_course_links(cell.source, root)
        changed |= new != cell.source
        cell.source = new
    return changed


def set_badge(nb, path, root=ROOT):
    """Point the Colab badge placeholder of nb's markdown cells at path (relative to the repository root)."""
    for cell in nb.cells:
        if cell.cell_type == 'markdown':
            cell.source = cell.source.replace(BADGE, f'({colab_url(path, root)})')


def generate(converter, step, out, root=ROOT):
    """nbgrader's generate_assignment or generate_solution converter for step, in this process, writing under out (the
    release, the solution and a scratch gradebook)."""
    from nbgrader.coursedir import CourseDirectory

    (out / '.build').mkdir(parents=True, exist_ok=True)
    extra = Config()
    extra.CourseDirectory.release_directory = str(out / 'release')
    extra.CourseDirectory.solution_directory = str(out / '.build' / 'solution')
    extra.CourseDirectory.db_url = f'sqlite:///{out / ".build" / GRADEBOOK}'
    config = runner.config(extra, root)
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id = step
    app = converter(coursedir=coursedir, config=config)
    app.log.setLevel(logging.WARNING)
    app.force = True
    app.start()


def title(nb):
    """The step's title, from its first markdown line ('# Step 4 — a causal self-attention head')."""
    first = next((c.source for c in nb.cells if c.cell_type == 'markdown'), '')
    return first.splitlines()[0].lstrip('# ').strip() if first else ''


def steps_table(root=ROOT):
    """README.md's table of steps: each notebook's title, its student version (what make publish gives students once
    the step opens), its executed solution (the instructor's), and the earlier steps whose solutions its release shows
    (course.authoring.reproduced: the step opens only once they are past due)."""
    from course.authoring.reproduced import reproduced

    shows = reproduced(root)
    lines = ['| step | student version: published when the step opens | solution, executed: yours alone '
             '| shows the solutions of |', '|---|---|---|---|']
    for step in steps(root):
        for name in notebooks(step, root):
            release, solution = f'release/{step}/{name}', f'notebooks/{name}'
            earlier = ', '.join(shows.get(step, {})) or '—'
            lines.append(f'| {title(read(root / "source" / step / name))} | [`{release}`]({release}) '
                         f'| [`{solution}`]({solution}) | {earlier} |')
    return '\n'.join(lines)


def with_steps_table(text, root=ROOT):
    """README text with its table of steps rewritten (unchanged if it has no table markers)."""
    if TABLE_START not in text:
        return text
    head, rest = text.split(TABLE_START, 1)
    return f'{head}{TABLE_START}\n{steps_table(root)}\n{TABLE_END}{rest.split(TABLE_END, 1)[1]}'


def execute(nb, cwd):
    """Run nb top to bottom in cwd; any error stops the build. A cell may take 600 s on the clock: Steps 6 and 7 train
    small models for seconds of CPU, which a machine shared with many other processes stretches tenfold."""
    NotebookClient(nb, timeout=600, startup_timeout=600, kernel_name='python3', record_timing=False,
                   resources={'metadata': {'path': str(cwd)}}).execute()
    CoalesceStreamsPreprocessor().preprocess(nb, {})  # one output per stream, however the kernel flushed it


def unchanged(fresh, committed):
    """Whether committed (the path of an executed solution) may stand for fresh (the notebook just generated, not yet
    executed): every code cell of it executed, and the same notebook without what executing writes."""
    if not committed.is_file():
        return False
    old = read(committed)
    if not all(c.get('execution_count') for c in old.cells if c.cell_type == 'code'):
        return False
    before, now = without_execution(old, copy.deepcopy(fresh))
    return before == now


def build(out, run=True, root=ROOT, force=False, kept=None):
    """Write release/<step>/ and notebooks/<name>.ipynb under out; return the paths written, relative to out. With run, an
    executed solution in root/notebooks/ that unchanged() says still stands is kept (copied, when out is elsewhere), not
    executed again, unless force; the paths of those kept are added to kept (a list), if given."""
    from nbgrader.converters import GenerateAssignment, GenerateSolution

    root, out = Path(root), Path(out)
    written = []
    for step in steps(root):
        generate(GenerateAssignment, step, out, root)
        generate(GenerateSolution, step, out, root)
        # What else source/<step>/ ships to students (data, helpers), as nbgrader copied it into the release; a copy goes
        # next to the executed solution too (notebooks/ is flat: two steps may not ship different files of one name).
        shipped = [p.relative_to(out / 'release' / step) for p in sorted((out / 'release' / step).rglob('*'))
                   if p.is_file() and p.suffix != '.ipynb']
        (out / 'notebooks').mkdir(exist_ok=True)
        # what the step ships, as its solution was executed with (root's notebooks/) and as generated now, compared
        # before it is copied over: a solution executed with other files is executed again
        same_files = all((root / 'notebooks' / rel).is_file() and (root / 'notebooks' / rel).read_bytes()
                         == (out / 'release' / step / rel).read_bytes() for rel in shipped)
        for rel in shipped:
            target = out / 'notebooks' / rel
            if Path('notebooks') / rel in written and target.read_bytes() != (out / 'release' / step / rel).read_bytes():
                sys.exit(f'error: two steps ship different files named {rel}; notebooks/ is flat, rename one.')
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / 'release' / step / rel, target)
            written += [Path('release') / step / rel, Path('notebooks') / rel]
        for name in notebooks(step, root):
            rel = Path('release') / step / name
            nb = read(out / rel)
            set_badge(nb, rel, root)
            nbformat.write(nb, out / rel)
            written.append(rel)

            rel = Path('notebooks') / name
            if rel in written:
                sys.exit(f'error: two steps have a notebook named {name}; notebooks/ is flat, rename one.')
            nb = read(out / '.build' / 'solution' / step / name)
            for cell in nb.cells:
                cell.source = MARKER.sub('', cell.source)
            set_badge(nb, rel, root)
            if run and not force and same_files and unchanged(nb, root / rel):  # executed from this source: it stands
                if (root / rel).resolve() != (out / rel).resolve():
                    shutil.copyfile(root / rel, out / rel)
                if kept is not None:
                    kept.append(rel)
            else:
                if run:
                    execute(nb, out / 'notebooks')
                nbformat.write(nb, out / rel)
            written.append(rel)
    return written


def without_execution(*nbs):
    """The notebooks as JSON without what executing them writes: outputs, execution counts and timings (nbconvert's
    ClearOutput), and the kernel's language_info (ClearMetadata, keeping every other notebook metadata key)."""
    keep = set().union(*(nb.metadata for nb in nbs)) - {'language_info'}
    clear = [ClearOutputPreprocessor(remove_metadata_fields={'collapsed', 'scrolled', 'execution'}),
             ClearMetadataPreprocessor(clear_cell_metadata=False, preserve_nb_metadata_mask=keep)]
    out = []
    for nb in nbs:
        for p in clear:
            nb, _ = p.preprocess(nb, {})
        out.append(nbformat.writes(nb))
    return out


def check(root=ROOT):
    """Problems with the committed generated files, one line each (empty when all are fresh)."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        written = build(Path(tmp), run=False, root=root)
        for rel in written:
            committed, fresh = root / rel, Path(tmp) / rel
            if not committed.exists():
                problems.append(f'{rel} is missing: run make build and commit it')
                continue
            if rel.suffix != '.ipynb':
                if committed.read_bytes() != fresh.read_bytes():
                    problems.append(f'{rel} is stale (it differs from source/): run make build and commit it')
                continue
            old, new = read(committed), read(fresh)
            if rel.parts[0] == 'notebooks':
                executed = all(c.get('execution_count') for c in old.cells if c.cell_type == 'code')
                old, new = without_execution(old, new)
            else:
                executed, old, new = True, nbformat.writes(old), nbformat.writes(new)
            if old != new:
                problems.append(f'{rel} is stale (it differs from what source/ generates): run make build and commit it')
            elif not executed:
                problems.append(f'{rel} is not executed: run make build and commit it')
    s = load(root)
    problems += [f'{rel}: a link names another repository than course.toml\'s {s.github} ({s.branch}): run make build '
                 'and commit it' for rel in point_links(root, write=False)]
    readme = root / 'README.md'
    if readme.exists() and with_steps_table(readme.read_text(), root) != readme.read_text():
        problems.append('README.md: its table of steps is stale: run make build and commit it')
    generated = {p.relative_to(root) for folder in ('release', 'notebooks') for p in (root / folder).rglob('*') if p.is_file()
                 and p.name not in ('input.txt', 'input.txt.part')  # the data (gitignored), where a notebook may fetch it
                 and not any(part.startswith('.') or part == '__pycache__' for part in p.parts[len(root.parts):])}
    problems += [f'{rel} is not generated from source/: delete it' for rel in sorted(generated - set(written))]
    return problems


def linked_files(root=ROOT):
    """The files whose links to this repository make build points at course.toml's: the source notebooks, the README and
    docs/ (release/ and notebooks/ are generated from the sources)."""
    return [*(Path(root) / 'source' / step / name for step in steps(root) for name in notebooks(step, root)),
            Path(root) / 'README.md', *sorted((Path(root) / 'docs').glob('*.md'))]


def point_links(root=ROOT, write=True):
    """Point every link to this repository in linked_files() at course.toml's repository and branch; return the paths
    (relative to root) that were, or with write=False would be, changed."""
    changed = []
    for path in linked_files(root):
        if not path.exists():
            continue
        if path.suffix == '.ipynb':
            nb = read(path)
            if with_course_links_nb(nb, root):
                changed.append(path.relative_to(root))
                if write:
                    nbformat.write(nb, path)
        else:
            text = path.read_text()
            if with_course_links(text, root) != text:
                changed.append(path.relative_to(root))
                if write:
                    path.write_text(with_course_links(text, root))
    return changed


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.authoring.build', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--check', action='store_true', help='fail if a committed generated file is stale; write nothing')
    ap.add_argument('--force', action='store_true',
                    help='execute every solution again, even one whose source and shipped files did not change (after '
                         'a change of torch, say)')
    args = ap.parse_args(argv)
    if args.check:
        problems = check()
        print('\n'.join(problems) or 'release/ and notebooks/ are up to date with source/')
        sys.exit(1 if problems else 0)
    s = load()
    for rel in point_links():
        print(f'wrote {rel}: its links to this repository now name {s.github} ({s.branch})')
    kept = []
    for rel in build(ROOT, force=args.force, kept=kept):
        print(f'kept {rel}: executed from the same source (make build FORCE=1 executes it again)' if rel in kept
              else f'wrote {rel}')
    readme = ROOT / 'README.md'
    if readme.exists():
        readme.write_text(with_steps_table(readme.read_text()))
        print('wrote the table of steps in README.md')


if __name__ == '__main__':
    main()
