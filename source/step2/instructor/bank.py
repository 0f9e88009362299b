"""Step 2's bank (bigram counts and probabilities, the NLL, the bigram model, sampling and training): realistic mistakes,
each with the test cells meant to catch it, and correct alternatives (course.authoring.demo.Variant)."""

from course.authoring.demo import Variant

PAIR = 'pair = d[:-1] * V + d[1:]'
SPLIT = "d = {'train': train_data, 'val': val_data}[split]"
BINCOUNT = 'return torch.bincount(pair, minlength=V * V).view(V, V)'
ROWSUM = 'Ns.sum(dim=1, keepdim=True)'
SMOOTH = 'Ns = N.double() + alpha'
LOGMEAN = 'return -p.double().log().mean().item()'
CE = 'loss = F.cross_entropy(logits.view(B * T, C), targets.view(B * T))'
SOFTMAX = 'probs = F.softmax(logits[:, -1, :], dim=-1)'
SAMPLE = 'idx_next = torch.multinomial(probs, num_samples=1)'
ZERO_GRAD = '        optimizer.zero_grad(set_to_none=True)\n'
BACKWARD = '        loss.backward()\n'
TABLE = 'self.token_embedding_table = nn.Embedding(V, V)  # (V,V): row i = the logits of the character after i'

COUNTS = ('counts_are_bigram_pairs',)
SPLITS = ('counts_inside_each_split',)
ROWS = ('probs_rows_are_distributions',)
PROBS = ('probs_are_smoothed_frequencies',)
NLL = ('nll_is_mean_negative_log_probability',)
INF = ('unsmoothed_val_nll_is_infinite',)
FORWARD = ('forward_returns_logits_and_loss',)
LOSS = ('loss_is_cross_entropy_of_logits',)
INIT = ('init_loss_is_expected_logsumexp',)
GEN_SHAPE = ('generate_extends_the_context',)
GEN = ('generate_samples_from_the_last_position',)
AUTO = ('generate_is_autoregressive',)
FALLS = ('training_loss_falls',)
GAP = ('training_approaches_the_count_model',)
TV = ('learned_softmax_approaches_the_counts',)


def cell(gid, *edits):
    return tuple((gid, old, new) for old, new in edits)


