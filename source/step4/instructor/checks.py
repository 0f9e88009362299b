"""Step 4's claims, judged outside the student's kernel: one causal self-attention head, the statistics of its
scores, the two maskings, permutations of the tokens, a Gaussian kernel and the rank of the scores. Each claim checks its
test cell (visible and hidden parts) on the grader's own inputs, and never more: a submission that passes a test cell
honestly passes its claim. Its message says what was expected, what was recorded, and the likely cause."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from course.grader.claims import claim, expect_causal, expect_causal_at_every_position, expect_dtype, records, tolerance

D, HS, T, B = 32, 16, 8, 4
HEAD_CASES = [  # (B, T, block_size, d, head_size, causal, dtype, input scale, tolerance), as in head_matches_sdpa_reference
    (B, T, T, D, HS, True, 'float32', 1.0, 1e-5),
    (2, 5, 12, 24, 6, True, 'float32', 1.0, 1e-5),
    (3, 12, 12, 10, 20, True, 'float32', 1.0, 1e-5),
    (2, 1, 4, 8, 3, True, 'float32', 1.0, 1e-5),
    (2, 7, 9, 16, 4, False, 'float32', 1.0, 1e-5),
    (2, 6, 6, 16, 8, True, 'float64', 1.0, 1e-12),
    (2, 8, 8, 16, 8, True, 'float32', 30.0, 1e-5),
]
HEAD_HINTS = ['the visible case', 'T < block_size: slice the mask to tril[:T, :T]',
              'head_size > d: scale by sqrt(head_size), not sqrt(d)', 'a single position', 'causal=False: no mask at all',
              'float64: compute in the dtype of x, no dtype=torch.float32 anywhere',
              'large scores: mask with -inf before F.softmax, no hand-written exp']
# (d, head_size, T, causal, input rank or None, rows of W_Q or W_K set to 0: ((map, first, stop), ...), expected rank S),
# as in the score_rank test cells
RANK_GENERIC = [(64, 8, 32, False, None, (), 8), (64, 16, 6, True, None, (), 6), (20, 3, 16, True, None, (), 3),
                (64, 16, 6, False, None, (), 6), (12, 5, 9, True, None, (), 5),
                (6, 16, 32, False, None, (), 6)]  # d < d_k: rank S <= min(d, d_k, T)
RANK_DEFICIENT = [(64, 8, 32, False, 3, (), 3), (64, 8, 32, False, None, (('key', 2, 8),), 2),
                  (64, 8, 32, True, 4, (('query', 5, 8),), 4),
                  (64, 8, 32, True, None, (('query', 2, 8),), 2),  # W_Q alone of rank 2: rank k is 8
                  (64, 8, 32, False, None, (('query', 0, 4), ('key', 4, 8)), 0)]  # q and k orthogonal: S = 0
STATS_DK = (16, 64, 256)
STATS_N = 200  # draws per d_k on the grader's side: the verdict compares with a reference on the same draws
MASK_INPUTS = ['s', 's2d', 's4d', 's64']  # what both Exercise functions are fed; 's_big' only causal_softmax
KERNEL_CASES = [(4, 2.0), (30, 1.0), (30, 3.0), (7, 0.5), (1, 1.0), (12, 1e3)]  # (T, s) besides s = inf
CAUSAL_PERM = [3, 0, 6, 1, 5, 2, 4, 7]  # keeps the last token in place
STATS64 = (50, 8, 16, 1e-25)  # (N, T, d_k, scale) of score_stats on float64 draws: their scores, about 1e-50, are 0 in float32


def make_inputs(seed=20260):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {f'head{i}.x': (scale * rng.standard_normal((b, t, d))).astype(dtype)
         for i, (b, t, _, d, _, _, dtype, scale, _) in enumerate(HEAD_CASES)}
    x0 = x['head0.x']
    for j in range(T):  # position j replaced: causality by perturbation, and its per-position form
        x[f'pert{j}.x'] = x0.copy()
        x[f'pert{j}.x'][:, j] = rng.standard_normal((B, D)).astype('float32')
    x['perm'] = rng.permutation(T)
    x['cycle'] = np.roll(np.arange(T), -1)  # (1, 2, ..., 7, 0): its inverse differs from it
    x['causal_perm'] = np.array(CAUSAL_PERM)
    x['pos'] = rng.standard_normal((T, D)).astype('float32')
    x['tok'] = rng.standard_normal((65, D)).astype('float32')
    x['idx'] = rng.integers(0, 65, (1, T))
    c = 2 * math.log(3)
    r = math.sqrt(c)  # the hand-worked case of head_matches_sdpa_reference: rows 0, r e_1, r e_2 with q = k = v = x
    x['hand.x'] = np.array([[[0, 0, 0, 0], [r, 0, 0, 0], [0, r, 0, 0]]], dtype='float32')
    x['stats.small.q'] = np.array([[[1, 0, 0, 0], [1, 0, 0, 0]]], dtype='float32')  # the hand-worked case of the test cell
    x['stats.small.k'] = np.array([[[c, 0, 0, 0], [0, 1, 0, 0]]], dtype='float32')
    x['stats.t3.q'] = (1.5 * rng.standard_normal((4, 3, 4))).astype('float32')  # T = 3: the norms of J differ
    x['stats.t3.k'] = rng.standard_normal((4, 3, 4)).astype('float32')
    for dk in STATS_DK:
        x[f'stats.q{dk}'] = rng.standard_normal((STATS_N, 8, dk)).astype('float32')
        x[f'stats.k{dk}'] = rng.standard_normal((STATS_N, 8, dk)).astype('float32')
    x['s'] = rng.standard_normal((2, 6, 6)).astype('float32')
    x['s2d'] = rng.standard_normal((5, 5)).astype('float32')
    x['s4d'] = rng.standard_normal((2, 3, 5, 5)).astype('float32')
    x['s64'] = rng.standard_normal((2, 4, 4))  # float64
    x['s_big'] = (100 * rng.standard_normal((2, 6, 6))).astype('float32')
    x['s_hand3'] = np.array([[0, 5, 5], [math.log(3), 0, 9], [0, 0, 0]], dtype='float32')
    x['s_hand2'] = np.array([[0, math.log(3)], [0, 0]], dtype='float32')
    for i, (d, _, t, _, r, _, _) in enumerate(RANK_GENERIC + RANK_DEFICIENT):
        x[f'rank{i}.x'] = (rng.standard_normal((1, t, r)) @ rng.standard_normal((r, d)) if r else
                           rng.standard_normal((1, t, d))).astype('float32')
    more = np.random.default_rng(seed + 1)  # a generator of its own: every input above stays as it was
    x['stats64.q'], x['stats64.k'] = (STATS64[3] * more.standard_normal(STATS64[:3]) for _ in range(2))  # float64
    return x


@records
def head_on_the_cases(nb, inp, run, *, HEAD_CASES):
    """Head on each of HEAD_CASES (its seed 100 + i): q, k, v, the output and the stashed weights A, recorded as
    'head<i>'; and the case worked by hand (W_Q = W_K = W_V = I), as 'hand'."""
    import torch

    t = inp.tensor

    def head_case(i):
        b, tt, t_max, d, hs, causal, dtype, scale, tol = HEAD_CASES[i]
        torch.manual_seed(100 + i)
        h = nb.Head(d, hs, t_max, causal=causal).to(getattr(torch, dtype))
        x = t(f'head{i}.x')
        out = h(x)
        A = h.A
        return {'q': h.query(x), 'k': h.key(x), 'v': h.value(x), 'out': out, 'A': A,
                'A_requires_grad': bool(A.requires_grad or A.grad_fn is not None)}
    for i in range(len(HEAD_CASES)):
        run(f'head{i}', lambda i=i: head_case(i))

    def hand():
        h = nb.Head(4, 4, 3)
        with torch.no_grad():
            for name in ('query', 'key', 'value'):
                getattr(h, name).weight.copy_(torch.eye(4))
            return {'out': h(t('hand.x'))}
    run('hand', hand)


@records
def head_mask_and_maps(nb, inp, run):
    """What Head(16, 4, 10) holds: the mask as a buffer tril (lower-triangular, saved, moved by .to()) and no (10, 10)
    parameter; key, query, value bias-free nn.Linear(16, 4); its number of parameters. Recorded as 'structure'."""
    import numpy as np
    import torch

    def structure():
        h = nb.Head(16, 4, 10)
        params = {n: tuple(p.shape) for n, p in h.named_parameters()}
        maps = [getattr(h, n, None) for n in ('key', 'query', 'value')]
        tril = dict(h.named_buffers()).get('tril')
        out = {'tril_buffer': tril is not None and tuple(tril.shape) == (10, 10),
               'tril_lower': tril is not None and tuple(tril.shape) == (10, 10)
                             and bool((tril.bool() == torch.ones(10, 10).tril().bool()).all()),
               'tril_saved': 'tril' in h.state_dict(), 'tril_param': 'tril' in params,
               'square_params': sum(s == (10, 10) for s in params.values()),
               'maps_ok': all(isinstance(m, torch.nn.Linear) and m.bias is None and tuple(m.weight.shape) == (4, 16)
                              for m in maps),
               'n_params': sum(int(np.prod(s)) for s in params.values())}
        h.to('meta')
        out['tril_moved'] = tril is not None and h.get_buffer('tril').device.type == 'meta'
        return out
    run('structure', structure)


@records
def head_causality_by_perturbation(nb, inp, run, *, D, HS, T):
    """A causal Head (seed 100) on the first case's x and on each copy with position j replaced: 'pert.base' and
    'pert.out<j>', for causality by perturbation and at every position."""
    import torch

    t = inp.tensor

    def perturbed():
        torch.manual_seed(100)
        h = nb.Head(D, HS, T)
        return {f'out{j}': h(t(f'pert{j}.x')) for j in range(T)} | {'base': h(t('head0.x'))}
    run('pert', perturbed)


@records
def score_stats_on_the_cases(nb, inp, run, *, STATS_DK):
    """score_stats on the hand-worked case, on T = 3, on float64 draws of scale 1e-25 and on the grader's draws for each
    d_k of STATS_DK: its keys, the types of its values and the values, as 'stats<case>'."""
    t = inp.tensor

    def stats(case):
        q, k = (t(f'stats.small.{m}') if case == 'small' else t(f'stats.t3.{m}') if case == 't3'
                else t(f'stats64.{m}') if case == 'f64' else t(f'stats.{m}{case}') for m in 'qk')
        s = nb.score_stats(q, k)
        return {'keys': ','.join(sorted(s)), 'types': ','.join(type(v).__name__ for _, v in sorted(s.items())),
                **{key: float(v) for key, v in s.items()}}
    for case in ['small', 't3', 'f64'] + [f'{dk}' for dk in STATS_DK]:
        run(f'stats{case}', lambda case=case: stats(case))


@records
def the_two_maskings(nb, inp, run, *, MASK_INPUTS):
    """causal_softmax ('right') and softmax_then_zero ('wrong') on the grader's score matrices (2-D to 4-D, float64,
    large scores, a hand-worked case): each output and its dtype."""
    t = inp.tensor

    def masks(fn, names):
        out = {}
        for name in names:
            y = fn(t(name))
            out[name] = y
            out[name + '.dtype'] = str(y.dtype)
        return out
    run('right', lambda: masks(nb.causal_softmax, MASK_INPUTS + ['s_big', 's_hand3']))
    run('wrong', lambda: masks(nb.softmax_then_zero, MASK_INPUTS + ['s_hand2']))


@records
def head_without_the_mask_on_permuted_rows(nb, inp, run, *, D, HS, T):
    """A Head with causal=False (seed 101) on x and on x[:, perm], without and with positional vectors added to x:
    'equi.x', 'equi.x_perm', 'equi.xp', 'equi.xp_perm'."""
    import torch

    t = inp.tensor

    def equivariance():
        torch.manual_seed(101)
        h = nb.Head(D, HS, T, causal=False)
        x, perm, pos = t('head0.x'), t('perm'), t('pos')
        return {'x': h(x), 'x_perm': h(x[:, perm]), 'xp': h(x + pos), 'xp_perm': h((x + pos)[:, perm])}
    run('equi', equivariance)


@records
def token_perm_gap_on_the_cases(nb, inp, run, *, D, HS, T):
    """token_perm_gap, and the head's outputs it compares, for a head without the mask (seed 102: without and with
    positions, a cycle, the identity), as 'tokens'; and for a causal head (seed 103) and a permutation that keeps the
    last token in place, as 'causal'."""
    import torch

    t = inp.tensor

    def tokens():
        torch.manual_seed(102)
        h = nb.Head(D, HS, T, causal=False)
        tok = torch.nn.Embedding.from_pretrained(t('tok'))
        pos = torch.nn.Embedding.from_pretrained(t('pos'))
        idx, perm, cycle = t('idx'), t('perm'), t('cycle')
        gap = nb.token_perm_gap
        with torch.no_grad():
            outs = {'a_nopos': h(tok(idx[:, perm])), 'b_nopos': h(tok(idx)),
                    'a_pos': h(tok(idx[:, perm]) + t('pos')[None]), 'b_pos': h(tok(idx) + t('pos')[None])}
        return outs | {'gap_nopos': gap(h, tok, idx, perm), 'gap_pos': gap(h, tok, idx, perm, pos),
                       'gap_cycle': gap(h, tok, idx, cycle), 'gap_ident': gap(h, tok, idx, torch.arange(T), pos),
                       'type_nopos': type(gap(h, tok, idx, perm)).__name__}
    run('tokens', tokens)

    def causal_tokens():
        torch.manual_seed(103)
        h = nb.Head(D, HS, T)
        tok = torch.nn.Embedding.from_pretrained(t('tok'))
        idx, perm = t('idx'), t('causal_perm')
        with torch.no_grad():
            a, b = h(tok(idx[:, perm])), h(tok(idx))
        return {'a': a, 'b': b, 'gap': nb.token_perm_gap(h, tok, idx, perm)}
    run('causal', causal_tokens)


@records
def gaussian_scores_on_the_cases(nb, inp, run, *, KERNEL_CASES):
    """gaussian_scores(10, inf) and gaussian_scores(T, s) for each of KERNEL_CASES, as 'kernel'."""
    run('kernel', lambda: {'inf': nb.gaussian_scores(10, float('inf')),
                           **{f'{n}_{s}': nb.gaussian_scores(n, s) for n, s in KERNEL_CASES}})


@records
def score_rank_on_the_cases(nb, inp, run, *, RANK_GENERIC, RANK_DEFICIENT):
    """score_rank of a Head (seed 104 + i, rows of W_Q or W_K set to 0 as the case says) on each case's input, generic
    then rank-deficient: the rank and its type, as 'rank<i>'."""
    import torch

    t = inp.tensor

    def rank(i, d, hs, tt, causal, r, low, expected):
        torch.manual_seed(104 + i)
        h = nb.Head(d, hs, max(tt, 16), causal=causal)
        with torch.no_grad():
            for name, first, stop in low:
                getattr(h, name).weight[first:stop] = 0
        value = nb.score_rank(h, t(f'rank{i}.x'))
        return {'r': int(value), 'type': type(value).__name__}
    for i, case in enumerate(RANK_GENERIC + RANK_DEFICIENT):
        run(f'rank{i}', lambda i=i, case=case: rank(i, *case))


def reference_stats(q, k):
    """score_stats by its definition, in float64, with the Jacobian's Frobenius norm expanded by hand."""
    q, k = q.double(), k.double()
    raw = torch.einsum('ntd,nsd->nts', q, k)  # (N,T,T)
    out = {}
    for name, s in (('raw', raw), ('scaled', raw / q.shape[-1] ** 0.5)):
        out[f'{name}_std'] = (((s - s.mean()) ** 2).sum() / (s.numel() - 1)).sqrt().item()
        p = torch.softmax(s, -1)  # (N,T,T)
        p2, p3 = (p**2).sum(-1), (p**3).sum(-1)
        out[f'max_wt_{name}'] = p.amax(-1).mean().item()
        out[f'jac_{name}'] = (p2 - 2 * p3 + p2**2).clamp(min=0).sqrt().mean().item()
    return out


