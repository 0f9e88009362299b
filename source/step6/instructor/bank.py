"""Step 6's bank (get_batch, sampling, the GPT, its initialisation and generate, the gradient of the loss by hand, its
training step and loss estimates): realistic mistakes, each with the test cells meant to catch it, and correct
alternatives (course.authoring.demo.Variant)."""

from course.authoring.demo import Variant


def cell(gid, *edits):
    return tuple((gid, old, new) for old, new in edits)


SPLIT = "d = train_data if split == 'train' else val_data"
STARTS = 'ix = torch.randint(len(d) - T, (B,), generator=generator)'
WINDOWS = 'x = torch.stack([d[i:i + T] for i in ix])'
TARGETS = 'y = torch.stack([d[i + 1:i + T + 1] for i in ix])'
DIVIDE = 'logits = logits / temperature  # (B,V)'
KTH = 'kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, [-1]]'
MASK = "logits = logits.masked_fill(logits < kth, float('-inf'))"
SOFTMAX = 'probs = F.softmax(logits, dim=-1)  # (B,V)'
DRAW = 'return torch.multinomial(probs, num_samples=1, generator=generator)'
POS = 'pos = self.position_embedding_table(torch.arange(T, device=idx.device))'
LOSS = 'loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))'
HEAD = 'logits = self.lm_head(self.ln_f(x))'
LM_HEAD = 'self.lm_head = nn.Linear(in_features=d, out_features=V, bias=False)'
APPLY = '        self.apply(self._init_weights)\n'
INIT_WHICH = 'if isinstance(module, (nn.Linear, nn.Embedding)):'
INIT_DRAW = 'nn.init.normal_(module.weight, mean=0.0, std=0.02)'
INIT_BIAS = """        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
"""
CROP = 'idx_cond = idx[:, -self.block_size:]'
NEXT = 'idx_next = sample_next(logits[:, -1, :], temperature, top_k)'
STEP_BODY = """    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()"""
MEAN = 'out[split] = sum(losses) / len(losses)'
GPT_REF = ('gpt_loss_matches_cross_entropy', 'trained_checkpoint_runs_in_your_gpt')
TRAINED = ('trained_checkpoint_runs_in_your_gpt',)
SAMPLING = ('sample_matches_softmax_over_tau',)
GREEDY = ('gpt_generate_crops_context', 'gpt_generate_reads_the_last_position')
INIT = ('gpt_initial_weights',)
CEG_SOFTMAX = 'p = F.softmax(logits, dim=-1)  # (N,V): each row\'s predicted distribution'
CEG_ONEHOT = 'onehot = F.one_hot(targets, V_).to(logits.dtype)  # (N,V): 1 at each row\'s target'
CEG_RETURN = 'return (p - onehot) / N  # (N,V): d(mean loss)/d(logits)'
CEG = ('cross_entropy_grad_matches_autograd',)

