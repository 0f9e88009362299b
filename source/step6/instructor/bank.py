"""Step 6's bank (get_batch, sampling, the GPT, its initialisation and generate, its training step and loss estimates):
realistic mistakes, each with the test cells meant to catch it, and correct alternatives (course.authoring.demo.Variant)."""

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
KV_SCORES = 'scores = (q @ k.transpose(1, 2)) / math.sqrt(k.shape[-1])  # (B,n,hs) @ (B,hs,P+n) -> (B,n,P+n)'
KV_MASK = 'mask = torch.ones(n, T, dtype=torch.bool, device=x.device).tril(diagonal=T - n)'
KV_CAT_K = 'k = torch.cat([past[0], k], dim=1)'
KV_CAT_V = 'v = torch.cat([past[1], v], dim=1)'
KV_RETURN = 'return A @ v, (k, v)'
KV_POS = 'pos = model.position_embedding_table(torch.arange(P, P + n, device=idx.device))'
ROWS = 'i = torch.arange(offset, T)'
PG_PARAMS = 'params = list(model.parameters())'
PG_SPLIT = '''    decay = [p for p in params if p.dim() >= 2]  # (out,in) weights, (V,d) and (block_size,d) tables
    no_decay = [p for p in params if p.dim() < 2]  # (d,) biases, LayerNorm gains and shifts
'''
PG_RETURN = "return [{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay, 'weight_decay': 0.0}]"
LR_WARM = 'return max_lr * (it + 1) / warmup'
LR_FLOOR = '    if it > max_iters:\n        return min_lr\n'
LR_PROGRESS = 'progress = (it - warmup) / (max_iters - warmup)'
LR_COS = 'return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)'

