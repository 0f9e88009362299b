"""Step 3's bank (the three running means and the bag-of-words model): realistic mistakes, each with the test cells meant
to catch it, and correct alternatives (course.authoring.demo.Variant)."""

from course.authoring.demo import Variant

LOOP = 'average_loop'
TRIL = 'average_tril'
SOFTMAX = 'average_softmax'
RUNNING = 'average_running'
CUMSUM = 'return x.cumsum(dim=1) / counts'
LOOP_BODY = """    out = torch.zeros_like(x)  # (B,T,C)
    for t in range(T):
        out[:, t] = x[:, :t + 1].mean(dim=1)  # (B,t+1,C) -> (B,C)
"""
TRIL_ONES = 'torch.tril(torch.ones(T, T, dtype=x.dtype))  # (T,T), 1 where j <= t'
ROWS = 'wei = tril / tril.sum(dim=1, keepdim=True)'
MASK = "scores = scores.masked_fill(tril == 0, float('-inf'))"
ZEROS = 'scores = torch.zeros(T, T, dtype=x.dtype)'
ROW_SOFTMAX = 'wei = F.softmax(scores, dim=-1)'
MEAN = 'x = average_tril(tok)'
LOSS = 'F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))'

HAND = {f: f'{f}_by_hand' for f in (LOOP, TRIL, SOFTMAX, RUNNING)}
CAUSAL, ROWSUM = 'averages_are_causal', 'weights_rows_sum_to_one'
METHOD = {LOOP: 'average_loop_loops_over_t', TRIL: 'average_tril_is_a_matrix_product',
          SOFTMAX: 'average_softmax_is_a_masked_softmax', RUNNING: 'average_running_builds_no_square'}
TRIL_BODY = f"""    tril = {TRIL_ONES}
    {ROWS}  # (T,T), row t holds 1/(t+1) on columns 0..t
    return wei @ x  # (T,T) @ (B,T,C) -> (B,T,C)"""
SOFTMAX_RETURN = 'return wei @ x  # (T,T) @ (B,T,C) -> (B,T,C)'
SOFTMAX_BODY = f"""    tril = {TRIL_ONES.split('  #')[0]}  # (T,T)
    {ZEROS}  # (T,T): every position equally welcome
    {MASK}  # (T,T): no weight on the future
    {ROW_SOFTMAX}  # (T,T), a softmax along each row
    {SOFTMAX_RETURN}"""
SDPA = '    return F.scaled_dot_product_attention(torch.zeros_like(x), torch.zeros_like(x), x, is_causal=True)'

