"""Step 8's bank (RMSNorm, the rotary angles and rotation, SwiGLU and its width, grouped-query attention, the modern block
and GPT, the KV cache's size): realistic mistakes, each with the test cells meant to catch it, and correct alternatives
(course.authoring.demo.Variant)."""

from course.authoring.demo import Variant, in_cell

rms = in_cell('rmsnorm')
angles = in_cell('rope_angles')
rotary = in_cell('apply_rotary')
swiglu = in_cell('swiglu')
gqa = in_cell('gqa')
block = in_cell('modern_block')
gpt = in_cell('modern_gpt')
kv = in_cell('kv_cache_bytes')

RMS = 'rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)'
RMS_REF = ('rmsnorm_matches_torch',)
THETA = 'theta = base ** (-torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)'
OUTER = 'return positions.to(torch.float64)[:, None] * theta[None, :]'
HAND = ('rope_angles_by_hand',)
TURN = 'return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)'
SPLIT = 'a, b = x[..., :half], x[..., half:]'
PAIRS = ('apply_rotary_turns_each_pair',)
P1, P2, P3 = ('rotary_scores_depend_only_on_the_offset',), ('rotary_preserves_the_norm',), ('rotary_leaves_position_zero_unchanged',)
WIDTH = 'return round(gelu_mlp / (3 * d))'
HIDDEN = ('swiglu_hidden_matches_the_gelu_mlp',)
SILU = ('swiglu_matches_silu_reference',)
FORWARD = 'return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))'
REPEAT = '''        k = k.repeat_interleave(nh // nkv, dim=1)  # (B,nh,T,hs): kv head i serves query heads i*g..(i+1)*g-1
        v = v.repeat_interleave(nh // nkv, dim=1)  # (B,nh,T,hs)'''
ROTATE = 'q, k = apply_rotary(q, angles), apply_rotary(k, angles)'
SCORES = 'scores = q @ k.transpose(-2, -1) * hs**-0.5'
GQA_REF = ('gqa_matches_sdpa_enable_gqa',)
GQA_ROT = ('gqa_rotates_queries_and_keys',)
AS_MHA = ('gqa_with_as_many_kv_heads_is_step5_mha',)
MQA = ('gqa_with_one_kv_head_is_multi_query',)
FIRST = 'x = x + self.attn(self.norm1(x), angles)'
SECOND = 'x = x + self.mlp(self.norm2(x))'
WIRING = ('modern_block_wiring',)
SHAPES = ('modern_gpt_shapes_and_modules',)
INIT = ('modern_gpt_loss_and_initialisation',)
ANGLES = 'angles = rope_angles(torch.arange(T, device=idx.device), self.head_size, self.rope_base)'
BYTES = 'return 2 * n_layer * n_kv_head * head_size * T * B * bytes_per_number'
KV = ('kv_cache_bytes_by_the_formula',)

