"""Step 1's bank (the vocabulary, encode and decode, the byte-pair encoder, the split, get_batch, counts and entropy):
realistic mistakes, each with the test cells meant to catch it, and correct alternatives (course.authoring.demo.Variant)."""

from course.authoring.demo import Variant, in_cell

VOCAB_RETURN = 'return sorted(set(text))'
ENCODE_BODY = """    try:
        return [stoi[c] for c in s]
    except KeyError as e:
        raise KeyError(f'{e.args[0]!r} is not one of the {V} characters of the vocabulary') from None"""
DECODE = "return ''.join(itos[i] for i in ids)"
SPLIT = 'n = int(frac * len(data))'
PICK = "d = train_data if split == 'train' else val_data"
STARTS = 'ix = torch.randint(len(d) - T, (B,))'
X = 'x = torch.stack([d[i:i + T] for i in ix])'
Y = 'y = torch.stack([d[i + 1:i + T + 1] for i in ix])'
COUNTS = 'return torch.bincount(ids, minlength=V)'
NORMALISE = 'p = counts.double() / counts.sum()'
DROP_ZEROS = '    p = p[p > 0]  # 0 log 0 = 0: leave out the symbols that never occur\n'
ENTROPY = 'return -(p * torch.log2(p)).sum().item()'
PAIR_ZIP = 'for pair in zip(ids, ids[1:]):'
PAIR_ADD = 'counts[pair] = counts.get(pair, 0) + 1'
SKIP = 'i += 2  # ... and both of its ids are used up'
MERGE_BODY = """    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)  # the pair becomes one token ...
            i += 2  # ... and both of its ids are used up
        else:
            out.append(ids[i])
            i += 1
    return out"""
PICK_PAIR = 'pair = min(pairs, key=lambda p: merges.get(p, math.inf))'
ENCODE_LOOP = """    while len(ids) >= 2:
        pairs = get_pair_counts(ids)
        pair = min(pairs, key=lambda p: merges.get(p, math.inf))  # the earliest-learned merge among the pairs present
        if pair not in merges:
            break  # no pair of neighbours has a merge
        ids = merge(ids, pair, merges[pair])
"""

VOCAB_CELL = ('vocab_is_sorted_distinct_and_complete',)
IDS_CELL = ('encode_gives_one_int_per_character',)
ROUND_TRIP = ('encode_decode_round_trip',)
UNKNOWN = ('encode_rejects_unknown_characters',)
SPLIT_CELL = ('split_is_contiguous_90_10',)
SHAPES = ('get_batch_shapes_and_dtype',)
SHIFT = ('get_batch_targets_are_x_shifted_by_one',)
INSIDE = ('get_batch_windows_stay_inside_their_split',)
UNIFORM = ('get_batch_starts_are_uniform',)
NO_MIX = ('get_batch_splits_do_not_mix',)
REPRO = ('get_batch_is_reproducible',)
COUNTS_CELL = ('char_counts_counts_every_symbol',)
ENTROPY_CELL = ('entropy_bits_small_cases',)
ZEROS = ('entropy_bits_ignores_zero_counts',)
PAIRS = ('get_pair_counts_counts_every_neighbour',)
MERGE = ('merge_replaces_each_pair_left_to_right',)
BPE_ENCODE = ('bpe_encode_applies_merges_in_order',)
BPE_ROUND_TRIP = ('bpe_round_trips_every_validation_line',)


def vocab(old, new):
    return (('build_vocab', old, new),)


codec = in_cell('codec')
batch = in_cell('get_batch')
freq = in_cell('frequencies')
bpe = in_cell('bpe_pairs')
bpe_enc = in_cell('bpe_encode')


