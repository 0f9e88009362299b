"""Step 5's bank (multi-head attention, LayerNorm, the feed-forward map, the block and the parameter counts): realistic
mistakes, each with the test cells meant to catch it, and correct alternatives (course.authoring.demo.Variant)."""

from course.authoring.demo import Variant, in_cell

SLOPE_U = 'u = torch.log(torch.as_tensor(xs, dtype=torch.float64))  # (n,)'
SLOPE_W = 'w = torch.log(torch.as_tensor(ys, dtype=torch.float64))  # (n,)'
SLOPE_RETURN = 'return ((du * (w - w.mean())).sum() / (du * du).sum()).item()'
SLOPE_BODY = '    ' + SLOPE_U + '\n    ' + SLOPE_W + '\n    du = u - u.mean()  # (n,)\n    ' + SLOPE_RETURN
POWER = ('loglog_slope_of_power_laws',)
LSQ = ('loglog_slope_is_least_squares',)
slope = in_cell('loglog_slope')


MUTANTS = []
ALTERNATIVES = []

TORCH_MHA = ('mha_matches_torch_multihead_attention',)
TORCH_BATCHED = ('batched_matches_torch_multihead_attention',)
AGREE = ('batched_agrees_with_heads_after_copy',)
LN_REF = ('layernorm_matches_torch',)
CAUSAL = ('block_causal_by_perturbation', 'block_causal_by_gradient')
CAT = 'out = torch.cat([h(x) for h in self.heads], dim=-1)'
SPLIT_VIEWS = """        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B,nh,T,hs)
        k = k.view(B, T, nh, hs).transpose(1, 2)  # (B,nh,T,hs)
        v = v.view(B, T, nh, hs).transpose(1, 2)  # (B,nh,T,hs)"""
MERGE = 'out = (A @ v).transpose(1, 2).contiguous().view(B, T, C)'
SCORES = 'scores = q @ k.transpose(-2, -1) * hs**-0.5'
VAR = 'var = x.var(dim=-1, keepdim=True, unbiased=False)'
NORMALISE = 'return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias'
FIRST = 'x = x + self.attn(self.ln1(x))'
SECOND = 'x = x + self.ffwd(self.ln2(x))'
FF_BIAS = 'feed_forward = (d * 4 * d + 4 * d) + (4 * d * d + d)'
FF = '    self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))'
BLOCK_INIT = '''        self.ln1 = LayerNorm(d)
        self.attn = MultiHeadAttention(d, n_head, block_size=block_size)
        self.ln2 = LayerNorm(d)
        self.ffwd = FeedForward(d)'''
BLOCK_INIT_REORDERED = '''        self.ffwd = FeedForward(d)
        self.attn = MultiHeadAttention(d, n_head, block_size)
        self.ln2, self.ln1 = LayerNorm(d), LayerNorm(d)'''


mha = in_cell('mha')
batched = in_cell('batched_mha')
ln = in_cell('layernorm')
block = in_cell('block')
params = in_cell('param_formulas')