STATS_HINTS = {'raw_std': "the pooled sample std (torch's default) of all N*T*T raw scores, not per row, not the variance",
               'scaled_std': 'the same, of the scores divided by sqrt(d_k)',
               'max_wt_raw': 'softmax over the last axis, no mask, the max of each row, then the mean over rows',
               'max_wt_scaled': 'the same, on the scaled scores',
               'jac_raw': 'the Frobenius norm of diag(p) - p p^T for each row, then the mean over rows',
               'jac_scaled': 'the same, on the scaled scores'}


def sdpa(rec, i):
    q, k, v = (rec.tensor(f'head{i}.{m}') for m in 'qkv')  # the student's own maps, applied to the grader's input
    return F.scaled_dot_product_attention(q, k, v, is_causal=HEAD_CASES[i][5])


@claim
def head_matches_sdpa_reference(inp, rec):
    x = inp.tensor('hand.x')[0]  # the hand-worked case: weights (1/4, 3/4) in row 1, (1/5, 1/5, 3/5) in row 2
    want = torch.stack([torch.zeros(4), 0.75 * x[1], (x[1] + 3 * x[2]) / 5])[None]
    got = rec.tensor('hand.out')
    assert tuple(got.shape) == (1, 3, 4) and (got - want).abs().max() < 1e-5, (
        'the hand-worked case (W_Q = W_K = W_V = I) is wrong; mask j > i with -inf, divide by sqrt(head_size), return A @ v')
    for i, case in enumerate(HEAD_CASES):
        out, ref = rec.tensor(f'head{i}.out'), sdpa(rec, i)
        assert out.shape == ref.shape, (f'case {i} ({HEAD_HINTS[i]}): expected an output of shape {tuple(ref.shape)}, '
                                        f'got {tuple(out.shape)}; return A @ v')
        assert out.dtype == ref.dtype, (f'case {i} ({HEAD_HINTS[i]}): expected dtype {ref.dtype}, got {out.dtype}; '
                                        'compute in the dtype of x')
        gap = ((out - ref).abs().max() / ref.abs().max()).item()
        assert gap < case[-1], (f'case {i} ({HEAD_HINTS[i]}): expected a relative difference from '
                                f'scaled_dot_product_attention < {case[-1]:g}, got {gap:.3g}')