MUTANTS = [
    # RMSNorm
    Variant('rms_over_the_time_axis', rms((RMS, RMS.replace('dim=-1', 'dim=1'))),
            RMS_REF + ('rmsnorm_gradients_match_torch', 'rmsnorm_scale_invariant')),
    Variant('rms_over_the_whole_tensor', rms((RMS, 'rms = torch.sqrt(x.pow(2).mean() + self.eps)')),
            RMS_REF + ('rmsnorm_gradients_match_torch', 'rmsnorm_scale_invariant')),
    Variant('mean_subtracted_as_in_layernorm', rms(('return x / rms * self.weight', 'return (x - x.mean(dim=-1, keepdim=True)) / rms * self.weight')),
            RMS_REF + ('rmsnorm_scale_invariant',)),
    Variant('standard_deviation_for_rms', rms((RMS, 'rms = torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + self.eps)')),
            RMS_REF + ('rmsnorm_gradients_match_torch',)),
    Variant('eps_outside_the_square_root', rms((RMS, 'rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True)) + self.eps')), RMS_REF),
    Variant('mean_square_not_its_root', rms((RMS, 'rms = x.pow(2).mean(dim=-1, keepdim=True) + self.eps')),
            RMS_REF + ('rmsnorm_scale_invariant',)),
    Variant('mean_absolute_value_for_rms', rms((RMS, 'rms = x.abs().mean(dim=-1, keepdim=True) + self.eps')), RMS_REF),
    Variant('rms_detached_from_the_graph', rms((RMS, 'rms = torch.sqrt(x.detach().pow(2).mean(dim=-1, keepdim=True) + self.eps)')),
            ('rmsnorm_gradients_match_torch',)),
    Variant('eps_argument_ignored', rms(('self.eps = eps', 'self.eps = 1e-6')), RMS_REF),
    Variant('weight_not_a_parameter', rms(('self.weight = nn.Parameter(torch.full((d,), 1.0))', 'self.weight = torch.ones(d)')), RMS_REF),
    Variant('rmsnorm_with_a_shift_parameter', rms(('self.weight = nn.Parameter(torch.full((d,), 1.0))',
                                                   'self.weight = nn.Parameter(torch.ones(d))\n        self.bias = nn.Parameter(torch.zeros(d))'),
                                                  ('return x / rms * self.weight', 'return x / rms * self.weight + self.bias')), RMS_REF),
    # rope_angles
    Variant('frequencies_indexed_by_position', angles((THETA, 'theta = base ** (-torch.arange(0, 2 * len(positions), 2, dtype=torch.float64) / head_size)'),
                                                      (OUTER, 'return theta[:, None] * torch.arange(head_size // 2, dtype=torch.float64)[None, :]')),
            HAND + P1),
    Variant('angles_laid_out_pair_by_position', angles((OUTER, 'return theta[:, None] * positions.to(torch.float64)[None, :]')),
            HAND + P1 + P2),
    Variant('frequency_exponent_without_the_two', angles((THETA, 'theta = base ** (-torch.arange(head_size // 2, dtype=torch.float64) / head_size)')),
            HAND),
    Variant('frequencies_growing_with_the_pair', angles((THETA, 'theta = base ** (torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)')),
            HAND),
    Variant('positions_replaced_by_their_index', angles((OUTER, 'return torch.arange(len(positions), dtype=torch.float64)[:, None] * theta[None, :]')),
            HAND + P1),
    # apply_rotary
    Variant('turned_clockwise', rotary((TURN, 'return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1)')), PAIRS),
    Variant('one_sign_wrong_in_the_rotation', rotary((TURN, 'return torch.cat([a * cos - b * sin, a * sin - b * cos], dim=-1)')),
            PAIRS + P1 + P2),
    Variant('neighbours_paired_but_written_back_as_halves', rotary((SPLIT, 'a, b = x[..., 0::2], x[..., 1::2]')), PAIRS + P3),
    Variant('cos_and_sin_in_the_angles_dtype', rotary(('cos, sin = angles.to(x.dtype).cos(), angles.to(x.dtype).sin()',
                                                      'cos, sin = angles.cos(), angles.sin()')), PAIRS),
    Variant('x_rotated_in_place', rotary((TURN, 'x[..., :half], x[..., half:] = a * cos - b * sin, a * sin + b * cos\n    return x')),
            PAIRS),
    # swiglu_hidden and SwiGLU
    Variant('width_without_the_biases', swiglu(('gelu_mlp = (d * 4 * d + 4 * d) + (4 * d * d + d)', 'gelu_mlp = d * 4 * d + 4 * d * d')),
            HIDDEN),
    Variant('width_four_d_as_in_step5', swiglu((WIDTH, 'return 4 * d')), HIDDEN),
    Variant('width_two_thirds_of_four_d', swiglu((WIDTH, 'return int(2 * 4 * d / 3)')), HIDDEN),
    Variant('width_as_a_float', swiglu((WIDTH, 'return gelu_mlp / (3 * d)')), HIDDEN),
    Variant('width_for_two_matrices', swiglu((WIDTH, 'return round(gelu_mlp / (2 * d))')), HIDDEN),
    Variant('gate_and_value_swapped', swiglu((FORWARD, 'return self.w_down(F.silu(self.w_up(x)) * self.w_gate(x))')), SILU),
    Variant('silu_after_the_product', swiglu((FORWARD, 'return self.w_down(F.silu(self.w_gate(x) * self.w_up(x)))')), SILU),
    Variant('sigmoid_gate_instead_of_silu', swiglu((FORWARD, 'return self.w_down(torch.sigmoid(self.w_gate(x)) * self.w_up(x))')), SILU),
    Variant('gelu_gate_instead_of_silu', swiglu((FORWARD, 'return self.w_down(F.gelu(self.w_gate(x)) * self.w_up(x))')), SILU),
    Variant('swiglu_maps_with_bias', swiglu(('self.w_up = nn.Linear(d, hidden, bias=False)', 'self.w_up = nn.Linear(d, hidden)')), SILU),
    # GroupedQueryAttention
    Variant('kv_heads_repeated_as_tiles', gqa((REPEAT, '''        k = k.repeat(1, nh // nkv, 1, 1)  # (B,nh,T,hs)
        v = v.repeat(1, nh // nkv, 1, 1)  # (B,nh,T,hs)''')), GQA_REF + GQA_ROT),
    Variant('kv_heads_expanded_in_the_wrong_order', gqa((REPEAT, '''        k = k[:, None].expand(B, nh // nkv, nkv, T, hs).reshape(B, nh, T, hs)
        v = v[:, None].expand(B, nh // nkv, nkv, T, hs).reshape(B, nh, T, hs)''')), GQA_REF + GQA_ROT),
    Variant('values_rotated_too', gqa((ROTATE, 'q, k, v = apply_rotary(q, angles), apply_rotary(k, angles), apply_rotary(v, angles)')),
            GQA_ROT),
    Variant('only_the_queries_rotated', gqa((ROTATE, 'q = apply_rotary(q, angles)')), GQA_ROT),
    Variant('scores_scaled_by_the_model_width', gqa((SCORES, 'scores = q @ k.transpose(-2, -1) * C**-0.5')),
            GQA_REF + GQA_ROT + AS_MHA + MQA),
    Variant('future_not_masked', gqa(('A = scores.masked_fill(future, float(\'-inf\')).softmax(dim=-1)', 'A = scores.softmax(dim=-1)')),
            GQA_REF + GQA_ROT + AS_MHA + MQA + ('modern_gpt_is_causal',)),
    Variant('heads_merged_without_transpose', gqa(('out = (A @ v).transpose(1, 2).reshape(B, T, C)', 'out = (A @ v).reshape(B, T, C)')),
            GQA_REF + GQA_ROT + AS_MHA),
    Variant('output_projection_skipped', gqa(('return self.proj(out)  # (B,T,C)', 'return out  # (B,T,C)')),
            GQA_REF + GQA_ROT + AS_MHA + MQA),
    Variant('indivisible_kv_heads_accepted', gqa(('''        if n_head % n_kv_head:
            raise ValueError(f'n_kv_head = {n_kv_head} does not divide n_head = {n_head}')
''', '')), MQA),
    # RMSNorm's dtype (issue 52): normalised in float32 and cast back, as Llama's reference code does for half precision;
    # the contract computes in x's dtype, and a float64 x loses its precision
    Variant('rms_normalised_in_float32',
            rms(('return x / rms * self.weight',
                 'xf = x.float()  # (...,d)\n        rms = torch.sqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n'
                 '        return (xf / rms).to(x.dtype) * self.weight')),
            RMS_REF),
    # ModernBlock
    # distinct modules (issue 52): one RMSNorm object under both names; the wiring test swaps in two of its own
    Variant('block_norm2_is_norm1', block(('self.norm2 = RMSNorm(d)', 'self.norm2 = self.norm1')), WIRING + SHAPES),
    Variant('block_post_norm', block((FIRST, 'x = self.norm1(x + self.attn(x, angles))'), (SECOND, 'x = self.norm2(x + self.mlp(x))')),
            WIRING),
    Variant('block_norms_swapped', block((FIRST, 'x = x + self.attn(self.norm2(x), angles)'), (SECOND, 'x = x + self.mlp(self.norm1(x))')),
            WIRING),
    Variant('block_angles_not_passed', block((FIRST, 'x = x + self.attn(self.norm1(x))')), WIRING),
    Variant('block_branches_in_parallel', block((FIRST, 'x = x + self.attn(self.norm1(x), angles) + self.mlp(self.norm2(x))'),
                                                (SECOND, 'pass')), WIRING),
    Variant('block_residual_on_the_normalised_stream', block((FIRST, 'x = self.norm1(x)\n        x = x + self.attn(x, angles)')), WIRING),
    # ModernGPT
    Variant('gpt_one_block_repeated', gpt(('nn.ModuleList([ModernBlock(d, n_head, n_kv_head, hidden) for _ in range(n_layer)])',
                                           'nn.ModuleList([ModernBlock(d, n_head, n_kv_head, hidden)] * n_layer)')), SHAPES),
    Variant('gpt_without_final_norm', gpt(('logits = self.lm_head(self.norm_f(x))', 'logits = self.lm_head(x)')), INIT),
    Variant('gpt_head_tied_to_the_embedding', gpt(('# untied', '# tied\n        self.lm_head.weight = self.token_embedding_table.weight')),
            SHAPES),
    Variant('gpt_final_layernorm', gpt(('self.norm_f, self.lm_head = RMSNorm(d),', 'self.norm_f, self.lm_head = LayerNorm(d),')), SHAPES),
    Variant('gpt_blocks_skipped', gpt(('            x = block(x, angles)  # (B,T,d)\n', '            pass\n')), INIT),
    Variant('gpt_angles_of_the_first_position_only', gpt((ANGLES, 'angles = rope_angles(torch.zeros(T, dtype=torch.long), self.head_size, self.rope_base)')),
            INIT),
    Variant('gpt_head_size_from_kv_heads', gpt(('self.head_size, self.rope_base = d // n_head, rope_base',
                                                'self.head_size, self.rope_base = d // n_kv_head, rope_base')),
            SHAPES + INIT + ('modern_gpt_is_causal',)),
    # kv_cache_bytes
    Variant('kv_cache_keys_only', kv((BYTES, 'return n_layer * n_kv_head * head_size * T * B * bytes_per_number')), KV),
    Variant('kv_cache_batch_ignored', kv((BYTES, 'return 2 * n_layer * n_kv_head * head_size * T * bytes_per_number')), KV),
    Variant('kv_cache_one_layer', kv((BYTES, 'return 2 * n_kv_head * head_size * T * B * bytes_per_number')), KV),
]