DECAY = ('param_groups_decay_matrices_and_embeddings_only',)
ONCE = ('param_groups_hold_each_parameter_once',)
WARMUP = ('lr_at_warms_up_linearly',)
COSINE = ('lr_at_decays_by_cosine_to_min_lr',)
GPT_REF = ('gpt_loss_matches_cross_entropy', 'trained_checkpoint_runs_in_your_gpt')
TRAINED = ('trained_checkpoint_runs_in_your_gpt', 'a_previous_character_head_exists')
SAMPLING = ('sample_matches_softmax_over_tau',)
GREEDY = ('gpt_generate_crops_context', 'gpt_generate_reads_the_last_position')
INIT = ('gpt_initial_weights',)

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
    # head_step and forward_cached (the KV cache): generate_cached is given, so its test catches them all as well
    Variant('kv_scores_not_scaled', cell('head_step', (KV_SCORES, 'scores = q @ k.transpose(-2, -1)  # (B,n,P+n)')),
            ('head_step_matches_the_full_head', 'forward_cached_matches_forward')),
    Variant('kv_mask_counts_from_the_new_positions',  # row i sees j <= i: right for the prompt, wrong once P > 0
            cell('head_step', (KV_MASK, 'mask = torch.ones(n, T, dtype=torch.bool, device=x.device).tril()')),
            ('head_step_matches_the_full_head', 'forward_cached_matches_forward')),
    Variant('kv_no_mask', cell('head_step', ("    scores = scores.masked_fill(~mask, float('-inf'))  # (B,n,P+n)\n", '')),
            ('head_step_matches_the_full_head', 'forward_cached_matches_forward')),
    Variant('kv_new_keys_before_the_past', cell('head_step', (KV_CAT_K, 'k = torch.cat([k, past[0]], dim=1)'),
                                                (KV_CAT_V, 'v = torch.cat([v, past[1]], dim=1)')),
            ('head_step_appends_to_the_cache',)),
    Variant('kv_returns_only_the_new_keys_and_values',
            cell('head_step', (KV_RETURN, 'return A @ v, (head.key(x), head.value(x))')),
            ('head_step_appends_to_the_cache', 'forward_cached_matches_forward')),
    Variant('kv_keys_and_values_swapped_in_the_cache', cell('head_step', (KV_RETURN, 'return A @ v, (v, k)')),
            ('head_step_appends_to_the_cache', 'forward_cached_matches_forward')),
    Variant('kv_queries_cached_instead_of_keys',
            cell('head_step', ('k, v = head.key(x), head.value(x)', 'k, v = head.query(x), head.value(x)')),
            ('head_step_matches_the_full_head', 'head_step_appends_to_the_cache')),
    Variant('kv_positions_from_zero_every_call',
            cell('forward_cached', (KV_POS, 'pos = model.position_embedding_table(torch.arange(n, device=idx.device))')),
            ('forward_cached_matches_forward', 'generate_cached_gives_the_same_tokens')),
    Variant('kv_heads_read_x_not_ln1',
            cell('forward_cached', ('head_step(head, h, cache.get((l, i)))', 'head_step(head, x, cache.get((l, i)))')),
            ('forward_cached_matches_forward', 'forward_cached_fills_the_cache')),
    Variant('kv_attention_without_residual',
            cell('forward_cached', ('x = x + block.attn.proj(torch.cat(outs, dim=-1))', 'x = block.attn.proj(torch.cat(outs, dim=-1))')),
            ('forward_cached_matches_forward',)),
    Variant('kv_ffwd_without_ln2', cell('forward_cached', ('x = x + block.ffwd(block.ln2(x))', 'x = x + block.ffwd(x)')),
            ('forward_cached_matches_forward',)),
    Variant('kv_no_final_layernorm', cell('forward_cached', ('return model.lm_head(model.ln_f(x))', 'return model.lm_head(x)')),
            ('forward_cached_matches_forward',)),
    Variant('kv_cache_keyed_by_head_only',  # the layers overwrite one another's keys and values
            cell('forward_cached', ('out, cache[(l, i)] = head_step(head, h, cache.get((l, i)))',
                                    'out, cache[i] = head_step(head, h, cache.get(i))'),
                 ('P = cache[(0, 0)][0].shape[1] if cache else 0', 'P = cache[0][0].shape[1] if cache else 0')),
            ('forward_cached_matches_forward', 'forward_cached_fills_the_cache')),
    Variant('kv_generate_never_falls_back',  # past block_size the cache would need position rows the table lacks
            cell('generate_cached', ('        if idx.shape[1] > model.block_size:', '        if False:')),
            ('generate_cached_gives_the_same_tokens',)),
    Variant('kv_generate_skips_the_prompt',  # the first step reads only the prompt's last character, at position 0
            cell('generate_cached', ('logits = forward_cached(model, idx, cache)  # (B,T0,V)',
                                     'logits = forward_cached(model, idx[:, -1:], cache)  # (B,1,V)')),
            ('generate_cached_gives_the_same_tokens',)),
    # train_step: judged on Step 2's bigram model, so GPT bugs cannot reach it
    Variant('zero_grad_forgotten', cell('train_step', ('    optimizer.zero_grad(set_to_none=True)\n', '')),
            ('train_step_clears_old_gradients',)),
    Variant('zero_grad_between_backward_and_step',
            cell('train_step', (STEP_BODY, '    _, loss = model(x, y)\n    loss.backward()\n    optimizer.zero_grad()\n'
                                           '    optimizer.step()\n    return loss.item()')),
            ('train_step_lowers_the_loss', 'overfit_one_batch_near_zero')),
    Variant('optimizer_step_forgotten', cell('train_step', ('    optimizer.step()\n', '')),
            ('train_step_lowers_the_loss', 'overfit_one_batch_near_zero')),
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
    # param_groups: judged on a stand-in model with every kind of parameter and a tied weight
    Variant('decay_chosen_by_name', cell('param_groups', (PG_SPLIT, '''    named = list(model.named_parameters())
    decay = [p for n, p in named if n.endswith('weight')]  # LayerNorm gains are called weight too
    no_decay = [p for n, p in named if not n.endswith('weight')]
''')), DECAY),
    Variant('decay_inverted', cell('param_groups', (PG_SPLIT, '''    decay = [p for p in params if p.dim() < 2]
    no_decay = [p for p in params if p.dim() >= 2]
''')), DECAY),
    Variant('only_linear_weights_decayed', cell('param_groups', (PG_SPLIT, '''    decay = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]  # embeddings left out
    no_decay = [p for p in params if all(p is not q for q in decay)]
''')), DECAY),
    Variant('no_decay_group_gets_adamw_default', cell('param_groups', (PG_RETURN, "return [{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay}]")),
            DECAY),
    Variant('both_groups_decayed',
            cell('param_groups', (PG_RETURN, "return [{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay, 'weight_decay': weight_decay}]")),
            DECAY),
    Variant('no_decay_group_left_out', cell('param_groups', (PG_RETURN, "return [{'params': decay, 'weight_decay': weight_decay}]")), ONCE),
    Variant('tied_weight_listed_twice',
            cell('param_groups', (PG_PARAMS, 'params = [p for m in model.modules() for p in m.parameters(recurse=False)]')), ONCE),
    # lr_at
    Variant('warmup_starts_at_zero', cell('lr_at', (LR_WARM, 'return max_lr * it / warmup')), WARMUP),
    Variant('warmup_one_step_too_long', cell('lr_at', ('if it < warmup:', 'if it <= warmup:')), COSINE),
    Variant('cosine_over_the_whole_run', cell('lr_at', (LR_PROGRESS, 'progress = it / max_iters')), COSINE),
    Variant('cosine_without_the_half', cell('lr_at', (LR_COS, 'return min_lr + (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)')),
            COSINE),
    Variant('cosine_decays_to_zero', cell('lr_at', (LR_COS, 'return 0.5 * (1 + math.cos(math.pi * progress)) * max_lr')), COSINE),
    Variant('linear_decay_not_cosine', cell('lr_at', (LR_COS, 'return max_lr - progress * (max_lr - min_lr)')), COSINE),
    Variant('no_floor_after_max_iters', cell('lr_at', (LR_FLOOR, '')), COSINE),
    Variant('schedule_returns_a_tensor',
            cell('lr_at', (LR_COS, 'return min_lr + 0.5 * (1 + torch.cos(torch.tensor(math.pi * progress))) * (max_lr - min_lr)')),
            COSINE),
    # weight_at_offset
    Variant('offset_rows_wrap_around', cell('weight_at_offset', (ROWS, 'i = torch.arange(0, T)')),
            ('weight_at_offset_on_hand_made_maps', 'a_previous_character_head_exists')),
    Variant('offset_read_above_the_diagonal', cell('weight_at_offset', ('return A[..., i, i - offset]', 'return A[..., i - offset, i]')),
            ('weight_at_offset_on_hand_made_maps', 'a_previous_character_head_exists')),
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
    Variant('alt_kv_mask_from_the_heads_tril',
            cell('head_step', (KV_MASK, 'mask = head.tril[T - n:T, :T] == 1  # (n,P+n): the last n rows of the causal mask'))),
    Variant('alt_kv_fused_attention',
            cell('head_step', ("    scores = scores.masked_fill(~mask, float('-inf'))  # (B,n,P+n)\n"
                               '    A = scores.softmax(dim=-1)  # (B,n,P+n), each row sums to 1\n'
                               '    return A @ v, (k, v)',
                               '    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (k, v)'))),
    Variant('alt_kv_positions_by_slicing_the_table',
            cell('forward_cached', (KV_POS, 'pos = model.position_embedding_table.weight[P:P + n]  # (n,d)'))),
    Variant('alt_kv_length_from_any_entry',
            cell('forward_cached', ('P = cache[(0, 0)][0].shape[1] if cache else 0',
                                    'P = next(iter(cache.values()))[1].size(1) if len(cache) else 0'))),
    Variant('alt_groups_no_decay_first',
            cell('param_groups', (PG_RETURN, "return [{'params': no_decay, 'weight_decay': 0.0}, {'params': decay, 'weight_decay': weight_decay}]"))),
    Variant('alt_groups_by_ndim_and_ids',
            cell('param_groups', (PG_SPLIT, '''    decay = [p for p in params if p.ndim > 1]
    no_decay = [p for p in params if id(p) not in {id(q) for q in decay}]
'''))),
    Variant('alt_groups_from_named_parameters_that_require_grad',  # nanoGPT's way
            cell('param_groups', (PG_PARAMS, 'params = [p for _, p in model.named_parameters() if p.requires_grad]'))),
    Variant('alt_cosine_as_a_squared_cosine',
            cell('lr_at', (LR_COS, 'return min_lr + math.cos(math.pi * progress / 2) ** 2 * (max_lr - min_lr)'))),
    Variant('alt_progress_clamped_instead_of_a_floor',
            cell('lr_at', (LR_FLOOR, ''), (LR_PROGRESS, 'progress = min(1.0, (it - warmup) / (max_iters - warmup))'))),
    Variant('alt_warmup_as_a_fraction_first', cell('lr_at', (LR_WARM, 'return (it + 1) / warmup * max_lr'))),
    Variant('alt_offset_by_diagonal',
            cell('weight_at_offset', (ROWS + '  # (T-offset,) the rows that have a column i - offset\n'
                                      '    return A[..., i, i - offset].mean().item()  # (..., T-offset) -> float',
                                      'return torch.diagonal(A, offset=-offset, dim1=-2, dim2=-1).mean().item()'))),
]
