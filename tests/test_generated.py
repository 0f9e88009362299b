"""The committed release/ and notebooks/ are what source/ generates, leak nothing, and carry what students need."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course.cells import MARKER, read, role
from course.layout import ROOT, colab_url, notebooks, steps
from course.settings import load
from support.leaks import REGION, code_of, lines


def test_generated_files_are_up_to_date_with_source():
    done = subprocess.run([sys.executable, '-m', 'course.authoring.build', '--check'], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_release_leaks_no_solution_or_hidden_test_line(notebook):
    """No line of a solution region, hidden test or model answer reaches the release, unless the source shows it elsewhere."""
    aid, name = notebook
    source = read(ROOT / 'source' / aid / name)
    release = {c.get('id'): lines(c.source) for c in read(ROOT / 'release' / aid / name).cells}
    shown = set().union(*(lines(REGION.sub('', c.source)) for c in source.cells if role(c) != 'answer'))
    everywhere = set().union(*release.values())
    leaks = []
    for cell in source.cells:
        hidden = lines(cell.source) if role(cell) == 'answer' else lines(''.join(r[1] for r in REGION.findall(cell.source)))
        own = set() if role(cell) == 'answer' else lines(REGION.sub('', cell.source))
        leaks += [f'{cell.id}: {line}' for line in hidden
                  if (line in release.get(cell.id, ()) and line not in own) or (line in everywhere and line not in shown)]
    assert not leaks, 'solution or hidden-test lines in the release:\n' + '\n'.join(leaks)
    assert not any(MARKER.search(line + '\n') for line in everywhere), 'a ### BEGIN/END marker line survived into the release'
    shown = visible_solution_lines(source, read(ROOT / 'release' / aid / name))  # e.g. a visible "reference" = the answer
    assert not shown, 'solution lines shown in visible cells of the release:\n' + '\n'.join(f'{c}: {line}' for c, line in shown)


def shape_of(line):
    """A line as the leak test compares it: its code without comment, `return`, assignment target, spaces, literal
    integers or one-letter names (so `ref = softmax(s) * tril(ones(6, 6))` matches `return softmax(s) * tril(ones(T, T))`)."""
    line = re.sub(r'^\s*return\b', '', code_of(line).strip())
    line = re.sub(r'^[^=()\'"]+=(?!=)', '', line)
    line = re.sub(r'\b(\d+|[A-Za-z_])\b', '#', line)
    return re.sub(r'\s+', '', line)


def solution_shapes(cell):
    """{shape: line} of the non-trivial lines of cell's solution regions (not a `with`/`for`/`if` header) that the cell does
    not already show outside them."""
    given = {shape_of(line) for line in REGION.sub('', cell.source).splitlines()}
    return {shape_of(line): line.strip() for region in REGION.findall(cell.source) if region[0] == 'SOLUTION'
            for line in region[1].splitlines()
            if len(shape_of(line)) >= 16 and not shape_of(line).endswith(':') and shape_of(line) not in given}


def visible_solution_lines(source, release):
    """(release cell id, solution line) for every solution line that a visible cell of release shows, as it is or as the
    same expression with other numbers, names of one letter, comment or assignment target."""
    solutions = {}
    for cell in source.cells:
        if role(cell) == 'solution':
            solutions.update(solution_shapes(cell))
    found = []
    for cell in release.cells:
        if role(cell) in ('solution', 'answer'):
            continue
        for line in cell.source.splitlines():
            shape = shape_of(line)
            found += [(cell.id, solutions[s]) for s in solutions if s == shape or (len(s) >= 24 and s in shape)]
    return found


def test_source_and_release_have_no_outputs(notebook):
    aid, name = notebook
    for path in (ROOT / 'source' / aid / name, ROOT / 'release' / aid / name):
        with_output = [c.id for c in read(path).cells if c.cell_type == 'code' and (c.outputs or c.execution_count)]
        assert not with_output, f'{path.relative_to(ROOT)} has outputs in cells {with_output}: clear them'


def test_every_test_cell_is_locked_scored_and_says_what_it_checks(notebook):
    aid, name = notebook
    bad = []
    for cell in read(ROOT / 'source' / aid / name).cells:
        meta = cell.metadata.get('nbgrader', {})
        if role(cell) == 'test':
            if not (meta.get('locked') and meta.get('points', 0) > 0 and cell.source.startswith('"""Check')):
                bad.append(meta.get('grade_id'))
    assert not bad, f'test cells must be locked, score points and open with """Check that ...""": {bad}'


