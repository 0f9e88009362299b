"""Step 3's claims, judged outside the student's kernel: the running mean three ways (a loop, a lower-triangular matrix,
a masked softmax), and the bag-of-words model built on it."""

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from course.grader.claims import claim, expect_causal, expect_linear_work, records
from course.grader.probe import work_of

WAYS = ('average_loop', 'average_tril', 'average_softmax')
RUNNING = 'average_running'  # the fourth way, O(TC)
METHOD_T = (24, 96)  # the two lengths at which the probe records each way's torch calls (B = 2, C = 3: T differs from both)
# a matrix product, however written
MATMULS = ('matmul', '__matmul__', '__rmatmul__', 'bmm', 'mm', 'einsum', 'tensordot', 'linear', 'addmm', 'baddbmm')
SOFTMAXES = ('softmax', 'special_softmax', 'exp', 'exp_')  # a softmax, by torch or by hand (exponentiate, then normalise)
CASES = [  # (B, T, C, dtype, tolerance), as in the hidden tests of the three *_by_hand cells
    (3, 7, 5, 'float32', 1e-6), (2, 1, 4, 'float32', 1e-6), (4, 16, 3, 'float32', 1e-6),
    (2, 9, 4, 'float64', 1e-12), (1, 33, 2, 'float64', 1e-12),
]
HAND_X = [[1., 3., 5., 7.], [2., 0., 4., -2.]]
HAND_MEAN = [[1., 2., 3., 4.], [2., 1., 2., 1.]]
REF_SHAPES = [(3, 8), (2, 1), (2, 20)]  # (B, T) of bow_matches_reference
V, N_EMBD, T_VAL, N_VAL = 65, 32, 8, 256  # vocabulary, the trained model's width, validation windows


@lru_cache(maxsize=1)
def val_windows(seed=7):
    """N_VAL windows of T_VAL characters of the validation split (the last 10% of Tiny Shakespeare), and their targets."""
    root = Path(__file__).resolve().parents[3]  # source/step3/instructor/checks.py -> the course root
    text = (root / 'input.txt').read_text(encoding='utf-8')
    stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
    val = np.array([stoi[c] for c in text[int(0.9 * len(text)):]], dtype=np.int64)
    starts = np.random.default_rng(seed).integers(0, len(val) - T_VAL, N_VAL)
    x = np.stack([val[s:s + T_VAL] for s in starts])
    y = np.stack([val[s + 1:s + T_VAL + 1] for s in starts])
    return x, y


def make_inputs(seed=20263):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {'hand': np.array(HAND_X, dtype='float32')[:, :, None],
         'agree': rng.standard_normal((4, 8, 3)).astype('float32'),
         'eye': np.eye(6, dtype='float32')[None],
         'pert': rng.standard_normal((2, 8, 3)).astype('float32'),
         'sdpa_v': rng.standard_normal((2, 6, 4)).astype('float32')}
    x['pert2'] = x['pert'].copy()
    x['pert2'][:, 5] = rng.standard_normal((2, 3)).astype('float32')
    for i, (b, t, c, dtype, _) in enumerate(CASES):
        x[f'case{i}'] = rng.standard_normal((b, t, c)).astype(dtype)
    for T in METHOD_T:
        x[f'method{T}'] = rng.standard_normal((2, T, 3)).astype('float32')
    x['bow_idx'] = rng.integers(0, V, (3, 7))
    x['bow_targets'] = rng.integers(0, V, (3, 7))
    x['bow_pert'] = rng.integers(0, V, (3, 8))
    x['bow_pert2'] = x['bow_pert'].copy()
    x['bow_pert2'][:, 5] = (x['bow_pert'][:, 5] + 1) % V
    x['bow_order'] = np.stack([rng.permutation(V)[:8] for _ in range(3)])
    x['bow_order_first'] = x['bow_order'].copy()
    x['bow_order_first'][:, 0] = (x['bow_order'][:, 0] + 1) % V
    x['bow_run'] = np.repeat(rng.choice(V, (2, 1), replace=False), 8, axis=1)
    for i, (b, t) in enumerate(REF_SHAPES):
        x[f'bow_ref{i}'] = rng.integers(0, V, (b, t))
    x['val_x'], x['val_y'] = val_windows()
    return x


