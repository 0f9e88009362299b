"""Step 7's claims, judged outside the student's kernel: nanoGPT's parameter groups (on a stand-in model with every kind of
parameter and a tied weight), the learning-rate schedule, the KV cache (head_step, forward_cached, generate_cached) and the
weight at an offset, on hand-made maps and on the trained model's heads. The GPT's logits are re-derived here by Step 6's
independent implementation (its checks' ref_logits: F.layer_norm, F.scaled_dot_product_attention) from the recorded
weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from course.grader.claims import claim, expect_dtype, expect_law, expect_linear_work, records
from course.grader.probe import work_of
from course.layout import ROOT, instructor_module

STEP6 = instructor_module('step6', 'checks')  # the reference GPT forward, and the recorded state_dicts, are Step 6's
STEP2 = instructor_module('step2', 'checks')  # the law table of the sampler checks
ref_logits, state = STEP6.ref_logits, STEP6.state
V = 65
# The checks by kind (docs/adding-a-step.md). generate_cached's law: a GPT made a bigram model (its blocks and
# positions silenced, its embedding and head set so that the logits after each of Step 2's LAW_ROWS are that row of
# Step 2's law table), LAW_N contexts of each row, LAW_NEW new ids each, every transition out of those rows tested
# against its softmax (false-failure rate STEP2.LAW_ALPHA). Its work: the operations counted (work_of) while it
# generates WORK_LENGTHS new ids after one: linear with the cache, quadratic without. The training contract of
# param_groups: PG_STEPS steps of AdamW(param_groups(model, PG_DECAY)) at the grader's schedule against AdamW on the
# reference groups, from the same start on the same batches.
LAW_NEW = STEP2.LAW_NEW
WORK_LENGTHS = (8, 32)
PG_STEPS, PG_SCHEDULE = 12, (1e-2, 3, 12, 1e-3)  # (max_lr, warmup, max_iters, min_lr)


def make_inputs(seed=20267):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {'prompt': rng.integers(0, V, (2, 5)), 'maps': rng.dirichlet(np.ones(7), (3, 2, 7)).astype('float32'),
         'lr.cases': np.array(LR_CASES), 'pg.decay': np.array(PG_DECAY),
         'kv.x': rng.standard_normal((2, 10, 16)),  # float64: a head's input at 10 positions
         'kv.idx': rng.integers(0, V, (2, 8))}
    text = (ROOT / 'input.txt').read_text(encoding='utf-8')
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}
    val = text[int(0.9 * len(text)):]
    starts = rng.integers(0, len(val) - 65, 6)
    windows = np.array([[stoi[c] for c in val[s:s + 65]] for s in starts])
    x['val.x'] = windows[:, :64]
    kinds = np.random.default_rng(seed + 1)  # a generator of its own: the inputs above stay as they were
    law = STEP2.law_inputs(kinds)
    x['claw.W'], x['claw.ctx'] = law['law.W'], law['law.ctx']
    x['pgrun.x'], x['pgrun.y'] = kinds.integers(0, 11, (PG_STEPS, 4, 5)), kinds.integers(0, 11, (PG_STEPS, 4, 5))
    x['pgrun.lr'] = np.array([lr_reference(it, *PG_SCHEDULE) for it in range(PG_STEPS)])
    return x


def toy_lm():
    """The model of param_groups' training check, built alike in the kernel and here: an embedding, a LayerNorm, a
    Linear with a bias and a head tied to the embedding (every kind of parameter the groups sort); forward(x, y) is the
    mean cross-entropy of its logits."""
    import torch

    class ToyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.norm, self.lin = torch.nn.Embedding(11, 6), torch.nn.LayerNorm(6), torch.nn.Linear(6, 6)
            self.head = torch.nn.Linear(6, 11, bias=False)
            self.head.weight = self.emb.weight  # tied

        def forward(self, x, y):
            z = self.head(self.lin(self.norm(self.emb(x))))  # (B,T,11)
            return torch.nn.functional.cross_entropy(z.reshape(-1, 11), y.reshape(-1))

    return ToyLM()


def train_toy(m, groups, xs, ys, lrs):
    """AdamW(groups) trained on the batches (xs[i], ys[i]) at the rates lrs[i], set into every group before each step, as
    the notebook's comparison sets lr_at's; m is left as trained."""
    import torch

    opt = torch.optim.AdamW(groups, lr=float(lrs[0]))
    for x, y, lr in zip(xs, ys, lrs, strict=True):
        for group in opt.param_groups:
            group['lr'] = float(lr)
        loss = m(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return m


def pushed(m, seed, scale):
    """m with every parameter moved off its initialisation by seeded noise (scale N(0, 1) draws of a generator of seed)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return m


