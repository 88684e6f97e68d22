"""attnlab.attention against PyTorch's own implementations, and its documented edge cases."""
import math

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.attention import EncoderBlock, MultiHeadAttention, PositionalEncoding, sinusoidal_table

sdpa = attnlab.scaled_dot_product_attention


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape_q,shape_k,d_v", [
    ((5, 8), (7, 8), 3),                 # no batch
    ((2, 5, 8), (2, 7, 8), 4),           # batched
    ((2, 4, 6, 16), (2, 4, 6, 16), 16),  # (B, H, T, d): multi-head shapes
])
def test_matches_torch_without_mask(shape_q, shape_k, d_v):
    q, k = rand(*shape_q, seed=1), rand(*shape_k, seed=2)
    v = rand(*shape_k[:-1], d_v, seed=3)
    out, w = sdpa(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    assert w.shape == (*shape_q[:-1], shape_k[-2])


@pytest.mark.parametrize("mask_shape", [(6, 9), (2, 1, 6, 9), (2, 3, 1, 9)])
def test_matches_torch_with_bool_mask(mask_shape):
    q, k, v = rand(2, 3, 6, 8, seed=1), rand(2, 3, 9, 8, seed=2), rand(2, 3, 9, 5, seed=3)
    mask = rand(*mask_shape, seed=4) > 0
    mask[..., 0] = True  # keep at least one key per row: torch returns NaN for empty rows
    out, w = sdpa(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               atol=1e-5, rtol=1e-5)
    assert torch.all(w.masked_select(~mask.expand_as(w)) == 0.0)  # masked keys: exactly 0


def test_causal_mask_matches_torch_is_causal():
    q, k, v = rand(1, 2, 7, 4, seed=1), rand(1, 2, 7, 4, seed=2), rand(1, 2, 7, 4, seed=3)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    out, _ = sdpa(q, k, v, causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               atol=1e-5, rtol=1e-5)


def test_integer_mask_is_read_as_may_attend():
    q, k, v = rand(3, 4), rand(5, 4, seed=1), rand(5, 2, seed=2)
    as_int = torch.tensor([1, 0, 1, 1, 0])
    assert torch.equal(sdpa(q, k, v, as_int)[1], sdpa(q, k, v, as_int.bool())[1])


def test_weights_rows_sum_to_one():
    _, w = sdpa(rand(2, 5, 8), rand(2, 9, 8, seed=1), rand(2, 9, 3, seed=2))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 5))
    assert (w >= 0).all()


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = rand(3, 4), rand(5, 4, seed=1), rand(5, 2, seed=2)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to nothing
    q.requires_grad_(True)
    out, w = sdpa(q, k, v, mask)
    assert torch.equal(w[1], torch.zeros(5)) and torch.equal(out[1], torch.zeros(2))
    torch.testing.assert_close(w[[0, 2]].sum(-1), torch.ones(2))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_explicit_scale():
    q, k, v = rand(3, 16), rand(4, 16, seed=1), rand(4, 2, seed=2)
    _, w = sdpa(q, k, v, scale=1.0)
    torch.testing.assert_close(w, torch.softmax(q @ k.T, -1))
    _, w_default = sdpa(q, k, v)
    torch.testing.assert_close(w_default, torch.softmax(q @ k.T / math.sqrt(16), -1))


def copy_into_torch_mha(ours: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    ref = torch.nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight, ours.v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias, ours.v.bias]))
        ref.out_proj.weight.copy_(ours.out.weight)
        ref.out_proj.bias.copy_(ours.out.bias)
    return ref


def test_multihead_matches_torch():
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4).eval()
    ref = copy_into_torch_mha(ours).eval()
    x = rand(3, 7, 16, seed=5)
    out, w = ours(x)
    ref_out, ref_w = ref(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    assert w.shape == (3, 4, 7, 7)


def test_multihead_padding_mask_matches_torch():
    torch.manual_seed(0)
    ours = MultiHeadAttention(8, 2).eval()
    ref = copy_into_torch_mha(ours).eval()
    x = rand(2, 5, 8, seed=6)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)  # (B, T)
    out, w = ours(x, keep[:, None, None, :])
    ref_out, _ = ref(x, x, x, key_padding_mask=~keep)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert torch.all(w[0, :, :, 3:] == 0)  # padding is never attended


