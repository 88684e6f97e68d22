"""attnlab.core.attention against PyTorch's own implementations (attention, multi-head,
grouped-query), rotary positions, the head split, the uniform-attention ablation, and the documented
edge cases."""
import math
import re

import pytest
import torch
import torch.nn.functional as F
from helpers import copy_into_torch_mha, raises_each, rand

import attnlab
from attnlab.core import hooks
from attnlab.core.attention import MultiHeadAttention, merge_heads, split_heads
from attnlab.lessons import cost

sdpa = attnlab.scaled_dot_product_attention


def test_matches_torch_with_and_without_batch_and_head_dimensions():
    for shape_q, shape_k, d_v in [
        ((5, 8), (7, 8), 3),                 # no batch
        ((2, 5, 8), (2, 7, 8), 4),           # batched
        ((2, 4, 6, 16), (2, 4, 6, 16), 16),  # (B, H, T, d): multi-head shapes
    ]:
        q, k = rand(*shape_q, seed=1), rand(*shape_k, seed=2)
        v = rand(*shape_k[:-1], d_v, seed=3)
        out, w = sdpa(q, k, v)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5,
                                   rtol=1e-5, msg=lambda m, shape=shape_q: f"{shape}: {m}")
        assert w.shape == (*shape_q[:-1], shape_k[-2]), shape_q


def test_matches_torch_with_a_bool_mask_of_any_broadcastable_shape():
    q, k, v = rand(2, 3, 6, 8, seed=1), rand(2, 3, 9, 8, seed=2), rand(2, 3, 9, 5, seed=3)
    for mask_shape in [(6, 9), (2, 1, 6, 9), (2, 3, 1, 9)]:
        mask = rand(*mask_shape, seed=4) > 0
        mask[..., 0] = True  # keep at least one key per row: torch returns NaN for empty rows
        out, w = sdpa(q, k, v, mask)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                                   atol=1e-5, rtol=1e-5,
                                   msg=lambda m, shape=mask_shape: f"mask {shape}: {m}")
        assert torch.all(w.masked_select(~mask.expand_as(w)) == 0.0), mask_shape  # exactly 0


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


def test_validation_errors_name_the_problem():
    raises_each([
        (lambda: MultiHeadAttention(10, 3), "divisible by n_heads"),
        (lambda: MultiHeadAttention(8, 4, n_kv_heads=3), "multiple of n_kv_heads"),
        (lambda: MultiHeadAttention(12, 4, rotary=True), "even head size"),
        (lambda: sdpa(rand(3, 4), rand(5, 6), rand(5, 2)), "share the last dimension"),
        (lambda: sdpa(rand(3, 4), rand(5, 4), rand(6, 2)), "same number of keys"),
        (lambda: sdpa(rand(3, 4), rand(5, 4), rand(5, 2), torch.ones(3, 4, dtype=torch.bool)),
         "does not broadcast to the scores"),
        (lambda: sdpa(rand(3, 4), rand(5, 4), rand(5, 2), torch.full((3, 5), float("-inf"))),
         "0/1"),
        (lambda: MultiHeadAttention(8, 2)(rand(2, 5, 6)), "d_model=8"),
    ], ValueError)


# --- the causal mask, masked self-attention and cross-attention (notebook 08) ---------------

def test_causal_mask_is_true_on_and_below_the_diagonal():
    mask = attnlab.causal_mask(4)
    assert mask.dtype == torch.bool and mask.shape == (4, 4)
    assert mask.tolist() == [[True, False, False, False], [True, True, False, False],
                             [True, True, True, False], [True, True, True, True]]
    assert attnlab.causal_mask(1).tolist() == [[True]]


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


def test_wrong_context_or_mask_shape_names_both_shapes():
    m = MultiHeadAttention(16, 4)

    def naming(*shapes):  # a pattern that finds every one of `shapes`, in any order
        return "".join(rf"(?=[\s\S]*{re.escape(shape)})" for shape in shapes)

    raises_each([
        (lambda: m(rand(2, 6, 16), context=rand(2, 5, 8)),
         naming("(B=2, S, d_model=16)", "(2, 6, 16)", "(2, 5, 8)")),
        (lambda: m(rand(2, 6, 16), context=rand(3, 5, 16)),
         naming("(B=2, S, d_model=16)", "(3, 5, 16)")),
        (lambda: m(rand(2, 6, 16), context=rand(5, 16)), naming("(5, 16)")),
        (lambda: m(rand(2, 6, 16), attnlab.causal_mask(5)), naming("(5, 5)", "(2, 4, 6, 6)")),
        (lambda: m(rand(2, 6, 16), attnlab.causal_mask(6), context=rand(2, 4, 16)),
         naming("(6, 6)", "(2, 4, 6, 4)")),
    ], ValueError)


def test_causal_mask_is_made_on_the_device_asked_for():
    assert attnlab.causal_mask(3, device="meta").device.type == "meta"