def A0(rec):
    return rec.tensor('head0.A')


@claim
def rows_in_simplex(inp, rec):
    A = A0(rec)
    err = (A.sum(-1) - 1).abs().max().item()
    assert (A >= 0).all() and err < 1e-6, (f'expected rows of A >= 0 summing to 1, got min {A.min():.3g} and '
                                           f'max |rowsum - 1| = {err:.3g}; mask before a softmax over the last axis')


@claim
def output_is_convex_combination(inp, rec):
    v, out = rec.tensor('head0.v').double(), rec.tensor('head0.out').double()
    assert out.shape == v.shape, f'expected an output of shape {tuple(v.shape)}, got {tuple(out.shape)}; return A @ v'
    assert out.isfinite().all(), 'expected finite outputs, got nan or inf; mask with -inf before F.softmax'
    worst = 0.0
    for b in range(v.shape[0]):
        for i in range(v.shape[1]):
            M = torch.cat([v[b, :i + 1].T, torch.ones(1, i + 1, dtype=torch.float64)])  # (hs+1, i+1)
            rhs = torch.cat([out[b, i], torch.ones(1, dtype=torch.float64)])
            w = torch.linalg.lstsq(M, rhs[:, None]).solution[:, 0]
            worst = max(worst, (M @ w - rhs).abs().max().item(), (-w).max().item())
    assert worst < 1e-5, (f'expected out_i = sum_j w_j v_j (j <= i) with w >= 0 summing to 1; the best w misses by '
                          f'{worst:.3g}; rows of A must sum to 1 after the mask, and out = A @ v')


