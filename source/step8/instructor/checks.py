"""Step 8's claims, judged outside the student's kernel: RMSNorm (against F.rms_norm, values and gradients), the rotary
angles and rotation (against both pairings' rotations, and the propositions P1-P3 on the recorded rotations), the SwiGLU
width and network (against a reference with F.silu), grouped-query attention (against scaled_dot_product_attention with
enable_gqa, with and without rotary angles, as multi-head and as multi-query attention), the modern block's wiring
(PyTorch's parts put in it), the modern GPT (its logits against its own parts composed in order) and the KV cache's size.
Each claim judges its own function: the probe hands GroupedQueryAttention a reference rotation and ModernBlock
PyTorch's parts, so that one bug costs the tests of its own function."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from course.grader.claims import claim, expect_causal, expect_independent, records, relative_gap, tolerance
from course.grader.probe import independence

V = 65
D, NH, NKV, T, B = 32, 4, 2, 8, 4
RMS_CASES = [  # (d, leading shape, scale, offset, eps, dtype)
    (D, (B, T), 3.0, 2.0, 1e-6, 'float32'),
    (8, (5,), 1.0, 0.0, 1e-6, 'float32'),
    (16, (2, 3), 1e-3, 0.0, 1e-6, 'float32'),  # rows of RMS 1e-3: eps inside the square root matters
    (12, (2, 3), 0.05, 0.0, 1e-2, 'float32'),  # eps passed to the constructor
    (24, (3, 4), 2.0, 0.5, 1e-6, 'float64'),
]
ANGLE_CASES = [(4, 100.0), (8, 10000.0), (2, 10000.0), (16, 500.0)]  # (head_size, base); positions drawn in make_inputs
ROT_CASES = [((2, 3, 7, 8), 'float32'), ((5, 16), 'float64'), ((1, 4, 6, 2), 'float32')]  # (shape of x, dtype)
HIDDEN_DIMS = (32, 8, 48, 64, 100, 768)
GQA_CASES = [  # (d, n_head, n_kv_head, T, dtype)
    (D, NH, NKV, T, 'float32'),
    (48, 6, 3, 5, 'float32'),
    (48, 6, 2, 7, 'float64'),
    (24, 3, 1, 4, 'float32'),
    (16, 4, 4, 1, 'float32'),
    (64, 8, 2, 9, 'float32'),
]
KV_CASES = [(5, 2, 8, 10, 3, 2), (12, 12, 64, 1024, 1, 2), (80, 8, 128, 4096, 1, 2), (2, 1, 8, 64, 4, 4),
            (32, 8, 128, 8192, 16, 2)]  # (n_layer, n_kv_head, head_size, T, B, bytes_per_number)
GPT_SMALL = (D, NH, NKV, 2, 24)  # (d, n_head, n_kv_head, n_layer, hidden)
GPT_REF = (48, 6, 3, 3, 40)
PROBE_HELPERS = (independence,)  # distinct modules (docs/adding-a-step.md, checks by kind): a block's two norms, the blocks


def make_inputs(seed=20268):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {}
    for i, (d, lead, scale, offset, _, dtype) in enumerate(RMS_CASES):
        x[f'rms{i}.x'] = (scale * rng.standard_normal((*lead, d)) + offset).astype(dtype)
        x[f'rms{i}.w'] = (1 + 0.5 * rng.standard_normal(d)).astype(dtype)
    x['rms.g'] = rng.standard_normal((B, T, D)).astype('float32')  # the gradient arriving at RMSNorm's output
    x['rms.scale'] = np.exp(2 * rng.random((B, T, 1))).astype('float32')
    for i in range(len(ANGLE_CASES)):
        x[f'ang{i}.pos'] = rng.integers(-50, 5000, 7)
    for i, (shape, dtype) in enumerate(ROT_CASES):
        x[f'rot{i}.x'] = rng.standard_normal(shape).astype(dtype)
        x[f'rot{i}.ang'] = 10 * rng.standard_normal((shape[-2], shape[-1] // 2))
    hs = D // NH
    x['p1.q'], x['p1.k'] = rng.standard_normal((T, hs)), rng.standard_normal((T, hs))  # float64
    x['p1.m'], x['p1.n'] = rng.integers(0, 64, T), rng.integers(0, 64, T)
    x['p2.x'] = rng.standard_normal((B, NH, T, hs)).astype('float32')
    x['p2.pos'] = np.array([0, 1, 2, 10, 100, 1000, 5000, 12345])
    x['p3.x'] = rng.standard_normal((B, NH, 2, hs)).astype('float32')
    x['swi.x'] = rng.standard_normal((B, T, D)).astype('float32')
    for name, shape in (('gate', (20, D)), ('up', (20, D)), ('down', (D, 20))):
        x[f'swi.{name}'] = (0.3 * rng.standard_normal(shape)).astype('float32')
    for i, (d, nh, nkv, t, dtype) in enumerate(GQA_CASES):
        hs_i = d // nh
        x[f'gqa{i}.x'] = rng.standard_normal((2, t, d)).astype(dtype)
        for name, rows in (('query', d), ('key', nkv * hs_i), ('value', nkv * hs_i), ('proj', d)):
            x[f'gqa{i}.{name}'] = (0.3 * rng.standard_normal((rows, d))).astype(dtype)
        x[f'gqa{i}.pos'] = np.arange(t) + rng.integers(0, 30)
    x['mha.x'] = rng.standard_normal((B, T, D)).astype('float32')
    for name in ('query', 'key', 'value', 'proj'):
        x[f'mha.{name}'] = (0.3 * rng.standard_normal((D, D))).astype('float32')
    # the stand-ins' weights for ModernBlock's wiring
    x['blk.x'] = rng.standard_normal((B, T, D)).astype('float32')
    x['blk.n1'], x['blk.n2'] = ((1 + 0.3 * rng.standard_normal(D)).astype('float32') for _ in range(2))
    x['blk.qkv'] = (0.2 * rng.standard_normal((3 * D, D))).astype('float32')
    x['blk.f1w'], x['blk.f2w'] = ((0.2 * rng.standard_normal((D, D))).astype('float32') for _ in range(2))
    x['blk.f1b'], x['blk.f2b'] = ((0.2 * rng.standard_normal(D)).astype('float32') for _ in range(2))
    x['gpt.idx'], x['gpt.tgt'] = rng.integers(0, V, (3, 16)), rng.integers(0, V, (3, 16))
    x['gpt.idx2'] = x['gpt.idx'].copy()
    x['gpt.idx2'][:, 5] = (x['gpt.idx'][:, 5] + rng.integers(1, V, 3)) % V
    x['ref.idx'] = rng.integers(0, V, (2, 13))
    return x


# ------------------------------------------------------------------------------------------------------------------
# The probe: its parts, run in the student's kernel in this order (the notebook's order of tasks), each recording under
# the names its run() calls give

@records
def rmsnorm_on_the_cases(nb, inp, run, *, RMS_CASES):
    """RMSNorm(d, eps) for each case of RMS_CASES, with the grader's weight: its fresh weight, its parameters and its
    output; in case 0 also its output on a rescaled and on a shifted input, and its gradients ('rms<i>')."""
    import torch

    t = inp.tensor

    for i, (d, _, _, _, eps, dtype) in enumerate(RMS_CASES):
        def rms_case(i=i, d=d, eps=eps, dtype=dtype):
            m = nb.RMSNorm(d, eps=eps).to(getattr(torch, dtype))
            out = {'fresh_w': m.weight.detach().clone(),
                   'params': ','.join(f'{n}{tuple(p.shape)}' for n, p in sorted(m.named_parameters()))}
            with torch.no_grad():
                m.weight.copy_(t(f'rms{i}.w'))
                x = t(f'rms{i}.x')
                out['out'] = m(x)
                if i == 0:
                    out |= {'scaled': m(x * t('rms.scale')), 'shifted': m(x + 3)}
            if i == 0:
                xg = x.clone().requires_grad_(True)
                (m(xg) * t('rms.g')).sum().backward()
                out |= {'grad_x': xg.grad, 'grad_w': m.weight.grad}
            return out
        run(f'rms{i}', rms_case)


@records
def rope_angles_on_the_cases(nb, inp, run, *, ANGLE_CASES):
    """rope_angles on the grader's positions for each (head_size, base) of ANGLE_CASES ('ang')."""
    t = inp.tensor

    run('ang', lambda: {f'{i}': nb.rope_angles(t(f'ang{i}.pos'), hs, base) for i, (hs, base) in enumerate(ANGLE_CASES)})


