"""Step 2's claims, judged outside the student's kernel: bigram counts and probabilities from Tiny Shakespeare (counted
here from the course's input.txt), the NLL, the bigram model's forward pass, sampling and training."""

import math
from pathlib import Path

import numpy as np
import torch.nn.functional as F

from course.grader.claims import claim, expect_adam_run, expect_dtype, expect_law, expect_normal, records
from course.grader.probe import training_run

V = 65
ROOT = Path(__file__).resolve().parents[3]  # the course: source/step2/instructor/checks.py
ALPHAS = (0.0, 0.5, 1.0, 3.0)  # bigram_probs on the grader's counts; every row has a count, so alpha = 0 is defined
TRAIN = (300, 64, 16, 0.05)  # train_bigram(model, steps, B, T, lr): the notebook's run, repeated with the grader's seed
FALLS = (150, 32, 8, 0.05)  # the run of training_loss_falls, with the notebook test's threshold:
FALL_RATIO = 0.64  # the mean of the last 20 losses below this times the mean of the first 5: about 0.56 when right, 0.72
# with a forgotten zero_grad (which still falls below 3.2 in 60 steps, but ends near 3.3 after 150). A ratio, not levels:
# the losses are the model's own, and a model whose loss is a sum (Step 2's forward test catches it) trains the same
CYCLE = 12  # new ids drawn on the table whose row i makes i+1 certain
MARGIN = 0.05  # nats: the learned model within this of the count model (the notebook measures about 0.02)
TV_MAX = 0.1  # frequency-weighted total variation between softmax(table) and P (the notebook measures about 0.05)
E_LSE = 4.6617  # E[logsumexp(z)] for z ~ N(0, I_65), by Monte Carlo over 10^7 draws: the expected loss at initialisation
N_INIT = 10  # models drawn at initialisation
N_GEN = 4000  # contexts for the sampling check
# The sampler's law (generate_samples_from_the_last_position): a table whose rows the grader sets, LAW_N contexts
# starting at each of LAW_ROWS, LAW_NEW new ids each; every transition from those rows is tested against its softmax
LAW_ROWS = {'a confident row': 10, 'a row that repeats its character half the time': 20, 'the uniform row': 30,
            'a row of random logits': 40}  # row -> its id
LAW_N, LAW_NEW = 3000, 4
LAW_ALPHA = 1e-6  # the claim's false-failure rate: LAW_ALPHA / len(LAW_ROWS) for each row's chi-square test
INIT_ALPHA = 1e-6  # the false-failure rate of the N(0, 1) initialisation law (the DKW bound of expect_normal)


def corpus():
    """(train, val): Tiny Shakespeare as ids in the sorted vocabulary, split 90/10, read here from the course's input.txt."""
    text = (ROOT / 'input.txt').read_text(encoding='utf-8')
    raw = text.encode('utf-8')
    if len(raw) == len(text):  # ASCII, as Tiny Shakespeare is: a lookup table, in linear time
        codes = np.frombuffer(raw, dtype=np.uint8)
        ids = (np.cumsum(np.bincount(codes, minlength=256) > 0) - 1)[codes]  # rank of each byte among those present
    else:
        _, ids = np.unique(np.frombuffer(text.encode('utf-32-le'), dtype='<u4'), return_inverse=True)  # sorted code points
    n = int(0.9 * len(ids))
    return ids[:n], ids[n:]


def counts(d, v=V):
    """(v,v) int64 bigram counts of the pairs (d[t], d[t+1])."""
    return np.bincount(d[:-1] * v + d[1:], minlength=v * v).reshape(v, v)