def test_self_attention_is_permutation_equivariant():
    torch.manual_seed(0)
    block = EncoderBlock(16, 4, 32).eval()
    x = rand(1, 6, 16, seed=7)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    y, _ = block(x)
    y_perm, _ = block(x[:, perm])
    torch.testing.assert_close(y_perm, y[:, perm], atol=1e-5, rtol=1e-5)


def test_encoder_block_matches_torch_post_norm_layer():
    torch.manual_seed(0)
    ours = EncoderBlock(16, 4, 32).eval()
    ref = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                           norm_first=False).eval()
    with torch.no_grad():
        ref.self_attn.load_state_dict(copy_into_torch_mha(ours.attn).state_dict())
        ref.linear1.load_state_dict(ours.ff[0].state_dict())
        ref.linear2.load_state_dict(ours.ff[2].state_dict())
        ref.norm1.load_state_dict(ours.norm1.state_dict())
        ref.norm2.load_state_dict(ours.norm2.state_dict())
    x = rand(2, 5, 16, seed=8)
    torch.testing.assert_close(ours(x)[0], ref(x), atol=1e-5, rtol=1e-5)


def test_positional_encodings():
    table = sinusoidal_table(50, 8)
    assert torch.allclose(table[0, 0::2], torch.zeros(4))
    assert torch.allclose(table[0, 1::2], torch.ones(4))
    assert math.isclose(table[3, 0].item(), math.sin(3.0), rel_tol=1e-6)
    assert math.isclose(table[3, 3].item(), math.cos(3.0 / 10000 ** (2 / 8)), rel_tol=1e-5)
    x = torch.zeros(2, 10, 8)
    torch.testing.assert_close(PositionalEncoding(8, 50)(x), table[:10].expand(2, 10, 8))
    learned = PositionalEncoding(8, 50, kind="learned")
    assert learned(x).shape == (2, 10, 8) and learned.table.requires_grad


@pytest.mark.parametrize("call,message", [
    (lambda: MultiHeadAttention(10, 3), "divisible by n_heads"),
    (lambda: MultiHeadAttention(0, 1), "d_model must be an int >= 1, got 0"),
    (lambda: EncoderBlock(8, 2, 16, activation="tanh"), "activation"),
    (lambda: PositionalEncoding(8, kind="rotary"), "kind"),
    (lambda: PositionalEncoding(8, max_len=4)(torch.zeros(1, 5, 8)), "max_len=4"),
    (lambda: sdpa(rand(3, 4), rand(5, 6), rand(5, 2)), "share the last dimension"),
    (lambda: sdpa(rand(3, 4), rand(5, 4), rand(6, 2)), "same number of keys"),
    (lambda: sdpa(rand(2, 3, 4), rand(3, 5, 4), rand(3, 5, 2)), "do not broadcast"),
    (lambda: sdpa(rand(3, 4), rand(5, 4), rand(5, 2), torch.ones(3, 4, dtype=torch.bool)),
     "does not broadcast to the scores"),
    (lambda: sdpa(rand(3, 4), rand(5, 4), rand(5, 2), torch.full((3, 5), float("-inf"))), "0/1"),
    (lambda: sdpa(rand(4), rand(5, 4), rand(5, 2)), "at least 2 dimensions"),
    (lambda: MultiHeadAttention(8, 2)(rand(2, 5, 6)), "d_model=8"),
])
def test_validation_errors_name_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_type_errors():
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        sdpa([[1.0]], rand(1, 1), rand(1, 1))
    with pytest.raises(TypeError, match="floating-point"):
        sdpa(torch.ones(2, 2, dtype=torch.long), rand(2, 2), rand(2, 2))
    with pytest.raises(TypeError, match="mask must be a torch.Tensor"):
        sdpa(rand(3, 4), rand(5, 4), rand(5, 2), [[True] * 5] * 3)
    with pytest.raises(TypeError, match="n_heads must be an int"):
        MultiHeadAttention(8, 2.0)
    with pytest.raises(TypeError, match="dropout must be a number"):
        EncoderBlock(8, 2, 16, dropout="0.1")
    with pytest.raises(ValueError, match="dropout must be a finite number >= 0.0 and < 1.0"):
        EncoderBlock(8, 2, 16, dropout=1.0)


