"""Step 1's claims, judged outside the student's kernel: the vocabulary, encode and decode, the byte-pair encoder, the
split, get_batch, and the entropy of the characters (the kit: course/grader/claims.py; the runtime the probe runs in:
course/grader/probe.py)."""

import math
from pathlib import Path

import numpy as np

from course.grader.claims import claim, records

VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # sorted(set(text)) of the sha256-fixed data
H_TEXT = 4.779353271961856  # the unigram entropy of the whole text, in bits
N_ENC, N_DEC = 24, 12  # random strings to encode, random id lists to decode
OOV = ['Café', '1599', 'a\tb', 'naïve [sic]', '50%']  # strings holding characters outside the vocabulary
SPLIT_CASES = [(1237, 0.9), (41, 0.9), (200, 0.75)]  # (length, frac)
BATCH_B, BATCH_T, BATCH_DRAWS, BATCH_SEED = 16, 7, 200, 2027
ALPHA = 1e-3  # the uniformity verdict's false-alarm rate, shared by its two chi-square tests (Bonferroni: ALPHA/2 each)
POSITION_ALPHA = 1e-6  # the false-failure rate of the per-position check, shared by its 2 * BATCH_B Hoeffding bounds
COUNT_CASES = [(65, 58, 700), (70, 70, 300), (4, 1, 9)]  # (V, ids drawn below this, how many)
N_PAIRS, N_MERGE, N_BPE = 12, 12, 16  # id lists for get_pair_counts, for merge, strings for bpe_encode
TOY_MERGES = 12  # merges the grader learns on its own text, for bpe_encode
NUM_MERGES = 256  # the notebook's byte-pair encoder
ROOT = Path(__file__).resolve().parents[3]  # the course: source/step1/instructor/checks.py


def codepoints(s):
    """s as an array of code points (here, and in the probe's parts: it is one of PROBE_HELPERS)."""
    import numpy as np

    return np.array([ord(c) for c in s], dtype=np.int32)


def string(a):
    return ''.join(map(chr, np.asarray(a).tolist()))


PROBE_HELPERS = (codepoints,)  # sent with the probe's parts, which record strings as code points


def make_inputs(seed=20261):
    """Every input the probe feeds the student's code, drawn here, outside the student's kernel."""
    rng = np.random.default_rng(seed)
    letters = list(VOCAB)
    x = {}
    # build_vocab: a shuffled sample of the vocabulary, and a text whose last tenth holds characters its first nine lack
    x['vocab.s0'] = codepoints(''.join(rng.choice(letters, 400)))
    late = list('QZ$&')
    x['vocab.s1'] = codepoints(''.join(rng.choice([c for c in letters if c not in late], 180)) + ''.join(rng.choice(late, 20)))
    for i in range(N_ENC):  # encode: strings over the vocabulary, lengths 0..79
        x[f'enc{i}'] = codepoints(''.join(rng.choice(letters, int(rng.integers(0, 80)))))
    for i in range(N_DEC):  # decode: id lists, lengths 0..79
        x[f'dec{i}'] = rng.integers(0, len(VOCAB), int(rng.integers(0, 80)))
    for i, s in enumerate(OOV):  # an unknown character inside text that is otherwise fine
        pre = ''.join(rng.choice(letters, int(rng.integers(0, 6))))
        x[f'oov{i}'] = codepoints(pre + s)
    for i, (n, _) in enumerate(SPLIT_CASES):
        x[f'split{i}'] = rng.integers(0, 65, n)
    x['batch.sizes'] = np.array([int(rng.integers(40, 50)), int(rng.integers(20, 30))])  # (n_train, n_val)
    for i, (_, top, n) in enumerate(COUNT_CASES):
        x[f'counts{i}'] = rng.integers(0, top, n)
    x['entropy0'] = rng.integers(1, 1000, 65)  # no zero count
    c = rng.integers(1, 50, 40)
    c[rng.choice(40, 9, replace=False)] = 0  # nine symbols never occur
    x['entropy1'] = c
    for i in range(N_PAIRS):  # few distinct ids, so that pairs repeat and overlap
        x[f'pairs{i}'] = rng.integers(0, 3, int(rng.integers(0, 30)))
    for i in range(N_MERGE):
        x[f'merge{i}'] = rng.integers(0, 3, int(rng.integers(0, 30)))
        x[f'merge{i}.pair'] = rng.integers(0, 3, 2)
    toy = ids_of(''.join(rng.choice(list('aaabbcd '), 400)))  # a text over a few letters, for merges learned here
    x['bpe.merges'] = learn_merges(toy, TOY_MERGES)
    for i in range(N_BPE):
        x[f'bpe{i}'] = codepoints(''.join(rng.choice(list('aaabbcd '), int(rng.integers(0, 40)))))
    return x