MUTANTS = [
    # the loop
    Variant('loop_off_by_one', ((LOOP, 'x[:, :t + 1]', 'x[:, :t]'),), (HAND[LOOP], ROWSUM)),
    Variant('loop_mean_over_batch_too', ((LOOP, '.mean(dim=1)', '.mean(dim=(0, 1))'),), (HAND[LOOP],)),
    Variant('loop_averages_the_future', ((LOOP, 'x[:, :t + 1]', 'x[:, t:]'),), (HAND[LOOP], CAUSAL)),
    Variant('loop_prefix_sums_in_place', ((LOOP, LOOP_BODY, """    for t in range(1, T):
        x[:, t] += x[:, t - 1]  # running sums, in place
    out = x / torch.arange(1, T + 1)[:, None]
"""),), (HAND[LOOP],)),
    Variant('loop_output_always_float32', ((LOOP, 'out = torch.zeros_like(x)  # (B,T,C)', 'out = torch.zeros(B, T, C)  # (B,T,C)'),),
            (HAND[LOOP],)),
    # the tril product
    Variant('tril_is_triu', ((TRIL, TRIL_ONES, TRIL_ONES.replace('torch.tril(', 'torch.triu(')),), (HAND[TRIL], CAUSAL)),
    Variant('tril_transposed', ((TRIL, 'return wei @ x', 'return wei.T @ x'),), (HAND[TRIL], CAUSAL, ROWSUM)),
    Variant('tril_columns_normalised', ((TRIL, ROWS, 'wei = tril / tril.sum(dim=0, keepdim=True)'),), (HAND[TRIL], ROWSUM)),
    Variant('tril_divided_by_T', ((TRIL, ROWS, 'wei = tril / T'),), (HAND[TRIL], ROWSUM)),
    Variant('tril_not_normalised', ((TRIL, ROWS, 'wei = tril'),), (HAND[TRIL], ROWSUM)),
    Variant('tril_ignores_dtype', ((TRIL, 'torch.ones(T, T, dtype=x.dtype))  # (T,T), 1', 'torch.ones(T, T))  # (T,T), 1'),),
            (HAND[TRIL],)),
    # the masked softmax
    Variant('softmax_mask_with_zero', ((SOFTMAX, MASK, MASK.replace("float('-inf')", '0.0')),),
            (HAND[SOFTMAX], CAUSAL, 'zero_query_attention_is_the_running_mean')),
    Variant('softmax_over_wrong_axis', ((SOFTMAX, ROW_SOFTMAX, 'wei = F.softmax(scores, dim=0)'),), (HAND[SOFTMAX], ROWSUM)),
    Variant('softmax_mask_transposed', ((SOFTMAX, 'tril == 0', 'tril.T == 0'),), (HAND[SOFTMAX], CAUSAL)),
    Variant('softmax_then_zero_the_future', ((SOFTMAX, MASK, 'scores = scores'),
                                             (SOFTMAX, ROW_SOFTMAX, 'wei = F.softmax(scores, dim=-1) * tril')),
            (HAND[SOFTMAX], ROWSUM)),
    Variant('softmax_ignores_dtype', ((SOFTMAX, ZEROS, 'scores = torch.zeros(T, T)'),), (HAND[SOFTMAX],)),
    # the running mean
    Variant('running_divides_by_T', ((RUNNING, CUMSUM, 'return x.cumsum(dim=1) / T'),), (HAND[RUNNING],)),
    Variant('running_sums_over_the_batch', ((RUNNING, CUMSUM, 'return x.cumsum(dim=0) / counts'),), (HAND[RUNNING],)),
    Variant('running_counts_from_zero', ((RUNNING, 'torch.arange(1, T + 1, dtype=x.dtype)', 'torch.arange(T, dtype=x.dtype) + 1e-9'),),
            (HAND[RUNNING],)),
    Variant('running_sums_in_place', ((RUNNING, CUMSUM, 'return x.cumsum_(dim=1) / counts'),), (HAND[RUNNING],)),
    Variant('running_counts_ignore_dtype', ((RUNNING, 'torch.arange(1, T + 1, dtype=x.dtype)[:, None]',
                                             'torch.arange(1, T + 1)[:, None].float()'),
                                            (RUNNING, CUMSUM, 'return (x.cumsum(dim=1) / counts).float()')), (HAND[RUNNING],)),
    # the right numbers by another method than the task's (the course's own former alternative among them)
    Variant('tril_by_cumsum', ((TRIL, TRIL_BODY, '    return x.cumsum(dim=1) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]  # (B,T,C)'),),
            (METHOD[TRIL],)),
    Variant('tril_calls_the_loop', ((TRIL, 'return wei @ x', 'return average_loop(x)'),), (METHOD[TRIL],)),
    Variant('tril_by_sdpa', ((TRIL, TRIL_BODY, SDPA),), (METHOD[TRIL],)),
    Variant('softmax_calls_the_loop', ((SOFTMAX, SOFTMAX_RETURN, 'return average_loop(x)'),), (METHOD[SOFTMAX],)),
    Variant('softmax_calls_tril', ((SOFTMAX, SOFTMAX_BODY, '    return average_tril(x)  # (B,T,C)'),), (METHOD[SOFTMAX],)),
    Variant('softmax_by_sdpa', ((SOFTMAX, SOFTMAX_RETURN, SDPA.strip()),), (METHOD[SOFTMAX],)),
    Variant('loop_calls_tril', ((LOOP, LOOP_BODY, '    return average_tril(x)\n'),), (METHOD[LOOP],)),
    Variant('loop_by_cumsum', ((LOOP, LOOP_BODY, '    out = x.cumsum(dim=1) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]\n'),),
            (METHOD[LOOP],)),
    Variant('loop_by_sdpa', ((LOOP, LOOP_BODY, SDPA + '\n'),), (METHOD[LOOP],)),
    Variant('running_calls_tril', ((RUNNING, CUMSUM, 'return average_tril(x)'),), (METHOD[RUNNING],)),
    Variant('running_calls_softmax', ((RUNNING, CUMSUM, 'return average_softmax(x)'),), (METHOD[RUNNING],)),
    Variant('running_calls_the_loop', ((RUNNING, CUMSUM, 'return average_loop(x)'),), (METHOD[RUNNING],)),
    Variant('running_loop_of_means', ((RUNNING, CUMSUM, 'return torch.stack([x[:, :t + 1].mean(dim=1) for t in range(T)], dim=1)'),),
            (METHOD[RUNNING],)),
    Variant('running_by_sdpa', ((RUNNING, CUMSUM, SDPA.strip()),), (METHOD[RUNNING],)),
    # the bag of words
    Variant('bow_sums_not_means', (('bow', MEAN, 'x = tok.cumsum(dim=1)'),), ('bow_averages_not_sums', 'bow_matches_reference')),
    Variant('bow_divides_by_T', (('bow', MEAN, 'x = tok.cumsum(dim=1) / T'),),
            ('bow_averages_not_sums', 'bow_matches_reference')),
    Variant('bow_mean_of_whole_window', (('bow', MEAN, 'x = tok.mean(dim=1, keepdim=True).expand(B, T, -1)'),),
            ('bow_is_causal', 'bow_matches_reference')),
    Variant('bow_no_average', (('bow', MEAN, 'x = tok'),), ('bow_ignores_order', 'bow_matches_reference')),
    Variant('bow_cumsum_over_batch', (('bow', MEAN, 'x = tok.cumsum(dim=0) / torch.arange(1, T + 1)[:, None]'),),
            ('bow_ignores_order', 'bow_averages_not_sums', 'bow_matches_reference')),
    Variant('bow_loss_on_probabilities', (('bow', LOSS, LOSS.replace('logits.view', 'F.softmax(logits, dim=-1).view')),),
            ('bow_shapes_and_loss',)),
    Variant('bow_width_hard_coded', (('bow', 'self.token_embedding_table = nn.Embedding(V, n_embd)',
                                       'self.token_embedding_table = nn.Embedding(V, 32)'),
                                      ('bow', 'self.lm_head = nn.Linear(n_embd, V)', 'self.lm_head = nn.Linear(32, V)')),
            ('bow_shapes_and_loss',)),
    Variant('bow_embeddings_detached', (('bow', 'tok = self.token_embedding_table.weight[idx]', 'tok = self.token_embedding_table.weight[idx].detach()'),),
            ('bow_learns',)),
    Variant('bow_head_without_bias', (('bow', 'self.lm_head = nn.Linear(n_embd, V)', 'self.lm_head = nn.Linear(n_embd, V, bias=False)'),),
            ('bow_matches_reference',)),
]

