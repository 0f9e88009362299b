"""The probe's runtime: the part of every step's probe that is the same for all, run in the student's kernel.

course.grader.preprocessors.AddProbe appends to the notebook being graded one cell that runs, in the student's kernel, after
everything else: this file's source, then the parts of the step's probe (the functions of
source/<step>/instructor/checks.py marked @records, each `part(nb, inp, run, **its constants)`, sent as source), then
`main([part, ...], <the notebook's globals>)`, which runs them in the order checks.py defines them. The cell executes
all of it in a namespace of its own: it defines nothing among the notebook's names, and a student's function that calls
a helper of the same name as one of these still gets the student's.

The kernel cannot import the course package (the sandbox does not show it), so this file is sent as code: the standard
library, numpy and torch only. It must not know any step: what differs between steps is in their parts, and the
numbers it needs (the grader's inputs, and the step's constants as JSON) are data in INPUTS.

What it guards, once for every step: each function the probe runs is recorded on its own, so that its error (an
exception, None, a list of tensors of different shapes, a value too large) fails only that function's checks, and a
part that fails outside its functions costs only the part (recorded as '<part>.error'); a value
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


def records(fn):
    """Mark fn(nb, inp, run, *, CONSTANTS) as a part of the step's probe: a named piece of what the probe records in the
    student's kernel (course.grader.claims.probe_parts gathers them, in the order checks.py defines them)."""
    fn.records = True
    return fn


def main(parts, names):
    """Run each part of the step's probe on the grader's inputs, with the notebook's names and the constants the part
    takes (its keyword-only parameters), and save the record, whatever happens."""
    import inspect

    import numpy as np

    record = Record()
    try:
        with np.load(INPUTS) as f:
            inp = Inputs({k: f[k] for k in f.files})
        constants = json.loads(str(inp.pop(CONSTANTS)))
        nb = Notebook(names)
        for part in parts:
            wanted = [p.name for p in inspect.signature(part).parameters.values() if p.kind is p.KEYWORD_ONLY]
            try:
                part(nb, inp, record.run, **{name: constants[name] for name in wanted})
            except BaseException as e:  # noqa: BLE001 -- a failing part costs only what it had left to record
                record.error(part.__name__, e)
    except BaseException as e:  # noqa: BLE001 -- what was recorded before is still judged
        record.error('probe', e)
    finally:
        np.savez(RECORD, **record)


# Helpers a step's probe parts may use for the checks by kind (docs/adding-a-step.md): each is self-contained (it imports
# what it needs inside), so that a step sends it with its probe by naming it in PROBE_HELPERS. Their records are read by
# the comparisons of course.grader.claims (expect_adam_run, expect_linear_work, expect_independent).

def training_run(nb, train, params, batch, max_snapshot_bytes=12 << 20):
    """Run train() (a call of the notebook's training loop) with the notebook's get_batch replaced by one that records
    what the loop draws and how its parameters move, for course.grader.claims.expect_adam_run. params: the model's
    parameters (a list of tensors); batch: (B, T) of the training batches the loop should draw. Returns {'snaps': (S+1, P)
    the flattened parameters, kept at each call of get_batch when they changed since the last kept, and after the run;
    'epoch': (n,) for each of the n calls get_batch('train', B, T), the number of snapshots before it minus one (the step
    it can feed); 'batch.0', 'batch.1': the n batches (x, y); 'losses': what train() returned, as float64; 'floats':
    whether each is a Python float}."""
    import numpy as np
    import torch

    real, kept, epoch, xs, ys = nb.get_batch, [], [], [], []
    size = sum(p.numel() * p.element_size() for p in params)

    def snapshot():
        now = torch.cat([p.detach().reshape(-1).cpu() for p in params]).clone()
        if not kept or not torch.equal(now, kept[-1]):
            if (len(kept) + 1) * size > max_snapshot_bytes:
                raise ValueError(f'more than {len(kept)} parameter changes: the run is longer than the check allows')
            kept.append(now)

    def get_batch(split, B, T):  # the notebook's signature, so that keyword calls work too
        snapshot()
        x, y = real(split, B, T)
        if split == 'train' and (B, T) == tuple(batch):
            epoch.append(len(kept) - 1)
            xs.append(x.detach().cpu().clone())
            ys.append(y.detach().cpu().clone())
        return x, y

    with nb.replaced(get_batch=get_batch):
        losses = list(train())
    snapshot()
    compact = lambda t: t.to(torch.int16) if t.dtype == torch.int64 and t.abs().max() < 2**15 else t  # noqa: E731
    stack = lambda ts: compact(torch.stack(ts)) if ts else np.zeros(0)  # noqa: E731
    return {'snaps': torch.stack(kept), 'epoch': np.array(epoch, dtype=np.int64), 'batch.0': stack(xs), 'batch.1': stack(ys),
            'losses': np.array([float(v) for v in losses], dtype=np.float64),
            'floats': all(type(v) is float for v in losses)}


