"""Step 6's claims, judged outside the student's kernel: get_batch, sampling, the GPT (its forward, its initialisation,
its generate), the gradient of the loss by hand, its training step and loss estimates, the GPT the notebook trains, and
the trained checkpoint in the student's GPT. Each claim judges its own function: the probe hands generate a reference
forward and a reference sampler, train_step a bigram table, estimate_loss a stand-in get_batch, so that one bug costs the
tests of its own function. The GPT's logits are re-derived here from the student's recorded weights by an independent
implementation (F.layer_norm, F.scaled_dot_product_attention): the model the notebook trained is measured on held-out
text by that implementation, from its weights alone, and the trained checkpoint's logits from the step's file."""

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from course.grader.claims import (
    claim,
    expect_adam_run,
    expect_causal,
    expect_dtype,
    expect_independent,
    expect_law,
    expect_normal,
    records,
)
from course.grader.probe import independence
from course.layout import instructor_module

STEP = Path(__file__).resolve().parent.parent  # source/step6
ROOT = STEP.parent.parent
V = 65
SAMPLE_CASES = [(1.0, None), (0.6, None), (2.5, None), (1.0, 3), (1.3, 4)]  # (temperature, top_k)
# generate's calls on the stand-in model: (new tokens, positional arguments, keyword arguments), on the first
# GEN_PROMPTS[i] characters of the prompt: past block_size, greedy defaults, temperature and top_k in either form
GEN_CALLS = [(20, (), {}), (1, (), {}), (12, (), {'temperature': 0.7, 'top_k': 5}), (4, (0.5, 3), {})]
GEN_PROMPTS = [5, 5, 4, 1]
N_DRAWS = 40_000
# The checks by kind (docs/adding-a-step.md). The sampler's law: sample_next on rows of logits the grader sets (a
# confident row, a nearly uniform one, the uniform one, a random one), LAW_N draws of each row per (temperature, top_k)
# of LAW_CASES, each row's draws tested against its softmax (chi-square, expect_law); and generate's law on Step 2's
# law table (a bigram stand-in and a reference sampler: generate judged alone), every transition out of its LAW_ROWS.
# False-failure rate: LAW_ALPHA for each of the two claims, split among their tests.
STEP2 = instructor_module('step2', 'checks')  # the law table, its rows and the bigram loss are Step 2's
LAW_ROW_NAMES = ('a confident row', 'a nearly uniform row', 'the uniform row', 'a row of random logits')
LAW_CASES = [(1.0, None), (0.7, None), (1.0, 6)]  # (temperature, top_k)
LAW_N, LAW_NEW = 3000, 4
LAW_ALPHA = 1e-6
INIT_ALPHA = 1e-6  # the N(0, 0.02^2) law of the initial weights (expect_normal): its false-failure rate
ADAM = (25, 1e-2)  # train_step driven by the grader: steps of Adam(lr) on the grader's batches, replayed (expect_adam_run)


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
         'prompt': rng.integers(0, V, (2, 5))}
    x['gpt.idx2'] = x['gpt.idx'].copy()
    x['gpt.idx2'][:, 5] = (x['gpt.idx'][:, 5] + rng.integers(1, V, 3)) % V
    text = (ROOT / 'input.txt').read_text(encoding='utf-8')
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}
    val = text[int(0.9 * len(text)):]
    starts = rng.integers(0, len(val) - 65, 6)
    windows = np.array([[stoi[c] for c in val[s:s + 65]] for s in starts])
    x['val.x'], x['val.y'] = windows[:, :64], windows[:, 1:]
    # cross_entropy_grad's inputs: float64 logits of size about 2, float32 ones of size about 30 (a confident model)
    x['ceg.z'], x['ceg.y'] = 2 * rng.standard_normal((8, V)), rng.integers(0, V, 8)
    x['ceg.z2'], x['ceg.y2'] = (30 * rng.standard_normal((4, 9))).astype('float32'), rng.integers(0, 9, 4)
    # 32 held-out windows of 33 characters: the GPT the notebook trained is measured on their 1,024 predictions
    starts = rng.integers(0, len(val) - 33, 32)
    mine = np.array([[stoi[c] for c in val[s:s + 33]] for s in starts])
    x['mine.x'], x['mine.y'] = mine[:, :32], mine[:, 1:]
    x |= kinds_inputs(np.random.default_rng(seed + 1))  # a generator of their own: the inputs above stay as they were
    return x


