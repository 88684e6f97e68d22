"""attnlab.lessons.scaling: the measurements of notebook 02 are deterministic, fast and show the
trends."""
import math

import numpy as np
import pytest
import torch
from helpers import raises_each

from attnlab import scaled_dot_product_attention
from attnlab.lessons import scaling

SMALL = (4, 64, 1024)


def test_dot_product_std_grows_like_sqrt_dk():
    std = scaling.dot_product_std(SMALL, n_samples=3000, seed=0)
    assert std.shape == (3,)
    np.testing.assert_allclose(std, np.sqrt(SMALL), rtol=0.06)
    assert 0.45 < scaling.loglog_slope(SMALL, std) < 0.55


def test_measurements_are_deterministic_and_seeded():
    a = scaling.dot_product_std(SMALL, n_samples=200, seed=3)
    b = scaling.dot_product_std(SMALL, n_samples=200, seed=3)
    c = scaling.dot_product_std(SMALL, n_samples=200, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    g1 = scaling.softmax_gradient_norm(SMALL, n_samples=50, seed=1)
    g2 = scaling.softmax_gradient_norm(SMALL, n_samples=50, seed=1)
    for name in ("unscaled", "scaled"):
        np.testing.assert_array_equal(g1[name], g2[name])


def test_measurements_do_not_touch_the_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    scaling.max_softmax_weight(SMALL, n_samples=20)
    assert torch.equal(torch.rand(1), expected)


def test_loglog_slope_recovers_a_power_law():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert scaling.loglog_slope(x, 3 * x ** 0.5) == pytest.approx(0.5)
    assert scaling.loglog_slope(x, x ** -2) == pytest.approx(-2.0)
    with pytest.raises(ValueError, match="positive"):
        scaling.loglog_slope(x, x - 1)
    with pytest.raises(ValueError, match="same length"):
        scaling.loglog_slope(x, x[:3])


def test_unscaled_softmax_saturates_scaled_does_not():
    top = scaling.max_softmax_weight(SMALL, n_keys=16, n_samples=300, seed=0)
    assert (np.diff(top["unscaled"]) > 0).all()
    assert top["unscaled"][-1] > 0.9
    assert np.ptp(top["scaled"]) < 0.06
    assert (top["scaled"] > 1 / 16).all() and (top["scaled"] < 0.5).all()


def test_with_two_keys_the_largest_weight_is_at_least_half():
    top = scaling.max_softmax_weight([1], n_keys=2, n_samples=100, seed=0)
    assert (top["scaled"] >= 0.5).all() and (top["unscaled"] >= 0.5).all()


def test_gradient_collapses_unscaled_and_stays_healthy_scaled():
    grad = scaling.softmax_gradient_norm((16, 256, 1024), n_keys=16, n_samples=300, seed=0)
    assert grad["unscaled"][-1] < 0.01 * grad["unscaled"][0]
    assert (np.diff(grad["unscaled"]) < 0).all()
    assert grad["scaled"].max() / grad["scaled"].min() < 1.5
    assert 0.5 < grad["scaled"].min()


def test_gradient_matches_a_direct_autograd_computation():
    """Rebuild one sample by hand from the same generator stream and compare."""
    d, n_keys, d_v = 8, 4, 3
    grad = scaling.softmax_gradient_norm([d], n_keys=n_keys, n_samples=1, d_v=d_v, seed=7)
    g = torch.Generator().manual_seed(7)
    q = torch.randn(1, 1, d, generator=g, dtype=torch.float64).requires_grad_(True)
    k = torch.randn(1, n_keys, d, generator=g, dtype=torch.float64)
    v = torch.randn(1, n_keys, d_v, generator=g, dtype=torch.float64)
    up = torch.randn(1, 1, d_v, generator=g, dtype=torch.float64)
    weights = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(d), dim=-1)
    ((weights @ v) * up).sum().backward()
    assert grad["scaled"][0] == pytest.approx(q.grad.norm().item(), rel=1e-12)


def test_softmax_pair_is_nested_and_matches_attention():
    small = scaling.softmax_pair(4, n_keys=5, seed=2, max_d_k=64)
    big = scaling.softmax_pair(64, n_keys=5, seed=2, max_d_k=64)
    assert small["scale"] == 0.5 and big["scale"] == 0.125
    for v in (small, big):
        assert v["unscaled"].sum() == pytest.approx(1.0) and v["scaled"].sum() == pytest.approx(1.0)
        scores = torch.as_tensor(v["scores"])[None]  # (1, T)
        assert np.allclose(v["unscaled"], torch.softmax(scores, -1)[0].numpy())
        assert np.allclose(v["scaled"], torch.softmax(scores * v["scale"], -1)[0].numpy())
    # the scaled weights are flatter than the unscaled ones
    assert big["scaled"].max() < big["unscaled"].max()
    # one fixed draw: d_k=4 sees the first 4 coordinates of the d_k=64 query and keys
    np.testing.assert_array_equal(small["query"], big["query"][:4])
    np.testing.assert_array_equal(small["keys"], big["keys"][:, :4])
    np.testing.assert_allclose(big["scores"], big["keys"] @ big["query"])
    _, w = scaled_dot_product_attention(torch.as_tensor(big["query"])[None],
                                        torch.as_tensor(big["keys"]),
                                        torch.zeros(5, 1, dtype=torch.float64))
    np.testing.assert_allclose(big["scaled"], w[0].numpy())


