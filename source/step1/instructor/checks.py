"""Step 1's out-of-process checks: the numbers a submission computes, recorded in its kernel, judged in a clean process.

make_inputs() runs in the grader and draws the inputs; PROBE runs last in the student's kernel and records what the
student's code computes on them (numbers and strings only); verdicts() runs in the grader, which never runs student code,
and says for each test cell whether the recorded values satisfy its claim. A test cell scores only if both it and its
verdict pass, so patching torch, builtins or IPython in the kernel can lose points but never earn them.
"""

import math

import numpy as np

VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # sorted(set(text)) of the sha256-fixed data
H_TEXT = 4.779353271961856  # the unigram entropy of the whole text, in bits
N_ENC, N_DEC = 24, 12  # random strings to encode, random id lists to decode
OOV = [('Café', 'é'), ('1599', '1'), ('a\tb', '\t'), ('naïve [sic]', 'ï'), ('50%', '5')]  # (string, first unknown char)
SPLIT_CASES = [(1237, 0.9), (41, 0.9), (200, 0.75)]  # (length, frac)
BATCH_B, BATCH_T, BATCH_DRAWS, BATCH_SEED = 16, 7, 200, 2027
ALPHA = 1e-3  # the uniformity verdict's false-alarm rate, shared by its two chi-square tests (Bonferroni: ALPHA/2 each)
COUNT_CASES = [(65, 58, 700), (70, 70, 300), (4, 1, 9)]  # (V, ids drawn below this, how many)


def codepoints(s):
    return np.array([ord(c) for c in s], dtype=np.int32)


def string(a):
    return ''.join(map(chr, np.asarray(a).tolist()))


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
    for i, (s, _) in enumerate(OOV):  # an unknown character inside text that is otherwise fine
        pre = ''.join(rng.choice(letters, int(rng.integers(0, 6))))
        x[f'oov{i}'] = codepoints(pre + s)
    for i, (n, _) in enumerate(SPLIT_CASES):
        x[f'split{i}'] = rng.integers(0, 65, n)
    x['batch.sizes'] = np.array([int(rng.integers(40, 50)), int(rng.integers(20, 30))])  # (n_train, n_val)
    for i, (v, top, n) in enumerate(COUNT_CASES):
        x[f'counts{i}'] = rng.integers(0, top, n)
    x['entropy0'] = rng.integers(1, 1000, 65)  # no zero count
    c = rng.integers(1, 50, 40)
    c[rng.choice(40, 9, replace=False)] = 0  # nine symbols never occur
    x['entropy1'] = c
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

    s = lambda key: ''.join(map(chr, inp[key].tolist()))  # noqa: E731
    cp = lambda text: np.array([ord(c) for c in text], dtype=np.int32)  # noqa: E731

    def vocab():
        return {'chars': cp(''.join(chars)), 'V': int(V),
                's0': cp(''.join(build_vocab(s('vocab.s0')))), 's1': cp(''.join(build_vocab(s('vocab.s1'))))}
    run('vocab', vocab)

    def enc():
        out = {}
        for i in range(%(n_enc)d):
            ids = encode(s(f'enc{i}'))
            out[f'list{i}'] = isinstance(ids, list) and all(type(j) is int for j in ids)
            out[f'ids{i}'] = np.array([int(j) for j in ids], dtype=np.int64)
        return out
    run('enc', enc)

    def roundtrip():
        out = {}
        for i in range(%(n_enc)d):
            out[f'se{i}'] = cp(decode(encode(s(f'enc{i}'))))
        for i in range(%(n_dec)d):
            ids = inp[f'dec{i}'].tolist()
            out[f'd{i}'] = cp(decode(ids))
            out[f'ed{i}'] = np.array([int(j) for j in encode(decode(ids))], dtype=np.int64)
        return out
    run('rt', roundtrip)

    def oov():
        out = {}
        for i in range(%(n_oov)d):
            try:
                encode(s(f'oov{i}'))
                out[f'raised{i}'] = ''
            except KeyError as e:
                out[f'raised{i}'] = 'KeyError'
                out[f'msg{i}'] = cp(str(e.args[0])[:300] if e.args else '')
            except Exception as e:  # noqa: BLE001
                out[f'raised{i}'] = type(e).__name__[:100]
        return out
    run('oov', oov)

    def split():
        out = {}
        for i in range(%(n_split)d):
            tr, va = split_data(torch.from_numpy(inp[f'split{i}']), %(fracs)r[i])
            out[f'train{i}'], out[f'val{i}'] = tr, va
        return out
    run('split', split)

    def batches():
        g = globals()
        saved = {k: g[k] for k in ('train_data', 'val_data') if k in g}
        n_train, n_val = (int(v) for v in inp['batch.sizes'])
        out = {}
        try:
            g['train_data'] = torch.arange(n_train)
            g['val_data'] = torch.arange(n_train, n_train + n_val)
            torch.manual_seed(%(seed)d)
            for name in ('train', 'val'):
                xs, ys = [], []
                for _ in range(%(draws)d):
                    x, y = get_batch(name, %(B)d, %(T)d)
                    xs.append(x)
                    ys.append(y)
                out[f'{name}.dtype'] = str(xs[0].dtype) + ' ' + str(ys[0].dtype)
                out[f'{name}.x'], out[f'{name}.y'] = torch.stack(xs), torch.stack(ys)  # (draws,B,T)
        finally:
            g.update(saved)
        return out
    run('batch', batches)

    def real_batches():
        out = {}
        for name, b, t in (('train', 4, 8), ('val', 3, 5)):
            x, y = get_batch(name, b, t)
            out[f'{name}.shape'] = np.array([*x.shape, *y.shape])
            out[f'{name}.dtype'] = str(x.dtype) + ' ' + str(y.dtype)
        return out
    run('real', real_batches)

    def counts():
        return {f'c{i}': char_counts(torch.from_numpy(inp[f'counts{i}']), v) for i, (v, _, _) in enumerate(%(count_cases)r)}
    run('counts', counts)

    def entropy():
        out = {f'h{i}': float(entropy_bits(torch.from_numpy(inp[f'entropy{i}']))) for i in range(2)}
        out['text'] = float(entropy_bits(torch.bincount(data, minlength=65)))
        return out
    run('entropy', entropy)
    np.savez('_probe_out.npz', **rec)