def test_numbers_in_the_prose_are_printed_by_the_solution(notebook):
    """A markdown cell with metadata course.numbers_from (a cell id, or a list of them) quotes only numbers that the named
    cells print; the phrases it lists in course.quotes (for claims made with whole numbers, such as a rank) must be printed
    by them word for word."""
    _, name = notebook
    nb = read(ROOT / 'notebooks' / name)
    printed = {c.id: ''.join(o.get('text', '') for o in c.outputs) for c in nb.cells if c.cell_type == 'code'}
    checked = 0
    for cell in nb.cells:
        ref = cell.metadata.get('course', {}).get('numbers_from')
        if ref:
            text = ''.join(printed[r] for r in ([ref] if isinstance(ref, str) else ref))
            numbers = re.findall(NUMBER, re.sub(r'(?m)^#+ .*$', '', cell.source))  # not a heading's section number
            quotes = cell.metadata['course'].get('quotes', [])
            missing = [n for n in numbers if n not in text] + [q for q in quotes if q not in text]
            assert (numbers or quotes) and not missing, f'{cell.id} quotes {missing}, which {ref} does not print:\n{text}'
            checked += 1
    assert checked, 'no markdown cell declares course.numbers_from'


NUMBER = r'(?<![\w.])\d+\.\d+'  # a number with a decimal point, as the prose quotes a printed figure


def test_numbers_in_alt_text_are_printed_by_the_solution(notebook):
    """The alt text of a figure describes the figure of this run: every number with a decimal point in it is printed by
    its cell or a cell above it, or written in its code (a parameter of the figure, such as a bandwidth). An alt text
    written once by hand and left as the numbers changed fails here, as prose does."""
    from test_lesson import PENDING

    aid, name = notebook
    wrong, printed = [], ''
    for cell in read(ROOT / 'notebooks' / name).cells:
        if cell.cell_type != 'code':
            continue
        printed += ''.join(o.get('text', '') for o in cell.outputs)
        for o in cell.outputs:
            alt = o.get('metadata', {}).get('image/png', {}).get('alt', '')
            wrong += [f'{cell.id}: {n}' for n in re.findall(NUMBER, alt) if n not in printed and n not in cell.source]
    if wrong and aid in PENDING:
        pytest.xfail(PENDING[aid])
    assert not wrong, f'{name}: numbers in alt text that no cell prints:\n' + '\n'.join(wrong)


def test_data_cell_checks_the_url_and_sha256_of_course_toml(notebook):
    """A notebook with a data cell (id 'data') names course.toml's URL and sha256 in it; one without reads no data."""
    aid, name = notebook
    data = load().data
    cells = read(ROOT / 'source' / aid / name).cells
    cell = next((c for c in cells if c.get('id') == 'data'), None)
    if cell is None:
        assert not any('input.txt' in c.source for c in cells), f'{name} reads input.txt without a data cell (id "data")'
    else:
        assert data.url in cell.source and data.sha256 in cell.source, (
            f'{name}: the data cell must name the URL and sha256 of course.toml')


def test_every_image_output_has_alt_text():
    missing = [f'{p.name}:{c.id}' for p in (ROOT / 'notebooks').glob('*.ipynb') for c in read(p).cells
               if c.cell_type == 'code' for o in c.outputs
               if 'image/png' in o.get('data', {}) and not o.get('metadata', {}).get('image/png', {}).get('alt')]
    assert not missing, f'image outputs without alt text: {missing}'