def argmax_sampler(logits, temperature=1.0, top_k=None, generator=None):
    """A stand-in for the notebook's sample_next: the greedy choice, (B, 1)."""
    return logits.argmax(-1, keepdim=True)


PROBE_HELPERS = (work_of, toy_lm, train_toy, pushed, argmax_sampler)


# The probe: its parts, run in the student's kernel in this order (the notebook's order of tasks), each recording under
# the names its run() calls give.

@records
def training_run_of_param_groups(nb, inp, run):
    """The toy model's weights before and after a few AdamW steps on param_groups(model, decay), at the grader's rates
    (its schedule, not lr_at) on its batches ('pgrun')."""
    import torch

    t = inp.tensor

    def groups_trained():
        torch.manual_seed(319)
        m = toy_lm()
        start = {f'start.{k}': v.clone() for k, v in m.state_dict().items()}
        train_toy(m, nb.param_groups(m, float(inp['pg.decay'])), t('pgrun.x'), t('pgrun.y'), inp['pgrun.lr'].tolist())
        return start | {f'end.{k}': v for k, v in m.state_dict().items()}
    run('pgrun', groups_trained)


@records
def param_groups_of_a_toy(nb, inp, run):
    """param_groups on a stand-in with every kind of parameter and a tied weight: the names of the parameters it lists
    ('pg'); the names and weight decays of the groups AdamW takes from it ('pgopt')."""
    import numpy as np
    import torch

    class Toy(torch.nn.Module):  # every kind of parameter and a tied weight: param_groups is judged alone, not on GPT
        def __init__(self):
            super().__init__()
            self.emb, self.pos = torch.nn.Embedding(11, 6), torch.nn.Embedding(5, 6)
            self.lin, self.norm, self.conv = torch.nn.Linear(6, 6), torch.nn.LayerNorm(6), torch.nn.Conv1d(6, 6, 3)
            self.scale = torch.nn.Parameter(torch.ones(()))
            self.head = torch.nn.Linear(6, 11, bias=False)
            self.head.weight = self.emb.weight  # tied

    def groups_listed():
        m = Toy()
        names = {id(p): n for n, p in m.named_parameters()}
        groups = nb.param_groups(m, float(inp['pg.decay']))
        return {'listed': np.array(sorted(names.get(id(p), '?') for g in groups for p in g['params']))}
    run('pg', groups_listed)

    def groups_in_adamw():
        m = Toy()
        names = {id(p): n for n, p in m.named_parameters()}
        opt = torch.optim.AdamW(nb.param_groups(m, float(inp['pg.decay'])), lr=1e-3)
        decay = sorted((names.get(id(p), '?'), float(g['weight_decay'])) for g in opt.param_groups for p in g['params'])
        return {'names': np.array([n for n, _ in decay]), 'decay': np.array([w for _, w in decay])}
    run('pgopt', groups_in_adamw)


