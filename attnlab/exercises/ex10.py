"""The exercises of notebook 10 (a real language model), checked.

- `dequantize_q4_1` (implement): one Q4_1 block of the GGUF file (20 bytes) -> its 32 numbers,
  against `attnlab.gguf.dequantize`; interleaving the two halves of each byte, the high half
  first, swapping d and m, and forgetting the minimum m are named in the ✗ line;
- `repeat_loss` (predict): the loss on the repeated copy of a random sequence, guessed before
  it is measured;
- the induction score of notebook 09 is written again and checked by `ex09.induction_score`;
- `heads_to_break_copy` (explore): how many of the top induction heads must be made uniform
  before the loss on the repeated copy reaches half the first copy's; the check calls the
  notebook's own `copy_loss_without(k)` for k and k - 1 (cached there, so a student who ran the
  experiment pays nothing more) and never prints the number; a loop that ran (the cache holds
  entries) and left `heads_needed` at `...` is told so (✗), not "not attempted".

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from ..blocks import LlamaBlock, SwiGLU
from ..gguf import Q4_1, dequantize
from ..report import fmt
from ..rope import rotary
from . import (
    Verdict,
    as_number,
    check_answer,
    check_function,
    check_prediction,
    exercise,
    tensor_problem,
)

# --- dequantise a block --------------------------------------------------------------------------


def _blocks() -> list[tuple[torch.Tensor]]:
    """Q4_1 blocks of 20 bytes (uint8 tensors): a float16 scale d, a float16 minimum m, then 16
    bytes of nibbles."""
    g = np.random.default_rng(10)
    out = []
    for d, m in ((0.01, -0.07), (0.5, 2.0), (1e-3, 0.0), (0.02, -0.16)):
        head = np.array([d, m], np.float16).view(np.uint8)
        block = np.concatenate([head, g.integers(0, 256, 16, dtype=np.uint8)])
        out.append((torch.from_numpy(block),))
    return out


def _reference(block: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(dequantize(block.numpy(), Q4_1))


def _mistakes(block: torch.Tensor) -> list[tuple[torch.Tensor, str]]:
    d, m = block[:4].view(torch.float16).float()
    low, high = (block[4:] & 15).float(), (block[4:] >> 4).float()
    return [
        (d * torch.stack([low, high], 1).flatten() + m,
         "you interleaved the halves (number 2i from the low half of byte i, 2i + 1 from its "
         "high half); in Q4_1 the 16 low halves are numbers 0-15 and the 16 high halves 16-31"),
        (d * torch.cat([high, low]) + m,
         "you took the high halves first; the low halves (byte & 15) are numbers 0-15"),
        (d * torch.cat([low, high]), "you left out the minimum m: x = d·q + m"),
        (m * torch.cat([low, high]) + d,
         "you swapped d and m: bytes 0-1 are the scale d, bytes 2-3 the minimum m (x = d·q + m)"),
    ]


def _block_problem(got, expected: torch.Tensor, block: torch.Tensor) -> str | None:
    problem = tensor_problem(got, expected, name="your numbers", atol=1e-6)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return problem
    for wrong, what in _mistakes(block):
        if torch.allclose(got.float(), wrong, atol=1e-6, rtol=1e-5):
            return what
    return problem


@exercise("implement")
def dequantize_q4_1(fn):
    """Your `fn(block)`: 20 bytes (a uint8 tensor) -> the block's 32 numbers (float32)."""
    inputs = _blocks()
    return check_function(
        fn, _reference, inputs, name="dequantize_q4_1",
        compare=_block_problem,
        success=f"matches attnlab.gguf.dequantize on {len(inputs)} Q4_1 blocks",
        hint=("bytes 0-1 are d and bytes 2-3 are m, each a float16 "
              "(`block[:4].view(torch.float16)`); the other 16 bytes hold two 4-bit numbers each.",
              "q = torch.cat([qs & 15, qs >> 4]) gives numbers 0-15 then 16-31; "
              "return d * q.float() + m."))


# --- predict: the repeated copy ----------------------------------------------------------------