@records
def vocabulary(nb, inp, run):
    """build_vocab on the grader's texts, and the notebook's chars and V."""
    def vocab():
        v0 = nb.build_vocab(inp.text('vocab.s0'))
        return {'chars': codepoints(''.join(nb.chars)), 'V': int(nb.V), 'type': type(v0).__name__[:50],
                'strs': isinstance(v0, list) and all(isinstance(c, str) and len(c) == 1 for c in v0),
                's0': codepoints(''.join(v0)), 's1': codepoints(''.join(nb.build_vocab(inp.text('vocab.s1'))))}
    run('vocab', vocab)


@records
def encode_decode(nb, inp, run, *, N_ENC, N_DEC, OOV):
    """encode on the grader's strings, decode(encode(s)) and encode(decode(ids)), and what encode raises on a character
    outside the vocabulary."""
    import numpy as np

    def enc():
        out = {}
        for i in range(N_ENC):
            ids = nb.encode(inp.text(f'enc{i}'))
            out[f'list{i}'] = isinstance(ids, list) and all(type(j) is int for j in ids)
            out[f'ids{i}'] = np.array([int(j) for j in ids], dtype=np.int64)
        return out
    run('enc', enc)

    def roundtrip():
        out = {}
        for i in range(N_ENC):
            out[f'se{i}'] = codepoints(nb.decode(nb.encode(inp.text(f'enc{i}'))))
        for i in range(N_DEC):
            ids = inp[f'dec{i}'].tolist()
            out[f'd{i}'] = codepoints(nb.decode(ids))
            out[f'ed{i}'] = np.array([int(j) for j in nb.encode(nb.decode(ids))], dtype=np.int64)
        return out
    run('rt', roundtrip)

    def oov():
        out = {}
        for i in range(len(OOV)):
            try:
                nb.encode(inp.text(f'oov{i}'))
                out[f'raised{i}'] = ''
            except KeyError as e:
                out[f'raised{i}'] = 'KeyError'
                out[f'msg{i}'] = codepoints(str(e.args[0])[:300] if e.args else '')
            except Exception as e:  # noqa: BLE001
                out[f'raised{i}'] = type(e).__name__[:100]
        return out
    run('oov', oov)


@records
def split_cases(nb, inp, run, *, SPLIT_CASES):
    """split_data on the grader's tensors, at each fraction of SPLIT_CASES."""
    def split():
        out = {}
        for i, (_, frac) in enumerate(SPLIT_CASES):
            out[f'train{i}'], out[f'val{i}'] = nb.split_data(inp.tensor(f'split{i}'), frac)
        return out
    run('split', split)


@records
def byte_pair_encoder(nb, inp, run, *, N_PAIRS, N_MERGE, N_BPE):
    """get_pair_counts and merge on the grader's id lists, bpe_encode with the grader's merges, and the notebook's
    merges and the BPE ids of its validation text (bpe_tokenize, line by line)."""
    import numpy as np

    def pairs():
        out = {}
        for i in range(N_PAIRS):
            got = nb.get_pair_counts(inp[f'pairs{i}'].tolist())
            rows = sorted([int(a), int(b), int(c)] for (a, b), c in dict(got).items())
            out[f'p{i}'] = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return out
    run('pairs', pairs)

    def merges():
        out = {}
        for i in range(N_MERGE):
            ids = inp[f'merge{i}'].tolist()
            a, b = (int(v) for v in inp[f'merge{i}.pair'])
            out[f'm{i}'] = np.array([int(j) for j in nb.merge(ids, (a, b), 99)], dtype=np.int64)
            out[f'same{i}'] = ids == inp[f'merge{i}'].tolist()
        return out
    run('merge', merges)

    def bpe():
        toy = {(int(a), int(b)): int(c) for a, b, c in inp['bpe.merges'].tolist()}
        return {f'e{i}': np.array([int(j) for j in nb.bpe_encode(inp.text(f'bpe{i}'), dict(toy))], dtype=np.int64)
                for i in range(N_BPE)}
    run('bpe', bpe)

    def bpe_round_trip():
        m = dict(nb.merges)
        ids, cache = [], {}
        for line in nb.text[len(nb.train_data):].splitlines(keepends=True):
            ids += [int(j) for j in nb.bpe_tokenize(line, m, cache)]
        return {'merges': np.array([[int(a), int(b), int(c)] for (a, b), c in m.items()], dtype=np.int64).reshape(-1, 3),
                'ids': np.array(ids, dtype=np.int64)}
    run('bpert', bpe_round_trip)