@claim
def allowed_weights_positive(inp, rec):
    low = A0(rec)[:, torch.tril(torch.ones(T, T)).bool()].min().item()
    assert low > 0, f'expected every weight with j <= i to be > 0, got {low:.3g}; is the diagonal masked?'


@claim
def no_weight_on_the_future(inp, rec):
    future = A0(rec).triu(1).abs().max().item()
    assert future == 0, f'expected exactly 0 above the diagonal, got {future:.3g}; fill with -inf before the softmax'


@claim
def causal_by_perturbation(inp, rec):
    expect_causal(rec.tensor('pert.base'), rec.tensor('pert.out5'), 5)  # position 5 replaced, as in the test cell


@claim
def causal_by_gradient(inp, rec):
    expect_causal_at_every_position([rec.tensor(f'pert.out{j}') for j in range(T)], rec.tensor('pert.base'), 3)


def structure(rec, key):
    return bool(rec.tensor(f'structure.{key}'))


@claim
def head_mask_is_a_buffer(inp, rec):
    assert structure(rec, 'tril_buffer') and structure(rec, 'tril_lower'), 'expected a (10, 10) lower-triangular buffer `tril`'
    assert not structure(rec, 'tril_param') and not int(rec.tensor('structure.square_params')), 'expected no (10, 10) parameter'
    assert structure(rec, 'tril_saved') and structure(rec, 'tril_moved'), 'expected tril in the state_dict, moved by .to()'