@records
def lr_at_on_the_cases(nb, inp, run):
    """lr_at at every step up to max_iters + 4 of each case of the grader's schedules: the rates, and whether each is a
    Python float ('lr')."""
    import numpy as np

    def schedule():
        out = {}
        for i, (max_lr, warmup, max_iters, min_lr) in enumerate(inp['lr.cases'].tolist()):
            got = [nb.lr_at(it, max_lr, int(warmup), int(max_iters), min_lr) for it in range(int(max_iters) + 5)]
            out[f'is_float{i}'] = np.array([isinstance(v, float) for v in got])
            out[f'lr{i}'] = np.array([float(v) for v in got])
        return out
    run('lr', schedule)


@records
def head_step_on_a_float64_head(nb, inp, run):
    """head_step on a float64 head, a prompt of 6 positions, then 1, then 3: its outputs, the cache after, and the head's
    weights ('kvhead')."""
    import torch

    t = inp.tensor

    def kv_head():
        torch.manual_seed(310)
        head = nb.Head(16, 8, 12).double()
        x = t('kv.x')
        with torch.no_grad():
            a, past = nb.head_step(head, x[:, :6], None)
            b, past = nb.head_step(head, x[:, 6:7], past)
            c, past = nb.head_step(head, x[:, 7:], past)
        return {'out': torch.cat([a, b, c], 1), 'k': past[0], 'v': past[1],
                'Wq': head.query.weight, 'Wk': head.key.weight, 'Wv': head.value.weight}
    run('kvhead', kv_head)


@records
def forward_cached_on_a_float64_gpt(nb, inp, run):
    """forward_cached on a float64 GPT off its initialisation, a prompt of 5 tokens then 3 alone: the logits, the cache
    and the GPT's weights; and generate_cached's greedy ids past block_size ('kvgpt')."""
    import torch

    t = inp.tensor

    def kv_model():
        torch.manual_seed(311)
        m = pushed(nb.GPT(65, 8, 32, 4, 2).double(), 312, 0.05)
        with torch.no_grad():
            idx, cache = t('kv.idx'), {}
            parts = [nb.forward_cached(m, idx[:, :5], cache)]
            parts += [nb.forward_cached(m, idx[:, i:i + 1], cache) for i in range(5, 8)]
        out = {'logits': torch.cat(parts, 1), 'n_entries': len(cache)}
        for layer in range(2):
            for h in range(4):
                out[f'k{layer}_{h}'], out[f'v{layer}_{h}'] = cache[(layer, h)]
        out |= {f'sd.{k}': v for k, v in m.state_dict().items()}
        with nb.replaced(sample_next=argmax_sampler):
            out['greedy'] = nb.generate_cached(m, t('prompt')[:, :3], 9)  # 12 tokens: past block_size 8
        return out
    run('kvgpt', kv_model)


@records
def generate_cached_against_generate(nb, inp, run):
    """A float32 GPT away from its initialisation, sampled by generate and by generate_cached from one seed, twice
    ('kvsame')."""
    import torch

    t = inp.tensor

    def kv_same():
        torch.manual_seed(313)
        m = pushed(nb.GPT(65, 8, 32, 4, 2), 314, 0.3)
        prompt, out = t('prompt')[:, :4], {}
        for i, (tau, k) in enumerate(((1.0, None), (0.8, 10))):
            torch.manual_seed(315 + i)
            out[f'plain{i}'] = m.generate(prompt, 16, temperature=tau, top_k=k)
            torch.manual_seed(315 + i)
            out[f'cached{i}'] = nb.generate_cached(m, prompt, 16, temperature=tau, top_k=k)
        return out
    run('kvsame', kv_same)


