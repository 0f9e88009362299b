"""Step 4's bank: realistic mistakes, each with the test cells meant to catch it, and correct alternatives
(course.authoring.demo.Variant).

Every graded function has its own mistakes: Head (the head cell), score_stats, causal_softmax and softmax_then_zero (the
maskings cell), token_perm_gap, gaussian_scores and score_rank. They are what students who half-remember a definition
write: the wrong std, the wrong axis, the wrong norm, a mask off by one, a float32 idiom on a float64 input, a shortcut
that never computes what it names.
"""

from course.authoring.demo import Variant, in_cell

SCALE = 'scores = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5'
MASK = "scores = scores.masked_fill(self.tril[:T, :T] == 0, float('-inf'))"
SOFTMAX = 'A = F.softmax(scores, dim=-1)'
MASK_THEN_SOFTMAX = f"""        if self.causal:
            {MASK}  # (B,T,T)
        {SOFTMAX}  # (B,T,T), each row sums to 1"""
BUFFER = "self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))"
ONES = 'torch.tril(torch.ones(block_size, block_size))'
SDPA = ('head_matches_sdpa_reference',)
MAPS = tuple(f'self.{m} = nn.Linear(d, head_size, bias=False)' for m in ('key', 'query', 'value'))

STDS = "stats = {'raw_std': raw.std().item(), 'scaled_std': scaled.std().item()}"
MAX_WT = "stats[f'max_wt_{name}'] = p.amax(dim=-1).mean().item()"
JAC = 'jac = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]'
JAC_NORM = "stats[f'jac_{name}'] = torch.linalg.matrix_norm(jac).mean().item()"
P = 'p = F.softmax(s, dim=-1)'
SMALL, STD, SAT = 'score_stats_small_case', 'score_std_is_sqrt_dk', 'unscaled_softmax_saturates'

TRIL_BOOL = 'tril = torch.tril(torch.ones(T, T, dtype=torch.bool))'
RIGHT = "return F.softmax(s.masked_fill(~tril, float('-inf')), dim=-1)"
WRONG = 'return F.softmax(s, dim=-1) * torch.tril(torch.ones(T, T))'
BEFORE, LEAKS = ('causal_softmax_masks_before',), ('softmax_then_zero_leaks',)

KERNEL = 'return -((i[:, None] - i[None, :]) ** 2) / (2 * s**2)'
INF, GAUSS = 'kernel_running_mean_at_infinite_bandwidth', 'kernel_gaussian_weights'

RANK = 'return int(torch.linalg.matrix_rank(S, rtol=1e-5))'
GENERIC, DEFICIENT = 'score_rank_generic_input', 'score_rank_rank_deficient'


head = in_cell('head')
stats = in_cell('score_stats')
maskings = in_cell('maskings')
perm = in_cell('token_perm')
kernel = in_cell('gaussian_scores')
rank = in_cell('score_rank')