@claim
def head_has_three_bias_free_maps(inp, rec):
    assert structure(rec, 'maps_ok'), 'expected key, query, value = nn.Linear(16, 4, bias=False)'
    n = int(rec.tensor('structure.n_params'))
    assert n == 3 * 16 * 4, f'expected 192 parameters, got {n}'


@claim
def head_stashes_detached_weights(inp, rec):
    A, out = rec.tensor('head0.A'), rec.tensor('head0.out')
    assert tuple(A.shape) == (B, T, T), f'expected self.A of shape {(B, T, T)}, got {tuple(A.shape)}'
    assert not bool(rec.tensor('head0.A_requires_grad')), 'expected self.A detached; it is still in the graph'
    gap = ((A @ rec.tensor('head0.v')) - out).abs().max().item()
    assert gap < 1e-5, f'expected |A @ v - out| < 1e-5, got {gap:.3g}; stash the weights forward used'


def stats_case(rec, case, q, k, tol):
    keys = rec.text(f'stats{case}.keys')
    want = reference_stats(q, k)
    assert keys == ','.join(sorted(want)), f'expected the keys {sorted(want)}, got {keys}'
    assert set(rec.text(f'stats{case}.types').split(',')) == {'float'}, 'expected Python floats (use .item())'
    for key, value in want.items():
        got = float(rec.tensor(f'stats{case}.{key}'))
        assert abs(got - value) <= tol * max(1.0, abs(value)), (
            f'q, k of shape {tuple(q.shape)}: expected {key} = {value:.5f}, got {got:.5f}; {STATS_HINTS[key]}')