_grader_probe()
del _grader_probe
''' % {'n_enc': N_ENC, 'n_dec': N_DEC, 'n_oov': len(OOV), 'n_split': len(SPLIT_CASES),
       'fracs': [f for _, f in SPLIT_CASES], 'seed': BATCH_SEED, 'draws': BATCH_DRAWS, 'B': BATCH_B, 'T': BATCH_T,
       'count_cases': COUNT_CASES}


def chi_square_p(starts, K):
    """p-value of the chi-square test that starts (ints in 0..K-1) are uniform over K values."""
    import torch

    O = np.bincount(starts, minlength=K).astype(float)
    E = len(starts) / K
    chi2 = float(((O - E) ** 2 / E).sum())
    return torch.special.gammaincc(torch.tensor((K - 1) / 2, dtype=torch.float64),
                                   torch.tensor(chi2 / 2, dtype=torch.float64)).item()


def verdicts(inp, rec):
    """{test cell grade_id: None if the recorded values satisfy its claim, else why not}, computed without student code."""

    def get(key):
        if key not in rec:
            name = key.split('.')[0]
            raise LookupError(f'{name}: {rec[name + ".error"]}' if name + '.error' in rec else f'{key} was not recorded')
        return np.array(rec[key])

    def text(key):
        return string(get(key))

    def ids_of(s):
        return [VOCAB.index(c) for c in s]

    def vocab_is_sorted_distinct_and_complete():
        assert text('vocab.chars') == VOCAB and int(get('vocab.V')) == len(VOCAB), 'chars is not the sorted vocabulary'
        for k in ('s0', 's1'):
            want = ''.join(sorted(set(string(inp[f'vocab.{k}']))))
            assert text(f'vocab.{k}') == want, f'build_vocab on the grader text {k}: {text(f"vocab.{k}")!r}, expected {want!r}'

    def encode_gives_one_int_per_character():
        for i in range(N_ENC):
            assert bool(get(f'enc.list{i}')), f'encode of string {i} is not a list of Python ints'
            got, want = get(f'enc.ids{i}').tolist(), ids_of(string(inp[f'enc{i}']))
            assert got == want, f'encode of string {i}: {got[:8]}..., expected {want[:8]}...'

    def encode_decode_round_trip():
        for i in range(N_ENC):
            assert text(f'rt.se{i}') == string(inp[f'enc{i}']), f'decode(encode(s)) != s for string {i}'
        for i in range(N_DEC):
            assert get(f'rt.ed{i}').tolist() == inp[f'dec{i}'].tolist(), f'encode(decode(ids)) != ids for list {i}'

    def encode_rejects_unknown_characters():
        for i, (_, bad) in enumerate(OOV):
            raised = str(get(f'oov.raised{i}'))
            assert raised == 'KeyError', f'encode of a string holding {bad!r} raised {raised or "nothing"}, not KeyError'
            msg = text(f'oov.msg{i}')
            assert bad in msg or repr(bad) in msg, f'the KeyError for {bad!r} does not name it: {msg!r}'

    def split_is_contiguous_90_10():
        for i, (n, frac) in enumerate(SPLIT_CASES):
            d, k = inp[f'split{i}'], int(frac * n)
            tr, va = get(f'split.train{i}'), get(f'split.val{i}')
            assert tr.tolist() == d[:k].tolist() and va.tolist() == d[k:].tolist(), (
                f'split_data of a length-{n} tensor with frac={frac} is not its first {k} elements and the rest')

    n_train, n_val = (int(v) for v in inp['batch.sizes'])
    bounds = {'train': (0, n_train), 'val': (n_train, n_train + n_val)}

    def batch(name):
        x, y = get(f'batch.{name}.x'), get(f'batch.{name}.y')
        assert x.shape == y.shape == (BATCH_DRAWS, BATCH_B, BATCH_T), f'{name} batches have shape {x.shape[1:]}, {y.shape[1:]}'
        return x.reshape(-1, BATCH_T), y.reshape(-1, BATCH_T)

    def get_batch_shapes_and_dtype():
        for name, b, t in (('train', 4, 8), ('val', 3, 5)):
            assert get(f'real.{name}.shape').tolist() == [b, t, b, t], f'{name}: shapes {get(f"real.{name}.shape").tolist()}'
            assert str(get(f'real.{name}.dtype')) == 'torch.int64 torch.int64', f'{name}: dtypes {get(f"real.{name}.dtype")}'
            assert str(get(f'batch.{name}.dtype')) == 'torch.int64 torch.int64', f'{name}: dtypes {get(f"batch.{name}.dtype")}'

    def get_batch_targets_are_x_shifted_by_one():
        for name in bounds:
            x, y = batch(name)
            assert (y[:, :-1] == x[:, 1:]).all(), f'{name}: y[:, t] != x[:, t+1]'
            assert (y[:, -1] == x[:, -1] + 1).all(), f'{name}: the last target is not the character after the window'

    def get_batch_windows_stay_inside_their_split():
        for name, (lo, hi) in bounds.items():
            x, y = batch(name)
            assert (x - x[:, :1] == np.arange(BATCH_T)).all(), f'{name}: a window is not consecutive'
            assert x.min() >= lo and max(x.max(), y.max()) <= hi - 1, (
                f'{name}: read positions {min(x.min(), y.min())}..{max(x.max(), y.max())}, outside {lo}..{hi - 1}')

    def get_batch_starts_are_uniform():
        for name, (lo, hi) in bounds.items():
            starts = batch(name)[0][:, 0] - lo
            K = hi - lo - BATCH_T
            assert starts.min() >= 0 and starts.max() < K, f'{name}: starts span {starts.min()}..{starts.max()}, not 0..{K - 1}'
            p = chi_square_p(starts, K)
            assert p > ALPHA / 2, f'{name}: the starts are not uniform over 0..{K - 1} (chi-square p = {p:.2g})'

    def get_batch_splits_do_not_mix():
        xt, yt = batch('train')
        xv, yv = batch('val')
        assert max(xt.max(), yt.max()) < n_train, 'a train batch read validation characters'
        assert min(xv.min(), yv.min()) >= n_train, 'a val batch read training characters'

    def char_counts_counts_every_symbol():
        for i, (v, _, _) in enumerate(COUNT_CASES):
            got, want = get(f'counts.c{i}'), np.bincount(inp[f'counts{i}'], minlength=v)
            assert got.dtype == np.int64 and got.tolist() == want.tolist(), f'counts case {i}: {got.tolist()}'

    def entropy(c):
        p = c / c.sum()
        p = p[p > 0]
        return float(-(p * np.log2(p)).sum())

    def entropy_bits_small_cases():
        got = float(get('entropy.h0'))
        assert abs(got - entropy(inp['entropy0'])) < 1e-6, f'entropy of the grader counts: {got}'
        got = float(get('entropy.text'))
        assert abs(got - H_TEXT) < 1e-6, f'entropy of the text: {got}, expected {H_TEXT:.6f} bits'

    def entropy_bits_ignores_zero_counts():
        got = float(get('entropy.h1'))
        assert math.isfinite(got) and abs(got - entropy(inp['entropy1'])) < 1e-6, f'entropy of counts with zeros: {got}'

    checks = [vocab_is_sorted_distinct_and_complete, encode_gives_one_int_per_character, encode_decode_round_trip,
              encode_rejects_unknown_characters, split_is_contiguous_90_10, get_batch_shapes_and_dtype,
              get_batch_targets_are_x_shifted_by_one, get_batch_windows_stay_inside_their_split,
              get_batch_starts_are_uniform, get_batch_splits_do_not_mix, char_counts_counts_every_symbol,
              entropy_bits_small_cases, entropy_bits_ignores_zero_counts]
    out = {}
    for check in checks:
        try:
            check()
            out[check.__name__] = None
        except Exception as e:  # any failure is a failed verdict, with its reason
            out[check.__name__] = f'{type(e).__name__}: {e}'
    return out