def bag_of_words(nb, V, seed, width=16):
    """A fresh BagOfWordsModel(V, width) of the notebook, from torch.manual_seed(seed) (a probe helper)."""
    import torch

    torch.manual_seed(seed)
    return nb.BagOfWordsModel(V, width)


def logits_of(m, inp, *names):
    """{name: the logits of model m on the grader's input name}, without gradients (a probe helper)."""
    import torch

    with torch.no_grad():
        return {name: m(inp.tensor(name))[0] for name in names}


PROBE_HELPERS = (work_of, bag_of_words, logits_of)  # work_of: the work average_running does, at both METHOD_T


@records
def averages_on_the_cases(nb, inp, run, *, WAYS, RUNNING, CASES):
    """Each average (the three ways, then the running one) on the hand case (and whether it left its input unchanged),
    the grader's CASES, a tensor all ways must agree on, the identity (its weights), and a pair that differs at one
    position; and average_softmax on the values of zero-score attention."""
    import torch

    t = inp.tensor

    def unchanged_call(f, name):
        x = t(name)
        before = x.clone()
        out = f(x)
        return out, bool(torch.equal(x, before))

    for fname in (*WAYS, RUNNING):
        def f(x, fname=fname):
            return getattr(nb, fname)(x)

        def hand(f=f):
            out, same = unchanged_call(f, 'hand')
            return {'out': out, 'unchanged': same}
        run(f'{fname}_hand', hand)
        run(f'{fname}_cases', lambda f=f: {f'case{i}': f(t(f'case{i}')) for i in range(len(CASES))})
        run(f'{fname}_agree', lambda f=f: {'out': f(t('agree'))})
        run(f'{fname}_eye', lambda f=f: {'out': f(t('eye'))})
        run(f'{fname}_pert', lambda f=f: {'base': f(t('pert')), 'changed': f(t('pert2'))})
    run('sdpa', lambda: {'out': nb.average_softmax(t('sdpa_v'))})


@records
def methods_of_the_averages(nb, inp, run, *, WAYS, RUNNING, METHOD_T, MATMULS, SOFTMAXES):
    """The torch calls each average makes at both lengths METHOD_T (how many, the elements they produce, and whether
    one is a (T,T) tensor, a product or a softmax of one, a prefix sum, or attention), and the work average_running
    does (work_of)."""
    import math

    import torch
    from torch.overrides import TorchFunctionMode

    t = inp.tensor

    class Calls(TorchFunctionMode):
        """Every torch function and tensor method called inside the block: (name, argument shapes, result shape)."""

        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            shapes = [tuple(a.shape) for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor)]
            self.calls.append((str(getattr(func, '__name__', func)), shapes,
                               tuple(out.shape) if isinstance(out, torch.Tensor) else None))
            return out

    def method(f, T):
        x = t(f'method{T}')
        with Calls() as rec:
            f(x)
        square = lambda shape: len(shape) >= 2 and shape[-2:] == (T, T)  # noqa: E731
        calls = rec.calls
        return {'calls': len(calls), 'work': sum(math.prod(out) for _, _, out in calls if out is not None),
                'TxT': any(sum(d == T for d in s) >= 2 for _, shapes, out in calls for s in [*shapes, out or ()]),
                'matmul_TxT': any(name in MATMULS and any(map(square, shapes)) for name, shapes, _ in calls),
                'softmax_TxT': any(name in SOFTMAXES and any(map(square, shapes)) for name, shapes, _ in calls),
                'prefix_sum': any(name.startswith('cum') for name, _, _ in calls),
                'attention': any(name == 'scaled_dot_product_attention' for name, _, _ in calls)}

    for fname in (*WAYS, RUNNING):
        run(f'{fname}_method', lambda fname=fname: {f'{key}{T}': int(value) for T in METHOD_T
                                                    for key, value in method(getattr(nb, fname), T).items()})

    run('work', lambda: {f'T{T}': work_of(lambda T=T: getattr(nb, RUNNING)(t(f'method{T}'))) for T in METHOD_T})


