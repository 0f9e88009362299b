"""Write the student repository: what students get, by course.toml's release schedule (docs/publishing.md).

  python -m course.authoring.publish                      write it into course.toml's [publish] folder   (make publish)
  python -m course.authoring.publish --now 2027-02-01T12:00:00+00:00   a preview: as it would be then, in <folder>-preview/
  python -m course.authoring.publish --now ... --out /tmp/s             the same, elsewhere

A step is published once its release date has come and every step whose solution its release reproduces (found from
its reproduced cells by course.authoring.reproduced, never from a list) is past due; its executed solution too, once it is past
due, if the schedule says `solution = true` (without its hidden tests and rubrics, unless [publish] hidden_tests = true).
It refuses to publish while [publish] github is the placeholder the course ships with. Without dates the course is
self-paced: every step is published, and the student README says what that means. The folder holds only what this
writes (.course-publish.json lists every file and its sha256): a file changed or added by hand there is refused, never
overwritten, unless --force.
"""

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from course.authoring.build import REPO_LINK, _parts, title
from course.authoring.reproduced import reproduced
from course.cells import MARKER, read, role
from course.layout import ROOT, notebooks, steps
from course.settings import Dates, load, shown, when

MANIFEST = '.course-publish.json'
PREVIEW = '-preview'  # --now without --out writes <[publish] folder>-preview/, never the folder pushed to students
# What students need to run a step locally, pinned as this course's requirements.txt pins them (jupyterlab brings the
# kernel); what the notebooks import is tested in Colab's own versions too (docs/colab.md).
LOCAL_PACKAGES = ('torch', 'numpy', 'matplotlib', 'jupyterlab')
CPU_INDEX = 'https://download.pytorch.org/whl/cpu'
LICENSE = """\
This course material (the notebooks, their text, figures and code, and the trained checkpoint) is licensed under the
Creative Commons Attribution 4.0 International License (CC BY 4.0): you may share and adapt it, for any purpose, if you
give appropriate credit ("Build a transformer from scratch"), link to the license, and say what you changed.
The license's full text: https://creativecommons.org/licenses/by/4.0/legalcode

Tiny Shakespeare, which the notebooks download, is the char-rnn project's public-domain corpus and is not part of this
material.
"""
# Why CC BY 4.0, in one line (the README says it): it is written for teaching material (prose, figures and the code that
# goes with them), lets other teachers reuse and adapt the course with credit, and asks nothing more.
LICENSE_WHY = ('it is made for educational material such as this (text, figures and teaching code): anyone may reuse '
               'and adapt it, crediting the course.')


class PublishError(Exception):
    """A problem that stops publishing before anything is written: one line, naming the file and what to do."""


def schedule(config, root=ROOT):
    """{step: Dates} for every step of source/, from config's [schedule] (course.settings has checked each line). Without
    dates in it, the course is self-paced: every step's release and due are None. Either every step has both dates or
    none has any."""
    out = {step: config.schedule.get(step, Dates()) for step in steps(root)}
    dated = [s for s, d in out.items() if d.release]
    if dated and len(dated) != len(out):
        undated = [s for s in out if s not in dated]
        raise PublishError(f'{shown(config.file)}: [schedule] dates {", ".join(dated)} but not {", ".join(undated)}: '
                           'date every step, or none for a self-paced course')
    return out


def self_paced(dates):
    return all(d.release is None for d in dates.values())


@dataclass
class State:
    """Where one step stands at a moment: open (its release is published), past_due, solution (its executed solution
    is published), opens (when it opens: its release date, or a later due date of a step it reproduces), waits_for."""
    open: bool
    past_due: bool
    solution: bool
    opens: datetime | None
    waits_for: list


def states(dates, now, root=ROOT):
    """{step: State} at now (an aware datetime)."""
    shows = reproduced(root)
    out = {}
    for step, d in dates.items():
        if d.release is None:
            out[step] = State(True, False, d.solution, None, [])
            continue
        deps = sorted(shows.get(step, {}))
        opens = max([d.release, *(dates[t].due for t in deps)])
        past = {t: now > dates[t].due for t in deps}
        is_open = now >= d.release and all(past.values())
        out[step] = State(is_open, now > d.due, is_open and d.solution and now > d.due, opens,
                          [t for t in deps if dates[t].due > d.release])
    return out


def _stamp(when):
    return when.isoformat(sep=' ', timespec='minutes')


