"""The outcome of grading one submission, as data: one JSON file per submission, results/<step>/<student>.json, written
by course.grader.workers as grading goes (never parsed back out of nbgrader's log text), and its status.

A record holds:
  step, student      the submission
  kernel             'warm', 'cold' or 'unsandboxed'
  refused            why the gate (course.gate) refused the submission before anything read it ('symbolic link:
                     notes.txt'), or None
  repairs, attention what course.grader.repair did to the submission, and what it could not decide (lists of sentences)
  unreadable         why the notebook could not be read ('empty file', 'JSONDecodeError'...), or None
  autograde          {'success': bool, 'error': the exception that stopped execution (DeadKernelError...) or None}
  stopped            'timeout' or 'died' if the grader had to stop the nbgrader worker, else None
  seconds            {'autograde': s, 'feedback': s, 'limit': the worker's time limit}
  graded             whether nbgrader wrote the autograded notebooks
  cells              {grade_id or cell id: exception name} of cells that stopped with CellTimeoutError or DeadKernelError
  probe              'CellTimeoutError' or 'DeadKernelError' if the grader's probe cell stopped (its checks fail), else None
  timeouts           {cell: {'load': 1-minute load average, 'cores': n}} of each cell that ran past the cell limit (the
                     probe's as 'probe'), or {'submission': ...} if the whole submission ran past --timeout: the limits
                     are on the clock, and a status says when the machine was busier than its cores (busy())
  failures           {grade_id: 'ExceptionName: message'} of each test cell that failed, its error as the autograded
                     notebook shows it (cut to MESSAGE_CHARS): what the class report (course.reports.classreport) groups
  blank              whether every solution and answer cell is as released
  over_budget        why what the grader reads of the submission was too large to read whole (the notebook file, the
                     probe's record, the outputs: course.cells, course.grader.preprocessors), or None
  memory             {'worker_peak_rss': bytes}: the most the grading worker held while it graded this submission
  feedback           {'written': whether every feedback page was written, 'error': why not} if feedback was asked for,
                     else None
  removed            the active content (scripts, event handlers...) course.reports.active_content took out of its outputs and
                     markdown before anything renders them, as the autograded notebooks record it
  status, detail     decided by status() from the rest: see STATUSES
"""

import json
from pathlib import Path

from course.cells import grade_id, read, role
from course.layout import ROOT, autograded_path, notebooks, result_path, results_path

STATUSES = {
    'refused': 'not read, nor graded: the submission is not only regular files and folders with plain names (detail: '
               'the first file that is not, e.g. "symbolic link: notes.txt"), or its student id is not a plain name '
               '(course.gate)',
    'graded': 'autograded (detail: how many repairs were made first; "active content removed": see the repair report)',
    'graded, no feedback': 'autograded, but its feedback page could not be written (detail: why): not released',
    'blank': 'autograded, and no solution or answer cell was touched',
    'unreadable': 'the notebook file is not a notebook (detail: why)',
    'needs attention': 'a human must decide first, e.g. which of several notebooks to grade (detail: what)',
    'over budget': 'graded without what was too large to read (detail: what): the checks that needed it fail; a notebook '
                   'over the budget is not graded',
    'timeout': 'a cell, or the whole submission, ran past its time limit (detail: where)',
    'kernel died': 'the student code killed its kernel (detail: in which cell)',
    'not graded': 'nbgrader failed for another reason (detail: the exception; the log is .build/logs/<step>/<student>.log)',
    'not submitted': 'the student is in the gradebook but has no submission of this step',
}
STOPPING = ('CellTimeoutError', 'DeadKernelError')
MESSAGE_CHARS = 2000  # of a failed test cell's error, kept in the record


def new(step, student, kernel):
    return {'step': step, 'student': student, 'kernel': kernel, 'repairs': [], 'attention': [], 'unreadable': None,
            'autograde': None, 'stopped': None, 'seconds': {}, 'over_budget': None, 'memory': {}, 'graded': False,
            'cells': {}, 'failures': {}, 'blank': False, 'removed': [], 'probe': None, 'timeouts': {},
            'refused': None, 'feedback': None, 'status': None, 'detail': ''}


REFUSED_IDS = '_refused_ids.json'  # beside the records: no student id starts with '_' (course.gate.STUDENT_ID)


def save_refused_ids(step, entries, root=ROOT):
    """The submissions of a step whose student id the gate refused (course.gate.check_id), [{'student': the name as
    course.gate.printable() shows it, 'detail': why}]: they have no record of their own (their name is no file name, nor
    a gradebook entry), but the grade table lists them (course.reports.export.rows())."""
    path = results_path(step, root) / REFUSED_IDS
    if entries:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(entries, indent=1) + '\n')
    else:
        path.unlink(missing_ok=True)


def refused_ids(step, root=ROOT):
    """What save_refused_ids() saved for step ([] if nothing)."""
    path = results_path(step, root) / REFUSED_IDS
    return json.loads(path.read_text()) if path.exists() else []


def load(step, student, root=ROOT):
    """The record of a submission, or None if it was never graded; one written by an earlier grader is migrated()."""
    path = result_path(step, student, root)
    return migrated(json.loads(path.read_text()), root) if path.exists() else None


def migrated(record, root=ROOT):
    """record with every key of new() it lacks (a record written by an earlier grader): the failure messages read back
    from its autograded notebooks, as facts() reads them (the class report groups them), the rest at new()'s values."""
    lacks = new(record.get('step'), record.get('student'), record.get('kernel')).keys() - record.keys()
    if not lacks:
        return record
    out = {**new(record.get('step'), record.get('student'), record.get('kernel')), **record}
    if 'failures' in lacks and out['graded'] and out['step'] and out['student']:
        try:
            out['failures'] = facts(out['step'], out['student'], root)['failures']
        except Exception:  # noqa: BLE001 -- its notebooks gone or unreadable: the report shows no message, as before
            pass
    return out


