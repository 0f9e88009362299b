"""What a student meets in every step, checked on its source and on its release (docs/adding-a-step.md, "The student's
view"): the first screen is the lesson, with the set-up cells collapsed under a one-line title, in Colab's form view and
JupyterLab's; the title cell says how to run the notebook on both; and no reading discusses a graded question's answer
above that question's answer cell. Run All past the tasks not written yet is run in Colab's package set
(tests/test_colab_runtime.py) and in JupyterLab (tests/test_browser.py)."""

import ast
import re

import pytest

from conftest import NOTEBOOKS
from course.cells import grade_id, read, role
from course.layout import ROOT

# The steps that do not follow the pattern yet, and the issue that brings them to it: each test below is expected to
# fail on them (strict: once one passes, take it off this list).
PENDING = {}
TITLE = re.compile(r'#@title (\S.*)')


def each_notebook(test):
    """test parametrised over every notebook of every step, the PENDING steps' expected to fail."""
    params = [pytest.param(a, n, id=f'{a}/{n}', marks=[pytest.mark.xfail(strict=True, reason=PENDING[a])] if a in PENDING
                           else []) for a, n in NOTEBOOKS]
    return pytest.mark.parametrize('step, name', params)(test)


def set_up_cells(cells):
    """The code cells above the first task (the first solution cell): the set-up every later cell needs."""
    first = next(i for i, c in enumerate(cells) if role(c) == 'solution')
    return [c for c in cells[:first] if c.cell_type == 'code']


def collapsed(cell):
    return cell.metadata.get('cellView') == 'form' or cell.metadata.get('jupyter', {}).get('source_hidden')


@each_notebook
def test_set_up_cells_are_collapsed_under_a_one_line_title(step, name):
    """Each code cell above the first task is locked, opens with `#@title <what it does>` and is collapsed in Colab's form
    view (cellView: form) and in JupyterLab (jupyter.source_hidden), in the source and in the release (nbgrader's
    generate_assignment keeps the metadata); the step opens with its title and introduction, a markdown cell."""
    for kind in ('source', 'release'):
        cells = read(ROOT / kind / step / name).cells
        assert cells[0].cell_type == 'markdown' and cells[0].source.startswith('# Step'), (
            f'{kind}/{step}/{name}: the first cell should be the title and introduction (# Step N — ...)')
        wrong = [f'{c.id}: {why}' for c in set_up_cells(cells) for why in (
            'not locked' if role(c) != 'locked' else None,
            'no one-line "#@title ..." first line' if not TITLE.fullmatch(c.source.split('\n', 1)[0]) else None,
            'not cellView: form (Colab)' if c.metadata.get('cellView') != 'form' else None,
            'not jupyter.source_hidden (JupyterLab)' if not c.metadata.get('jupyter', {}).get('source_hidden') else None)
            if why]
        assert set_up_cells(cells) and not wrong, f'{kind}/{step}/{name}: set-up cells above the first task:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('step, name', NOTEBOOKS, ids=[f'{a}/{n}' for a, n in NOTEBOOKS])
def test_only_locked_cells_are_collapsed(step, name):
    """A collapsed cell is one students need not open: never a task, a test or a written answer."""
    shown = [c.id for c in read(ROOT / 'source' / step / name).cells if collapsed(c) and role(c) != 'locked']
    assert not shown, f'{name}: collapsed cells that students must read or write: {shown}'


@each_notebook
def test_the_title_cell_says_how_to_run_it_all_on_colab_and_jupyterlab(step, name):
    text = read(ROOT / 'source' / step / name).cells[0].source
    for words in ('Runtime ▸ Restart session and run all', 'Kernel ▸ Restart Kernel and Run All Cells', 'Validate'):
        assert words in text, f'{name}: the title cell should tell students to press {words!r}'


@each_notebook
def test_the_set_up_lets_run_all_go_past_the_tasks_not_written_yet(step, name):
    """The set-up defines WaitForTasks and installs it in IPython, except while nbgrader validates or grades (the tests
    below keep the definition equal in every step and run it in IPython; test_colab_runtime.py and test_browser.py run
    it in whole notebooks)."""
    cells = set_up_cells(read(ROOT / 'source' / step / name).cells)
    code = '\n'.join(c.source for c in cells)
    assert any(isinstance(n, ast.ClassDef) and n.name == 'WaitForTasks' for n in ast.parse(code).body), (
        f'{name}: no set-up cell defines WaitForTasks (copy it from Step 1\'s set-up cell)')
    assert "'NBGRADER_EXECUTION' not in os.environ" in code and 'ast_transformers' in code, (
        f'{name}: the set-up should install WaitForTasks in IPython, except under nbgrader (NBGRADER_EXECUTION)')


def wait_for_tasks(step, name):
    """The set-up's Run All machinery, as one block of code: WaitForTasks, the helpers it calls (functions named _...),
    and the statement that installs it."""
    code = '\n'.join(c.source for c in set_up_cells(read(ROOT / 'source' / step / name).cells))
    tree = ast.parse(code)
    parts = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
             and (n.name == 'WaitForTasks' or n.name.startswith('_'))]
    parts += [n for n in tree.body if isinstance(n, ast.If) and 'ast_transformers' in ast.unparse(n)]
    return '\n\n'.join(ast.get_source_segment(code, n) for n in parts)


def test_the_set_up_of_run_all_is_the_same_in_every_step():
    """Every step's set-up defines and installs WaitForTasks as Step 1's does (a fix made in one is made in all)."""
    first = wait_for_tasks(*NOTEBOOKS[0])
    differ = [f'{a}/{n}' for a, n in NOTEBOOKS[1:] if wait_for_tasks(a, n) != first]
    assert 'class WaitForTasks' in first and not differ, (
        f'the WaitForTasks of these set-up cells differs from {NOTEBOOKS[0][1]}\'s: {differ}; copy it from there')


