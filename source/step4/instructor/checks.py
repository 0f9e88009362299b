"""Step 4's out-of-process checks: the numbers a submission computes, recorded in its kernel, judged in a clean process.

make_inputs() runs in the grader and writes the inputs; PROBE runs last in the student's kernel and records what the
student's code computes on them (numbers only); verdicts() runs in the grader, which never runs student code, and says for
each test cell whether the recorded numbers satisfy its claim. A test cell scores only if both it and its verdict pass, so
patching torch, builtins or IPython in the kernel can lose points but never earn them.
"""

import numpy as np

D, HS, T, B = 32, 16, 8, 4
HEAD_CASES = [  # (B, T, T_max, d, head_size, causal, dtype, input scale, tolerance), as in head_matches_sdpa_reference
    (B, T, T, D, HS, True, 'float32', 1.0, 1e-5),
    (2, 5, 12, 24, 6, True, 'float32', 1.0, 1e-5),
    (3, 12, 12, 10, 20, True, 'float32', 1.0, 1e-5),
    (2, 1, 4, 8, 3, True, 'float32', 1.0, 1e-5),
    (2, 7, 9, 16, 4, False, 'float32', 1.0, 1e-5),
    (2, 6, 6, 16, 8, True, 'float64', 1.0, 1e-12),
    (2, 8, 8, 16, 8, True, 'float32', 30.0, 1e-5),
]
RANK_CASES = [(64, 8, 32, False), (20, 3, 16, True), (64, 16, 6, False)]  # (d, head_size, T, causal)


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
    x['pos'] = rng.standard_normal((T, D)).astype('float32')
    x['tok'] = rng.standard_normal((65, D)).astype('float32')
    x['idx'] = rng.integers(0, 65, (1, T))
    x['s'] = rng.standard_normal((2, 6, 6)).astype('float32')
    for i, (d, _, t, _) in enumerate(RANK_CASES):
        x[f'rank{i}.x'] = rng.standard_normal((1, t, d)).astype('float32')
    return x


PROBE = r'''
# The grader's probe: it records what this notebook's code computes on the grader's inputs, to be checked elsewhere.
def _grader_probe():
    import numpy as np
    import torch
    inp = dict(np.load('_probe_in.npz'))
    rec = {}

    def run(name, fn):
        try:
            for key, value in fn().items():
                rec[f'{name}.{key}'] = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)
        except BaseException as e:  # noqa: BLE001 -- a failing function records its error and nothing else
            rec[f'{name}.error'] = np.asarray(repr(e)[:300])

    t = lambda name: torch.from_numpy(inp[name])  # noqa: E731
    cases = %(cases)r

    def head_case(i):
        b, tt, t_max, d, hs, causal, dtype, scale, tol = cases[i]
        torch.manual_seed(100 + i)
        h = Head(d, hs, t_max, causal=causal).to(getattr(torch, dtype))
        x = t(f'head{i}.x')
        out = h(x)
        A = h.A
        return {'q': h.query(x), 'k': h.key(x), 'v': h.value(x), 'out': out, 'A': A,
                'A_requires_grad': bool(A.requires_grad or A.grad_fn is not None)}
    for i in range(len(cases)):
        run(f'head{i}', lambda i=i: head_case(i))

    def perturbed():
        torch.manual_seed(100)
        h = Head(%(d)d, %(hs)d, %(T)d)
        return {f'out{j}': h(t(f'pert{j}.x')) for j in range(%(T)d)} | {'base': h(t('head0.x'))}
    run('pert', perturbed)

    def equivariance():
        torch.manual_seed(101)
        h = Head(%(d)d, %(hs)d, %(T)d, causal=False)
        x, perm, pos = t('head0.x'), t('perm'), t('pos')
        return {'x': h(x), 'x_perm': h(x[:, perm]), 'xp': h(x + pos), 'xp_perm': h((x + pos)[:, perm])}
    run('equi', equivariance)

    def structure():
        h = Head(16, 4, 10)
        bufs = {n: tuple(b.shape) for n, b in h.named_buffers()}
        params = {n: tuple(p.shape) for n, p in h.named_parameters()}
        masks = [n for n, s in bufs.items() if s == (10, 10)]
        saved = [n for n in masks if n in h.state_dict()]
        h.to('meta')
        moved = [n for n in masks if h.get_buffer(n).device.type == 'meta']
        return {'masks': len(masks), 'saved': len(saved), 'moved': len(moved),
                'square_params': sum(s == (10, 10) for s in params.values()),
                'n_params': sum(int(np.prod(s)) for s in params.values())}
    run('structure', structure)

    def tokens():
        torch.manual_seed(102)
        h = Head(%(d)d, %(hs)d, %(T)d, causal=False)
        tok = torch.nn.Embedding.from_pretrained(t('tok'))
        pos = torch.nn.Embedding.from_pretrained(t('pos'))
        idx, perm = t('idx'), t('perm')
        with torch.no_grad():
            outs = {'a_nopos': h(tok(idx[:, perm])), 'b_nopos': h(tok(idx)),
                    'a_pos': h(tok(idx[:, perm]) + t('pos')[None]), 'b_pos': h(tok(idx) + t('pos')[None])}
        return outs | {'gap_nopos': token_perm_gap(h, tok, idx, perm), 'gap_pos': token_perm_gap(h, tok, idx, perm, pos),
                       'gap_ident': token_perm_gap(h, tok, idx, torch.arange(%(T)d), pos)}
    run('tokens', tokens)

    def stats():
        torch.manual_seed(103)
        return {f'{k}_{dk}': v for dk in (16, 64, 256) for k, v in score_stats(dk).items()}
    run('stats', stats)
    run('mask', lambda: {'right': causal_softmax(t('s')), 'wrong': softmax_then_zero(t('s'))})
    run('kernel', lambda: {'inf': gaussian_scores(10, float('inf')), **{f's{s}': gaussian_scores(30, s) for s in (1, 2, 3)}})

    def ranks():
        out = {}
        for i, (d, hs, tt, causal) in enumerate(%(rank_cases)r):
            torch.manual_seed(104 + i)
            out[f'r{i}'] = score_rank(Head(d, hs, max(tt, 16), causal=causal), t(f'rank{i}.x'))
        return out
    run('rank', ranks)
    np.savez('_probe_out.npz', **rec)


_grader_probe()
del _grader_probe
''' % {'cases': HEAD_CASES, 'd': D, 'hs': HS, 'T': T, 'rank_cases': RANK_CASES}


