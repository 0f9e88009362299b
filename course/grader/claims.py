"""What a step's out-of-process checks (source/<step>/instructor/checks.py) are written with, in the grader: the
probe's record as verdicts read it, the @claim that makes a function the verdict of one test cell, judge() that runs
them all, and the comparisons whose message says what was expected, what was recorded and the likely cause.

A step's checks.py holds only its own: make_inputs() (the grader's inputs, drawn here), the parts of its probe, each
marked @records and named for what it records (run in the student's kernel by course.grader.probe, the runtime every
step shares, in the order checks.py defines them), and one @claim per test cell:

    @records
    def sums(nb, inp, run):                       # in the student's kernel: nb is the notebook's names
        run('add', lambda: {'ab': nb.add(inp.tensor('a'), inp.tensor('b'))})

    @claim
    def add_small_cases(inp, rec):                # named as the test cell's grade_id
        expect_close(rec['add.ab'], inp['a'] + inp['b'], 1e-12, "add(a, b) on the grader's numbers", 'check the operator')

A claim passes by returning, and fails by raising: its message is the reason the student reads. A recorded entry that
is missing, or whose function raised in the kernel, fails the claim that reads it with that reason (Unrecorded).
"""

import math

import numpy as np

from course.grader.probe import Inputs, records  # noqa: F401 -- records: a step's checks.py marks its probe parts with it


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


def probe_parts(checks):
    """The parts of a checks module's probe (its functions marked @records), in the order it defines them."""
    return [f for f in vars(checks).values() if callable(f) and getattr(f, 'records', False) is True]


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


# The kinds of mistake a test must catch whatever the bank holds (docs/adding-a-step.md, "Checks by kind"): a sampler's
# law, a training loop's contract, the dtypes a contract states, distinct modules, the work a task names, an
# initialisation law. Each statistical check states its false-failure rate (the chance that an honest submission fails
# it); tests/test_kinds.py runs each on honest draws many times.