def make_inputs(seed=20262):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    train, val = corpus()
    x = {'N_train': counts(train), 'N_val': counts(val), 'val': val.astype('int64')}
    Np = rng.integers(0, 40, (V, V)) * (rng.random((V, V)) < 0.3)
    Np[:, rng.integers(0, V)] += 1  # no empty row
    x['probs.N'] = Np.astype('int64')
    x['nll.P'] = rng.dirichlet(np.full(V, 0.5), size=V).astype('float32')
    x['nll.data'] = rng.integers(0, V, 3000)
    x['model.W'] = (3 * rng.standard_normal((V, V))).astype('float32')
    x['model.idx'], x['model.targets'] = rng.integers(0, V, (5, 7)), rng.integers(0, V, (5, 7))
    x['init.idx'], x['init.targets'] = rng.integers(0, V, (1, 20_000)), rng.integers(0, V, (1, 20_000))
    x['gen.W'] = (2 * rng.standard_normal((V, V))).astype('float32')
    first, last = rng.choice(V, 2, replace=False)
    ctx = rng.integers(0, V, (N_GEN, 3))
    ctx[:, 0], ctx[:, -1] = first, last
    x['gen.ctx'] = ctx
    x['seeds'] = rng.integers(0, 2**31, 4)
    x['cycle.ctx'] = rng.integers(0, V, (3, 2))
    x |= law_inputs(np.random.default_rng(seed + 1))  # a generator of their own: the inputs above stay as they were
    return x


def law_table(rng):
    """(V,V) logits for the sampler's law: LAW_ROWS' confident row (94% on one id), repeating row (48% on itself) and
    uniform row, the other rows random."""
    W = 1.5 * rng.standard_normal((V, V))
    rows = list(LAW_ROWS.values())
    W[rows[:2]] = 0.5 * rng.standard_normal((2, V))
    W[rows[0], rows[2]] = 7.0  # the confident row leads to the uniform row
    W[rows[1], rows[1]] = 4.2  # the repeating row
    W[rows[2]] = 0.0
    return W.astype('float32')


def law_inputs(rng):
    return {'law.W': law_table(rng), 'law.ctx': np.repeat(np.array(list(LAW_ROWS.values())), LAW_N)[:, None]}


def bigram_with_table(nb, V, W=None):
    """A fresh BigramLanguageModel(V) of the notebook, its one (V,V) parameter set to W if given (a probe helper)."""
    import torch

    m = nb.BigramLanguageModel(V)
    if W is not None:
        (table,) = list(m.parameters())  # the one (V,V) parameter
        with torch.no_grad():
            table.copy_(W)
    return m


def table_of(m, V):
    """The (V,V) logits of model m after each id (a probe helper)."""
    import torch

    with torch.no_grad():
        return m(torch.arange(V)[None])[0][0]


PROBE_HELPERS = (training_run, bigram_with_table, table_of)  # sent with the probe's parts


@records
def counts_and_probabilities(nb, inp, run, *, ALPHAS):
    """bigram_counts of both splits, bigram_probs of the grader's counts at each of ALPHAS, bigram_nll on the grader's
    table and ids, and the validation NLL of the notebook's training counts without and with smoothing."""
    t = inp.tensor
    run('counts', lambda: {'train': nb.bigram_counts('train'), 'val': nb.bigram_counts('val')})
    run('probs', lambda: {f'a{i}': nb.bigram_probs(t('probs.N'), a) for i, a in enumerate(ALPHAS)})

    def nll():
        got = nb.bigram_nll(t('nll.P'), t('nll.data'))
        return {'p': float(got), 'float': type(got) is float, 'type': type(got).__name__[:50]}
    run('nll', nll)
    run('smooth', lambda: {'a0': nb.bigram_nll(nb.bigram_probs(t('N_train'), 0.0), t('val')),
                           'a1': nb.bigram_nll(nb.bigram_probs(t('N_train'), 1.0), t('val'))})