@records
def apply_rotary_on_the_cases(nb, inp, run, *, ROT_CASES):
    """apply_rotary on the grader's x and angles for each case of ROT_CASES, and whether it left x unchanged; a quarter
    turn of two vectors by hand ('rot')."""
    import math

    import torch

    t = inp.tensor

    def rotations():
        out = {}
        for i, _ in enumerate(ROT_CASES):
            x = t(f'rot{i}.x')
            kept = x.clone()
            out[f'{i}'] = nb.apply_rotary(x, t(f'rot{i}.ang'))
            out[f'{i}_kept'] = bool(torch.equal(x, kept))
        out['quarter'] = nb.apply_rotary(torch.tensor([[1.0, 0.0], [3.0, 4.0]]), torch.tensor([[math.pi / 2], [math.pi / 2]]))
        return out
    run('rot', rotations)


@records
def rotary_propositions(nb, inp, run, *, D, NH):
    """The rotations P1-P3 are judged on: queries and keys turned at positions shifted by 0, 17 and 500, and a key at the
    offsets n - m (P1); vectors at far positions (P2); at positions 0 and 1 (P3) ('prop')."""
    import torch

    t = inp.tensor

    def propositions():
        hs = D // NH
        q, k, m, n = t('p1.q'), t('p1.k'), t('p1.m'), t('p1.n')
        out = {}
        for s in (0, 17, 500):
            out[f'rq{s}'] = nb.apply_rotary(q, nb.rope_angles(m + s, hs))
            out[f'rk{s}'] = nb.apply_rotary(k, nb.rope_angles(n + s, hs))
        out['rel'] = nb.apply_rotary(k, nb.rope_angles(n - m, hs))
        out['p2'] = nb.apply_rotary(t('p2.x'), nb.rope_angles(t('p2.pos'), hs))
        out['p3'] = nb.apply_rotary(t('p3.x'), nb.rope_angles(torch.tensor([0, 1]), hs))
        return out
    run('prop', propositions)