def work_of(fn):
    """The work fn() does, counted call by call at torch's Python API (a TorchFunctionMode, no clock): for a matrix
    product, 2 multiply-adds per output element and term of the sum (einsum: 2 per combination of its indices); for a
    convolution, 2 per output element and weight of its filter; for a pooling, its window per output element; for a
    view or a slice (indexing, view, transpose, unfold, as_strided...), the elements it shows; for a write into part of
    a tensor (out[:, t] = v, index_put_, scatter_...), what it writes; for anything else, the elements it reads and
    writes. So a convolution or a pooling as wide as the sequence costs T times what its output holds, and a loop that
    reads one position per step costs what it reads. (The dispatcher's FlopCounterMode would import torch._dynamo into
    the kernel: seconds per submission.)"""
    import math

    import torch
    from torch.overrides import TorchFunctionMode

    F, Tn = torch.nn.functional, torch.Tensor
    products = {torch.matmul, Tn.matmul, Tn.__matmul__, Tn.__rmatmul__, torch.mm, Tn.mm, torch.bmm, Tn.bmm, F.linear,
                torch.addmm, torch.baddbmm, torch.addbmm, torch.mv, Tn.mv, torch.inner, torch.dot, torch.tensordot}
    convs = {F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d}
    pools = {F.avg_pool1d, F.avg_pool2d, F.avg_pool3d, F.max_pool1d, F.max_pool2d, F.max_pool3d, F.lp_pool1d,
             F.lp_pool2d, F.max_pool1d_with_indices, F.max_pool2d_with_indices}
    views = {'__getitem__', 'view', 'view_as', 'reshape', 'reshape_as', 'transpose', 'permute', 'expand', 'expand_as',
             'select', 'narrow', 'unfold', 'as_strided', 'squeeze', 'unsqueeze', 'flatten', 'unflatten', 'movedim',
             'diagonal', 'split', 'chunk', 'unbind', 'T', 'mT', 'contiguous', 'detach', 'swapaxes', 'swapdims', 't',
             'index_select', 'gather', 'take', 'take_along_dim', 'embedding', 'masked_select'}
    writes = {'__setitem__', 'index_put', 'index_put_', 'index_copy', 'index_copy_', 'index_add', 'index_add_', 'scatter',
              'scatter_', 'scatter_add', 'scatter_add_', 'masked_scatter', 'masked_scatter_', 'index_fill_', 'masked_fill_'}
    total = [0]

    def tensors(values):
        for v in values:
            if isinstance(v, torch.Tensor):
                yield v
            elif isinstance(v, (list, tuple)):
                yield from tensors(v)
            elif isinstance(v, dict):
                yield from tensors(v.values())

    def numel(values):
        return sum(t.numel() for t in tensors(values))

    def einsum_terms(equation, operands, out):
        """The products an einsum adds up: one per combination of its indices (times what '...' broadcasts)."""
        inputs, _, output = equation.replace(' ', '').partition('->')
        sizes = {}
        for spec, t in zip(inputs.split(','), operands, strict=False):
            letters = spec.replace('...', '')
            sizes.update(zip(letters, t.shape[t.dim() - len(letters):], strict=True))
        shown = math.prod(sizes.get(c, 1) for c in output.replace('...', ''))
        return math.prod(sizes.values()) * max(1, numel([out]) // max(1, shown))

    class Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = getattr(func, '__name__', '')
            given = list(tensors([*args, *kwargs.values()]))
            if func in products and given:
                total[0] += 2 * numel([out]) * (given[0].shape[-1] if given[0].dim() else 1)
            elif func is torch.einsum and isinstance(args[0], str):
                total[0] += 2 * einsum_terms(args[0], given, out)
            elif func in convs and len(given) > 1:
                total[0] += 2 * numel([out]) * given[1][0].numel()
            elif func in pools:
                window = args[1] if len(args) > 1 else kwargs.get('kernel_size', 1)
                total[0] += numel([out]) * math.prod(window if isinstance(window, (list, tuple)) else [window])
            elif name in views:
                total[0] += numel([out])
            elif name in writes:  # what is written into the target, not the whole target
                total[0] += 2 * sum(t.numel() for t in given[1:])
            else:
                total[0] += sum(t.numel() for t in given) + numel([out])
            return out

    with Count():
        fn()
    return total[0]


def independence(first, second):
    """Whether two modules a contract names separately are two: {'distinct': they are not one object, 'shared': how many
    parameters of the second are parameters of the first, 'followed': whether adding 1 to every parameter of the first
    (then putting it back as it was) moved any parameter of the second}, for course.grader.claims.expect_independent."""
    import torch

    mine, theirs = list(first.parameters()), list(second.parameters())
    saved, before = [p.detach().clone() for p in mine], [q.detach().clone() for q in theirs]
    with torch.no_grad():
        for p in mine:
            p.add_(1.0)
        followed = any(not torch.equal(q, b) for q, b in zip(theirs, before, strict=True))
        for p, v in zip(mine, saved, strict=True):  # put back exactly ((w + 1) - 1 is not always w)
            p.copy_(v)
    return {'distinct': first is not second, 'shared': sum(any(q is p for p in mine) for q in theirs),
            'followed': followed}