MUTANTS = [
    # get_batch: each mistake costs get_batch's own tests only (the other tests build their batches without it)
    Variant('targets_not_shifted', cell('get_batch', (TARGETS, 'y = torch.stack([d[i:i + T] for i in ix])')),
            ('get_batch_targets_shifted_by_one',)),
    Variant('val_split_leaks_into_training', cell('get_batch', (SPLIT, "d = data if split == 'train' else val_data")),
            ('get_batch_reads_its_own_split',)),
    Variant('split_argument_ignored', cell('get_batch', (SPLIT, 'd = train_data')), ('get_batch_reads_its_own_split',)),
    Variant('generator_not_passed', cell('get_batch', (STARTS, 'ix = torch.randint(len(d) - T, (B,))')),
            ('get_batch_reads_its_own_split',)),
    Variant('last_start_never_drawn', cell('get_batch', (STARTS, 'ix = torch.randint(len(d) - T - 1, (B,), generator=generator)')),
            ('get_batch_reads_its_own_split',)),
    Variant('targets_shifted_by_two', cell('get_batch', (TARGETS, 'y = torch.stack([d[i + 2:i + T + 2] for i in ix])'),
                                           (STARTS, 'ix = torch.randint(len(d) - T - 1, (B,), generator=generator)')),
            ('get_batch_targets_shifted_by_one',)),
    # sample_next
    Variant('temperature_after_softmax', cell('sample_next', (DIVIDE, '# (B,V)'),
                                               (SOFTMAX, 'probs = F.softmax(logits, dim=-1) / temperature  # (B,V)')),
            ('sample_tau_to_zero_is_argmax',) + SAMPLING),
    Variant('temperature_multiplies_logits', cell('sample_next', (DIVIDE, 'logits = logits * temperature  # (B,V)')),
            ('sample_tau_to_zero_is_argmax',) + SAMPLING),
    Variant('sampling_from_logits_not_probabilities', cell('sample_next', (SOFTMAX, 'probs = logits  # (B,V)')),
            ('sample_tau_to_zero_is_argmax', 'sample_top_k_stays_in_top_k') + SAMPLING),
    Variant('argmax_instead_of_sampling', cell('sample_next', (DRAW, 'return probs.argmax(-1, keepdim=True)')), SAMPLING),
    Variant('top_k_keeps_the_smallest', cell('sample_next', (KTH, KTH.replace('.shape[-1]))', '.shape[-1]), largest=False)'))),
            ('sample_top_k_stays_in_top_k',) + SAMPLING),
    Variant('top_k_masks_with_zero', cell('sample_next', (MASK, 'logits = logits.masked_fill(logits < kth, 0.0)')),
            ('sample_top_k_stays_in_top_k',) + SAMPLING),
    Variant('top_k_drops_the_kth', cell('sample_next', (MASK, "logits = logits.masked_fill(logits <= kth, float('-inf'))")),
            ('sample_top_k_stays_in_top_k',) + SAMPLING),
    Variant('sample_next_ignores_its_generator', cell('sample_next', (DRAW, 'return torch.multinomial(probs, num_samples=1)')),
            ('sample_next_uses_the_generator',)),
    # GPT: forward
    Variant('no_position_embedding', cell('gpt', ('x = self.token_embedding_table(idx) + pos', 'x = self.token_embedding_table(idx)')),
            ('gpt_uses_positions', 'gpt_loss_matches_cross_entropy')),
    Variant('positions_counted_from_one',
            cell('gpt', (POS, 'pos = self.position_embedding_table(torch.arange(1, T + 1) % self.block_size)')), GPT_REF),
    Variant('positions_of_the_whole_table', cell('gpt', (POS, 'pos = self.position_embedding_table.weight  # (block_size,d)')),
            ('gpt_shapes_and_modules',)),
    Variant('no_final_layernorm', cell('gpt', (HEAD, 'logits = self.lm_head(x)')), GPT_REF),
    Variant('final_layernorm_without_its_parameters', cell('gpt', (HEAD, 'logits = self.lm_head(F.layer_norm(x, x.shape[-1:]))')), GPT_REF),
    Variant('blocks_not_chained', cell('gpt', ('x = self.blocks(x)', 'for block in self.blocks:\n            out = block(x)\n        x = out')),
            GPT_REF),
    Variant('lm_head_with_a_bias', cell('gpt', (LM_HEAD, 'self.lm_head = nn.Linear(in_features=d, out_features=V)')),
            ('gpt_shapes_and_modules',) + TRAINED),
    Variant('logits_flattened_against_wrong_target_layout',
            cell('gpt', (LOSS, 'loss = F.cross_entropy(logits.reshape(B * T, -1), targets.T.reshape(B * T))')),
            ('gpt_loss_matches_cross_entropy',)),
    Variant('loss_summed_not_averaged',
            cell('gpt', (LOSS, "loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T), reduction='sum')")),
            ('gpt_loss_matches_cross_entropy', 'gpt_loss_at_init_is_ln_V')),
    Variant('loss_flattens_with_view', cell('gpt', (LOSS, 'loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))')),
            ('gpt_loss_matches_cross_entropy',)),
    # GPT: initialisation (the final LayerNorm hides most of these from the loss: the tests read the parameters)
    Variant('default_init_kept', cell('gpt', (APPLY, '')), INIT + ('gpt_loss_at_init_is_ln_V',)),
    Variant('init_applied_before_the_modules_exist',
            cell('gpt', (APPLY, ''), ('        self.block_size = block_size\n', '        self.apply(self._init_weights)\n        self.block_size = block_size\n')),
            INIT + ('gpt_loss_at_init_is_ln_V',)),
    Variant('embeddings_left_at_n01', cell('gpt', (INIT_WHICH, 'if isinstance(module, nn.Linear):')), INIT),
    Variant('biases_left_at_default', cell('gpt', (INIT_BIAS, '')), INIT),
    Variant('layernorm_gains_drawn_like_weights', cell('gpt', (INIT_WHICH, 'if isinstance(module, (nn.Linear, nn.Embedding, LayerNorm)):')),
            INIT),
    Variant('init_std_ten_times_too_large', cell('gpt', (INIT_DRAW, 'nn.init.normal_(module.weight, mean=0.0, std=0.2)')),
            INIT + ('gpt_loss_at_init_is_ln_V',)),
    Variant('init_variance_taken_for_std', cell('gpt', (INIT_DRAW, 'nn.init.normal_(module.weight, mean=0.0, std=0.02 ** 2)')),
            INIT),
    # GPT: generate
    Variant('generate_does_not_crop', cell('gpt', (CROP, 'idx_cond = idx')), ('gpt_generate_crops_context',)),
    Variant('generate_crops_the_wrong_end', cell('gpt', (CROP, 'idx_cond = idx[:, :self.block_size]')), ('gpt_generate_crops_context',)),
    Variant('generate_crops_one_too_many', cell('gpt', (CROP, 'idx_cond = idx[:, -self.block_size + 1:]')), ('gpt_generate_crops_context',)),
    Variant('generate_reads_the_first_position', cell('gpt', (NEXT, 'idx_next = sample_next(logits[:, 0, :], temperature, top_k)')),
            GREEDY + ('gpt_generate_samples_with_sample_next',)),
    Variant('generate_returns_only_the_new_tokens', cell('gpt', ('        return idx', '        return idx[:, -max_new_tokens:]')),
            ('gpt_generate_crops_context',)),
    Variant('generate_always_takes_the_argmax', cell('gpt', (NEXT, 'idx_next = logits[:, -1, :].argmax(-1, keepdim=True)')),
            ('gpt_generate_samples_with_sample_next',)),
    Variant('generate_feeds_probabilities_as_logits',
            cell('gpt', (NEXT, 'idx_next = sample_next(F.softmax(logits[:, -1, :], dim=-1), temperature, top_k)')),
            ('gpt_generate_samples_with_sample_next',)),
    Variant('generate_applies_temperature_after_softmax',
            cell('gpt', (NEXT, 'idx_next = torch.multinomial(F.softmax(logits[:, -1, :], dim=-1) / temperature, 1)')),
            ('gpt_generate_samples_with_sample_next',)),
    Variant('generate_drops_temperature_and_top_k', cell('gpt', (NEXT, 'idx_next = sample_next(logits[:, -1, :])')),
            ('gpt_generate_samples_with_sample_next',)),
    Variant('generate_passes_top_k_as_temperature', cell('gpt', (NEXT, 'idx_next = sample_next(logits[:, -1, :], top_k, temperature)')),
            ('gpt_generate_samples_with_sample_next',)),
    # train_step: judged on Step 2's bigram model, so GPT bugs cannot reach it
    Variant('zero_grad_forgotten', cell('train_step', ('    optimizer.zero_grad(set_to_none=True)\n', '')),
            ('train_step_clears_old_gradients',)),
    Variant('zero_grad_between_backward_and_step',
            cell('train_step', (STEP_BODY, '    _, loss = model(x, y)\n    loss.backward()\n    optimizer.zero_grad()\n'
                                           '    optimizer.step()\n    return loss.item()')),
            ('train_step_lowers_the_loss', 'overfit_one_batch_near_zero', 'my_gpt_learns')),
    Variant('optimizer_step_forgotten', cell('train_step', ('    optimizer.step()\n', '')),
            ('train_step_lowers_the_loss', 'overfit_one_batch_near_zero', 'my_gpt_learns')),
    Variant('returns_the_loss_tensor', cell('train_step', ('return loss.item()', 'return loss')), ('train_step_lowers_the_loss',)),
    Variant('returns_the_loss_after_the_step',
            cell('train_step', ('    return loss.item()', '    with torch.no_grad():\n        return model(x, y)[1].item()')),
            ('train_step_lowers_the_loss',)),
    # estimate_loss: judged with a stand-in get_batch
    Variant('eval_mode_forgotten', cell('estimate_loss', ('    model.eval()\n', '')), ('estimate_loss_in_eval_mode_without_grad',)),
    Variant('no_grad_forgotten', cell('estimate_loss', ('    with torch.no_grad():\n        for split', '    if True:\n        for split')),
            ('estimate_loss_in_eval_mode_without_grad',)),
    Variant('train_mode_not_restored', cell('estimate_loss', ('    model.train(was_training)\n', '')),
            ('estimate_loss_in_eval_mode_without_grad',)),
    Variant('always_left_in_train_mode', cell('estimate_loss', ('    model.train(was_training)\n', '    model.train()\n')),
            ('estimate_loss_in_eval_mode_without_grad',)),
    Variant('val_estimated_on_train_batches',
            cell('estimate_loss', ('get_batch(split, B, T, generator=g)', "get_batch('train', B, T, generator=g)")),
            ('estimate_loss_averages_fixed_held_out_batches',)),
    Variant('fresh_batches_at_every_estimate',
            cell('estimate_loss', ('get_batch(split, B, T, generator=g)', 'get_batch(split, B, T)')),
            ('estimate_loss_averages_fixed_held_out_batches',)),
    Variant('one_generator_for_both_splits',
            cell('estimate_loss', ("        for split in ('train', 'val'):\n            g = torch.Generator().manual_seed(seed)\n",
                                   "        g = torch.Generator().manual_seed(seed)\n        for split in ('train', 'val'):\n")),
            ('estimate_loss_averages_fixed_held_out_batches',)),
    # the same batches every time, by resetting the global seed: in train_gpt, training then replays its batches
    Variant('estimate_resets_the_global_seed',
            cell('estimate_loss', ('            g = torch.Generator().manual_seed(seed)\n', '            torch.manual_seed(seed)\n'),
                 ('get_batch(split, B, T, generator=g)', 'get_batch(split, B, T)')),
            ('estimate_loss_averages_fixed_held_out_batches',)),
    Variant('estimate_keeps_the_last_batch_only', cell('estimate_loss', (MEAN, 'out[split] = losses[-1]')),
            ('estimate_loss_averages_fixed_held_out_batches',)),
    # cross_entropy_grad: the gradient by hand, judged against autograd
    Variant('ceg_not_averaged_over_rows', cell('cross_entropy_grad', (CEG_RETURN, 'return p - onehot  # (N,V)')), CEG),
    Variant('ceg_sign_flipped', cell('cross_entropy_grad', (CEG_RETURN, 'return (onehot - p) / N  # (N,V)')),
            CEG + ('cross_entropy_grad_rows_sum_to_zero',)),
    Variant('ceg_target_not_subtracted', cell('cross_entropy_grad', (CEG_RETURN, 'return p / N  # (N,V)')),
            CEG + ('cross_entropy_grad_rows_sum_to_zero',)),
    Variant('ceg_softmax_over_the_rows', cell('cross_entropy_grad', (CEG_SOFTMAX, 'p = F.softmax(logits, dim=0)  # (N,V)')),
            CEG + ('cross_entropy_grad_rows_sum_to_zero',)),
    Variant('ceg_log_probabilities_for_probabilities',
            cell('cross_entropy_grad', (CEG_SOFTMAX, 'p = F.log_softmax(logits, dim=-1)  # (N,V)')),
            CEG + ('cross_entropy_grad_rows_sum_to_zero',)),
    Variant('ceg_divided_by_every_entry', cell('cross_entropy_grad', (CEG_RETURN, 'return (p - onehot) / logits.numel()  # (N,V)')),
            CEG),
    Variant('ceg_targets_taken_as_rows',
            cell('cross_entropy_grad', (CEG_ONEHOT, 'onehot = torch.zeros_like(logits)\n    onehot[targets] = 1.0  # (N,V)')),
            CEG + ('cross_entropy_grad_rows_sum_to_zero',)),
    Variant('ceg_exp_without_normalising', cell('cross_entropy_grad', (CEG_SOFTMAX, 'p = logits.exp()  # (N,V)')),
            CEG + ('cross_entropy_grad_rows_sum_to_zero',)),
    # the checks by kind (issue 52): each mistake below keeps the size, shape and spread the older tests read
    # a sampler's law: right on most rows, wrong where the model is confident or a probability is small
    Variant('sample_next_greedy_when_confident',
            cell('sample_next', (SOFTMAX, SOFTMAX + '\n    sure = probs.max(dim=-1, keepdim=True).values > 0.9  # (B,1)\n'
                                          '    probs = torch.where(sure, F.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype), probs)')),
            SAMPLING),
    Variant('sample_next_drops_unlikely_characters',
            cell('sample_next', (SOFTMAX, SOFTMAX + '\n    probs = probs.masked_fill(probs < 0.005, 0.0)  # (B,V): no rare junk')),
            SAMPLING),
    Variant('generate_greedy_when_confident',
            cell('gpt', (NEXT, NEXT + '\n            sure = F.softmax(logits[:, -1, :], dim=-1).max(-1, keepdim=True).values > 0.9\n'
                               '            idx_next = torch.where(sure, logits[:, -1, :].argmax(-1, keepdim=True), idx_next)')),
            ('gpt_generate_samples_with_sample_next',)),
    Variant('generate_redraws_a_repeated_character',
            cell('gpt', (NEXT, NEXT + '\n            again = sample_next(logits[:, -1, :], temperature, top_k)\n'
                               '            idx_next = torch.where(idx_next == idx[:, -1:], again, idx_next)')),
            ('gpt_generate_samples_with_sample_next',)),
    # distinct modules: one Block object for every layer; the head tied to the embedding the contract keeps apart
    Variant('one_block_repeated_n_layer_times',
            cell('gpt', ('nn.Sequential(*[Block(d, n_head, block_size) for _ in range(n_layer)])',
                         'nn.Sequential(*[Block(d, n_head, block_size)] * n_layer)')),
            ('gpt_shapes_and_modules', 'trained_checkpoint_runs_in_your_gpt')),
    Variant('lm_head_tied_to_the_token_embedding',
            cell('gpt', (LM_HEAD, LM_HEAD + '\n        self.lm_head.weight = self.token_embedding_table.weight')),
            ('gpt_shapes_and_modules', 'trained_checkpoint_runs_in_your_gpt')),
    # the initialisation's law: the right spread, another distribution
    Variant('init_normal_truncated_at_two_std',
            cell('gpt', (INIT_DRAW, 'nn.init.trunc_normal_(module.weight, mean=0.0, std=0.02, a=-0.04, b=0.04)')), INIT),
    Variant('init_uniform_of_the_same_std',
            cell('gpt', (INIT_DRAW, 'nn.init.uniform_(module.weight, -0.02 * 3 ** 0.5, 0.02 * 3 ** 0.5)')), INIT),
    # a dtype the contract states: float64 logits computed in float32
    Variant('ceg_softmax_in_float32',
            cell('cross_entropy_grad', (CEG_SOFTMAX, 'p = F.softmax(logits.float(), dim=-1).to(logits.dtype)  # (N,V)')), CEG),
    # a training step's contract: the optimizer as given, one step per call
    Variant('train_step_decays_the_learning_rate',
            cell('train_step', ('    optimizer.step()\n', '    optimizer.step()\n    for group in optimizer.param_groups:\n'
                                                        "        group['lr'] *= 0.99  # a gentle decay\n")),
            ('train_step_clears_old_gradients',)),
]