def _sha(data):
    return hashlib.sha256(data).hexdigest()


# What a published solution leaves out unless [publish] hidden_tests = true: each test cell's hidden tests (the source's
# cell without its HIDDEN TESTS regions, as nbgrader's ClearHiddenTests gives students), and each written answer's rubric
# (its last paragraph, from a line that starts "*Rubric" or "**Rubric": the form every source's answers use,
# tests/test_publish.py checks it).
HIDDEN = re.compile(r'^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n.*?^[ \t]*### END HIDDEN TESTS[ \t]*(\n|\Z)', re.M | re.S)
RUBRIC = re.compile(r'\s*^[ \t]*[*_]{0,2}Rubric\b.*\Z', re.M | re.S)


class Tree:
    """The student repository being built: {path: bytes}, and the map from this repository's paths to its own."""

    def __init__(self, config, root):
        self.root, self.config = Path(root), config
        self.files, self.paths = {}, {}
        self.repo, self.branch = config.student_repository(), config.publish.branch

    def colab(self, path):
        return f'https://colab.research.google.com/github/{self.repo}/blob/{self.branch}/{path}'

    def relink(self, text, origin):
        """text with every link to a file of this repository pointed at the same file in the student repository (a file
        a step ships, downloaded from its raw address: at [publish] files_url instead, if set); a link to a file the
        student repository does not have stops publishing."""
        def point(m):
            pre, repo, sep, _, path = _parts(m)
            if repo != self.config.github:
                return m[0]
            if path not in self.paths:
                raise PublishError(f'{origin} links to {path} of this repository, which the student repository does not '
                                   'have (not published yet, or never): remove the link in source/ and run make build')
            files = self.config.publish.files_url
            if files and pre == 'https://raw.githubusercontent.com/' and not path.endswith('.ipynb'):
                return f'{files.rstrip("/")}/{Path(path).name}'
            return f'{pre}{self.repo}{sep}{self.branch}/{self.paths[path]}'

        return REPO_LINK.sub(point, text)

    def notebook(self, src, dest, step=None):
        """The notebook at src (relative to the course), relinked, as dest; step: src is that step's executed solution,
        published without its hidden tests and rubrics unless [publish] hidden_tests."""
        nb = read(self.root / src)
        if step and not self.config.publish.hidden_tests:
            without_secrets(nb, step, self.root, src)
        for cell in nb.cells:
            cell.source = self.relink(cell.source, src)
        self.files[dest] = nbformat.writes(nb).encode() + b'\n'


def without_secrets(nb, step, root, origin):
    """nb (a step's executed solution, changed in place) without its hidden tests and its rubrics (HIDDEN, RUBRIC): a test
    cell whose source had hidden tests loses its outputs too (what they printed)."""
    from course.cells import grade_id

    source = {grade_id(c): c.source for name in notebooks(step, root) for c in read(root / 'source' / step / name).cells
              if role(c) == 'test'}
    for cell in nb.cells:
        if role(cell) == 'test' and HIDDEN.search(source.get(grade_id(cell), '')):
            full = source[grade_id(cell)]
            if MARKER.sub('', full) != cell.source:
                raise PublishError(f'{origin}: test cell {grade_id(cell)} is not its source\'s: run make build')
            cell.source = MARKER.sub('', HIDDEN.sub('', full)).rstrip('\n')
            cell.outputs = []
        elif role(cell) == 'answer':
            cell.source = RUBRIC.sub('', cell.source)