ALTERNATIVES = [
    Variant('alt_loop_over_batch_and_time', ((LOOP, LOOP_BODY, """    out = torch.zeros_like(x)  # (B,T,C)
    for b in range(B):
        for t in range(T):
            out[b, t] = torch.mean(x[b, :t + 1], 0)  # (t+1,C) -> (C,)
"""),)),
    Variant('alt_loop_running_sum', ((LOOP, LOOP_BODY, """    out = torch.empty_like(x)  # (B,T,C)
    s = torch.zeros_like(x[:, 0])  # (B,C): the sum of x[:, 0..t]
    for t in range(T):
        s = s + x[:, t]
        out[:, t] = s / (t + 1)
"""),)),
    Variant('alt_running_recurrence', ((RUNNING, '''    counts = torch.arange(1, T + 1, dtype=x.dtype)[:, None]  # (T,1): t + 1 at row t
    return x.cumsum(dim=1) / counts  # (B,T,C): the prefix sums S_t = S_{t-1} + x_t, each divided by t + 1''',
                                        '''    out = x.clone()  # (B,T,C)
    for t in range(1, T):
        out[:, t] = out[:, t - 1] + (x[:, t] - out[:, t - 1]) / (t + 1)  # mean_t from mean_{t-1}
    return out'''),)),
    Variant('alt_loop_stacked_means', ((LOOP, LOOP_BODY, '    out = torch.stack([x[:, :t + 1].mean(dim=1) for t in range(T)], dim=1)  # (B,T,C)\n'),)),
    Variant('alt_tril_weights_by_loop', ((TRIL, f"""    tril = {TRIL_ONES}
    {ROWS}""", """    wei = torch.zeros(T, T, dtype=x.dtype)  # (T,T)
    for t in range(T):
        wei[t, :t + 1] = 1 / (t + 1)"""),)),
    Variant('alt_tril_by_linear', ((TRIL, 'return wei @ x', 'return F.linear(x.transpose(1, 2), wei).transpose(1, 2)'),)),
    Variant('alt_tril_matmul_call', ((TRIL, 'return wei @ x', 'return torch.matmul(wei, x)'),)),
    Variant('alt_softmax_tensor_method', ((SOFTMAX, ROW_SOFTMAX, 'wei = scores.softmax(dim=-1)'),)),
    Variant('alt_softmax_module', ((SOFTMAX, ROW_SOFTMAX, 'wei = nn.Softmax(dim=-1)(scores)'),)),
    Variant('alt_softmax_by_hand', ((SOFTMAX, ROW_SOFTMAX, 'wei = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)'),)),
    Variant('alt_softmax_batched_weights', ((SOFTMAX, SOFTMAX_RETURN, 'return wei.expand(B, T, T) @ x'),)),
    Variant('alt_running_loop_sum', ((RUNNING, '''    counts = torch.arange(1, T + 1, dtype=x.dtype)[:, None]  # (T,1): t + 1 at row t
    return x.cumsum(dim=1) / counts  # (B,T,C): the prefix sums S_t = S_{t-1} + x_t, each divided by t + 1''',
                                       '''    out = torch.empty_like(x)  # (B,T,C)
    s = torch.zeros_like(x[:, 0])  # (B,C)
    for t in range(T):
        s = s + x[:, t]
        out[:, t] = s / (t + 1)
    return out'''),)),
    Variant('alt_tril_rows_by_arange', ((TRIL, ROWS, 'wei = tril / torch.arange(1, T + 1, dtype=x.dtype)[:, None]'),)),
    Variant('alt_tril_einsum', ((TRIL, 'return wei @ x', "return torch.einsum('ts,bsc->btc', wei, x)"),)),
    Variant('alt_softmax_torch_where', ((SOFTMAX, MASK, "scores = torch.where(tril == 0, float('-inf'), scores)"),)),
    Variant('alt_softmax_full_triu', ((SOFTMAX, ZEROS, "scores = torch.full((T, T), float('-inf'), dtype=x.dtype).triu(1)"),
                                      (SOFTMAX, MASK, 'scores = scores')),),
    Variant('alt_softmax_bool_mask', ((SOFTMAX, 'tril == 0', '~tril.bool()'),)),
    Variant('alt_bow_softmax_average', (('bow', MEAN, 'x = average_softmax(tok)'),)),
    Variant('alt_bow_head_then_mean', (('bow', MEAN, 'x = tok'), ('bow', 'logits = self.lm_head(x)', 'logits = average_tril(self.lm_head(x))'))),
    Variant('alt_bow_embedding_call', (('bow', 'tok = self.token_embedding_table.weight[idx]', 'tok = self.token_embedding_table(idx)'),)),
    Variant('alt_bow_cumsum', (('bow', MEAN, 'x = tok.cumsum(dim=1) / torch.arange(1, T + 1)[:, None]'),)),
    Variant('alt_bow_loss_over_class_axis', (('bow', LOSS, 'F.cross_entropy(logits.transpose(1, 2), targets)'),)),
]

