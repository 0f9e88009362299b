"""nbgrader preprocessors this course adds (nbgrader_config.py puts them in nbgrader's pipelines): out-of-process checks
(AddProbe, JudgeProbe), output capped by lines and characters (CapOutput), the course's gate in nbgrader's own
autograde (GateSubmission), nbgrader's Execute that records why a notebook's execution stopped (RecordedExecute), and
nbgrader's CheckCellMetadata that checks each cell's metadata once per process (CheckCellMetadataOnce). The feedback's
preprocessors are course.reports.feedback's."""

import builtins
import contextlib
import inspect
import json
import math
import struct
import symtable
import textwrap
import zipfile
from pathlib import Path

import nbformat
import numpy as np
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata, Execute, NbGraderPreprocessor
from traitlets import Integer

from course import gate
from course.cells import role
from course.grader import outcome as grading_outcome
from course.grader import probe as probe_runtime
from course.grader.claims import judge, probe_parts
from course.isolation import policy
from course.isolation.sandbox import sanitize
from course.layout import instructor_module
from course.reports.results import STOPPING

PROBE_IN, PROBE_OUT = probe_runtime.INPUTS, policy.PROBE_RECORD  # next to the notebook being graded


def capped(text, max_lines, max_chars):
    """text cut to max_lines lines and max_chars characters, with a note saying how much was cut."""
    lines = text.split('\n')
    cut = '\n'.join(lines[:max_lines])[:max_chars]
    if cut == text:
        return text
    return f'{cut}\n... output truncated by the grader ({len(lines):,} lines, {len(text):,} characters) ...\n'


class SubmissionRefused(Exception):
    """The gate (course.gate) refused the submission nbgrader was about to grade."""


class GateSubmission(NbGraderPreprocessor):
    """First in autograde's first pass: the submission nbgrader is converting goes through the course's gate (course.gate:
    its id, every file's type, name and size), or nbgrader stops with SubmissionRefused and removes what it had copied.
    make grade refuses such a submission before nbgrader ever sees it (course.grader.workers.prepare); this holds a plain
    `nbgrader autograde` to the same gate, which reads each student id as a glob pattern and copies the submission's
    other files following any link (its pre-convert hook cannot stop it: nbgrader logs that hook's errors and goes on)."""

    def preprocess(self, nb, resources):
        info, folder = resources.get('nbgrader', {}), Path(resources['metadata']['path'])
        student, step = info.get('student', folder.parent.name), info.get('assignment', folder.name)
        verdict = gate.check_id(student) or gate.check(folder.parent.parent, folder.parent.name, folder.name)
        if verdict:
            raise SubmissionRefused(f'{gate.printable(student)} {gate.printable(step)}: {verdict}')
        return nb, resources


class CapOutput(NbGraderPreprocessor):
    """Cap every text output of a code cell by lines and by characters (nbgrader's LimitOutput counts lines only)."""

    max_lines = Integer(1000, help='lines kept per output').tag(config=True)
    max_chars = Integer(100_000, help='characters kept per output').tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        for out in cell.get('outputs', []):
            if 'text' in out:
                out.text = capped(out.text, self.max_lines, self.max_chars)
            for mime, value in out.get('data', {}).items():
                if mime.startswith('text/') and isinstance(value, str):
                    out.data[mime] = capped(value, self.max_lines, self.max_chars)
            if out.get('output_type') == 'error':
                out.evalue = capped(out.evalue, 20, 2000)
                out.traceback = [capped(line, 50, 5000) for line in out.traceback[-20:]]
        return cell, resources


def checks_for(aid):
    """source/<aid>/instructor/checks.py, the out-of-process checks of an assignment, or None."""
    return instructor_module(aid, 'checks')


