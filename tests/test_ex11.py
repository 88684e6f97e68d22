"""Notebook 11's exercises: right answers written in other ways, and the cases the tables of
mistakes do not hold (the tables: tests/test_exercises.py; hostile answers: there too)."""
import functools
import math

import numpy as np
import torch
import torch.nn.functional as F
from exercise_doubles import expect

from attnlab.core.rope import rotary
from attnlab.exercises import ex11


def right(block):
    d, m = block[:4].view(torch.float16).float()
    return d * torch.cat([block[4:] & 15, block[4:] >> 4]).float() + m


def by_numpy(block):  # each byte split with divmod, in NumPy
    raw = block.numpy()
    d, m = raw[:4].view(np.float16).astype(np.float32)
    high, low = np.divmod(raw[4:], 16)
    return torch.from_numpy(d * np.concatenate([low, high]).astype(np.float32) + m)


def test_dequantize_a_block(capsys):
    answers = [right, by_numpy]
    assert expect(capsys, ex11.dequantize_q4_1, answers, "✓",
                  "dequantize_q4_1: matches "
                  "attnlab.pretrained.gguf.dequantize on 4 Q4_1 blocks.") == answers
    expect(capsys, ex11.dequantize_q4_1, [lambda b: right(b).double()], "✗",
           "your block of numbers has dtype torch.float64, expected torch.float32")


def test_repeat_loss(capsys):
    expect(capsys, ex11.repeat_loss, [3.0], "✎", "measured 3.40 (within 1.5)", 3.4)
    assert expect(capsys, ex11.repeat_loss, [10.0], "✎", "(6.60 apart)", 3.4) == [None]


def test_heads_to_break_copy(capsys):
    curve = {1: 4.0, 2: 6.5, 3: 7.2, 4: 9.0}  # half of 14 is first reached at k = 3
    calls = []

    def loss(k):
        calls.append(k)
        return curve.get(k, 12.0)

    check = ex11.heads_to_break_copy
    assert expect(capsys, check, [3], "✓", "fewest heads", loss, 14.0)[0] == 3
    assert set(calls) <= {1, 2, 3}  # only what a scan up to the answer needs
    assert expect(capsys, check, [2], "✗", "still below half", loss, 14.0)[0] == 3
    assert expect(capsys, check, [4], "✗", "fewer than 4 heads", loss, 14.0)[0] == 3
    expect(capsys, check, [2.5], "✗", "not a number of heads", loss, 14.0)
    expect(capsys, check, [0], "✗", "between 1 and 270", loss, 14.0)


def test_a_loop_that_never_set_the_answer_is_an_attempt(capsys):
    """The notebook's copy_loss_without is functools.cache'd: entries there mean a loop ran."""
    @functools.cache
    def loss(k):
        return 4.0 + k

    check = ex11.heads_to_break_copy
    expect(capsys, check, [...], "○", "not attempted yet", loss, 14.0)  # nothing ran yet
    expect(capsys, check, [...], "○", "not attempted yet", loss, 14.0)  # the check's own calls
    for k in range(1, 3):  # a loop that stops too soon and sets nothing (cache hits only)
        if loss(k) >= 7.0:
            break
    assert expect(capsys, check, [...], "✗", "your code called copy_loss_without: the loop "
                  "ended without setting heads_needed", loss, 14.0) == [3]
    assert expect(capsys, check, [3], "✓", "fewest heads", loss, 14.0) == [3]