def save(record, root=ROOT):
    path = result_path(record['step'], record['student'], root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix('.part')
    tmp.write_text(json.dumps(record, indent=1) + '\n')
    tmp.replace(path)


def update(step, student, root=ROOT, **fields):
    """Merge fields into a submission's record (made if missing) and save it."""
    record = load(step, student, root) or new(step, student, None)
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(record.get(key), dict):
            record[key] = {**record[key], **value}
        else:
            record[key] = value
    save(record, root)
    return record


BUSY = ', on a busy machine'


def busy(record, where):
    """', on a busy machine (load 5.2 on 2 cores): regrade it to be sure' if the machine had more runnable processes than
    cores when `where` (a cell, 'probe' or 'submission') met its time limit, which is counted on the clock: the student's
    code then had less than a core, and may have been stopped for the machine's slowness, not its own. Else ''."""
    seen = (record.get('timeouts') or {}).get(where)
    if not seen or seen.get('load', 0) <= seen.get('cores', 1):
        return ''
    return f"{BUSY} (load {seen['load']:g} on {seen['cores']} cores): regrade it to be sure"


def status(record):
    """(status, detail) of a record: one of STATUSES and a few words. A pure function of the record."""
    status, detail = graded_status(record)
    feedback = record.get('feedback') or {}
    if status in ('graded', 'blank') and feedback and not feedback.get('written'):
        return 'graded, no feedback', feedback.get('error') or 'no page was written'
    return status, detail


def graded_status(record):
    """status() without what became of the feedback page."""
    if record.get('refused'):
        return 'refused', record['refused']
    if record['attention']:
        return 'needs attention', record['attention'][0]
    if record['unreadable']:
        return 'unreadable', record['unreadable']
    if record.get('over_budget'):
        return 'over budget', record['over_budget']
    if record['stopped'] == 'timeout':
        return 'timeout', (f'autograde took over {record["seconds"].get("limit", "?")} s and was stopped'
                           + busy(record, 'submission'))
    if record['stopped'] == 'died':
        return 'not graded', 'the nbgrader process died'
    error = (record['autograde'] or {}).get('error')
    if error == 'DeadKernelError':
        return 'kernel died', ''
    if not record['graded']:
        if error == 'CellTimeoutError':
            return 'timeout', 'a cell ran past the limit and ignored the interrupt'
        return 'not graded', error or 'see the autograde log'
    for cell, name in record['cells'].items():
        return ('timeout' if name == 'CellTimeoutError' else 'kernel died'), f'in cell {cell}' + busy(record, cell)
    if record.get('probe'):  # the notebook ran; the grader's probe, run after it on the student's code, did not finish
        return (('timeout' if record['probe'] == 'CellTimeoutError' else 'kernel died'),
                "in the grader's checks, run on your code after the notebook: the checks it did not reach fail"
                + busy(record, 'probe'))
    if record['blank']:
        return 'blank', ''
    n = len(record['repairs'])
    details = [f'{n} repair{"s" * (n > 1)}'] * bool(n) + ['active content removed'] * bool(record.get('removed'))
    return 'graded', ', '.join(details)


def label(record):
    """The status as the grade table and grades.csv show it: 'graded', 'graded (2 repairs)', 'timeout (in cell head)'."""
    if record is None:
        return 'not submitted'
    detail, busy_note, load = record['detail'].partition(BUSY)  # after the parenthesis: 'timeout (in cell head), on a busy ...'
    return record['status'] + (f' ({detail})' if detail else '') + busy_note + load


def facts(step, student, root=ROOT):
    """What the autograded notebooks say, for a record: whether they exist, the cells that stopped execution, whether the
    submission is blank, the message of each failed test cell. Read from the notebooks' outputs and cells, not from any log."""
    graded, cells, failures, blank, removed = True, {}, {}, True, []
    for name in notebooks(step, root):
        path = autograded_path(student, step, root) / name
        if not path.exists():
            graded = False
            continue
        nb = read(path)
        removed += nb.metadata.get('course', {}).get('active_content_removed', [])  # course.reports.active_content
        for cell in nb.cells:
            for out in cell.get('outputs', []):
                if out.get('ename') in STOPPING:
                    cells.setdefault(grade_id(cell) or cell.get('id'), out['ename'])
                if out.get('output_type') == 'error' and role(cell) == 'test':
                    failures.setdefault(grade_id(cell), f"{out.get('ename')}: {out.get('evalue')}"[:MESSAGE_CHARS])
        # The release as grading generated it (course.grader.workers.prepare): release/ itself may be open in an editor.
        release = next(p for p in (Path(root) / '.build' / 'release' / step / name, Path(root) / 'release' / step / name)
                       if p.exists())
        released = {grade_id(c): c.source for c in read(release).cells if role(c) in ('solution', 'answer')}
        blank &= all(c.source == released.get(grade_id(c)) for c in nb.cells if role(c) in ('solution', 'answer'))
    return {'graded': graded, 'cells': cells, 'failures': failures, 'blank': graded and blank, 'removed': removed}


def finish(step, student, root=ROOT):
    """Complete a submission's record with facts() and its status; save and return it."""
    record = load(step, student, root) or new(step, student, None)
    record.update(facts(step, student, root))
    record['status'], record['detail'] = status(record)
    save(record, root)
    return record