@exercise("predict", args=(3.4,))
def repeat_loss(guess, measured: float):
    """Your guess of the loss (nats) on the second copy of 50 random tokens; right within 1.5."""
    return check_prediction(
        guess, measured, name="repeat_loss", tolerance=1.5, digits=2,
        lesson="On the first copy the model can only guess (worse than the 10.8 nats of a "
               "uniform guess: it expects language); on the second it copies from its "
               "context, as the two-layer model of notebook 09 learned to.")


# --- explore: how many heads must go ----------------------------------------------------------

def _fake_curve(k: int) -> float:  # a stand-in copy_loss_without for the tests: 3.4 up to 14
    return min(14.0, 3.4 + 3.0 * k)


@exercise("explore", args=(_fake_curve, 14.0))
def heads_to_break_copy(answer, copy_loss_without, first_copy: float):
    """Your k: the fewest top induction heads that, made uniform, bring the loss on the repeated
    copy to half the first copy's loss or more (`copy_loss_without(k) >= first_copy / 2`)."""
    half = first_copy / 2

    def judge(answer):
        value, problem = as_number(answer, "your number of heads")
        if problem:
            return problem
        if value != int(value) or not 1 <= value <= 270:
            return f"{fmt(value, 2, guard=False)} is not a number of heads between 1 and 270"
        k = int(value)
        if copy_loss_without(k) < half:
            return (f"with the top {k} heads made uniform the repeated copy is still below "
                    "half the first copy's loss: take more heads")
        if k > 1 and copy_loss_without(k - 1) >= half:
            return f"fewer than {k} heads already bring the loss to half the first copy's"
        return None

    def smallest():  # the right answer, from the same (cached) losses
        k = 1
        while k < 270 and copy_loss_without(k) < half:
            k += 1
        return k

    todo = "not attempted yet; put the number of heads in `heads_needed`."
    calls = _calls(copy_loss_without)
    if calls > _calls_after_check.get(id(copy_loss_without), 0):
        todo = Verdict.wrong(
            "heads_needed is still `...`, though your code called copy_loss_without: the loop "
            "ended without setting heads_needed")
    result = check_answer(
        answer, judge, name="heads_to_break_copy", reference=smallest(),
        success="that is the fewest heads whose loss breaks the copy",
        hint=("try k = 1, 2, 3, ... with copy_loss_without(k) and stop at the first k whose "
              "loss reaches first_copy / 2.",
              "k = 1; while copy_loss_without(k) < first_copy / 2: k += 1"),
        todo=todo)
    _calls_after_check[id(copy_loss_without)] = _calls(copy_loss_without)
    return result


_calls_after_check: dict[int, int] = {}  # id(copy_loss_without) -> its calls when a check ended


def _calls(copy_loss_without) -> int:
    """How often a functools.cache'd function (the notebook's copy_loss_without) was called,
    cache hits included; 0 for a plain function, whose calls cannot be seen."""
    info = getattr(copy_loss_without, "cache_info", None)
    return info().hits + info().misses if info else 0


# --- implement: the pieces of a Llama block, then the block ------------------------------------

def _norm_inputs() -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """(x, weight, eps): rows whose mean is far from 0 (so that subtracting it shows), a batch."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10)
        return [(torch.randn(3, 8) + 2.0, torch.rand(8) + 0.5, 1e-5),
                (torch.randn(2, 5, 16) * 0.01 + 0.5, torch.rand(16) + 0.5, 1e-2)]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


def _norm_problem(got, expected, x, weight, eps) -> str | None:
    mean_square = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
    centred = x - x.mean(-1, keepdim=True)
    return _first_match(got, expected, [
        (centred / (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt() * weight,
         "you subtracted the mean: that is LayerNorm. RMSNorm divides x itself by its root "
         "mean square"),
        (x / (mean_square.sqrt() + eps) * weight,
         "eps is added after the square root: it goes under it, sqrt(mean(x²) + eps)"),
        (x / (mean_square + eps).sqrt(), "the learned weight is missing: multiply by it"),
        (x / (x.pow(2).sum(-1, keepdim=True) + eps).sqrt() * weight,
         "you divided by the root of the sum of squares: RMS takes their mean"),
    ])


def _first_match(got, expected, made: list[tuple[torch.Tensor, str]]) -> str | None:
    """The plain comparison of tensors, or the first typical mistake `got` equals."""
    problem = tensor_problem(got, expected, atol=1e-5)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return problem
    for wrong, what in made:
        if torch.allclose(got.float(), wrong.float(), atol=1e-5, rtol=1e-4):
            return what
    return problem


@exercise("implement")
def rms_norm(fn):
    """Your `fn(x, weight, eps)`: x / sqrt(mean(x²) + eps) · weight over the last axis, against
    torch's rms_norm (what nn.RMSNorm computes)."""
    return check_function(
        fn, _rms_norm, _norm_inputs(), name="rms_norm", compare=_norm_problem,
        hint=("LayerNorm subtracts the mean and divides by the standard deviation; RMSNorm "
              "only divides, by the root of the mean of the squares.",
              "x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight"))


