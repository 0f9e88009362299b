"""Step 3's claims, judged outside the student's kernel: the running mean three ways (a loop, a lower-triangular matrix,
a masked softmax), and the bag-of-words model built on it."""

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from course.claims import claim, expect_causal

WAYS = ('average_loop', 'average_tril', 'average_softmax')
RUNNING = 'average_running'  # the fourth way, O(TC): judged on the hand case and the cases only
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


def probe(nb, inp, run, *, WAYS, RUNNING, CASES, V, REF_SHAPES, N_EMBD):
    """In the student's kernel: the three averages and BagOfWordsModel on the grader's inputs."""
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

    def model(seed, width=16):
        torch.manual_seed(seed)
        return nb.BagOfWordsModel(V, width)

    def api():
        m = model(300)
        logits0, loss0 = m(t('bow_idx'))
        logits, loss = m(t('bow_idx'), t('bow_targets'))
        shapes = [*m.token_embedding_table.weight.shape, *m.lm_head.weight.shape, *m.lm_head.bias.shape]
        return {'logits0': logits0, 'loss0_is_none': loss0 is None, 'logits': logits, 'loss': loss, 'shapes': shapes}
    run('bow_api', api)

    def logits_of(m, *names):
        with torch.no_grad():
            return {name: m(t(name))[0] for name in names}
    run('bow_pert', lambda: logits_of(model(301), 'bow_pert', 'bow_pert2'))
    run('bow_order', lambda: logits_of(model(302), 'bow_order', 'bow_order_first')
        | {'flipped': model(302)(t('bow_order').flip(1))[0]})
    run('bow_run', lambda: logits_of(model(303), 'bow_run'))

    def reference():
        m = model(304)
        return logits_of(m, *[f'bow_ref{i}' for i in range(len(REF_SHAPES))]) | {
            'emb': m.token_embedding_table.weight, 'W': m.lm_head.weight, 'b': m.lm_head.bias}
    run('bow_ref', reference)
    def trained():
        fresh = model(0, N_EMBD)  # bow's initialisation, untrained
        pairs = zip(nb.bow.parameters(), fresh.parameters(), strict=True)
        moved = [float((p.detach() - q.detach()).abs().max()) for p, q in pairs]
        return {'trained': logits_of(nb.bow, 'val_x')['val_x'],  # the notebook's trained model
                'fresh': logits_of(fresh, 'val_x')['val_x'], 'moved': moved}
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