@records
def bag_of_words_model(nb, inp, run, *, V, REF_SHAPES):
    """BagOfWordsModel, each from its own seed: its weights' shapes, logits and loss; its logits on a pair that differs
    at one position, on a window, reversed and with its first id changed, and on a run of one character; and its
    logits and weights on the reference cases."""
    def api():
        m = bag_of_words(nb, V, 300)
        logits0, loss0 = m(inp.tensor('bow_idx'))
        logits, loss = m(inp.tensor('bow_idx'), inp.tensor('bow_targets'))
        shapes = [*m.token_embedding_table.weight.shape, *m.lm_head.weight.shape, *m.lm_head.bias.shape]
        return {'logits0': logits0, 'loss0_is_none': loss0 is None, 'logits': logits, 'loss': loss, 'shapes': shapes}
    run('bow_api', api)

    run('bow_pert', lambda: logits_of(bag_of_words(nb, V, 301), inp, 'bow_pert', 'bow_pert2'))
    run('bow_order', lambda: logits_of(bag_of_words(nb, V, 302), inp, 'bow_order', 'bow_order_first')
        | {'flipped': bag_of_words(nb, V, 302)(inp.tensor('bow_order').flip(1))[0]})
    run('bow_run', lambda: logits_of(bag_of_words(nb, V, 303), inp, 'bow_run'))

    def reference():
        m = bag_of_words(nb, V, 304)
        return logits_of(m, inp, *[f'bow_ref{i}' for i in range(len(REF_SHAPES))]) | {
            'emb': m.token_embedding_table.weight, 'W': m.lm_head.weight, 'b': m.lm_head.bias}
    run('bow_ref', reference)


@records
def trained_bag_of_words(nb, inp, run, *, V, N_EMBD):
    """The notebook's trained model bow against a fresh one of its initialisation: their logits on the validation
    windows, and how far training moved each parameter."""
    def trained():
        fresh = bag_of_words(nb, V, 0, N_EMBD)  # bow's initialisation, untrained
        pairs = zip(nb.bow.parameters(), fresh.parameters(), strict=True)
        moved = [float((p.detach() - q.detach()).abs().max()) for p, q in pairs]
        return {'trained': logits_of(nb.bow, inp, 'val_x')['val_x'],  # the notebook's trained model
                'fresh': logits_of(fresh, inp, 'val_x')['val_x'], 'moved': moved}
    run('bow_trained', trained)


def running_mean(v):
    return v.cumsum(dim=1) / torch.arange(1, v.shape[1] + 1, dtype=v.dtype)[:, None]


def by_hand(inp, rec, fname):
    out = rec.tensor(f'{fname}_hand.out')
    want = torch.tensor(HAND_MEAN)[:, :, None]
    assert out.shape == want.shape, f'shape {tuple(out.shape)} on the hand case, expected {tuple(want.shape)}'
    assert bool(rec[f'{fname}_hand.unchanged']), f'{fname} modified its input'
    assert torch.allclose(out.float(), want, atol=1e-6), f'{fname} on the hand case: {out[..., 0].tolist()}, expected {HAND_MEAN}'
    for i, (*_, tol) in enumerate(CASES):
        got, ref = rec.tensor(f'{fname}_cases.case{i}'), running_mean(inp.tensor(f'case{i}'))
        assert got.dtype == ref.dtype and got.shape == ref.shape, (
            f'case {i}: {tuple(got.shape)} {got.dtype}, expected {tuple(ref.shape)} {ref.dtype} (the dtype of x)')
        gap = (got - ref).abs().max().item()
        assert gap < tol, f'case {i} ({ref.dtype}): max |difference| from the running mean {gap:.3g} (allowed {tol:g})'


@claim
def average_loop_by_hand(inp, rec):
    by_hand(inp, rec, 'average_loop')