# --- heads: split, merge, grouped-query attention ---------------------------------------------

def test_split_heads_gives_each_head_its_own_slice_of_every_token_and_merge_undoes_it():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)  # (B, T, d_model)
    heads = split_heads(x, 4)  # (B, H, T, d_head)
    assert heads.shape == (2, 4, 3, 2)
    assert torch.equal(heads[1, 2, 0], x[1, 0, 4:6])  # head 2 of token 0: numbers 4 and 5
    assert torch.equal(merge_heads(heads), x)


def test_grouped_query_attention_matches_torch_enable_gqa():
    for n_kv_heads in (1, 2, 4):
        torch.manual_seed(0)
        ours = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads).double()
        assert ours.k.out_features == ours.v.out_features == n_kv_heads * 8
        x = rand(2, 7, 32, seed=13).double()
        mask = attnlab.causal_mask(7)
        out, w = ours(x, mask)
        q = split_heads(ours.q(x), 4)  # (B, 4, T, 8)
        k, v = split_heads(ours.k(x), n_kv_heads), split_heads(ours.v(x), n_kv_heads)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        torch.testing.assert_close(out, ours.out(merge_heads(ref)),
                                   msg=lambda m, n=n_kv_heads: f"n_kv_heads={n}: {m}")
        assert w.shape == (2, 4, 7, 7), n_kv_heads
        padding = torch.tensor([[True] * 5 + [False] * 2, [True] * 7])[:, None, None, :]
        per_head = padding & mask  # (B, 1, T, T), and a mask with a head dimension too:
        torch.testing.assert_close(ours(x, per_head)[0], ours(x, per_head.expand(2, 4, 7, 7))[0],
                                   msg=lambda m, n=n_kv_heads: f"n_kv_heads={n}: {m}")


@torch.no_grad()
def test_grouped_query_heads_read_their_shared_keys_without_copying_them():
    """One new token's 8 query heads against 4096 cached keys of 32 numbers: a copy of the keys
    per query head (what broadcasting a group axis against k makes matmul do) would hold 4 MiB;
    the scores and the weights, 8 × 4096 floats each, are all the step needs."""
    q = rand(1, 8, 1, 32, seed=17)  # (B, H, 1, D)
    for n_kv_heads in (1, 2):
        mha = MultiHeadAttention(256, 8, n_kv_heads=n_kv_heads)
        k, v = rand(1, n_kv_heads, 4096, 32, seed=18), rand(1, n_kv_heads, 4096, 32, seed=19)
        peak = cost.peak_memory(lambda mha=mha, k=k, v=v: mha.attend(q, k, v))
        assert peak < min(k.nbytes, 3 * 8 * 4096 * 4), (n_kv_heads, peak)  # < one copy of k
        out, _ = mha.attend(q, k, v)
        G = 8 // n_kv_heads
        ref = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1),
                                             v.repeat_interleave(G, 1))
        torch.testing.assert_close(out, mha.out(merge_heads(ref)),
                                   msg=lambda m, n=n_kv_heads: f"n_kv_heads={n}: {m}")


# --- rotary positions ----------------------------------------------------------------------------

def test_rotary_keeps_lengths_and_its_scores_depend_only_on_the_offset():
    q, k = rand(3, 1, 16, seed=14).double(), rand(3, 1, 16, seed=15).double()

    def score(m, n):  # (R_m q) · (R_n k)
        qm = attnlab.rotary(q, torch.tensor([m]))
        kn = attnlab.rotary(k, torch.tensor([n]))
        return (qm * kn).sum(-1)

    x = rand(2, 9, 16, seed=16).double()
    torch.testing.assert_close(attnlab.rotary(x).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(attnlab.rotary(x)[:, 0], x[:, 0])  # position 0: no rotation
    for shift in (1, 7, 100):
        torch.testing.assert_close(score(5 + shift, 2 + shift), score(5, 2))
    assert not torch.allclose(score(5, 2), score(5, 3))


def test_rotary_is_the_complex_rotation_of_each_pair():
    x = rand(6, 8, seed=17).double()  # (T, d)
    pairs = torch.view_as_complex(x.view(6, 4, 2))  # (T, d/2): x[2i] + i·x[2i+1]
    theta = 10000.0 ** (-torch.arange(0, 8, 2).double() / 8)  # (d/2,)
    angles = torch.arange(6).double()[:, None] * theta  # (T, d/2)
    turned = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles))
    torch.testing.assert_close(attnlab.rotary(x), turned.flatten(-2))


def test_rotary_attention_scores_do_not_change_when_the_sequence_is_shifted():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 2, rotary=True).double()
    x = rand(1, 5, 16, seed=18).double()
    q, k, _ = attn.project(x)
    q9, k9, _ = attn.project(x, positions=torch.arange(9, 14))  # the same tokens, 9 places later
    torch.testing.assert_close(q @ k.transpose(-2, -1), q9 @ k9.transpose(-2, -1))


# --- the uniform-attention ablation -------------------------------------------------------------