# issue 52, the work a task names: O(TC) kept in the size of every tensor, T times over in the arithmetic
RUNNING_BODY = """    counts = torch.arange(1, T + 1, dtype=x.dtype)[:, None]  # (T,1): t + 1 at row t
    return x.cumsum(dim=1) / counts  # (B,T,C): the prefix sums S_t = S_{t-1} + x_t, each divided by t + 1"""
MUTANTS += [
    Variant('running_by_a_sequence_wide_convolution', ((RUNNING, RUNNING_BODY, """    rows = x.transpose(1, 2).reshape(B * C, 1, T)  # (B*C,1,T): one row per sequence and channel
    sums = F.conv1d(F.pad(rows, (T - 1, 0)), torch.ones(1, 1, T, dtype=x.dtype))  # (B*C,1,T): a causal window of T ones
    return sums.view(B, C, T).transpose(1, 2) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]  # (B,T,C)"""),),
            (METHOD[RUNNING],)),
    Variant('running_by_a_sequence_wide_pooling', ((RUNNING, RUNNING_BODY, """    padded = F.pad(x.transpose(1, 2), (T - 1, 0))  # (B,C,2T-1): zeros before the sequence
    sums = F.avg_pool1d(padded, T, stride=1) * T  # (B,C,T): the sum of the T positions up to t, the zeros included
    return sums.transpose(1, 2) / torch.arange(1, T + 1, dtype=x.dtype)[:, None]  # (B,T,C)"""),),
            (METHOD[RUNNING],)),
]