def test_bad_d_ks_raise_clear_errors():
    raises_each([
        (lambda: scaling.dot_product_std([]), ValueError, "d_ks must not be empty"),
        (lambda: scaling.dot_product_std("48"), TypeError, "d_ks must be a sequence"),
        (lambda: scaling.dot_product_std([4, 0]), ValueError,
         r"d_ks\[1\] must be an int >= 1, got 0"),  # which entry
        (lambda: scaling.softmax_pair(2048), ValueError, "d_k must be at most max_d_k=1024"),
    ])


# --- the scale in a model that trains ---------------------------------------------------------

def test_score_spread_is_the_std_of_the_scaled_scores_of_real_pairs():
    torch.manual_seed(0)
    attn = scaling.MultiHeadAttention(12, 4, n_kv_heads=2).double()  # grouped-query heads too
    h = torch.randn(2, 5, 12, dtype=torch.float64)  # (B, T, d_model)
    real = torch.tensor([[True] * 5, [True, True, True, False, False]])  # (B, T)
    q = attn.q(h).view(2, 5, 4, 3).transpose(1, 2)  # (B, H, T, D)
    k = attn.k(h).view(2, 5, 2, 3).transpose(1, 2).repeat_interleave(2, dim=1)  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(3)  # (B, H, T, T)
    expected = torch.cat([scores[0].flatten(), scores[1, :, :3, :3].flatten()]).std()
    assert scaling.score_spread(attn, h, real).item() == pytest.approx(expected.item(), rel=1e-12)
    h2 = h.clone()
    h2[1, 3:] = 100.0  # padding: whatever it holds, it is not measured
    assert scaling.score_spread(attn, h2, real) == scaling.score_spread(attn, h, real)
    assert scaling.score_spread(attn, h).item() == pytest.approx(scores.std().item(), rel=1e-12)
    attn.scale = 1.0
    assert scaling.score_spread(attn, h).item() == pytest.approx(scores.std().item() * math.sqrt(3))


def test_score_spread_refuses_what_is_not_a_layer_and_its_states():
    attn, h = scaling.MultiHeadAttention(4, 2), torch.randn(2, 3, 4)
    raises_each([
        (lambda: scaling.score_spread(torch.nn.Linear(4, 4), h), TypeError, "MultiHeadAttention"),
        (lambda: scaling.score_spread(attn, h[..., :3]), ValueError,
         r"h must have shape \(B, T, d_model=4\)"),
        (lambda: scaling.score_spread(attn, h, torch.ones(2, 3)), ValueError,
         "real must be a bool"),
    ])


def test_the_folded_model_is_the_scaled_model_at_step_0():
    x, _, _ = scaling.task_reviews("contrast", 0)[1].tensors(scaling.Vocab.for_reviews())
    scaled, folded, unscaled = (scaling.initial_at_scale(**kw, seed=3, d_head=16)
                                for kw in ({}, {"fold": True}, {"scale": 1.0}))
    assert folded.blocks[0].attn.scale == 1.0 and scaled.blocks[0].attn.scale is None
    torch.testing.assert_close(folded.blocks[0].attn.q.weight, scaled.blocks[0].attn.q.weight / 4)
    torch.testing.assert_close(folded.predict_proba(x), scaled.predict_proba(x), rtol=0,
                               atol=1e-14)
    assert not torch.allclose(unscaled.predict_proba(x), scaled.predict_proba(x), atol=1e-6)


def test_a_folded_model_has_no_other_scale():
    with pytest.raises(ValueError, match="scale must be None with it"):
        scaling.initial_at_scale(scale=1.0, fold=True)


def test_softmax_slope_is_the_softmaxs_jacobian_and_vanishes_when_saturated():
    scores = torch.randn(2, 3, 5, dtype=torch.float64)
    slope = scaling.softmax_slope(scores.softmax(-1))  # (2, 3, 5, 5)
    jacobian = torch.autograd.functional.jacobian(lambda s: s.softmax(-1), scores[1, 2])  # (5, 5)
    assert slope.shape == (2, 3, 5, 5) and torch.allclose(slope[1, 2], jacobian)
    assert scaling.softmax_slope(torch.tensor([1.0, 0.0, 0.0])).abs().max() == 0
    with pytest.raises(TypeError, match="weights must be a floating-point tensor"):
        scaling.softmax_slope(torch.tensor([1, 0]))
