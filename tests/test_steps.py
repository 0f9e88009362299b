"""What every step of source/ must hold for the tooling to grade it (docs/adding-a-step.md): parametrised over the steps
found, with no per-step code. A step without a bank of mistakes fails here, saying what is missing."""

import pytest

from course.authoring.demo import bank, demo_class
from course.authoring.reproduced import drifts, reproduced, shown_lines
from course.cells import read, role
from course.grader.claims import judge, probe_parts
from course.layout import INSTRUCTOR, ROOT, autograded_points, instructor_module, notebooks, steps
from support.bindings import bound_names

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
    """checks.py has what the grader calls (make_inputs(), the @records parts of its probe, a @claim per test cell), and
    judges every test cell: with nothing recorded, every claim fails. A test cell without a claim scores on the kernel's
    word alone, which a hostile notebook can fake (the corpus's hostile_try_except_every_cell would keep its points)."""
    checks = instructor_module(step, 'checks')
    assert checks is not None, (f'source/{step}/{INSTRUCTOR}/checks.py is missing: make_inputs(), @records probe parts, '
                                'claims (see docs/adding-a-step.md)')
    assert callable(getattr(checks, 'make_inputs', None)), f'source/{step}/{INSTRUCTOR}/checks.py defines no make_inputs()'
    assert probe_parts(checks), f'source/{step}/{INSTRUCTOR}/checks.py has no probe part (a function marked @records)'
    verdicts = judge(checks, checks.make_inputs(), {})
    points = autograded_points(step)
    assert set(verdicts) <= set(points), f'claims for cells that are not test cells: {sorted(set(verdicts) - set(points))}'
    unjudged = [g for g in points if not verdicts.get(g)]
    assert not unjudged, f'test cells that an empty record does not fail (no claim, or a lenient one): {unjudged}'


LONGEST_PART = 60  # lines: a probe part longer than a screen is several things to be named


@pytest.mark.parametrize('step', steps())
def test_the_probe_reads_as_a_list_of_named_parts(step):
    """checks.py reads top to bottom as the list of what the probe measures: every @records part fits on a screen and
    says in a docstring what it records (docs/adding-a-step.md, "Writing checks.py")."""
    import inspect

    parts = probe_parts(instructor_module(step, 'checks'))
    long = [f'{p.__name__} ({n} lines)' for p in parts if (n := len(inspect.getsourcelines(p)[0])) > LONGEST_PART]
    assert not long, f'source/{step}/{INSTRUCTOR}/checks.py: parts over {LONGEST_PART} lines, to split into named parts: {long}'
    bare = [p.__name__ for p in parts if not (p.__doc__ or '').strip()]
    assert not bare, f'source/{step}/{INSTRUCTOR}/checks.py: parts without a docstring saying what they record: {bare}'


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
    assert not found, ('reproduced code drifted from its source step (copy the source step\'s code):\n'
                       + '\n'.join(sorted(found)))


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


def test_every_step_states_its_time_and_stays_comparable_in_size():
    """Every step's opening states its expected time, and no step is more than 1.5 times the median of the others in
    words of prose, code tasks or test cells (course.authoring.sizes; the table is printed either way, `pytest -s`)."""
    from course.authoring.sizes import over, report, sizes

    table = sizes()
    print(report(table))
    untimed = [step for step, s in table.items() if not s.hours]
    assert not untimed, f'these steps state no expected time in their opening ("**Expected time:** about N hours."): {untimed}'
    problems = over(table)
    assert not problems, '\n'.join(problems) + '\n' + report(table)


def test_the_size_check_flags_a_step_far_above_the_others():
    from course.authoring.sizes import Size, over

    table = {f'lesson{i}': Size(3000 + 100 * i, 6, 20, 4, '4') for i in range(1, 6)}
    assert not over(table)
    table['lesson6'] = Size(7900, 11, 32, 5, '4')
    assert [line.split(':')[0] for line in over(table)] == ['lesson6'] * 3, over(table)