# A student's notebook in miniature, run with WaitForTasks installed: each cell, and what Run All should show for it.
RUN_ALL = [
    ("def encode(s):\n    raise NotImplementedError('replace this line with your code')", 'ok'),
    ('ids = [1, 2]\ndef decode(ids):\n    return ids', 'ok'),
    ('data = encode("hi")\nn = len(data)\ndef batch(k):\n    return data[:k]\nimport json as js', 'waits for encode'),
    ('n + 1', 'waits for encode'),  # set below the line that waited
    ('batch(1)', 'waits for encode'),  # defined below it
    ('js.dumps(1)', 'waits for encode'),  # imported below it
    ('decode(ids)', 'ok'),  # defined by a cell that ran whole
    ('undefined_name', 'NameError'),  # a name no cell sets: the error as usual
]


@pytest.mark.parametrize('python', ['course', 'colab'])
def test_run_all_waits_for_every_name_a_waiting_cell_did_not_reach(python, tmp_path):
    """In IPython (this venv's, and Colab's 7.34): a cell that stops at a task not written yet leaves unset the names it
    assigns and the functions, classes and modules it defines below that line; a later cell that needs one of them says
    which task it waits for, rather than failing with a NameError that stops Run All; other errors are shown as usual."""
    import json
    import os
    import subprocess
    import sys

    if python == 'colab':
        from course.authoring import colab as profile
        executable = str(profile.venv())
    else:
        executable = sys.executable
    script = tmp_path / 'run_all.py'
    script.write_text(
        'import json, sys\nfrom IPython.core.interactiveshell import InteractiveShell\n'
        'shell = InteractiveShell.instance(colors="NoColor")\n'
        'setup, cells = json.loads(sys.stdin.read())\n'
        'shell.run_cell("import ast, os, sys\\nfrom IPython import get_ipython\\n" + setup)\n'
        'for cell in cells:\n'
        '    print("=== cell", flush=True)\n'
        '    shell.run_cell(cell)\n')
    env = {k: v for k, v in os.environ.items() if k != 'NBGRADER_EXECUTION'}
    done = subprocess.run([executable, str(script)], input=json.dumps([wait_for_tasks(*NOTEBOOKS[0]), [c for c, _ in RUN_ALL]]),
                          capture_output=True, text=True, env=env, timeout=300)
    shown = done.stdout.split('=== cell\n')[1:]
    assert done.returncode == 0 and len(shown) == len(RUN_ALL), f'exit {done.returncode}:\n{done.stdout}{done.stderr}'
    wrong = []
    for (cell, expected), out in zip(RUN_ALL, shown, strict=True):
        if expected == 'ok':
            good = 'Traceback' not in out and 'waits for' not in out
        elif expected.startswith('waits for'):
            good = f'This cell waits for your task {expected.split()[-1]}' in out and 'Traceback' not in out
        else:
            good = expected in out and 'Traceback' in out and 'waits for' not in out
        if not good:
            wrong.append(f'{cell!r}: expected {expected}; it showed {out.strip()[-300:]!r}')
    assert not wrong, '\n'.join(wrong)


def readings(cells):
    """{cell index: the grade_ids of the written answers it discusses} of every reading: a markdown cell that reads
    printed numbers (course.numbers_from) or declares the questions it follows (course.follows)."""
    return {i: c.metadata['course'].get('follows') for i, c in enumerate(cells)
            if c.cell_type == 'markdown' and ({'numbers_from', 'follows'} & set(c.metadata.get('course', {})))}


def order_problems(cells):
    """One line per reading that does not say which graded questions it discusses, names an answer cell that does not
    exist, or lies above the answer cell of a question it discusses."""
    answers = {grade_id(c): i for i, c in enumerate(cells) if role(c) == 'answer'}
    problems = []
    for i, follows in readings(cells).items():
        if not isinstance(follows, list):
            problems.append(f'{cells[i].id}: reads printed numbers but has no course.follows (the grade_ids of the written '
                            'answers it discusses; [] for none)')
            continue
        problems += [f'{cells[i].id}: follows {g}, which is no written answer of this notebook' for g in follows
                     if g not in answers]
        problems += [f'{cells[i].id} discusses {g} but lies above its answer cell' for g in follows
                     if g in answers and answers[g] > i]
    return problems


@each_notebook
def test_readings_come_after_the_answers_to_the_questions_they_discuss(step, name):
    """Every reading declares the graded questions whose answers it discusses (course.follows, a list of the answer
    cells' grade_ids, empty for none), and lies below each of those answer cells: a student working down the page
    answers before reading it."""
    problems = order_problems(read(ROOT / 'source' / step / name).cells)
    assert not problems, f'{name}:\n' + '\n'.join(problems)


def test_the_order_check_fails_on_a_reading_above_its_question():
    import nbformat

    answer = nbformat.v4.new_markdown_cell('x', metadata={'nbgrader': {'grade_id': 'q1', 'solution': True, 'grade': True}})
    reading = nbformat.v4.new_markdown_cell('2.5', metadata={'course': {'follows': ['q1']}})
    untagged = nbformat.v4.new_markdown_cell('2.5', metadata={'course': {'numbers_from': 'a'}})
    wrong = nbformat.v4.new_markdown_cell('2.5', metadata={'course': {'follows': ['q2']}})
    assert order_problems([reading, answer, untagged, wrong]) == [
        f'{reading.id} discusses q1 but lies above its answer cell',
        f'{untagged.id}: reads printed numbers but has no course.follows (the grade_ids of the written answers it '
        'discusses; [] for none)', f'{wrong.id}: follows q2, which is no written answer of this notebook']
    assert order_problems([answer, reading]) == []
