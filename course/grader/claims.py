"""What a step's out-of-process checks (source/<step>/instructor/checks.py) are written with, in the grader: the
probe's record as verdicts read it, the @claim that makes a function the verdict of one test cell, judge() that runs
them all, and the comparisons whose message says what was expected, what was recorded and the likely cause.

A step's checks.py holds only its own: make_inputs() (the grader's inputs, drawn here), probe() (run in the student's
kernel by course.grader.probe, the runtime every step shares) and one @claim per test cell:

    @claim
    def add_small_cases(inp, rec):                # named as the test cell's grade_id
        expect_close(rec['add.ab'], inp['a'] + inp['b'], 1e-12, "add(a, b) on the grader's numbers", 'check the operator')

A claim passes by returning, and fails by raising: its message is the reason the student reads. A recorded entry that
is missing, or whose function raised in the kernel, fails the claim that reads it with that reason (Unrecorded).
"""

import numpy as np

from course.grader.probe import Inputs


class Unrecorded(LookupError):
    """An entry the claim needs is not in the record: its function raised (the reason says what) or never ran."""


class Record:
    """The probe's record, {'<function>.<key>': numpy array}, read by the claims: rec[key] (a copy of the array),
    rec.tensor(key), rec.text(key) (a string entry), rec.chars(key) (a string recorded as code points), rec.number(key)
    (a number, strictly). An entry that is not there raises Unrecorded, saying why: the error its function recorded, or
    that it never ran."""

    def __init__(self, entries):
        self.entries = dict(entries)

    def __contains__(self, key):
        return key in self.entries

    def __iter__(self):
        return iter(self.entries)

    def __getitem__(self, key):
        if key not in self.entries:
            name = key.split('.')[0]
            error = self.entries.get(f'{name}.error')
            raise Unrecorded(f'{name}: your code raised {error}' if error is not None else
                             f'{key} was not recorded (did your code run to the end?)')
        return np.array(self.entries[key])

    def tensor(self, key):
        import torch

        return torch.from_numpy(self[key])

    def text(self, key):
        return str(self[key])

    def chars(self, key):
        return ''.join(map(chr, self[key].tolist()))

    def number(self, key):
        """A recorded number (a 0-d entry of ints or floats), as a float; AssertionError if the entry is something else."""
        value = self[key]
        assert value.shape == () and value.dtype.kind in 'fiu', f'{key} is not a number'
        return float(value)


def claim(fn):
    """Make fn(inp, rec) the verdict of the test cell whose grade_id is fn's name."""
    fn.claim = True
    return fn


def claims(checks):
    """The claims of a checks module, in the order it defines them."""
    return [f for f in vars(checks).values() if callable(f) and getattr(f, 'claim', False) is True]


def judge(checks, inputs, record):
    """{test cell grade_id: None if its claim holds on the record, else why not}, for every claim of checks. Runs in the
    grader, never student code: inputs is what make_inputs() drew, record what the probe recorded (course.grader.probe)."""
    inp, rec = Inputs(inputs), Record(record)
    verdicts = {}
    for fn in claims(checks):
        try:
            fn(inp, rec)
            verdicts[fn.__name__] = None
        except Exception as e:  # any failure is a failed verdict, with its reason
            verdicts[fn.__name__] = f'{type(e).__name__}: {e}'
    return verdicts


# Comparisons. Each raises AssertionError with what was expected, what was recorded and, after a semicolon, the likely
# cause (`cause`), or returns what it measured.

def tolerance(dtype, float32=1e-6, float64=1e-12):
    """The largest difference from a reference that a computation in dtype may leave (numpy or torch dtype)."""
    return float64 if 'float64' in str(dtype) else float32


def because(message, cause):
    return f'{message}; {cause}' if cause else message


def shape_of(a):
    return tuple(a.shape)


def expect_shape(observed, shape, what, cause=''):
    """observed (an array or tensor) has shape."""
    assert shape_of(observed) == tuple(shape), because(f'{what}: expected shape {tuple(shape)}, got {shape_of(observed)}',
                                                        cause)


def max_gap(observed, expected):
    """max |observed - expected| (arrays or tensors of one shape; nan if either holds nan)."""
    d = abs(observed - expected)
    return float(d.max()) if np.prod(shape_of(d)) else 0.0


def relative_gap(observed, expected, what='the output', cause=''):
    """max |observed - expected| / max |expected|, once the shapes agree."""
    expect_shape(observed, shape_of(expected), what, cause)
    return float(abs(observed - expected).max() / abs(expected).max())


def expect_close(observed, expected, tol, what, cause=''):
    """|observed - expected| <= tol: two numbers, or two arrays or tensors of one shape, everywhere."""
    if getattr(expected, 'shape', ()):
        expect_shape(observed, shape_of(expected), what, cause)
        gap = max_gap(observed, expected)
        assert gap <= tol, because(f'{what}: expected a difference from the reference of at most {tol:g}, got {gap:.3g}',
                                   cause)
    else:
        gap = abs(float(observed) - float(expected))
        assert gap <= tol, because(f'{what}: expected {float(expected):.6g}, got {float(observed):.6g}', cause)


def expect_equal(observed, expected, what, cause=''):
    """observed == expected: numbers, strings, lists, or arrays and tensors (then of one shape, equal everywhere)."""
    if hasattr(expected, 'shape'):
        expect_shape(observed, shape_of(expected), what, cause)
        ok = bool((observed == expected).all())
    else:
        ok = observed == expected
    assert ok, because(f'{what}: expected {short(expected)}, got {short(observed)}', cause)


def short(value, n=8):
    """value for a message: a long list or array shows its first n elements."""
    if hasattr(value, 'tolist'):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and len(value) > n:
        return f'{list(value[:n])}... ({len(value)} in all)'
    return repr(value)


def same(a, b):
    """a and b (arrays or tensors) of one shape and equal everywhere (nan equals nothing)."""
    return np.array_equal(np.asarray(a), np.asarray(b))


def expect_causal(base, changed, at, what='outputs', cause=''):
    """Outputs (B,T,...) before position `at` identical whether or not the input at `at` changed, and some later one
    different: what a causal map does when only its input at `at` changed."""
    assert same(changed[:, :at], base[:, :at]), because(
        f'expected {what} 0-{at - 1} unchanged when only position {at} of the input changed; they changed', cause)
    assert not np.allclose(np.asarray(changed[:, at:]), np.asarray(base[:, at:])), because(
        f'expected {what} {at}.. to change when position {at} of the input changed; none did', cause)


def expect_causal_at_every_position(outputs, base, row, what='out'):
    """outputs[j]: the output when only input position j changed. Output `row` depends on x_j exactly for j <= row."""
    for j, out in enumerate(outputs):
        changed = not same(out[:, row], base[:, row])
        assert changed == (j <= row), (f'expected {what}_{row} to depend on x_j exactly for j <= {row}; it '
                                       f'{"depends" if changed else "does not depend"} on x_{j}')
