"""The kill matrix of a step: does each mistake of its bank (source/<step>/instructor/bank.py) lose points in the test
cells meant to catch it, and does each correct alternative keep full marks? Read from the grades of the demo class."""


def kill_matrix(bank, by_student, points):
    """(lines, killed, alternatives kept) for a step. bank: its bank module, or any object with the MUTANTS and
    ALTERNATIVES that were graded (a sample of the bank); by_student: {student: row with 'cells'} (course.reports.export.rows());
    points: {grade_id: points}. X: lost points in a cell meant to catch it; x: lost points in another cell; !: expected to
    lose points there, and kept them."""
    width = max(len('mistake'), *(len(m.student) for m in bank.MUTANTS))
    lines = ['X lost points in a cell meant to catch it, x in another cell, ! expected but kept',
             f"{'mistake':<{width}}  " + ' '.join(f'{i:>2}' for i in range(1, len(points) + 1))]
    killed = 0
    for m in bank.MUTANTS:
        cells = by_student[m.student]['cells']
        marks = ['X' if cells[g] < p and g in m.caught_by else 'x' if cells[g] < p else '!' if g in m.caught_by else '.'
                 for g, p in points.items()]
        killed += bool(m.caught_by) and all(cells[g] < points[g] for g in m.caught_by)
        lines.append(f"{m.student:<{width}}  " + ' '.join(f'{c:>2}' for c in marks))
    lost = [a.student for a in bank.ALTERNATIVES if any(by_student[a.student]['cells'][g] < p for g, p in points.items())]
    kept = len(bank.ALTERNATIVES) - len(lost)
    lines.append(f'kill rate: {killed}/{len(bank.MUTANTS)} mistakes lose points where expected; '
                 f'{kept}/{len(bank.ALTERNATIVES)} correct alternatives keep full marks'
                 + (f' (not: {", ".join(lost)})' if lost else ''))
    return lines, killed, kept


def missing(bank, by_student):
    """The bank's students that the graded class lacks (it is not the demo class)."""
    return [v.student for v in [*bank.MUTANTS, *bank.ALTERNATIVES] if v.student not in by_student]
