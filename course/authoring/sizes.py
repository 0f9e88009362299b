"""How large each step is, for students: the words of prose they read, the code tasks and written questions they answer,
the test cells they run, and the time the step's opening announces. The steps stay comparable: tests/test_steps.py fails
when a step's words, tasks or test cells exceed SPREAD times the median of the other steps', or when a step's opening
states no expected time.

  python -m course.authoring.sizes     print the table (and the steps over the limit)
"""

import argparse
import re
import statistics
from dataclasses import dataclass

from course.cells import read, role
from course.layout import ROOT, notebooks, steps

SPREAD = 1.5  # a step may be at most this many times the median of the others, in words, tasks and test cells
# The line every step's opening cell holds, after the title and the Colab badge: "**Expected time:** about 4 hours."
TIME_LINE = re.compile(r'^\*\*Expected time:\*\* about (\d+)(?:–(\d+))? hours?\.$', re.M)
WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")
COMPARED = ('words', 'tasks', 'tests')


@dataclass
class Size:
    words: int  # of the release's markdown cells (prose, formulas' names and numbers count; written answers are stubs)
    tasks: int  # code cells students write (solution cells)
    tests: int  # autograded test cells
    questions: int  # written answers, graded by hand
    hours: str | None  # as the opening states it ('4', '4–5'), or None


def size(step, root=ROOT):
    words = tasks = tests = questions = 0
    hours = None
    for name in notebooks(step, root):
        source = read(root / 'source' / step / name).cells
        tasks += sum(role(c) == 'solution' and c.cell_type == 'code' for c in source)
        tests += sum(role(c) == 'test' for c in source)
        questions += sum(role(c) == 'answer' for c in source)
        release = read(root / 'release' / step / name).cells
        words += sum(len(WORD.findall(c.source)) for c in release if c.cell_type == 'markdown')
        m = TIME_LINE.search(source[0].source) if source and source[0].cell_type == 'markdown' else None
        hours = hours or (m and '–'.join(g for g in m.groups() if g))
    return Size(words, tasks, tests, questions, hours)


def sizes(root=ROOT):
    """{step: Size} for every step of source/ (the words read from release/, which make build writes)."""
    return {step: size(step, root) for step in steps(root)}


def over(table, spread=SPREAD):
    """One line per step whose words, tasks or test cells exceed spread times the median of the other steps'."""
    out = []
    for step, s in table.items():
        others = [t for name, t in table.items() if name != step]
        for field in COMPARED if others else ():
            limit = spread * statistics.median(getattr(t, field) for t in others)
            if getattr(s, field) > limit:
                out.append(f'{step}: {getattr(s, field):,} {field}, over {spread} x the median of the other steps '
                           f'({limit:,.0f}): split the step, or move material to another')
    return out


def report(table):
    lines = [f"{'step':<8} {'words':>6} {'tasks':>5} {'tests':>5} {'questions':>9}  expected time"]
    lines += [f'{step:<8} {s.words:>6,} {s.tasks:>5} {s.tests:>5} {s.questions:>9}  '
              + (f'about {s.hours} hours' if s.hours else 'NOT STATED') for step, s in table.items()]
    return '\n'.join(lines)


def main(argv=None):
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    table = sizes()
    print(report(table))
    problems = over(table) + [f'{step}: its opening states no expected time' for step, s in table.items() if not s.hours]
    print('\n'.join(problems) or f'every step within {SPREAD} x the median of the others, each with its expected time')
    return 1 if problems else 0


if __name__ == '__main__':
    raise SystemExit(main())
