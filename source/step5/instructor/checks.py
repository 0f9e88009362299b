"""Step 5's claims, judged outside the student's kernel: multi-head attention two ways, LayerNorm, the feed-forward
map, the pre-norm block, gradients through deep stacks, parameter counts and ranks. Every reference (nn.MultiheadAttention,
F.layer_norm, the feed-forward map, the block, the counts) is recomputed here from the weights the student's code used."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course.claims import claim, expect_causal, expect_causal_at_every_position, relative_gap

D, H, T, B = 32, 4, 8, 4
MHA_CASES = [  # (d, n_head, block_size, T, B, dtype, relative tolerance)
    (D, H, T, T, B, 'float32', 1e-5),
    (24, 3, 12, 5, 2, 'float32', 1e-5),
    (16, 1, 6, 6, 3, 'float32', 1e-5),
    (48, 8, 10, 10, 2, 'float64', 1e-12),
]
LN_CASES = [  # (d, leading shape, input scale, input offset, eps, relative tolerance)
    (D, (B, T), 3.0, 2.0, 1e-5, 1e-5),
    (8, (3,), 1.0, 0.0, 1e-5, 1e-4),
    (16, (2, 4), 1e-3, 0.0, 1e-5, 1e-4),  # rows of std 1e-3: eps inside vs outside the square root
    (12, (2, 3), 0.05, 0.0, 1e-2, 1e-4),  # eps passed to the constructor
]
FF_DIMS = (D, 16)
DEEP = (12, 32, 4, 16)  # blocks, d, heads, T of the gradient experiment
BLOCK_SIZES = (16, 32, 48, 64, 768)
GPT_SIZES = [(65, 8, 32, 2), (50, 12, 16, 1), (70, 5, 24, 3), (50257, 1024, 768, 12)]  # (V, block_size, d, n_layer)
RANK_CASES = [(32, 4, 48), (24, 3, 5), (16, 2, 40)]  # (d, n_head, T)


def make_inputs(seed=20261):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {}
    for i, (d, _, _, t, b, dtype, _) in enumerate(MHA_CASES):
        x[f'mha{i}.x'] = rng.standard_normal((b, t, d)).astype(dtype)
    for i, (d, lead, scale, offset, _, _) in enumerate(LN_CASES):
        x[f'ln{i}.x'] = (scale * rng.standard_normal((*lead, d)) + offset).astype('float32')
        x[f'ln{i}.w'] = (1 + 0.5 * rng.standard_normal(d)).astype('float32')
        x[f'ln{i}.b'] = (0.5 * rng.standard_normal(d)).astype('float32')
    x['ln.shift'] = (5 * rng.standard_normal((B, T, 1))).astype('float32')
    x['ln.scale'] = np.exp(2 * rng.random((B, T, 1))).astype('float32')
    for dd in FF_DIMS:
        x[f'ff{dd}.x'] = rng.standard_normal((B, T, dd)).astype('float32')
    x['block.x'] = rng.standard_normal((B, T, D)).astype('float32')
    for j in range(T):  # position j replaced: the block's causality by perturbation, and its per-position form
        x[f'pert{j}.x'] = x['block.x'].copy()
        x[f'pert{j}.x'][:, j] = rng.standard_normal((B, D)).astype('float32')
    _, dd, _, tt = DEEP
    x['deep.x'] = rng.standard_normal((B, tt, dd)).astype('float32')
    x['deep.g'] = rng.standard_normal((B, tt, dd)).astype('float32')
    for i, (d, _, t) in enumerate(RANK_CASES):
        x[f'rank{i}.x'] = rng.standard_normal((1, t, d)).astype('float32')
    return x


def probe(nb, inp, run, *, MHA_CASES, LN_CASES, FF_DIMS, D, H, T, DEEP, BLOCK_SIZES, GPT_SIZES, RANK_CASES):
    """In the student's kernel: the attention modules, LayerNorm, FeedForward, Block and the counting functions on the
    grader's inputs, with the weights they used."""
    import torch
    import torch.nn as nn

    t = inp.tensor

    def heads_weights(m):
        W = [torch.cat([getattr(h, n).weight for h in m.heads]) for n in ('query', 'key', 'value')]
        return torch.cat(W), m.proj.weight

    def linears(m):
        lin = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
        return {f'lin{i}.{n}': getattr(mod, n) for i, mod in enumerate(lin) for n in ('weight', 'bias')
                if getattr(mod, n) is not None} | {'n_linear': len(lin)}

    for i, (d, h, t_max, _, _, dtype, _) in enumerate(MHA_CASES):
        def mha_case(i=i, d=d, h=h, t_max=t_max, dtype=dtype):
            torch.manual_seed(200 + i)
            m = nb.MultiHeadAttention(d, h, t_max).to(getattr(torch, dtype))
            with torch.no_grad():
                out = m(t(f'mha{i}.x'))
            W_qkv, W_o = heads_weights(m)
            return {'out': out, 'W_qkv': W_qkv, 'W_o': W_o}
        run(f'mha{i}', mha_case)

        def batched_case(i=i, d=d, h=h, t_max=t_max, dtype=dtype):
            torch.manual_seed(210 + i)
            m = nb.BatchedMultiHeadAttention(d, h, t_max).to(getattr(torch, dtype))
            with torch.no_grad():
                out = m(t(f'mha{i}.x'))
            return {'out': out, 'W_qkv': m.qkv.weight, 'W_o': m.proj.weight}
        run(f'batched{i}', batched_case)

    def structure():
        m = nb.MultiHeadAttention(32, 4, 8)
        return {'modulelist': isinstance(m.heads, nn.ModuleList), 'n_heads': len(m.heads),
                'head_sizes': [h.key.out_features for h in m.heads], 'proj_bias': m.proj.bias is not None,
                'n_params': sum(p.numel() for p in m.parameters()),
                'batched_n_params': sum(p.numel() for p in nb.BatchedMultiHeadAttention(32, 4, 8).parameters())}
    run('structure', structure)

    def copy():
        torch.manual_seed(220)
        m = nb.MultiHeadAttention(D, H, T)
        b = nb.BatchedMultiHeadAttention(D, H, T)
        W_qkv, W_o = heads_weights(m)
        with torch.no_grad():
            b.qkv.weight.copy_(W_qkv)
            b.proj.weight.copy_(W_o)
            x = t('mha0.x')
            return {'heads': m(x), 'batched': b(x), 'W_qkv': W_qkv, 'W_o': W_o}
    run('copy', copy)

    for i, (d, _, _, _, eps, _) in enumerate(LN_CASES):
        def ln_case(i=i, d=d, eps=eps):
            ln = nb.LayerNorm(d, eps=eps)
            x = t(f'ln{i}.x')
            with torch.no_grad():
                rec_ = {'fresh_w': ln.weight.clone(), 'fresh_b': ln.bias.clone(), 'out0': ln(x)}
                ln.load_state_dict({'weight': t(f'ln{i}.w'), 'bias': t(f'ln{i}.b')})
                rec_['out'] = ln(x)
                if i == 0:
                    rec_ |= {'shifted': ln(x + t('ln.shift')), 'scaled': ln(x * t('ln.scale'))}
            return rec_
        run(f'ln{i}', ln_case)

    for dd in FF_DIMS:
        def ff_case(dd=dd):
            torch.manual_seed(230 + dd)
            f = nb.FeedForward(dd)
            with torch.no_grad():
                return {'out': f(t(f'ff{dd}.x')), 'n_params': sum(p.numel() for p in f.parameters())} | linears(f)
        run(f'ff{dd}', ff_case)

    def block_weights(blk):
        W_qkv, W_o = heads_weights(blk.attn)
        return {'ln1.w': blk.ln1.weight, 'ln1.b': blk.ln1.bias, 'ln2.w': blk.ln2.weight, 'ln2.b': blk.ln2.bias,
                'W_qkv': W_qkv, 'W_o': W_o} | linears(blk.ffwd)

    def block_residual():
        torch.manual_seed(240)
        blk = nb.Block(D, H, T)
        with torch.no_grad():
            blk.attn.proj.weight.zero_()
            last = [m for m in blk.ffwd.modules() if isinstance(m, nn.Linear)][-1]
            last.weight.zero_()
            last.bias.zero_()
            return {'out': blk(t('block.x'))}
    run('residual', block_residual)

    def block_reference():
        torch.manual_seed(241)
        blk = nb.Block(D, H, T)
        with torch.no_grad():
            for p in blk.parameters():
                p.add_(0.3 * torch.randn_like(p))
            return {'out': blk(t('block.x')), 'offset': blk(t('block.x') + 10)} | block_weights(blk)
    run('block', block_reference)

    def perturbed():
        torch.manual_seed(242)
        blk = nb.Block(D, H, T)
        with torch.no_grad():
            return {f'out{j}': blk(t(f'pert{j}.x')) for j in range(T)} | {'base': blk(t('block.x'))}
    run('pert', perturbed)

    def deep():
        n_layer, dd, hh, tt = DEEP
        torch.manual_seed(250)
        blocks = [nb.Block(dd, hh, tt) for _ in range(n_layer)]
        x, g = t('deep.x'), t('deep.g')
        out = {f'{int(r)}{int(n)}': nb.input_grad_norms(blocks, x, g, r, n) for r in (True, False) for n in (True, False)}
        xr = x.clone().requires_grad_(True)
        h = xr
        for blk in blocks:
            h = blk(h)
        (h * g).sum().backward()
        return out | {'auto': xr.grad.norm()}
    run('deep', deep)

    run('block_params', lambda: {f'{dd}_{int(ab)}': nb.block_params(dd, attn_bias=ab) for dd in BLOCK_SIZES
                                 for ab in (False, True)})
    run('gpt_params', lambda: {f'{i}_{int(ab)}_{int(tied)}': nb.gpt_params(*size, attn_bias=ab, tied=tied)
                               for i, size in enumerate(GPT_SIZES) for ab in (False, True) for tied in (False, True)})

    def ranks():
        out = {}
        for i, (dd, hh, tt) in enumerate(RANK_CASES):
            torch.manual_seed(260 + i)
            r = nb.rank_report(nb.MultiHeadAttention(dd, hh, max(tt, 8)), t(f'rank{i}.x'))
            out |= {f'{i}.scores': list(r['scores']), f'{i}.head_maps': list(r['head_maps']), f'{i}.layer_map': r['layer_map']}
        return out
    run('rank', ranks)