MUTANTS = [
    # Head: the scaling
    Variant('no_scaling', head((SCALE, 'scores = q @ k.transpose(-2, -1)')), SDPA),
    Variant('scale_by_d_k', head(('k.shape[-1] ** -0.5', 'k.shape[-1] ** -1')), SDPA),
    Variant('scale_by_model_width', head(('k.shape[-1] ** -0.5', 'C ** -0.5')), SDPA),
    # Head: the mask and the softmax
    Variant('mask_after_softmax_zeroing', head((MASK_THEN_SOFTMAX, f"""        {SOFTMAX}
        if self.causal:
            A = A * self.tril[:T, :T]""")), ('rows_in_simplex', 'output_is_convex_combination') + SDPA),
    Variant('mask_after_softmax_renormalised', head((MASK_THEN_SOFTMAX, f"""        {SOFTMAX}
        if self.causal:
            A = A * self.tril[:T, :T]
            A = A / A.sum(-1, keepdim=True)""")), SDPA),
    Variant('mask_with_zero_not_minus_inf', head((MASK, MASK.replace("float('-inf')", '0.0'))), ('no_weight_on_the_future',)),
    Variant('tril_of_the_scores', head((MASK, 'scores = torch.tril(scores)')), ('no_weight_on_the_future',)),
    Variant('mask_transposed', head(('self.tril[:T, :T] == 0', 'self.tril[:T, :T].T == 0')), ('no_weight_on_the_future',)),
    Variant('mask_condition_inverted', head(('self.tril[:T, :T] == 0', 'self.tril[:T, :T] == 1')),
            ('rows_in_simplex', 'no_weight_on_the_future')),
    Variant('mask_built_with_triu', head((ONES, 'torch.triu(torch.ones(block_size, block_size))')),
            ('head_mask_is_a_buffer', 'no_weight_on_the_future')),
    Variant('mask_off_by_one_above', head((ONES, 'torch.tril(torch.ones(block_size, block_size), diagonal=1)')),
            ('no_weight_on_the_future', 'causal_by_perturbation', 'causal_by_gradient')),
    Variant('diagonal_masked', head((ONES, 'torch.tril(torch.ones(block_size, block_size), diagonal=-1)')),
            ('rows_in_simplex', 'allowed_weights_positive')),
    Variant('softmax_over_wrong_axis', head((SOFTMAX, 'A = F.softmax(scores, dim=-2)')), ('rows_in_simplex',)),
    Variant('softmax_cast_to_float32', head((SOFTMAX, 'A = F.softmax(scores, dim=-1, dtype=torch.float32)')), SDPA),
    Variant('mask_not_sliced_to_T', head(('self.tril[:T, :T] == 0', 'self.tril == 0')), SDPA),
    Variant('k_q_transposed', head(('q @ k.transpose(-2, -1)', 'k @ q.transpose(-2, -1)')), SDPA),
    Variant('returns_A_not_A_v', head(('out = A @ v', 'out = A')), SDPA),
    Variant('keys_as_values', head(('out = A @ v', 'out = A @ k')), SDPA + ('output_is_convex_combination',)),
    Variant('linear_with_bias', head(*((m, m.replace(', bias=False', '')) for m in MAPS)), ('head_has_three_bias_free_maps',)),
    Variant('linear_in_and_out_swapped', head(*((m, m.replace('(d, head_size', '(head_size, d')) for m in MAPS)),
            ('head_has_three_bias_free_maps',) + SDPA),
    Variant('mask_as_parameter', head((BUFFER, 'self.tril = nn.Parameter(torch.tril(torch.ones(block_size, block_size)))')),
            ('head_mask_is_a_buffer', 'head_has_three_bias_free_maps')),
    Variant('mask_as_plain_attribute', head((BUFFER, 'self.tril = torch.tril(torch.ones(block_size, block_size))')),
            ('head_mask_is_a_buffer',)),
    Variant('mask_buffer_not_persistent', head((BUFFER, BUFFER[:-1] + ', persistent=False)')), ('head_mask_is_a_buffer',)),
    Variant('causal_flag_ignored_always_mask', head(('if self.causal:', 'if True:')),
            ('equivariant_in_X', 'still_equivariant_with_positions_in_X')),
    Variant('causal_flag_ignored_never_mask', head(('if self.causal:', 'if False:')),
            ('no_weight_on_the_future', 'causal_by_perturbation', 'causal_by_gradient', 'causal_head_not_equivariant')),
    Variant('unstable_hand_written_softmax', head((SOFTMAX, 'A = scores.exp() / scores.exp().sum(-1, keepdim=True)')), SDPA),
    Variant('stashed_A_not_detached', head(('self.A = A.detach()  #', 'self.A = A  #')), ('head_stashes_detached_weights',)),
    Variant('stashes_scores_not_weights', head(('self.A = A.detach()  #', 'self.A = scores.detach()  #')),
            ('head_stashes_detached_weights', 'rows_in_simplex')),

    # score_stats: which std
    Variant('stats_population_std', stats((STDS, "stats = {'raw_std': raw.std(unbiased=False).item(), "
                                                 "'scaled_std': scaled.std(unbiased=False).item()}")), (SMALL,)),
    Variant('stats_std_of_each_row_averaged', stats((STDS, "stats = {'raw_std': raw.std(-1).mean().item(), "
                                                           "'scaled_std': scaled.std(-1).mean().item()}")), (SMALL, STD)),
    Variant('stats_variance_not_std', stats((STDS, "stats = {'raw_std': raw.var().item(), 'scaled_std': scaled.var().item()}")),
            (SMALL, STD)),
    Variant('stats_raw_and_scaled_swapped', stats((STDS, "stats = {'raw_std': scaled.std().item(), "
                                                         "'scaled_std': raw.std().item()}")), (SMALL, STD)),
    Variant('stats_returns_tensors', stats((STDS, "stats = {'raw_std': raw.std(), 'scaled_std': scaled.std()}")), (SMALL,)),
    # score_stats: the scaling
    Variant('stats_scaled_by_d_k', stats(('scaled = raw / d_k**0.5', 'scaled = raw / d_k')), (SMALL, STD)),
    Variant('stats_d_k_read_from_the_T_axis', stats(('d_k = q.shape[-1]', 'd_k = q.shape[1]')), (SMALL, STD)),
    # score_stats: which softmax, which max
    Variant('stats_max_over_the_wrong_axis', stats((MAX_WT, MAX_WT.replace('amax(dim=-1)', 'amax(dim=-2)'))), (SMALL, SAT)),
    Variant('stats_softmax_over_the_queries', stats((P, 'p = F.softmax(s, dim=-2)')), (SMALL, SAT)),
    Variant('stats_causal_mask_in_the_softmax',
            stats((P, "p = F.softmax(s.masked_fill(torch.ones(s.shape[-1], s.shape[-1]).triu(1).bool(), float('-inf')), dim=-1)")),
            (SMALL, SAT)),
    Variant('stats_softmax_over_the_whole_matrix', stats((P, 'p = F.softmax(s.flatten(-2), dim=-1).view_as(s)')), (SMALL, SAT)),
    Variant('stats_global_max_not_mean_of_row_maxima', stats((MAX_WT, "stats[f'max_wt_{name}'] = p.max().item()")), (SMALL, SAT)),
    Variant('stats_max_of_the_scores_not_weights', stats((MAX_WT, MAX_WT.replace('p.amax', 's.amax'))), (SMALL, SAT)),
    Variant('stats_mean_weight_not_max', stats((MAX_WT, "stats[f'max_wt_{name}'] = p.mean().item()")), (SMALL, SAT)),
    # score_stats: which Jacobian, which norm
    Variant('jac_without_outer_product', stats((JAC, 'jac = torch.diag_embed(p)')), (SMALL, SAT)),
    Variant('jac_plus_outer_product', stats((JAC, JAC.replace(' - ', ' + '))), (SMALL, SAT)),
    Variant('jac_diagonal_only', stats((JAC, 'jac = torch.diag_embed(p * (1 - p))')), (SMALL, SAT)),
    Variant('jac_spectral_norm', stats((JAC_NORM, JAC_NORM.replace('matrix_norm(jac)', 'matrix_norm(jac, ord=2)'))), (SMALL, SAT)),
    Variant('jac_nuclear_norm', stats((JAC_NORM, JAC_NORM.replace('matrix_norm(jac)', "matrix_norm(jac, ord='nuc')"))),
            (SMALL, SAT)),
    Variant('jac_norm_of_all_rows_at_once', stats((JAC_NORM, "stats[f'jac_{name}'] = torch.linalg.norm(jac).item()")),
            (SMALL, SAT)),
    Variant('jac_squared_frobenius', stats((JAC_NORM, "stats[f'jac_{name}'] = jac.pow(2).sum((-2, -1)).mean().item()")),
            (SMALL, SAT)),
    Variant('jac_entrywise_abs_sum', stats((JAC_NORM, "stats[f'jac_{name}'] = jac.abs().sum((-2, -1)).mean().item()")),
            (SMALL, SAT)),
    Variant('jac_chain_rule_through_the_scaling',
            stats((JAC_NORM, JAC_NORM.replace('.mean().item()', ".mean().item() / (d_k**0.5 if name == 'scaled' else 1)"))),
            (SMALL, SAT)),

    # causal_softmax
    Variant('ex4_right_way_masks_after', maskings((RIGHT, 'return F.softmax(s, dim=-1) * tril')), BEFORE),
    Variant('causal_fill_with_zero', maskings((RIGHT, 'return F.softmax(s.masked_fill(~tril, 0.0), dim=-1)')), BEFORE),
    Variant('causal_mask_transposed', maskings((RIGHT, RIGHT.replace('~tril', '~tril.T'))), BEFORE),
    Variant('causal_mask_off_by_one', maskings((TRIL_BOOL, TRIL_BOOL[:-1] + ', diagonal=1)')), BEFORE),
    Variant('causal_diagonal_masked', maskings((TRIL_BOOL, TRIL_BOOL[:-1] + ', diagonal=-1)')), BEFORE),
    Variant('causal_softmax_over_queries', maskings((RIGHT, RIGHT.replace('dim=-1', 'dim=-2'))), BEFORE),
    Variant('causal_softmax_over_axis_2', maskings((RIGHT, RIGHT.replace('dim=-1', 'dim=2'))), BEFORE),
    Variant('causal_zero_then_renormalise', maskings((RIGHT, 'w = F.softmax(s, dim=-1) * tril\n'
                                                             '    return w / w.sum(-1, keepdim=True)')), BEFORE),
    Variant('causal_unstable_exp', maskings((RIGHT, 'e = s.exp().masked_fill(~tril, 0.0)\n'
                                                    '    return e / e.sum(-1, keepdim=True)')), BEFORE),
    Variant('causal_softmax_cast_to_float32', maskings((RIGHT, RIGHT.replace('dim=-1)', 'dim=-1, dtype=torch.float32)'))), BEFORE),
    Variant('causal_mask_from_fixed_shape', maskings((TRIL_BOOL, 'tril = torch.tril(torch.ones(6, 6, dtype=torch.bool))')), BEFORE),
    # softmax_then_zero
    Variant('ex4_wrong_way_renormalised', maskings((WRONG, 'w = F.softmax(s, dim=-1) * torch.tril(torch.ones(T, T))\n'
                                                           '    return w / w.sum(-1, keepdim=True)')), LEAKS),
    Variant('zero_way_masks_before', maskings((WRONG, "return F.softmax(s.masked_fill(torch.ones(T, T).triu(1).bool(), "
                                                      "float('-inf')), dim=-1)")), LEAKS),
    Variant('zero_way_zeroes_the_past', maskings((WRONG, WRONG.replace('torch.tril', 'torch.triu'))), LEAKS),
    Variant('zero_way_zeroes_the_scores', maskings((WRONG, 'return F.softmax(s * torch.tril(torch.ones(T, T)), dim=-1)')), LEAKS),
    Variant('zero_way_diagonal_zeroed', maskings((WRONG, WRONG.replace('torch.ones(T, T))', 'torch.ones(T, T), diagonal=-1)'))),
            LEAKS),
    Variant('zero_way_softmax_over_queries', maskings((WRONG, WRONG.replace('dim=-1', 'dim=-2'))), LEAKS),
    Variant('zero_way_softmax_cast_to_float32', maskings((WRONG, WRONG.replace('dim=-1)', 'dim=-1, dtype=torch.float32)'))),
            LEAKS),

    # token_perm_gap: the trap, and its cousins
    Variant('trap_permutes_X_not_tokens', perm(('a = head(embed(idx[:, perm]))', 'a = head(embed(idx)[:, perm, :])')),
            ('token_perm_with_positions_breaks',)),
    Variant('output_not_permuted', perm(('b = head(embed(idx))[:, perm, :]', 'b = head(embed(idx))')),
            ('token_perm_without_positions',)),
    Variant('output_permuted_by_the_inverse', perm(('b = head(embed(idx))[:, perm, :]', 'b = head(embed(idx))[:, perm.argsort(), :]')),
            ('token_perm_without_positions',)),
    Variant('output_permuted_on_the_batch_axis', perm(('b = head(embed(idx))[:, perm, :]', 'b = head(embed(idx))[perm]')),
            ('token_perm_without_positions',)),
    Variant('positions_ignored', perm(('return x if pos is None else x + pos(torch.arange(T))[None]', 'return x')),
            ('token_perm_with_positions_breaks',)),
    Variant('positions_travel_with_the_tokens',
            perm(('a = head(embed(idx[:, perm]))',
                  'a = head(tok(idx[:, perm]) + (0 if pos is None else pos(perm)[None]))')),
            ('token_perm_with_positions_breaks',)),
    Variant('gap_is_a_tensor', perm(('return (a - b).abs().max().item()', 'return (a - b).abs().max()')),
            ('token_perm_without_positions',)),
    Variant('gap_mean_not_max', perm(('return (a - b).abs().max().item()', 'return (a - b).abs().mean().item()')),
            ('token_perm_with_positions_breaks',)),
    Variant('gap_squared', perm(('return (a - b).abs().max().item()', 'return (a - b).pow(2).max().item()')),
            ('token_perm_with_positions_breaks',)),
    Variant('gap_frobenius_norm', perm(('return (a - b).abs().max().item()', 'return torch.linalg.norm(a - b).item()')),
            ('token_perm_with_positions_breaks',)),

    # gaussian_scores: the kernel
    Variant('kernel_wrong_sign', kernel(('return -((i[:, None]', 'return ((i[:, None]')), (GAUSS,)),
    Variant('kernel_bandwidth_not_squared', kernel(('(2 * s**2)', '(2 * s)')), (GAUSS,)),
    Variant('kernel_missing_factor_two', kernel(('(2 * s**2)', '(s**2)')), (GAUSS,)),
    Variant('kernel_operator_precedence', kernel((KERNEL, 'return -((i[:, None] - i[None, :]) ** 2) / 2 * s**2')), (INF, GAUSS)),
    Variant('kernel_square_only_the_second_position', kernel((KERNEL, 'return -(i[:, None] - i[None, :] ** 2) / (2 * s**2)')),
            (GAUSS,)),
    Variant('kernel_absolute_distance', kernel((KERNEL, 'return -((i[:, None] - i[None, :]).abs()) / (2 * s**2)')), (GAUSS,)),
    Variant('kernel_returns_the_weights', kernel((KERNEL, 'return F.softmax(-((i[:, None] - i[None, :]) ** 2) / (2 * s**2), dim=-1)')),
            (INF, GAUSS)),
    Variant('kernel_masks_the_future', kernel((KERNEL, "S = -((i[:, None] - i[None, :]) ** 2) / (2 * s**2)\n"
                                                       "    return S.masked_fill(torch.ones(T, T).triu(1).bool(), float('-inf'))")),
            (INF, GAUSS)),

    # score_rank
    Variant('rank_of_A_not_S', rank(('matrix_rank(S, rtol=1e-5)', 'matrix_rank(F.softmax(S, dim=-1), rtol=1e-5)')), (GENERIC,)),
    Variant('rank_never_computed', rank((RANK, 'return min(head.key.out_features, x.shape[1])')), (DEFICIENT,)),
    Variant('rank_of_the_masked_scores', rank((RANK, 'return int(torch.linalg.matrix_rank(S * torch.tril(torch.ones_like(S))))')),
            (GENERIC,)),
    Variant('rank_of_q_only', rank((RANK, 'return int(torch.linalg.matrix_rank(q))')), (DEFICIENT,)),
    Variant('rank_of_k_only', rank((RANK, 'return int(torch.linalg.matrix_rank(k))')), (DEFICIENT,)),
    Variant('rank_min_of_q_and_k', rank((RANK, 'return min(int(torch.linalg.matrix_rank(q)), int(torch.linalg.matrix_rank(k)))')),
            (DEFICIENT,)),
    Variant('rank_of_q_and_k_stacked', rank((RANK, 'return int(torch.linalg.matrix_rank(torch.cat([q, k])))')), (GENERIC, DEFICIENT)),
    Variant('rank_of_x', rank((RANK, 'return int(torch.linalg.matrix_rank(x[0]))')), (GENERIC,)),
    Variant('rank_with_an_absolute_threshold', rank((RANK, 'return int((torch.linalg.svdvals(S) > 1e-10).sum())')), (DEFICIENT,)),
    Variant('rank_as_if_S_were_symmetric', rank((RANK, 'return int(torch.linalg.matrix_rank(S, hermitian=True))')),
            (GENERIC, DEFICIENT)),
    Variant('rank_returns_a_tensor', rank((RANK, 'return torch.linalg.matrix_rank(S)')), (GENERIC,)),
    # the upcast the notebook uses elsewhere, with float64's default tolerance: float32's rounding noise in S counts
    Variant('rank_of_upcast_scores_at_float64_tolerance', rank((RANK, 'return int(torch.linalg.matrix_rank(S.double()))')),
            (GENERIC, DEFICIENT)),
    # q and k already carry float32's rounding: a float64 product of them, at float64's default tolerance, counts it too
    Variant('rank_of_float64_product_at_float64_tolerance',
            rank(('S = q @ k.T / k.shape[-1] ** 0.5', 'S = q.double() @ k.double().T / k.shape[-1] ** 0.5'),
                 (RANK, 'return int(torch.linalg.matrix_rank(S))')), (GENERIC, DEFICIENT)),
    Variant('rank_uses_the_value_map', rank(('q, k = head.query(x)[0], head.key(x)[0]', 'q, k = head.query(x)[0], head.value(x)[0]')),
            (DEFICIENT,)),
]