MUTANTS = [
    # MultiHeadAttention, heads side by side
    Variant('heads_concatenated_on_time_axis', mha((CAT, 'out = torch.cat([h(x) for h in self.heads], dim=1)')),
            TORCH_MHA + CAUSAL),
    Variant('heads_stacked_then_reshaped', mha((CAT, 'out = torch.stack([h(x) for h in self.heads], dim=1)'
                                                     '.reshape(x.shape)')), TORCH_MHA),
    Variant('output_projection_missing', mha(('return self.proj(out)  # (B,T,d)', 'return out  # (B,T,d)')), TORCH_MHA),
    Variant('heads_of_full_width', mha(('ModuleList([Head(d, d // n_head, block_size)', 'ModuleList([Head(d, d, block_size)'),
                                       ('self.proj = nn.Linear(d, d, bias=False)', 'self.proj = nn.Linear(n_head * d, d, bias=False)')),
            TORCH_MHA + ('mha_has_h_bias_free_heads_and_projection',)),
    Variant('projection_with_bias', mha(('self.proj = nn.Linear(d, d, bias=False)', 'self.proj = nn.Linear(d, d)')),
            ('mha_has_h_bias_free_heads_and_projection',)),
    Variant('one_head_repeated', mha(('nn.ModuleList([Head(d, d // n_head, block_size) for _ in range(n_head)])',
                                      'nn.ModuleList([Head(d, d // n_head, block_size)] * n_head)')),
            TORCH_MHA + ('mha_has_h_bias_free_heads_and_projection', 'ranks_low_per_head_full_for_the_layer')),
    Variant('heads_kept_in_a_plain_list', mha(('nn.ModuleList([Head(d, d // n_head, block_size) for _ in range(n_head)])',
                                               '[Head(d, d // n_head, block_size) for _ in range(n_head)]')),
            TORCH_MHA + ('mha_has_h_bias_free_heads_and_projection',)),
    Variant('heads_not_causal', mha(('ModuleList([Head(d, d // n_head, block_size)', 'ModuleList([Head(d, d // n_head, block_size, causal=False)')),
            TORCH_MHA + CAUSAL),
    # BatchedMultiHeadAttention
    Variant('view_heads_without_transpose', batched((SPLIT_VIEWS, """        q = q.view(B, nh, T, hs)  # (B,nh,T,hs)
        k = k.view(B, nh, T, hs)  # (B,nh,T,hs)
        v = v.view(B, nh, T, hs)  # (B,nh,T,hs)""")), TORCH_BATCHED + AGREE),
    Variant('merge_heads_without_transpose', batched((MERGE, 'out = (A @ v).reshape(B, T, C)')), TORCH_BATCHED + AGREE),
    Variant('batched_scaled_by_model_width', batched((SCORES, 'scores = q @ k.transpose(-2, -1) * C**-0.5')),
            TORCH_BATCHED + AGREE),
    Variant('qkv_split_as_k_q_v', batched(('q, k, v = self.qkv(x).split(C, dim=-1)', 'k, q, v = self.qkv(x).split(C, dim=-1)')),
            TORCH_BATCHED + AGREE),
    Variant('batched_mask_not_sliced', batched(('self.tril[None, None, :T, :T] == 0', 'self.tril == 0')), TORCH_BATCHED),
    Variant('heads_interleaved_by_view_order', batched((SPLIT_VIEWS, """        q = q.view(B, T, hs, nh).permute(0, 3, 1, 2)  # (B,nh,T,hs)
        k = k.view(B, T, hs, nh).permute(0, 3, 1, 2)  # (B,nh,T,hs)
        v = v.view(B, T, hs, nh).permute(0, 3, 1, 2)  # (B,nh,T,hs)""")), TORCH_BATCHED + AGREE),
    # LayerNorm
    Variant('layernorm_unbiased_variance', ln((VAR, 'var = x.var(dim=-1, keepdim=True)')), LN_REF),
    Variant('layernorm_std_plus_eps', ln((NORMALISE, 'return (x - mean) / (var.sqrt() + self.eps) * self.weight + self.bias')),
            LN_REF),
    Variant('layernorm_over_positions', ln(('mean = x.mean(dim=-1, keepdim=True)', 'mean = x.mean(dim=-2, keepdim=True)'),
                                           (VAR, 'var = x.var(dim=-2, keepdim=True, unbiased=False)')),
            LN_REF + ('layernorm_shift_invariant', 'layernorm_scale_invariant') + CAUSAL),
    # right at initialisation and in the forward pass, wrong once the parameters move or in the gradients
    Variant('layernorm_parameters_as_buffers', ln(('self.weight = nn.Parameter(torch.ones(d))  # (d,)\n        self.bias = nn.Parameter(torch.zeros(d))',
                                                   "self.register_buffer('weight', torch.ones(d))  # (d,)\n        self.register_buffer('bias', torch.zeros(d))")),
            LN_REF),
    Variant('layernorm_statistics_detached', ln((VAR, 'var = x.var(dim=-1, keepdim=True, unbiased=False).detach()')), LN_REF),
    Variant('layernorm_parameters_through_data', ln((NORMALISE, 'return (x - mean) / torch.sqrt(var + self.eps) * self.weight.data + self.bias.data')),
            LN_REF),
    Variant('layernorm_eps_hard_coded', ln(('torch.sqrt(var + self.eps)', 'torch.sqrt(var + 1e-5)')), LN_REF),
    Variant('layernorm_no_centering', ln(('return (x - mean) /', 'return x /')), LN_REF + ('layernorm_shift_invariant',)),
    Variant('layernorm_gain_and_shift_swapped', ln(('self.weight = nn.Parameter(torch.ones(d))', 'self.weight = nn.Parameter(torch.zeros(d))'),
                                                   ('self.bias = nn.Parameter(torch.zeros(d))', 'self.bias = nn.Parameter(torch.ones(d))'),
                                                   (NORMALISE, 'return (x - mean) / torch.sqrt(var + self.eps) * self.bias + self.weight')),
            LN_REF),
    # FeedForward
    Variant('feedforward_without_nonlinearity', (('feedforward', '    self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))',
                                                  '    self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.Linear(4 * d, d))'),),
            ('feedforward_is_a_4x_gelu_mlp',)),
    Variant('feedforward_relu', (('feedforward', '4 * d), nn.GELU(), nn.Linear(4 * d, d))\n', '4 * d), nn.ReLU(), nn.Linear(4 * d, d))\n'),), ('feedforward_is_a_4x_gelu_mlp',)),
    Variant('feedforward_tanh_gelu', (('feedforward', 'nn.GELU(), nn.Linear(4 * d, d))\n', "nn.GELU(approximate='tanh'), nn.Linear(4 * d, d))\n"),),
            ('feedforward_is_a_4x_gelu_mlp',)),
    Variant('feedforward_without_biases', (('feedforward', FF, FF.replace('4 * d)', '4 * d, bias=False)').replace('d))', 'd, bias=False))')),),
            ('feedforward_is_a_4x_gelu_mlp',)),
    Variant('feedforward_gelu_after_the_second_map', (('feedforward', FF, FF.replace('nn.GELU(), nn.Linear(4 * d, d))', 'nn.Linear(4 * d, d), nn.GELU())')),),
            ('feedforward_is_a_4x_gelu_mlp',)),
    Variant('feedforward_no_expansion', (('feedforward', '    self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))',
                                          '    self.net = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))'),),
            ('feedforward_is_a_4x_gelu_mlp',)),
    # Block
    Variant('block_post_norm', block((FIRST, 'x = self.ln1(x + self.attn(x))'), (SECOND, 'x = self.ln2(x + self.ffwd(x))')),
            ('block_residual_path', 'block_is_pre_norm')),
    Variant('residual_added_to_normed_input', block((FIRST, 'x = self.ln1(x)\n        x = x + self.attn(x)'),
                                                    (SECOND, 'x = self.ln2(x)\n        x = x + self.ffwd(x)')),
            ('block_residual_path', 'block_is_pre_norm')),
    Variant('second_residual_missing', block((SECOND, 'x = self.ffwd(self.ln2(x))')), ('block_residual_path', 'block_is_pre_norm')),
    Variant('ln1_used_twice', block((SECOND, 'x = x + self.ffwd(self.ln1(x))')), ('block_is_pre_norm',)),
    Variant('attention_branch_without_layernorm', block((FIRST, 'x = x + self.attn(x)')), ('block_is_pre_norm',)),
    Variant('second_branch_reads_the_block_input', block((FIRST + '  # (B,T,d)\n        ' + SECOND,
                                                         'h = x + self.attn(self.ln1(x))\n        x = h + self.ffwd(self.ln2(x))')),
            ('block_is_pre_norm',)),
    Variant('branches_in_parallel', block((FIRST + '  # (B,T,d)\n        ' + SECOND,
                                           'x = x + self.attn(self.ln1(x)) + self.ffwd(self.ln2(x))')),
            ('block_is_pre_norm',)),
    # Why residuals
    Variant('grad_norms_norm_flag_ignored', (('grad_norms', 'if norm else (nn.Identity(), nn.Identity())', ''),),
            ('plain_stack_gradient_vanishes',)),
    Variant('grad_norms_residual_flag_ignored', (('grad_norms', 'h = h + a if residual else a', 'h = h + a'),
                                                 ('grad_norms', 'h = h + f if residual else f', 'h = h + f')),
            ('plain_stack_gradient_vanishes',)),
    Variant('grad_norms_layernorm_kept_with_residuals', (('grad_norms', 'if norm else (nn.Identity(), nn.Identity())',
                                                          'if norm or residual else (nn.Identity(), nn.Identity())'),),
            ('residuals_keep_the_input_gradient',)),
    Variant('grad_norms_loss_without_g', (('grad_norms', 'torch.autograd.grad((h * g).sum(), xs)', 'torch.autograd.grad(h.sum(), xs)'),),
            ('residuals_keep_the_input_gradient', 'plain_stack_gradient_vanishes')),
    Variant('grad_norms_of_activations', (('grad_norms', 'return [gr.norm().item() for gr in grads]',
                                           'return [t.norm().item() for t in xs]'),),
            ('residuals_keep_the_input_gradient',)),
    Variant('grad_norms_reversed', (('grad_norms', 'return [gr.norm().item() for gr in grads]',
                                     'return [gr.norm().item() for gr in grads][::-1]'),),
            ('residuals_keep_the_input_gradient', 'plain_stack_gradient_vanishes')),
    # Every parameter counted
    Variant('block_count_without_layernorms', params(('return attention + feed_forward + layer_norms',
                                                      'return attention + feed_forward')),
            ('block_param_formula', 'gpt_param_formula', 'gpt2_small_count')),
    Variant('block_count_without_ffwd_biases', params((FF_BIAS, 'feed_forward = 8 * d * d')),
            ('block_param_formula', 'gpt_param_formula', 'gpt2_small_count')),
    Variant('block_count_layernorm_gain_only', params(('layer_norms = 2 * (d + d)', 'layer_norms = 2 * d')),
            ('block_param_formula', 'gpt_param_formula', 'gpt2_small_count')),
    Variant('attention_bias_only_on_qkv', params(('(4 * d if attn_bias else 0)', '(3 * d if attn_bias else 0)')),
            ('block_param_formula', 'gpt_param_formula', 'gpt2_small_count')),
    Variant('attention_counted_per_head_size', params(('attention = 4 * d * d', 'attention = 4 * d * (d // 4)')),
            ('block_param_formula', 'gpt_param_formula')),
    Variant('gpt_count_without_final_layernorm', params(('n_layer * block_params(d, attn_bias) + 2 * d + head',
                                                         'n_layer * block_params(d, attn_bias) + head')),
            ('gpt_param_formula', 'gpt2_small_count')),
    Variant('gpt_count_tied_head_counted_twice', params(('head = 0 if tied else V * d', 'head = V * d')),
            ('gpt_param_formula', 'gpt2_small_count')),
    Variant('gpt_count_final_layernorm_gain_only', params(('n_layer * block_params(d, attn_bias) + 2 * d + head',
                                                           'n_layer * block_params(d, attn_bias) + d + head')),
            ('gpt_param_formula', 'gpt2_small_count')),
    Variant('gpt_count_without_positions', params(('embeddings = V * d + block_size * d', 'embeddings = V * d')),
            ('gpt_param_formula', 'gpt2_small_count')),
    # Rank
    Variant('rank_of_weights_not_scores', (('rank_report', 'matrix_rank(q @ k.T / hs**0.5)',
                                            'matrix_rank(torch.softmax(q @ k.T / hs**0.5, dim=-1))'),),
            ('ranks_low_per_head_full_for_the_layer',)),
    Variant('rank_layer_map_of_one_head', (('rank_report', 'matrix_rank(sum(maps))', 'matrix_rank(maps[0])'),),
            ('ranks_low_per_head_full_for_the_layer',)),
    Variant('rank_layer_as_sum_of_head_ranks', (('rank_report', 'int(torch.linalg.matrix_rank(sum(maps)))',
                                                 'sum(int(torch.linalg.matrix_rank(m)) for m in maps)'),),
            ('ranks_low_per_head_full_for_the_layer',)),
    Variant('rank_layer_as_capped_sum_of_head_ranks', (('rank_report', 'int(torch.linalg.matrix_rank(sum(maps)))',
                                                        'min(x.shape[-1], sum(int(torch.linalg.matrix_rank(m)) for m in maps))'),),
            ('ranks_low_per_head_full_for_the_layer',)),
    Variant('rank_head_maps_assumed_full', (('rank_report', "'head_maps': [int(torch.linalg.matrix_rank(m)) for m in maps]",
                                             "'head_maps': [m.shape[0] // len(maps) for m in maps]"),),
            ('ranks_low_per_head_full_for_the_layer',)),
    # the upcast used elsewhere in the series, with float64's default tolerance: float32's rounding noise counts as rank
    Variant('rank_of_upcast_maps_at_float64_tolerance', (('rank_report', 'matrix_rank(sum(maps))', 'matrix_rank(sum(maps).double())'),
                                                         ('rank_report', 'matrix_rank(m))', 'matrix_rank(m.double()))')),
            ('ranks_low_per_head_full_for_the_layer',)),
    Variant('rank_head_maps_without_output_slice', (('rank_report', 'W_O[i * hs:(i + 1) * hs]', 'W_O[:hs]'),),
            ('ranks_low_per_head_full_for_the_layer',)),
    # loglog_slope: judged on exact power laws and on points worked by hand, never on timings
    Variant('slope_on_semilog_axes', slope((SLOPE_U, 'u = torch.as_tensor(xs, dtype=torch.float64)  # (n,)')), POWER + LSQ),
    Variant('slope_between_the_ends', slope((SLOPE_RETURN, 'return ((w[-1] - w[0]) / (u[-1] - u[0])).item()')), LSQ),
    Variant('slope_of_x_on_y', slope((SLOPE_RETURN, 'return ((du * (w - w.mean())).sum() / ((w - w.mean()) ** 2).sum()).item()')),
            POWER + LSQ),
    Variant('slope_through_the_origin', slope((SLOPE_RETURN, 'return ((u * w).sum() / (u * u).sum()).item()')), POWER + LSQ),
    Variant('slope_returned_as_a_tensor', slope((SLOPE_RETURN, 'return (du * (w - w.mean())).sum() / (du * du).sum()')), POWER),
    Variant('slope_log10_on_one_axis_only', slope((SLOPE_U, 'u = torch.log10(torch.as_tensor(xs, dtype=torch.float64))  # (n,)')),
            POWER + LSQ),
]