def true_block_params(d, attn_bias):
    """The count of one block, from its parts: attention 4d^2 (+4d biases), feed-forward 8d^2 + 5d, two LayerNorms 4d."""
    return 4 * d * d + 4 * d * attn_bias + 8 * d * d + 5 * d + 4 * d


def true_gpt_params(V, block_size, d, n_layer, attn_bias, tied):
    return V * d + block_size * d + n_layer * true_block_params(d, attn_bias) + 2 * d + (0 if tied else V * d)


def torch_mha(xx, W_qkv, W_o, n_head):
    """nn.MultiheadAttention (bias-free, batch-first, causal) with the given weights, on xx (B,T,d)."""
    d, t = xx.shape[-1], xx.shape[1]
    ref = nn.MultiheadAttention(d, n_head, bias=False, batch_first=True).to(xx.dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(W_qkv)
        ref.out_proj.weight.copy_(W_o)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        return ref(xx, xx, xx, attn_mask=future, need_weights=False)[0]


def matches_torch(inp, rec, kind):
    for i, (_, h, _, _, _, _, tol) in enumerate(MHA_CASES):
        ref = torch_mha(inp.tensor(f'mha{i}.x'), rec.tensor(f'{kind}{i}.W_qkv'), rec.tensor(f'{kind}{i}.W_o'), h)
        gap = relative_gap(rec.tensor(f'{kind}{i}.out'), ref)
        assert gap < tol, f'case {i}: relative difference {gap:.3g} from nn.MultiheadAttention'


@claim
def mha_matches_torch_multihead_attention(inp, rec):
    matches_torch(inp, rec, 'mha')


@claim
def mha_has_h_bias_free_heads_and_projection(inp, rec):
    s = {k: rec.tensor(f'structure.{k}').tolist() for k in ('modulelist', 'n_heads', 'head_sizes', 'proj_bias', 'n_params')}
    assert s == {'modulelist': True, 'n_heads': 4, 'head_sizes': [8] * 4, 'proj_bias': False, 'n_params': 4096}, s


@claim
def batched_matches_torch_multihead_attention(inp, rec):
    matches_torch(inp, rec, 'batched')
    assert int(rec.tensor('structure.batched_n_params')) == 4096, (
        'BatchedMultiHeadAttention(32, 4, 8) is not 4 d^2 parameters')


@claim
def batched_agrees_with_heads_after_copy(inp, rec):
    a, b = rec.tensor('copy.heads'), rec.tensor('copy.batched')
    assert relative_gap(b, a) < 1e-5, 'the two ways disagree after the copy'
    ref = torch_mha(inp.tensor('mha0.x'), rec.tensor('copy.W_qkv'), rec.tensor('copy.W_o'), H)
    assert relative_gap(a, ref) < 1e-5, 'neither is attention'


def ln_ref(inp, i, w=None, b=None):
    d, _, _, _, eps, _ = LN_CASES[i]
    return F.layer_norm(inp.tensor(f'ln{i}.x'), (d,), w, b, eps)


@claim
def layernorm_matches_torch(inp, rec):
    for i, (d, *_, tol) in enumerate(LN_CASES):
        ref = ln_ref(inp, i, inp.tensor(f'ln{i}.w'), inp.tensor(f'ln{i}.b'))
        assert relative_gap(rec.tensor(f'ln{i}.out'), ref) < tol, f'case {i}: LayerNorm differs from F.layer_norm'
        assert relative_gap(rec.tensor(f'ln{i}.out0'), ln_ref(inp, i)) < tol, (
            f'case {i}: a fresh LayerNorm differs from F.layer_norm')
        assert torch.equal(rec.tensor(f'ln{i}.fresh_w'), torch.ones(d))
        assert torch.equal(rec.tensor(f'ln{i}.fresh_b'), torch.zeros(d))


def ln_invariance(rec, which):
    out, moved = rec.tensor('ln0.out'), rec.tensor(f'ln0.{which}')
    assert out.shape == moved.shape and out.std(-1).min() > 0.1, 'LayerNorm output is degenerate'
    assert (out - moved).abs().max() < 1e-4, f'LN of the {which} rows differs from LN of the rows'


@claim
def layernorm_shift_invariant(inp, rec):
    ln_invariance(rec, 'shifted')


@claim
def layernorm_scale_invariant(inp, rec):
    ln_invariance(rec, 'scaled')


@claim
def feedforward_is_a_4x_gelu_mlp(inp, rec):
    for dd in FF_DIMS:
        assert int(rec.tensor(f'ff{dd}.n_linear')) == 2, 'not two linear maps'
        w1, b1, w2, b2 = (rec.tensor(f'ff{dd}.lin{i}.{n}') for i in (0, 1) for n in ('weight', 'bias'))
        assert tuple(w1.shape) == (4 * dd, dd) and tuple(w2.shape) == (dd, 4 * dd), 'not d -> 4d -> d'
        assert int(rec.tensor(f'ff{dd}.n_params')) == 8 * dd * dd + 5 * dd, 'not 8 d^2 + 5 d parameters'
        ref = F.linear(F.gelu(F.linear(inp.tensor(f'ff{dd}.x'), w1, b1)), w2, b2)
        assert (rec.tensor(f'ff{dd}.out') - ref).abs().max() < 1e-5, 'not Linear(GELU(Linear(x)))'


def block_ref(rec, xx):
    w = {k: rec.tensor(f'block.{k}') for k in ('ln1.w', 'ln1.b', 'ln2.w', 'ln2.b', 'W_qkv', 'W_o')}
    assert int(rec.tensor('block.n_linear')) == 2, 'ffwd does not hold two linear maps'
    w1, b1, w2, b2 = (rec.tensor(f'block.lin{i}.{n}') for i in (0, 1) for n in ('weight', 'bias'))
    h = xx + torch_mha(F.layer_norm(xx, (D,), w['ln1.w'], w['ln1.b']), w['W_qkv'], w['W_o'], H)
    return h + F.linear(F.gelu(F.linear(F.layer_norm(h, (D,), w['ln2.w'], w['ln2.b']), w1, b1)), w2, b2)


@claim
def block_residual_path(inp, rec):
    assert torch.equal(rec.tensor('residual.out'), inp.tensor('block.x')), 'Block(x) is not x when both branches are zero'


@claim
def block_is_pre_norm(inp, rec):
    assert (rec.tensor('block.offset').mean(-1) > 5).all(), 'the output of Block(x + 10) lost its offset: normalised'
    gap = (rec.tensor('block.out') - block_ref(rec, inp.tensor('block.x'))).abs().max()
    assert gap < 1e-4, 'Block differs from the pre-norm reference'


@claim
def block_causal_by_perturbation(inp, rec):
    expect_causal(rec.tensor('pert.base'), rec.tensor('pert.out5'), 5)


@claim
def block_causal_by_gradient(inp, rec):
    expect_causal_at_every_position([rec.tensor(f'pert.out{j}') for j in range(T)], rec.tensor('pert.base'), 3)


def deep_norms(inp, rec, config):
    n = rec.tensor(f'deep.{config}').double()
    g = inp.tensor('deep.g').double().norm()
    assert n.shape == (DEEP[0] + 1,), f'{config}: {tuple(n.shape)} norms, expected {DEEP[0] + 1}'
    assert abs(n[-1] - g) < 1e-4 * g, f'{config}: the last norm is not ||g||'
    return n


@claim
def residuals_keep_the_input_gradient(inp, rec):
    for config in ('11', '10'):
        n = deep_norms(inp, rec, config)
        assert 1 <= n[0] / n[-1] < 10, f'residual={config[0]}, norm={config[1]}: input/top ratio {n[0] / n[-1]:.3g}'
    auto = float(rec.tensor('deep.auto'))
    assert abs(float(rec.tensor('deep.11')[0]) - auto) < 1e-4 * auto, 'the input norm is not the gradient through the Blocks'


@claim
def plain_stack_gradient_vanishes(inp, rec):
    plain, ln_only = deep_norms(inp, rec, '00'), deep_norms(inp, rec, '01')
    assert plain[0] / plain[-1] < 1e-8, f'without residuals or LayerNorm the ratio is {plain[0] / plain[-1]:.3g}'
    assert ln_only[0] / ln_only[-1] > 1e6 * plain[0] / plain[-1], 'LayerNorm alone does not keep the gradient'


@claim
def block_param_formula(inp, rec):
    for dd in BLOCK_SIZES:
        for ab in (False, True):
            got = int(rec.tensor(f'block_params.{dd}_{int(ab)}'))
            assert got == true_block_params(dd, ab), f'block_params({dd}, attn_bias={ab}) = {got:,}'


def gpt_count(rec, i, ab, tied):
    got = int(rec.tensor(f'gpt_params.{i}_{int(ab)}_{int(tied)}'))
    assert got == true_gpt_params(*GPT_SIZES[i], ab, tied), f'gpt_params{GPT_SIZES[i]}, {ab}, {tied} = {got:,}'


@claim
def gpt_param_formula(inp, rec):
    for i in range(len(GPT_SIZES) - 1):
        for ab in (False, True):
            for tied in (False, True):
                gpt_count(rec, i, ab, tied)


@claim
def gpt2_small_count(inp, rec):
    assert true_gpt_params(*GPT_SIZES[-1], True, True) == 124_439_808  # the grader's own formula, checked
    gpt_count(rec, len(GPT_SIZES) - 1, True, True)
    gpt_count(rec, len(GPT_SIZES) - 1, True, False)


@claim
def ranks_low_per_head_full_for_the_layer(inp, rec):
    for i, (dd, hh, tt) in enumerate(RANK_CASES):
        got = {k: rec.tensor(f'rank.{i}.{k}').tolist() for k in ('scores', 'head_maps', 'layer_map')}
        want = {'scores': [min(dd // hh, tt)] * hh, 'head_maps': [dd // hh] * hh, 'layer_map': dd}
        assert got == want, f'case {i}: {got}, expected {want}'

