"""Step 5's claims, judged outside the student's kernel: multi-head attention two ways, LayerNorm, the feed-forward
map, the pre-norm block, gradients through deep stacks, parameter counts and ranks. Every reference (nn.MultiheadAttention,
F.layer_norm, the feed-forward map, the block, the counts) is recomputed here from the weights the student's code used."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course.grader.claims import (
    claim,
    expect_causal,
    expect_causal_at_every_position,
    expect_dtype,
    expect_independent,
    records,
    relative_gap,
)
from course.grader.probe import independence

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
# (d, n_head, T, degenerate): 'shared_proj' makes every head write through W_O^1 (the summed map has rank d/h, the
# heads' ranks add up to d); 'dead_head' sets head 0's W_V to 0
RANK_CASES = [(32, 4, 48, None), (24, 3, 5, None), (16, 2, 40, None), (16, 4, 8, 'shared_proj'), (16, 4, 8, 'dead_head'),
              (16, 4, 8, 'thin_slice')]  # 'thin_slice': half of head 1's slice of W_O (its columns in proj.weight) set to 0,
# so that the head map from that slice (rank hs/2) differs from one taken from rows of proj.weight (rank hs)
LN64 = (D, 100.0)  # LayerNorm on float64 rows offset by 100: normalised in float32, they would lose 1e-6 of their size


def make_inputs(seed=20261):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {}
    for i, (d, _, _, t, b, dtype, _) in enumerate(MHA_CASES):
        x[f'mha{i}.x'] = rng.standard_normal((b, t, d)).astype(dtype)
        x[f'mha{i}.W_qkv'] = (0.3 * rng.standard_normal((3 * d, d))).astype(dtype)  # loaded into the heads one by one:
        x[f'mha{i}.W_o'] = (0.3 * rng.standard_normal((d, d))).astype(dtype)  # one Head repeated keeps only the last block
    for i, (d, lead, scale, offset, _, _) in enumerate(LN_CASES):
        x[f'ln{i}.x'] = (scale * rng.standard_normal((*lead, d)) + offset).astype('float32')
        x[f'ln{i}.w'] = (1 + 0.5 * rng.standard_normal(d)).astype('float32')
        x[f'ln{i}.b'] = (0.5 * rng.standard_normal(d)).astype('float32')
    x['ln.g'] = rng.standard_normal((B, T, D)).astype('float32')  # the gradient at LayerNorm's output
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
    for i, (d, _, t, _) in enumerate(RANK_CASES):
        x[f'rank{i}.x'] = rng.standard_normal((1, t, d)).astype('float32')
    # the stand-ins' weights (PyTorch's parts put in a block to judge its wiring, and in the deep stacks)
    u = lambda bound, *shape: rng.uniform(-bound, bound, shape).astype('float32')  # noqa: E731
    for name in ('ln1', 'ln2'):
        x[f'sb.{name}.w'] = (1 + 0.3 * rng.standard_normal(D)).astype('float32')
        x[f'sb.{name}.b'] = (0.3 * rng.standard_normal(D)).astype('float32')
    x['sb.qkv'], x['sb.o'] = u((6 / (4 * D)) ** 0.5, 3 * D, D), u(D ** -0.5, D, D)
    x['sb.f1w'], x['sb.f1b'], x['sb.f2w'], x['sb.f2b'] = u(D ** -0.5, D, D), u(D ** -0.5, D), u(D ** -0.5, D, D), u(D ** -0.5, D)
    n_layer, dd, _, _ = DEEP  # the nn.Linear and nn.MultiheadAttention default initialisations
    x['deep.qkv'], x['deep.o'] = u((6 / (4 * dd)) ** 0.5, n_layer, 3 * dd, dd), u(dd ** -0.5, n_layer, dd, dd)
    x['deep.f1w'], x['deep.f1b'] = u(dd ** -0.5, n_layer, dd, dd), u(dd ** -0.5, n_layer, dd)
    x['deep.f2w'], x['deep.f2b'] = u(dd ** -0.5, n_layer, dd, dd), u(dd ** -0.5, n_layer, dd)
    # loglog_slope's points, drawn last so that every input above stays as it was: exact power laws c x^p, and scatter
    x['slope.xs'] = np.sort(rng.uniform(2, 2000, 6))
    x['slope.p'], x['slope.c'] = rng.uniform(-1.5, 3, 4), np.exp(rng.uniform(-4, 4, 4))
    x['slope.sx'] = np.sort(rng.uniform(1, 500, 7))
    x['slope.sy'] = x['slope.sx'] ** 1.7 * np.exp(rng.normal(0, 0.8, 7))  # noisy: the least-squares line is not the ends'
    more = np.random.default_rng(seed + 1)  # a generator of its own: every input above stays as it was
    for i in range(5, len(RANK_CASES)):
        x[f'rank{i}.x'] = more.standard_normal((1, RANK_CASES[i][2], RANK_CASES[i][0])).astype('float32')
    x['ln64.x'] = more.standard_normal((B, T, LN64[0])) + LN64[1]
    x['ln64.w'], x['ln64.b'] = 1 + 0.5 * more.standard_normal(LN64[0]), 0.5 * more.standard_normal(LN64[0])
    return x


def pytorch_parts(d, n_head, block_size, w, prefix, layer=None):
    """A block's four parts, PyTorch's, with the grader's weights w(f'{prefix}.<name>') (of layer `layer` of a stack, if
    given): ln1 and ln2 (nn.LayerNorm), attn (a causal bias-free nn.MultiheadAttention), ffwd (Linear, Tanh, Linear); the
    stand-ins put in a Block to judge its wiring, and stacked to judge input_grad_norms."""
    import torch
    import torch.nn as nn

    class TorchAttention(nn.Module):  # causal nn.MultiheadAttention, bias-free: the stand-in for MultiHeadAttention
        def __init__(self, d, n_head, block_size):
            super().__init__()
            self.mha = nn.MultiheadAttention(d, n_head, bias=False, batch_first=True)
            self.register_buffer('future', torch.ones(block_size, block_size, dtype=torch.bool).triu(1))

        def forward(self, x):
            return self.mha(x, x, x, attn_mask=self.future[:x.shape[1], :x.shape[1]], need_weights=False)[0]

    class StandIns(nn.Module):  # a block's four parts, PyTorch's, with the grader's weights
        def __init__(self, d, n_head, block_size, w, prefix, layer=None):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = TorchAttention(d, n_head, block_size)
            self.ffwd = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d))
            get = (lambda k: w(f'{prefix}.{k}')) if layer is None else (lambda k: w(f'{prefix}.{k}')[layer])
            with torch.no_grad():
                for name in ('ln1', 'ln2'):
                    if layer is None:
                        getattr(self, name).weight.copy_(get(f'{name}.w'))
                        getattr(self, name).bias.copy_(get(f'{name}.b'))
                self.attn.mha.in_proj_weight.copy_(get('qkv'))
                self.attn.mha.out_proj.weight.copy_(get('o'))
                for i, k in ((0, 'f1'), (2, 'f2')):
                    self.ffwd[i].weight.copy_(get(k + 'w'))
                    self.ffwd[i].bias.copy_(get(k + 'b'))

    return StandIns(d, n_head, block_size, w, prefix, layer)


PROBE_HELPERS = (independence, pytorch_parts)


@records
def multi_head_attention_on_the_cases(nb, inp, run, *, MHA_CASES):
    """MultiHeadAttention on each of MHA_CASES (seed 200 + i) with the grader's weights loaded head by head: its output
    and whether its heads are distinct objects, as 'mha<i>'; then what MultiHeadAttention(32, 4, 8) holds (an
    nn.ModuleList of heads, their sizes, proj's bias, its parameters) and BatchedMultiHeadAttention(32, 4, 8)'s number
    of parameters, as 'structure'."""
    import torch
    import torch.nn as nn

    t = inp.tensor
    for i, (d, h, t_max, _, _, dtype, _) in enumerate(MHA_CASES):
        def mha_case(i=i, d=d, h=h, t_max=t_max, dtype=dtype):
            torch.manual_seed(200 + i)
            m = nb.MultiHeadAttention(d, h, t_max).to(getattr(torch, dtype))
            W_q, W_k, W_v = t(f'mha{i}.W_qkv').chunk(3)
            with torch.no_grad():
                for j, head in enumerate(m.heads):  # the grader's weights, head by head, as the test cell loads them
                    hs = head.key.out_features
                    for name, W in (('query', W_q), ('key', W_k), ('value', W_v)):
                        getattr(head, name).weight.copy_(W[j * hs:(j + 1) * hs])
                m.proj.weight.copy_(t(f'mha{i}.W_o'))
                out = m(t(f'mha{i}.x'))
            return {'out': out, 'distinct': len({id(head) for head in m.heads}) == len(m.heads)}
        run(f'mha{i}', mha_case)

    def structure():
        m = nb.MultiHeadAttention(32, 4, 8)
        return {'modulelist': isinstance(m.heads, nn.ModuleList), 'n_heads': len(m.heads),
                'head_sizes': [h.key.out_features for h in m.heads], 'proj_bias': m.proj.bias is not None,
                'n_params': sum(p.numel() for p in m.parameters()),
                'batched_n_params': sum(p.numel() for p in nb.BatchedMultiHeadAttention(32, 4, 8).parameters())}
    run('structure', structure)


@records
def batched_attention_on_the_cases(nb, inp, run, *, MHA_CASES):
    """BatchedMultiHeadAttention on each of MHA_CASES (seed 210 + i, its own weights): its output and the weights it
    used (qkv, proj), as 'batched<i>'."""
    import torch

    t = inp.tensor
    for i, (d, h, t_max, _, _, dtype, _) in enumerate(MHA_CASES):
        def batched_case(i=i, d=d, h=h, t_max=t_max, dtype=dtype):
            torch.manual_seed(210 + i)
            m = nb.BatchedMultiHeadAttention(d, h, t_max).to(getattr(torch, dtype))
            with torch.no_grad():
                out = m(t(f'mha{i}.x'))
            return {'out': out, 'W_qkv': m.qkv.weight, 'W_o': m.proj.weight}
        run(f'batched{i}', batched_case)


@records
def the_two_ways_after_copy(nb, inp, run, *, D, H, T):
    """A MultiHeadAttention (seed 220) and a BatchedMultiHeadAttention given its heads' weights: both outputs on the
    first case's x and the weights copied, as 'copy'."""
    import torch

    t = inp.tensor

    def heads_weights(m):
        W = [torch.cat([getattr(h, n).weight for h in m.heads]) for n in ('query', 'key', 'value')]
        return torch.cat(W), m.proj.weight

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


@records
def layernorm_on_the_cases(nb, inp, run, *, LN_CASES, LN64):
    """LayerNorm on each of LN_CASES: fresh (its weight, bias and output), then with the grader's weight and bias, as
    'ln<i>'; for the first case also on shifted and scaled rows, its parameters and the gradients of a loss with
    respect to x, weight and bias. Then LayerNorm in float64 on rows offset by LN64[1], as 'ln64'."""
    import torch

    t = inp.tensor
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
            if i == 0:  # the parameters, and the gradients the trained model will follow
                rec_['params'] = ','.join(f'{n}{tuple(p.shape)}' for n, p in sorted(ln.named_parameters()))
                xg = x.clone().requires_grad_(True)
                (ln(xg) * t('ln.g')).sum().backward()
                rec_ |= {'grad_x': xg.grad, 'grad_w': ln.weight.grad, 'grad_b': ln.bias.grad}
            return rec_
        run(f'ln{i}', ln_case)

    def ln64():
        ln = nb.LayerNorm(LN64[0]).to(torch.float64)
        with torch.no_grad():
            ln.load_state_dict({'weight': t('ln64.w'), 'bias': t('ln64.b')})
            return {'out': ln(t('ln64.x'))}
    run('ln64', ln64)


@records
def feedforward_on_the_cases(nb, inp, run, *, FF_DIMS):
    """FeedForward(d) for each d of FF_DIMS (seed 230 + d): its output, its number of parameters and each of its
    nn.Linear maps' weight and bias, as 'ff<d>'."""
    import torch
    import torch.nn as nn

    t = inp.tensor

    def linears(m):
        lin = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
        return {f'lin{i}.{n}': getattr(mod, n) for i, mod in enumerate(lin) for n in ('weight', 'bias')
                if getattr(mod, n) is not None} | {'n_linear': len(lin)}

    for dd in FF_DIMS:
        def ff_case(dd=dd):
            torch.manual_seed(230 + dd)
            f = nb.FeedForward(dd)
            with torch.no_grad():
                return {'out': f(t(f'ff{dd}.x')), 'n_params': sum(p.numel() for p in f.parameters())} | linears(f)
        run(f'ff{dd}', ff_case)


@records
def block_with_pytorch_parts(nb, inp, run, *, D, H, T):
    """Block's wiring, with PyTorch's parts and the grader's weights in place of the student's (pytorch_parts): with
    both branches' last maps at zero (seed 240), as 'residual'; as it is (seed 241), on x and on x + 10, as 'block'."""
    import torch

    t = inp.tensor

    def with_stand_ins(blk):
        parts = pytorch_parts(D, H, T, t, 'sb')
        blk.ln1, blk.attn, blk.ln2, blk.ffwd = parts.ln1, parts.attn, parts.ln2, parts.ffwd
        return blk

    def block_residual():
        torch.manual_seed(240)
        blk = with_stand_ins(nb.Block(D, H, T))
        with torch.no_grad():
            blk.attn.mha.out_proj.weight.zero_()
            blk.ffwd[-1].weight.zero_()
            blk.ffwd[-1].bias.zero_()
            return {'out': blk(t('block.x'))}
    run('residual', block_residual)

    def block_reference():
        torch.manual_seed(241)
        blk = with_stand_ins(nb.Block(D, H, T))
        with torch.no_grad():
            return {'out': blk(t('block.x')), 'offset': blk(t('block.x') + 10)}
    run('block', block_reference)


@records
def heads_and_layernorms_apart(nb, inp, run, *, D, H, T):
    """The modules the contracts name separately: whether heads[0] and heads[1] of MultiHeadAttention(32, 4, 8) start
    with the same query weights and are two (independence), as 'apart.heads'; whether Block's ln1 and ln2 are two, as
    'apart.ln'; and Block(D, H, T)'s number of parameters."""
    import torch

    def apart():
        m = nb.MultiHeadAttention(32, 4, 8)
        out = {'heads.same_init': bool(torch.equal(m.heads[0].query.weight, m.heads[1].query.weight))}
        out |= {f'heads.{k}': v for k, v in independence(m.heads[0], m.heads[1]).items()}
        blk = nb.Block(D, H, T)
        return out | {f'ln.{k}': v for k, v in independence(blk.ln1, blk.ln2).items()} | {
            'block_n_params': sum(p.numel() for p in blk.parameters())}
    run('apart', apart)


@records
def block_causality_by_perturbation(nb, inp, run, *, D, H, T):
    """A Block (seed 242) on x and on each copy with position j replaced: 'pert.base' and 'pert.out<j>'."""
    import torch

    t = inp.tensor

    def perturbed():
        torch.manual_seed(242)
        blk = nb.Block(D, H, T)
        with torch.no_grad():
            return {f'out{j}': blk(t(f'pert{j}.x')) for j in range(T)} | {'base': blk(t('block.x'))}
    run('pert', perturbed)


@records
def input_grad_norms_of_deep_stacks(nb, inp, run, *, DEEP):
    """input_grad_norms on a stack of DEEP[0] blocks of PyTorch's parts with the grader's weights (pytorch_parts, seed
    250), with and without residuals and LayerNorm: 'deep.<residual><norm>'."""
    import torch

    t = inp.tensor

    def deep():
        n_layer, dd, hh, tt = DEEP
        torch.manual_seed(250)
        blocks = [pytorch_parts(dd, hh, tt, t, 'deep', layer) for layer in range(n_layer)]  # the grader's weights
        x, g = t('deep.x'), t('deep.g')
        return {f'{int(r)}{int(n)}': nb.input_grad_norms(blocks, x, g, r, n) for r in (True, False) for n in (True, False)}
    run('deep', deep)


@records
def parameter_counts(nb, inp, run, *, BLOCK_SIZES, GPT_SIZES):
    """block_params for each d of BLOCK_SIZES and gpt_params for each of GPT_SIZES, with and without attention biases
    (and tied or not): 'block_params.<d>_<bias>', 'gpt_params.<i>_<bias>_<tied>'."""
    run('block_params', lambda: {f'{dd}_{int(ab)}': nb.block_params(dd, attn_bias=ab) for dd in BLOCK_SIZES
                                 for ab in (False, True)})
    run('gpt_params', lambda: {f'{i}_{int(ab)}_{int(tied)}': nb.gpt_params(*size, attn_bias=ab, tied=tied)
                               for i, size in enumerate(GPT_SIZES) for ab in (False, True) for tied in (False, True)})


@records
def rank_report_on_the_cases(nb, inp, run, *, RANK_CASES):
    """rank_report of a MultiHeadAttention (seed 260 + i, made degenerate as the case says) for each of RANK_CASES: the
    ranks of each head's scores and output map and of the layer's map, as 'rank.<i>'."""
    import torch

    t = inp.tensor

    def ranks():
        out = {}
        for i, (dd, hh, tt, degenerate) in enumerate(RANK_CASES):
            torch.manual_seed(260 + i)
            m = nb.MultiHeadAttention(dd, hh, max(tt, 8))
            hs = dd // hh
            with torch.no_grad():
                if degenerate == 'shared_proj':
                    for j in range(1, hh):
                        m.proj.weight[:, j * hs:(j + 1) * hs] = m.proj.weight[:, :hs]
                if degenerate == 'dead_head':
                    m.heads[0].value.weight.zero_()
                if degenerate == 'thin_slice':
                    m.proj.weight[:, hs:hs + hs // 2] = 0
            r = nb.rank_report(m, t(f'rank{i}.x'))
            out |= {f'{i}.scores': list(r['scores']), f'{i}.head_maps': list(r['head_maps']), f'{i}.layer_map': r['layer_map']}
        return out
    run('rank', ranks)


@records
def loglog_slope_on_the_cases(nb, inp, run):
    """loglog_slope on exact power laws (each value and whether it is a Python float), on scattered points as lists and
    as 1-D tensors: 'slope.power<i>', 'slope.lsq', 'slope.tensors'."""
    t = inp.tensor

    def slopes():
        xs = [float(v) for v in inp['slope.xs']]
        out = {}
        for i, (p, c) in enumerate(zip(inp['slope.p'].tolist(), inp['slope.c'].tolist(), strict=True)):
            got = nb.loglog_slope(xs, [c * v ** p for v in xs])
            out[f'power{i}'], out[f'power{i}_is_float'] = float(got), isinstance(got, float)
        out['lsq'] = nb.loglog_slope([float(v) for v in inp['slope.sx']], [float(v) for v in inp['slope.sy']])
        out['tensors'] = nb.loglog_slope(t('slope.sx'), t('slope.sy'))  # 1-D tensors, as the contract allows
        return out
    run('slope', slopes)


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
        if kind == 'mha':  # MultiHeadAttention runs on the grader's weights, loaded into its heads one by one
            W_qkv, W_o = inp.tensor(f'mha{i}.W_qkv'), inp.tensor(f'mha{i}.W_o')
        else:
            W_qkv, W_o = rec.tensor(f'{kind}{i}.W_qkv'), rec.tensor(f'{kind}{i}.W_o')
        gap = relative_gap(rec.tensor(f'{kind}{i}.out'), torch_mha(inp.tensor(f'mha{i}.x'), W_qkv, W_o, h))
        shared = kind == 'mha' and not bool(rec.tensor(f'mha{i}.distinct'))
        assert gap < tol, (f'case {i}: relative difference {gap:.3g} from nn.MultiheadAttention'
                           + ('; the heads are one Head repeated: make n_head distinct Heads' if shared else ''))


@claim
def mha_matches_torch_multihead_attention(inp, rec):
    matches_torch(inp, rec, 'mha')


@claim
def mha_has_h_bias_free_heads_and_projection(inp, rec):
    s = {k: rec.tensor(f'structure.{k}').tolist() for k in ('modulelist', 'n_heads', 'head_sizes', 'proj_bias', 'n_params')}
    want = {'modulelist': True, 'n_heads': 4, 'head_sizes': [8] * 4, 'proj_bias': False, 'n_params': 4096}
    assert s == want, (f'MultiHeadAttention(32, 4, 8): expected {want}, got {s}; 4 heads of size d // n_head in an '
                       'nn.ModuleList, each its own Head (not one Head repeated), and proj without bias')
    expect_independent({k: rec[f'apart.heads.{k}'] for k in ('distinct', 'shared', 'followed')},
                       'heads[0] and heads[1] of MultiHeadAttention(32, 4, 8)', 'make n_head Heads, each with its own maps')
    assert not bool(rec['apart.heads.same_init']), (
        'MultiHeadAttention(32, 4, 8): heads[0] and heads[1] start with the same query weights, so they would compute the '
        'same thing and get the same gradients for ever; make each Head fresh (its own random initialisation), not a copy')


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
        assert torch.equal(rec.tensor(f'ln{i}.fresh_w'), torch.ones(d)), f'case {i}: a fresh weight is not ones'
        assert torch.equal(rec.tensor(f'ln{i}.fresh_b'), torch.zeros(d)), f'case {i}: a fresh bias is not zeros'
    ln_computes_in_float64(inp, rec)
    params = rec.text('ln0.params')
    assert params == f'bias({D},),weight({D},)', f'LayerNorm({D}) has the parameters {params}, expected weight and bias ({D},)'
    xg = inp.tensor('ln0.x').requires_grad_(True)
    w, b = (inp.tensor(f'ln0.{k}').requires_grad_(True) for k in 'wb')
    (F.layer_norm(xg, (D,), w, b, LN_CASES[0][4]) * inp.tensor('ln.g')).sum().backward()
    for what, key, want in (('the input', 'grad_x', xg.grad), ('weight', 'grad_w', w.grad), ('bias', 'grad_b', b.grad)):
        assert relative_gap(rec.tensor(f'ln0.{key}'), want) < 1e-4, (
            f'the gradient with respect to {what} differs from F.layer_norm\'s; keep the mean and variance in the graph')


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
        n = int(rec.tensor(f'ff{dd}.n_linear'))
        assert n == 2, f'FeedForward({dd}) holds {n} nn.Linear maps, expected 2'
        assert f'ff{dd}.lin0.bias' in rec and f'ff{dd}.lin1.bias' in rec, (
            f'FeedForward({dd}): a linear map without bias; both W_1 and W_2 carry one')
        w1, b1, w2, b2 = (rec.tensor(f'ff{dd}.lin{i}.{n}') for i in (0, 1) for n in ('weight', 'bias'))
        shapes = [tuple(w1.shape), tuple(w2.shape)]
        assert shapes == [(4 * dd, dd), (dd, 4 * dd)], f'FeedForward({dd}): weights {shapes}, expected d -> 4d -> d'
        assert int(rec.tensor(f'ff{dd}.n_params')) == 8 * dd * dd + 5 * dd, (
            f'FeedForward({dd}): {int(rec.tensor(f"ff{dd}.n_params")):,} parameters, more than its two linear maps hold')
        xx, out = inp.tensor(f'ff{dd}.x'), rec.tensor(f'ff{dd}.out')
        ref = F.linear(F.gelu(F.linear(xx, w1, b1)), w2, b2)
        tanh = F.linear(F.gelu(F.linear(xx, w1, b1), approximate='tanh'), w2, b2)
        gap = (out - ref).abs().max()
        assert gap < 1e-5, (f'FeedForward({dd}) differs from Linear2(GELU(Linear1(x))) by {gap:.3g}; '
                            + ("that is GPT-2's tanh GELU: use the exact one, nn.GELU()" if (out - tanh).abs().max() < 1e-5
                               else 'is the GELU missing, a ReLU, or misplaced?'))


def attention(xx, W_qkv, W_o, n_head):
    """Causal multi-head attention by its formula (differentiable): the grader's reference for the stand-ins' attn."""
    b, t, c = xx.shape
    q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (xx @ W_qkv.T).split(c, -1))
    s = (q @ k.transpose(-2, -1) / (c // n_head) ** 0.5).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -math.inf)
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c) @ W_o.T


def stand_in_ffwd(z, w1, b1, w2, b2):
    return F.linear(torch.tanh(F.linear(z, w1, b1)), w2, b2)


def block_ref(inp, xx):
    """The pre-norm block made of the stand-ins (PyTorch's parts with the grader's weights), on xx."""
    w = lambda k: inp.tensor(f'sb.{k}')  # noqa: E731
    h = xx + attention(F.layer_norm(xx, (D,), w('ln1.w'), w('ln1.b')), w('qkv'), w('o'), H)
    return h + stand_in_ffwd(F.layer_norm(h, (D,), w('ln2.w'), w('ln2.b')), w('f1w'), w('f1b'), w('f2w'), w('f2b'))


@claim
def block_residual_path(inp, rec):
    gap = (rec.tensor('residual.out') - inp.tensor('block.x')).abs().max()
    assert gap == 0, (f'with both branches\' last maps at zero (PyTorch\'s parts in your Block), max |Block(x) - x| = '
                      f'{gap:.3g}, expected 0; add each branch to x itself, and do not normalise after the addition')


@claim
def block_is_pre_norm(inp, rec):
    assert (rec.tensor('block.offset').mean(-1) > 5).all(), (
        'the output of Block(x + 10) lost its offset (PyTorch\'s parts in your Block): the sum is normalised (post-norm)')
    gap = (rec.tensor('block.out') - block_ref(inp, inp.tensor('block.x'))).abs().max()
    assert gap < 1e-4, (f'Block(x) differs from h + ffwd(ln2(h)), h = x + attn(ln1(x)), by {gap:.3g} (PyTorch\'s parts in '
                        'your Block); is ln1 on the first branch and ln2 on the second, reading h?')
    block_has_two_layernorms(inp, rec)


@claim
def block_causal_by_perturbation(inp, rec):
    expect_causal(rec.tensor('pert.base'), rec.tensor('pert.out5'), 5)


@claim
def block_causal_by_gradient(inp, rec):
    expect_causal_at_every_position([rec.tensor(f'pert.out{j}') for j in range(T)], rec.tensor('pert.base'), 3)


def reference_norms(inp, residual, norm):
    """input_grad_norms by its definition on the stand-in stack (the grader's weights), in float64."""
    w = lambda k, layer: inp.tensor(f'deep.{k}')[layer].double()  # noqa: E731
    xs = [inp.tensor('deep.x').double().requires_grad_(True)]
    h = xs[0]
    for layer in range(DEEP[0]):
        ln = (lambda z: F.layer_norm(z, (DEEP[1],))) if norm else (lambda z: z)
        a = attention(ln(h), w('qkv', layer), w('o', layer), DEEP[2])
        h = h + a if residual else a
        f = stand_in_ffwd(ln(h), *(w(k, layer) for k in ('f1w', 'f1b', 'f2w', 'f2b')))
        h = h + f if residual else f
        xs.append(h)
    grads = torch.autograd.grad((h * inp.tensor('deep.g').double()).sum(), xs)
    return torch.stack([gr.norm() for gr in grads])


HINTS = {'11': 'add each branch to the stream and use the blocks\' ln1 and ln2',
         '10': 'with norm=False replace ln1 and ln2 by the identity, also when residual=True',
         '01': 'with residual=False drop both additions, and keep ln1 and ln2 when norm=True',
         '00': 'with residual=False and norm=False: no additions, no LayerNorm'}


def deep_norms(inp, rec, config):
    """The norms input_grad_norms returned for config (residual, norm as '1'/'0'), each equal to the reference's."""
    n = rec.tensor(f'deep.{config}').double()
    what = f'input_grad_norms(residual={config[0] == "1"}, norm={config[1] == "1"}) on a stack of PyTorch\'s parts'
    assert n.shape == (DEEP[0] + 1,), f'{what}: {tuple(n.shape)} norms, expected L + 1 = {DEEP[0] + 1} (l = 0..L)'
    want = reference_norms(inp, config[0] == '1', config[1] == '1')
    bad = ((n - want).abs() > 1e-3 * want).nonzero().flatten().tolist()
    assert not bad, (f'{what}: at l = {bad} expected {[float(f"{v:.3g}") for v in want[bad]]}, got '
                     f'{[float(f"{v:.3g}") for v in n[bad]]}; {HINTS[config]}')
    return n


@claim
def residuals_keep_the_input_gradient(inp, rec):
    for config in ('11', '10'):
        n = deep_norms(inp, rec, config)
        assert 1 <= n[0] / n[-1] < 10, f'residual={config[0]}, norm={config[1]}: input/top ratio {n[0] / n[-1]:.3g}'


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
    for i, (dd, hh, tt, degenerate) in enumerate(RANK_CASES):
        got = {k: rec.tensor(f'rank.{i}.{k}').tolist() for k in ('scores', 'head_maps', 'layer_map')}
        hs = dd // hh
        want = {'scores': [min(hs, tt)] * hh, 'head_maps': [0 if degenerate == 'dead_head' and j == 0 else
                                                            hs // 2 if degenerate == 'thin_slice' and j == 1 else hs
                                                            for j in range(hh)],
                'layer_map': {'shared_proj': hs, 'dead_head': dd - hs, 'thin_slice': dd - hs // 2}.get(degenerate, dd)}
        assert got == want, (f'd={dd}, {hh} heads, T={tt}{", " + degenerate if degenerate else ""}: expected {want}, got '
                             f'{got}; the layer map is the rank of the summed matrix sum_i W_V^i W_O^i, not a sum of ranks')



@claim
def loglog_slope_of_power_laws(inp, rec):
    for i, p in enumerate(inp.tensor('slope.p').tolist()):
        assert bool(rec.tensor(f'slope.power{i}_is_float')), 'loglog_slope does not return a Python float (.item())'
        got = float(rec.tensor(f'slope.power{i}'))
        assert abs(got - p) < 1e-5, (f'on an exact power law y = c x^{p:.4f} the log-log slope is {p:.4f}; got {got:.6g}: take '
                                     'the log of both axes and regress log y on log x, means subtracted')


@claim
def loglog_slope_is_least_squares(inp, rec):
    want = np.polyfit(np.log(inp['slope.sx']), np.log(inp['slope.sy']), 1)[0]
    for key in ('lsq', 'tensors'):
        got = float(rec.tensor(f'slope.{key}'))
        assert abs(got - want) < 1e-5, (f'on 7 scattered points ({key}) the least-squares slope is {want:.6f}; got {got:.6g}: '
                                        'fit every point, not the two ends')


def ln_computes_in_float64(inp, rec):
    """LayerNorm(d).to(torch.float64) on float64 rows offset by LN64[1]: float64 out, equal to F.layer_norm to float64
    rounding (a LayerNorm that normalises in float32 and casts back loses about 1e-6 of each row here)."""
    out, ref = rec.tensor('ln64.out'), F.layer_norm(inp.tensor('ln64.x'), (LN64[0],), inp.tensor('ln64.w'), inp.tensor('ln64.b'))
    cause = 'compute in the dtype of x, as the contract says: no .float() inside, no float32 constant'
    expect_dtype(out, 'float64', 'LayerNorm on a float64 x (the module in float64)', cause)
    gap = relative_gap(out, ref, 'LayerNorm on a float64 x')
    assert gap < 1e-12, f'LayerNorm on float64 rows: relative difference {gap:.3g} from F.layer_norm (allowed 1e-12); {cause}'


def block_has_two_layernorms(inp, rec):
    """Block(D, H, T) holds the parameters its parts do (12 d^2 + 13 d), and ln1 and ln2 are two LayerNorms: moving
    one's parameters leaves the other's alone."""
    cause = 'make ln1 and ln2 two LayerNorm(d) objects: one registered under both names is one set of weights'
    expect_independent({k: rec[f'apart.ln.{k}'] for k in ('distinct', 'shared', 'followed')}, 'Block\'s ln1 and ln2', cause)
    n, want = int(rec['apart.block_n_params']), true_block_params(D, False)
    assert n == want, f'Block({D}, {H}, {T}) has {n:,} parameters, expected {want:,} (12 d^2 + 13 d); {cause}'