def probe_constants(checks):
    """{name: value} of the step's constants its probe parts take (their keyword-only parameters, module-level names of
    checks.py), as JSON: they reach the kernel as data, in PROBE_IN."""
    names = sorted({p.name for part in probe_parts(checks) for p in inspect.signature(part).parameters.values()
                    if p.kind is p.KEYWORD_ONLY})
    missing = [n for n in names if not hasattr(checks, n)]
    if missing:
        raise ValueError(f'{checks.__file__}: a probe part takes {", ".join(missing)}, which checks.py does not define: '
                         'define each keyword-only parameter of a part as a module-level constant')
    try:
        return json.dumps({n: getattr(checks, n) for n in names})
    except TypeError as e:
        raise ValueError(f'{checks.__file__}: a constant a probe part takes is not JSON ({e}): give it as numbers, '
                         'strings, booleans, None, lists or dicts of them') from None


def unbound_names(source):
    """The names a piece of Python source uses without defining or importing them, builtins aside."""
    names, tables = set(), [symtable.symtable(source, '<probe>', 'exec')]
    while tables:
        table = tables.pop()
        tables += table.get_children()
        names |= {s.get_name() for s in table.get_symbols()
                  if s.is_referenced() and s.is_global() and not (table.get_type() == 'module' and s.is_assigned())}
    return sorted(names - set(dir(builtins)))


def probe_cell(checks):
    """The code of the cell AddProbe appends: course/grader/probe.py (the runtime every step shares), the step's helpers
    (PROBE_HELPERS of checks.py: functions or classes the grader's claims use too, written once), the parts of its probe
    (its @records functions) and `main([part, ...], <the notebook's globals>)`, executed in a namespace of their own
    (nothing is defined among the notebook's names). The parts and the helpers run in the kernel, apart from checks.py:
    they may use only their parameters, builtins, what they import and each other."""
    helpers = tuple(getattr(checks, 'PROBE_HELPERS', ()))
    parts = probe_parts(checks)
    if not parts:
        raise ValueError(f'{checks.__file__}: no probe part: mark each function that records in the student\'s kernel '
                         'with @records (course.grader.claims)')
    sources = [textwrap.dedent(inspect.getsource(f)) for f in (*helpers, *parts)]
    sent = {f.__name__ for f in (*helpers, *parts)} | {'records'}
    unbound = [n for n in unbound_names('\n\n'.join(sources)) if n not in sent]
    if unbound:
        raise ValueError(f'{checks.__file__}: a probe part or a helper of PROBE_HELPERS uses {", ".join(unbound)}, which '
                         'the kernel does not have: import it inside the function, reach the notebook\'s names as '
                         'nb.<name>, take a constant as a keyword-only parameter of the part, or add the helper to '
                         'PROBE_HELPERS')
    code = '\n\n'.join([inspect.getsource(probe_runtime), *sources,
                         f'main([{", ".join(f.__name__ for f in parts)}], NOTEBOOK)\n'])
    return ('# The grader\'s probe: it records what this notebook\'s code computes on the grader\'s inputs, to be checked '
            'elsewhere.\n'
            f'exec(compile({code!r}, "<grader probe>", "exec"), {{"__name__": "grader_probe", "NOTEBOOK": globals()}})\n')


class AddProbe(NbGraderPreprocessor):
    """Before execution: write the grader's inputs (and the step's constants) next to the notebook and append the probe
    of source/<assignment>/instructor/checks.py (probe_cell)."""

    def preprocess(self, nb, resources):
        checks = checks_for(resources['nbgrader']['assignment'])
        if checks:
            folder = Path(resources['metadata']['path'])
            cell = nbformat.v4.new_code_cell(probe_cell(checks))
            resources['probe_inputs'] = checks.make_inputs()  # judged from this copy: the student can rewrite the file
            np.savez(folder / PROBE_IN, **resources['probe_inputs'], **{probe_runtime.CONSTANTS: probe_constants(checks)})
            (folder / PROBE_OUT).unlink(missing_ok=True)
            (folder / PROBE_OUT).touch()  # empty: one of policy.RECORDS, the one file the kernel may write in its folder
            cell.metadata['course'] = {'probe': True}
            nb.cells.append(cell)
        return nb, resources


