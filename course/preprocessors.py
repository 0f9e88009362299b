"""nbgrader preprocessors this course adds (nbgrader_config.py puts them in nbgrader's pipelines): out-of-process checks
(AddProbe, JudgeProbe), output capped by lines and characters (CapOutput), feedback without hidden test lines
(TestMessagesOnly), nbgrader's Execute that records why a notebook's execution stopped (RecordedExecute), and nbgrader's
CheckCellMetadata that checks each cell's metadata once per process (CheckCellMetadataOnce)."""

import builtins
import contextlib
import inspect
import json
import symtable
import textwrap
from pathlib import Path

import nbformat
import numpy as np
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata, Execute, NbGraderPreprocessor
from traitlets import Integer

from course import policy
from course import probe as probe_runtime
from course.cells import role
from course.claims import judge
from course.layout import instructor_module
from course.sandbox import sanitize

PROBE_IN, PROBE_OUT = probe_runtime.INPUTS, policy.PROBE_RECORD  # next to the notebook being graded


def capped(text, max_lines, max_chars):
    """text cut to max_lines lines and max_chars characters, with a note saying how much was cut."""
    lines = text.split('\n')
    cut = '\n'.join(lines[:max_lines])[:max_chars]
    if cut == text:
        return text
    return f'{cut}\n... output truncated by the grader ({len(lines):,} lines, {len(text):,} characters) ...\n'


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


class TestMessagesOnly(NbGraderPreprocessor):
    """In feedback, a failed test cell shows its error's name and message, not a traceback that could quote hidden tests."""

    def preprocess_cell(self, cell, resources, index):
        if role(cell) == 'test':
            for out in cell.get('outputs', []):
                if out.get('output_type') == 'error':
                    out.traceback = [f'{out.ename}: {out.evalue}']
        return cell, resources


def checks_for(aid):
    """source/<aid>/instructor/checks.py, the out-of-process checks of an assignment, or None."""
    return instructor_module(aid, 'checks')


def probe_constants(checks):
    """{name: value} of the step's constants its probe() takes (its keyword-only parameters, module-level names of
    checks.py), as JSON: they reach the kernel as data, in PROBE_IN."""
    names = [p.name for p in inspect.signature(checks.probe).parameters.values() if p.kind is p.KEYWORD_ONLY]
    missing = [n for n in names if not hasattr(checks, n)]
    if missing:
        raise ValueError(f'{checks.__file__}: probe() takes {", ".join(missing)}, which checks.py does not define: '
                         'define each keyword-only parameter of probe() as a module-level constant')
    try:
        return json.dumps({n: getattr(checks, n) for n in names})
    except TypeError as e:
        raise ValueError(f'{checks.__file__}: a constant probe() takes is not JSON ({e}): give it as numbers, strings, '
                         'booleans, None, lists or dicts of them') from None


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
    """The code of the cell AddProbe appends: course/probe.py (the runtime every step shares), the step's probe() and
    `main(probe, <the notebook's globals>)`, executed in a namespace of their own (nothing is defined among the notebook's
    names). probe() runs in the kernel, apart from checks.py: it may use only its parameters, builtins and what it
    imports."""
    step_probe = textwrap.dedent(inspect.getsource(checks.probe))
    unbound = [n for n in unbound_names(step_probe) if n != checks.probe.__name__]
    if unbound:
        raise ValueError(f'{checks.__file__}: probe() uses {", ".join(unbound)}, which the kernel does not have: '
                         'import it inside probe(), reach the notebook\'s names as nb.<name>, or take a constant as a '
                         'keyword-only parameter')
    code = f'{inspect.getsource(probe_runtime)}\n\n{step_probe}\n\nmain({checks.probe.__name__}, NOTEBOOK)\n'
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


def read_record(path, max_bytes):
    """The probe's record at path, {'<function>.<key>': array}; {} if there is none, or it is empty or over max_bytes.
    An entry that is not numbers (an object array: a function returned None, or a list of tensors, and numpy could load
    it only by unpickling) becomes '<function>.error' instead, so that one function's odd return value fails only the
    checks of that function, not every check of the notebook."""
    record = {}
    if not (path.is_file() and not path.is_symlink() and 0 < path.stat().st_size <= max_bytes):
        return record
    with np.load(path, allow_pickle=False) as f:
        for key in f.files:
            try:
                record[key] = f[key]
            except ValueError:  # numpy: "Object arrays cannot be loaded when allow_pickle=False"
                record.setdefault(f'{key.split(".")[0]}.error', np.asarray(f'{key} is not numbers (None, or a list?)'))
    return record


class JudgeProbe(NbGraderPreprocessor):
    """After execution: take the probe cell out, judge its record here, and fail every test cell whose claim does not hold."""

    max_bytes = Integer(50_000_000, help='a larger record is not read, and every check fails').tag(config=True)

    def preprocess(self, nb, resources):
        folder = Path(resources['metadata']['path'])
        sanitize(folder)  # no link or fifo the student left may steer what nbgrader reads or writes here
        checks = checks_for(resources['nbgrader']['assignment'])
        if not checks:
            return nb, resources
        nb.cells = [c for c in nb.cells if not c.metadata.get('course', {}).get('probe')]
        record, inputs = {}, resources['probe_inputs']
        out = folder / PROBE_OUT
        try:
            record = read_record(out, self.max_bytes)
        except Exception as e:  # a damaged or forged record: every check fails
            self.log.warning('probe record %s unreadable: %s', out, e)
        verdicts = judge(checks, inputs, record)
        for cell in nb.cells:
            reason = verdicts.get(cell.metadata.get('nbgrader', {}).get('grade_id')) if role(cell) == 'test' else None
            if reason and not any(o.get('output_type') == 'error' for o in cell.outputs):
                cell.outputs.append(nbformat.v4.new_output(
                    'error', ename='GraderCheckFailed', traceback=[f'GraderCheckFailed: {reason}'],
                    evalue=f're-checked by the grader outside your kernel, on the numbers your code computed: {reason}'))
        for name in (PROBE_IN, PROBE_OUT):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
        return nb, resources


# Why the last notebook executed in this process stopped: the name of the exception that stopped it (DeadKernelError,
# CellTimeoutError...), or None. course.grading clears it before each submission and records it with the result.
STOPPED = {'error': None}


class RecordedExecute(Execute):
    """nbgrader's Execute, which also records in STOPPED the exception that stopped a notebook (nbgrader only logs it)."""

    def preprocess(self, nb, resources=None, km=None):
        STOPPED['error'] = None
        try:
            return super().preprocess(nb, resources, km)
        except Exception as e:
            STOPPED['error'] = type(e).__name__
            raise


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