@records
def bigram_model(nb, inp, run, *, V, N_INIT):
    """BigramLanguageModel: its parameter count, its forward pass on the grader's table (with and without targets), and
    the tables of N_INIT fresh models, each from its own seed."""
    import torch

    t = inp.tensor
    seeds = [int(s) for s in inp['seeds']]

    def forward():
        torch.manual_seed(seeds[0])
        m = nb.BigramLanguageModel(V)
        n_params = sum(p.numel() for p in m.parameters())
        m = bigram_with_table(nb, V, t('model.W'))
        logits, loss = m(t('model.idx'), t('model.targets'))
        logits0, loss0 = m(t('model.idx'))
        return {'n_params': n_params, 'logits': logits, 'loss': loss, 'logits0': logits0, 'loss0_none': loss0 is None}
    run('forward', forward)

    def init():
        out = {}
        for i in range(N_INIT):
            torch.manual_seed(seeds[1] + i)
            m = nb.BigramLanguageModel(V)
            out[f'table{i}'] = table_of(m, V)
        return out
    run('init', init)


@records
def generation(nb, inp, run, *, V, CYCLE, LAW_NEW):
    """generate on the grader's tables: one and five new ids after the grader's contexts, CYCLE ids on a table whose row
    i makes i+1 certain, and LAW_NEW ids on the table of the sampler's law."""
    import torch

    t = inp.tensor
    seeds = [int(s) for s in inp['seeds']]

    def generate():
        m = bigram_with_table(nb, V, t('gen.W'))
        torch.manual_seed(seeds[2])
        return {'new': m.generate(t('gen.ctx'), 1), 'long': m.generate(t('gen.ctx')[:3], 5)}
    run('gen', generate)

    def cycle():
        W = torch.full((V, V), -100.0)
        W[torch.arange(V), (torch.arange(V) + 1) % V] = 100.0  # row i: i+1 is certain
        return {'out': bigram_with_table(nb, V, W).generate(t('cycle.ctx'), CYCLE)}
    run('cycle', cycle)

    def law():
        torch.manual_seed(seeds[2] + 1)
        return {'out': bigram_with_table(nb, V, t('law.W')).generate(t('law.ctx'), LAW_NEW).to(torch.int8)}
    run('law', law)


@records
def training_runs(nb, inp, run, *, V, TRAIN, FALLS):
    """train_bigram twice, each from its own seed: the run TRAIN, replayed against its batches (training_run), and the
    run FALLS, with the calls it makes of get_batch."""
    import numpy as np
    import torch

    seeds = [int(s) for s in inp['seeds']]

    def train():
        torch.manual_seed(seeds[3])
        m = nb.BigramLanguageModel(V)
        replay = training_run(nb, lambda: nb.train_bigram(m, *TRAIN), list(m.parameters()), TRAIN[1:3])
        losses = replay['losses']
        return {'table': table_of(m, V), 'floats': bool(replay['floats']), 'n': len(losses),
                'losses': np.array([float(x) for x in losses], dtype=np.float64)} | {f'replay.{k}': v for k, v in replay.items()}
    run('train', train)

    def falls():
        calls, real = [], nb.get_batch

        def recording(split, B, T):
            calls.append((split == 'train', split == 'val', B, T))
            return real(split, B, T)
        torch.manual_seed(seeds[3] + 1)
        with nb.replaced(get_batch=recording):
            losses = nb.train_bigram(nb.BigramLanguageModel(V), *FALLS)
        return {'calls': np.array(calls, dtype=np.int64).reshape(-1, 4), 'floats': all(type(x) is float for x in losses),
                'n': len(losses), 'losses': np.array([float(x) for x in losses], dtype=np.float64)}
    run('falls', falls)