class OverBudget(ValueError):
    """What a submission's code wrote is larger than the grader reads (its size, declared or on disk): the checks that
    needed it fail, with this message, and the submission's outcome says so (Outcome.over_budget)."""


def zip_directory(path):
    """(entries, bytes) of the zip's central directory as its end record declares them, read first (as zipfile finds
    that record), so that a directory too large to parse is refused unparsed. A zip64 record (over 65,535 entries, or
    over 4 GiB) counts as too large."""
    with open(path, 'rb') as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - (1 << 16) - 22))
        tail = f.read()
    at = len(tail) - 22 if tail[-22:-18] == b'PK\x05\x06' and tail[-2:] == b'\0\0' else tail.rfind(b'PK\x05\x06')
    if at < 0 or len(tail) - at < 22:
        raise zipfile.BadZipFile('not a zip file: no end of central directory')
    entries, size = struct.unpack('<HI', tail[at + 10:at + 16])
    if tail[max(0, at - 20):at - 16] == b'PK\x06\x07' or entries == 0xFFFF or size == 0xFFFFFFFF:
        return 1 << 32, 1 << 64  # zip64: never that small
    return entries, size


def check_record(path, max_expanded, max_entries):
    """Raise OverBudget unless the npz at path costs at most max_expanded bytes once read: checked before anything is
    decompressed or allocated, from what it declares. Its central directory (at most max_entries entries of at most
    1 KiB each), then each entry's size (they add up to at most max_expanded, and zipfile decompresses no more than an
    entry declares), stored or deflated only (another method's decompressor takes no output bound), then each array's
    header (its shape and dtype fit in the bytes its entry declares; numpy allocates the array from the header alone)."""
    entries, directory = zip_directory(path)
    if entries > max_entries or directory > max_entries << 10:
        raise OverBudget(f'the probe record declares {entries:,} entries ({directory:,} bytes of directory), over the '
                         f'{max_entries:,} the grader reads')
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        declared = sum(i.file_size for i in infos)
        if len(infos) > max_entries or declared > max_expanded:
            raise OverBudget(f'the probe record declares {declared:,} bytes in {len(infos):,} entries, over the '
                             f'{max_expanded:,} bytes the grader reads')
        for info in infos:
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise OverBudget(f'the probe record\'s {info.filename} is compressed with method {info.compress_type}, '
                                 'not stored or deflated as numpy writes it')
            with z.open(info) as f:
                try:
                    version = np.lib.format.read_magic(f)
                except ValueError:  # not an array: numpy reads it as bytes, at most what the entry declares
                    continue
                header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                if version not in header:  # numpy.save writes 3.0 only for structured dtypes, never numbers
                    raise OverBudget(f'the probe record\'s {info.filename} is an array of format {version}, not of '
                                     'numbers as numpy.save writes them')
                try:
                    shape, _, dtype = header[version](f)
                except ValueError:  # a damaged header: numpy refuses it the same way (read_record)
                    continue
            if not dtype.hasobject and math.prod(shape) * max(dtype.itemsize, 1) > info.file_size:
                raise OverBudget(f'the probe record\'s {info.filename} declares an array of {math.prod(shape):,} x '
                                 f'{dtype.itemsize} bytes in an entry of {info.file_size:,}')