def test_a_rerun_cell_starts_a_new_count(capsys):
    """Re-running the explore cell defines copy_loss_without again, with an empty cache, and
    CPython often gives it the id of a function freed before (the third definition takes the
    first's). Two runs whose loop finds the answer, then one whose loop finds nothing: that is
    an attempt (✗), not ○, however many calls an earlier function had at its check."""
    cell = {}  # the notebook's globals

    def run_cell(loop):  # the cell: define copy_loss_without (rebinding the name), loop, check
        @functools.cache
        def copy_loss_without(k):
            return 4.0 + k  # half of 14 is first reached at k = 3

        cell["copy_loss_without"] = copy_loss_without
        return ex11.heads_to_break_copy(loop(copy_loss_without), copy_loss_without, 14.0)

    def full_loop(loss):
        k = 1
        while loss(k) < 7.0:
            k += 1
        return k

    def finds_nothing(loss):
        for k in range(1, 3):  # stops too soon and sets nothing
            if loss(k) >= 7.0:
                return k
        return ...

    for _ in range(5):  # a few rounds, so that an id is reused whatever the allocator does
        for loop, mark, words in ((full_loop, "✓", "fewest heads"),
                                  (full_loop, "✓", "fewest heads"),
                                  (finds_nothing, "✗", "the loop ended without setting")):
            assert expect(capsys, run_cell, [loop], mark, words) == [3]


def my_rms(x, weight, eps):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


def test_rms_norm(capsys):
    answers = [my_rms, lambda x, w, e: torch.nn.RMSNorm(x.shape[-1], e, False)(x) * w]
    assert expect(capsys, ex11.rms_norm, answers, "✓", "2 random inputs") == answers
    expect(capsys, ex11.rms_norm, [lambda x, w, e: x * w], "✗", "differs from the reference by")


def my_swiglu(x, ff):
    return (F.silu(x @ ff.gate.weight.T) * (x @ ff.up.weight.T)) @ ff.down.weight.T


def test_swiglu(capsys):
    assert expect(capsys, ex11.swiglu, [my_swiglu], "✓", "2 random inputs") == [my_swiglu]
    expect(capsys, ex11.swiglu, [lambda x, ff: F.silu(ff.gate(x)) * ff.up(x)], "✗",
           "your result has shape (2, 3, 12), expected (2, 3, 8)")


def student_block(block, x):
    """The Llama block as a student writes it, the heads grouped as (B, H_kv, H / H_kv, T, D)."""
    a, (B, T, d) = block.attn, x.shape
    H, H_kv, D = a.n_heads, a.n_kv_heads, a.d_head

    def attention(h):
        q = rotary(a.q(h).view(B, T, H, D).transpose(1, 2), base=a.rotary_base)
        k = rotary(a.k(h).view(B, T, H_kv, D).transpose(1, 2), base=a.rotary_base)
        v = a.v(h).view(B, T, H_kv, D).transpose(1, 2)
        q = q.view(B, H_kv, H // H_kv, T, D)  # query heads 2g, 2g + 1 share key/value head g
        scores = q @ k[:, :, None].transpose(-2, -1) / math.sqrt(D)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
        heads = (scores.softmax(-1) @ v[:, :, None]).view(B, H, T, D)
        return a.out(heads.transpose(1, 2).reshape(B, T, d))

    h = x + attention(my_rms(x, block.norm1.weight, block.norm1.eps))
    return h + my_swiglu(my_rms(h, block.norm2.weight, block.norm2.eps), block.ff)


def test_llama_block(capsys):
    assert expect(capsys, ex11.llama_block, [student_block], "✓",
                  "llama_block: matches the Llama block on 2 random blocks with grouped-query "
                  "heads.") == [student_block]

    def with_its_ff(block, x):  # right numbers, but the library's norm and feed-forward layer
        h = student_block(block, x)
        return h - my_swiglu(block.norm2(h), block.ff) + block.ff(block.norm2(h))

    expect(capsys, ex11.llama_block, [with_its_ff], "✗", "calls block.norm2's own forward")
    expect(capsys, ex11.llama_block, [lambda b, x: x * 2], "✗", "differs from the reference by")


def test_the_block_reference_is_the_blocks_own_forward():
    for block, x in ex11._block_inputs():
        T = x.shape[1]
        with torch.no_grad():
            own = block(x, torch.arange(T), torch.ones(T, T, dtype=torch.bool).tril())
            assert torch.allclose(ex11._block(block, x), own, atol=1e-6)
