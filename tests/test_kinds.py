"""The checks by kind (course/grader/claims.py and probe.py, docs/adding-a-step.md "Checks by kind"): each statistical
check run on honest draws many times (it must never fail them: its stated false-failure rate is at most 1e-6) and on the
mistake it is there for (it must always fail it); the counters and comparisons on what they must tell apart; and every
degenerate case a step builds on purpose shown to separate the right quantity from its likely mistakes. Cheap: small
stand-ins and the steps' own inputs, never a notebook graded."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course.grader.claims import (
    Record,
    chi_square_p,
    expect_adam_run,
    expect_independent,
    expect_law,
    expect_linear_work,
    expect_normal,
)
from course.grader.probe import Inputs, Notebook, independence, training_run, work_of
from course.layout import instructor_module

RUNS = 200  # honest draws per statistical check: at a false-failure rate of 1e-6 each, all pass but with chance 2e-4


def step2():
    return instructor_module('step2', 'checks')


def softmax(W):
    z = np.asarray(W, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def bigram_chain(W, ctx, n_new, rng, rule=None):
    """generate on a bigram table of logits W, drawn with numpy: rule(probs, last) may change each row's distribution."""
    P = softmax(W)
    out = [np.asarray(ctx)[:, -1]]
    for _ in range(n_new):
        probs = P[out[-1]]
        if rule is not None:
            probs = rule(probs, out[-1])
        u = rng.random((len(probs), 1))
        out.append((probs.cumsum(-1) < u).sum(-1).clip(max=P.shape[1] - 1))
    return np.concatenate([np.asarray(ctx), np.stack(out[1:], 1)], 1)


def law_record(seed, rule=None):
    checks = step2()
    inp = Inputs(checks.law_inputs(np.random.default_rng(2026)))
    out = bigram_chain(inp['law.W'], inp['law.ctx'], checks.LAW_NEW, np.random.default_rng(seed), rule)
    return inp, Record({'law.out': out.astype(np.int8)})


def no_repeat(probs, last):
    probs = probs.copy()
    probs[np.arange(len(last)), last] = 0
    return probs / probs.sum(-1, keepdims=True)


def greedy_when_sure(probs, last):
    sure = probs.max(-1) > 0.9
    probs = probs.copy()
    probs[sure] = np.eye(probs.shape[1])[probs[sure].argmax(-1)]
    return probs


def test_the_sampler_law_passes_an_honest_sampler_every_time():
    """Check that Step 2's sampler law (each row's chi-square at LAW_ALPHA / 4) passes RUNS honest samplers."""
    checks = step2()
    for seed in range(RUNS):
        checks.generate_follows_the_law(*law_record(seed))


@pytest.mark.parametrize('rule', [no_repeat, greedy_when_sure, lambda p, last: softmax(np.log(p) / 0.85)],
                         ids=['no_repeat', 'greedy_when_sure', 'temperature_0.85'])
def test_the_sampler_law_fails_a_sampler_that_changes_some_rows(rule):
    checks = step2()
    for seed in range(5):
        with pytest.raises(AssertionError, match='do not follow the distribution'):
            checks.generate_follows_the_law(*law_record(seed, rule))


def test_the_chi_square_p_value_is_calibrated():
    """Check that chi_square_p is a p-value on honest draws (about 10% of them below 0.1: within 5 standard deviations),
    pooled bins included (a row with many rare ids), so that its alpha is the false-failure rate it says."""
    rng = np.random.default_rng(0)
    probs = softmax(2.5 * rng.standard_normal(65))  # many ids expected fewer than 5 times in 400 draws: pooled
    ps = [chi_square_p(np.bincount(rng.choice(65, 400, p=probs), minlength=65), probs) for _ in range(600)]
    low = np.mean(np.array(ps) < 0.1)
    assert abs(low - 0.1) < 5 * math.sqrt(0.1 * 0.9 / 600), f'{low:.3f} of honest p-values below 0.1'


def test_a_draw_of_an_impossible_id_fails_the_law():
    with pytest.raises(AssertionError, match='of probability 0'):
        expect_law([0, 1, 2, 2], [0.5, 0.5, 0.0], 'a row')