ALTERNATIVES = [
    # Head
    Variant('alt_einsum', head((SCALE, "scores = torch.einsum('bqd,bkd->bqk', q, k) / k.shape[-1] ** 0.5"),
                               ('out = A @ v', "out = torch.einsum('bqk,bkd->bqd', A, v)"))),
    Variant('alt_fill_minus_1e9', head((MASK, MASK.replace("float('-inf')", '-1e9')))),
    Variant('alt_where_finfo_min',
            head((MASK, 'scores = torch.where(self.tril[:T, :T] == 0, torch.finfo(scores.dtype).min, scores)'))),
    Variant('alt_bool_mask_buffer', head((ONES, 'torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))'),
                                         ('self.tril[:T, :T] == 0', '~self.tril[:T, :T]'))),
    Variant('alt_mT_and_sqrt', head((SCALE, 'scores = q @ k.mT / k.size(-1) ** 0.5'))),
    Variant('alt_scale_after_the_mask', head((SCALE, 'scores = q @ k.transpose(-2, -1)'),
                                             (SOFTMAX, 'A = F.softmax(scores / math.sqrt(k.shape[-1]), dim=-1)'))),
    Variant('alt_stable_hand_written_softmax', head((SOFTMAX, 'e = (scores - scores.amax(-1, keepdim=True)).exp()\n'
                                                              '        A = e / e.sum(-1, keepdim=True)'))),
    Variant('alt_query_made_first', head(('        self.key = nn.Linear(d, head_size, bias=False)\n'
                                          '        self.query = nn.Linear(d, head_size, bias=False)\n',
                                          '        self.query = nn.Linear(d, head_size, bias=False)\n'
                                          '        self.key = nn.Linear(d, head_size, bias=False)\n'))),
    # score_stats
    Variant('alt_stats_einsum_and_math_sqrt', stats(('raw = q @ k.transpose(-2, -1)', "raw = torch.einsum('ntd,nsd->nts', q, k)"),
                                                    ('scaled = raw / d_k**0.5', 'scaled = raw / math.sqrt(d_k)'))),
    Variant('alt_stats_std_by_hand', stats((STDS, "sd = lambda t: (((t - t.mean()) ** 2).sum() / (t.numel() - 1)).sqrt().item()\n"
                                                  "    stats = {'raw_std': sd(raw), 'scaled_std': sd(scaled)}"))),
    Variant('alt_stats_in_float64', stats(('raw = q @ k.transpose(-2, -1)', 'raw = q.double() @ k.double().transpose(-2, -1)'))),
    Variant('alt_stats_scale_q_and_k', stats(('scaled = raw / d_k**0.5',
                                              'scaled = (q / d_k**0.25) @ (k / d_k**0.25).transpose(-2, -1)'))),
    Variant('alt_stats_max_values', stats((MAX_WT, "stats[f'max_wt_{name}'] = p.max(dim=-1).values.mean().item()"))),
    Variant('alt_jac_frobenius_by_dims', stats((JAC_NORM, "stats[f'jac_{name}'] = torch.linalg.norm(jac, dim=(-2, -1)).mean().item()"))),
    Variant('alt_jac_closed_form', stats((JAC, 'p2, p3 = (p**2).sum(-1), (p**3).sum(-1)  # |diag(p) - p p^T|_F^2 = p2 - 2 p3 + p2^2'),
                                         (JAC_NORM, "stats[f'jac_{name}'] = (p2 - 2 * p3 + p2**2).clamp(min=0).sqrt().mean().item()"))),
    # causal_softmax and softmax_then_zero
    Variant('alt_causal_log_of_the_mask', maskings((RIGHT, 'return F.softmax(s + torch.log(tril.to(s.dtype)), dim=-1)'))),
    Variant('alt_causal_where', maskings((RIGHT, "return F.softmax(torch.where(tril, s, float('-inf')), dim=-1)"))),
    Variant('alt_causal_minus_1e9', maskings((RIGHT, 'return F.softmax(s.masked_fill(~tril, -1e9), dim=-1)'))),
    Variant('alt_causal_triu_mask', maskings((RIGHT, "return F.softmax(s.masked_fill(tril.logical_not(), -math.inf), dim=-1)"))),
    Variant('alt_zero_way_by_tril_method', maskings((WRONG, 'return F.softmax(s, dim=-1).tril()'))),
    Variant('alt_zero_way_by_masked_fill', maskings((WRONG, 'return F.softmax(s, dim=-1).masked_fill(torch.ones(T, T).triu(1).bool(), 0.0)'))),
    # token_perm_gap
    Variant('alt_perm_pos_weight_and_index_select',
            perm(('return x if pos is None else x + pos(torch.arange(T))[None]', 'return x if pos is None else x + pos.weight[:T]'),
                 ('b = head(embed(idx))[:, perm, :]', 'b = head(embed(idx)).index_select(1, perm)'))),
    Variant('alt_perm_float_of_max', perm(('return (a - b).abs().max().item()', 'return float(torch.max(torch.abs(a - b)))'))),
    # gaussian_scores
    Variant('alt_kernel_by_cdist', kernel((KERNEL, 'return -torch.cdist(i[:, None], i[:, None]) ** 2 / (2 * s**2)'))),
    Variant('alt_kernel_half_square_of_ratio', kernel((KERNEL, 'return -0.5 * ((i[:, None] - i[None, :]) / s) ** 2'))),
    Variant('alt_kernel_integer_positions', kernel(('i = torch.arange(T, dtype=torch.float32)', 'i = torch.arange(T)'))),
    # score_rank
    Variant('alt_rank_by_singular_values', rank((RANK, 'sv = torch.linalg.svdvals(S)\n'
                                                       '    return int((sv > sv[0] * 1e-5).sum())'))),
    Variant('alt_rank_float32_default_tolerance', rank((RANK, 'return int(torch.linalg.matrix_rank(S))'))),
    Variant('alt_rank_upcast_with_stated_rtol', rank((RANK, 'return int(torch.linalg.matrix_rank(S.double(), rtol=1e-4))'))),
    Variant('alt_rank_unscaled_with_item', rank(('S = q @ k.T / k.shape[-1] ** 0.5', 'S = q @ k.T  # the scale does not change the rank'),
                                                (RANK, 'return torch.linalg.matrix_rank(S).item()'))),
]