def law_rows(rng):
    """(4, V) logits of LAW_ROW_NAMES: one id at 94% of the mass, a row within 0.1 of 0, the zero row, 2 N(0, 1)."""
    z = np.zeros((4, V))
    z[0] = 0.5 * rng.standard_normal(V)
    z[0, rng.integers(0, V)] = 7.0
    z[1] = 0.1 * rng.standard_normal(V)
    z[3] = 2.0 * rng.standard_normal(V)
    return z.astype('float32')


def kinds_inputs(rng):
    x = {'law.z': law_rows(rng)}
    law = STEP2.law_inputs(rng)
    x['glaw.W'], x['glaw.ctx'] = law['law.W'], law['law.ctx']
    S, _ = ADAM
    x['adam.x'], x['adam.y'] = rng.integers(0, V, (S, 8, 8)), rng.integers(0, V, (S, 8, 8))
    return x


# The probe: its parts, run in the student's kernel in this order (the notebook's order of tasks), each recording under
# the names its run() calls give.

@records
def batches_of_get_batch(nb, inp, run):
    """get_batch on data the grader sets (train ids 0..999, val ids 5000..5099): a (256, 5) batch of each split, and two
    batches of 8 drawn with generators seeded alike ('batch')."""
    import torch

    def batches():
        train, val = torch.arange(0, 1000), torch.arange(5000, 5100)
        out = {}
        with nb.replaced(data=torch.cat([train, val]), train_data=train, val_data=val):
            for split in ('train', 'val'):
                out[f'{split}_x'], out[f'{split}_y'] = nb.get_batch(split, 256, 5)
                out[f'{split}_a'] = nb.get_batch(split, 8, 5, generator=torch.Generator().manual_seed(3))[0]
                out[f'{split}_b'] = nb.get_batch(split, 8, 5, generator=torch.Generator().manual_seed(3))[0]
        return out
    run('batch', batches)


@records
def draws_of_sample_next(nb, inp, run, *, SAMPLE_CASES, N_DRAWS, LAW_CASES, LAW_N):
    """sample_next's draws: at temperature 1e-4, under top-k, and N_DRAWS of one row per case of SAMPLE_CASES ('sample');
    LAW_N of each of the grader's law rows per case of LAW_CASES ('slaw'); with generators seeded alike under two global
    seeds ('gen')."""
    import torch

    t = inp.tensor

    def sampler():
        torch.manual_seed(300)
        out = {'argmax': nb.sample_next(t('argmax.z'), temperature=1e-4)}
        for k in (1, 3):
            out[f'topk{k}'] = nb.sample_next(t('topk.z'), temperature=1.5, top_k=k)
        for i, (tau, k) in enumerate(SAMPLE_CASES):
            out[f'dist{i}'] = nb.sample_next(t('dist.z').expand(N_DRAWS, -1), temperature=tau, top_k=k)
        return out
    run('sample', sampler)

    def sampler_law():  # each row of the grader's law rows LAW_N times, per (temperature, top_k)
        torch.manual_seed(307)
        z = t('law.z').repeat_interleave(LAW_N, dim=0)  # (4 LAW_N, V)
        return {f'{i}': nb.sample_next(z, temperature=tau, top_k=k) for i, (tau, k) in enumerate(LAW_CASES)}
    run('slaw', sampler_law)

    def generator():
        out = {}
        for i, (tau, k) in enumerate(((1.0, None), (0.8, 4))):
            for j, seed in enumerate((0, 1)):  # another global state: the draws must not change
                torch.manual_seed(seed)
                out[f'g{i}_{j}'] = nb.sample_next(t('gen.z'), tau, k, generator=torch.Generator().manual_seed(16))
        return out
    run('gen', generator)