def _ff_inputs() -> list[tuple[torch.Tensor, torch.nn.Module]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return [(torch.randn(2, 3, 8), SwiGLU(8, 12)), (torch.randn(5, 16), SwiGLU(16, 24))]


def _swiglu(x: torch.Tensor, ff) -> torch.Tensor:
    with torch.no_grad():
        return type(ff).forward(ff, x)


def _swiglu_problem(got, expected, x, ff) -> str | None:
    silu, f = torch.nn.functional.silu, torch.nn.functional
    with torch.no_grad():
        gate, up = ff.gate(x), ff.up(x)
        return _first_match(got, expected, [
            (ff.down(gate * silu(up)), "SiLU went on the `up` branch: it belongs on the gate"),
            (ff.down(f.relu(gate) * up), "that is ReLU on the gate; SwiGLU uses SiLU, x·σ(x)"),
            (ff.down(f.gelu(gate) * up), "that is GELU on the gate (GEGLU); SwiGLU uses SiLU"),
            (ff.down(torch.sigmoid(gate) * up), "that is σ(gate) (GLU); SiLU is gate·σ(gate)"),
            (ff.down(silu(up)), "the gate is missing: SiLU(gate(x)) multiplies up(x)"),
        ])


@exercise("implement")
def swiglu(fn):
    """Your `fn(x, ff)`: down(SiLU(gate(x)) ⊙ up(x)) with ff's three linear layers, against
    the block's own feed-forward layer."""
    return check_function(
        fn, _swiglu, _ff_inputs(), name="swiglu", compare=_swiglu_problem,
        hint=("two branches from x, one through SiLU, multiplied number by number, then "
              "brought back to d_model.",
              "ff.down(torch.nn.functional.silu(ff.gate(x)) * ff.up(x))"))


def _block_inputs() -> list[tuple[torch.nn.Module, torch.Tensor]]:
    """(block, x): small LlamaBlocks with grouped-query heads (4 query, 2 key/value heads), so
    that tiling the key/value heads instead of repeating each one shows."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(12)
        cases = []
        for B, T in ((1, 5), (2, 7)):
            block = LlamaBlock(32, 4, 2, 48, rotary_base=100.0).eval()
            for norm in (block.norm1, block.norm2):
                torch.nn.init.uniform_(norm.weight, 0.5, 1.5)  # not all 1: a missing one shows
            cases.append((block, torch.randn(B, T, 32)))
        return cases


def _block(block, x: torch.Tensor) -> torch.Tensor:
    """The block on a whole sequence from position 0 (x (B, T, d) -> (B, T, d)), computed from
    its weights without calling its parts (a student's block that calls this reference must
    not look as if it called them); tests/test_ex10.py checks it against the block's forward."""
    return _block_variant(block, x)


def _block_variant(block, x, *, pre: bool = True, rotate: str = "qk", tile: bool = False,
                   causal: bool = True, scale: float | None = None) -> torch.Tensor:
    """The block with one typical mistake (see `_BLOCK_MISTAKES`)."""
    attn, B, T, _ = block.attn, *x.shape
    H, H_kv, D = attn.n_heads, attn.n_kv_heads, attn.d_head
    f = torch.nn.functional

    def attend(h):
        q = attn.q(h).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = attn.k(h).view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        v = attn.v(h).view(B, T, H_kv, D).transpose(1, 2)
        if "q" in rotate:
            q = rotary(q, base=attn.rotary_base)
        if "k" in rotate:
            k = rotary(k, base=attn.rotary_base)
        if "v" in rotate:
            v = rotary(v, base=attn.rotary_base)
        grow = (lambda t: t.repeat(1, H // H_kv, 1, 1)) if tile else \
            (lambda t: t.repeat_interleave(H // H_kv, dim=1))  # (B, H, T, D)
        k, v = grow(k), grow(v)
        scores = q @ k.transpose(-2, -1) * (D ** -0.5 if scale is None else scale)
        if causal:
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        heads = scores.softmax(-1) @ v  # (B, H, T, D)
        return attn.out(heads.transpose(1, 2).reshape(B, T, H * D))

    def norm(n, t):
        return f.rms_norm(t, (t.shape[-1],), n.weight, n.eps)

    def ff(t):
        return _swiglu(t, block.ff)
    with torch.no_grad():
        if not pre:  # post-norm: add, then normalise
            h = norm(block.norm1, x + attend(x))
            return norm(block.norm2, h + ff(h))
        h = x + attend(norm(block.norm1, x))
        return h + ff(norm(block.norm2, h))


_BLOCK_MISTAKES = [
    ({"pre": False}, "this is post-norm (add, then normalise); the Llama block is pre-norm: "
                     "each part reads norm(x), and its output is added to x itself"),
    ({"rotate": ""}, "no rotary positions: rotate q and k by their positions before the scores"),
    ({"rotate": "q"}, "only q is rotated: rotate k too, so that q·k depends on the distance"),
    ({"rotate": "qkv"}, "v is rotated too: rotary turns only q and k, which make the scores"),
    ({"tile": True}, "your key/value heads are tiled (kv0, kv1, kv0, kv1): each key/value head "
                     "serves neighbouring query heads (kv0, kv0, kv1, kv1), repeat_interleave"),
    ({"causal": False}, "no causal mask: each token also reads the tokens after it"),
    ({"scale": 32 ** -0.5}, "your scores are divided by √d_model; divide by √d_head"),
]


def _llama_problem(got, expected, block, x) -> str | None:
    return _first_match(got, expected,
                        [(_block_variant(block, x, **change), what)
                         for change, what in _BLOCK_MISTAKES])


def _library_parts(block) -> list:
    """The block's own parts whose forward a student's block must not call."""
    return [block, block.attn, block.norm1, block.norm2, block.ff]


@exercise("implement")
def llama_block(fn):
    """Your `fn(block, x)`: the Llama block, pre-norm, written with your RMSNorm, rotary on q and
    k, grouped-query attention and your SwiGLU, computing with `block`'s weights (its layers q,
    k, v, out, gate, up, down and its norms' weights) but never calling the block, its
    attention, its norms or its feed-forward layer; against the block's own forward on small
    random blocks with 4 query and 2 key/value heads."""
    inputs = _block_inputs()
    called: list[str] = []

    def watched(block, x):  # the student's block, with the library's parts watched
        called.clear()
        names = ["the block", "block.attn", "block.norm1", "block.norm2", "block.ff"]
        handles = [part.register_forward_pre_hook(lambda m, a, n=n: called.append(n))
                   for part, n in zip(_library_parts(block), names)]
        try:
            with torch.no_grad():
                return fn(block, x)
        finally:
            for handle in handles:
                handle.remove()

    def compare(got, expected, block, x):
        if called:
            return (f"your block calls {called[0]}'s own forward: write that part with your "
                    "functions, from the block's weights")
        return _llama_problem(got, expected, block, x)

    if not callable(fn):
        watched_fn = fn  # check_function names what it got
    else:
        watched_fn = functools.wraps(fn)(watched)
    returned = check_function(
        watched_fn, _block, inputs, name="llama_block", compare=compare,
        success=f"matches the Llama block on {len(inputs)} random blocks with grouped-query "
                "heads",
        hint=("two residual steps: h = x + attention(rms_norm(x)), then h + swiglu(rms_norm(h)). "
              "Which tensors does rotary turn, and which query heads share a key/value head?",
              "q from block.attn.q, viewed (B, T, H, D) and transposed; k and v the same with "
              "H_kv heads; rotary(q) and rotary(k) with base block.attn.rotary_base; "
              "k.repeat_interleave(H // H_kv, dim=1) and v too; scores / √D with a causal mask; "
              "merge and block.attn.out."))
    return fn if returned is watched_fn else returned