def test_the_normal_law_passes_honest_draws_and_fails_a_uniform_of_the_same_std():
    """Check expect_normal as Step 2 uses it (10 tables of 65 x 65, alpha 1e-6): RUNS honest N(0, 1) draws pass, and a
    uniform draw of std 1 (or N(0, 1) truncated at 2 std) fails every time."""
    alpha, n = step2().INIT_ALPHA, 10 * 65 * 65
    for _ in range(RUNS):
        expect_normal(torch.randn(n).numpy(), 1.0, 'honest', alpha=alpha)
    for _ in range(5):
        with pytest.raises(AssertionError, match='excess kurtosis'):
            expect_normal(torch.empty(n).uniform_(-3 ** 0.5, 3 ** 0.5).numpy(), 1.0, 'uniform', alpha=alpha)
        with pytest.raises(AssertionError):
            expect_normal(nn.init.trunc_normal_(torch.empty(n), std=1.0).numpy(), 1.0, 'truncated', alpha=alpha)


class Bigram(nn.Module):
    def __init__(self, V):
        super().__init__()
        self.table = nn.Embedding(V, V)

    def forward(self, idx, targets=None):
        logits = self.table(idx)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return logits, loss


def loop(model, steps, B, T, lr, *, nb, optimizer=torch.optim.Adam, schedule=False, val_every=0, estimate_every=0):
    """A training loop in the notebook's style, reaching get_batch through the notebook's names, with a few ways to get
    its contract wrong (and one right way to call get_batch more)."""
    opt = optimizer(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if schedule else None
    losses = []
    for step in range(steps):
        if estimate_every and step % estimate_every == 0:  # nanoGPT's estimate_loss: batches of both splits
            with torch.no_grad():
                [model(*nb.get_batch(s, B, T)) for s in ('train', 'val') for _ in range(3)]
        x, y = nb.get_batch('train', B, T)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched:
            sched.step()
        if val_every and step % val_every == 0:
            with torch.no_grad():
                losses.append(model(*nb.get_batch('val', B, T))[1].item())
        else:
            losses.append(loss.item())
    return losses


def training(seed, steps=120, **how):
    V, B, T, lr = 65, 16, 8, 0.05
    data = torch.randint(0, V, (5000,), generator=torch.Generator().manual_seed(seed))

    def get_batch(split, B, T):
        d = data[:4000] if split == 'train' else data[4000:]
        ix = torch.randint(len(d) - T, (B,))
        return torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + T + 1] for i in ix])

    nb = Notebook({'get_batch': get_batch})
    torch.manual_seed(seed)
    m = Bigram(V)
    run = training_run(nb, lambda: loop(m, steps, B, T, lr, nb=nb, **how), list(m.parameters()), (B, T))
    loss_of = lambda theta, batch: F.cross_entropy(theta.view(V, V)[torch.as_tensor(batch[0], dtype=torch.long).reshape(-1)],  # noqa: E731
                                                   torch.as_tensor(batch[1], dtype=torch.long).reshape(-1))
    return run, loss_of, lr, steps


@pytest.mark.parametrize('how', [{}, {'estimate_every': 25}], ids=['plain', 'with_estimates'])
def test_the_training_contract_holds_for_an_honest_loop(how):
    """Check expect_adam_run on honest Adam loops, estimates of both splits in between included, on several seeds: the
    largest gap of a step from the reference step is far below the tolerance (float32 rounding)."""
    for seed in range(4):
        run, loss_of, lr, steps = training(seed, **how)
        expect_adam_run(run, loss_of, lr, 'honest', steps=steps, tol=1e-4)  # 100 times stricter than the claims


@pytest.mark.parametrize('how, match', [({'schedule': True}, 'Adam'), ({'optimizer': torch.optim.AdamW}, 'Adam'),
                                        ({'optimizer': torch.optim.SGD}, 'Adam'), ({'val_every': 40}, 'training loss')],
                         ids=['cosine_schedule', 'adamw', 'sgd', 'validation_in_the_list'])
def test_the_training_contract_fails_a_loop_that_breaks_it(how, match):
    run, loss_of, lr, steps = training(0, **how)
    with pytest.raises(AssertionError, match=match):
        expect_adam_run(run, loss_of, lr, 'broken', steps=steps)


def test_step2_replays_its_training_run_as_recorded():
    """Check Step 2's own claim helper on a record made the way its probe makes it (a 300-step run of TRAIN's shape)."""
    checks = step2()
    steps, B, T, lr = checks.TRAIN
    run, _, _, _ = training(1, steps=steps)
    assert run['snaps'].shape == (steps + 1, 65 * 65)
    checks.training_follows_the_contract(None, Record({f'train.replay.{k}': np.asarray(v) for k, v in run.items()}))