@pytest.mark.parametrize("t_k", [1, 5, 15, 16, 40])
def test_softmax_both_paths_match_torch(t_k):
    from attnlab.attention import softmax

    scores = rand(2, 3, 4, t_k, seed=t_k) * 30  # large scores: the max must be subtracted
    torch.testing.assert_close(softmax(scores), torch.softmax(scores, -1), atol=1e-6, rtol=1e-5)
    scores.requires_grad_(True)
    softmax(scores).pow(2).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_softmax_threshold_is_the_reviews_tensor_width():
    from attnlab.attention import SHORT_ROW
    from attnlab.data import TENSOR_WIDTH

    assert TENSOR_WIDTH == SHORT_ROW  # one constant: the reviews are padded to the kernel's rows


# --- the causal mask, masked self-attention and cross-attention (notebook 07) ---------------

def test_causal_mask_is_true_on_and_below_the_diagonal():
    mask = attnlab.causal_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    assert mask.tolist() == [[True, False, False, False], [True, True, False, False],
                             [True, True, True, False], [True, True, True, True]]
    assert attnlab.causal_mask(1).tolist() == [[True]]
    with pytest.raises(ValueError, match="T must be an int >= 1, got 0"):
        attnlab.causal_mask(0)
    with pytest.raises(TypeError, match="T must be an int"):
        attnlab.causal_mask(4.0)


def test_causal_self_attention_matches_torch_attn_mask():
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4).eval()
    ref = copy_into_torch_mha(ours).eval()
    x = rand(3, 7, 16, seed=9)
    mask = attnlab.causal_mask(7)
    out, w = ours(x, mask)
    ref_out, ref_w = ref(x, x, x, attn_mask=~mask, average_attn_weights=False)  # True = blocked
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    assert torch.all(w[..., ~mask] == 0.0)  # every future key: exactly 0, not just small


def test_cross_attention_matches_torch_with_context_as_keys_and_values():
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4).eval()
    ref = copy_into_torch_mha(ours).eval()
    x, context = rand(2, 5, 16, seed=10), rand(2, 9, 16, seed=11)  # T = 5 queries, S = 9 keys
    out, w = ours(x, context=context)
    ref_out, ref_w = ref(x, context, context, average_attn_weights=False)
    assert out.shape == (2, 5, 16) and w.shape == (2, 4, 5, 9)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    keep = torch.tensor([[True] * 6 + [False] * 3, [True] * 9])  # (B, S): padded context
    out, w = ours(x, keep[:, None, None, :], context=context)
    ref_out, _ = ref(x, context, context, key_padding_mask=~keep)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert torch.all(w[0, ..., 6:] == 0.0)


def test_outputs_before_t_do_not_depend_on_tokens_from_t_on():
    torch.manual_seed(0)
    block = EncoderBlock(16, 4, 32).eval()
    x = rand(2, 8, 16, seed=12)
    for t in range(8):
        changed = x.clone()
        changed[:, t:] = rand(2, 8 - t, 16, seed=100 + t)  # every token from t on is new
        y, _ = block(x, attnlab.causal_mask(8))
        y_changed, _ = block(changed, attnlab.causal_mask(8))
        assert torch.equal(y[:, :t], y_changed[:, :t])  # bit-identical, not merely close
        assert not torch.allclose(y[:, t:], y_changed[:, t:])


@pytest.mark.parametrize("call,shapes", [
    (lambda m: m(rand(2, 6, 16), context=rand(2, 5, 8)),
     ["(B=2, S, d_model=16)", "(2, 6, 16)", "(2, 5, 8)"]),
    (lambda m: m(rand(2, 6, 16), context=rand(3, 5, 16)), ["(B=2, S, d_model=16)", "(3, 5, 16)"]),
    (lambda m: m(rand(2, 6, 16), context=rand(5, 16)), ["(5, 16)"]),
    (lambda m: m(rand(2, 6, 16), attnlab.causal_mask(5)), ["(5, 5)", "(2, 4, 6, 6)"]),
    (lambda m: m(rand(2, 6, 16), attnlab.causal_mask(6), context=rand(2, 4, 16)),
     ["(6, 6)", "(2, 4, 6, 4)"]),
])
def test_wrong_context_or_mask_shape_names_both_shapes(call, shapes):
    with pytest.raises(ValueError) as error:
        call(MultiHeadAttention(16, 4))
    for shape in shapes:
        assert shape in str(error.value), str(error.value)


def test_context_must_be_a_float_tensor():
    with pytest.raises(TypeError, match="context must be a torch.Tensor"):
        MultiHeadAttention(8, 2)(rand(1, 3, 8), context=[[0.0] * 8])