def test_colab_badges_open_the_committed_version_of_each_notebook():
    """Release notebooks open the student version, notebooks/ the solution; every target exists. (make publish points
    them at the student repository: tests/test_publish.py.)"""
    pages = {p: p.read_text() for p in [*ROOT.glob('release/*/*.ipynb'), *ROOT.glob('notebooks/*.ipynb')]}
    prefix = colab_url('')
    for page, text in pages.items():
        targets = re.findall(re.escape(prefix) + r'([\w./-]+\.ipynb)', text)
        assert targets, f'{page.relative_to(ROOT)} has no Open in Colab badge'
        for target in targets:
            assert (ROOT / target).is_file(), f'{page.relative_to(ROOT)}: badge target {target} does not exist'
            if page.suffix == '.ipynb':
                assert Path(target) == page.relative_to(ROOT), f'{page.relative_to(ROOT)} badge opens {target}'
        assert page.suffix != '.ipynb' or '(COLAB_URL)' not in text, f'{page.relative_to(ROOT)} kept the badge placeholder'


def test_every_link_to_this_repository_names_the_configured_one():
    """Every link (Colab's, raw.githubusercontent.com's, github.com's) to a file of this repository, in any committed
    file, names course.toml's repository and branch: a course that forks the repository sets them there, and make build
    points every link at the fork (Step 6's checkpoint URL too)."""
    from course.authoring.build import repo_links

    settings = load()
    files = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    links, wrong = 0, []
    for rel in files:
        try:
            text = (ROOT / rel).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for repo, branch, path in repo_links(text):
            links += 1
            if (repo, branch) != (settings.github, settings.branch):
                wrong.append(f'{rel}: {repo} ({branch}) -> {path}')
    assert links, 'found no link to this repository at all (the Colab badges, Step 6\'s checkpoint)'
    assert not wrong, (f'links to another repository than course.toml\'s {settings.github} ({settings.branch}): '
                       'run make build\n' + '\n'.join(wrong))


def test_make_build_points_every_link_at_a_fork(tmp_path):
    """A fork sets `github` and `branch` in course.toml: the links to files of this repository follow, the links to
    other projects' files (char-rnn's data) do not."""
    from course.authoring.build import with_course_links

    data = load().data
    (tmp_path / 'course.toml').write_text(f'github = "someone/fork"\nbranch = "spring"\n'
                                          f'[data]\nurl = "{data.url}"\nsha256 = "{data.sha256}"\n')
    (tmp_path / 'release' / 'stepA').mkdir(parents=True)
    (tmp_path / 'release' / 'stepA' / 'stepA_gpt.pt').write_bytes(b'')  # a file a step ships
    (tmp_path / 'notebooks').mkdir()
    (tmp_path / 'notebooks' / 'a.ipynb').write_text('{}')
    ours = ['https://raw.githubusercontent.com/build-a-transformer/course/main/release/stepA/stepA_gpt.pt',
            'https://colab.research.google.com/github/build-a-transformer/course/blob/main/notebooks/a.ipynb',
            'https://github.com/build-a-transformer/course/blob/main/notebooks/a.ipynb']
    theirs = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
    text = with_course_links(f"url = '{ours[0]}'\n[badge]({ours[1]}) <{ours[2]}>\n{theirs}\n", tmp_path)
    assert text == (f"url = '{ours[0].replace('build-a-transformer/course/main', 'someone/fork/spring')}'\n"
                    f"[badge]({ours[1].replace('build-a-transformer/course/blob/main', 'someone/fork/blob/spring')}) "
                    f"<{ours[2].replace('build-a-transformer/course/blob/main', 'someone/fork/blob/spring')}>\n{theirs}\n")


def test_make_build_keeps_an_executed_solution_only_while_its_source_is_the_same(tmp_path):
    """make build (and so make demo) does not execute a solution again whose notebook, without outputs, is what source/
    generates: its committed timings and figures stay, and git status stays clean. A changed cell, or a committed file
    that is not executed, is executed again (course.authoring.build.unchanged)."""
    from course.authoring.build import unchanged

    committed = ROOT / 'notebooks' / notebooks(steps()[0])[0]
    fresh = read(committed)
    for cell in fresh.cells:
        if cell.cell_type == 'code':
            cell.outputs, cell.execution_count = [], None
    assert unchanged(fresh, committed)
    changed = copy.deepcopy(fresh)
    next(c for c in changed.cells if c.cell_type == 'code').source += '\nprint(1)'
    assert not unchanged(changed, committed)
    unexecuted = tmp_path / committed.name
    nbformat.write(fresh, unexecuted)
    assert not unchanged(fresh, unexecuted) and not unchanged(fresh, tmp_path / 'missing.ipynb')