@records
def get_batch_draws(nb, inp, run, *, BATCH_SEED, BATCH_DRAWS, BATCH_B, BATCH_T):
    """get_batch on arange data whose positions the grader knows: BATCH_DRAWS batches of each split from BATCH_SEED, the
    same seed twice and another, more windows than valid starts, and the shapes and dtypes on the notebook's data."""
    import numpy as np
    import torch

    def batches():
        n_train, n_val = (int(v) for v in inp['batch.sizes'])
        out = {}
        with nb.replaced(train_data=torch.arange(n_train), val_data=torch.arange(n_train, n_train + n_val)):
            torch.manual_seed(BATCH_SEED)
            for name in ('train', 'val'):
                xs, ys = [], []
                for _ in range(BATCH_DRAWS):
                    x, y = nb.get_batch(name, BATCH_B, BATCH_T)
                    xs.append(x)
                    ys.append(y)
                out[f'{name}.dtype'] = str(xs[0].dtype) + ' ' + str(ys[0].dtype)
                out[f'{name}.x'], out[f'{name}.y'] = torch.stack(xs), torch.stack(ys)  # (draws,B,T)
        return out
    run('batch', batches)

    def reproducible():
        out = {}
        with nb.replaced(train_data=torch.arange(200), val_data=torch.arange(200, 250)):
            for k, seed in enumerate((BATCH_SEED + 1, BATCH_SEED + 1, BATCH_SEED + 2)):
                torch.manual_seed(seed)
                out[f'x{k}'] = nb.get_batch('train', 8, 4)[0]
        return out
    run('repro', reproducible)

    def wide():  # more windows than valid starts: drawn with replacement
        with nb.replaced(train_data=torch.arange(12), val_data=torch.arange(12, 24)):
            x, y = nb.get_batch('train', 16, 8)
        return {'shape': np.array([*x.shape, *y.shape])}
    run('wide', wide)

    def real_batches():
        out = {}
        for name, b, t in (('train', 4, 8), ('val', 3, 5)):
            x, y = nb.get_batch(name, b, t)
            out[f'{name}.shape'] = np.array([*x.shape, *y.shape])
            out[f'{name}.dtype'] = str(x.dtype) + ' ' + str(y.dtype)
        return out
    run('real', real_batches)


@records
def counts_and_entropy(nb, inp, run, *, COUNT_CASES):
    """char_counts on the grader's ids, and entropy_bits on the grader's counts and on the notebook's text."""
    import torch

    run('counts', lambda: {f'c{i}': nb.char_counts(inp.tensor(f'counts{i}'), v) for i, (v, _, _) in enumerate(COUNT_CASES)})

    def entropy():
        h0 = nb.entropy_bits(inp.tensor('entropy0'))
        out = {'float': type(h0) is float, 'type': type(h0).__name__[:50]}
        out |= {f'h{i}': float(nb.entropy_bits(inp.tensor(f'entropy{i}'))) for i in range(2)}
        out['text'] = float(nb.entropy_bits(torch.bincount(nb.data, minlength=65)))
        return out
    run('entropy', entropy)


def chi_square_p(starts, K):
    """p-value of the chi-square test that starts (ints in 0..K-1) are uniform over K values."""
    import torch

    observed = np.bincount(starts, minlength=K).astype(float)
    expected = len(starts) / K
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    return torch.special.gammaincc(torch.tensor((K - 1) / 2, dtype=torch.float64),
                                   torch.tensor(chi2 / 2, dtype=torch.float64)).item()


def ids_of(s):
    return [VOCAB.index(c) for c in s]


def learn_merges(ids, k):
    """k merges learned on the list ids by the plain algorithm (count every pair, merge the most frequent, repeat), as
    rows [a, b, new_id], new ids len(VOCAB), len(VOCAB)+1, ...; a tie goes to the smallest pair."""
    rows = []
    for new in range(len(VOCAB), len(VOCAB) + k):
        counts = {}
        for p in zip(ids, ids[1:], strict=False):
            counts[p] = counts.get(p, 0) + 1
        if not counts:
            break
        best = max(sorted(counts), key=counts.get)
        rows.append([*best, new])
        ids = apply_merge(ids, best, new)
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def apply_merge(ids, pair, new):
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == tuple(pair):
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def bpe_reference(s, rows):
    """The BPE ids of s: its character ids, then each merge in turn, in the order learned."""
    ids = ids_of(s)
    for a, b, new in rows.tolist():
        ids = apply_merge(ids, (a, b), new)
    return ids