@claim
def average_tril_by_hand(inp, rec):
    by_hand(inp, rec, 'average_tril')


@claim
def average_softmax_by_hand(inp, rec):
    by_hand(inp, rec, 'average_softmax')


@claim
def average_running_by_hand(inp, rec):
    by_hand(inp, rec, RUNNING)


def method(rec, fname, key, T=METHOD_T[0]):
    return rec.number(f'{fname}_method.{key}{T}')


def forbidden(rec, fname, keys, T=METHOD_T[0]):
    what = {'prefix_sum': 'a prefix sum (cumsum)', 'matmul_TxT': 'a product with a (T,T) matrix',
            'softmax_TxT': 'a softmax of a (T,T) matrix', 'attention': 'F.scaled_dot_product_attention',
            'TxT': 'a tensor with two axes of length T'}
    used = [what[key] for key in keys if method(rec, fname, key, T)]
    assert not used, f'{fname} used {", ".join(used)}, which its method excludes'


@claim
def average_loop_loops_over_t(inp, rec):
    small, big = (method(rec, 'average_loop', 'calls', T) for T in METHOD_T)
    assert big >= small + METHOD_T[1] - METHOD_T[0], (
        f'average_loop made {small:.0f} torch calls at T = {METHOD_T[0]} and {big:.0f} at T = {METHOD_T[1]}: '
        f'expected at least {METHOD_T[1] - METHOD_T[0]} more, one step per position; it does not loop over t')
    forbidden(rec, 'average_loop', ('prefix_sum', 'matmul_TxT', 'attention'), METHOD_T[1])


@claim
def average_tril_is_a_matrix_product(inp, rec):
    assert method(rec, 'average_tril', 'matmul_TxT'), 'average_tril made no matrix product with a (T,T) tensor'
    forbidden(rec, 'average_tril', ('prefix_sum', 'softmax_TxT', 'attention'))


@claim
def average_softmax_is_a_masked_softmax(inp, rec):
    assert method(rec, 'average_softmax', 'softmax_TxT'), 'average_softmax took no softmax of a (T,T) tensor'
    assert method(rec, 'average_softmax', 'matmul_TxT'), 'average_softmax made no matrix product with the (T,T) weights'
    forbidden(rec, 'average_softmax', ('prefix_sum', 'attention'))


@claim
def average_running_builds_no_square(inp, rec):
    forbidden(rec, RUNNING, ('TxT', 'attention'), METHOD_T[1])
    small, big = (method(rec, RUNNING, 'work', T) for T in METHOD_T)
    ratio = big / max(small, 1)
    assert ratio < 8, (f'average_running produced {ratio:.1f} times as many elements at T = {METHOD_T[1]} as at '
                       f'T = {METHOD_T[0]} (allowed 8; O(TC) work gives about {METHOD_T[1] // METHOD_T[0]}): '
                       'its work grows like T^2')
    expect_linear_work([rec.number(f'work.T{T}') for T in METHOD_T], METHOD_T, 'average_running, operations counted',
                       'each output needs one addition to the sum before it: no window as wide as the sequence '
                       '(a convolution or a pooling over T positions), no sum over the whole prefix at each t')


@claim
def three_ways_agree(inp, rec):
    loop = rec.tensor('average_loop_agree.out')
    for fname in WAYS[1:]:
        gap = (rec.tensor(f'{fname}_agree.out') - loop).abs().max().item()
        assert gap < 1e-6, f'{fname} and average_loop differ by {gap:.3g} (allowed 1e-6)'


@claim
def weights_rows_sum_to_one(inp, rec):
    for fname in WAYS:
        W = rec.tensor(f'{fname}_eye.out')[0]
        err = (W.sum(-1) - 1).abs().max().item()
        assert (W >= 0).all() and err < 1e-6, f'{fname}: min W = {W.min().item():.3g}, max |row sum - 1| = {err:.3g} (max 1e-6)'


@claim
def averages_are_causal(inp, rec):
    for fname in WAYS:
        expect_causal(rec.tensor(f'{fname}_pert.base'), rec.tensor(f'{fname}_pert.changed'), 5, f'the outputs of {fname}')