def chi_square_p(counts, probs, min_expected=5.0):
    """p-value of Pearson's chi-square test that counts (K,) were drawn from the distribution probs (K,), with the
    categories expected fewer than min_expected times pooled into one bin (into the smallest other bin if the pool is
    still short), so that the chi-square approximation holds; 1.0 when a single bin is left (nothing to test)."""
    import torch

    counts, probs = np.asarray(counts, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    expected = counts.sum() * probs / probs.sum()
    big = expected >= min_expected
    obs, exp = list(counts[big]), list(expected[big])
    if (~big).any():
        if expected[~big].sum() >= min_expected or not exp:
            obs.append(counts[~big].sum())
            exp.append(expected[~big].sum())
        else:
            k = int(np.argmin(exp))
            obs[k] += counts[~big].sum()
            exp[k] += expected[~big].sum()
    if len(exp) < 2:
        return 1.0
    obs, exp = np.array(obs), np.array(exp)
    if (exp == 0).any():  # a draw of a category of probability 0
        return 0.0 if obs[exp == 0].sum() else 1.0
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    return torch.special.gammaincc(torch.tensor((len(exp) - 1) / 2, dtype=torch.float64),
                                   torch.tensor(chi2 / 2, dtype=torch.float64)).item()


def expect_law(draws, probs, what, alpha=1e-6, cause=''):
    """The ids `draws` (n,) were drawn independently from the distribution probs (K,): Pearson's chi-square test at level
    alpha (chi_square_p), so that an honest sampler fails with probability about alpha (the chi-square approximation,
    every bin expected at least 5 times). A draw of an id of probability 0 always fails. The message shows the ids whose
    frequencies are furthest from their probabilities."""
    draws, probs = np.asarray(draws).reshape(-1).astype(np.int64), np.asarray(probs, dtype=np.float64)
    K, n = len(probs), draws.size
    assert n and draws.min() >= 0 and draws.max() < K, because(f'{what}: expected ids in 0..{K - 1}, drew '
                                                                f'{draws.min() if n else "none"}..{draws.max() if n else ""}',
                                                                cause)
    counts = np.bincount(draws, minlength=K)
    impossible = np.flatnonzero((probs <= 0) & (counts > 0))
    freq = counts / n
    worst = np.argsort(-np.abs(freq - probs))[:3]
    seen = ', '.join(f'id {k}: probability {probs[k]:.3f}, drawn {freq[k]:.3f} of the time' for k in worst)
    assert not impossible.size, because(f'{what}: drew id {impossible[0]}, of probability 0 ({seen})', cause)
    p = chi_square_p(counts, probs)
    assert p > alpha, because(f'{what}: the {n:,} draws do not follow the distribution (chi-square p = {p:.2g}, allowed '
                              f'down to {alpha:g}): {seen}', cause)


def expect_normal(values, std, what, mean=0.0, alpha=1e-6, cause=''):
    """The numbers `values` look like independent draws of N(mean, std^2): the Kolmogorov-Smirnov distance D between
    their distribution and the normal's is at most eps = sqrt(ln(2/alpha) / 2n). By the Dvoretzky-Kiefer-Wolfowitz
    inequality (Massart's constant), an honest draw of any size n fails with probability at most alpha. A uniform draw
    of the same std is 0.057 away from the normal; the message gives the excess kurtosis too (0 for a normal, -1.2 for a
    uniform)."""
    import torch

    z = torch.as_tensor(np.sort(np.asarray(values, dtype=np.float64).reshape(-1)) - mean) / std
    n = z.numel()
    cdf = torch.special.ndtr(z)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    D = max((i / n - cdf).max().item(), (cdf - (i - 1) / n).max().item())
    eps = math.sqrt(math.log(2 / alpha) / (2 * n))
    kurt = float((z ** 4).mean() / (z ** 2).mean() ** 2 - 3)
    assert D <= eps, because(f'{what}: expected draws of N({mean:g}, {std:g}^2); their distribution is {D:.3f} from the '
                             f"normal's (Kolmogorov-Smirnov, {n:,} draws, allowed {eps:.3f}), excess kurtosis {kurt:.2f} "
                             '(a normal: 0; a uniform: -1.2)', cause)


def expect_dtype(observed, dtype, what, cause=''):
    """observed (a recorded array or a tensor) has the dtype the contract states ('float32', 'int64', ...)."""
    got = str(observed.dtype).replace('torch.', '')
    assert got == str(dtype).replace('torch.', ''), because(f'{what}: expected dtype {dtype}, got {got}', cause)


def expect_linear_work(work, lengths, what, cause=''):
    """work[i]: the work (course.grader.probe.work_of) of one call at length lengths[i] (two lengths, a factor k apart):
    it grows at most like k * 2, not like k^2. Linear work gives about k (less, with a fixed overhead), quadratic k^2."""
    (w0, w1), (t0, t1) = work, lengths
    k = t1 / t0
    ratio = w1 / max(w0, 1)
    assert ratio < 2 * k, because(f'{what}: expected work growing like T (about {k:g} times more at T = {t1} than at '
                                  f'T = {t0}); it grew {ratio:.1f} times ({w0:,.0f} -> {w1:,.0f} operations counted), '
                                  f'like T^{math.log(ratio) / math.log(k):.1f}', cause)


def expect_independent(moved, what, cause=''):
    """moved: course.grader.probe.independence's record of two modules a contract names separately: each is its own
    object, they share no parameter, and moving every parameter of the first leaves the second's unchanged."""
    assert bool(moved['distinct']), because(f'{what}: expected two modules, got one object under both names', cause)
    assert not int(moved['shared']), because(f'{what}: expected no parameter shared between them; {int(moved["shared"])} '
                                             'are the same tensor', cause)
    assert not bool(moved['followed']), because(f'{what}: moving the first one\'s parameters moved the second\'s too',
                                                cause)


def adam_reference(snapshots, batches, loss_of, lr, betas=(0.9, 0.999), eps=1e-8, close=1e-4):
    """A training run replayed step by step with Adam by its formula, in float64. snapshots (S+1, P): the flattened
    parameters before each of S steps and after the last; batches[e]: the candidate batches of step e (those drawn while
    the parameters were snapshots[e]); loss_of(params (P,) float64, batch) -> the scalar loss. Step e starts from the
    loop's own snapshots[e] (so that rounding does not add up over steps) with the moments of the reference steps before
    it, and takes, of its candidates, the one whose step comes closest to snapshots[e+1] (trying the last drawn first, and
    stopping at one within `close`: the batch a loop trains on is drawn last before its step). Returns, per step, the gap
    max |snapshots[e+1] - reference| relative to the reference step's largest entry, the candidate taken and the
    reference loss of that batch at snapshots[e]."""
    import torch

    b1, b2 = betas
    snaps = torch.as_tensor(np.asarray(snapshots, dtype=np.float64))
    m = torch.zeros_like(snaps[0])
    v = torch.zeros_like(snaps[0])
    out = []
    for e, candidates in enumerate(batches):
        best = None
        for c, batch in reversed(list(enumerate(candidates))):
            theta = snaps[e].clone().requires_grad_(True)
            loss = loss_of(theta, batch)
            (g,) = torch.autograd.grad(loss, theta)
            m1, v1 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
            step = lr * (m1 / (1 - b1 ** (e + 1))) / ((v1 / (1 - b2 ** (e + 1))).sqrt() + eps)
            gap = ((snaps[e + 1] - (snaps[e] - step)).abs().max() / step.abs().max().clamp(min=1e-30)).item()
            if best is None or gap < best[0]:
                best = (gap, c, loss.item(), m1, v1)
            if gap <= close:
                break
        gap, c, loss, m, v = best
        out.append((gap, c, loss))
    return out


def expect_adam_run(run, loss_of, lr, what, steps=None, tol=1e-3, loss_tol=1e-4, cause=''):
    """A training loop's contract, against a reference run (adam_reference) on the same parameters and batches: one
    Adam(lr) step per fresh training batch (no learning-rate schedule, no weight decay, no other optimizer), and the
    returned list the training loss of each step's batch, before its step (no validation estimate, no average).
    run: course.grader.probe.training_run's record, {'snaps': (S+1, P), 'epoch': (n,), 'batch.<i>': (n, ...) of the n
    candidate batches, 'losses': (L,)}. tol: the largest gap allowed between a step and the reference step, relative to
    the step (float32 rounding leaves under 1e-5 on Step 2's run; a learning rate 0.2% off leaves more, AdamW's default
    weight decay about 0.06)."""
    snaps, epoch, losses = np.asarray(run['snaps']), np.asarray(run['epoch']), np.asarray(run['losses'])
    S = len(snaps) - 1
    if steps is not None:
        assert S == steps, because(f'{what}: expected {steps} optimizer steps, the parameters changed {S} times', cause)
    parts = sorted(k for k in run if k.startswith('batch.'))
    batches = [[tuple(np.asarray(run[k])[i] for k in parts) for i in np.flatnonzero(epoch == e)] for e in range(S)]
    empty = [e for e, b in enumerate(batches) if not b]
    assert not empty, because(f'{what}: step {empty[0]} took no fresh training batch (none was drawn after the step '
                              'before it)', cause)
    replay = adam_reference(snaps, batches, loss_of, lr)
    gaps = [g for g, _, _ in replay]
    worst = int(np.argmax(gaps))
    assert gaps[worst] <= tol, because(
        f'{what}: expected each step to be Adam(lr={lr:g}) on a training batch drawn for it; step {worst} differs from '
        f'that step by {gaps[worst]:.2g} of its size (allowed {tol:g}; steps 0-{min(4, S - 1)}: '
        f'{", ".join(f"{g:.2g}" for g in gaps[:5])})', cause)
    ref = np.array([loss for _, _, loss in replay])
    assert len(losses) == S, because(f'{what}: expected {S} losses, one per step, got {len(losses)}', cause)
    bad = np.flatnonzero(np.abs(losses - ref) > loss_tol * np.maximum(1, np.abs(ref)))
    assert not bad.size, because(
        f'{what}: expected the list to hold the training loss of each step, on its batch before the step; at step '
        f'{bad[0]} it holds {losses[bad[0]]:.5f}, that loss is {ref[bad[0]]:.5f} ({bad.size} of {S} steps differ)', cause)
