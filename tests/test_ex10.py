"""Notebook 10's checks: the right answers get ✓, the typical mistakes are named."""
import functools
import math

import torch
import torch.nn.functional as F
from exercise_doubles import expect

from attnlab.exercises import ex10
from attnlab.rope import rotary


def right(block):
    d, m = block[:4].view(torch.float16).float()
    return d * torch.cat([block[4:] & 15, block[4:] >> 4]).float() + m


def swapped(block):
    m, d = block[:4].view(torch.float16).float()
    return d * torch.cat([block[4:] & 15, block[4:] >> 4]).float() + m


def test_dequantize_a_block(capsys):
    assert expect(capsys, ex10.dequantize_q4_1, [right], "✓", "4 Q4_1 blocks")[0] is right
    for fn, words in [
        (lambda b: right(b).view(2, 16).T.flatten(), "interleaved the halves"),
        (lambda b: torch.cat([right(b)[16:], right(b)[:16]]), "high halves first"),
        (lambda b: right(b) - b[2:4].view(torch.float16).float(), "left out the minimum"),
        (swapped, "you swapped d and m"),
        (lambda b: right(b)[:16], "has shape (16,), expected (32,)"),
        (lambda b: right(b).double(), "dtype torch.float64"),
    ]:
        got = expect(capsys, ex10.dequantize_q4_1, [fn], "✗", words)[0]
        block = ex10._blocks()[0][0]
        assert torch.equal(got(block), right(block))  # the reference, for the cells below


def test_repeat_loss(capsys):
    expect(capsys, ex10.repeat_loss, [3.0], "✎", "measured 3.40 (within 1.5)", 3.4)
    assert expect(capsys, ex10.repeat_loss, [10.0], "✎", "(6.60 apart)", 3.4) == [None]



def test_heads_to_break_copy(capsys):
    curve = {1: 4.0, 2: 6.5, 3: 7.2, 4: 9.0}  # half of 14 is first reached at k = 3
    calls = []

    def loss(k):
        calls.append(k)
        return curve.get(k, 12.0)

    check = ex10.heads_to_break_copy
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

    check = ex10.heads_to_break_copy
    expect(capsys, check, [...], "○", "not attempted yet", loss, 14.0)  # nothing ran yet
    expect(capsys, check, [...], "○", "not attempted yet", loss, 14.0)  # the check's own calls
    for k in range(1, 3):  # a loop that stops too soon and sets nothing (cache hits only)
        if loss(k) >= 7.0:
            break
    assert expect(capsys, check, [...], "✗", "your code called copy_loss_without: the loop "
                  "ended without setting heads_needed", loss, 14.0) == [3]
    assert expect(capsys, check, [3], "✓", "fewest heads", loss, 14.0) == [3]


def my_rms(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def test_rms_norm(capsys):
    assert expect(capsys, ex10.rms_norm, [my_rms], "✓", "2 random inputs")[0] is my_rms
    for fn, words in [
        (lambda x, w, e: (x - x.mean(-1, keepdim=True)) / torch.sqrt(
            (x - x.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True) + e) * w,
         "you subtracted the mean: that is LayerNorm"),
        (lambda x, w, e: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + e) * w,
         "eps is added after the square root"),
        (lambda x, w, e: my_rms(x, torch.ones_like(w), e), "the learned weight is missing"),
        (lambda x, w, e: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + e) * w,
         "RMS takes their mean"),
    ]:
        expect(capsys, ex10.rms_norm, [fn], "✗", words)


def my_swiglu(x, ff):
    return ff.down(F.silu(ff.gate(x)) * ff.up(x))


