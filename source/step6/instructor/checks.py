"""Step 6's claims, judged outside the student's kernel: get_batch, sampling, the GPT (its forward, its initialisation,
its generate), its training step and loss estimates, and the trained model's heads. Each claim judges its own function:
the probe hands generate a reference forward and a reference sampler, train_step a bigram table, estimate_loss a
stand-in get_batch, so that one bug costs the tests of its own function. The GPT's logits are re-derived here from the
student's recorded weights by an independent implementation (F.layer_norm, F.scaled_dot_product_attention), and the
trained model's from the step's checkpoint."""

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from course.grader.claims import claim, expect_causal

STEP = Path(__file__).resolve().parent.parent  # source/step6
ROOT = STEP.parent.parent
V = 65
SAMPLE_CASES = [(1.0, None), (0.6, None), (2.5, None), (1.0, 3), (1.3, 4)]  # (temperature, top_k)
# generate's calls on the stand-in model: (new tokens, positional arguments, keyword arguments), on the first
# GEN_PROMPTS[i] characters of the prompt: past block_size, greedy defaults, temperature and top_k in either form
GEN_CALLS = [(20, (), {}), (1, (), {}), (12, (), {'temperature': 0.7, 'top_k': 5}), (4, (0.5, 3), {})]
GEN_PROMPTS = [5, 5, 4, 1]
N_DRAWS = 40_000


def make_inputs(seed=20266):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    x = {'argmax.z': rng.standard_normal((64, 10)).astype('float32'),
         'topk.z': np.repeat(rng.standard_normal((8, 12)).astype('float32'), 500, axis=0),
         'dist.z': rng.standard_normal((1, 7)).astype('float32') * 1.2,
         'gen.z': rng.standard_normal((64, 9)).astype('float32'),
         'gpt.idx': rng.integers(0, V, (3, 8)), 'gpt.targets': rng.integers(0, V, (3, 8)),
         'gpt.w': rng.integers(0, V, (3, 9)),
         'init.idx': rng.integers(0, V, (16, 32)), 'init.targets': rng.integers(0, V, (16, 32)),
         'step.W0': rng.standard_normal((V, V)).astype('float32'),
         'step.x1': rng.integers(0, V, (4, 8)), 'step.y1': rng.integers(0, V, (4, 8)),
         'step.x2': rng.integers(0, V, (4, 8)), 'step.y2': rng.integers(0, V, (4, 8)),
         'prompt': rng.integers(0, V, (2, 5)),
         'maps': rng.dirichlet(np.ones(7), (3, 2, 7)).astype('float32')}
    x['gpt.idx2'] = x['gpt.idx'].copy()
    x['gpt.idx2'][:, 5] = (x['gpt.idx'][:, 5] + rng.integers(1, V, 3)) % V
    x['lr.cases'] = np.array(LR_CASES)  # lr_at's (max_lr, warmup, max_iters, min_lr) cases
    x['pg.decay'] = np.array(PG_DECAY)
    text = (ROOT / 'input.txt').read_text(encoding='utf-8')
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}
    val = text[int(0.9 * len(text)):]
    starts = rng.integers(0, len(val) - 65, 6)
    windows = np.array([[stoi[c] for c in val[s:s + 65]] for s in starts])
    x['val.x'], x['val.y'] = windows[:, :64], windows[:, 1:]
    # the KV cache's inputs, drawn last so that every input above stays as it was
    x['kv.x'] = rng.standard_normal((2, 10, 16))  # float64: a head's input at 10 positions
    x['kv.idx'] = rng.integers(0, V, (2, 8))
    return x