ALTERNATIVES = [
    Variant('alt_heads_stacked_and_flattened', mha((CAT, 'out = torch.stack([h(x) for h in self.heads], dim=-2).flatten(-2)'))),
    Variant('alt_heads_modulelist_from_generator', mha(('nn.ModuleList([Head(d, d // n_head, block_size) for _ in range(n_head)])',
                                                        'nn.ModuleList(Head(d, d // n_head, block_size) for _ in range(n_head))'))),
    Variant('alt_batched_einsum', batched((SCORES, "scores = torch.einsum('bhqd,bhkd->bhqk', q, k) / hs**0.5"),
                                          (MERGE, "out = torch.einsum('bhqk,bhkd->bqhd', A, v).reshape(B, T, C)"))),
    Variant('alt_batched_sdpa', batched(("""        scores = q @ k.transpose(-2, -1) * hs**-0.5  # (B,nh,T,hs) @ (B,nh,hs,T) -> (B,nh,T,T)
        scores = scores.masked_fill(self.tril[None, None, :T, :T] == 0, float('-inf'))  # (B,nh,T,T): one mask for every head
        A = scores.softmax(dim=-1)  # (B,nh,T,T)
        """ + MERGE, """        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B,nh,T,hs)
        out = y.transpose(1, 2).reshape(B, T, C)"""))),
    Variant('alt_batched_permute_and_chunk', batched(('q, k, v = self.qkv(x).split(C, dim=-1)', 'q, k, v = self.qkv(x).chunk(3, dim=-1)'),
                                                     (SPLIT_VIEWS, """        q = q.reshape(B, T, nh, hs).permute(0, 2, 1, 3)  # (B,nh,T,hs)
        k = k.reshape(B, T, nh, hs).permute(0, 2, 1, 3)  # (B,nh,T,hs)
        v = v.reshape(B, T, nh, hs).permute(0, 2, 1, 3)  # (B,nh,T,hs)"""))),
    Variant('alt_layernorm_F_layer_norm', ln(("""        mean = x.mean(dim=-1, keepdim=True)  # (...,1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (...,1), the biased variance
        """ + NORMALISE, '        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)'))),
    Variant('alt_layernorm_rsqrt_mean_of_squares', ln((VAR, 'var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)'),
                                                      (NORMALISE, 'return self.weight * (x - mean) * torch.rsqrt(var + self.eps) + self.bias'))),
    Variant('alt_layernorm_var_mean', ln(("""        mean = x.mean(dim=-1, keepdim=True)  # (...,1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (...,1), the biased variance""",
                                          '        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)'))),
    Variant('alt_feedforward_named_layers', (('feedforward', '    self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))',
                                              '    self.fc = nn.Linear(d, 4 * d)\n        self.proj = nn.Linear(4 * d, d)'),
                                             ('feedforward', 'return self.net(x)', 'return self.proj(F.gelu(self.fc(x)))'))),
    Variant('alt_block_named_branches', block((FIRST + '  # (B,T,d)\n        ' + SECOND + '  # (B,T,d)\n        return x',
                                               'h = x + self.attn(self.ln1(x))  # (B,T,d)\n'
                                               '        return h + self.ffwd(self.ln2(h))'))),
    Variant('alt_grad_norms_retain_grad', (('grad_norms', '        xs.append(h)\n', '        h.retain_grad()\n        xs.append(h)\n'),
                                           ('grad_norms', """    grads = torch.autograd.grad((h * g).sum(), xs)  # L + 1 tensors (B,T,d)
    return [gr.norm().item() for gr in grads]""", """    (h * g).sum().backward()
    return [t.grad.norm().item() for t in xs]"""))),
    Variant('alt_params_one_line', params(("""    attention = 4 * d * d + (4 * d if attn_bias else 0)  # W_Q, W_K, W_V (all heads together) and W_O
    """ + FF_BIAS + """  # W_1, b_1, W_2, b_2
    layer_norms = 2 * (d + d)  # ln1 and ln2: gain and shift each
    return attention + feed_forward + layer_norms""", '    return 12 * d**2 + 9 * d + 4 * d * int(attn_bias)'))),
    Variant('alt_grad_norms_identity_lambdas', (('grad_norms', 'if norm else (nn.Identity(), nn.Identity())',
                                                 'if norm else (lambda t: t, lambda t: t)'),)),
    Variant('alt_rank_layer_from_the_stacked_value_maps', (('rank_report', 'int(torch.linalg.matrix_rank(sum(maps)))',
                                                            'int(torch.linalg.matrix_rank(torch.cat([h.value.weight.T for h in mha.heads], 1) @ W_O))'),)),
    Variant('alt_feedforward_three_named_layers', (('feedforward', FF, '    self.fc = nn.Linear(d, 4 * d)\n        self.act = nn.GELU()\n'
                                                    '        self.out = nn.Linear(4 * d, d)'),
                                                   ('feedforward', 'return self.net(x)', 'return self.out(self.act(self.fc(x)))'))),
    Variant('alt_block_parts_made_in_another_order', block((BLOCK_INIT, BLOCK_INIT_REORDERED))),
    Variant('alt_rank_upcast_with_stated_rtol', (('rank_report', 'matrix_rank(q @ k.T / hs**0.5)', 'matrix_rank((q @ k.T / hs**0.5).double(), rtol=1e-4)'),
                                                 ('rank_report', 'matrix_rank(sum(maps))', 'matrix_rank(sum(maps).double(), rtol=1e-4)'),
                                                 ('rank_report', 'matrix_rank(m))', 'matrix_rank(m.double(), rtol=1e-4))'))),
    Variant('alt_layernorm_affine_by_addcmul', ln((NORMALISE, 'return torch.addcmul(self.bias, (x - mean) / torch.sqrt(var + self.eps), self.weight)'))),
    Variant('alt_rank_by_singular_values', (('rank_report', """        return {'scores': scores, 'head_maps': [int(torch.linalg.matrix_rank(m)) for m in maps],
                'layer_map': int(torch.linalg.matrix_rank(sum(maps)))}""", """        def rank(M):
            sv = torch.linalg.svdvals(M)
            return int((sv > sv[0] * 1e-5).sum())
        return {'scores': scores, 'head_maps': [rank(m) for m in maps], 'layer_map': rank(sum(maps))}"""),)),
    Variant('alt_slope_by_polyfit', slope((SLOPE_BODY, '    import numpy as np\n    u, w = np.log(np.asarray(xs, dtype=float)), np.log(np.asarray(ys, dtype=float))\n'
                                                      '    return float(np.polyfit(u, w, 1)[0])'))),
    Variant('alt_slope_in_log2_and_float32', slope((SLOPE_U, 'u = torch.log2(torch.tensor(xs, dtype=torch.float32))  # (n,)'),
                                                   (SLOPE_W, 'w = torch.log2(torch.tensor(ys, dtype=torch.float32))  # (n,)'))),
    Variant('alt_slope_by_lstsq', slope((SLOPE_RETURN, 'A = torch.stack([u, torch.ones_like(u)], dim=1)  # (n,2)\n'
                                                       '    return torch.linalg.lstsq(A, w[:, None]).solution[0, 0].item()'))),
]