@records
def generate_cached_law(nb, inp, run, *, LAW_NEW):
    """generate_cached on a GPT made a bigram model (blocks and positions silenced, the law rows' logits set): LAW_NEW ids
    after each of the grader's contexts, and the model's weights ('claw')."""
    import torch

    t = inp.tensor

    def cached_law():
        torch.manual_seed(316)
        m = nb.GPT(65, 8, 32, 4, 2)
        W, ctx = t('claw.W'), t('claw.ctx')
        rows = sorted({int(r) for r in ctx[:, 0]})
        H = torch.ones(1, 1)
        for _ in range(5):  # a 32 x 32 Hadamard matrix: rows 1.. have mean 0 and variance 1, and are orthogonal
            H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
        U = H[1:1 + len(rows)]  # (k,32): what ln_f makes of each law row's embedding
        with torch.no_grad():
            m.position_embedding_table.weight.zero_()
            for blk in m.blocks:  # every branch writes 0: the residual stream stays the token's embedding
                blk.attn.proj.weight.zero_()
                blk.ffwd.net[2].weight.zero_()
                blk.ffwd.net[2].bias.zero_()
            m.token_embedding_table.weight[rows] = U
            m.lm_head.weight.copy_(W[rows].T @ U / 32)  # (V,32): the logits after row r are W[r]
        torch.manual_seed(317)
        out = {'out': nb.generate_cached(m, ctx, LAW_NEW).to(torch.int8)}
        return out | {f'sd.{k}': v for k, v in m.state_dict().items()}
    run('claw', cached_law)


@records
def work_of_generate_cached(nb, inp, run, *, WORK_LENGTHS):
    """The operations generate_cached does (work_of) for each n of WORK_LENGTHS new ids after one, greedy ('cwork')."""
    import torch

    t = inp.tensor

    def cached_work():
        torch.manual_seed(318)
        m = nb.GPT(65, 64, 32, 4, 2)
        prompt = t('prompt')[:1, :1]
        with nb.replaced(sample_next=argmax_sampler), torch.no_grad():
            return {f'{n}': work_of(lambda n=n: nb.generate_cached(m, prompt, n)) for n in WORK_LENGTHS}
    run('cwork', cached_work)


@records
def weight_at_offset_on_maps(nb, inp, run):
    """weight_at_offset on the grader's attention maps at offsets 0, 1 and 2: the weights, and whether each is a Python
    float ('offset')."""
    t = inp.tensor

    def offsets():
        A = t('maps')
        got = {o: nb.weight_at_offset(A, o) for o in (0, 1, 2)}
        return {f'w{o}': w for o, w in got.items()} | {f'float{o}': type(w) is float for o, w in got.items()}
    run('offset', offsets)


@records
def heads_of_the_trained_model(nb, inp, run):
    """The trained model's heads on held-out text: each head's weights A, and weight_at_offset(A, 1) ('trained')."""
    import torch

    t = inp.tensor

    def trained():
        m = nb.load_trained()
        with torch.no_grad():
            m(t('val.x'))  # every head stashes its weights A
        out = {}
        for layer, block in enumerate(m.blocks):
            for h, head in enumerate(block.attn.heads):
                out[f'A{layer}_{h}'] = head.A
                out[f'w{layer}_{h}'] = nb.weight_at_offset(head.A, 1)
        return out
    run('trained', trained)


def kv_reference(inp, rec):
    """The float64 head of the head_step checks, recomputed from its recorded weights: the full causal head's output,
    keys and values at the 10 positions."""
    x = inp.tensor('kv.x')
    q, k, v = (x @ rec.tensor(f'kvhead.W{m}').T for m in 'qkv')  # (2,10,8) each
    return F.scaled_dot_product_attention(q, k, v, is_causal=True), k, v


@claim
def head_step_matches_the_full_head(inp, rec):
    want = kv_reference(inp, rec)[0]
    got = rec.tensor('kvhead.out')
    expect_dtype(got, 'float64', 'head_step on a float64 head', 'compute in the dtype of x: no float32 tensor on the way')
    assert tuple(got.shape) == (2, 10, 8), (f'head_step outputs of shape {tuple(got.shape)} for 6 + 1 + 3 positions, '
                                            'expected (2, 10, 8)')
    gap = (got - want).abs().max().item()
    assert gap < 1e-10, (f'head_step on 6 positions, then 1, then 3 differs from the full head by {gap:.3g} (float64); '
                         'mask 1 where j <= P + i, scale by 1/sqrt(head_size)')