@records
def swiglu_hidden_of_the_widths(nb, inp, run, *, HIDDEN_DIMS):
    """swiglu_hidden(d) for each d of HIDDEN_DIMS, and whether each is an int ('hidden')."""
    run('hidden', lambda: {f'{dd}': nb.swiglu_hidden(dd) for dd in HIDDEN_DIMS}
        | {f'{dd}_int': isinstance(nb.swiglu_hidden(dd), int) for dd in HIDDEN_DIMS})


@records
def swiglu_with_the_grader_weights(nb, inp, run, *, D):
    """SwiGLU(D, 20): its parameters and Linear modules, and its output with the grader's weights, in float32 and in
    float64 ('swi')."""
    import torch
    import torch.nn as nn

    t = inp.tensor

    def swiglu():
        torch.manual_seed(11)
        m = nb.SwiGLU(D, 20)
        out = {'params': ','.join(f'{n}{tuple(p.shape)}' for n, p in sorted(m.named_parameters())),
               'n_linear': sum(isinstance(mod, nn.Linear) for mod in m.modules())}
        with torch.no_grad():
            for name in ('gate', 'up', 'down'):
                getattr(m, f'w_{name}').weight.copy_(t(f'swi.{name}'))
            out['out'] = m(t('swi.x'))
            out['out64'] = m.double()(t('swi.x').double())
        return out
    run('swi', swiglu)


