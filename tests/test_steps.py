"""What every step of source/ must hold for the tooling to grade it (docs/adding-a-step.md): parametrised over the steps
found, with no per-step code. A step without a bank of mistakes fails here, saying what is missing."""

import pytest

from course.authoring.demo import bank, demo_class
from course.authoring.reproduced import drifts, reproduced, shown_lines
from course.cells import read, role
from course.grader.claims import judge
from course.layout import INSTRUCTOR, ROOT, autograded_points, instructor_module, notebooks, steps

RESERVED = {'perfect', 'blank'}


@pytest.mark.parametrize('step', steps())
def test_step_has_a_bank_of_mistakes_and_correct_alternatives(step):
    b = bank(step)
    assert b is not None, f'source/{step}/{INSTRUCTOR}/bank.py is missing: a bank of MUTANTS and ALTERNATIVES (see docs)'
    for name in ('MUTANTS', 'ALTERNATIVES'):
        assert getattr(b, name, None), f'source/{step}/{INSTRUCTOR}/bank.py defines no {name} (or an empty one)'


@pytest.mark.parametrize('step', steps())
def test_bank_names_real_cells_and_unique_students(step):
    b = bank(step)
    if b is None:
        pytest.skip('no bank (test_step_has_a_bank_of_mistakes_and_correct_alternatives fails)')
    points = autograded_points(step)
    solutions = {c.metadata.nbgrader.grade_id for name in notebooks(step) for c in read(ROOT / 'source' / step / name).cells
                 if role(c) in ('solution', 'answer')}
    students = [v.student for v in [*b.MUTANTS, *b.ALTERNATIVES]]
    problems = [f'{s} twice' for s in set(students) if students.count(s) > 1]
    problems += [f'{s} is a reserved name' for s in RESERVED & set(students)]
    for v in b.MUTANTS:
        problems += [f'{v.student}: caught_by {g} is not a test cell' for g in v.caught_by if g not in points]
        problems += [f'{v.student}: caught_by is empty (a mistake no cell is meant to catch)'] * (not v.caught_by)
    for v in b.ALTERNATIVES:
        problems += [f'{v.student}: an alternative with caught_by {v.caught_by}'] * bool(v.caught_by)
    for v in [*b.MUTANTS, *b.ALTERNATIVES]:
        problems += [f'{v.student}: edits cell {g}, not a solution cell' for g, _, _ in v.edits if g not in solutions]
    assert not problems, f'source/{step}/{INSTRUCTOR}/bank.py:\n' + '\n'.join(problems)


@pytest.mark.parametrize('step', steps())
def test_every_bank_edit_applies_once(step):
    """demo_class() applies every edit: each old text occurs exactly once in the perfect submission's cell."""
    if bank(step) is None:
        pytest.skip('no bank')
    cls = demo_class([step])
    assert {'perfect', 'blank'} <= set(cls)


@pytest.mark.parametrize('step', steps())
def test_checks_judge_every_test_cell_outside_the_kernel(step):
    """checks.py has what the grader calls (make_inputs(), probe(), a @claim per test cell), and judges every test
    cell: with nothing recorded, every claim fails. A test cell without a claim scores on the kernel's word alone, which a
    hostile notebook can fake (the corpus's hostile_try_except_every_cell would keep its points)."""
    checks = instructor_module(step, 'checks')
    assert checks is not None, f'source/{step}/{INSTRUCTOR}/checks.py is missing: make_inputs(), probe(), claims (see docs)'
    for name in ('make_inputs', 'probe'):
        assert callable(getattr(checks, name, None)), f'source/{step}/{INSTRUCTOR}/checks.py defines no {name}()'
    verdicts = judge(checks, checks.make_inputs(), {})
    points = autograded_points(step)
    assert set(verdicts) <= set(points), f'claims for cells that are not test cells: {sorted(set(verdicts) - set(points))}'
    unjudged = [g for g in points if not verdicts.get(g)]
    assert not unjudged, f'test cells that an empty record does not fail (no claim, or a lenient one): {unjudged}'


def helper(step, name):
    """The source (as an AST dump, comments and layout aside) of the function `name` defined in a step's notebooks."""
    import ast

    for nb in notebooks(step):
        for cell in read(ROOT / 'source' / step / nb).cells:
            if cell.cell_type == 'code' and f'def {name}(' in cell.source:
                tree = ast.parse(cell.source)
                return next(ast.dump(f) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == name)
    return None


def test_the_figure_helper_is_the_same_in_every_step():
    """show(fig, alt), the one helper every step writes for its figures, is written once: a fix (Colab's IPython 7.34 has
    no Image(alt=...)) reaches every step, and no step drifts."""
    shows = {step: helper(step, 'show') for step in steps()}
    missing = [s for s, f in shows.items() if f is None]
    assert not missing, f'steps without a show(fig, alt) helper: {missing}'
    first = steps()[0]
    differ = [s for s, f in shows.items() if f != shows[first]]
    assert not differ, f'show() in {differ} differs from {first}\'s: copy {first}\'s setup-cell helper'