MUTANTS = [
    # build_vocab
    Variant('vocab_unsorted_set_order', vocab(VOCAB_RETURN, 'return list(set(text))'), VOCAB_CELL + IDS_CELL),
    Variant('vocab_in_order_of_first_appearance', vocab(VOCAB_RETURN, 'return list(dict.fromkeys(text))'),
            VOCAB_CELL + IDS_CELL),
    Variant('vocab_from_the_train_split_only', vocab(VOCAB_RETURN, 'return sorted(set(text[:int(0.9 * len(text))]))'),
            VOCAB_CELL),
    Variant('vocab_returned_as_a_string', vocab(VOCAB_RETURN, "return ''.join(sorted(set(text)))"), VOCAB_CELL),
    Variant('vocab_sorted_backwards', vocab(VOCAB_RETURN, 'return sorted(set(text), reverse=True)'), VOCAB_CELL + IDS_CELL),
    # encode / decode
    Variant('encode_returns_a_tensor', codec(('return [stoi[c] for c in s]', 'return torch.tensor([stoi[c] for c in s])')),
            IDS_CELL),
    Variant('encode_drops_unknown_characters', codec((ENCODE_BODY, '    return [stoi[c] for c in s if c in stoi]')), UNKNOWN),
    Variant('encode_maps_unknown_to_id_0', codec((ENCODE_BODY, '    return [stoi.get(c, 0) for c in s]')), UNKNOWN),
    Variant('encode_raises_value_error', codec((
        "raise KeyError(f'{e.args[0]!r} is not one", "raise ValueError(f'{e.args[0]!r} is not one")), UNKNOWN),
    Variant('ids_start_at_1_reserving_0_for_padding', codec(('return [stoi[c] for c in s]', 'return [stoi[c] + 1 for c in s]'),
                                                            (DECODE, "return ''.join(itos[i - 1] for i in ids)")), IDS_CELL),
    Variant('encode_message_names_no_character', codec((
        "raise KeyError(f'{e.args[0]!r} is not one of the {V} characters of the vocabulary') from None",
        "raise KeyError('a character is not in the vocabulary') from None")), UNKNOWN),
    Variant('encode_returns_a_tuple', codec(('return [stoi[c] for c in s]', 'return tuple(stoi[c] for c in s)')),
            IDS_CELL + ROUND_TRIP),
    Variant('decode_joins_with_spaces', codec((DECODE, "return ' '.join(itos[i] for i in ids)")), ROUND_TRIP),
    # get_pair_counts
    Variant('pairs_counted_once_each', bpe((PAIR_ADD, 'counts[pair] = 1')), PAIRS),
    Variant('pairs_last_one_missed', bpe((PAIR_ZIP, 'for pair in zip(ids[:-1], ids[1:-1]):')), PAIRS),
    Variant('pairs_first_one_missed', bpe((PAIR_ZIP, 'for pair in zip(ids[1:], ids[2:]):')), PAIRS),
    Variant('pairs_without_overlaps', bpe((PAIR_ZIP, 'for pair in zip(ids[::2], ids[1::2]):')), PAIRS),
    # merge
    Variant('merge_overlapping_pairs_twice', bpe((SKIP, 'i += 1')), MERGE + BPE_ROUND_TRIP),
    Variant('merge_drops_the_last_id', bpe(('    while i < len(ids):\n', '    while i < len(ids) - 1:\n')),
            MERGE + BPE_ROUND_TRIP),
    Variant('merge_only_the_first_occurrence', bpe((SKIP, 'out.extend(ids[i + 2:])\n            break')), MERGE),
    Variant('merge_in_place', bpe((MERGE_BODY, """    i = 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i:i + 2] = [new_id]
        i += 1
    return ids""")), MERGE),
    # bpe_encode
    Variant('bpe_most_frequent_pair_first', bpe_enc((PICK_PAIR, 'pair = max(pairs, key=lambda p: (p in merges, pairs[p]))')),
            BPE_ENCODE),
    Variant('bpe_first_pair_in_the_string', bpe_enc((PICK_PAIR, 'pair = next((p for p in zip(ids, ids[1:]) if p in merges), None)')),
            BPE_ENCODE),
    Variant('bpe_latest_merge_first', bpe_enc((PICK_PAIR, 'pair = max(pairs, key=lambda p: merges.get(p, -1))')), BPE_ENCODE),
    Variant('bpe_merges_in_reverse_order', bpe_enc((ENCODE_LOOP, """    for pair, new_id in reversed(merges.items()):
        ids = merge(ids, pair, new_id)
""")), BPE_ENCODE),
    Variant('bpe_one_merge_only', bpe_enc(('    while len(ids) >= 2:', '    if len(ids) >= 2:')), BPE_ENCODE),
    # split_data
    Variant('split_shuffles_the_characters', (('split_data', SPLIT, 'data = data[torch.randperm(len(data))]\n    ' + SPLIT),),
            SPLIT_CELL),
    Variant('split_at_90_percent_of_the_vocabulary', (('split_data', SPLIT, 'n = int(frac * V)'),), SPLIT_CELL),
    Variant('split_loses_the_character_at_the_cut', (('split_data', 'return data[:n], data[n:]', 'return data[:n], data[n + 1:]'),),
            SPLIT_CELL),
    # get_batch: the targets
    Variant('targets_not_shifted', batch((Y, 'y = torch.stack([d[i:i + T] for i in ix])')), SHIFT),
    Variant('targets_rolled_last_wraps_around', batch((Y, 'y = torch.roll(x, -1, dims=1)')), SHIFT),
    Variant('targets_one_short', batch((Y, 'y = torch.stack([d[i + 1:i + T] for i in ix])')), SHAPES + SHIFT),
    # get_batch: the starts
    Variant('randint_bound_runs_past_the_end', batch((STARTS, 'ix = torch.randint(len(d) - T + 1, (B,))')), INSIDE + UNIFORM),
    Variant('randint_over_the_whole_split', batch((STARTS, 'ix = torch.randint(len(d), (B,))')), INSIDE + UNIFORM),
    Variant('randint_never_draws_the_last_start', batch((STARTS, 'ix = torch.randint(len(d) - T - 1, (B,))')), UNIFORM),
    Variant('starts_drawn_without_replacement', batch((STARTS, 'ix = torch.randperm(len(d) - T)[:B]')), SHAPES),
    Variant('starts_drawn_with_python_random', batch((STARTS, 'import random\n    ix = torch.tensor([random.randrange(len(d) - T) for _ in range(B)])')),
            REPRO),
    Variant('starts_reseeded_inside_get_batch', batch((STARTS, 'torch.manual_seed(0)\n    ' + STARTS)), REPRO),
    # get_batch: the split
    Variant('split_argument_ignored', batch((PICK, 'd = train_data')), INSIDE + NO_MIX),
    Variant('splits_swapped', batch((PICK, "d = val_data if split == 'train' else train_data")), INSIDE + NO_MIX),
    Variant('batches_from_the_whole_text', batch((PICK, 'd = data')), INSIDE + NO_MIX),
    # char_counts
    Variant('counts_without_minlength', freq((COUNTS, 'return torch.bincount(ids)')), COUNTS_CELL),
    Variant('counts_as_floats', freq((COUNTS, 'return torch.zeros(V).index_add_(0, ids, torch.ones(len(ids)))')), COUNTS_CELL),
    Variant('counts_hard_coded_65_symbols', freq((COUNTS, 'return torch.bincount(ids, minlength=65)')), COUNTS_CELL),
    # entropy_bits
    Variant('entropy_returned_as_a_tensor', freq((ENTROPY, 'return -(p * torch.log2(p)).sum()')), ENTROPY_CELL),
    Variant('entropy_in_nats', freq((ENTROPY, 'return -(p * torch.log(p)).sum().item()')), ENTROPY_CELL),
    Variant('entropy_log_of_zero_counts', freq((DROP_ZEROS, '')), ZEROS),
    Variant('entropy_of_unnormalised_counts', freq((NORMALISE, 'p = counts.double()')), ENTROPY_CELL),
    Variant('entropy_averaged_not_summed', freq((ENTROPY, 'return -(p * torch.log2(p)).mean().item()')), ENTROPY_CELL),
    Variant('entropy_sign_dropped', freq((ENTROPY, 'return (p * torch.log2(p)).sum().item()')), ENTROPY_CELL),
    Variant('entropy_normalised_by_the_number_of_symbols', freq((NORMALISE, 'p = counts.double() / len(counts)')),
            ENTROPY_CELL),
]

