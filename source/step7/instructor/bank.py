"""Step 7's bank (nanoGPT's parameter groups, the learning-rate schedule, the KV cache, the weight at an offset):
realistic mistakes, each with the test cells meant to catch it, and correct alternatives (course.authoring.demo.Variant)."""

from course.authoring.demo import Variant


def cell(gid, *edits):
    return tuple((gid, old, new) for old, new in edits)


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
KV_DRAW = 'idx_next = sample_next(logits[:, -1], temperature, top_k)  # (B,V) -> (B,1)'
LR_WARM = 'return max_lr * (it + 1) / warmup'
LR_FLOOR = '    if it > max_iters:\n        return min_lr\n'
LR_PROGRESS = 'progress = (it - warmup) / (max_iters - warmup)'
LR_COS = 'return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)'

DECAY = ('param_groups_decay_matrices_and_embeddings_only',)
ONCE = ('param_groups_hold_each_parameter_once',)
WARMUP = ('lr_at_warms_up_linearly',)
COSINE = ('lr_at_decays_by_cosine_to_min_lr',)

MUTANTS = [
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
    # the checks by kind (issue 52): each mistake below draws the same tokens as generate in the older tests
    # a type the contract states: the mean as a 0-d tensor, not a Python float
    Variant('offset_returns_a_tensor',
            cell('weight_at_offset', ('return A[..., i, i - offset].mean().item()', 'return A[..., i, i - offset].mean()')),
            ('weight_at_offset_on_hand_made_maps',)),
    # generate_cached's law: the draw of sample_next overruled where the model is confident
    Variant('kv_generate_greedy_when_confident',
            cell('generate_cached', (KV_DRAW, KV_DRAW + '\n        sure = F.softmax(logits[:, -1], dim=-1).max(-1, keepdim=True).values > 0.9\n'
                                              '        idx_next = torch.where(sure, logits[:, -1].argmax(-1, keepdim=True), idx_next)')),
            ('generate_cached_gives_the_same_tokens',)),
    # the work the cache saves: the same tokens, at the cost of generate
    Variant('kv_generate_rebuilds_the_cache_every_step',
            cell('generate_cached', ('logits = forward_cached(model, idx[:, -1:], cache)  # (B,1,V)',
                                     'cache = {}  # (a fresh cache: the whole sequence again)\n'
                                     '            logits = forward_cached(model, idx, cache)  # (B,t,V)')),
            ('generate_cached_gives_the_same_tokens',)),
    Variant('kv_generate_full_forward_at_every_step',
            cell('generate_cached', ('        if idx.shape[1] > model.block_size:', '        if True:')),
            ('generate_cached_gives_the_same_tokens',)),
    # a dtype the contract states: a float64 head scaled by a float32 number
    Variant('kv_scale_by_a_float32_tensor',
            cell('head_step', (KV_SCORES, 'scores = (q @ k.transpose(1, 2)) / torch.tensor(k.shape[-1]).sqrt()  # (B,n,P+n)')),
            ('head_step_matches_the_full_head', 'forward_cached_matches_forward')),
    # param_groups' training contract: the groups carry settings of their own
    Variant('groups_carry_nanogpts_betas',
            cell('param_groups', (PG_RETURN, "return [{'params': decay, 'weight_decay': weight_decay, 'betas': (0.9, 0.95)},\n"
                                             "            {'params': no_decay, 'weight_decay': 0.0, 'betas': (0.9, 0.95)}]")),
            DECAY),
]

ALTERNATIVES = [
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