def student_tree(config, now, root=ROOT):
    """{path: bytes} of the student repository at now, and {step: State}."""
    root = Path(root)
    dates = schedule(config, root)
    st = states(dates, now, root)
    tree = Tree(config, root)
    plan = []  # (source path, student path, the step whose solution it is)
    for step in steps(root):
        if not st[step].open:
            continue
        release = root / 'release' / step
        for p in sorted(release.rglob('*')):
            # what make build wrote there: not the data a notebook run there fetched, nor hidden files or caches
            rel = p.relative_to(release)
            if (p.is_file() and p.name not in ('input.txt', 'input.txt.part')
                    and not any(part.startswith('.') or part == '__pycache__' for part in rel.parts)):
                plan.append((f'release/{step}/{rel.as_posix()}', f'{step}/{rel.as_posix()}', None))
        if st[step].solution:
            plan += [(f'notebooks/{name}', f'{step}/solution/{name}', step) for name in notebooks(step, root)]
    tree.paths = {src: dest for src, dest, _ in plan}
    for src, dest, solution_of in plan:
        if src.endswith('.ipynb'):
            tree.notebook(src, dest, solution_of)
        else:
            tree.files[dest] = (root / src).read_bytes()
    tree.files['README.md'] = readme(tree, dates, st, config.publish.handin, root).encode()
    tree.files['LICENSE'] = LICENSE.encode()
    tree.files['.gitignore'] = b'# the data each notebook downloads next to itself, and JupyterLab\'s autosaves\n' \
                               b'input.txt\ninput.txt.part\n.ipynb_checkpoints/\n'
    tree.files['requirements.txt'] = local_requirements(root).encode()
    mine = re.compile(rf'(?<![\w.-]){re.escape(config.github)}(?![\w.-])'.encode())
    for path, data in sorted(tree.files.items()):
        if not path.endswith('.pt') and mine.search(data):
            raise PublishError(f'{path} would name this repository, {config.github}, in a way make publish does not '
                               'point at the student repository (a link to no file?): take it out of source/ and run '
                               'make build')
    return tree.files, st


def local_requirements(root=ROOT):
    pins = [line.split('#')[0].strip() for line in (Path(root) / 'requirements.txt').read_text().splitlines()]
    chosen = [p for p in pins if p.split('==')[0].lower() in LOCAL_PACKAGES]
    return ('# To run the notebooks on your own machine (Python 3.11): python -m pip install -r requirements.txt\n'
            '# PyTorch\'s own index of CPU builds: there torch 2.13.0 is 2.13.0+cpu, which sorts above PyPI\'s 2.13.0 (on\n'
            '# Linux, the multi-GB CUDA build), so pip takes it. Every step runs on a CPU.\n'
            f'--extra-index-url {CPU_INDEX}\n' + ''.join(f'{p}\n' for p in chosen))


# What the student README says of handing in is kept in docs/, one text that instructors read there and students in the
# README: (file, heading) of the section, by [publish] handin. Its links must be full addresses (students have no docs/).
STUDENT_TEXT = {'lms': ('docs/lms.md', 'For students'), 'hub': ('docs/publishing.md', 'For students on the hub')}


def student_text(handin, root=ROOT):
    """The docs section that tells students how to hand in (STUDENT_TEXT), without its heading."""
    rel, heading = STUDENT_TEXT[handin]
    m = re.search(rf'^## {re.escape(heading)}\n(.*?)(?=^## |\Z)', (Path(root) / rel).read_text(), re.S | re.M)
    if not m or not m[1].strip():
        raise PublishError(f'{rel}: no "## {heading}" section, which the student README says of handing in: restore it')
    relative = re.search(r'\]\((?![a-z]+:)([^)]*)\)', m[1])
    if relative:
        raise PublishError(f'{rel}: "## {heading}" links {relative[1]}, which the student repository does not have: '
                           'link a full https:// address')
    return m[1].strip()


# docs/lms.md's text for students names every LMS the course collects from; the README names the course's own
# ([publish] lms) in their place, and leaves out what it says for another one ("In Moodle, first remove ...").
ANY_LMS = 'Canvas or Moodle'
KNOWN_LMS = ('Canvas', 'Moodle', 'Blackboard', 'Brightspace', 'Sakai')


def with_lms(text, lms):
    """text (for students handing in through an LMS) naming lms, the course's LMS, where it says ANY_LMS, and without its
    sentences that begin "In <another LMS>,"."""
    if ANY_LMS not in text:
        raise PublishError(f'{STUDENT_TEXT["lms"][0]}: "## {STUDENT_TEXT["lms"][1]}" no longer says "{ANY_LMS}", which '
                           'the student README replaces with [publish] lms: say it again, or change ANY_LMS in '
                           'course/authoring/publish.py')
    text = text.replace(ANY_LMS, lms)
    for other in KNOWN_LMS:
        if other.lower() != lms.lower():
            text = re.sub(rf'[ \t]*\bIn {other}, [^.]*\.', '', text)
    return text