def read_record(path, max_bytes, max_expanded=64 << 20, max_entries=1000):
    """The probe's record at path, {'<function>.<key>': array}; {} if there is none or it is empty. A record over
    max_bytes on disk, or that declares more than max_expanded bytes or max_entries entries (check_record()), raises
    OverBudget before it is read. An entry that is not numbers (an object array: a function returned None, or a list of
    tensors, and numpy could load it only by unpickling) becomes '<function>.error' instead, so that one function's odd
    return value fails only the checks of that function, not every check of the notebook."""
    record = {}
    if not (path.is_file() and not path.is_symlink() and path.stat().st_size > 0):
        return record
    if path.stat().st_size > max_bytes:
        raise OverBudget(f'the probe record is {path.stat().st_size:,} bytes, over the {max_bytes:,} the grader reads')
    check_record(path, max_expanded, max_entries)
    with np.load(path, allow_pickle=False) as f:
        for key in f.files:
            try:
                record[key] = f[key]
            except ValueError:  # numpy: "Object arrays cannot be loaded when allow_pickle=False"
                record.setdefault(f'{key.split(".")[0]}.error', np.asarray(f'{key} is not numbers (None, or a list?)'))
    return record


class JudgeProbe(NbGraderPreprocessor):
    """After execution: take the probe cell out, judge its record here, and fail every test cell whose claim does not hold;
    the submission's outcome (course.grader.outcome, in resources) records a probe that stopped and a record over budget."""

    max_bytes = Integer(50_000_000, help='a larger record (on disk) is not read, and every check fails').tag(config=True)
    max_expanded = Integer(64 << 20, help='a record that declares more bytes once decompressed is not read, and every '
                                          'check fails').tag(config=True)
    max_entries = Integer(1000, help='a record of more entries (arrays) is not read, and every check fails').tag(config=True)

    def preprocess(self, nb, resources):
        folder = Path(resources['metadata']['path'])
        sanitize(folder)  # no link or fifo the student left may steer what nbgrader reads or writes here
        checks = checks_for(resources['nbgrader']['assignment'])
        if not checks:
            return nb, resources
        probe_cells = [c for c in nb.cells if c.metadata.get('course', {}).get('probe')]
        # The probe ran past the cell limit (or its kernel died in it): the checks that needed what it had not recorded
        # yet fail, and the submission's status must say why (its outcome's probe), not read 'graded'.
        outcome = grading_outcome.of(resources)
        outcome.probe = outcome.probe or next((o['ename'] for c in probe_cells for o in c.get('outputs', [])
                                 if o.get('output_type') == 'error' and o.get('ename') in STOPPING), None)
        nb.cells = [c for c in nb.cells if c not in probe_cells]
        record, inputs, over = {}, resources['probe_inputs'], None
        out = folder / PROBE_OUT
        try:
            record = read_record(out, self.max_bytes, self.max_expanded, self.max_entries)
        except OverBudget as e:  # every check fails, saying why; the submission's status too
            over = outcome.over_budget = str(e)
        except Exception as e:  # a damaged or forged record: every check fails
            self.log.warning('probe record %s unreadable: %s', out, e)
        verdicts = judge(checks, inputs, record)
        for cell in nb.cells:
            reason = verdicts.get(cell.metadata.get('nbgrader', {}).get('grade_id')) if role(cell) == 'test' else None
            reason = reason and (over or reason)
            if reason and not any(o.get('output_type') == 'error' for o in cell.outputs):
                cell.outputs.append(nbformat.v4.new_output(
                    'error', ename='GraderCheckFailed', traceback=[f'GraderCheckFailed: {reason}'],
                    evalue=f're-checked by the grader outside your kernel, on the numbers your code computed: {reason}'))
        for name in (PROBE_IN, PROBE_OUT):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
        return nb, resources


def output_size(content):
    """About how many bytes an output message's content holds: its strings' lengths (iteratively: JSON data may nest)."""
    size, todo = 0, [content]
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, dict):
            todo += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            todo += value
        else:
            size += 8
    return size