@claim
def head_step_appends_to_the_cache(inp, rec):
    _, k, v = kv_reference(inp, rec)
    got_k, got_v = rec.tensor('kvhead.k'), rec.tensor('kvhead.v')
    assert tuple(got_k.shape) == (2, 10, 8) and tuple(got_v.shape) == (2, 10, 8), (
        f'after 10 positions the cache holds k {tuple(got_k.shape)}, v {tuple(got_v.shape)}, expected (2, 10, 8) each')
    assert (got_k - k).abs().max() < 1e-10 and (got_v - v).abs().max() < 1e-10, (
        'the cache is not the keys and values of positions 0..9 in order; append the new ones after the past along time')


@claim
def forward_cached_matches_forward(inp, rec):
    got = rec.tensor('kvgpt.logits')
    assert tuple(got.shape) == (2, 8, V), f'logits of shape {tuple(got.shape)} for 5 + 1 + 1 + 1 tokens, expected (2, 8, {V})'
    gap = (got - ref_logits(state(rec, 'kvgpt.sd.'), inp.tensor('kv.idx'), 4)).abs().amax(dim=(0, 2))
    assert gap.max() < 1e-9, (f'forward_cached differs from the reference forward at positions '
                              f'{(gap >= 1e-9).nonzero().flatten().tolist()} (float64, up to {gap.max().item():.3g}); '
                              'position rows P..P+n-1, ln1, proj, residuals, ln2, ffwd, ln_f, lm_head')


@claim
def forward_cached_fills_the_cache(inp, rec):
    n = int(rec.tensor('kvgpt.n_entries'))
    assert n == 8, f'{n} cache entries, expected one per head of every layer, 2 x 4'
    sd, idx = state(rec, 'kvgpt.sd.'), inp.tensor('kv.idx')
    x = sd['token_embedding_table.weight'][idx] + sd['position_embedding_table.weight'][:8]  # (2,8,32)
    h = F.layer_norm(x, (32,), sd['blocks.0.ln1.weight'], sd['blocks.0.ln1.bias'], 1e-5)
    for i in range(4):
        for m, name in (('key', 'k'), ('value', 'v')):
            got = rec.tensor(f'kvgpt.{name}0_{i}')
            want = h @ sd[f'blocks.0.attn.heads.{i}.{m}.weight'].T  # (2,8,8)
            assert tuple(got.shape) == (2, 8, 8) and (got - want).abs().max() < 1e-9, (
                f'cache[(0, {i})] does not hold that head\'s {m}s of the 8 positions, (2, 8, 8)')
    for i in range(4):
        assert tuple(rec.tensor(f'kvgpt.k1_{i}').shape) == (2, 8, 8), f'cache[(1, {i})] is not (2, 8, 8)'