def running_cumsum(x):
    return x.cumsum(1) / torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]


def running_loop(x):
    out, s = torch.empty_like(x), torch.zeros_like(x[:, 0])
    for t in range(x.shape[1]):
        s = s + x[:, t]
        out[:, t] = s / (t + 1)
    return out


def running_conv(x):
    B, T, C = x.shape
    sums = F.conv1d(F.pad(x.transpose(1, 2).reshape(B * C, 1, T), (T - 1, 0)), torch.ones(1, 1, T, dtype=x.dtype))
    return sums.view(B, C, T).transpose(1, 2) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]


def running_pool(x):
    T = x.shape[1]
    sums = F.avg_pool1d(F.pad(x.transpose(1, 2), (T - 1, 0)), T, stride=1) * T
    return sums.transpose(1, 2) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]


def running_prefix_means(x):
    return torch.stack([x[:, :t + 1].mean(1) for t in range(x.shape[1])], 1)


def running_strided_windows(x):
    B, T, C = x.shape
    padded = F.pad(x, (0, 0, T - 1, 0))  # (B,2T-1,C)
    windows = padded.as_strided((B, T, T, C), (padded.stride(0), padded.stride(1), padded.stride(1), padded.stride(2)))
    return windows.sum(2) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]


@pytest.mark.parametrize('f, linear', [(running_cumsum, True), (running_loop, True), (running_conv, False),
                                       (running_pool, False), (running_prefix_means, False),
                                       (running_strided_windows, False)], ids=lambda v: getattr(v, '__name__', str(v)))
def test_work_of_counts_what_the_sizes_of_the_results_hide(f, linear):
    """Check work_of and expect_linear_work: the running mean by a prefix sum or a loop over t is linear work; by a
    convolution or a pooling as wide as the sequence, a mean of each prefix or a strided view of T windows, it is
    quadratic though every result (but the view) is (B,T,C) or smaller."""
    lengths = (24, 96)
    x = {T: torch.randn(2, T, 3) for T in lengths}
    assert torch.allclose(f(x[24]), running_cumsum(x[24]), atol=1e-5)
    work = [work_of(lambda T=T: f(x[T])) for T in lengths]
    if linear:
        expect_linear_work(work, lengths, f.__name__)
    else:
        with pytest.raises(AssertionError, match='expected work growing like T'):
            expect_linear_work(work, lengths, f.__name__)


def test_work_of_counts_the_arithmetic_of_a_matrix_product():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    assert work_of(lambda: a @ b) == 2 * 8 * 16 * 4


def apart(first, second):
    return {k: np.asarray(v) for k, v in independence(first, second).items()}


def test_independence_tells_two_modules_from_one_registered_twice():
    a, b = nn.LayerNorm(4), nn.LayerNorm(4)
    expect_independent(apart(a, b), 'two')
    for first, second, match in [(a, a, 'one object'), (a, nn.Sequential(a), 'shared'), ]:
        with pytest.raises(AssertionError, match=match):
            expect_independent(apart(first, second), 'one')
    tied = nn.LayerNorm(4)
    tied.weight = a.weight  # one parameter under two modules
    with pytest.raises(AssertionError, match='shared'):
        expect_independent(apart(a, tied), 'tied')
    assert torch.equal(a.weight, torch.ones(4)) and torch.equal(a.bias, torch.zeros(4)), 'the parameters were not put back'
    c = nn.Linear(8, 8)
    w = c.weight.detach().clone()
    apart(c, nn.Linear(8, 8))
    assert torch.equal(c.weight, w), 'the parameters were not put back exactly'


def rank(M, rtol=1e-5):
    return int(torch.linalg.matrix_rank(torch.as_tensor(M, dtype=torch.float64), rtol=rtol))


