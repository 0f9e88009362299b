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
    """The set-up defines WaitForTasks and installs it in IPython, except while nbgrader validates or grades (tests/
    test_steps.py keeps the definition equal in every step; test_colab_runtime.py and test_browser.py run it)."""
    cells = set_up_cells(read(ROOT / 'source' / step / name).cells)
    code = '\n'.join(c.source for c in cells)
    assert any(isinstance(n, ast.ClassDef) and n.name == 'WaitForTasks' for n in ast.parse(code).body), (
        f'{name}: no set-up cell defines WaitForTasks (copy it from Step 1\'s set-up cell)')
    assert "'NBGRADER_EXECUTION' not in os.environ" in code and 'ast_transformers' in code, (
        f'{name}: the set-up should install WaitForTasks in IPython, except under nbgrader (NBGRADER_EXECUTION)')


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