def entropy(c):
    p = c / c.sum()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def bounds(inp):
    """{split: (first, last + 1)}: the positions get_batch may read in the probe's arange data."""
    n_train, n_val = (int(v) for v in inp['batch.sizes'])
    return {'train': (0, n_train), 'val': (n_train, n_train + n_val)}


def batch(rec, name):
    """The recorded windows of one split, (draws * B, T) each for x and y."""
    x, y = rec[f'batch.{name}.x'], rec[f'batch.{name}.y']
    assert x.shape == y.shape == (BATCH_DRAWS, BATCH_B, BATCH_T), f'{name} batches have shape {x.shape[1:]}, {y.shape[1:]}'
    return x.reshape(-1, BATCH_T), y.reshape(-1, BATCH_T)


@claim
def vocab_is_sorted_distinct_and_complete(inp, rec):
    assert bool(rec['vocab.strs']), f"build_vocab returned a {rec.text('vocab.type')}, not a list of 1-character strs"
    got = rec.chars('vocab.chars')
    assert got == VOCAB and int(rec['vocab.V']) == len(VOCAB), (
        f'chars is not the sorted vocabulary of {len(VOCAB)} symbols: {int(rec["vocab.V"])} symbols, starting {got[:12]!r}')
    for k in ('s0', 's1'):
        want = ''.join(sorted(set(inp.text(f'vocab.{k}'))))
        got = rec.chars(f'vocab.{k}')
        assert got == want, f'build_vocab on the grader text {k}: {got!r} ({len(got)} symbols), expected {want!r} ({len(want)})'


@claim
def encode_gives_one_int_per_character(inp, rec):
    for i in range(N_ENC):
        n = len(inp.text(f'enc{i}'))
        assert bool(rec[f'enc.list{i}']), f'encode of string {i} ({n} characters) is not a list of Python ints'
        got, want = rec[f'enc.ids{i}'].tolist(), ids_of(inp.text(f'enc{i}'))
        assert got == want, f'encode of string {i}: {got[:8]}..., expected {want[:8]}...'


@claim
def encode_decode_round_trip(inp, rec):
    for i in range(N_ENC):
        got, want = rec.chars(f'rt.se{i}'), inp.text(f'enc{i}')
        assert got == want, f'decode(encode(s)) is {got[:30]!r} ({len(got)} characters), not s = {want[:30]!r} ({len(want)})'
    for i in range(N_DEC):
        got, want = rec[f'rt.ed{i}'].tolist(), inp[f'dec{i}'].tolist()
        assert got == want, f'encode(decode(ids)) is {got[:8]}... ({len(got)} ids), not ids = {want[:8]}... ({len(want)})'


@claim
def encode_rejects_unknown_characters(inp, rec):
    for i in range(len(OOV)):
        s = inp.text(f'oov{i}')
        bad = sorted(set(s) - set(VOCAB))  # the contract: the message names one of them, any one
        raised = rec.text(f'oov.raised{i}')
        assert raised == 'KeyError', f'encode({s!r}), which holds {bad}, raised {raised or "nothing"}, not KeyError'
        msg = rec.chars(f'oov.msg{i}')
        assert any(b in msg or repr(b) in msg for b in bad), f'the KeyError of encode({s!r}) names none of {bad}: {msg!r}'


@claim
def split_is_contiguous_90_10(inp, rec):
    for i, (n, frac) in enumerate(SPLIT_CASES):
        d, k = inp[f'split{i}'], int(frac * n)
        tr, va = rec[f'split.train{i}'], rec[f'split.val{i}']
        assert tr.tolist() == d[:k].tolist() and va.tolist() == d[k:].tolist(), (
            f'split_data of a length-{n} tensor with frac={frac} gave {len(tr)} + {len(va)} elements, not its first {k} '
            f'elements and the other {n - k}, in order')