def late_rule(root=ROOT):
    """What happens to work handed in after its due date, in one sentence, as the course's nbgrader_config.py sets it
    (the one place the rule is kept): nbgrader's LateSubmissionPlugin penalty_method, or another plugin."""
    from course import runner

    c = runner.config(root=root)
    plugin = c.AssignLatePenalties.get('plugin_class', 'nbgrader.plugins.LateSubmissionPlugin')
    name = plugin if isinstance(plugin, str) else f'{plugin.__module__}.{plugin.__qualname__}'
    if name not in ('nbgrader.plugins.LateSubmissionPlugin', 'nbgrader.plugins.latesubmission.LateSubmissionPlugin'):
        return 'Work handed in after its due date loses points by the course\'s own rule: your instructor says which.'
    if c.LateSubmissionPlugin.get('penalty_method', 'none') == 'zero':
        return ('Work handed in after its due date scores 0: it is still graded, and you get its feedback, but its points '
                'do not count.')
    return 'Work handed in after its due date is graded as if it were on time.'


def readme(tree, dates, st, handin, root):
    """The student repository's README: the steps (open ones with their Colab badge), how to work and hand in, the
    schedule, the license."""
    svg = 'https://colab.research.google.com/assets/colab-badge.svg'
    rows = ['| step | notebook | due |', '|---|---|---|']
    for step in steps(root):
        name = title(read(root / 'source' / step / notebooks(step, root)[0]))
        due = _stamp(dates[step].due) if dates[step].due else 'self-paced'
        if not st[step].open:
            rows.append(f'| {name} | opens {_stamp(st[step].opens)} | {due} |')
            continue
        links = []
        for nb in notebooks(step, root):
            path = f'{step}/{nb}'
            links.append(f'[`{path}`]({path}) [![Open In Colab]({svg})]({tree.colab(path)})')
            if st[step].solution:
                sol = f'{step}/solution/{nb}'
                links.append(f'solution: [`{sol}`]({sol}) [![Open In Colab]({svg})]({tree.colab(sol)})')
        rows.append(f'| {name} | {"<br>".join(links)} | {due} |')
    if self_paced(dates):
        pace = ('**This course is self-paced:** every step is here from the start. Each step rebuilds what the steps '
                'before it built, in a locked cell near its top, so a later step shows the answers to earlier ones: work '
                'through them in order, and write each step yourself before you open the next.')
        if any(st[s].solution for s in st):
            pace += ' Some steps have their worked solution beside them (`solution/`): try the step first.'
    else:
        pace = ('A step appears here on its release date, and only once every step whose answers it shows is past due: '
                'each step rebuilds what the steps before it built, in a locked cell near its top. '
                'Dates are in the timezone shown.')
        if any(st[s].solution for s in st):
            pace += ' After a step is past due, its worked solution may appear beside it (`solution/`).'
    handin_text = student_text(handin, root)
    if handin == 'lms':
        handin_text = with_lms(handin_text, tree.config.publish.lms)
    url = tree.config.publish.handin_url
    if url:
        handin_text += f'\n\nWhere: <{url}>'
    handin_text += ('\n\nThe autograder runs your notebook after the due date, with tests you do not see as well as the '
                    'ones you do; written answers are read by a person.')
    if not self_paced(dates):
        handin_text += f' {late_rule(root)}'
    return f"""# Build a transformer from scratch

Six Jupyter notebooks in which you build a small GPT on Tiny Shakespeare, one piece per step: the data and a character
tokenizer, a bigram model, averaging the past, a causal self-attention head, multi-head attention and the transformer
block, and the tiny GPT itself. Every step runs on a CPU in seconds.

## The steps

{pace}

{chr(10).join(rows)}

## Working on a step

- **On Colab:** press the step's **Open in Colab** badge; then File > Save a copy in Drive, so that your work is kept.
  The notebook downloads the data (and Step 6 its trained model) itself and checks them.
- **On your machine:** Python 3.11; `python -m pip install -r requirements.txt` once (it takes PyTorch's CPU build from
  PyTorch's own index, not the multi-GB CUDA build: every step runs on a CPU), then `jupyter lab` in this folder and
  open the step's notebook.

In each notebook, fill in every cell marked `# YOUR CODE HERE` (replace the `raise NotImplementedError(...)` line, keep
the signature and the docstring) and every `YOUR ANSWER HERE`. The cells that start with `\"\"\"Check that ...\"\"\"`
test one claim each; their message says what was expected, what your code gave, and what to look at.

## Handing in

{handin_text}

## License

[CC BY 4.0](LICENSE), because {LICENSE_WHY}
"""


def manifest(files):
    note = 'Written by make publish from the course repository; it lists every file it wrote, to find hand edits.'
    return (json.dumps({'note': note, 'files': {p: _sha(b) for p, b in sorted(files.items())}}, indent=1) + '\n').encode()


