"""Check each submission against the release before autograding, and repair it where the student's intent is clear.

Cells are matched by grade_id; where the metadata is gone, by cell id; failing that, by content (the first line of the
release cell). Every repair is written to repairs/<student>/<assignment>.txt; the original is kept in .original/.
"""

import copy
import shutil

import nbformat

from course.cells import STUB_LINE, grade_id, read_submitted, role
from course.layout import ROOT, notebooks, repairs_path, submitted_path


def first_line(cell):
    return next((line.strip() for line in cell.source.splitlines() if line.strip()), '')


def find(cell, candidates):
    """Indices of the submission cells that are the release cell `cell`: by grade_id, else by cell id, else by content."""
    for key in (lambda c: grade_id(c) == grade_id(cell), lambda c: c.get('id') == cell.id,
                lambda c: first_line(c) == first_line(cell) and first_line(cell) != ''):
        found = [i for i, c in candidates if key(c)]
        if found:
            return found
    return []


def repair(release, sub):
    """(repaired notebook, repairs made, reasons it needs attention) for submission sub against release."""
    repairs, attention = [], []
    sub = copy.deepcopy(sub)
    if sub.get('nbformat_minor', 0) < 5 or any('id' not in c for c in sub.cells):
        repairs.append(f'notebook format 4.{sub.get("nbformat_minor", 0)} without cell ids: upgraded to 4.5')
    kernel = sub.metadata.get('kernelspec', {}).get('name')
    if kernel != release.metadata.kernelspec.name:
        repairs.append(f'kernel {kernel!r}: graded with {release.metadata.kernelspec.name!r}')
    unused = list(enumerate(sub.cells))
    placed = {}  # submission index -> release cell it stands for
    known = {first_line(c) for c in release.cells}
    by_position, previous, matched_by = set(), -1, {}
    for rcell in (c for c in release.cells if role(c)):
        found = find(rcell, unused)
        gid = grade_id(rcell)
        if not found and role(rcell) in ('solution', 'answer'):  # an answer rewritten and stripped of metadata and id
            found = [i for i, c in unused if i > previous and first_line(c) not in known and not grade_id(c)][:1]
            by_position.update(found)
        if role(rcell) == 'solution' and len(found) > 1:
            edited = [i for i in found if STUB_LINE not in sub.cells[i].source] or found
            repairs.append(f'{gid}: {len(found)} copies; graded the last edited one, the others run as ordinary cells')
            found = edited[-1:]
        if not found:
            if role(rcell) in ('solution', 'answer'):
                attention.append(f'{gid}: the answer cell is missing')
            repairs.append(f'{gid}: {"deleted" if role(rcell) in ("test", "locked") else "missing"}; put back from the release')
            continue
        i = previous = found[0]
        unused = [(j, c) for j, c in unused if j != i]
        cell = sub.cells[i]
        if grade_id(cell) != gid:
            how = 'cell id' if cell.get('id') == rcell.id else 'position' if i in by_position else 'content'
            matched_by.setdefault(how, []).append(gid)
        if cell.cell_type != rcell.cell_type:
            repairs.append(f'{gid}: was a {cell.cell_type} cell; turned back into {rcell.cell_type}')
        if role(rcell) in ('test', 'locked') and cell.source != rcell.source:
            repairs.append(f'{gid}: locked cell edited; graded with the original')
        placed[i] = rcell
    if matched_by:
        repairs.append('nbgrader metadata missing on ' + '; '.join(
            f'{len(gids)} cells matched by {how} ({", ".join(gids[:3])}{", ..." * (len(gids) > 3)})'
            for how, gids in matched_by.items()))
    # rebuild: release order for the matched cells; the student's own cells stay after the cell they followed
    out, order, last = [], [], None
    followers = {}
    for i, cell in enumerate(sub.cells):
        if i in placed:
            last = placed[i].id
            order.append(last)
        else:
            with_meta = copy.deepcopy(cell)
            with_meta.get('metadata', {}).pop('nbgrader', None)
            followers.setdefault(last, []).append(with_meta)
    if order != [c.id for c in release.cells if role(c) and c.id in order]:
        repairs.append('cells were reordered: put back in the release order')
    by_release = {rc.id: sub.cells[i] for i, rc in placed.items()}
    out += followers.get(None, [])
    for rcell in release.cells:
        if not role(rcell):
            continue
        cell = by_release.get(rcell.id)
        if cell is None:
            cell = copy.deepcopy(rcell)
        elif cell.cell_type != rcell.cell_type:
            new = nbformat.v4.new_code_cell if rcell.cell_type == 'code' else nbformat.v4.new_markdown_cell
            cell = new(cell.source)
        cell.id = rcell.id
        cell.metadata = copy.deepcopy(rcell.metadata)
        out.append(cell)
        out += followers.get(rcell.id, [])
    repaired = nbformat.v4.new_notebook(cells=out, metadata=copy.deepcopy(release.metadata))
    for i, cell in enumerate(repaired.cells):  # the student's own cells need fresh, unique ids too
        if not cell.get('id') or sum(c.get('id') == cell.id for c in repaired.cells) > 1:
            cell.id = f'student-{i}'
    return repaired, repairs, attention


def repair_submission(aid, student, root=ROOT):
    """Check and repair submitted/<student>/<aid>/ in place (originals kept in .original/); return (repairs, attention)."""
    folder = submitted_path(student, aid, root)
    keep = folder / '.original'
    repairs, attention = [], []
    for name in notebooks(aid, root):
        release = nbformat.read(root / 'release' / aid / name, as_version=4)
        originals = sorted(keep.glob('*.ipynb')) if keep.exists() else []
        path = folder / name
        if not path.exists() and not originals:
            others = sorted(folder.glob('*.ipynb'))
            if len(others) != 1:
                attention.append(f'no {name}' + (f' and {len(others)} other notebooks: which one?' if others else ''))
                continue
            keep.mkdir(exist_ok=True)
            shutil.move(others[0], keep / others[0].name)
            repairs.append(f'notebook named {others[0].name}: graded as {name}')
            originals = [keep / others[0].name]
        source_path = originals[0] if originals else path
        try:
            sub = read_submitted(source_path)  # never through a link, never past its budget (course.gate)
        except Exception:  # unreadable: course.reports.results reports it and autograde leaves it
            continue
        fixed, made, needs = repair(release, sub)
        if made and not originals:
            keep.mkdir(exist_ok=True)
            shutil.copy2(path, keep / name)
        if made:
            nbformat.write(fixed, path)
        repairs += made
        attention += needs
    report = repairs_path(aid, student, root)
    if repairs or attention:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(''.join(f'repaired: {r}\n' for r in repairs) + ''.join(f'needs attention: {a}\n' for a in attention))
    else:
        report.unlink(missing_ok=True)
    return repairs, attention