def test_uniform_attention_gives_every_allowed_key_the_same_weight_and_changes_nothing_else():
    torch.manual_seed(0)
    attn = MultiHeadAttention(8, 2)
    x = rand(2, 4, 8, seed=19)
    real = torch.tensor([[True, True, True, False], [True] * 4])[:, None, None, :]  # (B,1,1,T)
    mask = real & attnlab.causal_mask(4)
    with attnlab.uniform_attention(attn):
        out, w = attn(x, mask)
    allowed = mask.expand_as(w)
    expected = allowed / allowed.sum(-1, keepdim=True)  # 1 / (number of allowed keys)
    torch.testing.assert_close(w, expected.float())
    _, _, v = attn.project(x)  # the output is the plain mean of the allowed values
    torch.testing.assert_close(out, attn.out(merge_heads(expected.float() @ v)))
    assert not torch.allclose(attn(x, mask)[1], w)  # and the context manager is gone again


def test_uniform_attention_of_some_heads_only_and_always_restored():
    torch.manual_seed(0)
    attn = MultiHeadAttention(8, 2)
    x = rand(1, 5, 8, seed=20)
    _, before = attn(x)
    with attnlab.uniform_attention(attn, heads=[1]):
        _, w = attn(x)
    torch.testing.assert_close(w[:, 1], torch.full((1, 5, 5), 0.2))
    torch.testing.assert_close(w[:, 0], before[:, 0])
    with pytest.raises(RuntimeError), attnlab.uniform_attention(attn):
        raise RuntimeError("a failing cell")
    torch.testing.assert_close(attn(x)[1], before)
    with pytest.raises(ValueError, match=r"heads must be in 0\.\.1 "):
        with attnlab.uniform_attention(attn, heads=[2]):
            pass
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        with attnlab.uniform_attention(torch.nn.Linear(2, 2)):
            pass
    with pytest.raises(TypeError, match="model"):  # an edit names what it changes
        with attnlab.uniform_attention(heads=[0]):
            pass


def test_a_layer_can_train_with_another_scale():
    torch.manual_seed(0)
    plain = MultiHeadAttention(8, 2, scale=1.0)
    x = rand(1, 4, 8, seed=21)
    q, k, v = plain.project(x)
    torch.testing.assert_close(plain(x)[1], torch.softmax(q @ k.transpose(-2, -1), -1))
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        MultiHeadAttention(8, 2, scale=0.0)


# --- the hook points: the one way to intervene ----------------------------------------------

def test_each_hook_point_sees_its_tensor_with_grouped_heads_as_documented():
    torch.manual_seed(0)
    attn = MultiHeadAttention(12, 6, n_kv_heads=2)
    x = rand(2, 5, 12, seed=21)
    out, weights = attn(x, attnlab.causal_mask(5))
    seen = {}

    def keep(name):
        return lambda t: seen.setdefault(name, t)

    points = ("values", "mask", "scores", "weights", "heads")
    with hooks.hooked(*((getattr(attn, f"hook_{n}"), keep(n)) for n in points)):
        again, weights_again = attn(x, attnlab.causal_mask(5))
    assert torch.equal(again, out) and torch.equal(weights_again, weights)  # reading: no change
    assert seen["values"].shape == (2, 2, 5, 2)  # (B, H_kv, S, D)
    assert seen["mask"].shape == (5, 5) and seen["mask"].dtype == torch.bool  # (T, S)
    assert seen["scores"].shape == seen["weights"].shape == (2, 6, 5, 5)  # (B, H, T, S)
    assert torch.equal(seen["weights"], weights)
    assert seen["heads"].shape == (2, 6, 5, 2)  # (B, H, T, D)
    assert not any(getattr(attn, f"hook_{n}").hooked for n in points)  # gone after the block
    assert "HookPoint" not in repr(attn)  # a printed model shows its layers only


def test_a_replaced_tensor_flows_on_and_the_mask_point_gets_a_mask_where_there_was_none():
    torch.manual_seed(0)
    attn = MultiHeadAttention(8, 2)
    x = rand(1, 4, 8, seed=22)

    def only_first_key(w):  # (B, H, T, S): every query reads key 0 alone
        return torch.zeros_like(w).index_fill(-1, torch.tensor([0]), 1.0)

    with hooks.hooked((attn.hook_weights, only_first_key)):
        out, w = attn(x)
    _, _, v = attn.project(x)
    torch.testing.assert_close(out, attn.out(merge_heads(v[:, :, :1].expand(-1, -1, 4, -1))))
    assert torch.equal(w, only_first_key(w))
    with hooks.hooked((attn.hook_mask, lambda m: m & attnlab.causal_mask(4))):
        _, causal = attn(x)  # no mask given: the hook turns all-True into causal
    assert torch.equal(causal, attn(x, attnlab.causal_mask(4))[1])
    with pytest.raises(TypeError, match="hook point"), hooks.hooked((attn.q, abs)):
        pass