@claim
def score_stats_small_case(inp, rec):
    stats_case(rec, 'small', inp.tensor('stats.small.q'), inp.tensor('stats.small.k'), 1e-4)
    stats_case(rec, 't3', inp.tensor('stats.t3.q'), inp.tensor('stats.t3.k'), 1e-4)
    stats_in_float64(inp, rec)


def stats_draws(inp, rec, keys):
    for dk in STATS_DK:
        want = reference_stats(inp.tensor(f'stats.q{dk}'), inp.tensor(f'stats.k{dk}'))
        for key in keys:
            got = float(rec.tensor(f'stats{dk}.{key}'))
            tol = 1e-4 * abs(want[key]) if key.endswith('std') else 1e-4
            assert abs(got - want[key]) <= tol, (f'd_k={dk}: expected {key} = {want[key]:.5f} on the grader\'s draws, '
                                                 f'got {got:.5f}; {STATS_HINTS[key]}')


@claim
def score_std_is_sqrt_dk(inp, rec):
    stats_draws(inp, rec, ['raw_std', 'scaled_std'])


@claim
def unscaled_softmax_saturates(inp, rec):
    stats_draws(inp, rec, ['max_wt_raw', 'max_wt_scaled', 'jac_raw', 'jac_scaled'])


def masked_reference(s):
    n = s.shape[-1]
    allowed = torch.ones(n, n).tril().bool()
    top = torch.where(allowed, s.double(), -math.inf).amax(-1, keepdim=True)
    e = torch.where(allowed, torch.exp(s.double() - top), 0.0)
    return e / e.sum(-1, keepdim=True)