def test_swiglu(capsys):
    assert expect(capsys, ex10.swiglu, [my_swiglu], "✓", "2 random inputs")[0] is my_swiglu
    for fn, words in [
        (lambda x, ff: ff.down(ff.gate(x) * F.silu(ff.up(x))), "on the `up` branch"),
        (lambda x, ff: ff.down(F.relu(ff.gate(x)) * ff.up(x)), "that is ReLU on the gate"),
        (lambda x, ff: ff.down(F.gelu(ff.gate(x)) * ff.up(x)), "GEGLU"),
        (lambda x, ff: ff.down(torch.sigmoid(ff.gate(x)) * ff.up(x)), "(GLU)"),
        (lambda x, ff: ff.down(F.silu(ff.up(x))), "the gate is missing"),
        (lambda x, ff: F.silu(ff.gate(x)) * ff.up(x), "has shape (2, 3, 12), expected (2, 3, 8)"),
    ]:
        expect(capsys, ex10.swiglu, [fn], "✗", words)


def student_block(block, x, *, pre=True, rotate="qk", tile=False, causal=True, d_scale=None):
    """The Llama block as a student writes it; each keyword is one classic mistake."""
    a = block.attn
    B, T, d = x.shape
    H, H_kv, D = a.n_heads, a.n_kv_heads, a.d_head

    def norm(n, t):
        return my_rms(t, n.weight, n.eps)

    def attention(h):
        q = a.q(h).view(B, T, H, D).transpose(1, 2)
        k = a.k(h).view(B, T, H_kv, D).transpose(1, 2)
        v = a.v(h).view(B, T, H_kv, D).transpose(1, 2)
        q = rotary(q, base=a.rotary_base) if "q" in rotate else q
        k = rotary(k, base=a.rotary_base) if "k" in rotate else k
        v = rotary(v, base=a.rotary_base) if "v" in rotate else v
        if tile:
            k, v = k.repeat(1, H // H_kv, 1, 1), v.repeat(1, H // H_kv, 1, 1)
        else:
            k, v = k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_scale or D)
        if causal:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
        return a.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d))

    if not pre:
        h = norm(block.norm1, x + attention(x))
        return norm(block.norm2, h + my_swiglu(h, block.ff))
    h = x + attention(norm(block.norm1, x))
    return h + my_swiglu(norm(block.norm2, h), block.ff)


def test_llama_block(capsys):
    assert expect(capsys, ex10.llama_block, [student_block], "✓", "grouped-query heads")[0] \
        is student_block
    for mistake, words in [
        ({"pre": False}, "this is post-norm"),
        ({"rotate": ""}, "no rotary positions"),
        ({"rotate": "q"}, "only q is rotated"),
        ({"rotate": "qkv"}, "v is rotated too"),
        ({"tile": True}, "tiled (kv0, kv1, kv0, kv1)"),
        ({"causal": False}, "no causal mask"),
        ({"d_scale": 32}, "divided by √d_model"),
    ]:
        fn = functools.partial(student_block, **mistake)
        (got,) = expect(capsys, ex10.llama_block, [fn], "✗", words)
        block, x = ex10._block_inputs()[0]
        assert torch.equal(got(block, x), ex10._block(block, x)), words  # the reference


def test_llama_block_refuses_the_librarys_parts(capsys):
    """Calling the block (or its attention, norms or feed-forward layer) earns no ✓."""
    def whole(block, x):
        T = x.shape[1]
        return block(x, torch.arange(T), torch.ones(T, T, dtype=torch.bool).tril())[0]

    def with_its_ff(block, x):
        h = student_block(block, x)
        return h - my_swiglu(block.norm2(h), block.ff) + block.ff(block.norm2(h))

    expect(capsys, ex10.llama_block, [whole], "✗", "calls the block's own forward")
    expect(capsys, ex10.llama_block, [with_its_ff], "✗", "calls block.norm2's own forward")


def test_the_block_reference_is_the_blocks_own_forward():
    for block, x in ex10._block_inputs():
        T = x.shape[1]
        with torch.no_grad():
            own = block(x, torch.arange(T), torch.ones(T, T, dtype=torch.bool).tril())[0]
        assert torch.allclose(ex10._block(block, x), own, atol=1e-6)