MUTANTS = [
    # bigram_counts
    Variant('counts_transposed', cell('counts', (PAIR, 'pair = d[1:] * V + d[:-1]')), COUNTS),
    Variant('counts_without_the_shift', cell('counts', (PAIR, 'pair = d[:-1] * V + d[:-1]')), COUNTS),
    Variant('counts_first_pair_dropped', cell('counts', (PAIR, 'pair = d[1:-1] * V + d[2:]')), COUNTS + SPLITS),
    Variant('counts_on_the_whole_text', cell('counts', (SPLIT, 'd = data')), COUNTS + SPLITS),
    Variant('counts_across_the_boundary', cell('counts', (SPLIT, "d = {'train': data[:len(train_data) + 1], "
                                                                 "'val': val_data}[split]")), SPLITS),
    # bigram_probs
    Variant('probs_normalised_over_columns', cell('probs', (ROWSUM, 'Ns.sum(dim=0, keepdim=True)')), ROWS + PROBS),
    Variant('probs_row_sums_without_keepdim', cell('probs', (ROWSUM, 'Ns.sum(dim=1)')), ROWS + PROBS),
    Variant('probs_normalised_by_the_total', cell('probs', (ROWSUM, 'Ns.sum()')), ROWS + PROBS),
    Variant('probs_not_smoothed', cell('probs', (SMOOTH, 'Ns = N.double()')), ROWS + PROBS + INF),
    Variant('probs_alpha_only_in_the_numerator', cell('probs', (ROWSUM, 'N.double().sum(dim=1, keepdim=True)')),
            ROWS + PROBS),
    # bigram_nll
    Variant('nll_summed_not_averaged', cell('nll', (LOGMEAN, 'return -p.double().log().sum().item()')), NLL),
    Variant('nll_pairs_transposed', cell('nll', ('p = P[data[:-1], data[1:]]', 'p = P[data[1:], data[:-1]]')), NLL),
    Variant('nll_log_of_the_mean', cell('nll', (LOGMEAN, 'return -p.double().mean().log().item()')), NLL),
    Variant('nll_returned_as_a_tensor', cell('nll', (LOGMEAN, 'return -p.double().log().mean()')), NLL),
    Variant('nll_epsilon_hides_the_zero', cell('nll', (LOGMEAN, 'return -(p.double() + 1e-10).log().mean().item()')), INF),
    # BigramLanguageModel.forward
    Variant('softmax_then_cross_entropy',
            cell('model', (CE, 'loss = F.cross_entropy(F.softmax(logits.view(B * T, C), dim=-1), targets.view(B * T))')),
            LOSS),
    Variant('nll_loss_on_raw_logits', cell('model', (CE, 'loss = F.nll_loss(logits.view(B * T, C), targets.view(B * T))')),
            LOSS),
    Variant('loss_reshaped_inconsistently', cell('model', ('logits.view(B * T, C)', 'logits.transpose(0, 1).reshape(B * T, C)')),
            LOSS),
    Variant('loss_summed_not_averaged', cell('model', ('targets.view(B * T))', "targets.view(B * T), reduction='sum')")),
            LOSS),  # one mistake, one test: the init and training tests judge the table and train_bigram alone
    # BigramLanguageModel.__init__: the contract's default N(0, 1) table
    Variant('table_initialised_to_zeros', cell('model', (TABLE, TABLE + '\n        nn.init.zeros_(self.token_embedding_table.weight)')),
            INIT),
    Variant('table_initialised_small', cell('model', (TABLE, TABLE + '\n        nn.init.normal_(self.token_embedding_table.weight, std=0.02)')),
            INIT),
    Variant('logits_returned_flattened', cell('model', (CE, 'logits = logits.view(B * T, C)\n'
                                                            '            loss = F.cross_entropy(logits, targets.view(B * T))')),
            FORWARD),
    Variant('embedding_too_narrow', cell('model', ('self.token_embedding_table = nn.Embedding(V, V)', 'self.token_embedding_table = nn.Embedding(V, 32)')), FORWARD),
    # BigramLanguageModel.generate
    Variant('generate_takes_the_argmax', cell('model', (SAMPLE, 'idx_next = probs.argmax(dim=-1, keepdim=True)')), GEN),
    Variant('generate_from_the_first_position', cell('model', (SOFTMAX, 'probs = F.softmax(logits[:, 0, :], dim=-1)')), GEN),
    Variant('generate_samples_the_logits', cell('model', (SOFTMAX, 'probs = logits[:, -1, :]')), GEN_SHAPE + GEN),
    Variant('generate_softmax_over_the_batch', cell('model', (SOFTMAX, 'probs = F.softmax(logits[:, -1, :], dim=0)')), GEN),
    Variant('generate_replaces_the_context', cell('model', ('idx = torch.cat((idx, idx_next), dim=1)', 'idx = idx_next')),
            GEN_SHAPE),
    Variant('generate_always_after_the_original_context',
            cell('model', ('logits, _ = self(idx)  # (B,t,V)', 'logits, _ = self(idx[:, :idx.shape[1] - _])  # (B,T,V)')), AUTO),
    Variant('generate_returns_inside_the_loop',
            cell('model', ('idx = torch.cat((idx, idx_next), dim=1)', 'idx = torch.cat((idx, idx_next), dim=1)\n            return idx')),
            GEN_SHAPE + AUTO),
    # train_bigram
    Variant('zero_grad_forgotten', cell('train', (ZERO_GRAD, '')), FALLS + GAP + TV),
    Variant('zero_grad_after_backward', cell('train', (ZERO_GRAD + BACKWARD, BACKWARD + ZERO_GRAD)), FALLS + GAP + TV),
    Variant('trained_on_the_validation_split', cell('train', ("xb, yb = get_batch('train', B, T)", "xb, yb = get_batch('val', B, T)")), GAP + FALLS),
    Variant('batch_and_context_swapped', cell('train', ("xb, yb = get_batch('train', B, T)", "xb, yb = get_batch('train', T, B)")),
            FALLS),
    Variant('one_batch_for_every_step', cell('train', ("    losses = []\n", "    losses = []\n    xb, yb = get_batch('train', B, T)\n"),
                                             ("        xb, yb = get_batch('train', B, T)  # (B,T), (B,T)\n", '')), FALLS),
    Variant('optimizer_created_every_step', cell('train', ('    optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n', ''),
                                                  ('        xb, yb = get_batch', '        optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n'
                                                                               '        xb, yb = get_batch')), FALLS + GAP + TV),
    Variant('losses_kept_as_tensors', cell('train', ('losses.append(loss.item())', 'losses.append(loss)')), FALLS),
]