def zeroed_reference(s):
    n = s.shape[-1]
    return torch.softmax(s.double(), -1) * torch.ones(n, n, dtype=torch.float64).tril()


def compare(inp, rec, fn, name, reference):
    s, got = inp.tensor(name), rec.tensor(f'{fn}.{name}')
    assert tuple(got.shape) == tuple(s.shape), f'input {name}: expected shape {tuple(s.shape)}, got {tuple(got.shape)}'
    assert rec.text(f'{fn}.{name}.dtype') == str(s.dtype), (f'input {name}: expected dtype {s.dtype}, got '
                                                         f'{rec.text(f"{fn}.{name}.dtype")}; keep the dtype of s')
    tol = tolerance(s.dtype)
    gap = (got.double() - reference(s)).abs().max().item()
    assert gap < tol, (f'input {name} of shape {tuple(s.shape)}: expected max |difference| from the reference < {tol:g}, '
                       f'got {gap:.3g}' + ('; nan: 0/0 or inf/inf, mask with -inf before F.softmax' if gap != gap else ''))


@claim
def causal_softmax_masks_before(inp, rec):
    for name in MASK_INPUTS + ['s_big', 's_hand3']:
        compare(inp, rec, 'right', name, masked_reference)


@claim
def softmax_then_zero_leaks(inp, rec):
    for name in MASK_INPUTS + ['s_hand2']:
        compare(inp, rec, 'wrong', name, zeroed_reference)


def equivariant(inp, rec, a, b):
    perm = inp.tensor('perm')
    return (rec.tensor(f'equi.{a}') - rec.tensor(f'equi.{b}')[:, perm]).abs().max().item()


@claim
def equivariant_in_X(inp, rec):
    gap = equivariant(inp, rec, 'x_perm', 'x')
    assert gap < 1e-5, f'causal=False: expected Head(x[:, perm]) = Head(x)[:, perm], off by {gap:.3g}; skip the mask'


@claim
def still_equivariant_with_positions_in_X(inp, rec):
    gap = equivariant(inp, rec, 'xp_perm', 'xp')
    assert gap < 1e-5, f'causal=False, positions in X: expected equivariance, off by {gap:.3g}; skip the mask'


def gap(inp, rec, which):
    return (rec.tensor(f'tokens.a_{which}') - rec.tensor(f'tokens.b_{which}')[:, inp.tensor('perm')]).abs().max().item()


@claim
def token_perm_without_positions(inp, rec):
    assert rec.text('tokens.type_nopos') == 'float', f'expected a Python float, got {rec.text("tokens.type_nopos")}'
    for key in ('gap_nopos', 'gap_cycle'):
        got = float(rec.tensor(f'tokens.{key}'))
        assert got < 1e-5, f'no positions ({key}): expected token_perm_gap < 1e-5, got {got:.3g}; permute with perm'
    got = float(rec.tensor('tokens.gap_nopos'))
    assert abs(got - gap(inp, rec, 'nopos')) <= 1e-5, f'expected token_perm_gap {gap(inp, rec, "nopos"):.3g}, got {got:.3g}'
    ident = float(rec.tensor('tokens.gap_ident'))
    assert ident < 1e-6, f'identity permutation: expected 0, got {ident:.3g}'