class RecordedExecute(Execute):
    """nbgrader's Execute, which also records in the submission's outcome (course.grader.outcome, in resources) the
    exception that stopped a notebook (nbgrader only logs it) and each cell that ran past the cell limit, with how busy
    the machine was then; and holds what the notebook's outputs may cost the grader while it runs: past
    max_output_bytes, outputs are dropped as they arrive (a note says so, and the outcome's over_budget), but for each
    cell's first error, capped, which grading needs."""

    max_output_bytes = Integer(32 << 20, help='bytes of output (text, images, errors) a notebook may send the grader in '
                                              'all while it runs; later outputs are dropped').tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        resources = {} if resources is None else resources
        outcome = grading_outcome.of(resources)  # nbclient keeps resources as self.resources while it runs
        self.output_bytes = 0
        try:
            return super().preprocess(nb, resources, km)
        except Exception as e:
            outcome.stopped = type(e).__name__
            raise

    async def _async_handle_timeout(self, timeout, cell=None):
        """nbclient's: a cell ran past the limit and is interrupted. Recorded first (the outcome's timeouts), with the
        machine's load: the limit is counted on the clock, so that a cell waiting on nothing (a sleep, a lock) is stopped
        too; on a machine with more runnable processes than cores, a cell gets less than a core, and its status says so
        (course.reports.results.status) instead of charging the lost time silently to the student."""
        if cell is not None:
            key = cell.metadata.get('nbgrader', {}).get('grade_id') or cell.get('id') or '?'
            grading_outcome.of(self.resources).timeouts.setdefault(
                'probe' if cell.metadata.get('course', {}).get('probe') else key, grading_outcome.machine_load())
        return await super()._async_handle_timeout(timeout, cell)

    def output(self, outs, msg, display_id, cell_index):
        self.output_bytes += output_size(msg['content'])
        if self.output_bytes <= self.max_output_bytes:
            return super().output(outs, msg, display_id, cell_index)
        outcome = grading_outcome.of(self.resources)
        if outcome.over_budget is None:
            outcome.over_budget = (f'its outputs passed the {self.max_output_bytes >> 20} MiB the grader reads: '
                                   'the rest were dropped')
        if msg['msg_type'] == 'error' and not any(o.get('output_type') == 'error' for o in outs):
            content = msg['content']
            outs.append(nbformat.v4.new_output('error', ename=capped(str(content.get('ename', '')), 1, 200),
                                               evalue=capped(str(content.get('evalue', '')), 20, 2000),
                                               traceback=[capped(str(t), 50, 5000) for t in content.get('traceback', [])[-20:]]))
        elif not any(DROPPED in o.get('text', '') for o in outs if o.get('output_type') == 'stream'):
            outs.append(nbformat.v4.new_output('stream', name='stdout', text=f'{DROPPED} ({outcome.over_budget})\n'))
        return None


DROPPED = '... outputs dropped by the grader'


class RememberingValidator(MetadataValidator):
    """nbgrader's metadata validator, remembering (in VALID, for the life of the process) each cell it found valid by what
    its checks read: the cell's type and its nbgrader metadata. jsonschema checks the schema itself at every call, which
    makes a notebook's check cost about 0.07 s; a grading worker meets the same cells in every submission."""

    def validate_cell(self, cell):
        meta = cell.metadata.get('nbgrader')
        if not isinstance(meta, dict) or meta.get('cell_type', cell.cell_type) != cell.cell_type:
            return super().validate_cell(cell)  # no metadata (nothing to check), or a warning to log every time
        key = json.dumps([cell.cell_type, meta], sort_keys=True, default=repr)
        if key not in VALID:
            super().validate_cell(cell)  # raises if invalid: nothing remembered
            if len(VALID) >= 20_000:
                VALID.clear()
            VALID.add(key)


VALID = set()


class CheckCellMetadataOnce(CheckCellMetadata):
    """nbgrader's CheckCellMetadata (the same checks, the same error) with RememberingValidator: a cell seen valid before
    is not checked against the schema again; the notebook-wide check (grade ids unique) runs every time."""

    def preprocess(self, nb, resources):
        try:
            RememberingValidator().validate_nb(nb)
        except ValidationError:
            return super().preprocess(nb, resources)  # nbgrader's own run: its log lines and its error
        return nb, resources