# Optional, for the hostile corpus (tests/support/corpus.py): code that defines this step's names with every shape right and every
# number wrong. A hostile submission puts it after patching torch or silencing tracebacks: it must still score 0.
FAKE = '''
class Head(nn.Module):
    """A fake: every shape right, every number wrong."""

    def __init__(self, d, head_size, block_size, causal=True):
        super().__init__()
        self.key = nn.Linear(d, head_size, bias=False)
        self.query = nn.Linear(d, head_size, bias=False)
        self.value = nn.Linear(d, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        self.A = (self.tril[:T, :T] / self.tril[:T, :T].sum(-1, keepdim=True)).expand(B, T, T)
        return torch.zeros(B, T, self.value.out_features)
'''

# issue 52, the dtypes a contract states: score_stats computes in the dtype of q and k, gaussian_scores returns float32
MUTANTS += [
    Variant('score_stats_in_float32', stats(('    d_k = q.shape[-1]\n', '    q, k = q.float(), k.float()  # float32 throughout\n'
                                                                      '    d_k = q.shape[-1]\n')), ('score_stats_small_case',)),
    Variant('gaussian_scores_in_float64', kernel(('i = torch.arange(T, dtype=torch.float32)',
                                                  'i = torch.arange(T, dtype=torch.float64)  # exact squares')),
            ('kernel_running_mean_at_infinite_bandwidth',)),
]
ALTERNATIVES += [
    Variant('alt_gaussian_scores_from_int_positions', kernel(('i = torch.arange(T, dtype=torch.float32)', 'i = torch.arange(T)'))),
]