def hand_edits(out):
    """Paths (relative to out) that make publish did not write as they are: changed or added by hand. A missing folder,
    or one holding only .git, has none."""
    out = Path(out)
    present = {p.relative_to(out).as_posix() for p in out.rglob('*')
               if p.is_file() and '.git' not in p.relative_to(out).parts} if out.exists() else set()
    if not present:
        return []
    if MANIFEST not in present:
        return sorted(present)
    try:
        written = json.loads((out / MANIFEST).read_text())['files']
    except (ValueError, KeyError, TypeError):
        return [MANIFEST]
    changed = [p for p in sorted(present - {MANIFEST}) if written.get(p) != _sha((out / p).read_bytes())]
    return changed


def write(files, out, force=False):
    """Make out hold exactly files (and the manifest, and any .git): files no longer published are removed. Return the
    paths written or removed."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PublishError(f'{out}: not a folder: give make publish a folder of its own (OUT=, or [publish] folder)')
    edits = hand_edits(out)
    if edits and not force:
        more = f' (and {len(edits) - 1} more)' if len(edits) > 1 else ''
        raise PublishError(f'{out / edits[0]}{more} was changed or added by hand since make publish wrote {out}: make the '
                           'change in source/ or course.toml instead, delete or restore the file, and run make publish '
                           'again (--force overwrites it)')
    files = {**files, MANIFEST: manifest(files)}
    done = []
    if out.exists():
        for p in sorted(out.rglob('*'), reverse=True):
            rel = p.relative_to(out)
            if '.git' in rel.parts:
                continue
            if p.is_file() and rel.as_posix() not in files:
                p.unlink()
                done.append(f'removed {rel.as_posix()}')
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    for rel, data in sorted(files.items()):
        path = out / rel
        if path.is_file() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        done.append(f'wrote {rel}')
    return done


def destination(out, now, root, config):
    """The folder make publish writes: out if given; else, with --now (a preview of a date), <[publish] folder>-preview/;
    else [publish] folder, the student repository you push."""
    if out:
        return Path(out)
    return Path(root) / (config.publish.folder + (PREVIEW if now else ''))


def publish(out=None, now=None, root=ROOT, config=None, force=False):
    """Write the student repository as it is at now (default: the clock) into out (default: destination()); return
    (lines to print, {step: State})."""
    root = Path(root)
    config = load(root) if config is None else config
    folder = destination(out, now, root, config)
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        raise PublishError(f'--now {now.isoformat()} has no timezone: add one, as in 2027-01-11T09:00:00+00:00')
    here, there = root.resolve(), folder.resolve()
    if here.is_relative_to(there) or any(there.is_relative_to(here / d) for d in ('source', 'release', 'notebooks')):
        raise PublishError(f'{folder}: that folder holds the course itself; the student repository needs a folder of its '
                           'own (course.toml [publish] folder = "student", or OUT=)')
    files, st = student_tree(config, now, root)
    name = shown(folder)
    lines = [f'{what} {name}/{rel}' for what, rel in (line.split(' ', 1) for line in write(files, folder, force))]
    for step, s in st.items():
        if s.open:
            lines.append(f'{step}: open' + (', solution published' if s.solution else ''))
        else:
            lines.append(f'{step}: not published, opens {_stamp(s.opens)}')
        if s.waits_for:
            lines.append(f'note: {step} is released before {", ".join(s.waits_for)} is due, and its release shows their '
                         'solutions: it opens only once they are past due')
    if out is None and folder.name.endswith(PREVIEW):
        lines.append(f'a preview as at {_stamp(now)}, in {name}/: not the student repository ({config.publish.folder}/), '
                     'which make publish without NOW writes')
    return lines, st


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.authoring.publish', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--now', help='preview the student repository as at this ISO 8601 date-time with a timezone (default: '
                                  'the clock), in <[publish] folder>-preview/ unless --out')
    ap.add_argument('--out', help="the folder to write (default: course.toml's [publish] folder)")
    ap.add_argument('--force', action='store_true', help='overwrite files changed by hand in that folder')
    args = ap.parse_args(argv)
    try:
        now = when(args.now, '--now') if args.now else None
        lines, _ = publish(args.out, now, force=args.force)
    except PublishError as e:
        sys.exit(f'error: {e}')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
