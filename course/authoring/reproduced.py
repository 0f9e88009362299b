"""What each step re-creates from earlier steps, read from its notebooks: the functions and classes it defines, which of
them it is given (locked or plain cells) and which it asks for (solution cells), and so which earlier steps' solutions
its release shows. Publishing (course.authoring.publish) opens a step only once those steps are past due;
tests/test_steps.py keeps every reproduced definition equal to the step that teaches it.

  python -m course.authoring.reproduced     print, for each step, the steps whose solutions its release reproduces
"""

import argparse
import ast

from course.cells import MARKER, read, role
from course.layout import ROOT, notebooks, steps


def _without_docstrings(node):
    """node with the docstring of every function and class in it removed (a reproduced cell may shorten them)."""
    for part in ast.walk(node):
        body = getattr(part, 'body', None)
        if (isinstance(part, (ast.FunctionDef, ast.ClassDef)) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            part.body = body[1:] or [ast.Pass()]
    return node


def definitions(step, root=ROOT):
    """{name: (AST dump, given)} of the functions and classes a step's source notebooks define outside test cells,
    docstrings aside. given: in a locked or plain cell (shown to students as it is), not a task (a solution cell)."""
    found = {}
    for nb in notebooks(step, root):
        for cell in read(root / 'source' / step / nb).cells:
            if cell.cell_type != 'code' or role(cell) == 'test':
                continue
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    found[node.name] = ast.dump(_without_docstrings(node)), role(cell) != 'solution'
    return found


def drifts(root=ROOT):
    """One line per definition a step is given under a name an earlier step defined, whose code differs from that
    step's (the latest earlier step that defines it)."""
    taught, out = {}, []
    for step in steps(root):
        mine = definitions(step, root)
        for name, (code, given) in mine.items():
            if given and name in taught and code != taught[name][1]:
                out.append(f'{step} defines {name}() differently from {taught[name][0]}')
        taught.update({name: (step, code) for name, (code, _) in mine.items()})
    return out


def reproduced(root=ROOT):
    """{step: {earlier step: [names]}}: the functions and classes each step is given that an earlier step asked students
    to write (in a solution cell): its release shows that earlier step's solution. A name asked for in several earlier
    steps (get_batch: Step 1, and again in Step 6) shows the solution of each."""
    solved_in, out = {}, {}
    for step in steps(root):
        mine = definitions(step, root)
        shows = {}
        for name, (_, given) in mine.items():
            for earlier in solved_in.get(name, []) if given else []:
                shows.setdefault(earlier, []).append(name)
        out[step] = {s: sorted(names) for s, names in sorted(shows.items())}
        for name, (_, given) in mine.items():
            if not given:
                solved_in.setdefault(name, []).append(step)
    return out


# A line shorter than this (`return out`, `return x, y`) says nothing of a solution: many steps write it.
SHORTEST = 12


def secret_lines(step, root=ROOT):
    """The lines students must not see before the step is past due, stripped: every line of its source notebooks' solution
    regions (a solution cell without markers: the whole cell), hidden tests, and written answers (the model answer and its
    rubric)."""
    out = set()
    for nb in notebooks(step, root):
        for cell in read(root / 'source' / step / nb).cells:
            kind, inside = role(cell), None
            for line in cell.source.splitlines():
                m = MARKER.match(line + '\n')
                if m:
                    inside = m[2] if m[1] == 'BEGIN' else None
                    continue
                if inside or kind == 'answer' or (kind == 'solution' and 'BEGIN SOLUTION' not in cell.source):
                    out.add(line.strip())
    return {line for line in out if len(line) >= SHORTEST}


def release_lines(step, root=ROOT):
    """Every line (stripped) of a step's release notebooks' cells: what its students see."""
    return {line.strip() for nb in notebooks(step, root) for cell in read(root / 'release' / step / nb).cells
            for line in cell.source.splitlines()}


def source_lines(step, root=ROOT):
    """Every line (stripped) of a step's source notebooks' cells."""
    return {line.strip() for nb in notebooks(step, root) for cell in read(root / 'source' / step / nb).cells
            for line in cell.source.splitlines()}


def own_secret_lines(step, root=ROOT):
    """The secret_lines() that are the step's own: not shown by its release, and in no notebook of an earlier step (a
    line an earlier step already wrote, `optimizer.step()` say, is no evidence of this step's solution)."""
    order = steps(root)
    earlier = set().union(*(source_lines(s, root) for s in order[:order.index(step)]))
    return secret_lines(step, root) - release_lines(step, root) - earlier


def shown_lines(root=ROOT):
    """{step: {earlier step: [lines]}}: the own_secret_lines() of an earlier step that a step's release shows. A check of
    reproduced() by the text itself: every step found here must be one reproduced() names."""
    order = steps(root)
    releases = {step: release_lines(step, root) for step in order}
    out = {step: {} for step in order}
    for i, earlier in enumerate(order):
        secret = own_secret_lines(earlier, root)
        for later in order[i + 1:]:
            shown = sorted(secret & releases[later])
            if shown:
                out[later][earlier] = shown
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.authoring.reproduced', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args(argv)
    for step, shows in reproduced().items():
        said = '; '.join(f'{s}: {", ".join(names)}' for s, names in shows.items()) or 'no earlier solution'
        print(f'{step} reproduces {said}')


if __name__ == '__main__':
    main()