# issue 52: dtypes the contract states (LayerNorm computes in the dtype of x), distinct modules (two LayerNorms, n heads
# of their own), and a degenerate rank case that tells the columns of W_O from its rows
MHA_HEADS = 'self.heads = nn.ModuleList([Head(d, d // n_head, block_size) for _ in range(n_head)])'
LN_FORWARD = """        mean = x.mean(dim=-1, keepdim=True)  # (...,1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (...,1), the biased variance
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias  # (...,d)"""
MUTANTS += [
    Variant('layernorm_normalises_in_float32', ln((LN_FORWARD, """        xf = x.float()  # the statistics in float32, as mixed-precision code keeps them
        mean = xf.mean(dim=-1, keepdim=True)  # (...,1)
        var = xf.var(dim=-1, keepdim=True, unbiased=False)  # (...,1)
        return ((xf - mean) / torch.sqrt(var + self.eps)).type_as(x) * self.weight + self.bias  # (...,d)""")), LN_REF),
    Variant('block_one_layernorm_for_both_branches', block(('        self.ln2 = LayerNorm(d)\n',
                                                           '        self.ln2 = self.ln1  # the same normalisation on both branches\n')),
            ('block_is_pre_norm',)),
    Variant('heads_deep_copies_of_one', mha((MHA_HEADS, 'import copy\n'
                                                        '        head = Head(d, d // n_head, block_size)\n'
                                                        '        self.heads = nn.ModuleList([copy.deepcopy(head) for _ in range(n_head)])  '
                                                        '# n distinct Heads')),
            ('mha_has_h_bias_free_heads_and_projection', 'ranks_low_per_head_full_for_the_layer')),
    Variant('rank_report_head_slice_from_rows', (('rank_report', 'W_O = mha.proj.weight.T  # (d,d)', 'W_O = mha.proj.weight  # (d,d)'),),
            ('ranks_low_per_head_full_for_the_layer',)),
]
ALTERNATIVES += [
    Variant('alt_heads_appended_in_a_loop', mha((MHA_HEADS, 'self.heads = nn.ModuleList()\n'
                                                            '        for _ in range(n_head):\n'
                                                            '            self.heads.append(Head(d, d // n_head, block_size))'))),
]