@claim
def zero_query_attention_is_the_running_mean(inp, rec):
    v = inp.tensor('sdpa_v')
    zeros = torch.zeros_like(v)
    ref = F.scaled_dot_product_attention(zeros, zeros, v, is_causal=True)
    gap = (rec.tensor('sdpa.out') - ref).abs().max().item()
    assert gap < 1e-6, f'average_softmax differs from zero-score attention by {gap:.3g} (allowed 1e-6)'


@claim
def bow_shapes_and_loss(inp, rec):
    shapes = rec['bow_api.shapes'].tolist()
    assert shapes == [V, 16, V, 16, V], (f'BagOfWordsModel(V, 16) holds weights of shapes {shapes} (embedding, head, bias), '
                                          f'not [{V}, 16], [{V}, 16], [{V}]: n_embd is not used')
    logits, targets = rec.tensor('bow_api.logits'), inp.tensor('bow_targets')
    assert tuple(rec.tensor('bow_api.logits0').shape) == (3, 7, V) and tuple(logits.shape) == (3, 7, V), 'logits shape'
    assert bool(rec['bow_api.loss0_is_none']), 'a loss without targets'
    loss = rec.tensor('bow_api.loss')
    assert loss.shape == (), f'loss shape {tuple(loss.shape)}'
    ref = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    assert abs(loss.item() - ref.item()) < 1e-5, f'loss {loss.item():.4f}, cross-entropy {ref.item():.4f}'


@claim
def bow_is_causal(inp, rec):
    expect_causal(rec.tensor('bow_pert.bow_pert'), rec.tensor('bow_pert.bow_pert2'), 5, 'logits')


@claim
def bow_ignores_order(inp, rec):
    last = rec.tensor('bow_order.bow_order')[:, -1]
    gap = (rec.tensor('bow_order.flipped')[:, -1] - last).abs().max().item()
    assert gap < 1e-5, f'reversing the window moves the last prediction by {gap:.3g} (allowed 1e-5)'
    moved = (rec.tensor('bow_order.bow_order_first')[:, -1] - last).abs().max().item()
    assert moved > 1e-4, f'changing x_0 moves the last prediction by {moved:.3g} (expected > 1e-4)'


@claim
def bow_averages_not_sums(inp, rec):
    logits = rec.tensor('bow_run.bow_run')
    gap = (logits - logits[:, :1]).abs().max().item()
    assert gap < 1e-5, f'a run of one character gets logits that differ by {gap:.3g} from position 0 (allowed 1e-5)'


@claim
def bow_matches_reference(inp, rec):
    emb, W, b = rec.tensor('bow_ref.emb'), rec.tensor('bow_ref.W'), rec.tensor('bow_ref.b')
    for i in range(len(REF_SHAPES)):
        ref = running_mean(emb[inp.tensor(f'bow_ref{i}')]) @ W.T + b
        got = rec.tensor(f'bow_ref.bow_ref{i}')
        assert got.shape == ref.shape, f'reference case {i}: logits {tuple(got.shape)}, expected {tuple(ref.shape)}'
        gap = (got - ref).abs().max().item()
        assert gap < 1e-5, f'reference case {i}: max |difference| {gap:.3g} from lm_head(causal mean) (allowed 1e-5)'


@claim
def bow_learns(inp, rec):
    y = inp.tensor('val_y').reshape(-1)
    after = F.cross_entropy(rec.tensor('bow_trained.trained').reshape(len(y), -1), y).item()
    before = F.cross_entropy(rec.tensor('bow_trained.fresh').reshape(len(y), -1), y).item()
    moved = rec['bow_trained.moved'].tolist()
    assert len(moved) >= 3 and min(moved) > 0, (f'training left a parameter at its initial value (largest change of each: '
                                                f'{[f"{m:.3g}" for m in moved]}): the loss does not reach it')
    assert after < 3.1 and before - after > 1, (
        f'validation loss {before:.3f} -> {after:.3f}: expected below 3.1, and over 1 nat below the initial loss')
