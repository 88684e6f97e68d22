"""attnlab.core.kv_cache: decoding with cached keys and values gives what recomputing gives (with
rotary positions and grouped-query attention too), for exactly the operations and bytes the
formulas count."""
import pytest
import torch

import attnlab
from attnlab.core import kv_cache
from attnlab.core.online_softmax import blockwise_attention
from attnlab.lessons import cost


@pytest.fixture
def mha():
    torch.manual_seed(0)
    return attnlab.MultiHeadAttention(16, 4)


def causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)   True on and below the diagonal


@torch.no_grad()
def test_cached_decoding_equals_recomputing_and_one_masked_pass():
    B, T = 2, 20
    x = torch.randn(B, T, 16)
    for n_kv_heads, rotary in [(4, False), (2, True), (1, True)]:
        case = f"n_kv_heads={n_kv_heads}, rotary={rotary}"
        torch.manual_seed(0)
        mha = attnlab.MultiHeadAttention(16, 4, n_kv_heads=n_kv_heads, rotary=rotary)
        cache = kv_cache.KVCache.for_layer(mha, x, max_len=T)
        assert cache.keys.shape == (B, n_kv_heads, T, 4), case
        cached = torch.cat([kv_cache.decode_step(mha, x[:, t:t + 1], cache) for t in range(T)], 1)
        recomputed = torch.cat([kv_cache.recompute_step(mha, x[:, :t + 1]) for t in range(T)], 1)
        one_pass, _ = mha(x, mask=causal(T))  # (B, T, 16)
        torch.testing.assert_close(cached, recomputed, atol=1e-5, rtol=0,
                                   msg=lambda m, case=case: f"{case}: {m}")
        torch.testing.assert_close(cached, one_pass, atol=1e-5, rtol=0,
                                   msg=lambda m, case=case: f"{case}: {m}")
        assert len(cache) == T, case


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
    with pytest.raises(ValueError, match="length must be an int >= 0 and <= 6, got 7"):
        cache.crop(7)  # cannot crop forward


def test_the_cache_holds_what_bytes_per_token_says():
    cache = kv_cache.KVCache(2, 3, 5, max_len=7)
    assert cache.keys.shape == cache.values.shape == (2, 3, 7, 5)
    assert cache.nbytes == 2 * 7 * kv_cache.bytes_per_token(1, 3, 5, bytes_per_number=4)
    keys, values = cache.append(torch.ones(2, 3, 4, 5), 2 * torch.ones(2, 3, 4, 5))
    assert keys.shape == (2, 3, 4, 5) and (values == 2).all() and len(cache) == 4
    with pytest.raises(ValueError, match="max_len=7"):
        cache.append(torch.zeros(2, 3, 4, 5), torch.zeros(2, 3, 4, 5))
    # a 7B-style layer stack: 32 layers, 32 heads of 128 numbers, 16-bit: 512 KiB per token
    assert kv_cache.bytes_per_token(32, 32, 128) == 512 * 1024
    assert kv_cache.bytes_per_token(32, 8, 128) == 128 * 1024  # 8 KV heads: a quarter
    half = attnlab.MultiHeadAttention(16, 4, n_kv_heads=2).half()
    small = kv_cache.prefill(half, torch.zeros(1, 3, 16, dtype=torch.float16), max_len=10)
    assert small.nbytes == 10 * kv_cache.bytes_per_token(1, 2, 4)


def test_a_step_takes_one_token(mha):
    cache = kv_cache.KVCache(1, 4, 4, max_len=3)
    with pytest.raises(ValueError, match=r"\(B, 1, d_model=16\), got \(1, 2, 16\)"):
        kv_cache.decode_step(mha, torch.zeros(1, 2, 16), cache)


@torch.no_grad()
def test_step_flops_count_what_pytorch_runs_and_differ_by_exactly_t(mha):
    for t in (1, 7, 33):
        x = torch.randn(1, t, 16)
        cache = kv_cache.prefill(mha, x[:, :t - 1], max_len=t)
        cached = cost.count_flops(lambda cache=cache, x=x: kv_cache.decode_step(mha, x[:, -1:],
                                                                              cache))
        recomputed = cost.count_flops(lambda x=x: kv_cache.recompute_step(mha, x))
        assert cached == kv_cache.step_flops(t, 16, cached=True), t
        assert recomputed == kv_cache.step_flops(t, 16, cached=False), t
        assert recomputed == cost.layer_flops("attention", t, 16), t
        assert recomputed == t * cached, t


def test_the_cache_the_online_softmax_and_masked_attention_run_on_the_meta_device():
    """Shapes only: every tensor they make follows the inputs' device, and no step needs a value
    (a host sync would raise here)."""
    with torch.device("meta"):
        mha = attnlab.MultiHeadAttention(16, 4, n_kv_heads=2, rotary=True)
        x = torch.randn(2, 6, 16)
        cache = kv_cache.prefill(mha, x[:, :5], max_len=6)
        assert kv_cache.decode_step(mha, x[:, 5:], cache).shape == (2, 1, 16)
        assert kv_cache.recompute_step(mha, x).device.type == "meta"
        assert blockwise_attention(x, x, x, block_size=4).shape == (2, 6, 16)
        real = torch.ones(2, 6, dtype=torch.bool)
        out, w = mha(x, real[:, None, None, :] & attnlab.causal_mask(6, device="meta"))
        assert w.shape == (2, 4, 6, 6)
