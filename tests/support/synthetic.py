"""A small synthetic step, written as a course author would add one: a folder source/step<N>/ with its notebook (one
function to write, two test cells, a hidden test, a written answer), a file it ships to students, its out-of-process
checks and its bank of mistakes. tests/test_new_step.py adds it to a temporary course and runs the tooling on it. N is
the first number no step of source/ has (9 while the course has eight): the next step a course author would add, never
one of the course's own."""

import re
import shutil
import subprocess
import sys
import textwrap
from itertools import count

import nbformat

from course.layout import steps

NUMBER = next(n for n in count(1) if f'step{n}' not in steps())
STEP, NAME = f'step{NUMBER}', f'step{NUMBER}_adder.ipynb'
MISTAKES = {'subtracts': ('add_small_cases', 'add_is_symmetric'), 'off_by_one': ('add_small_cases', 'add_is_symmetric')}
ALTERNATIVES = ('uses_sum',)


def meta(gid, solution=False, grade=False, locked=False, points=None):
    m = {'grade': grade, 'grade_id': gid, 'locked': locked, 'schema_version': 3, 'solution': solution, 'task': False}
    if points is not None:
        m['points'] = points
    return {'nbgrader': m}


def notebook():
    cells = [
        nbformat.v4.new_markdown_cell(f'# Step {NUMBER} — adding two numbers\n\n[![Open In Colab]'
                                      '(https://colab.research.google.com/assets/colab-badge.svg)](COLAB_URL)', id='title'),
        nbformat.v4.new_code_cell(textwrap.dedent('''\
            def add(a, b):
                """Return a + b (two floats in, a float out)."""
                ### BEGIN SOLUTION
                return a + b
                ### END SOLUTION'''), id='add', metadata=meta('add', solution=True)),
        nbformat.v4.new_code_cell(textwrap.dedent('''\
            """Check that add adds small numbers."""
            assert add(1, 2) == 3, f'add(1, 2): expected 3, got {add(1, 2)}; check the operator'
            ### BEGIN HIDDEN TESTS
            assert add(-5.5, 5.5) == 0, f'add(-5.5, 5.5): expected 0, got {add(-5.5, 5.5)}; check the operator'
            ### END HIDDEN TESTS'''), id='add-small-cases', metadata=meta('add_small_cases', grade=True, locked=True, points=1)),
        nbformat.v4.new_code_cell(textwrap.dedent('''\
            """Check that add(a, b) == add(b, a) == a + b."""
            assert add(2, 7) == add(7, 2) == 9, f'expected 9 both ways, got {add(2, 7)} and {add(7, 2)}; check the order'
            '''), id='add-is-symmetric', metadata=meta('add_is_symmetric', grade=True, locked=True, points=2)),
        nbformat.v4.new_code_cell("print(open('numbers.txt').read().strip())", id='shipped',
                                  metadata=meta('shipped', locked=True)),
        nbformat.v4.new_markdown_cell('Why is add symmetric?', id='q'),
        nbformat.v4.new_markdown_cell('Model answer: addition of reals commutes. Rubric: 1 point for "commutes".',
                                      id='why', metadata=meta('why', solution=True, grade=True, points=1)),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata['kernelspec'] = {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}
    return nb


BANK = f'''"""Step {NUMBER}'s bank of mistakes (synthetic, for the tooling's tests)."""

from course.authoring.demo import Variant

MUTANTS = [
    Variant('subtracts', (('add', 'return a + b', 'return a - b'),), {MISTAKES['subtracts']!r}),
    Variant('off_by_one', (('add', 'return a + b', 'return a + b + 1'),), {MISTAKES['off_by_one']!r}),
]
ALTERNATIVES = [Variant('uses_sum', (('add', 'return a + b', 'return sum((a, b))'),))]
'''

CHECKS = '''"""The synthetic step's claims: add() on the grader's numbers, judged outside the kernel."""

import numpy as np

from course.grader.claims import claim, expect_close, expect_equal, records

N = 5  # pairs of numbers


def make_inputs():
    rng = np.random.default_rng(9)
    return {'a': rng.standard_normal(N), 'b': rng.standard_normal(N)}


@records
def sums(nb, inp, run, *, N):
    """add() on the grader's pairs, both ways round."""
    pairs = [(float(inp['a'][i]), float(inp['b'][i])) for i in range(N)]
    run('add', lambda: {'ab': [nb.add(a, b) for a, b in pairs], 'ba': [nb.add(b, a) for a, b in pairs]})


@claim
def add_small_cases(inp, rec):
    expect_close(rec['add.ab'], inp['a'] + inp['b'], 1e-12, "add(a, b) on the grader's numbers", 'check the operator')


@claim
def add_is_symmetric(inp, rec):
    expect_equal(rec['add.ba'], rec['add.ab'], "add(b, a) against add(a, b) on the grader's numbers", 'check the order')
    add_small_cases(inp, rec)
'''


def add_to(course):
    """Write the synthetic step into the course at course (its source/ only: the tooling generates the rest)."""
    folder = course / 'source' / STEP
    (folder / 'instructor').mkdir(parents=True)
    nbformat.write(notebook(), folder / NAME)
    (folder / 'numbers.txt').write_text('1 2 3\n')  # shipped to students with the notebook
    (folder / 'instructor' / 'bank.py').write_text(BANK)
    (folder / 'instructor' / 'checks.py').write_text(CHECKS)


def unschedule(course):
    """Leave out of the course's course.toml every [schedule] line of a step its source/ no longer has: course.settings
    refuses such a line on load (in every command, nbgrader's included), as it would in a real course."""
    path = course / 'course.toml'
    have = {p.name for p in (course / 'source').iterdir()} if (course / 'source').is_dir() else set()
    kept = [line for line in path.read_text().splitlines(keepends=True)
            if not ((m := re.match(r'(\w+)\s*=\s*\{', line)) and m[1] not in have)]
    path.write_text(''.join(kept))


def built(course):
    """Add the synthetic step to the course at course (a copy: course.layout.copy_course) with its release/ as `make
    build` writes it (course.authoring.build's nbgrader converters): built in a scratch course of the step alone
    beside it (course.authoring.build in the course itself would build every other step again), without executing its
    solution (test_new_step.py checks that), then copied in."""
    from course import runner

    scratch = course.parent / f'{course.name}-{STEP}'
    shutil.copytree(course / 'course', scratch / 'course', ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('nbgrader_config.py', 'course.toml'):
        shutil.copy(course / name, scratch / name)
    add_to(scratch)
    unschedule(scratch)
    build = 'from course.authoring.build import ROOT, build; build(ROOT, run=False)'
    done = subprocess.run([sys.executable, '-c', build], cwd=scratch, capture_output=True, text=True, env=runner.env(scratch))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    add_to(course)
    shutil.copytree(scratch / 'release' / STEP, course / 'release' / STEP)
    shutil.rmtree(scratch)
    return course
