"""Step 4's bank: realistic student mistakes, each with the test cells meant to catch it, and correct alternatives.

Each variant is the perfect submission with a few edits (grade_id of a solution cell, old text, new text), made as a student
would make them. The kill-matrix test (tests/test_grading.py) and `make demo` autograde every one through nbgrader: a
mistake must lose points in every cell of `caught_by`, and an alternative must keep full marks.
"""

from typing import NamedTuple


class Variant(NamedTuple):
    student: str  # its id in the demo class and the kill matrix
    edits: tuple  # (grade_id of the solution cell, old text, new text), ...
    caught_by: tuple = ()  # grade_ids of the test cells that must lose points; empty for a correct alternative
    notebook: str = None  # None: the assignment's only notebook


SCALE = 'scores = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5'
MASK = "scores = scores.masked_fill(self.tril[:T, :T] == 0, float('-inf'))"
SOFTMAX = 'A = F.softmax(scores, dim=-1)'
MASK_THEN_SOFTMAX = f"""        if self.causal:
            {MASK}  # (B,T,T)
        {SOFTMAX}  # (B,T,T), each row sums to 1"""
BUFFER = "self.register_buffer('tril', torch.tril(torch.ones(T_max, T_max)))"
ONES = 'torch.tril(torch.ones(T_max, T_max))'
SDPA = ('head_matches_sdpa_reference',)


def head(*edits):
    return tuple(('head', old, new) for old, new in edits)


MUTANTS = [
    # Head: the scaling
    Variant('no_scaling', head((SCALE, 'scores = q @ k.transpose(-2, -1)')), SDPA),
    Variant('scale_by_d_k', head(('k.shape[-1] ** -0.5', 'k.shape[-1] ** -1')), SDPA),
    Variant('scale_by_model_width', head(('k.shape[-1] ** -0.5', 'C ** -0.5')), SDPA),
    # Head: the mask and the softmax
    Variant('mask_after_softmax_zeroing', head((MASK_THEN_SOFTMAX, f"""        {SOFTMAX}
        if self.causal:
            A = A * self.tril[:T, :T]""")), ('prop_3_1_rows_in_simplex',) + SDPA),
    Variant('mask_after_softmax_renormalised', head((MASK_THEN_SOFTMAX, f"""        {SOFTMAX}
        if self.causal:
            A = A * self.tril[:T, :T]
            A = A / A.sum(-1, keepdim=True)""")), SDPA),
    Variant('mask_with_zero_not_minus_inf', head((MASK, MASK.replace("float('-inf')", '0.0'))), ('prop_5_1_lower_triangular',)),
    Variant('mask_transposed', head(('self.tril[:T, :T] == 0', 'self.tril[:T, :T].T == 0')), ('prop_5_1_lower_triangular',)),
    Variant('diagonal_masked', head((ONES, 'torch.tril(torch.ones(T_max, T_max), diagonal=-1)')),
            ('prop_3_1_rows_in_simplex', 'cor_3_3_allowed_weights_positive')),
    Variant('softmax_over_wrong_axis', head((SOFTMAX, 'A = F.softmax(scores, dim=-2)')), ('prop_3_1_rows_in_simplex',)),
    Variant('mask_not_sliced_to_T', head(('self.tril[:T, :T] == 0', 'self.tril == 0')), SDPA),
    Variant('k_q_transposed', head(('q @ k.transpose(-2, -1)', 'k @ q.transpose(-2, -1)')), SDPA),
    Variant('returns_A_not_A_v', head(('out = A @ v', 'out = A')), SDPA),
    Variant('keys_as_values', head(('out = A @ v', 'out = A @ k')), SDPA),
    Variant('linear_with_bias', head(*((f'self.{m} = nn.Linear(d, head_size, bias=False)', f'self.{m} = nn.Linear(d, head_size)')
                                       for m in ('key', 'query', 'value'))), ('head_has_three_bias_free_maps',)),
    Variant('mask_as_parameter', head((BUFFER, 'self.tril = nn.Parameter(torch.tril(torch.ones(T_max, T_max)))')),
            ('head_mask_is_a_buffer', 'head_has_three_bias_free_maps')),
    Variant('mask_as_plain_attribute', head((BUFFER, 'self.tril = torch.tril(torch.ones(T_max, T_max))')),
            ('head_mask_is_a_buffer',)),
    Variant('causal_flag_ignored_always_mask', head(('if self.causal:', 'if True:')),
            ('thm_6_1_equivariant_in_X', 'thm_6_1_trap_positions_in_X')),
    Variant('causal_flag_ignored_never_mask', head(('if self.causal:', 'if False:')),
            ('prop_5_1_lower_triangular', 'prop_5_1_causal_by_perturbation', 'prop_5_1_causal_by_gradient')),
    Variant('unstable_hand_written_softmax', head((SOFTMAX, 'A = scores.exp() / scores.exp().sum(-1, keepdim=True)')), SDPA),
    Variant('stashed_A_not_detached', head(('self.A = A.detach()  #', 'self.A = A  #')), ('head_stashes_detached_weights',)),
    # Lemma 4.5
    Variant('lemma_scaled_by_d_k', (('score_stats', 'scaled = raw / d_k**0.5', 'scaled = raw / d_k'),),
            ('lemma_4_5_raw_std_is_sqrt_dk',)),
    Variant('lemma_one_draw', (('score_stats', 'q = torch.randn(n_draws, T, d_k)', 'q = torch.randn(1, T, d_k)'),
                               ('score_stats', 'k = torch.randn(n_draws, T, d_k)', 'k = torch.randn(1, T, d_k)')),
            ('lemma_4_5_raw_std_is_sqrt_dk',)),
    Variant('lemma_jacobian_without_outer_product',
            (('score_stats', 'torch.diag_embed(p) - p[..., :, None] * p[..., None, :]', 'torch.diag_embed(p)'),),
            ('lemma_4_5_unscaled_softmax_saturates',)),
    # Exercise 4
    Variant('ex4_right_way_masks_after', (('maskings', "return F.softmax(s.masked_fill(~tril, float('-inf')), dim=-1)",
                                           'return F.softmax(s, dim=-1) * tril'),), ('ex_4_mask_before_softmax',)),
    Variant('ex4_wrong_way_renormalised', (('maskings', 'return F.softmax(s, dim=-1) * torch.tril(torch.ones(T, T))',
                                            'w = F.softmax(s, dim=-1) * torch.tril(torch.ones(T, T))\n'
                                            '    return w / w.sum(-1, keepdim=True)'),), ('ex_4_zeroing_after_softmax_leaks',)),
    # 4.3: the trap, and its cousins
    Variant('trap_permutes_X_not_tokens', (('token_perm', 'a = head(embed(idx[:, perm]))', 'a = head(embed(idx)[:, perm, :])'),),
            ('cor_6_2_token_perm_with_positions_breaks',)),
    Variant('output_not_permuted', (('token_perm', 'b = head(embed(idx))[:, perm, :]', 'b = head(embed(idx))'),),
            ('thm_6_1_token_perm_without_positions',)),
    Variant('positions_ignored', (('token_perm', 'return x if pos is None else x + pos(torch.arange(T))[None]', 'return x'),),
            ('cor_6_2_token_perm_with_positions_breaks',)),
    # 4.5: the kernel
    Variant('kernel_wrong_sign', (('gaussian_scores', 'return -((i[:, None]', 'return ((i[:, None]'),),
            ('kernel_gaussian_weights',)),
    Variant('kernel_bandwidth_not_squared', (('gaussian_scores', '(2 * s**2)', '(2 * s)'),), ('kernel_gaussian_weights',)),
    Variant('kernel_missing_factor_two', (('gaussian_scores', '(2 * s**2)', '(s**2)'),), ('kernel_gaussian_weights',)),
    # Exercise 7
    Variant('rank_of_A_not_S', (('score_rank', 'matrix_rank(S)', 'matrix_rank(F.softmax(S, dim=-1))'),),
            ('ex_7_score_rank_at_most_head_size',)),
]