def log_softmax(z):
    z = z.astype(np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def cross_entropy(W, idx, targets):
    logp = log_softmax(W)[idx.reshape(-1)]  # (n,V): the log-probabilities after each id of idx
    return float(-logp[np.arange(idx.size), targets.reshape(-1)].mean())


def nll_of_counts(logq, Nc):
    return float(-(Nc * logq).sum() / Nc.sum())


def count_model(inp, alpha):
    """The bigram probabilities of the training counts, smoothed by alpha."""
    N = inp['N_train'] + alpha
    return N / N.sum(1, keepdims=True)


def probs(inp, rec, i):
    Np = inp['probs.N'].astype(np.float64) + ALPHAS[i]
    return rec[f'probs.a{i}'].astype(np.float64), Np / Np.sum(1, keepdims=True)


def trained(rec):
    W = rec['train.table'].astype(np.float64)
    assert W.shape == (V, V), f'the trained table is {W.shape}'
    return log_softmax(W)


@claim
def counts_are_bigram_pairs(inp, rec):
    N, ref = rec['counts.train'], inp['N_train']
    assert N.shape == (V, V), f'the training counts have shape {N.shape}, not ({V}, {V})'
    expect_dtype(N, 'int64', "bigram_counts('train')", 'the contract says a torch.long count matrix')
    assert np.array_equal(N, ref), f'the training counts differ from the reference in {int((N != ref).sum())} of {V * V} entries'


@claim
def counts_inside_each_split(inp, rec):
    got, want = int(rec['counts.train'].sum()), int(inp['N_train'].sum())
    assert got == want, f'the training count holds {got:,} pairs, not the n - 1 = {want:,} training pairs'
    got, want = rec['counts.val'], inp['N_val']
    assert got.shape == want.shape and np.array_equal(got, want), (
        f'the validation counts ({int(got.sum()):,} pairs) differ from the reference ({int(want.sum()):,} pairs)')


@claim
def probs_rows_are_distributions(inp, rec):
    for i, alpha in enumerate(ALPHAS):
        if alpha > 0:
            P, _ = probs(inp, rec, i)
            assert P.shape == (V, V), f'alpha = {alpha}: P has shape {P.shape}'
            assert rec[f'probs.a{i}'].dtype.kind == 'f', (f'alpha = {alpha}: P is {rec[f"probs.a{i}"].dtype}, not a '
                                                          'floating-point tensor (float32 or float64)')
            err = np.abs(P.sum(1) - 1).max()
            assert (P > 0).all() and err < 1e-5, (
                f'alpha = {alpha}: {int((P <= 0).sum())} entries <= 0, max |row sum - 1| = {err:.3g} (allowed 1e-5)')


@claim
def probs_are_smoothed_frequencies(inp, rec):
    for i, alpha in enumerate(ALPHAS):
        P, ref = probs(inp, rec, i)
        assert P.shape == ref.shape, f'alpha = {alpha}: P has shape {P.shape}, not {ref.shape}'
        gap = np.abs(P - ref).max()
        assert gap < 1e-6, f'bigram_probs differs from (N + alpha) / (N_i + V alpha) at alpha = {alpha} by {gap:.3g} (max 1e-6)'


@claim
def nll_is_mean_negative_log_probability(inp, rec):
    d, P = inp['nll.data'], inp['nll.P'].astype(np.float64)
    ref = float(-np.log(P[d[:-1], d[1:]]).mean())
    assert bool(rec['nll.float']), f"bigram_nll returned a {rec.text('nll.type')}, not a Python float"
    got = rec.number('nll.p')
    assert abs(got - ref) < 1e-5, f'bigram_nll = {got:.6f}, expected {ref:.6f}'


@claim
def unsmoothed_val_nll_is_infinite(inp, rec):
    got = rec.number('smooth.a0')
    assert got == math.inf, f'without smoothing the validation NLL is {got}, not inf'
    got = rec.number('smooth.a1')
    assert math.isfinite(got), f'with alpha = 1 the validation NLL is {got}, not finite'


@claim
def forward_returns_logits_and_loss(inp, rec):
    W, idx = inp['model.W'], inp['model.idx']
    n = int(rec['forward.n_params'])
    assert n == V * V, f'the model has {n:,} parameters, not V*V = {V * V:,}'
    for key in ('forward.logits', 'forward.logits0'):
        logits = rec[key]
        assert logits.shape == idx.shape + (V,), f'{key} have shape {logits.shape}, not {idx.shape + (V,)}'
        gap = np.abs(logits - W[idx]).max()
        assert gap < 1e-6, f'{key} differ from the table rows by {gap:.3g} (allowed 1e-6)'
    assert bool(rec['forward.loss0_none']), 'the loss without targets is not None'


@claim
def loss_is_cross_entropy_of_logits(inp, rec):
    ref = cross_entropy(inp['model.W'], inp['model.idx'], inp['model.targets'])
    got = rec.number('forward.loss')
    assert abs(got - ref) < 1e-4, f'loss {got:.5f}, cross-entropy {ref:.5f}'


@claim
def init_loss_is_expected_logsumexp(inp, rec):
    """The initialisation alone: the tables of fresh models, and the cross-entropy of their logits taken here (whether
    forward computes the loss right is loss_is_cross_entropy_of_logits's claim)."""
    idx, targets = inp['init.idx'], inp['init.targets']
    losses = []
    for i in range(N_INIT):
        W = rec[f'init.table{i}']
        assert W.shape == (V, V) and abs(W.mean()) < 0.1 and abs(W.std() - 1) < 0.1, (
            f'the table at init is {W.shape}, mean {W.mean():.3f}, std {W.std():.3f}: not N(0,1)')
        losses.append(cross_entropy(W, idx, targets))
    assert abs(np.mean(losses) - E_LSE) < 0.15, f'mean loss at init {np.mean(losses):.3f}, expected {E_LSE} (allowed 0.15)'
    expect_normal(np.stack([rec[f'init.table{i}'] for i in range(N_INIT)]), 1.0,
                  f'the tables of {N_INIT} fresh models', alpha=INIT_ALPHA,
                  cause="keep nn.Embedding's default initialisation, N(0, 1): no other draw of the same std")


@claim
def generate_extends_the_context(inp, rec):
    out, ctx = rec['gen.long'], inp['gen.ctx'][:3]
    assert out.shape == (3, ctx.shape[1] + 5) and out.dtype == np.int64, f'generate returned {out.shape} {out.dtype}'
    assert np.array_equal(out[:, :ctx.shape[1]], ctx) and ((out >= 0) & (out < V)).all(), 'the context was not kept'


@claim
def generate_samples_from_the_last_position(inp, rec):
    out, ctx = rec['gen.new'], inp['gen.ctx']
    assert out.shape == (N_GEN, ctx.shape[1] + 1), f'generate returned {out.shape}'
    freq = np.bincount(out[:, -1].astype(np.int64), minlength=V)[:V] / N_GEN
    q = np.exp(log_softmax(inp['gen.W'][ctx[0, -1]]))
    tv = 0.5 * np.abs(freq - q).sum()
    assert tv < 0.1, f'the new ids are {tv:.3f} in total variation from softmax of the last position (allowed 0.1)'
    generate_follows_the_law(inp, rec)


@claim
def generate_is_autoregressive(inp, rec):
    ctx, out = inp['cycle.ctx'], rec['cycle.out']
    want = (ctx[:, -1:] + np.arange(1, CYCLE + 1)) % V
    assert out.shape == (len(ctx), ctx.shape[1] + CYCLE), f'generate returned {out.shape}'
    got = out[:, ctx.shape[1]:]
    assert np.array_equal(got, want), (f'on a table with a certain cycle i -> i+1, generate drew {got[0].tolist()} after '
                                       f'{ctx[0].tolist()}, not {want[0].tolist()}: a new id is not drawn after the one before')


@claim
def training_loss_falls(inp, rec):
    steps, B, T, _ = FALLS
    calls = rec['falls.calls'].tolist()
    n_train = calls.count([1, 0, B, T])  # other calls (a periodic validation estimate) are allowed
    assert n_train >= steps, (
        f"train_bigram(model, {steps}, B={B}, T={T}, ...) made {n_train} calls of get_batch('train', {B}, {T}) among "
        f"{len(calls)}, the first {calls[:2]} as [train?, val?, B, T]: expected one per step, {steps} at least")
    losses, n = rec['falls.losses'], int(rec['falls.n'])
    assert n == steps and bool(rec['falls.floats']), f'{n} losses for {steps} steps, or not Python floats'
    start, end = losses[:5].mean(), losses[-20:].mean()
    assert end < FALL_RATIO * start, (
        f'in {steps} steps the loss should fall below {FALL_RATIO} times its start: the first 5 steps average {start:.3f}, '
        f'the last 20 {end:.3f} ({end / start:.2f} times)')
    training_follows_the_contract(inp, rec)


@claim
def training_approaches_the_count_model(inp, rec):
    logq, Ntr, Nva, Ptr0 = trained(rec), inp['N_train'], inp['N_val'], count_model(inp, 0.0)
    gap_train = nll_of_counts(logq, Ntr) - nll_of_counts(np.log(np.where(Ptr0 > 0, Ptr0, 1.0)), Ntr)
    gap_val = nll_of_counts(logq, Nva) - nll_of_counts(np.log(count_model(inp, 1.0)), Nva)
    assert gap_train < MARGIN and abs(gap_val) < MARGIN, (
        f'the learned model is {gap_train:.4f} (train) and {gap_val:+.4f} (val) from the count model (allowed {MARGIN})')


@claim
def learned_softmax_approaches_the_counts(inp, rec):
    Ntr = inp['N_train']
    pi = Ntr.sum(1) / Ntr.sum()
    tv = float((pi * 0.5 * np.abs(np.exp(trained(rec)) - count_model(inp, 1.0)).sum(1)).sum())
    assert tv < TV_MAX, f'weighted total variation {tv:.3f} between softmax(table) and P (allowed {TV_MAX})'


def generate_follows_the_law(inp, rec):
    """Each id generate draws follows softmax(W[previous id]), on the grader's table (law_table): every transition out
    of each row of LAW_ROWS, over LAW_NEW new ids after LAW_N contexts starting at each. Given the previous id, each draw
    is independent of the others (the chain is Markov), so each row's draws are tested together (expect_law): false
    failure rate LAW_ALPHA in all."""
    out, W = rec['law.out'].astype(np.int64), inp['law.W']
    assert out.shape == (len(inp['law.ctx']), 1 + LAW_NEW), f'generate(ctx (n, 1), {LAW_NEW}) returned shape {out.shape}'
    prev, new = out[:, :-1].reshape(-1), out[:, 1:].reshape(-1)
    for what, row in LAW_ROWS.items():
        expect_law(new[prev == row], np.exp(log_softmax(W[row])), f'the ids drawn after {what} of the grader\'s table',
                   LAW_ALPHA / len(LAW_ROWS), 'draw each new id with torch.multinomial from the softmax of the last '
                   'logits, with no other rule (no argmax when the model is sure, no ban on repeats, no top-k)')


def bigram_loss(theta, batch):
    x, y = (torch_long(a) for a in batch)
    return F.cross_entropy(theta.view(V, V)[x.reshape(-1)], y.reshape(-1))


def training_follows_the_contract(inp, rec):
    """The notebook's run of train_bigram (TRAIN) against a reference run on its batches: each step is Adam(lr) on a
    training batch drawn for it, and the list holds each step's training loss (expect_adam_run)."""
    run = {k[len('train.replay.'):]: rec[k] for k in rec if k.startswith('train.replay.')}
    assert run, rec['train.replay.snaps']  # the reason train_bigram did not run
    steps, _, _, lr = TRAIN
    expect_adam_run(run, bigram_loss, lr, f'train_bigram(model, {", ".join(map(str, TRAIN))}) on the grader\'s seed',
                    steps=steps, cause="torch.optim.Adam(model.parameters(), lr=lr) as the contract says (no schedule, "
                                       'no weight decay), and each step\'s own training loss in the list')


def torch_long(a):
    import torch

    return torch.as_tensor(np.asarray(a, dtype=np.int64))
