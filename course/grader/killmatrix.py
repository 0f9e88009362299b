"""The kill matrix of a step: does each mistake of its bank (source/<step>/instructor/bank.py) lose points in the test
cells meant to catch it, and does each correct alternative keep full marks? Read from the grades of the demo class, and
printed after its grade table by `python -m course.grader.grade --kill-matrix` (make mutants, make test)."""

from types import SimpleNamespace

from course.authoring import demo
from course.layout import autograded_points


def kill_matrix(bank, by_student, points):
    """(lines, killed, alternatives kept) for a step. bank: its bank module, or any object with the MUTANTS and
    ALTERNATIVES that were graded (a sample of the bank); by_student: {student: row with 'cells'} (course.reports.export.rows());
    points: {grade_id: points}. X: lost points in a cell meant to catch it; x: lost points in another cell; !: expected to
    lose points there, and kept them. A submission whose status is not 'graded' (a timeout on a busy machine, say) counts
    neither way: its row shows '?' and the rate line names it, to be graded again."""
    width = max(len('mistake'), *(len(m.student) for m in bank.MUTANTS))
    lines = ['X lost points in a cell meant to catch it, x in another cell, ! expected but kept',
             f"{'mistake':<{width}}  " + ' '.join(f'{i:>2}' for i in range(1, len(points) + 1))]
    killed = 0
    ungraded = [v.student for v in [*bank.MUTANTS, *bank.ALTERNATIVES] if not graded(by_student[v.student])]
    for m in bank.MUTANTS:
        cells = by_student[m.student]['cells']
        marks = (['?'] * len(points) if m.student in ungraded else
                 ['X' if cells[g] < p and g in m.caught_by else 'x' if cells[g] < p else '!' if g in m.caught_by else '.'
                  for g, p in points.items()])
        killed += m.student not in ungraded and bool(m.caught_by) and all(cells[g] < points[g] for g in m.caught_by)
        lines.append(f"{m.student:<{width}}  " + ' '.join(f'{c:>2}' for c in marks))
    lost = [a.student for a in bank.ALTERNATIVES if a.student not in ungraded
            and any(by_student[a.student]['cells'][g] < p for g, p in points.items())]
    kept = len(bank.ALTERNATIVES) - len(lost) - sum(a.student in ungraded for a in bank.ALTERNATIVES)
    lines.append(f'kill rate: {killed}/{len(bank.MUTANTS)} mistakes lose points where expected; '
                 f'{kept}/{len(bank.ALTERNATIVES)} correct alternatives keep full marks'
                 + (f' (not: {", ".join(lost)})' if lost else '')
                 + (f'; not graded, so counted neither way (grade them again): {", ".join(ungraded)}' if ungraded else ''))
    return lines, killed, kept


def graded(row):
    """Whether a grade-table row is a graded submission (not a timeout, a refusal, a crash): rows without a status (built
    by hand) are."""
    return row.get('status', 'graded') == 'graded'


def step_kill_matrix(step, rows):
    """The lines the grading command prints for a step's kill matrix, from its rows of the grade table
    (course.reports.export.rows()): the whole bank's if the class holds it (make mutants), a sample's if it holds the
    sample course.authoring.demo.sampled() draws (make test), else why there is none."""
    bank = demo.bank(step)
    by_student = {r['student_id']: r for r in rows}
    lines = []
    if bank is not None and missing(bank, by_student):  # a sample of the bank (make test), if that is what was graded
        graded = [v for v in demo.sampled(step) if v.student in by_student]
        if graded:
            full, bank = bank, SimpleNamespace(MUTANTS=[v for v in graded if v.caught_by],
                                               ALTERNATIVES=[v for v in graded if not v.caught_by])
            lines += [f'{step}: the kill matrix of a sample of its bank, {len(bank.MUTANTS)} of {len(full.MUTANTS)} '
                      f'mistakes and {len(bank.ALTERNATIVES)} of {len(full.ALTERNATIVES)} alternatives (make mutants: all)', '']
    if bank is None:
        return [*lines, f'{step}: no kill matrix: source/{step}/instructor/bank.py is missing']
    if missing(bank, by_student):
        return [*lines, f'{step}: no kill matrix: the class is not the demo class (make mutants grades it)']
    matrix = kill_matrix(bank, by_student, autograded_points(step))[0]
    return [*lines, f'{step} kill matrix: {matrix[0]}', *matrix[1:]]


def missing(bank, by_student):
    """The bank's students that the graded class lacks (it is not the demo class)."""
    return [v.student for v in [*bank.MUTANTS, *bank.ALTERNATIVES] if v.student not in by_student]