def score_rank_cases():
    """Step 4's score_rank cases, built as its probe builds them (W_Q, W_K random with rows set to 0), and, for each,
    the quantities a student might take for the rank of S = q k^T."""
    checks = instructor_module('step4', 'checks')
    inp = checks.make_inputs()
    for i, (d, hs, T, causal, _, low, expected) in enumerate(checks.RANK_GENERIC + checks.RANK_DEFICIENT):
        g = torch.Generator().manual_seed(104 + i)
        W = {m: torch.randn(hs, d, generator=g, dtype=torch.float64) for m in ('query', 'key')}
        for name, first, stop in low:
            W[name][first:stop] = 0
        x = torch.as_tensor(inp[f'rank{i}.x'][0], dtype=torch.float64)
        q, k = x @ W['query'].T, x @ W['key'].T
        S = q @ k.T
        yield expected, {
            'rank S': rank(S), 'rank q': rank(q), 'rank k': rank(k), 'min(rank q, rank k)': min(rank(q), rank(k)),
            'rank W_Q W_K^T': rank(W['query'] @ W['key'].T), 'rank W_Q': rank(W['query']), 'rank x': rank(x),
            'rank of the masked S': rank(S.tril()) if causal else rank(S), 'min(d, d_k, T)': min(d, hs, T),
            'rank of softmax(S)': rank(torch.softmax(S.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
                                                     if causal else S, -1))}


def test_score_rank_cases_tell_the_rank_of_s_from_its_likely_mistakes():
    cases = list(score_rank_cases())
    assert all(quantities['rank S'] == expected for expected, quantities in cases), 'a case expects the wrong rank'
    same = [name for name in cases[0][1] if name != 'rank S' and all(q[name] == e for e, q in cases)]
    assert not same, f'no case of Step 4 tells these from the rank of S: {same}'