def test_every_reproduced_definition_equals_the_step_that_teaches_it():
    """A step re-creates what it needs from earlier steps ("Steps 1-5, reproduced"). Each function or class it defines
    under a name an earlier step defined must be that step's code (its solution, for a task), docstrings aside: Step 6 is
    built from the parts Step 5 taught, and a fix in one step cannot leave a stale copy in another. A task that asks
    students to write a name again is theirs to write, and is not compared (course.authoring.reproduced, which publishing also
    reads to know which earlier solutions a release shows)."""
    found = drifts()
    assert not found, 'reproduced code drifted from its source step (copy the source step\'s code):\n' + '\n'.join(found)


def test_the_reproduced_solutions_are_the_ones_the_text_shows():
    """Publishing opens a step only once every step whose solution its release shows is past due, and finds those steps
    from the definitions each step is given (course.authoring.reproduced.reproduced). The text itself agrees: the earlier steps
    whose solution lines (not shown by their own release) a release shows are exactly those; a reproduced line outside
    a def or class (which the definitions would miss) fails here, naming the lines."""
    by_definitions, by_text = reproduced(), shown_lines()
    assert any(by_text.values()), 'no release shows an earlier solution: the comparison below would check nothing'
    wrong = [f'{step}: the definitions say {sorted(by_definitions[step])}, the text shows '
             f'{ {s: lines[:3] for s, lines in by_text[step].items()} }'
             for step in by_text if sorted(by_text[step]) != sorted(by_definitions[step])]
    assert not wrong, ('the steps a release reproduces, found two ways, differ (publishing reads the definitions: give the '
                       'reproduced lines in the def or class that the earlier step taught them in):\n' + '\n'.join(wrong))


def bound_names(source):
    """The names a cell binds at the top level of the notebook's namespace (comprehensions, lambdas, functions and classes
    keep their own scopes; a def or class binds its own name)."""
    import ast

    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    out = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            return
        if isinstance(node, scopes):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split('.')[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return out


@pytest.mark.parametrize('step', steps())
def test_test_cells_bind_no_name_of_the_notebook(step):
    """A test cell that reassigns a name the notebook defines (Step 2's test set P to a 7x7 matrix) breaks the cells
    after it when a student re-runs the test: every name a test cell binds is its own."""
    clashes = []
    for nb in notebooks(step):
        cells = [c for c in read(ROOT / 'source' / step / nb).cells if c.cell_type == 'code']
        notebook_names = set().union(*(bound_names(c.source) for c in cells if role(c) != 'test'))
        clashes += [f'{nb}: {c.metadata.nbgrader.grade_id} binds {sorted(bound_names(c.source) & notebook_names)}'
                    for c in cells if role(c) == 'test' and bound_names(c.source) & notebook_names]
    assert not clashes, 'test cells rebind names of the notebook (give them names of their own):\n' + '\n'.join(clashes)


@pytest.mark.parametrize('step', steps())
def test_rerunning_the_test_cells_leaves_the_notebook_intact(step):
    """The student's way: run the notebook, run every test cell again, then the rest of the notebook again. Every name
    the notebook bound still holds the same object after the tests, and the re-run raises nothing."""
    import nbformat
    from nbclient import NotebookClient

    for name in notebooks(step):
        nb = read(ROOT / 'notebooks' / name)
        client = NotebookClient(nb, timeout=600, kernel_name='python3',
                                resources={'metadata': {'path': str(ROOT / 'notebooks')}})
        mine = sorted(set().union(*(bound_names(c.source) for c in nb.cells if c.cell_type == 'code' and role(c) != 'test')))
        snapshot = nbformat.v4.new_code_cell(f'_ids_before = {{k: id(globals()[k]) for k in {mine!r} if k in globals()}}')
        compare = nbformat.v4.new_code_cell(
            "_moved = sorted(k for k, i in _ids_before.items() if k in globals() and id(globals()[k]) != i)\n"
            "assert not _moved, f'the test cells rebound {_moved}'")
        cells = list(nb.cells)
        nb.cells += [snapshot, compare]  # nbclient stores each cell's outputs at its index
        with client.setup_kernel():
            for i, cell in enumerate(cells):
                client.execute_cell(cell, i)
            client.execute_cell(snapshot, len(cells))
            for i, cell in enumerate(cells):
                if role(cell) == 'test':
                    client.execute_cell(cell, i)
            client.execute_cell(compare, len(cells) + 1)
            first_test = next(i for i, c in enumerate(cells) if role(c) == 'test')
            for i, cell in enumerate(cells[first_test:], first_test):
                if cell.cell_type == 'code' and role(cell) != 'test':
                    client.execute_cell(cell, i)