ALTERNATIVES = [
    Variant('alt_vocab_sorted_list_of_set', vocab(VOCAB_RETURN, 'return sorted(list(set(text)))')),
    Variant('alt_vocab_sorted_dict_keys', vocab(VOCAB_RETURN, 'return sorted(dict.fromkeys(text))')),
    Variant('alt_encode_plain_lookup', codec((ENCODE_BODY, '    return [stoi[c] for c in s]'))),
    Variant('alt_encode_loop_with_own_message', codec((ENCODE_BODY, """    ids = []
    for c in s:
        if c not in stoi:
            raise KeyError(f'unknown character {c!r}')
        ids.append(stoi[c])
    return ids"""))),
    Variant('alt_encode_names_the_last_unknown_character', codec((ENCODE_BODY, """    unknown = [c for c in s if c not in stoi]
    if unknown:
        raise KeyError(f'{unknown[-1]!r} is not in the vocabulary')
    return [stoi[c] for c in s]"""))),
    Variant('alt_encode_names_every_unknown_character', codec((ENCODE_BODY, """    unknown = sorted(set(s) - set(stoi))
    if unknown:
        raise KeyError(f'characters outside the vocabulary: {unknown}')
    return [stoi[c] for c in s]"""))),
    Variant('alt_decode_by_chars', codec((DECODE, "return ''.join(chars[i] for i in ids)"))),
    Variant('alt_pairs_counter', bpe(("""    counts = {}
    for pair in zip(ids, ids[1:]):  # (ids[i], ids[i + 1]) for i = 0..len(ids)-2
        counts[pair] = counts.get(pair, 0) + 1
    return counts""", """    from collections import Counter
    return Counter(zip(ids, ids[1:]))"""))),
    Variant('alt_pairs_index_loop', bpe((PAIR_ZIP, 'for i in range(len(ids) - 1):\n        pair = (ids[i], ids[i + 1])'))),
    Variant('alt_merge_for_loop_with_a_skip_flag', bpe((MERGE_BODY, """    out, skip = [], False
    for i, x in enumerate(ids):
        if skip:
            skip = False
        elif tuple(ids[i:i + 2]) == tuple(pair):
            out.append(new_id)
            skip = True
        else:
            out.append(x)
    return out"""))),
    Variant('alt_bpe_each_merge_in_turn', bpe_enc((ENCODE_LOOP, """    for pair, new_id in merges.items():  # in the order learned
        ids = merge(ids, pair, new_id)
"""))),
    Variant('alt_bpe_min_new_id_among_present_merges', bpe_enc((ENCODE_LOOP, """    while True:
        present = [p for p in get_pair_counts(ids) if p in merges]
        if not present:
            return ids
        first = min(present, key=merges.get)
        ids = merge(ids, first, merges[first])
"""))),
    Variant('alt_split_with_torch_split', (('split_data', 'return data[:n], data[n:]',
                                            'train, val = torch.split(data, [n, len(data) - n])\n    return train, val'),)),
    Variant('alt_batch_fancy_indexing', batch((X, 'x = d[ix[:, None] + torch.arange(T)]'),
                                              (Y, 'y = d[ix[:, None] + torch.arange(1, T + 1)]'))),
    Variant('alt_batch_unfold_windows', batch((X, 'w = d.unfold(0, T + 1, 1)[ix]  # (B,T+1)\n    x = w[:, :-1]'),
                                              (Y, 'y = w[:, 1:]'))),
    Variant('alt_batch_dict_and_low_high', batch((PICK, "d = {'train': train_data, 'val': val_data}[split]"),
                                                 (STARTS, 'ix = torch.randint(0, len(d) - T, (B,))'))),
    Variant('alt_batch_multinomial_starts', batch((STARTS, 'ix = torch.multinomial(torch.ones(len(d) - T), B, replacement=True)'))),
    Variant('alt_counts_scatter_add', freq((COUNTS, 'return torch.zeros(V, dtype=torch.long).scatter_add_(0, ids, torch.ones_like(ids))'))),
    Variant('alt_entropy_xlogy_float32', freq((NORMALISE, 'p = counts / counts.sum()'), (DROP_ZEROS, ''),
                                              (ENTROPY, 'return (-torch.xlogy(p, p).sum() / math.log(2)).item()'))),
    Variant('alt_entropy_special_entr', freq((DROP_ZEROS, ''), (ENTROPY, 'return torch.special.entr(p).sum().item() / math.log(2)'))),
    Variant('alt_entropy_float_of_tensor', freq((ENTROPY, 'return float(-(p * torch.log2(p)).sum())'))),
    Variant('alt_entropy_clamped_log', freq((DROP_ZEROS, ''), (ENTROPY, 'return -(p * torch.log2(p.clamp_min(1e-30))).sum().item()'))),
]

# issue 52, a sampler's law: right over the whole batch, wrong at each of its positions
MUTANTS += [
    Variant('starts_sorted_for_locality', batch((STARTS, 'ix = torch.randint(len(d) - T, (B,)).sort().values  # read the data in order')),
            UNIFORM),
]