ALTERNATIVES = [
    Variant('rms_by_rsqrt', rms((RMS + '  # (...,1): one number per row\n        return x / rms * self.weight  # (...,d)',
                                 'return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight'))),
    Variant('rms_from_the_sum_of_squares', rms((RMS, 'rms = torch.sqrt((x * x).sum(dim=-1, keepdim=True) / x.shape[-1] + self.eps)'))),
    Variant('angles_in_float32', angles((THETA, 'theta = 1.0 / base ** (torch.arange(0, head_size, 2).float() / head_size)'),
                                       (OUTER, 'return torch.outer(positions.float(), theta)'))),
    Variant('rotary_pairs_of_neighbours', rotary((SPLIT, 'a, b = x[..., 0::2], x[..., 1::2]'),
                                                 (TURN, 'return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)'))),
    Variant('rotary_by_complex_numbers', rotary((SPLIT + '  # (...,T,hs/2) each: pair i is (a_i, b_i) = (x_i, x_{i + hs/2})\n'
                                                 '    cos, sin = angles.to(x.dtype).cos(), angles.to(x.dtype).sin()  # (T,hs/2) each\n'
                                                 '    ' + TURN + '  # (...,T,hs)',
                                                 'z = torch.view_as_complex(x.reshape(*x.shape[:-1], half, 2).contiguous())  # pair i: x_2i + i x_2i+1\n'
                                                 '    turn = torch.polar(torch.ones_like(angles), angles).to(z.dtype)  # e^(i angle)\n'
                                                 '    return torch.view_as_real(z * turn).flatten(-2).to(x.dtype)'))),
    Variant('rotary_by_rotate_half', rotary((TURN, 'cos2, sin2 = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)\n'
                                                   '    return x * cos2 + torch.cat([-b, a], dim=-1) * sin2'))),
    Variant('width_from_a_built_feedforward', swiglu((WIDTH, 'return round(sum(p.numel() for p in FeedForward(d).parameters()) / (3 * d))'))),
    Variant('silu_written_with_sigmoid', swiglu((FORWARD, 'g = self.w_gate(x)\n        return self.w_down(g * torch.sigmoid(g) * self.w_up(x))'))),
    Variant('kv_heads_by_expand', gqa((REPEAT, '''        k = k[:, :, None].expand(B, nkv, nh // nkv, T, hs).reshape(B, nh, T, hs)
        v = v[:, :, None].expand(B, nkv, nh // nkv, T, hs).reshape(B, nh, T, hs)'''))),
    Variant('kv_heads_by_index', gqa((REPEAT, '''        group = torch.arange(nh, device=x.device) // (nh // nkv)  # (nh,): the kv head of each query head
        k, v = k[:, group], v[:, group]  # (B,nh,T,hs) each'''))),
    Variant('kv_heads_refused_by_assert', gqa(('''        if n_head % n_kv_head:
            raise ValueError(f'n_kv_head = {n_kv_head} does not divide n_head = {n_head}')''',
                                              '        assert n_head % n_kv_head == 0, "n_kv_head must divide n_head"'))),
    Variant('block_with_named_stream', block((FIRST + '  # (B,T,d)\n        ' + SECOND + '  # (B,T,d)\n        return x',
                                              'h = x + self.attn(self.norm1(x), angles)\n        return h + self.mlp(self.norm2(h))'))),
    Variant('gpt_positions_counted_from_one', gpt((ANGLES, 'angles = rope_angles(torch.arange(1, T + 1, device=idx.device), self.head_size, self.rope_base)'))),
    Variant('kv_bytes_by_prod', kv((BYTES, 'return math.prod((2, n_layer, n_kv_head, head_size, T, B, bytes_per_number))'))),
]