@records
def gqa_on_the_cases(nb, inp, run, *, GQA_CASES):
    """GroupedQueryAttention with the grader's weights for each case of GQA_CASES: its output without angles, and with
    the angles of the grader's positions and the grader's rotation in place of apply_rotary ('gqa<i>')."""
    import torch

    t = inp.tensor

    def rotate_halves(x, angles):  # the grader's rotation, handed to GroupedQueryAttention in place of apply_rotary
        h = x.shape[-1] // 2
        c, s = angles.to(x.dtype).cos(), angles.to(x.dtype).sin()
        return torch.cat([x[..., :h] * c - x[..., h:] * s, x[..., :h] * s + x[..., h:] * c], -1)

    def loaded(i, d, nh, nkv, dtype):
        m = nb.GroupedQueryAttention(d, nh, nkv).to(getattr(torch, dtype))
        with torch.no_grad():
            for name in ('query', 'key', 'value', 'proj'):
                getattr(m, name).weight.copy_(t(f'gqa{i}.{name}'))
        return m

    for i, (d, nh, nkv, _, dtype) in enumerate(GQA_CASES):
        def gqa_case(i=i, d=d, nh=nh, nkv=nkv, dtype=dtype):
            torch.manual_seed(130 + i)
            m = loaded(i, d, nh, nkv, dtype)
            x = t(f'gqa{i}.x')
            hs = d // nh
            pos = t(f'gqa{i}.pos')
            angles = pos.double()[:, None] * 10000.0 ** (-torch.arange(hs // 2).double() * 2 / hs)[None]
            with torch.no_grad():
                out = {'out': m(x)}
                with nb.replaced(apply_rotary=rotate_halves):
                    out['rot'] = m(x, angles)
            return out
        run(f'gqa{i}', gqa_case)


@records
def gqa_as_mha_and_as_mqa(nb, inp, run, *, D, NH):
    """GroupedQueryAttention(D, NH, NH) with the grader's multi-head weights: its output and size ('asmha');
    GroupedQueryAttention(D, NH, 1)'s parameters, and whether (D, NH, 3) is refused ('mqa')."""
    import torch

    t = inp.tensor

    def gqa_as_mha():
        m = nb.GroupedQueryAttention(D, NH, NH)
        with torch.no_grad():
            for name in ('query', 'key', 'value', 'proj'):
                getattr(m, name).weight.copy_(t(f'mha.{name}'))
            return {'out': m(t('mha.x')), 'n_params': sum(p.numel() for p in m.parameters())}
    run('asmha', gqa_as_mha)

    def mqa():
        m = nb.GroupedQueryAttention(D, NH, 1)
        out = {'params': ','.join(f'{n}{tuple(p.shape)}' for n, p in sorted(m.named_parameters()))}
        try:
            nb.GroupedQueryAttention(D, NH, 3)
            out['refused'] = False
        except (ValueError, AssertionError):
            out['refused'] = True
        return out
    run('mqa', mqa)


@records
def modern_block_with_stand_ins(nb, inp, run, *, D, NH, NKV, T):
    """ModernBlock with PyTorch's parts put in it (RMSNorm, a causal attention that records its angles, an MLP) and the
    grader's weights: its output, and whether it handed attn its angles once ('blk'); a fresh block's two norms apart
    ('norms')."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    t = inp.tensor

    class StandInAttention(nn.Module):  # PyTorch's causal attention, one head, recording the angles it is given
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.seen = []

        def forward(self, x, angles=None):
            self.seen.append(angles)
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def block():
        torch.manual_seed(17)
        blk = nb.ModernBlock(D, NH, NKV, 24)
        blk.norm1, blk.norm2 = nn.RMSNorm(D, eps=1e-6), nn.RMSNorm(D, eps=1e-6)
        blk.attn = StandInAttention()
        blk.mlp = nn.Sequential(nn.Linear(D, D), nn.Tanh(), nn.Linear(D, D))
        angles = torch.arange(T).double()[:, None] * torch.ones(1, D // NH // 2, dtype=torch.float64)
        with torch.no_grad():
            blk.norm1.weight.copy_(t('blk.n1'))
            blk.norm2.weight.copy_(t('blk.n2'))
            blk.attn.qkv.weight.copy_(t('blk.qkv'))
            blk.mlp[0].weight.copy_(t('blk.f1w'))
            blk.mlp[0].bias.copy_(t('blk.f1b'))
            blk.mlp[2].weight.copy_(t('blk.f2w'))
            blk.mlp[2].bias.copy_(t('blk.f2b'))
            out = blk(t('blk.x'), angles)
        return {'out': out, 'angles_passed': len(blk.attn.seen) == 1 and blk.attn.seen[0] is angles}
    run('blk', block)

    def block_norms():  # a fresh block's two norms, named apart in its contract
        torch.manual_seed(17)
        blk = nb.ModernBlock(D, NH, NKV, 24)
        return independence(blk.norm1, blk.norm2)
    run('norms', block_norms)


@records
def modern_gpt_shapes(nb, inp, run, *, GPT_SMALL, V):
    """ModernGPT(V, *GPT_SMALL): its submodules, embedding tables, size, tie, blocks apart, and its logits' shape and
    loss on 8, 3 and 200 tokens ('shapes')."""
    import torch
    import torch.nn as nn

    def shapes():
        torch.manual_seed(18)
        m = nb.ModernGPT(V, *GPT_SMALL)
        out = {'children': ','.join(sorted(n for n, _ in m.named_children())),
               'tables': ','.join(n for n, mod in m.named_modules() if isinstance(mod, nn.Embedding)),
               'n_params': sum(p.numel() for p in m.parameters()),
               'tied': m.lm_head.weight is m.token_embedding_table.weight}
        out |= {f'apart.{k}': v for k, v in independence(m.blocks[0], m.blocks[1]).items()}
        for tt in (8, 3, 200):
            idx = torch.randint(0, V, (2, tt), generator=torch.Generator().manual_seed(tt))
            with torch.no_grad():
                logits, loss = m(idx)
                out[f'shape{tt}'] = torch.tensor(logits.shape)
                out[f'none{tt}'] = loss is None
                out[f'scalar{tt}'] = m(idx, idx)[1].dim() == 0
        return out
    run('shapes', shapes)


@records
def modern_gpt_at_initialisation(nb, inp, run, *, NH, NKV, V):
    """A fresh ModernGPT(V, 64, NH, NKV, 2, 24): the std and mean of each Linear and Embedding weight, the RMSNorm gains,
    and its logits and loss on the grader's tokens ('init')."""
    import torch
    import torch.nn as nn

    t = inp.tensor

    def init():
        torch.manual_seed(19)
        m = nb.ModernGPT(V, 64, NH, NKV, 2, 24)
        stats = {f'std.{n}': mod.weight.std() for n, mod in m.named_modules() if isinstance(mod, (nn.Linear, nn.Embedding))}
        stats |= {f'mean.{n}': mod.weight.mean() for n, mod in m.named_modules() if isinstance(mod, (nn.Linear, nn.Embedding))}
        stats |= {f'gain.{n}': mod.weight for n, mod in m.named_modules() if isinstance(mod, nb.RMSNorm)}
        with torch.no_grad():
            logits, loss = m(t('gpt.idx'), t('gpt.tgt'))
        return stats | {'logits': logits, 'loss': loss}
    run('init', init)


@records
def modern_gpt_against_its_parts(nb, inp, run, *, GPT_REF, V):
    """ModernGPT(V, *GPT_REF) off its initialisation: its logits, and its own parts composed in order ('ref')."""
    import torch

    t = inp.tensor

    def reference():
        torch.manual_seed(21)
        m = nb.ModernGPT(V, *GPT_REF)
        g = torch.Generator().manual_seed(22)
        idx = t('ref.idx')
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.1 * torch.randn(p.shape, generator=g))
            out = {'logits': m(idx)[0]}
            angles = nb.rope_angles(torch.arange(idx.shape[1]), m.head_size, m.rope_base)  # the model's parts, composed
            x = m.token_embedding_table(idx)
            for blk in m.blocks:
                x = blk(x, angles)
            return out | {'parts': m.lm_head(m.norm_f(x))}
    run('ref', reference)


@records
def modern_gpt_on_a_perturbed_input(nb, inp, run, *, GPT_SMALL, V):
    """ModernGPT(V, *GPT_SMALL)'s logits on the grader's tokens and on the same with position 5 changed ('causal')."""
    import torch

    t = inp.tensor

    def causal():
        torch.manual_seed(23)
        m = nb.ModernGPT(V, *GPT_SMALL)
        with torch.no_grad():
            return {'a': m(t('gpt.idx'))[0], 'b': m(t('gpt.idx2'))[0]}
    run('causal', causal)


@records
def kv_cache_bytes_on_the_cases(nb, inp, run, *, KV_CASES):
    """kv_cache_bytes for each case of KV_CASES, and whether each is an int ('kv')."""
    run('kv', lambda: {f'{i}': nb.kv_cache_bytes(*case) for i, case in enumerate(KV_CASES)}
        | {f'{i}_int': isinstance(nb.kv_cache_bytes(*case), int) for i, case in enumerate(KV_CASES)})


# ------------------------------------------------------------------------------------------------------------------
# References, in the grader

def rotate(x, angles, pairing):
    """x turned pair by pair by angles, pairs of neighbours (2i, 2i+1) or across the halves (i, i + hs/2)."""
    c, s = angles.to(x.dtype).cos(), angles.to(x.dtype).sin()
    if pairing == 'halves':
        h = x.shape[-1] // 2
        return torch.cat([x[..., :h] * c - x[..., h:] * s, x[..., :h] * s + x[..., h:] * c], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)


def angles_of(pos, hs, base=10000.0):
    return pos.double()[:, None] * base ** (-torch.arange(hs // 2).double() * 2 / hs)[None]


def gqa_reference(x, Wq, Wk, Wv, Wo, nh, nkv, angles=None, pairing='halves'):
    """Grouped-query attention by PyTorch's fused kernel (enable_gqa=True) with the given weights."""
    b, tt, d = x.shape
    hs = d // nh
    q = (x @ Wq.T).view(b, tt, nh, hs).transpose(1, 2)
    k = (x @ Wk.T).view(b, tt, nkv, hs).transpose(1, 2)
    v = (x @ Wv.T).view(b, tt, nkv, hs).transpose(1, 2)
    if angles is not None:
        q, k = rotate(q, angles, pairing), rotate(k, angles, pairing)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return o.transpose(1, 2).reshape(b, tt, d) @ Wo.T


def pairing_of(out, x, angles, tol):
    """'halves' or 'neighbours', whichever rotation out is (None if neither)."""
    for p in ('halves', 'neighbours'):
        if out.shape == x.shape and (out - rotate(x, angles, p)).abs().max() <= tol:
            return p
    return None


# ------------------------------------------------------------------------------------------------------------------
# The claims

@claim
def rmsnorm_matches_torch(inp, rec):
    for i, (d, _, _, _, eps, dtype) in enumerate(RMS_CASES):
        out = rec.tensor(f'rms{i}.out')
        assert str(out.dtype).endswith(dtype), f'case {i}: RMSNorm returned {out.dtype} for a {dtype} input'
        ref = F.rms_norm(inp.tensor(f'rms{i}.x'), (d,), inp.tensor(f'rms{i}.w'), eps)
        gap = relative_gap(out, ref, f'RMSNorm case {i}')
        tol = tolerance(dtype, 1e-4, 1e-12)  # float64: only a computation in float64 gets this close
        assert gap < tol, (f'case {i} (d = {d}, eps = {eps:g}, {dtype}): relative difference {gap:.3g} from F.rms_norm '
                           f'(allowed {tol:g}); divide by sqrt(mean(x^2) over the last axis + eps), do not subtract the '
                           'mean, multiply by weight, all in the dtype of x (a float64 x is not normalised in float32)')
        assert torch.equal(rec.tensor(f'rms{i}.fresh_w'), torch.ones(d, dtype=out.dtype)), f'case {i}: a fresh weight is not ones'
    params = rec.text('rms0.params')
    assert params == f'weight({D},)', f'RMSNorm({D}) has the parameters {params}, expected weight ({D},) alone'


@claim
def rmsnorm_gradients_match_torch(inp, rec):
    x = inp.tensor('rms0.x').requires_grad_(True)
    w = inp.tensor('rms0.w').requires_grad_(True)
    (F.rms_norm(x, (D,), w, RMS_CASES[0][4]) * inp.tensor('rms.g')).sum().backward()
    for what, key, want in (('the input', 'grad_x', x.grad), ('weight', 'grad_w', w.grad)):
        assert relative_gap(rec.tensor(f'rms0.{key}'), want, f'the gradient with respect to {what}') < 1e-4, (
            f'the gradient of RMSNorm with respect to {what} differs from F.rms_norm\'s; keep the RMS in the graph')


@claim
def rmsnorm_scale_invariant(inp, rec):
    out, scaled, shifted = (rec.tensor(f'rms0.{k}') for k in ('out', 'scaled', 'shifted'))
    ref = F.rms_norm(inp.tensor('rms0.x'), (D,), inp.tensor('rms0.w'), RMS_CASES[0][4])
    assert relative_gap(out, ref) < 1e-4, 'RMSNorm is not RMSNorm (its values differ from F.rms_norm\'s)'
    assert (scaled - out).abs().max() < 1e-4, 'RMSNorm(a x) differs from RMSNorm(x) for a positive scale a per row'
    assert (shifted - out).abs().max() > 0.1, 'RMSNorm(x + 3) equals RMSNorm(x): it re-centres (subtracts the mean)'


@claim
def rope_angles_by_hand(inp, rec):
    for i, (hs, base) in enumerate(ANGLE_CASES):
        got = rec.tensor(f'ang.{i}').double()
        want = angles_of(inp.tensor(f'ang{i}.pos'), hs, base)
        assert got.shape == want.shape, (f'rope_angles(7 positions, head_size={hs}): expected shape {tuple(want.shape)}, '
                                         f'got {tuple(got.shape)}; one row per position, one column per pair')
        gap = ((got - want).abs() / (1 + want.abs())).max().item()
        assert gap < 1e-5, (f'rope_angles(head_size={hs}, base={base:g}) differs from positions[t] * base^(-2i/head_size) '
                            f'by {gap:.3g}; frequencies run over the pairs i, angles grow with the position')


@claim
def apply_rotary_turns_each_pair(inp, rec):
    q = rec.tensor('rot.quarter')
    assert torch.allclose(q, torch.tensor([[0.0, 1.0], [-4.0, 3.0]]), atol=1e-6), (
        f'a quarter turn counter-clockwise sends (1, 0) to (0, 1) and (3, 4) to (-4, 3); apply_rotary gave {q.tolist()}')
    pairings = []
    for i, (shape, dtype) in enumerate(ROT_CASES):
        out, x = rec.tensor(f'rot.{i}'), inp.tensor(f'rot{i}.x')
        assert str(out.dtype).endswith(dtype), f'case {i}: apply_rotary returned {out.dtype} for a {dtype} x'
        assert bool(rec.tensor(f'rot.{i}_kept')), f'case {i}: apply_rotary changed x in place'
        p = pairing_of(out, x, inp.tensor(f'rot{i}.ang'), 1e-5 if dtype == 'float32' else 1e-12)
        assert p, f'case {i} ({dtype}, x of shape {shape}): apply_rotary is neither pairing\'s rotation by the angles'
        if shape[-1] > 2:  # with one pair both pairings are the same rotation
            pairings.append(p)
    assert len(set(pairings)) == 1, f'apply_rotary pairs the features differently from call to call: {pairings}'


@claim
def rotary_scores_depend_only_on_the_offset(inp, rec):
    q, k = inp.tensor('p1.q'), inp.tensor('p1.k')
    base = (rec.tensor('prop.rq0') * rec.tensor('prop.rk0')).sum(-1)
    for s in (17, 500):
        gap = ((rec.tensor(f'prop.rq{s}') * rec.tensor(f'prop.rk{s}')).sum(-1) - base).abs().max().item()
        assert gap < 1e-3, f'shifting every position by {s} changed a score by {gap:.3g}'
    rel = (q * rec.tensor('prop.rel')).sum(-1)
    assert (rel - base).abs().max() < 1e-3, '<R_m q, R_n k> differs from <q, R_{n-m} k>: the turns do not compose'
    assert (base - (q * k).sum(-1)).abs().max() > 0.1, 'the rotated scores equal the unrotated ones: nothing was rotated'


@claim
def rotary_preserves_the_norm(inp, rec):
    x, out = inp.tensor('p2.x'), rec.tensor('prop.p2')
    assert out.shape == x.shape, f'apply_rotary returned shape {tuple(out.shape)} for x of shape {tuple(x.shape)}'
    gap = ((out.norm(dim=-1) - x.norm(dim=-1)).abs() / x.norm(dim=-1)).max().item()
    assert gap < 1e-5, f'a rotated vector changed its norm by {gap:.3g} of it'
    assert not torch.allclose(out[:, :, 1:], x[:, :, 1:]), 'apply_rotary left every position unchanged'


@claim
def rotary_leaves_position_zero_unchanged(inp, rec):
    x, out = inp.tensor('p3.x'), rec.tensor('prop.p3')
    assert out.shape == x.shape, f'apply_rotary returned shape {tuple(out.shape)} for x of shape {tuple(x.shape)}'
    assert (out[:, :, 0] - x[:, :, 0]).abs().max() < 1e-7, 'at position 0 apply_rotary changed x'
    assert (out[:, :, 1] - x[:, :, 1]).abs().max() > 1e-3, 'at position 1 apply_rotary changed nothing'


@claim
def swiglu_hidden_matches_the_gelu_mlp(inp, rec):
    for dd in HIDDEN_DIMS:
        h = rec.number(f'hidden.{dd}')
        target = 8 * dd * dd + 5 * dd
        best = min(range(1, 6 * dd), key=lambda w: abs(3 * dd * w - target))
        assert bool(rec.tensor(f'hidden.{dd}_int')), f'swiglu_hidden({dd}) is not an int'
        assert abs(3 * dd * h - target) == abs(3 * dd * best - target), (
            f'swiglu_hidden({dd}) = {h:g}; the width closest to FeedForward({dd})\'s {target:,} parameters is {best}')


@claim
def swiglu_matches_silu_reference(inp, rec):
    want_params = f'w_down.weight({D}, 20),w_gate.weight(20, {D}),w_up.weight(20, {D})'
    assert rec.text('swi.params') == want_params, (f'SwiGLU({D}, 20) holds {rec.text("swi.params")}, expected the '
                                                   f'bias-free maps {want_params}')
    g, u, dn = (inp.tensor(f'swi.{k}') for k in ('gate', 'up', 'down'))
    x = inp.tensor('swi.x')
    ref = F.linear(F.silu(F.linear(x, g)) * F.linear(x, u), dn)
    gap = (rec.tensor('swi.out') - ref).abs().max().item()
    swapped = (rec.tensor('swi.out') - F.linear(F.silu(F.linear(x, u)) * F.linear(x, g), dn)).abs().max().item()
    assert gap < 1e-5, (f'SwiGLU differs from w_down(SiLU(w_gate(x)) * w_up(x)) by {gap:.3g}'
                        + ('; the gate and the value are swapped: the SiLU goes on w_gate' if swapped < 1e-5 else ''))
    ref64 = F.linear(F.silu(F.linear(x.double(), g.double())) * F.linear(x.double(), u.double()), dn.double())
    assert (rec.tensor('swi.out64') - ref64).abs().max() < 1e-10, 'SwiGLU in float64 differs from the reference'


def gqa_weights(inp, i):
    return [inp.tensor(f'gqa{i}.{k}') for k in ('query', 'key', 'value', 'proj')]


@claim
def gqa_matches_sdpa_enable_gqa(inp, rec):
    for i, (d, nh, nkv, tt, dtype) in enumerate(GQA_CASES):
        ref = gqa_reference(inp.tensor(f'gqa{i}.x'), *gqa_weights(inp, i), nh, nkv)
        gap = relative_gap(rec.tensor(f'gqa{i}.out'), ref, f'GroupedQueryAttention({d}, {nh}, {nkv})')
        assert gap < (1e-10 if dtype == 'float64' else 1e-5), (
            f'GroupedQueryAttention({d}, {nh}, {nkv}) on T = {tt} ({dtype}): relative difference {gap:.3g} from '
            'scaled_dot_product_attention(enable_gqa=True); query head j reads key/value head j // (n_head // n_kv_head)')


@claim
def gqa_rotates_queries_and_keys(inp, rec):
    for i, (d, nh, nkv, _, dtype) in enumerate(GQA_CASES):
        angles = angles_of(inp.tensor(f'gqa{i}.pos'), d // nh)
        got = rec.tensor(f'gqa{i}.rot')
        gaps = [relative_gap(got, gqa_reference(inp.tensor(f'gqa{i}.x'), *gqa_weights(inp, i), nh, nkv, angles, p))
                for p in ('halves', 'neighbours')]
        assert min(gaps) < (1e-10 if dtype == 'float64' else 1e-5), (
            f'GroupedQueryAttention({d}, {nh}, {nkv})(x, angles): relative difference {min(gaps):.3g} from attention with '
            'rotated queries and keys; turn q and k (not v) with apply_rotary after splitting the heads')


@claim
def gqa_with_as_many_kv_heads_is_step5_mha(inp, rec):
    x = inp.tensor('mha.x')
    Wq, Wk, Wv, Wo = (inp.tensor(f'mha.{k}') for k in ('query', 'key', 'value', 'proj'))
    hs = D // NH
    heads = []
    for j in range(NH):  # Step 5's MultiHeadAttention: head j with rows j*hs..(j+1)*hs-1 of each map, then W_O
        sl = slice(j * hs, (j + 1) * hs)
        heads.append(F.scaled_dot_product_attention(x @ Wq[sl].T, x @ Wk[sl].T, x @ Wv[sl].T, is_causal=True))
    ref = torch.cat(heads, -1) @ Wo.T
    gap = relative_gap(rec.tensor('asmha.out'), ref, 'GroupedQueryAttention(d, n_head, n_head)')
    assert gap < 1e-5, f'with n_kv_head = n_head and Step 5\'s weights, relative difference {gap:.3g} from multi-head attention'
    assert rec.number('asmha.n_params') == 4 * D * D, 'with n_kv_head = n_head it should hold 4 d^2 parameters'


@claim
def gqa_with_one_kv_head_is_multi_query(inp, rec):
    hs = D // NH
    want = f'key.weight({hs}, {D}),proj.weight({D}, {D}),query.weight({D}, {D}),value.weight({hs}, {D})'
    assert rec.text('mqa.params') == want, f'GroupedQueryAttention({D}, {NH}, 1) holds {rec.text("mqa.params")}, expected {want}'
    assert bool(rec.tensor('mqa.refused')), f'GroupedQueryAttention({D}, {NH}, 3) was not refused'
    i = next(j for j, case in enumerate(GQA_CASES) if case[2] == 1)
    d, nh, nkv, _, _ = GQA_CASES[i]
    gap = relative_gap(rec.tensor(f'gqa{i}.out'), gqa_reference(inp.tensor(f'gqa{i}.x'), *gqa_weights(inp, i), nh, nkv))
    assert gap < 1e-5, f'with one key/value head, relative difference {gap:.3g} from multi-query attention'


@claim
def modern_block_wiring(inp, rec):
    w = inp.tensor
    x = w('blk.x')

    def attn(z):
        q, k, v = (z @ w('blk.qkv').T).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    h = x + attn(F.rms_norm(x, (D,), w('blk.n1'), 1e-6))
    z = F.rms_norm(h, (D,), w('blk.n2'), 1e-6)
    want = h + F.linear(torch.tanh(F.linear(z, w('blk.f1w'), w('blk.f1b'))), w('blk.f2w'), w('blk.f2b'))
    gap = (rec.tensor('blk.out') - want).abs().max().item()
    assert gap < 1e-5, (f'ModernBlock(x) differs from h + mlp(norm2(h)), h = x + attn(norm1(x), angles), by {gap:.3g} '
                        '(PyTorch\'s parts in your block); pre-norm branches, each added to the stream')
    assert bool(rec.tensor('blk.angles_passed')), 'ModernBlock did not hand its angles to attn (once)'
    expect_independent({k[len('norms.'):]: rec[k] for k in rec if k.startswith('norms.') and k != 'norms.error'} or
                       rec['norms.distinct'], 'norm1 and norm2 of a fresh ModernBlock',
                       'make two RMSNorm(d): one for the attention branch, one for the MLP branch')


@claim
def modern_gpt_shapes_and_modules(inp, rec):
    for tt in (8, 3, 200):
        shape = rec.tensor(f'shapes.shape{tt}').tolist()
        assert shape == [2, tt, V], f'ModernGPT on (2, {tt}) tokens: logits of shape {shape}, expected [2, {tt}, {V}]'
        assert bool(rec.tensor(f'shapes.none{tt}')) and bool(rec.tensor(f'shapes.scalar{tt}')), f'T = {tt}: the loss is wrong'
    assert set(rec.text('shapes.children').split(',')) >= {'token_embedding_table', 'blocks', 'norm_f', 'lm_head'}, (
        f'ModernGPT\'s submodules are {rec.text("shapes.children")}')
    tables = rec.text('shapes.tables')
    assert tables == 'token_embedding_table', f'ModernGPT\'s embedding tables are {tables}; expected the tokens\' alone'
    d, nh, nkv, nl, hid = GPT_SMALL
    want = 2 * V * d + nl * (2 * d * d + 2 * d * nkv * (d // nh) + 3 * d * hid + 2 * d) + d
    got = rec.number('shapes.n_params')
    assert got == want, f'ModernGPT{GPT_SMALL} has {got:,.0f} parameters, expected {want:,}'
    assert not bool(rec.tensor('shapes.tied')), 'lm_head is tied to the token embedding'
    expect_independent({k[len('shapes.apart.'):]: rec[k] for k in rec if k.startswith('shapes.apart.')} or
                       rec['shapes.apart.distinct'], f'blocks[0] and blocks[1] of ModernGPT{GPT_SMALL}',
                       'build a new ModernBlock for each layer')


@claim
def modern_gpt_loss_and_initialisation(inp, rec):
    stds = {k[len('init.std.'):]: rec.number(k) for k in rec if k.startswith('init.std.')}
    assert stds, 'no nn.Linear or nn.Embedding was found in ModernGPT'
    for name, std in stds.items():
        mean = rec.number(f'init.mean.{name}')
        assert abs(std - 0.02) < 0.004 and abs(mean) < 0.004, (
            f'{name}.weight has std {std:.4f} and mean {mean:.4f}, not N(0, 0.02^2)')
    for k in rec:
        if k.startswith('init.gain.'):
            assert bool((rec.tensor(k) == 1).all()), f'{k[10:]} does not start with gain 1'
    logits, loss = rec.tensor('init.logits'), rec.number('init.loss')
    ref = F.cross_entropy(logits.reshape(-1, V), inp.tensor('gpt.tgt').reshape(-1)).item()
    assert abs(loss - ref) < 1e-5, f'the loss {loss:.5f} is not the mean cross-entropy of the logits, {ref:.5f}'
    assert abs(loss - math.log(V)) < 0.05, f'the loss at initialisation is {loss:.3f}, not near ln {V}'
    got, parts = rec.tensor('ref.logits'), rec.tensor('ref.parts')
    gap = relative_gap(got, parts, 'ModernGPT\'s logits')
    assert gap < 1e-4, (f'ModernGPT\'s logits differ from its own parts composed in order by {gap:.3g}: the token embedding '
                        'alone, the angles of positions 0..T-1 to every block, the blocks in order, norm_f, lm_head')


@claim
def modern_gpt_is_causal(inp, rec):
    expect_causal(rec['causal.a'], rec['causal.b'], 5, 'logits')


@claim
def kv_cache_bytes_by_the_formula(inp, rec):
    for i, (nl, nkv, hs, tt, b, nbytes) in enumerate(KV_CASES):
        got = rec.number(f'kv.{i}')
        want = 2 * nl * nkv * hs * tt * b * nbytes
        assert got == want and bool(rec.tensor(f'kv.{i}_int')), (
            f'kv_cache_bytes{KV_CASES[i]} = {got:,.0f}, expected {want:,} (an int): a key and a value per head, layer, position')