@claim
def get_batch_shapes_and_dtype(inp, rec):
    for name, b, t in (('train', 4, 8), ('val', 3, 5)):
        assert rec[f'real.{name}.shape'].tolist() == [b, t, b, t], f'{name}: shapes {rec[f"real.{name}.shape"].tolist()}'
        assert rec.text(f'real.{name}.dtype') == 'torch.int64 torch.int64', f'{name}: dtypes {rec.text(f"real.{name}.dtype")}'
        assert rec.text(f'batch.{name}.dtype') == 'torch.int64 torch.int64', f'{name}: dtypes {rec.text(f"batch.{name}.dtype")}'
    got = rec['wide.shape'].tolist()
    assert got == [16, 8, 16, 8], (f'get_batch(\'train\', 16, 8) on a split with 4 valid starts gave shapes {got[:2]}, '
                                   f'{got[2:]}, not (16, 8): the starts must be drawn with replacement')


@claim
def get_batch_targets_are_x_shifted_by_one(inp, rec):
    for name in bounds(inp):
        x, y = batch(rec, name)
        assert (y[:, :-1] == x[:, 1:]).all(), f'{name}: y[:, t] != x[:, t+1]'
        assert (y[:, -1] == x[:, -1] + 1).all(), f'{name}: the last target is not the character after the window'


@claim
def get_batch_windows_stay_inside_their_split(inp, rec):
    for name, (lo, hi) in bounds(inp).items():
        x, y = batch(rec, name)
        assert (x - x[:, :1] == np.arange(BATCH_T)).all(), f'{name}: a window is not consecutive'
        assert x.min() >= lo and max(x.max(), y.max()) <= hi - 1, (
            f'{name}: read positions {min(x.min(), y.min())}..{max(x.max(), y.max())}, outside {lo}..{hi - 1}')


@claim
def get_batch_starts_are_uniform(inp, rec):
    for name, (lo, hi) in bounds(inp).items():
        starts = batch(rec, name)[0][:, 0] - lo
        K = hi - lo - BATCH_T
        assert starts.min() >= 0 and starts.max() < K, f'{name}: starts span {starts.min()}..{starts.max()}, not 0..{K - 1}'
        p = chi_square_p(starts, K)
        assert p > ALPHA / 2, f'{name}: the starts are not uniform over 0..{K - 1} (chi-square p = {p:.2g})'
    starts_are_uniform_at_every_position(inp, rec)


def starts_are_uniform_at_every_position(inp, rec):
    """The law of the starts holds at each position b of a batch too, not only pooled over the batch: the starts are
    independent draws, so x[b] starts anywhere whatever b is. Over the BATCH_DRAWS batches, the mean start at each b is
    within eps of (K-1)/2; by Hoeffding's inequality (starts in 0..K-1) an honest sampler misses with probability at most
    POSITION_ALPHA / (2 * BATCH_B) at each of the 2 * BATCH_B positions: POSITION_ALPHA in all. Sorted starts, say, put
    the smallest of B draws at b = 0 (mean near K / (B + 1)), far outside."""
    eps_of = lambda K: (K - 1) * math.sqrt(math.log(2 * 2 * BATCH_B / POSITION_ALPHA) / (2 * BATCH_DRAWS))  # noqa: E731
    for name, (lo, hi) in bounds(inp).items():
        x = rec[f'batch.{name}.x']
        assert x.shape == (BATCH_DRAWS, BATCH_B, BATCH_T), f'{name} batches have shape {x.shape[1:]}'
        K = hi - lo - BATCH_T
        means = (x[:, :, 0] - lo).mean(0)  # (B,): the mean start at each position of the batch
        worst = int(np.argmax(np.abs(means - (K - 1) / 2)))
        assert abs(means[worst] - (K - 1) / 2) <= eps_of(K), (
            f'{name}: over {BATCH_DRAWS} batches the windows at position {worst} of the batch start at {means[worst]:.1f} '
            f'on average, not near (K - 1) / 2 = {(K - 1) / 2:.1f} (allowed {eps_of(K):.1f}; at each position: '
            f'{", ".join(f"{m:.1f}" for m in means[:6])}...): each start is its own uniform draw, in no order')


@claim
def get_batch_is_reproducible(inp, rec):
    a, b, c = (rec[f'repro.x{k}'] for k in range(3))
    assert a.shape == (8, 4) and np.array_equal(a, b), (
        f'the same torch.manual_seed gave starts {a[:, 0].tolist()} and {b[:, 0].tolist()}: draw them with torch')
    assert not np.array_equal(a, c), f'two seeds gave the same starts {a[:, 0].tolist()}'


@claim
def get_batch_splits_do_not_mix(inp, rec):
    n_train = bounds(inp)['train'][1]
    xt, yt = batch(rec, 'train')
    xv, yv = batch(rec, 'val')
    top, bottom = max(xt.max(), yt.max()), min(xv.min(), yv.min())
    assert top < n_train, f'a train batch read position {top}, in validation (>= {n_train})'
    assert bottom >= n_train, f'a val batch read position {bottom}, in training (< {n_train})'