def test_rank_report_cases_tell_the_columns_of_w_o_from_its_rows():
    """Check that Step 5's rank cases separate each head's map W_V^i W_O^i, with W_O^i the columns of proj.weight that
    head i writes through, from the same map built from rows of proj.weight (or from the untransposed weight), and the
    layer map's rank from a sum of the heads' ranks."""
    checks = instructor_module('step5', 'checks')
    truth, rows, summed = [], [], []
    for i, (d, h, _, degenerate) in enumerate(checks.RANK_CASES):
        g = torch.Generator().manual_seed(260 + i)
        hs = d // h
        W_V = [torch.randn(hs, d, generator=g, dtype=torch.float64) for _ in range(h)]
        P = torch.randn(d, d, generator=g, dtype=torch.float64)  # proj.weight (out, in)
        if degenerate == 'shared_proj':
            for j in range(1, h):
                P[:, j * hs:(j + 1) * hs] = P[:, :hs]
        if degenerate == 'dead_head':
            W_V[0].zero_()
        if degenerate == 'thin_slice':
            P[:, hs:hs + hs // 2] = 0
        maps = [W_V[j].T @ P.T[j * hs:(j + 1) * hs] for j in range(h)]
        from_rows = [W_V[j].T @ P[j * hs:(j + 1) * hs] for j in range(h)]
        truth.append(([rank(m) for m in maps], rank(sum(maps))))
        rows.append(([rank(m) for m in from_rows], rank(sum(from_rows))))
        summed.append(([rank(m) for m in maps], min(d, sum(rank(m) for m in maps))))
    assert truth != rows, 'no case tells the columns of W_O from its rows'
    assert truth != summed, 'no case tells the rank of the summed map from the sum of the ranks'


def batches_record(seed, sort=False):
    """Step 1's recorded batches (BATCH_DRAWS batches of both splits, as its probe draws them with arange data), drawn by
    the contract's torch.randint (or sorted, the mistake)."""
    checks = instructor_module('step1', 'checks')
    inp = Inputs(checks.make_inputs())
    g = torch.Generator().manual_seed(seed)
    entries = {}
    for name, (lo, hi) in checks.bounds(inp).items():
        ix = torch.randint(hi - lo - checks.BATCH_T, (checks.BATCH_DRAWS, checks.BATCH_B), generator=g)
        ix = ix.sort(-1).values if sort else ix
        entries[f'batch.{name}.x'] = (lo + ix[..., None] + torch.arange(checks.BATCH_T)).numpy()
    return checks, inp, Record(entries)


def test_the_starts_law_at_every_position_passes_honest_batches_and_fails_sorted_ones():
    for seed in range(RUNS):
        checks, inp, rec = batches_record(seed)
        checks.starts_are_uniform_at_every_position(inp, rec)
    for seed in range(5):
        checks, inp, rec = batches_record(seed, sort=True)
        with pytest.raises(AssertionError, match='in no order'):
            checks.starts_are_uniform_at_every_position(inp, rec)


# Steps 6-8: the samplers' laws (sample_next, generate and generate_cached), the initialisation's law, the training
# contracts of train_step and param_groups.

def step6():
    return instructor_module('step6', 'checks')


def step6_inputs():
    return Inputs(step6().make_inputs())


def sample_rule(probs, rule):
    return probs if rule is None else rule(probs[None], np.zeros(1, dtype=np.int64))[0]


def sampler_record(checks, inp, seed, rule=None):
    """sample_next's law record, drawn with numpy from the contract's law (or with rule applied to each row's law)."""
    rng, z, out = np.random.default_rng(seed), inp['law.z'], {}
    for i, (tau, k) in enumerate(checks.LAW_CASES):
        draws = [rng.choice(z.shape[1], checks.LAW_N, p=sample_rule(checks.law_probs(row, tau, k), rule)) for row in z]
        out[f'slaw.{i}'] = np.concatenate(draws)[:, None]
    return Record(out)


def floor_small(probs, last):
    probs = np.where(probs < 0.005, 0.0, probs)
    return probs / probs.sum(-1, keepdims=True)


def test_step6_sampler_law_passes_an_honest_sampler_every_time():
    """Check that Step 6's law of sample_next (a chi-square per row and case, LAW_ALPHA in all) passes RUNS honest draws."""
    checks, inp = step6(), step6_inputs()
    for seed in range(RUNS):
        checks.sampler_follows_the_law(inp, sampler_record(checks, inp, seed))


@pytest.mark.parametrize('rule', [greedy_when_sure, floor_small], ids=['greedy_when_sure', 'floor_small'])
def test_step6_sampler_law_fails_a_sampler_that_changes_some_rows(rule):
    checks, inp = step6(), step6_inputs()
    for seed in range(5):
        with pytest.raises(AssertionError, match='do not follow the distribution|of probability 0'):
            checks.sampler_follows_the_law(inp, sampler_record(checks, inp, seed, rule))


def chain(inp, prefix, seed, rule=None, new=4):
    return bigram_chain(inp[f'{prefix}.W'], inp[f'{prefix}.ctx'], new, np.random.default_rng(seed), rule)


def test_step6_generate_law_passes_an_honest_generate_every_time():
    checks, inp = step6(), step6_inputs()
    for seed in range(RUNS):
        checks.generate_follows_the_law(inp, chain(inp, 'glaw', seed, new=checks.LAW_NEW))


@pytest.mark.parametrize('rule', [no_repeat, greedy_when_sure], ids=['no_repeat', 'greedy_when_sure'])
def test_step6_generate_law_fails_a_generate_that_changes_some_rows(rule):
    checks, inp = step6(), step6_inputs()
    for seed in range(5):
        with pytest.raises(AssertionError, match='do not follow the distribution|of probability 0'):
            checks.generate_follows_the_law(inp, chain(inp, 'glaw', seed, rule, new=checks.LAW_NEW))


def test_step7_cached_law_passes_an_honest_generate_cached_every_time_and_fails_a_greedy_one():
    checks = instructor_module('step7', 'checks')
    inp = Inputs(checks.make_inputs())
    probs = {row: softmax(inp['claw.W'][row]) for row in sorted({int(r) for r in inp['claw.ctx'][:, 0]})}
    for seed in range(RUNS):
        checks.cached_follows_the_law(inp, chain(inp, 'claw', seed, new=checks.LAW_NEW), probs)
    for seed in range(5):
        with pytest.raises(AssertionError, match='do not follow the distribution'):
            checks.cached_follows_the_law(inp, chain(inp, 'claw', seed, greedy_when_sure, new=checks.LAW_NEW), probs)


def gpt_state(draw):
    """The weights of Step 6's GPT(65, 64, 64, 4, 1), as its init probe records them, drawn by draw(shape); the
    LayerNorms at their start."""
    shapes = {'token_embedding_table.weight': (65, 64), 'position_embedding_table.weight': (64, 64),
              'blocks.0.attn.proj.weight': (64, 64), 'blocks.0.ffwd.net.0.weight': (256, 64),
              'blocks.0.ffwd.net.2.weight': (64, 256), 'lm_head.weight': (65, 64)}
    shapes |= {f'blocks.0.attn.heads.{i}.{m}.weight': (16, 64) for i in range(4) for m in ('query', 'key', 'value')}
    sd = {name: draw(shape) for name, shape in shapes.items()}
    return sd | {f'{ln}.{p}': torch.full((64,), float(p == 'weight')) for ln in ('blocks.0.ln1', 'blocks.0.ln2', 'ln_f')
                 for p in ('weight', 'bias')}


def test_step6_init_law_passes_honest_draws_and_fails_another_law_of_the_same_spread():
    """Check Step 6's law of the initial weights (expect_normal on the Linear and the Embedding weights, INIT_ALPHA in
    all): RUNS honest N(0, 0.02^2) draws pass; a uniform draw of std 0.02, or a normal truncated at 2 std (std 0.0176,
    which the older std check accepts), fails every time."""
    checks = step6()
    for _ in range(RUNS):
        checks.weights_follow_the_normal_law(gpt_state(lambda shape: 0.02 * torch.randn(shape)))
    wrong = {'uniform': lambda shape: torch.empty(shape).uniform_(-0.02 * 3 ** 0.5, 0.02 * 3 ** 0.5),
             'truncated': lambda shape: nn.init.trunc_normal_(torch.empty(shape), std=0.02, a=-0.04, b=0.04)}
    for draw in wrong.values():
        for _ in range(5):
            with pytest.raises(AssertionError, match='excess kurtosis'):
                checks.weights_follow_the_normal_law(gpt_state(draw))


def table_steps(inp, step_fn, lr):
    W = nn.Parameter(torch.as_tensor(inp['step.W0']).clone())
    opt = torch.optim.Adam([W], lr=lr)
    snaps, losses = [W.detach().reshape(-1).clone()], []
    for x, y in zip(torch.as_tensor(inp['adam.x']), torch.as_tensor(inp['adam.y']), strict=True):
        loss = F.cross_entropy(W[x].reshape(-1, 65), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        step_fn(opt)
        losses.append(loss.item())
        snaps.append(W.detach().reshape(-1).clone())
    return Record({'adam.snaps': torch.stack(snaps).numpy(), 'adam.losses': np.array(losses)})


def test_step6_train_step_replay_passes_an_honest_step_and_fails_a_decaying_rate():
    checks, inp = step6(), step6_inputs()
    _, lr = checks.ADAM
    checks.train_step_is_one_adam_step(inp, table_steps(inp, lambda opt: None, lr))

    def decay(opt):
        for group in opt.param_groups:
            group['lr'] *= 0.99
    with pytest.raises(AssertionError, match='Adam'):
        checks.train_step_is_one_adam_step(inp, table_steps(inp, decay, lr))


def test_step7_groups_replay_passes_nanogpts_groups_and_fails_groups_with_their_own_betas():
    checks = instructor_module('step7', 'checks')
    inp = Inputs(checks.make_inputs())

    def record(extra):
        torch.manual_seed(0)
        m = checks.toy_lm()
        start = {f'pgrun.start.{k}': v.clone().numpy() for k, v in m.state_dict().items()}
        params = list(m.parameters())
        groups = [{'params': [p for p in params if p.dim() >= 2], 'weight_decay': checks.PG_DECAY} | extra,
                  {'params': [p for p in params if p.dim() < 2], 'weight_decay': 0.0} | extra]
        checks.train_toy(m, groups, torch.as_tensor(inp['pgrun.x']), torch.as_tensor(inp['pgrun.y']),
                         inp['pgrun.lr'].tolist())
        return Record(start | {f'pgrun.end.{k}': v.detach().numpy() for k, v in m.state_dict().items()})

    checks.groups_train_as_nanogpts(inp, record({}))
    with pytest.raises(AssertionError, match='betas'):
        checks.groups_train_as_nanogpts(inp, record({'betas': (0.9, 0.95)}))


def test_gqa_cases_tell_the_contracts_groups_from_their_likely_mistakes():
    """Check that Step 8's cases of GroupedQueryAttention make query head j's key/value head, j // (n_head / n_kv_head),
    differ from the likely wrong ones (j % n_kv_head: the heads tiled, not grouped; j // n_kv_head) in some case, and
    that some case has several groups (with one key/value head, or as many as query heads, they all agree)."""
    checks = instructor_module('step8', 'checks')
    right, tiled, divided = [], [], []
    for _, nh, nkv, _, _ in checks.GQA_CASES:
        j = np.arange(nh)
        right.append((j // (nh // nkv)).tolist())
        tiled.append((j % nkv).tolist())
        divided.append(np.minimum(j // nkv, nkv - 1).tolist())
    assert right != tiled and right != divided, 'no case of Step 8 tells the groups from a likely wrong mapping'
    assert any(1 < nkv < nh for _, nh, nkv, _, _ in checks.GQA_CASES), 'no case has several groups of several heads'