ALTERNATIVES = [
    Variant('alt_counts_index_put', cell('counts', (BINCOUNT, 'N = torch.zeros(V, V, dtype=torch.long)\n'
                                                              '    N.index_put_((d[:-1], d[1:]), torch.ones_like(d[1:]), '
                                                              'accumulate=True)\n    return N'))),
    Variant('alt_counts_scatter_add', cell('counts', (BINCOUNT, 'flat = torch.zeros(V * V, dtype=torch.long)\n'
                                                                '    return flat.scatter_add_(0, pair, torch.ones_like(pair))'
                                                                '.view(V, V)'))),
    Variant('alt_probs_float64', cell('probs', ('return (Ns / Ns.sum(dim=1, keepdim=True)).float()',
                                                'return Ns / Ns.sum(dim=1, keepdim=True)'))),
    Variant('alt_probs_normalize_float32', cell('probs', (SMOOTH, 'Ns = N.float() + alpha'),
                                                 ('return (Ns / Ns.sum(dim=1, keepdim=True)).float()',
                                                  'return F.normalize(Ns, p=1, dim=1)'))),
    Variant('alt_nll_log_table_first', cell('nll', ('p = P[data[:-1], data[1:]]', 'logp = P.double().log()'),
                                            (LOGMEAN, 'return -logp[data[:-1], data[1:]].mean().item()'))),
    Variant('alt_cross_entropy_class_axis_second', cell('model', (CE, 'loss = F.cross_entropy(logits.transpose(1, 2), targets)'))),
    Variant('alt_log_softmax_then_nll_loss',
            cell('model', (CE, 'loss = F.nll_loss(F.log_softmax(logits.reshape(-1, C), dim=-1), targets.reshape(-1))'))),
    Variant('alt_generate_categorical_last_token_only',
            cell('model', ('logits, _ = self(idx)', 'logits, _ = self(idx[:, -1:])'),
                 (SAMPLE, 'idx_next = torch.distributions.Categorical(probs=probs).sample()[:, None]'))),
    Variant('alt_nll_sum_over_count', cell('nll', (LOGMEAN, 'return (-p.double().log().sum() / len(p)).item()'))),
    Variant('alt_train_with_periodic_val_estimate',
            cell('train', ('        losses.append(loss.item())\n',
                           '        losses.append(loss.item())\n'
                           '        if len(losses) % 50 == 0:  # a periodic validation estimate, on batches of its own\n'
                           '            with torch.no_grad():\n'
                           "                val_loss = sum(model(*get_batch('val', B, T))[1].item() for _ in range(4)) / 4\n"
                           "            print(f'step {len(losses)}: validation loss {val_loss:.3f}')\n"))),
    Variant('alt_train_keyword_batch_arguments', cell('train', ("xb, yb = get_batch('train', B, T)", "xb, yb = get_batch(split='train', B=B, T=T)"))),
    Variant('alt_train_zero_grad_first',  # with Adam: AdamW's default weight decay breaks the contract (a mistake below)
            cell('train', (ZERO_GRAD, ''), ('        xb, yb = get_batch', '        optimizer.zero_grad()\n        xb, yb = get_batch'))),
]

