"""attnlab.kv_cache: decoding with cached keys and values gives what recomputing gives, for
exactly the operations the formulas count."""
import pytest
import torch

import attnlab
from attnlab import cost, kv_cache


@pytest.fixture
def mha():
    torch.manual_seed(0)
    return attnlab.MultiHeadAttention(16, 4)


def causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)   True on and below the diagonal


@torch.no_grad()
def test_cached_decoding_equals_recomputing_and_one_masked_pass(mha):
    B, T = 2, 20
    x = torch.randn(B, T, 16)
    cache = kv_cache.KVCache(B, 4, 4, max_len=T)
    cached = torch.cat([kv_cache.decode_step(mha, x[:, t:t + 1], cache) for t in range(T)], 1)
    recomputed = torch.cat([kv_cache.recompute_step(mha, x[:, :t + 1]) for t in range(T)], 1)
    one_pass, _ = mha(x, mask=causal(T))  # (B, T, 16)
    torch.testing.assert_close(cached, recomputed, atol=1e-5, rtol=0)
    torch.testing.assert_close(cached, one_pass, atol=1e-5, rtol=0)
    assert len(cache) == T


@torch.no_grad()
def test_prefill_then_decode_equals_decoding_from_the_start(mha):
    x = torch.randn(1, 12, 16)
    cache = kv_cache.prefill(mha, x[:, :8], max_len=12)
    assert len(cache) == 8
    after = torch.cat([kv_cache.decode_step(mha, x[:, t:t + 1], cache) for t in range(8, 12)], 1)
    one_pass, _ = mha(x, mask=causal(12))
    torch.testing.assert_close(after, one_pass[:, 8:], atol=1e-5, rtol=0)


@torch.no_grad()
def test_crop_goes_back_and_decoding_again_repeats_the_step(mha):
    x = torch.randn(1, 6, 16)
    cache = kv_cache.prefill(mha, x[:, :5], max_len=6)
    first = kv_cache.decode_step(mha, x[:, 5:6], cache)
    cache.crop(5)
    again = kv_cache.decode_step(mha, x[:, 5:6], cache)
    torch.testing.assert_close(first, again, atol=0, rtol=0)
    with pytest.raises(ValueError, match="length"):
        cache.crop(7)  # cannot crop forward
    with pytest.raises(TypeError, match="length"):
        cache.crop(2.0)


def test_the_cache_holds_two_numbers_per_head_dimension_and_position():
    cache = kv_cache.KVCache(2, 3, 5, max_len=7)
    assert cache.keys.shape == cache.values.shape == (2, 3, 7, 5)
    assert cache.nbytes == 2 * 2 * 3 * 7 * 5 * 4 and len(cache) == 0
    keys, values = cache.append(torch.ones(2, 3, 4, 5), 2 * torch.ones(2, 3, 4, 5))
    assert keys.shape == (2, 3, 4, 5) and (values == 2).all() and len(cache) == 4


@pytest.mark.parametrize("k, v, error, match", [
    (torch.zeros(2, 3, 1, 4), torch.zeros(2, 3, 1, 4), ValueError, r"\(B=2, H=3, n, D=5\)"),
    (torch.zeros(3, 1, 5), torch.zeros(3, 1, 5), ValueError, "at least 4 dimensions"),
    (torch.zeros(2, 3, 1, 5), torch.zeros(2, 3, 2, 5), ValueError, "same shape"),
    (torch.zeros(2, 3, 8, 5), torch.zeros(2, 3, 8, 5), ValueError, "max_len=7"),
    (torch.zeros(2, 3, 1, 5, dtype=torch.long), torch.zeros(2, 3, 1, 5), TypeError, "floating"),
    ("k", torch.zeros(2, 3, 1, 5), TypeError, "torch.Tensor"),
])
def test_append_refuses_what_does_not_fit(k, v, error, match):
    cache = kv_cache.KVCache(2, 3, 5, max_len=7)
    with pytest.raises(error, match=match):
        cache.append(k, v)
    assert len(cache) == 0


def test_bad_sizes_and_inputs_are_refused(mha):
    with pytest.raises(ValueError, match="max_len"):
        kv_cache.KVCache(1, 2, 4, max_len=0)
    with pytest.raises(TypeError, match="n_heads"):
        kv_cache.KVCache(1, 2.0, 4, max_len=3)
    cache = kv_cache.KVCache(1, 4, 4, max_len=3)
    with pytest.raises(ValueError, match=r"\(B, 1, d_model=16\), got \(1, 2, 16\)"):
        kv_cache.decode_step(mha, torch.zeros(1, 2, 16), cache)
    with pytest.raises(TypeError, match="x_t"):
        kv_cache.decode_step(mha, [0.0] * 16, cache)
    with pytest.raises(TypeError, match="cached"):
        kv_cache.step_flops(4, 16, cached=1)


@pytest.mark.parametrize("t", [1, 7, 33])
@torch.no_grad()
def test_step_flops_count_what_pytorch_runs_and_differ_by_exactly_t(mha, t):
    x = torch.randn(1, t, 16)
    cache = kv_cache.prefill(mha, x[:, :t - 1], max_len=t)
    cached = cost.count_flops(lambda: kv_cache.decode_step(mha, x[:, t - 1:], cache))
    recomputed = cost.count_flops(lambda: kv_cache.recompute_step(mha, x))
    assert cached == kv_cache.step_flops(t, 16, cached=True)
    assert recomputed == kv_cache.step_flops(t, 16, cached=False)
    assert recomputed == cost.layer_flops("attention", t, 16)
    assert recomputed == t * cached