@claim
def token_perm_with_positions_breaks(inp, rec):
    got, want = float(rec.tensor('tokens.gap_pos')), gap(inp, rec, 'pos')
    assert got > 1e-3 and abs(got - want) <= 1e-5 * max(1.0, want), (
        f'with positions: expected token_perm_gap = {want:.4g} (max |a - b|), got {got:.4g}; permute the token ids')


@claim
def causal_head_not_equivariant(inp, rec):
    a, b = rec.tensor('causal.a'), rec.tensor('causal.b')
    rows = (a - b[:, inp.tensor('causal_perm')]).abs().amax(-1)[0]
    got = float(rec.tensor('causal.gap'))
    assert got > 1e-3, f'causal head: expected token_perm_gap > 1e-3, got {got:.3g}; apply the mask when causal'
    assert rows[-1] < 1e-5, f'causal head: expected the last row unchanged, it moved by {rows[-1]:.3g}'


def kernel_reference(n, s):
    i = torch.arange(n, dtype=torch.float64)
    return -(i[:, None] - i[None, :]) ** 2 / (2 * s * s)


@claim
def kernel_running_mean_at_infinite_bandwidth(inp, rec):
    S = rec.tensor('kernel.inf')
    assert tuple(S.shape) == (10, 10) and S.is_floating_point(), f'expected a (10, 10) float tensor, got {tuple(S.shape)}'
    expect_dtype(S, 'float32', 'gaussian_scores(10, inf)', 'the contract says a float32 (T, T) tensor: build the positions in '
                 'float32')
    assert (S == 0).all(), 'expected all scores exactly 0 at s = inf' + ('; got nan' if S.isnan().any() else '')


@claim
def kernel_gaussian_weights(inp, rec):
    for n, s in KERNEL_CASES:
        S, want = rec.tensor(f'kernel.{n}_{s}'), kernel_reference(n, s)
        assert tuple(S.shape) == (n, n), f'gaussian_scores({n}, {s}): expected shape ({n}, {n}), got {tuple(S.shape)}'
        gap = (S.double() - want).abs().max().item()
        assert gap <= 1e-5 * max(1.0, want.abs().max().item()), (
            f'gaussian_scores({n}, {s}): expected -(i - j)^2 / (2 s^2), off by {gap:.3g}; check the sign and brackets')


def ranks(rec, first, cases):
    for i, case in enumerate(cases, start=first):
        if first == 0:  # as in the test cells: the generic cases check the type
            assert rec.text(f'rank{i}.type') == 'int', f'expected a Python int, got {rec.text(f"rank{i}.type")}'
        got = int(rec.tensor(f'rank{i}.r'))
        assert got == case[-1], (f'd={case[0]}, d_k={case[1]}, T={case[2]}, input rank {case[4] or "full"}, '
                                 f'rows set to 0 {case[5] or "none"}: expected rank S = {case[-1]}, got {got}; '
                                 'take matrix_rank of S = q k^T / sqrt(d_k) itself (not of q or k alone), before any mask')


@claim
def score_rank_generic_input(inp, rec):
    ranks(rec, 0, RANK_GENERIC)


@claim
def score_rank_rank_deficient(inp, rec):
    ranks(rec, len(RANK_GENERIC), RANK_DEFICIENT)



def stats_in_float64(inp, rec):
    """score_stats computes in the dtype of q and k: on float64 draws of scale 1e-25 the scores, about 1e-50, are far
    inside float64's range and 0 in float32's, so each statistic must match the float64 reference to 1e-9 of itself."""
    q, k = inp.tensor('stats64.q'), inp.tensor('stats64.k')
    for key, value in reference_stats(q, k).items():
        got = float(rec.tensor(f'statsf64.{key}'))
        assert abs(got - value) <= 1e-9 * abs(value), (
            f'float64 q, k of shape {tuple(q.shape)} and scale {STATS64[3]:g} (scores about 1e-50): expected {key} = '
            f'{value:.6g}, got {got:.6g}; compute in the dtype of q and k (no .float(), no dtype=torch.float32): in float32 '
            'these scores are 0')