@records
def gpt_forward(nb, inp, run):
    """GPT(65, 8, 32, 4, 2) moved off its initialisation: its logits and loss (also on a short input, a perturbed one and
    one token repeated), its modules, parameters and weights, its blocks and its head apart ('gpt'); the same GPT's loss
    on targets that are a slice ('gptnc')."""
    import numpy as np
    import torch

    t = inp.tensor

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
        out |= {f'apart.blocks.{k}': v for k, v in independence(m.blocks[0], m.blocks[1]).items()}
        out |= {f'apart.head.{k}': v for k, v in independence(m.token_embedding_table, m.lm_head).items()}
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


@records
def generate_on_stand_ins(nb, inp, run, *, GEN_CALLS, GEN_PROMPTS, LAW_NEW):
    """GPT.generate alone: on the stand-in Echo with a recording argmax sampler, for each call of GEN_CALLS, its output,
    the (temperature, top_k) and the logits it handed the sampler ('generate'); LAW_NEW ids after each context of Step 2's
    law table, on a bigram stand-in with a reference sampler ('glaw')."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    t = inp.tensor

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

    def generate_law():  # generate alone, on a bigram stand-in whose rows the grader sets, with a reference sampler
        class Table(torch.nn.Module):
            block_size = 8

            def __init__(self):
                super().__init__()
                self.position_embedding_table = torch.nn.Embedding(self.block_size, 1)
                self.W = t('glaw.W')

            def forward(self, idx, targets=None):
                return self.W[idx], None  # (B,T,V): the row of each id

        def multinomial(logits, temperature=1.0, top_k=None, generator=None):
            return torch.multinomial(F.softmax(logits / temperature, dim=-1), 1, generator=generator)

        torch.manual_seed(308)
        with nb.replaced(sample_next=multinomial):
            return {'out': nb.GPT.generate(Table(), t('glaw.ctx'), LAW_NEW).to(torch.int8)}
    run('glaw', generate_law)


@records
def gpt_at_initialisation(nb, inp, run):
    """Fresh GPTs: the weights of GPT(65, 64, 64, 4, 1) ('init'); the logits and loss of GPT(65, 32, 64, 4, 2) ('initloss')."""
    import torch

    t = inp.tensor

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


@records
def gradient_of_cross_entropy(nb, inp, run):
    """cross_entropy_grad on float64 logits of size about 2 and on confident float32 ones ('ceg')."""
    t = inp.tensor

    def grads():
        return {'g': nb.cross_entropy_grad(t('ceg.z'), t('ceg.y')), 'g2': nb.cross_entropy_grad(t('ceg.z2'), t('ceg.y2'))}
    run('ceg', grads)


@records
def train_step_on_a_table(nb, inp, run, *, ADAM):
    """train_step on a bigram table (a model of the step's interface, not GPT): the loss it returns, and the loss before
    and after one AdamW step; the table after two SGD steps ('step'); the table after each of ADAM[0] steps of Adam(lr)
    on the grader's batches, and the losses returned ('adam')."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    t = inp.tensor

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

    def adam_steps():  # the grader's loop of train_step: Adam(lr) on its batches, the table after every step
        m = Table()
        opt = torch.optim.Adam(m.parameters(), lr=ADAM[1])
        snaps, losses = [m.w.detach().reshape(-1).clone()], []
        for x, y in zip(t('adam.x'), t('adam.y'), strict=True):
            losses.append(nb.train_step(m, opt, x, y))
            snaps.append(m.w.detach().reshape(-1).clone())
        return {'snaps': torch.stack(snaps), 'losses': np.array([float(v) for v in losses], dtype=np.float64)}
    run('adam', adam_steps)


@records
def overfitting_one_batch(nb, inp, run):
    """overfit_one_batch(seed=12): how many losses it returns, and the last ('overfit')."""
    def overfit():
        losses = nb.overfit_one_batch(seed=12)
        return {'n': len(losses), 'last': float(losses[-1])}
    run('overfit', overfit)


@records
def estimate_loss_alone(nb, inp, run):
    """estimate_loss on the notebook's Spy, with a stand-in get_batch: its estimates, twice, the Spy's calls (mode, grad,
    batch), its mode after, and whether the global random state was kept ('est')."""
    import numpy as np
    import torch

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


@records
def gpt_the_notebook_trained(nb, inp, run):
    """The GPT the notebook trained in 6.5: its weights (measured in the grader by the reference forward) and the last
    step of its history ('mine')."""
    def mine():
        m = nb.my_gpt
        out = {f'sd.{k}': v for k, v in m.state_dict().items()}
        out['steps'] = int(nb.my_history[-1][0])
        return out
    run('mine', mine)


@records
def trained_checkpoint_in_the_gpt(nb, inp, run):
    """The trained checkpoint in the student's GPT (load_trained()): its logits and loss on held-out windows ('trained')."""
    import torch

    t = inp.tensor

    def trained():
        m = nb.load_trained()
        with torch.no_grad():
            logits, loss = m(t('val.x'), t('val.y'))
        return {'logits': logits, 'loss': loss}
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
    kernel with the probe's parts (PROBE_HELPERS), and used here to replay what generate should have done."""
    import torch

    B, T = idx.shape
    if T > block_size:
        raise IndexError(f'the model was given a context of {T} tokens, more than its block_size = {block_size}')
    peak = (idx[:, :1] + T + 3 * torch.arange(T)) % 65  # (B,T)
    return torch.linspace(-1, 1, 65).repeat(B, T, 1).scatter(-1, peak[..., None], 5.0)  # (B,T,65)


PROBE_HELPERS = (echo_logits, independence)


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
        assert tuple(bx.shape) == (256, 5), f'{split} batch shape {tuple(bx.shape)}'
        for name, b in (('x', bx), ('y', by)):
            expect_dtype(b, 'int64', f"get_batch('{split}', 256, 5)'s {name}", 'the contract says torch.long token ids')
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
    expect_dtype(got, 'int64', 'sample_next(logits (64, 10))', 'the contract says (B,1) torch.long ids')
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
    sampler_follows_the_law(inp, rec)


def law_probs(z, tau, k):
    """softmax(z / tau) over the top k of z (float64 numpy), as the contract defines sample_next's law."""
    w = np.asarray(z, dtype=np.float64) / tau
    if k is not None:
        w = np.where(w < np.sort(w)[-k], -np.inf, w)
    e = np.exp(w - w.max())
    return e / e.sum()


def sampler_follows_the_law(inp, rec):
    """sample_next's draws on the grader's law rows (a confident row, a nearly uniform one, the uniform one, a random
    one; LAW_N draws each) follow softmax(z / tau) over the top k, for every case of LAW_CASES: chi-square per row and
    case (expect_law), false-failure rate LAW_ALPHA in all."""
    z = inp['law.z']
    tests = len(LAW_CASES) * len(z)
    for i, (tau, k) in enumerate(LAW_CASES):
        got = rec[f'slaw.{i}'].astype(np.int64)
        assert got.shape == (len(z) * LAW_N, 1), f'sample_next on ({len(z) * LAW_N}, {V}) logits returned shape {got.shape}'
        for r, name in enumerate(LAW_ROW_NAMES):
            expect_law(got[r * LAW_N:(r + 1) * LAW_N, 0], law_probs(z[r], tau, k),
                       f'sample_next(temperature={tau}, top_k={k}) on {name} of the grader\'s logits', LAW_ALPHA / tests,
                       'draw with torch.multinomial from softmax(logits / temperature) over the top k, with no rule of '
                       'your own (no argmax when the model is sure, no floor on small probabilities)')


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
    apart = {k[len('gpt.apart.'):]: rec[k] for k in rec if k.startswith('gpt.apart.')}
    expect_independent({k[len('blocks.'):]: v for k, v in apart.items() if k.startswith('blocks.')},
                       'blocks[0] and blocks[1] of GPT(65, 8, 32, 4, 2)', 'build a new Block for each layer')
    expect_independent({k[len('head.'):]: v for k, v in apart.items() if k.startswith('head.')},
                       'token_embedding_table and lm_head', 'the contract says an lm_head of its own, not tied')


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
    weights_follow_the_normal_law(sd)


def weights_follow_the_normal_law(sd):
    """The weights of the nn.Linear and of the nn.Embedding modules of a fresh GPT (each kind pooled) are draws of
    N(0, 0.02^2): expect_normal, false-failure rate INIT_ALPHA in all. A uniform draw or a normal truncated at 2 std of
    the right spread fails."""
    kinds = {'nn.Embedding': [], 'nn.Linear': []}
    for name, p in sd.items():
        if name.endswith('.weight') and not any(part.startswith('ln') for part in name.split('.')):
            kinds['nn.Embedding' if 'embedding' in name else 'nn.Linear'].append(p.reshape(-1))
    for kind, ps in kinds.items():
        assert ps, f'no {kind} weight in the GPT\'s state_dict'
        expect_normal(torch.cat(ps).numpy(), 0.02, f'the {kind} weights of a fresh GPT', alpha=INIT_ALPHA / len(kinds),
                      cause='draw them with nn.init.normal_(weight, mean=0.0, std=0.02): a normal, not another law of '
                            'that std (no uniform, no truncation)')


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
    expect_dtype(got, 'int64', 'generate(prompt, 20)', 'the contract says torch.long ids: append the (B,1) long draws')
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
    generate_follows_the_law(inp, rec['glaw.out'])


def generate_follows_the_law(inp, out):
    """generate's draws on Step 2's law table (a bigram stand-in, a reference multinomial sampler): every transition out
    of each of its LAW_ROWS follows softmax(W[previous id]), as Step 2's generate_follows_the_law tests it (false-failure
    rate STEP2.LAW_ALPHA in all). out: generate's (n, 1 + LAW_NEW) output."""
    out, W = np.asarray(out).astype(np.int64), inp['glaw.W']
    assert out.shape == (len(inp['glaw.ctx']), 1 + LAW_NEW), f'generate(ctx (n, 1), {LAW_NEW}) returned shape {out.shape}'
    prev, new = out[:, :-1].reshape(-1), out[:, 1:].reshape(-1)
    for what, row in STEP2.LAW_ROWS.items():
        expect_law(new[prev == row], np.exp(STEP2.log_softmax(W[row])),
                   f'the ids generate drew after {what} of a stand-in model', STEP2.LAW_ALPHA / len(STEP2.LAW_ROWS),
                   'append exactly what sample_next returns for the last position\'s logits, with no rule of your own '
                   '(no argmax when the model is sure, no second draw when it repeats)')


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
    train_step_is_one_adam_step(inp, rec)


def train_step_is_one_adam_step(inp, rec):
    """ADAM[0] calls of train_step with one Adam(lr) on a bigram table, on the grader's batches, against a reference
    run on the same batches (expect_adam_run): each call is one Adam step of its batch's gradient (no learning rate
    changed, no other step), and returns that batch's loss before the step."""
    steps, lr = ADAM
    run = {'snaps': rec['adam.snaps'], 'epoch': np.arange(steps), 'batch.0': inp['adam.x'], 'batch.1': inp['adam.y'],
           'losses': rec['adam.losses']}
    expect_adam_run(run, STEP2.bigram_loss, lr, f'{steps} calls of train_step with one torch.optim.Adam(lr={lr:g})',
                    steps=steps, cause='one backward and one optimizer.step() per call, with the optimizer as given (no '
                                       'change to its learning rate), returning the loss before the step')


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


def trained_sd():
    ckpt = torch.load(STEP / 'step6_gpt.pt', weights_only=True)
    return {k: v.float() for k, v in ckpt['state_dict'].items()}, ckpt['config']['n_head']


@claim
def trained_checkpoint_runs_in_your_gpt(inp, rec):
    sd, n_head = trained_sd()
    logits = rec.tensor('trained.logits')
    with torch.no_grad():
        gap = (logits - ref_logits(sd, inp.tensor('val.x'), n_head)).abs().max().item()
    assert gap < 1e-3, f'the trained logits differ from the reference by {gap:.3g}'
    assert F.cross_entropy(logits.reshape(-1, V), inp.tensor('val.y').reshape(-1)).item() < 2.1, 'held-out loss above 2.1'


def ce_reference(z, y):
    """The gradient of F.cross_entropy(z, y) with respect to z, by autograd."""
    z = z.clone().requires_grad_(True)
    F.cross_entropy(z, y).backward()
    return z.grad


@claim
def cross_entropy_grad_matches_autograd(inp, rec):
    for key, tol in (('', 1e-10), ('2', 1e-6)):
        z, y = inp.tensor('ceg.z' + key), inp.tensor('ceg.y' + key)
        got = rec.tensor('ceg.g' + key)
        assert tuple(got.shape) == tuple(z.shape) and got.dtype == z.dtype, (
            f'cross_entropy_grad(logits {tuple(z.shape)} {z.dtype}) returned {tuple(got.shape)} {got.dtype}; expected the '
            'shape and dtype of the logits')
        gap = (got - ce_reference(z, y)).abs().max().item()
        assert gap < tol, (f'on logits {tuple(z.shape)} {z.dtype} the gradient differs from autograd\'s by {gap:.3g} '
                           f'(expected < {tol:g}); differentiate both terms, and the loss is a mean over the rows')


@claim
def cross_entropy_grad_rows_sum_to_zero(inp, rec):
    got, y = rec.tensor('ceg.g').double(), inp.tensor('ceg.y')
    assert got.dim() == 2 and got.shape[0] == y.shape[0], f'a gradient of shape {tuple(got.shape)}'
    sums = got.sum(-1).abs().max().item()
    assert sums < 1e-9, f'a row of the gradient sums to {sums:.3g}, not 0'
    assert torch.equal(got < 0, F.one_hot(y, got.shape[1]).bool()), (
        'the gradient is not negative exactly at each row\'s target (and positive elsewhere)')


MY_N_HEAD = 4  # the notebook's MY_CONFIG: block_size 32, d 48, 4 heads, 2 blocks
MY_STEPS = 600
MY_LEVEL = 2.4


@claim
def my_gpt_learns(inp, rec):
    sd = state(rec, 'mine.sd.')
    steps = int(rec.tensor('mine.steps'))
    assert steps == MY_STEPS, f'the training history ends at step {steps}, not {MY_STEPS}'
    x, y = inp.tensor('mine.x'), inp.tensor('mine.y')  # held-out text the notebook never trained on
    assert sd['position_embedding_table.weight'].shape[0] >= x.shape[1], 'the trained GPT has fewer than 32 positions'
    with torch.no_grad():
        loss = F.cross_entropy(ref_logits(sd, x, MY_N_HEAD).reshape(-1, V), y.reshape(-1)).item()
    assert loss < MY_LEVEL, (f'the GPT trained in the notebook scores {loss:.3f} on held-out windows (measured by the '
                             f'grader from its weights); expected below {MY_LEVEL}. Check train_step, get_batch and the forward')
