"""attnlab.core.online_softmax: block by block equals softmax attention, for any block size, without
ever holding the T×T matrix."""
import math

import torch
from helpers import raises_each

import attnlab
from attnlab.core import online_softmax
from attnlab.lessons import cost


def full(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def test_blockwise_equals_softmax_attention_for_any_block_size():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 3, 11, 8, generator=g), torch.randn(2, 3, 37, 8, generator=g), \
        torch.randn(2, 3, 37, 5, generator=g)
    for block_size in (1, 3, 8, 37, 1000):
        out = online_softmax.blockwise_attention(q, k, v, block_size=block_size)  # (2, 3, 11, 5)
        torch.testing.assert_close(out, full(q, k, v), atol=1e-6, rtol=1e-5,
                                   msg=lambda m, b=block_size: f"block_size {b}: {m}")


def test_blockwise_is_exact_in_float64_and_broadcasts_like_attention():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(4, 1, 9, 16, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 40, 16, generator=g, dtype=torch.float64) for _ in range(2))
    out = online_softmax.blockwise_attention(q, k, v, block_size=6)
    expected, _ = attnlab.scaled_dot_product_attention(q, k, v)  # (4, 2, 9, 16)
    assert out.shape == expected.shape and (out - expected).abs().max() < 1e-12


def test_a_later_larger_maximum_is_handled_without_overflow():
    """Scores of 1000: exp overflows unless every block is measured against the running max."""
    q = torch.ones(1, 2, 4) * 40.0
    k = torch.cat([torch.zeros(1, 6, 4), torch.ones(1, 6, 4)], dim=1)  # the larger keys come last
    v = torch.randn(1, 12, 3)
    out = online_softmax.blockwise_attention(q, k, v, block_size=4)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, full(q, k, v))


def test_the_order_of_the_blocks_does_not_matter():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(5, 4, generator=g) for _ in range(3))
    scores = q @ k.T  # (5, 5)
    blocks = [slice(0, 2), slice(2, 5)]
    results = []
    for order in (blocks, blocks[::-1]):
        state = online_softmax.empty_state(q, v)
        for b in order:
            state = online_softmax.online_update(*state, scores[:, b], v[b])
        results.append(state[2] / state[1])
    torch.testing.assert_close(results[0], results[1])
    torch.testing.assert_close(results[0], torch.softmax(scores, -1) @ v)


def test_empty_state_shapes():
    m, total, acc = online_softmax.empty_state(torch.zeros(2, 1, 7, 4), torch.zeros(3, 9, 6))
    assert m.shape == total.shape == (2, 3, 7, 1) and acc.shape == (2, 3, 7, 6)
    assert torch.isinf(m).all() and (total == 0).all() and (acc == 0).all()


@torch.no_grad()
def test_peak_memory_grows_like_t_not_t_squared():
    qkv = {T: [torch.randn(1, 1, T, 16) for _ in range(3)] for T in (512, 1024, 2048)}
    peak = {T: cost.peak_memory(lambda x=x: online_softmax.blockwise_attention(*x, block_size=64))
            for T, x in qkv.items()}
    assert 1.9 < peak[1024] / peak[512] < 2.1 and 1.9 < peak[2048] / peak[1024] < 2.1
    assert peak[2048] < 4 * 2048 * 2048 / 8  # an eighth of one T×T float32 matrix


def test_shapes_that_do_not_fit_are_refused():
    q, k, v = torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(5, 2)  # T_q 3, T_k 5, d_v 2
    raises_each([
        (lambda: online_softmax.blockwise_attention(q, torch.zeros(5, 3), v),
         r"q \(3, 4\), k \(5, 3\)"),
        (lambda: online_softmax.blockwise_attention(q, k, torch.zeros(6, 2)), r"v \(6, 2\)"),
        (lambda: online_softmax.blockwise_attention(q, torch.zeros(0, 4), torch.zeros(0, 2)),
         "T_k >= 1"),
    ], ValueError)
