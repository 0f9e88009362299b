"""The probe's runtime: the part of every step's probe that is the same for all, run in the student's kernel.

course.grader.preprocessors.AddProbe appends to the notebook being graded one cell that runs, in the student's kernel, after
everything else: this file's source, then the step's own `probe(nb, inp, run, **constants)` (a function of
source/<step>/instructor/checks.py, sent as source), then `main(probe, <the notebook's globals>)`. The cell executes
all of it in a namespace of its own: it defines nothing among the notebook's names, and a student's function that calls
a helper of the same name as one of these still gets the student's.

The kernel cannot import the course package (the sandbox does not show it), so this file is sent as code: the standard
library, numpy and torch only. It must not know any step: what differs between steps is in their probe(), and the
numbers it needs (the grader's inputs, and the step's constants as JSON) are data in INPUTS.

What it guards, once for every step: each function the probe runs is recorded on its own, so that its error (an
exception, None, a list of tensors of different shapes, a value too large) fails only that function's checks; a value
that is not numbers is never written, so that the record loads without pickle; the record stays under MAX_RECORD_BYTES;
whatever happens, the record is saved.
"""

import contextlib
import json

INPUTS, RECORD = '_probe_in.npz', '_probe_out.npz'  # in the notebook's folder: the grader's inputs, the kernel's record
CONSTANTS = '_probe_constants'  # the entry of INPUTS holding the step's constants, {name: value} as JSON
MAX_ERROR_CHARS = 300  # of an error's repr, recorded as '<function>.error'
MAX_ENTRY_BYTES = 16 << 20  # one recorded value
MAX_RECORD_BYTES = 40 << 20  # all of them: course.grader.preprocessors.JudgeProbe reads a record of at most 50 MB


class Notebook:
    """The notebook's names, looked up when used: `nb.encode` is the notebook's `encode` at that moment, as a name
    inside the notebook would be. A missing name raises NameError, as it would in the notebook."""

    def __init__(self, names):
        object.__setattr__(self, '_names', names)

    def __getattr__(self, name):
        try:
            return self._names[name]
        except KeyError:
            raise NameError(f'name {name!r} is not defined') from None

    def __setattr__(self, name, value):
        self._names[name] = value

    @contextlib.contextmanager
    def replaced(self, **values):
        """The notebook's names set to values for the block (e.g. its data, for a function that reads it as a global),
        then put back as they were (a name the notebook did not have is removed)."""
        saved = {k: self._names[k] for k in values if k in self._names}
        try:
            self._names.update(values)
            yield self
        finally:
            for k in values:
                self._names.pop(k, None)
            self._names.update(saved)


class Inputs(dict):
    """The grader's inputs, {name: numpy array}: inp[name] is the array, inp.tensor(name) the same as a torch tensor,
    inp.text(name) a string stored as an array of code points."""

    def tensor(self, name):
        import torch

        return torch.from_numpy(self[name])

    def text(self, name):
        return ''.join(map(chr, self[name].tolist()))


def numbers(value):
    """value as a numpy array that loads without pickle: a tensor detached and on the CPU, a list or tuple taken
    element by element (tensors in it detached too). TypeError if it is not numbers, booleans or strings (None, an
    object, lists of different lengths), ValueError if it is larger than MAX_ENTRY_BYTES."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
    elif isinstance(value, (list, tuple)):
        value = [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in value]
    try:
        array = np.asarray(value)
    except ValueError as e:  # numpy: "inhomogeneous shape"
        raise TypeError(f'a {type(value).__name__} that is not an array of numbers: {e}') from None
    if array.dtype.hasobject:
        raise TypeError(f'{type(value).__name__}, not numbers')
    if array.nbytes > MAX_ENTRY_BYTES:
        raise ValueError(f'{array.nbytes:,} bytes, more than the {MAX_ENTRY_BYTES:,} a recorded value may hold')
    return array


class Record(dict):
    """What the probe records: {'<function>.<key>': numpy array}, and '<function>.error' for a function that failed."""

    def error(self, name, e):
        """Record e as the error of function name (its first error only: the cause, not a consequence)."""
        import numpy as np

        self.setdefault(f'{name}.error', np.asarray(repr(e)[:MAX_ERROR_CHARS]))

    def run(self, name, fn):
        """Record fn()'s {key: value} as '<name>.<key>'. An error, in fn or in a value, is recorded as '<name>.error'
        and costs only the values it concerns: every other value fn returned is recorded."""
        try:
            values = dict(fn())
        except BaseException as e:  # noqa: BLE001 -- a failing function records its error and nothing else
            return self.error(name, e)
        for key, value in values.items():
            try:
                array = numbers(value)
                if self.nbytes() + array.nbytes > MAX_RECORD_BYTES:
                    raise ValueError(f'the record is full ({MAX_RECORD_BYTES:,} bytes): {key} is not recorded')
                self[f'{name}.{key}'] = array
            except BaseException as e:  # noqa: BLE001 -- an odd value costs its own checks only
                self.error(name, TypeError(f'{key}: {e}') if isinstance(e, TypeError) else e)

    def nbytes(self):
        return sum(a.nbytes for a in self.values())


def main(probe, names):
    """Run the step's probe on the grader's inputs, with the notebook's names, and save the record, whatever happens."""
    import numpy as np

    record = Record()
    try:
        with np.load(INPUTS) as f:
            inp = Inputs({k: f[k] for k in f.files})
        constants = json.loads(str(inp.pop(CONSTANTS)))
        probe(Notebook(names), inp, record.run, **constants)
    except BaseException as e:  # noqa: BLE001 -- what was recorded before is still judged
        record.error('probe', e)
    finally:
        np.savez(RECORD, **record)