def verdicts(inp, rec):
    """{test cell grade_id: None if the recorded numbers satisfy its claim, else why not}, computed without student code."""
    import torch
    import torch.nn.functional as F

    def get(key):
        if key not in rec:
            name = key.split('.')[0]
            raise LookupError(f'{name}: {rec[name + ".error"]}' if name + '.error' in rec else f'{key} was not recorded')
        return torch.from_numpy(np.array(rec[key]))

    def x(name):
        return torch.from_numpy(inp[name])

    def sdpa(i):
        q, k, v = (get(f'head{i}.{m}') for m in 'qkv')  # the student's own maps, applied to the grader's input
        return F.scaled_dot_product_attention(q, k, v, is_causal=HEAD_CASES[i][5])

    def head_matches_sdpa_reference():
        for i, case in enumerate(HEAD_CASES):
            out, ref = get(f'head{i}.out'), sdpa(i)
            assert out.shape == ref.shape, f'case {i}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}'
            gap = ((out - ref).abs().max() / ref.abs().max()).item()
            assert gap < case[-1], f'case {i}: relative difference {gap:.3g} from scaled_dot_product_attention'

    def A0():
        return get('head0.A')

    def prop_3_1_rows_in_simplex():
        A = A0()
        assert (A >= 0).all() and (A.sum(-1) - 1).abs().max() < 1e-6, 'rows of A are not in the simplex'

    def cor_3_2_output_in_convex_hull():
        v, out = get('head0.v'), get('head0.out')
        lo, hi = v.cummin(1).values, v.cummax(1).values
        assert torch.maximum(lo - out, out - hi).max() <= 1e-5, 'an output lies outside the hull of the values it may see'

    def cor_3_3_allowed_weights_positive():
        assert (A0()[:, torch.tril(torch.ones(T, T)).bool()] > 0).all(), 'an allowed weight is not positive'

    def prop_5_1_lower_triangular():
        assert (A0().triu(1) == 0).all(), 'A has weight above the diagonal'

    def prop_5_1_causal_by_perturbation():
        base, out = get('pert.base'), get('pert.out5')  # position 5 replaced, as in the test cell
        assert torch.equal(out[:, :5], base[:, :5]), 'outputs 0-4 changed when only x_5 changed'
        assert not torch.allclose(out[:, 5:], base[:, 5:]), 'outputs 5.. did not change when x_5 changed'

    def prop_5_1_causal_by_gradient():
        base = get('pert.base')
        for j in range(T):  # out_3 depends on x_j exactly for j <= 3
            changed = not torch.equal(get(f'pert.out{j}')[:, 3], base[:, 3])
            assert changed == (j <= 3), f'out_3 {"depends" if changed else "does not depend"} on x_{j}'

    def head_mask_is_a_buffer():
        s = {k: int(get(f'structure.{k}')) for k in ('masks', 'saved', 'moved', 'square_params')}
        assert s['masks'] and s['saved'] and s['moved'] and not s['square_params'], f'the mask is not a moving buffer: {s}'

    def head_has_three_bias_free_maps():
        assert int(get('structure.n_params')) == 3 * 16 * 4, 'not three bias-free maps'

    def head_stashes_detached_weights():
        A, out = get('head0.A'), get('head0.out')
        assert not bool(get('head0.A_requires_grad')), 'self.A is not detached'
        assert ((A @ get('head0.v')) - out).abs().max() < 1e-5, 'self.A is not the weights used'

    def lemma_4_5_raw_std_is_sqrt_dk():
        for dk in (16, 64, 256):
            assert abs(float(get(f'stats.raw_std_{dk}')) / dk**0.5 - 1) < 0.05, f'raw std at d_k={dk}'
            assert abs(float(get(f'stats.scaled_std_{dk}')) - 1) < 0.05, f'scaled std at d_k={dk}'

    def lemma_4_5_unscaled_softmax_saturates():
        w16, w256 = float(get('stats.max_wt_raw_16')), float(get('stats.max_wt_raw_256'))
        assert w16 < w256 and w256 > 0.9, 'the unscaled softmax does not saturate'
        assert abs(float(get('stats.max_wt_scaled_16')) - float(get('stats.max_wt_scaled_256'))) < 0.05
        assert float(get('stats.jac_raw_256')) < 0.5 * float(get('stats.jac_scaled_256')), 'the Jacobian does not shrink'

    tril6 = torch.tril(torch.ones(6, 6)).bool()

    def ex_4_mask_before_softmax():
        ref = F.softmax(x('s').masked_fill(~tril6, float('-inf')), dim=-1)
        assert (get('mask.right') - ref).abs().max() < 1e-6, 'causal_softmax differs from the reference'

    def ex_4_zeroing_after_softmax_leaks():
        ref = F.softmax(x('s'), dim=-1) * tril6
        assert (get('mask.wrong') - ref).abs().max() < 1e-6, 'softmax_then_zero differs from the reference'

    def equivariant(a, b):
        perm = x('perm')
        return (get(f'equi.{a}') - get(f'equi.{b}')[:, perm]).abs().max() < 1e-5

    def thm_6_1_equivariant_in_X():
        assert equivariant('x_perm', 'x'), 'not equivariant in X'

    def thm_6_1_trap_positions_in_X():
        assert equivariant('xp_perm', 'xp'), 'not equivariant in X with positions'

    def gap(which):
        return (get(f'tokens.a_{which}') - get(f'tokens.b_{which}')[:, x('perm')]).abs().max().item()

    def thm_6_1_token_perm_without_positions():
        got = float(get('tokens.gap_nopos'))
        assert got < 1e-5 and abs(got - gap('nopos')) <= 1e-5, f'token_perm_gap without positions = {got:.3g}'
        assert float(get('tokens.gap_ident')) < 1e-6, 'token_perm_gap is not 0 for the identity permutation'

    def cor_6_2_token_perm_with_positions_breaks():
        got = float(get('tokens.gap_pos'))
        assert got > 1e-3 and abs(got - gap('pos')) <= 1e-5 * max(1.0, got), f'token_perm_gap with positions = {got:.3g}'

    def kernel_weights(S):
        n = S.shape[0]
        return F.softmax(S.masked_fill(~torch.tril(torch.ones(n, n)).bool(), float('-inf')), dim=-1)

    def kernel_running_mean_at_infinite_bandwidth():
        A = kernel_weights(get('kernel.inf'))
        assert (A - torch.tril(torch.ones(10, 10)) / torch.arange(1, 11)[:, None]).abs().max() < 1e-6, 'not the running mean'

    def kernel_gaussian_weights():
        for s in (1, 2, 3):
            A = kernel_weights(get(f'kernel.s{s}'))
            for m in (1, 2):
                assert abs((A[20, 20 - m] / A[20, 20]).item() - np.exp(-m**2 / (2 * s**2))) < 1e-5, f'bandwidth {s}'

    def ex_7_score_rank_at_most_head_size():
        for i, (_, hs, t, _) in enumerate(RANK_CASES):
            assert int(get(f'rank.r{i}')) == min(hs, t), f'rank case {i}'

    checks = [head_matches_sdpa_reference, head_mask_is_a_buffer, head_has_three_bias_free_maps,
              head_stashes_detached_weights, prop_3_1_rows_in_simplex, cor_3_2_output_in_convex_hull,
              cor_3_3_allowed_weights_positive, prop_5_1_lower_triangular, prop_5_1_causal_by_perturbation,
              prop_5_1_causal_by_gradient, lemma_4_5_raw_std_is_sqrt_dk, lemma_4_5_unscaled_softmax_saturates,
              ex_4_mask_before_softmax, ex_4_zeroing_after_softmax_leaks, thm_6_1_equivariant_in_X, thm_6_1_trap_positions_in_X,
              thm_6_1_token_perm_without_positions, cor_6_2_token_perm_with_positions_breaks,
              kernel_running_mean_at_infinite_bandwidth, kernel_gaussian_weights, ex_7_score_rank_at_most_head_size]
    out = {}
    for check in checks:
        try:
            check()
            out[check.__name__] = None
        except Exception as e:  # any failure is a failed verdict, with its reason
            out[check.__name__] = f'{type(e).__name__}: {e}'
    return out