@claim
def generate_cached_gives_the_same_tokens(inp, rec):
    for i in range(2):
        a, b = rec.tensor(f'kvsame.plain{i}'), rec.tensor(f'kvsame.cached{i}')
        assert tuple(a.shape) == tuple(b.shape) and torch.equal(a, b), (
            f'run {i}: generate_cached and generate drew different tokens from the same seed (a float32 GPT, past block_size)')
    sd, prompt = state(rec, 'kvgpt.sd.'), inp.tensor('prompt')[:, :3]
    want = prompt
    for _ in range(9):  # greedy, by the reference forward on the last 8 tokens
        want = torch.cat([want, ref_logits(sd, want[:, -8:], 4)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(rec.tensor('kvgpt.greedy'), want), (
        'greedy generate_cached on a float64 GPT differs from the reference forward\'s greedy choices')
    expect_dtype(rec['kvsame.cached0'], 'int64', 'generate_cached', 'the ids of generate: torch.long')
    cached_follows_the_law(inp, rec['claw.out'], law_probs(state(rec, 'claw.sd.'), inp))
    expect_linear_work([rec.number(f'cwork.{n}') for n in WORK_LENGTHS], WORK_LENGTHS,
                       f'generate_cached(model, one id, n) for n = {WORK_LENGTHS[0]} and {WORK_LENGTHS[1]} (model.block_size '
                       '64)', 'one forward_cached of the prompt, then one of each new character alone, with the cache '
                       'kept: never the whole sequence again while it fits in block_size')


def law_probs(sd, inp):
    """{row: its next-id distribution} for every law row of the bigram-made GPT, by the reference forward on that id."""
    rows = sorted({int(r) for r in inp['claw.ctx'][:, 0]})
    with torch.no_grad():
        logits = ref_logits({k: v.double() for k, v in sd.items()}, torch.tensor(rows)[:, None], 4)[:, -1]  # (k,V)
    return dict(zip(rows, F.softmax(logits, -1).numpy(), strict=True))


def cached_follows_the_law(inp, out, probs):
    """generate_cached's draws on the bigram-made GPT: every transition out of each law row follows that row's
    distribution probs[row] (expect_law), false-failure rate STEP2.LAW_ALPHA in all. out: (n, 1 + LAW_NEW)."""
    out = np.asarray(out).astype(np.int64)
    assert out.shape == (len(inp['claw.ctx']), 1 + LAW_NEW), (f'generate_cached(model, ctx (n, 1), {LAW_NEW}) returned shape '
                                                              f'{out.shape}')
    prev, new = out[:, :-1].reshape(-1), out[:, 1:].reshape(-1)
    for what, row in STEP2.LAW_ROWS.items():
        expect_law(new[prev == row], probs[row], f'the ids generate_cached drew after {what} of a GPT made a bigram model',
                   STEP2.LAW_ALPHA / len(STEP2.LAW_ROWS), 'hand sample_next the logits of the last position and append '
                   'its draw, with no rule of your own (no argmax when the model is sure)')


LR_CASES = [(3e-3, 100, 1000, 3e-4), (1.0, 7, 20, 0.25), (6e-4, 20, 150, 6e-5)]  # (max_lr, warmup, max_iters, min_lr)
PG_DECAY = 0.37
TOY_DIMS = {'emb.weight': 2, 'pos.weight': 2, 'lin.weight': 2, 'lin.bias': 1, 'norm.weight': 1, 'norm.bias': 1,
            'conv.weight': 3, 'conv.bias': 1, 'scale': 0}  # the probe's Toy; head.weight is emb.weight


def lr_reference(it, max_lr, warmup, max_iters, min_lr):
    if it < warmup:
        return max_lr * (it + 1) / warmup
    progress = min(it - warmup, max_iters - warmup) / (max_iters - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def schedule_gap(rec, steps):
    """The largest |lr_at - reference| over the steps (a function of warmup and max_iters) of every case, relative to max_lr."""
    worst = 0.0
    for i, case in enumerate(LR_CASES):
        its = steps(case[1], case[2])
        got, is_float = np.asarray(rec[f'lr.lr{i}'], dtype=float), np.asarray(rec[f'lr.is_float{i}'])
        assert len(got) == case[2] + 5, f'{len(got)} rates recorded for {case[2] + 5} steps'
        assert is_float[its].all(), 'lr_at should return a Python float'
        worst = max(worst, max(abs(got[it] - lr_reference(it, *case)) / case[0] for it in its))
    return worst


@claim
def lr_at_warms_up_linearly(inp, rec):
    gap = schedule_gap(rec, lambda warmup, max_iters: list(range(warmup)))
    assert gap < 1e-9, f'in the warm-up lr_at is off by {gap:.3g} of max_lr; max_lr * (it + 1) / warmup for it < warmup'


@claim
def lr_at_decays_by_cosine_to_min_lr(inp, rec):
    gap = schedule_gap(rec, lambda warmup, max_iters: list(range(warmup, max_iters + 5)))
    assert gap < 1e-9, (f'after the warm-up lr_at is off by {gap:.3g} of max_lr; half a cosine from max_lr at it = warmup '
                        'to min_lr at it = max_iters, min_lr after')


@claim
def param_groups_decay_matrices_and_embeddings_only(inp, rec):
    names, decay = rec['pgopt.names'].tolist(), np.asarray(rec['pgopt.decay'], dtype=float).tolist()
    assert names, 'no parameter in any group'
    for name, wd in zip(names, decay, strict=True):
        assert name in TOY_DIMS, 'a group holds a tensor that is not a parameter of the model'
        want = PG_DECAY if TOY_DIMS[name] >= 2 else 0.0
        assert abs(wd - want) < 1e-12, (f'{name} ({TOY_DIMS[name]}-D) decays at {wd:g} in AdamW, expected {want:g}; decay '
                                        'p.dim() >= 2 only, and give the other group weight_decay 0.0')
    groups_train_as_nanogpts(inp, rec)


def groups_train_as_nanogpts(inp, rec):
    """PG_STEPS steps of AdamW(param_groups(model, PG_DECAY)) at the grader's rates leave the model where AdamW on the
    reference groups (by p.dim(), with PyTorch's own betas and eps) leaves it, from the same start on the same batches:
    each parameter within 1e-4 of how far the reference moved it."""
    start = {k[len('pgrun.start.'):]: rec.tensor(k) for k in rec if k.startswith('pgrun.start.')}
    m = toy_lm()
    m.load_state_dict(start)
    params = list(m.parameters())
    groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': PG_DECAY},
              {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0}]
    train_toy(m, groups, inp.tensor('pgrun.x'), inp.tensor('pgrun.y'), inp['pgrun.lr'].tolist())
    for name, want in m.state_dict().items():
        got = rec.tensor(f'pgrun.end.{name}')
        moved = (want - start[name]).abs().max().item()
        gap = (got - want).abs().max().item()
        assert gap <= 1e-4 * moved + 1e-7, (
            f'{PG_STEPS} steps of AdamW(param_groups(model, {PG_DECAY})) moved {name} {gap:.3g} away from AdamW on '
            f'nanoGPT\'s groups (which moved it {moved:.3g}); each group holds its params and its weight_decay only: '
            'the optimizer\'s own settings (betas, eps, the rate the schedule sets) hold for both')


@claim
def param_groups_hold_each_parameter_once(inp, rec):
    listed = rec['pg.listed'].tolist()
    missing = sorted(set(TOY_DIMS) - set(listed))
    assert not missing, f'{missing} are in no group: AdamW would never update them'
    twice = sorted({n for n in listed if listed.count(n) > 1})
    assert not twice, f'{twice} are listed more than once (a tied weight?); iterate over model.parameters()'
    assert set(listed) <= set(TOY_DIMS), 'a group holds a tensor that is not a parameter of the model'
    assert len(rec['pgopt.names'].tolist()) == len(TOY_DIMS), 'AdamW did not accept the groups'


@claim
def weight_at_offset_on_hand_made_maps(inp, rec):
    A = inp.tensor('maps').double()
    T = A.shape[-1]
    for o in (0, 1, 2):
        want = torch.stack([A[..., i, i - o] for i in range(o, T)]).mean().item()
        assert bool(rec['offset.float' + str(o)]), (f'weight_at_offset(A, {o}) is not a Python float; the contract says '
                                                    'a float (.item() of the mean)')
        assert abs(float(rec.tensor(f'offset.w{o}')) - want) < 1e-5, f'offset {o}'


@claim
def a_previous_character_head_exists(inp, rec):
    best = 0.0
    for key in rec:
        if key.startswith('trained.A'):
            A = rec.tensor(key).double()
            want = torch.stack([A[:, i, i - 1] for i in range(1, A.shape[-1])]).mean().item()
            got = float(rec.tensor('trained.w' + key[len('trained.A'):]))
            assert abs(got - want) < 1e-5, 'weight_at_offset on a trained head'
            best = max(best, want)
    assert best > 0.25, f'best previous-character weight {best:.3f}'