# The kinds of mistake of issue 52: a sampler that changes the law on some rows only, a loop that breaks its contract
# (its optimizer, its learning rate, what its list holds) while the loss still falls, an initialisation of the right std
# and the wrong law
LOOP_HEAD = '    optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n'
APPEND = '        losses.append(loss.item())\n'
MUTANTS += [
    Variant('generate_never_repeats_the_last_id',
            cell('model', (SAMPLE, 'probs = probs.scatter(1, idx[:, -1:], 0.0)  # no stutter: never the same id twice in a row\n'
                                   '            ' + SAMPLE)), GEN),
    Variant('generate_greedy_when_confident',
            cell('model', (SAMPLE, 'sure = probs.max(dim=-1, keepdim=True).values > 0.9  # (B,1): the model is confident\n'
                                   '            idx_next = torch.where(sure, probs.argmax(dim=-1, keepdim=True), '
                                   'torch.multinomial(probs, num_samples=1))')), GEN),
    Variant('generate_top_k_20',
            cell('model', (SOFTMAX, 'top = logits[:, -1, :].topk(20, dim=-1)  # keep the 20 likeliest ids, as nanoGPT can\n'
                                    '            probs = torch.zeros_like(logits[:, -1, :]).scatter(1, top.indices, '
                                    'F.softmax(top.values, dim=-1))')), GEN),
    Variant('train_with_cosine_schedule',
            cell('train', (LOOP_HEAD, LOOP_HEAD + '    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, '
                                                  'T_max=steps)\n'),
                 ('        optimizer.step()\n', '        optimizer.step()\n        schedule.step()\n')), FALLS),
    Variant('train_with_step_decay',
            cell('train', (LOOP_HEAD, LOOP_HEAD + '    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, '
                                                  'gamma=0.5)\n'),
                 ('        optimizer.step()\n', '        optimizer.step()\n        schedule.step()\n')), FALLS),
    Variant('train_with_adamw_default_decay', cell('train', ('optimizer = torch.optim.Adam(', 'optimizer = torch.optim.AdamW(')), FALLS),
    Variant('train_logs_validation_in_the_list',
            cell('train', (APPEND, "        if len(losses) % 100 == 0:  # every 100 steps, log the validation loss instead\n"
                                   '            with torch.no_grad():\n'
                                   "                losses.append(model(*get_batch('val', B, T))[1].item())\n"
                                   '        else:\n    ' + APPEND)), FALLS),
    Variant('train_losses_smoothed',
            cell('train', (APPEND, '        smooth = loss.item() if not losses else 0.9 * losses[-1] + 0.1 * loss.item()\n'
                                   '        losses.append(smooth)  # a smoothed curve plots better\n')), FALLS),
    Variant('table_initialised_uniform_with_unit_std',
            cell('model', ('self.token_embedding_table = nn.Embedding(V, V)  # (V,V): row i = the logits of the character after i',
                           'self.token_embedding_table = nn.Embedding(V, V)  # (V,V): row i = the logits of the character after i\n'
                           '        nn.init.uniform_(self.token_embedding_table.weight, -3 ** 0.5, 3 ** 0.5)  # unit variance')),
            INIT),
]
ALTERNATIVES += [
    Variant('alt_train_estimates_both_splits_nanogpt_style',
            cell('train', (APPEND, APPEND + '        if len(losses) % 100 == 0:  # estimate_loss, as in nanoGPT: batches of '
                                            'both splits, not trained on\n'
                                            '            with torch.no_grad():\n'
                                            "                est = {s: sum(model(*get_batch(s, B, T))[1].item() for _ in range(5)) / 5"
                                            " for s in ('train', 'val')}\n"
                                            "            print(f'step {len(losses)}: train {est[\"train\"]:.3f}, val {est[\"val\"]:.3f}')\n"))),
    Variant('alt_generate_sample_from_log_probs',
            cell('model', (SOFTMAX, 'probs = F.log_softmax(logits[:, -1, :], dim=-1).exp()'))),
    Variant('alt_table_initialised_normal_explicitly',
            cell('model', ('self.token_embedding_table = nn.Embedding(V, V)  # (V,V): row i = the logits of the character after i',
                           'self.token_embedding_table = nn.Embedding(V, V)  # (V,V): row i = the logits of the character after i\n'
                           '        nn.init.normal_(self.token_embedding_table.weight, mean=0.0, std=1.0)'))),
]