def probe(nb, inp, run, *, SAMPLE_CASES, GEN_CALLS, GEN_PROMPTS, N_DRAWS):
    """In the student's kernel: get_batch, sample_next, GPT and its training functions on the grader's inputs, and the
    trained model of the notebook."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    t = inp.tensor

    def with_arange_data(fn):
        train, val = torch.arange(0, 1000), torch.arange(5000, 5100)
        with nb.replaced(data=torch.cat([train, val]), train_data=train, val_data=val):
            return fn()

    def batches():
        out = {}
        for split in ('train', 'val'):
            out[f'{split}_x'], out[f'{split}_y'] = nb.get_batch(split, 256, 5)
            out[f'{split}_a'] = nb.get_batch(split, 8, 5, generator=torch.Generator().manual_seed(3))[0]
            out[f'{split}_b'] = nb.get_batch(split, 8, 5, generator=torch.Generator().manual_seed(3))[0]
        return out
    run('batch', lambda: with_arange_data(batches))

    def sampler():
        torch.manual_seed(300)
        out = {'argmax': nb.sample_next(t('argmax.z'), temperature=1e-4)}
        for k in (1, 3):
            out[f'topk{k}'] = nb.sample_next(t('topk.z'), temperature=1.5, top_k=k)
        for i, (tau, k) in enumerate(SAMPLE_CASES):
            out[f'dist{i}'] = nb.sample_next(t('dist.z').expand(N_DRAWS, -1), temperature=tau, top_k=k)
        return out
    run('sample', sampler)

    def generator():
        out = {}
        for i, (tau, k) in enumerate(((1.0, None), (0.8, 4))):
            for j, seed in enumerate((0, 1)):  # another global state: the draws must not change
                torch.manual_seed(seed)
                out[f'g{i}_{j}'] = nb.sample_next(t('gen.z'), tau, k, generator=torch.Generator().manual_seed(16))
        return out
    run('gen', generator)

    def model():
        torch.manual_seed(301)
        m = nb.GPT(65, 8, 32, 4, 2)
        g = torch.Generator().manual_seed(304)
        with torch.no_grad():
            for p in m.parameters():  # away from the initialisation: LayerNorm gains not 1, shifts and biases not 0
                p.add_(0.05 * torch.randn(p.shape, generator=g))
            logits, loss = m(t('gpt.idx'), t('gpt.targets'))
            nologits, noloss = m(t('gpt.idx')[:2, :3])
            pert = m(t('gpt.idx2'))[0]
            same = m(torch.full((1, 8), 39))[0]
        out = {'logits': logits, 'loss': loss, 'short_shape': np.array(nologits.shape), 'short_loss_is_none': noloss is None,
               'pert': pert, 'same': same, 'block_size': getattr(m, 'block_size', -1),
               'children': np.array(sorted(n for n, _ in m.named_children())),
               'n_params': sum(p.numel() for p in m.parameters())}
        out |= {f'sd.{k}': v for k, v in m.state_dict().items()}
        return out
    run('gpt', model)

    def sliced():
        torch.manual_seed(301)
        m = nb.GPT(65, 8, 32, 4, 2)
        w = t('gpt.w')
        with torch.no_grad():
            logits, loss = m(w[:, :-1], w[:, 1:])  # targets not contiguous, as a get_batch returning views gives them
        return {'logits': logits, 'loss': loss}
    run('gptnc', sliced)

    def generate():
        class Echo(torch.nn.Module):  # a stand-in model: generate is judged alone, not the student's forward
            block_size = 8

            def __init__(self):  # a position table, unused, as the notebook's Echo has: for a generate reading its size
                super().__init__()
                self.position_embedding_table = torch.nn.Embedding(self.block_size, 1)

            def forward(self, idx, targets=None):
                return echo_logits(idx, self.block_size), None

        calls, handed = [], []

        def recorder(logits, temperature=1.0, top_k=None, generator=None):  # a stand-in sampler: argmax, recorded
            calls.append((float(temperature), -1 if top_k is None else int(top_k)))
            handed.append(logits.detach().clone())
            return logits.argmax(-1, keepdim=True)

        out = {}
        with nb.replaced(sample_next=recorder):
            for i, (n, args, kwargs) in enumerate(GEN_CALLS):
                calls.clear()
                handed.clear()
                out[f'out{i}'] = nb.GPT.generate(Echo(), t('prompt')[:, :GEN_PROMPTS[i]], n, *args, **kwargs)
                out[f'calls{i}'] = np.array(calls, dtype=float).reshape(-1, 2)
                out[f'handed{i}'] = torch.stack(handed) if handed else torch.zeros(0)
        return out
    run('generate', generate)

    def kv_head():  # head_step on a float64 head, a prompt of 6 positions, then 1, then 3
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

    def pushed(m, seed, scale):  # m with every parameter moved off its initialisation by seeded noise
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
        return m

    def kv_model():  # forward_cached on a float64 GPT, a prompt of 5 tokens then 3 alone; generate_cached, greedy
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

        def argmax(logits, temperature=1.0, top_k=None, generator=None):
            return logits.argmax(-1, keepdim=True)
        with nb.replaced(sample_next=argmax):
            out['greedy'] = nb.generate_cached(m, t('prompt')[:, :3], 9)  # 12 tokens: past block_size 8
        return out
    run('kvgpt', kv_model)

    def kv_same():  # a float32 GPT away from its initialisation, sampled by generate and by generate_cached from one seed
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

    def init():
        torch.manual_seed(303)
        m = nb.GPT(65, 64, 64, 4, 1)
        return {f'sd.{k}': v for k, v in m.state_dict().items()}
    run('init', init)

    def init_loss():
        torch.manual_seed(303)
        m = nb.GPT(65, 32, 64, 4, 2)
        with torch.no_grad():
            logits, loss = m(t('init.idx'), t('init.targets'))
        return {'logits': logits, 'loss': loss}
    run('initloss', init_loss)

    class Table(torch.nn.Module):  # a bigram table: train_step is judged on a model of the step's interface, not on GPT
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(t('step.W0').clone())

        def forward(self, idx, targets=None):
            logits = self.w[idx]  # (B,T,V)
            return logits, None if targets is None else F.cross_entropy(logits.reshape(-1, 65), targets.reshape(-1))

    def steps():
        m = Table()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        x, y = t('step.x1'), t('step.y1')
        with torch.no_grad():
            before = m(x, y)[1].item()
        got = nb.train_step(m, opt, x, y)
        with torch.no_grad():
            after = m(x, y)[1].item()
        m = Table()
        opt = torch.optim.SGD(m.parameters(), lr=1.0)
        nb.train_step(m, opt, t('step.x1'), t('step.y1'))
        nb.train_step(m, opt, t('step.x2'), t('step.y2'))
        return {'is_float': isinstance(got, float), 'got': float(got), 'before': before, 'after': after, 'W2': m.w}
    run('step', steps)

    def overfit():
        losses = nb.overfit_one_batch(seed=12)
        return {'n': len(losses), 'last': float(losses[-1])}
    run('overfit', overfit)

    def fake_batch(split, B, T, generator=None):  # estimate_loss is judged alone: a stand-in get_batch
        lo, n = (0, 1000) if split == 'train' else (5000, 100)
        x = lo + torch.randint(n - T, (B,), generator=generator)[:, None] + torch.arange(T)
        return x, x + 1

    def estimates():
        spy = nb.Spy()
        spy.train()
        torch.manual_seed(305)
        state = torch.get_rng_state()
        est = nb.estimate_loss(spy, eval_iters=4, B=3, T=5)
        again = nb.estimate_loss(spy, eval_iters=4, B=3, T=5)
        rng_kept = torch.equal(state, torch.get_rng_state())
        calls = np.array(spy.calls, dtype=float)
        spy2 = nb.Spy()
        spy2.eval()
        nb.estimate_loss(spy2, eval_iters=2, B=2, T=4)
        return {'train': est['train'], 'val': est['val'], 'again_train': again['train'], 'again_val': again['val'],
                'types_ok': all(isinstance(v, float) for v in est.values()) and set(est) == {'train', 'val'},
                'calls': calls, 'restored': spy.training, 'kept_eval': not spy2.training, 'rng_kept': rng_kept}

    def estimates_alone():
        with nb.replaced(get_batch=fake_batch):
            return estimates()
    run('est', estimates_alone)

    def schedule():
        out = {}
        for i, (max_lr, warmup, max_iters, min_lr) in enumerate(inp['lr.cases'].tolist()):
            got = [nb.lr_at(it, max_lr, int(warmup), int(max_iters), min_lr) for it in range(int(max_iters) + 5)]
            out[f'is_float{i}'] = np.array([isinstance(v, float) for v in got])
            out[f'lr{i}'] = np.array([float(v) for v in got])
        return out
    run('lr', schedule)

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

    def offsets():
        A = t('maps')
        return {f'w{o}': nb.weight_at_offset(A, o) for o in (0, 1, 2)}
    run('offset', offsets)

    def trained():
        m = nb.load_trained()
        with torch.no_grad():
            logits, loss = m(t('val.x'), t('val.y'))
        out = {'logits': logits, 'loss': loss}
        for layer, block in enumerate(m.blocks):
            for h, head in enumerate(block.attn.heads):
                out[f'A{layer}_{h}'] = head.A
                out[f'w{layer}_{h}'] = nb.weight_at_offset(head.A, 1)
        return out
    run('trained', trained)


def ref_logits(sd, idx, n_head):
    """Logits of a GPT with state_dict sd (torch tensors), computed independently of any student code: Step 5's block
    (bias-free attention, GELU feed-forward, pre-norm), a bias-free lm_head."""
    T = idx.shape[1]
    x = sd['token_embedding_table.weight'][idx] + sd['position_embedding_table.weight'][:T]
    d = x.shape[-1]

    def ln(x, p):
        return F.layer_norm(x, (d,), sd[p + '.weight'], sd[p + '.bias'], 1e-5)

    for layer in sorted({int(k.split('.')[1]) for k in sd if k.startswith('blocks.')}):
        p = f'blocks.{layer}.'
        h = ln(x, p + 'ln1')
        qkv = [[h @ sd[f'{p}attn.heads.{i}.{m}.weight'].T for m in ('query', 'key', 'value')] for i in range(n_head)]
        heads = [F.scaled_dot_product_attention(*q_k_v, is_causal=True) for q_k_v in qkv]
        x = x + torch.cat(heads, -1) @ sd[p + 'attn.proj.weight'].T
        h = F.gelu(F.linear(ln(x, p + 'ln2'), sd[p + 'ffwd.net.0.weight'], sd[p + 'ffwd.net.0.bias']))
        x = x + F.linear(h, sd[p + 'ffwd.net.2.weight'], sd[p + 'ffwd.net.2.bias'])
    return ln(x, 'ln_f') @ sd['lm_head.weight'].T


def echo_logits(idx, block_size):
    """The stand-in model of the generate checks (the notebook's Echo): at position t of an input of T tokens, small
    distinct logits and a peak at (idx[:, 0] + T + 3 t) mod 65; a context longer than block_size is refused. Sent to the
    kernel with probe() (PROBE_HELPERS), and used here to replay what generate should have done."""
    import torch

    B, T = idx.shape
    if T > block_size:
        raise IndexError(f'the model was given a context of {T} tokens, more than its block_size = {block_size}')
    peak = (idx[:, :1] + T + 3 * torch.arange(T)) % 65  # (B,T)
    return torch.linspace(-1, 1, 65).repeat(B, T, 1).scatter(-1, peak[..., None], 5.0)  # (B,T,65)


PROBE_HELPERS = (echo_logits,)


def echo_by_hand(prompt, n, block_size=8):
    """What generate returns on the stand-in model with an argmax sampler: n steps, each reading the last position of
    the last block_size characters."""
    seq = prompt.clone()
    for _ in range(n):
        seq = torch.cat([seq, echo_logits(seq[:, -block_size:], block_size)[:, -1].argmax(-1, keepdim=True)], 1)
    return seq


def state(rec, prefix):
    sd = {k[len(prefix):]: rec.tensor(k) for k in rec if k.startswith(prefix)}
    assert sd, f'the GPT could not be built ({prefix[:-4]} recorded no weights)'
    return sd


@claim
def get_batch_targets_shifted_by_one(inp, rec):
    for split in ('train', 'val'):
        bx, by = rec.tensor('batch.' + split + '_x'), rec.tensor('batch.' + split + '_y')
        assert tuple(bx.shape) == (256, 5) and bx.dtype == torch.int64, f'{split} batch shape {tuple(bx.shape)}'
        assert torch.equal(by, bx + 1), f'{split}: y is not x shifted by one; take y from d[i + 1 : i + T + 1]'


@claim
def get_batch_reads_its_own_split(inp, rec):
    for split, lo, hi in (('train', 0, 1000), ('val', 5000, 5100)):
        bx, by = rec.tensor('batch.' + split + '_x'), rec.tensor('batch.' + split + '_y')
        assert bx.min() >= lo and by.max() < hi, f'{split} batches read outside the split'
        a, b = rec.tensor('batch.' + split + '_a'), rec.tensor('batch.' + split + '_b')
        assert torch.equal(a, b), f'{split}: two generators seeded alike gave different batches; pass generator to torch.randint'


@claim
def sample_tau_to_zero_is_argmax(inp, rec):
    got = rec.tensor('sample.argmax')
    assert tuple(got.shape) == (64, 1) and torch.equal(got[:, 0], inp.tensor('argmax.z').argmax(-1)), (
        'at temperature 1e-4 not every draw is the argmax; divide the logits (not the probabilities) by the temperature')


@claim
def sample_top_k_stays_in_top_k(inp, rec):
    z = inp.tensor('topk.z')
    for k in (1, 3):
        got = rec.tensor(f'sample.topk{k}')[:, 0]
        assert ((z > z.gather(1, got[:, None])).sum(-1) < k).all(), f'a draw outside the top {k}; mask the rest with -inf'


@claim
def sample_matches_softmax_over_tau(inp, rec):
    z = inp.tensor('dist.z')[0].double()
    for i, (tau, k) in enumerate(SAMPLE_CASES):
        got = rec.tensor(f'sample.dist{i}')[:, 0]
        assert got.shape[0] == N_DRAWS and got.min() >= 0 and got.max() < z.shape[0], f'case {i}: bad draws'
        w = z / tau
        if k is not None:
            w = w.masked_fill(w < w.topk(k).values[-1], float('-inf'))
        p = F.softmax(w, -1)
        freq = torch.bincount(got, minlength=z.shape[0]).double() / N_DRAWS
        gap = ((freq - p).abs() / ((p * (1 - p) / N_DRAWS).sqrt() + 1e-12)).max().item()
        assert gap < 5, f'case tau={tau}, top_k={k}: {gap:.1f} standard errors from softmax(z / tau)'


@claim
def sample_next_uses_the_generator(inp, rec):
    for i in range(2):
        a, b = rec.tensor(f'gen.g{i}_0'), rec.tensor(f'gen.g{i}_1')
        assert tuple(a.shape) == (64, 1) and torch.equal(a, b), (
            'generators seeded alike gave different draws under another global seed; pass generator to torch.multinomial')


@claim
def gpt_shapes_and_modules(inp, rec):
    assert tuple(rec.tensor('gpt.logits').shape) == (3, 8, V), 'logits shape'
    assert tuple(rec.tensor('gpt.short_shape').tolist()) == (2, 3, V) and bool(rec.tensor('gpt.short_loss_is_none')), (
        'T < block_size, or the loss without targets')
    names = {'token_embedding_table', 'position_embedding_table', 'blocks', 'ln_f', 'lm_head'}
    assert names <= set(rec['gpt.children'].tolist()), 'submodule names'
    assert int(rec.tensor('gpt.block_size')) == 8, 'self.block_size'
    d, L = 32, 2
    want = V * d + 8 * d + L * (12 * d * d + 9 * d) + 2 * d + d * V
    assert int(rec.tensor('gpt.n_params')) == want, (f'{int(rec.tensor("gpt.n_params"))} parameters, expected {want} as Step 5 '
                                                     'counts them; a bias-free lm_head')


@claim
def gpt_loss_matches_cross_entropy(inp, rec):
    logits = rec.tensor('gpt.logits')
    ref = F.cross_entropy(logits.reshape(-1, V), inp.tensor('gpt.targets').reshape(-1))
    assert abs(float(rec.tensor('gpt.loss')) - ref.item()) < 1e-5, 'the loss is not the mean cross-entropy'
    w = inp.tensor('gpt.w')
    ref_nc = F.cross_entropy(rec.tensor('gptnc.logits').reshape(-1, V), w[:, 1:].reshape(-1))
    assert abs(float(rec.tensor('gptnc.loss')) - ref_nc.item()) < 1e-5, 'the loss of a slice of targets; use reshape, not view'
    gap = (logits - ref_logits(state(rec, 'gpt.sd.'), inp.tensor('gpt.idx'), 4)).abs().max().item()
    assert gap < 1e-4, f'logits differ from the reference implementation by {gap:.3g}'


@claim
def gpt_loss_at_init_is_ln_V(inp, rec):
    ce = F.cross_entropy(rec.tensor('initloss.logits').reshape(-1, V), inp.tensor('init.targets').reshape(-1)).item()
    assert abs(float(rec.tensor('initloss.loss')) - ce) < 1e-5 and abs(ce - math.log(V)) < 0.05, f'loss at init {ce:.3f}'


@claim
def gpt_initial_weights(inp, rec):
    sd = state(rec, 'init.sd.')
    for name, p in sd.items():
        if name.endswith('tril'):
            continue
        norm = any(part.startswith('ln') for part in name.split('.'))
        if norm:
            want = 1.0 if name.endswith('weight') else 0.0
            assert torch.equal(p, torch.full_like(p, want)), f'{name} should start at {want:g} (a LayerNorm keeps its own start)'
        elif name.endswith('bias'):
            assert not p.any(), f'{name} should start at 0'
        else:
            assert abs(p.std().item() - 0.02) < 0.003 and abs(p.mean().item()) < 0.003, (
                f'{name}: std {p.std().item():.4f}, expected N(0, 0.02^2)')


@claim
def gpt_is_causal_by_perturbation(inp, rec):
    expect_causal(rec.tensor('gpt.logits'), rec.tensor('gpt.pert'), 5, 'logits')


@claim
def gpt_uses_positions(inp, rec):
    same = rec.tensor('gpt.same')[0]
    assert (same - same[0]).abs().max() > 1e-4, 'identical tokens give identical logits at every position'


def generated(inp, rec, i):
    """generate's output in call i of GEN_CALLS, checked against the replay; and the (temperature, top_k) it passed on."""
    n, args, kwargs = GEN_CALLS[i]
    prompt = inp.tensor('prompt')[:, :GEN_PROMPTS[i]]
    got, want = rec.tensor(f'generate.out{i}'), echo_by_hand(prompt, n)
    assert tuple(got.shape) == tuple(want.shape) and torch.equal(got[:, :prompt.shape[1]], prompt), (
        f'generate(prompt {tuple(prompt.shape)}, {n}): expected {tuple(want.shape)} starting with the prompt, '
        f'got {tuple(got.shape)}')
    return got, want, rec.tensor(f'generate.calls{i}')


@claim
def gpt_generate_crops_context(inp, rec):
    got, want, _ = generated(inp, rec, 0)
    assert torch.equal(got, want), ('on a stand-in model, generate differs from the replay, which gives the model the last '
                                    'block_size characters at every step')


def handed_logits(inp, rec, i, want):
    """Each call of sample_next in call i of GEN_CALLS was handed the stand-in's logits at the last position."""
    handed, start = rec.tensor(f'generate.handed{i}'), GEN_PROMPTS[i]
    for j in range(GEN_CALLS[i][0]):
        expected = echo_logits(want[:, :start + j][:, -8:], 8)[:, -1]
        assert handed.dim() == 3 and j < handed.shape[0] and torch.equal(handed[j], expected), (
            f'step {j}: sample_next was not handed the logits of the last position (B, V); not another position, '
            'not probabilities')


@claim
def gpt_generate_reads_the_last_position(inp, rec):
    for i in (1, 0):
        got, want, calls = generated(inp, rec, i)
        assert calls.shape[0] == GEN_CALLS[i][0], f'{calls.shape[0]} calls of sample_next for {GEN_CALLS[i][0]} new tokens'
        handed_logits(inp, rec, i, want)
        assert torch.equal(got, want), 'on a stand-in model, generate did not append the draw from the last position'


@claim
def gpt_generate_samples_with_sample_next(inp, rec):
    for i, want_args in ((2, (0.7, 5)), (3, (0.5, 3)), (0, (1.0, -1))):
        got, want, calls = generated(inp, rec, i)
        assert calls.shape[0] == GEN_CALLS[i][0], (f'{calls.shape[0]} calls of sample_next for {GEN_CALLS[i][0]} new tokens; '
                                                   'draw every token with sample_next')
        passed = {tuple(c) for c in calls.tolist()}
        assert passed == {want_args}, (f'sample_next received (temperature, top_k) = {sorted(passed)}, expected '
                                       f'{want_args} (-1: None); pass both on')
        handed_logits(inp, rec, i, want)
        assert torch.equal(got, want), 'generate did not append what sample_next returned'


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


def table_loss(W, x, y):
    return F.cross_entropy(W[x].reshape(-1, V), y.reshape(-1))


@claim
def train_step_lowers_the_loss(inp, rec):
    assert bool(rec.tensor('step.is_float')), 'train_step does not return a float'
    before, got, after = (float(rec.tensor(f'step.{k}')) for k in ('before', 'got', 'after'))
    assert abs(got - before) < 1e-5, f'returned {got:.4f}, not the loss before the step, {before:.4f}'
    assert after < before - 1e-3, f'{before:.4f} -> {after:.4f}: the step did not lower the loss; backward, then step'


@claim
def train_step_clears_old_gradients(inp, rec):
    W = inp.tensor('step.W0')
    for x, y in (('step.x1', 'step.y1'), ('step.x2', 'step.y2')):
        W.requires_grad_(True)
        g, = torch.autograd.grad(table_loss(W, inp.tensor(x), inp.tensor(y)), W)
        W = (W - g).detach()
    gap = (rec.tensor('step.W2') - W).abs().max().item()
    assert gap < 1e-5, f'two SGD steps differ from two steps by hand by {gap:.3g}; clear the gradients at every step'


@claim
def overfit_one_batch_near_zero(inp, rec):
    last = float(rec.tensor('overfit.last'))
    assert int(rec.tensor('overfit.n')) == 150 and last < 0.1, f'overfit loss {last:.3f}'


def calls(rec):
    c = rec.tensor('est.calls')
    assert tuple(c.shape) == (16, 3), f'{c.shape[0]} forward calls for two estimates with eval_iters=4 (expected 16)'
    return c


@claim
def estimate_loss_in_eval_mode_without_grad(inp, rec):
    c = calls(rec)
    assert not c[:, 0].any() and not c[:, 1].any(), 'a batch ran in training mode or with grad enabled'
    assert bool(rec.tensor('est.restored')) and bool(rec.tensor('est.kept_eval')), 'the mode is not restored'


@claim
def estimate_loss_averages_fixed_held_out_batches(inp, rec):
    c = calls(rec)
    est = {k: float(rec.tensor(f'est.{k}')) for k in ('train', 'val', 'again_train', 'again_val')}
    assert bool(rec.tensor('est.types_ok')), 'not a dict of two floats'
    assert abs(est['train'] - c[:4, 2].mean().item()) < 1e-9, 'not the mean'
    assert abs(est['val'] - c[4:8, 2].mean().item()) < 1e-9, 'not the mean'
    assert est['train'] < 1000 <= 5000 <= est['val'], 'a split was estimated on the other split'
    assert est['train'] == est['again_train'] and est['val'] == est['again_val'], 'not the same batches twice'
    assert bool(rec.tensor('est.rng_kept')), ('estimate_loss changed the global random state (torch.manual_seed?): '
                                              'training would repeat its batches after every estimate')


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
        assert abs(float(rec.tensor(f'offset.w{o}')) - want) < 1e-5, f'offset {o}'


def trained_sd():
    ckpt = torch.load(STEP / 'step6_gpt.pt', weights_only=True)
    return {k: v.float() for k, v in ckpt['state_dict'].items()}, ckpt['config']['n_head']


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
    trained_checkpoint_runs_in_your_gpt(inp, rec)


@claim
def trained_checkpoint_runs_in_your_gpt(inp, rec):
    sd, n_head = trained_sd()
    logits = rec.tensor('trained.logits')
    with torch.no_grad():
        gap = (logits - ref_logits(sd, inp.tensor('val.x'), n_head)).abs().max().item()
    assert gap < 1e-3, f'the trained logits differ from the reference by {gap:.3g}'
    assert F.cross_entropy(logits.reshape(-1, V), inp.tensor('val.y').reshape(-1)).item() < 2.1, 'held-out loss above 2.1'