@claim
def char_counts_counts_every_symbol(inp, rec):
    for i, (v, _, _) in enumerate(COUNT_CASES):
        got, want = rec[f'counts.c{i}'], np.bincount(inp[f'counts{i}'], minlength=v)
        assert got.dtype == np.int64 and got.tolist() == want.tolist(), (
            f'counts case {i} (V = {v}): {got.dtype} {got.tolist()[:10]}... ({len(got)} entries), expected int64 '
            f'{want.tolist()[:10]}... ({len(want)})')


@claim
def entropy_bits_small_cases(inp, rec):
    assert bool(rec['entropy.float']), f"entropy_bits returned a {rec.text('entropy.type')}, not a Python float"
    got, want = float(rec['entropy.h0']), entropy(inp['entropy0'])
    assert abs(got - want) < 1e-6, f'entropy of the grader counts: {got:.6f} bits, expected {want:.6f}'
    got = float(rec['entropy.text'])
    assert abs(got - H_TEXT) < 1e-6, f'entropy of the text: {got}, expected {H_TEXT:.6f} bits'


@claim
def entropy_bits_ignores_zero_counts(inp, rec):
    got, want = float(rec['entropy.h1']), entropy(inp['entropy1'])
    assert math.isfinite(got) and abs(got - want) < 1e-6, f'entropy of counts with zeros: {got} bits, expected {want:.6f}'


@claim
def get_pair_counts_counts_every_neighbour(inp, rec):
    for i in range(N_PAIRS):
        ids = inp[f'pairs{i}'].tolist()
        want = {}
        for p in zip(ids, ids[1:], strict=False):
            want[p] = want.get(p, 0) + 1
        got = {(a, b): c for a, b, c in rec[f'pairs.p{i}'].tolist()}
        assert got == want, f'get_pair_counts({ids}) gave {got}, expected {want}'


@claim
def merge_replaces_each_pair_left_to_right(inp, rec):
    for i in range(N_MERGE):
        ids, pair = inp[f'merge{i}'].tolist(), tuple(inp[f'merge{i}.pair'].tolist())
        got, want = rec[f'merge.m{i}'].tolist(), apply_merge(ids, pair, 99)
        assert got == want, f'merge({ids}, {pair}, 99) gave {got}, expected {want}'
        assert bool(rec[f'merge.same{i}']), f'merge({ids}, {pair}, 99) changed its input'


@claim
def bpe_encode_applies_merges_in_order(inp, rec):
    rows = inp['bpe.merges']
    for i in range(N_BPE):
        s = inp.text(f'bpe{i}')
        got, want = rec[f'bpe.e{i}'].tolist(), bpe_reference(s, rows)
        assert got == want, (f'bpe_encode({s!r}) with the grader\'s {len(rows)} merges gave {got}, expected {want}: the '
                             'merges in the order learned')


@claim
def bpe_round_trips_every_validation_line(inp, rec):
    rows, ids = rec['bpert.merges'], rec['bpert.ids']
    assert rows.shape == (NUM_MERGES, 3), f'merges holds {len(rows)} merges, not {NUM_MERGES}'
    assert rows[:, 2].tolist() == list(range(len(VOCAB), len(VOCAB) + NUM_MERGES)), 'the new ids are not 65, 66, ... in order'
    vocab = list(VOCAB)
    for a, b, new in rows.tolist():
        assert 0 <= a < new and 0 <= b < new, f'merge ({a}, {b}) -> {new} uses an id not yet defined'
        vocab.append(vocab[a] + vocab[b])
    text = (ROOT / 'input.txt').read_text(encoding='utf-8')
    val = text[int(0.9 * len(text)):]
    assert ids.size and ids.min() >= 0 and ids.max() < len(vocab), (
        f'BPE ids span {ids.min()}..{ids.max()}, outside 0..{len(vocab) - 1}')
    got = ''.join(vocab[i] for i in ids.tolist())
    if got != val:
        k = next((j for j, (p, q) in enumerate(zip(got, val, strict=False)) if p != q), min(len(got), len(val)))
        raise AssertionError(f'the BPE ids of the validation lines decode to {len(got):,} characters, not the {len(val):,} '
                             f'of the validation text; they differ from character {k:,}: {got[k:k + 30]!r} against '
                             f'{val[k:k + 30]!r}')