ALTERNATIVES = [
    Variant('alt_batch_by_index_arithmetic',
            cell('get_batch', (WINDOWS, 'x = d[ix[:, None] + torch.arange(T)]'),
                 (TARGETS, 'y = d[ix[:, None] + torch.arange(1, T + 1)]'))),
    Variant('alt_batch_as_views_of_one_window',  # y is a non-contiguous view: the contract allows it
            cell('get_batch', (WINDOWS, 'w = torch.stack([d[i:i + T + 1] for i in ix])  # (B,T+1)'),
                 (TARGETS, 'x, y = w[:, :-1], w[:, 1:]'))),
    Variant('alt_loss_with_classes_on_axis_1',
            cell('gpt', (LOSS, 'loss = F.cross_entropy(logits.transpose(1, 2), targets)'))),
    Variant('alt_loss_by_flatten', cell('gpt', (LOSS, 'loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())'))),
    Variant('alt_positions_broadcast_explicitly',
            cell('gpt', (POS, 'pos = self.position_embedding_table.weight[:T][None]  # (1,T,d)'))),
    Variant('alt_init_with_torch_nn_init_named_modules',
            cell('gpt', (APPLY, '        for mod in self.modules():\n            self._init_weights(mod)\n'))),
    Variant('alt_init_normal_in_place', cell('gpt', (INIT_DRAW, 'module.weight.data.normal_(0.0, 0.02)'))),
    Variant('alt_crop_only_when_too_long',
            cell('gpt', (CROP, 'idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]'))),
    Variant('alt_generate_with_keywords',
            cell('gpt', (NEXT, 'idx_next = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k)'))),
    Variant('alt_top_k_with_where',
            cell('sample_next', (MASK, "logits = torch.where(logits < kth, torch.full_like(logits, -float('inf')), logits)"))),
    Variant('alt_top_k_on_probabilities',  # zeroed probabilities: torch.multinomial renormalises the rest
            cell('sample_next', (MASK, 'pass  # masked after the softmax'),
                 (SOFTMAX, 'probs = F.softmax(logits, dim=-1)  # (B,V)\n    if top_k is not None:\n'
                           '        probs = probs.masked_fill(logits < kth, 0.0)  # (B,V), zero outside the top k'))),
    Variant('alt_sample_by_log_softmax',
            cell('sample_next', (SOFTMAX, 'probs = F.log_softmax(logits, dim=-1).exp()  # (B,V)'))),
    Variant('alt_zero_grad_first',
            cell('train_step', (STEP_BODY, '    optimizer.zero_grad()\n    logits, loss = model(x, y)\n    loss.backward()\n'
                                           '    optimizer.step()\n    return float(loss)'))),
    Variant('alt_zero_grad_after_the_step',
            cell('train_step', (STEP_BODY, '    _, loss = model(x, y)\n    loss.backward()\n    optimizer.step()\n'
                                           '    optimizer.zero_grad()\n    return loss.item()'))),
    Variant('alt_estimate_under_a_forked_rng',  # the global seed reset inside fork_rng, which restores the state after
            cell('estimate_loss', ('            g = torch.Generator().manual_seed(seed)\n            losses = [model(*get_batch(split, B, T, generator=g))[1].item() for _ in range(eval_iters)]\n',
                                   '            with torch.random.fork_rng():\n                torch.manual_seed(seed)\n'
                                   '                losses = [model(*get_batch(split, B, T))[1].item() for _ in range(eval_iters)]\n'))),
    Variant('alt_crop_to_the_position_table', cell('gpt', (CROP, 'idx_cond = idx[:, -self.position_embedding_table.num_embeddings:]'))),
    Variant('alt_generate_cat_of_sampled_ids', cell('gpt', ('idx = torch.cat([idx, idx_next], dim=1)', 'idx = torch.cat((idx, idx_next), -1)'))),
    Variant('alt_inference_mode', cell('estimate_loss', ('with torch.no_grad():', 'with torch.inference_mode():'))),
    Variant('alt_estimate_by_tensor_mean', cell('estimate_loss', (MEAN, 'out[split] = torch.tensor(losses, dtype=torch.float64).mean().item()'))),
    Variant('alt_ceg_by_indexing',
            cell('cross_entropy_grad', (CEG_ONEHOT + '\n    return (p - onehot) / N  # (N,V): d(mean loss)/d(logits)',
                                        'g = p.clone()  # (N,V)\n    g[torch.arange(N), targets] -= 1.0\n    return g / N'))),
    Variant('alt_ceg_by_scatter_and_exp',
            cell('cross_entropy_grad', (CEG_SOFTMAX, 'e = (logits - logits.max(-1, keepdim=True).values).exp()\n'
                                                     '    p = e / e.sum(-1, keepdim=True)  # (N,V)'),
                 (CEG_ONEHOT, 'onehot = torch.zeros_like(logits).scatter_(1, targets[:, None], 1.0)  # (N,V)'))),
    Variant('alt_sample_by_gumbel_max',  # argmax of log p + Gumbel noise: exactly a draw of p
            cell('sample_next', (DRAW, 'gumbel = -torch.empty_like(probs).exponential_(generator=generator).log()  # (B,V)\n'
                                       '    return (probs.log() + gumbel).argmax(dim=-1, keepdim=True)'))),
    Variant('alt_init_by_randn', cell('gpt', (INIT_DRAW, 'module.weight.data = 0.02 * torch.randn_like(module.weight)'))),
    Variant('alt_ceg_divided_first', cell('cross_entropy_grad', (CEG_RETURN, 'return p / N - onehot / N  # (N,V)'))),
]