ALTERNATIVES = [
    Variant('alt_einsum', head((SCALE, "scores = torch.einsum('bqd,bkd->bqk', q, k) / k.shape[-1] ** 0.5"),
                               ('out = A @ v', "out = torch.einsum('bqk,bkd->bqd', A, v)"))),
    Variant('alt_fill_minus_1e9', head((MASK, MASK.replace("float('-inf')", '-1e9')))),
    Variant('alt_where_finfo_min',
            head((MASK, 'scores = torch.where(self.tril[:T, :T] == 0, torch.finfo(scores.dtype).min, scores)'))),
    Variant('alt_bool_mask_buffer', head((ONES, 'torch.tril(torch.ones(T_max, T_max, dtype=torch.bool))'),
                                         ('self.tril[:T, :T] == 0', '~self.tril[:T, :T]'))),
    Variant('alt_mT_and_sqrt', head((SCALE, 'scores = q @ k.mT / k.size(-1) ** 0.5'))),
    Variant('alt_stable_hand_written_softmax', head((SOFTMAX, 'e = (scores - scores.amax(-1, keepdim=True)).exp()\n'
                                                              '        A = e / e.sum(-1, keepdim=True)'))),
    Variant('alt_query_made_first', head(('        self.key = nn.Linear(d, head_size, bias=False)\n'
                                          '        self.query = nn.Linear(d, head_size, bias=False)\n',
                                          '        self.query = nn.Linear(d, head_size, bias=False)\n'
                                          '        self.key = nn.Linear(d, head_size, bias=False)\n'))),
    Variant('alt_kernel_by_cdist', (('gaussian_scores', 'return -((i[:, None] - i[None, :]) ** 2) / (2 * s**2)',
                                     'return -torch.cdist(i[:, None], i[:, None]) ** 2 / (2 * s**2)'),)),
    Variant('alt_rank_by_singular_values', (('score_rank', 'return int(torch.linalg.matrix_rank(S))',
                                             'sv = torch.linalg.svdvals(S)\n'
                                             '    return int((sv > sv[0] * 1e-5).sum())'),)),
]


# Optional, for the hostile corpus (tests/corpus.py): code that defines this step's names with every shape right and every
# number wrong. A hostile submission puts it after patching torch or silencing tracebacks: it must still score 0.
FAKE = '''
class Head(nn.Module):
    """A fake: every shape right, every number wrong."""

    def __init__(self, d, head_size, T_max, causal=True):
        super().__init__()
        self.key = nn.Linear(d, head_size, bias=False)
        self.query = nn.Linear(d, head_size, bias=False)
        self.value = nn.Linear(d, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(T_max, T_max)))

    def forward(self, x):
        B, T, C = x.shape
        self.A = (self.tril[:T, :T] / self.tril[:T, :T].sum(-1, keepdim=True)).expand(B, T, T)
        return torch.zeros(B, T, self.value.out_features)
'''
