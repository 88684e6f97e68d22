"""The exercises of notebook 11 (a real language model), checked.

- `dequantize_q4_1` (implement): one Q4_1 block of the GGUF file (20 bytes) -> its 32 numbers;
- `repeat_loss` (predict): the loss on the repeated copy of a random sequence;
- (the induction score, written in notebook 10, is the library's `measures.induction_score`);
- `heads_to_break_copy` (explore): how many top induction heads, made uniform, bring the loss
  on the repeated copy to half the first copy's;
- `rms_norm`, `swiglu` (implement): the Llama block's norm and feed-forward layer;
- `llama_block` (implement): the whole block, from its weights, never calling its parts.

Each implement check's mistakes are its classic wrong answers, written as a student writes them.
"""
from __future__ import annotations

import contextlib
import math
import weakref

import numpy as np
import torch
from torch.nn import functional as F

from ..core.blocks import LlamaBlock, SwiGLU
from ..core.rope import rotary
from ..plumbing.report import fmt
from ..pretrained.gguf import Q4_1, dequantize
from . import (
    Implement,
    Like,
    Predict,
    Verdict,
    When,
    as_number,
    check_answer,
    exercise,
    result_problem,
)


def _float(t, *_):  # results are compared as float32: a float64 mistake is still named
    return t.float()


# --- dequantise a block --------------------------------------------------------------------------

def _blocks(seed: int = 10) -> list[tuple[torch.Tensor]]:
    """Q4_1 blocks of 20 bytes (uint8 tensors): a float16 scale d, a float16 minimum m, then 16
    bytes of nibbles."""
    g = np.random.default_rng(seed)
    out = []
    for d, m in ((0.01, -0.07), (0.5, 2.0), (1e-3, 0.0), (0.02, -0.16)):
        head = np.array([d, m], np.float16).view(np.uint8)
        block = np.concatenate([head, g.integers(0, 256, 16, dtype=np.uint8)])
        out.append((torch.from_numpy(block),))
    return out


def _reference(block: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(dequantize(block.numpy(), Q4_1))


def _d(b):  # the scale, bytes 0-1
    return b[:2].view(torch.float16).float()


def _m(b):  # the minimum, bytes 2-3
    return b[2:4].view(torch.float16).float()


def _low(b):  # (16,) the low halves of bytes 4-19
    return b[4:] & 15


def _high(b):
    return b[4:] >> 4


dequantize_q4_1 = Implement(
    "dequantize_q4_1", _reference, _blocks, what="your block of numbers", atol=1e-6, view=_float,
    refuse=(dequantize,), success="matches attnlab.pretrained.gguf.dequantize on 4 Q4_1 blocks",
    mistakes=[
        Like(lambda b: _d(b) * torch.stack([_low(b), _high(b)], 1).flatten() + _m(b),
             "you interleaved the halves (number 2i from the low half of byte i, 2i + 1 from "
             "its high half); in Q4_1 the 16 low halves are numbers 0-15 and the 16 high halves "
             "16-31"),
        Like(lambda b: _d(b) * torch.cat([_high(b), _low(b)]) + _m(b),
             "you took the high halves first; the low halves (byte & 15) are numbers 0-15"),
        Like(lambda b: _d(b) * torch.cat([_low(b), _high(b)]),
             "you left out the minimum m: x = d·q + m"),
        Like(lambda b: _m(b) * torch.cat([_low(b), _high(b)]) + _d(b),
             "you swapped d and m: bytes 0-1 are the scale d, bytes 2-3 the minimum m (x = d·q "
             "+ m)"),
    ],
    hint=("bytes 0-1 are d and bytes 2-3 are m, each a float16 "
          "(`block[:4].view(torch.float16)`); the other 16 bytes hold two 4-bit numbers each.",
          "q = torch.cat([qs & 15, qs >> 4]) gives numbers 0-15 then 16-31; "
          "return d * q.float() + m."))


# --- predict: the repeated copy ----------------------------------------------------------------

repeat_loss = Predict(
    "repeat_loss", tolerance=1.5, digits=2, example=3.4,
    lesson="On the first copy the model can only guess (worse than the 10.8 nats of a "
           "uniform guess: it expects language); on the second it copies from its "
           "context, as the two-layer model of notebook 10 learned to.")


# --- explore: how many heads must go ----------------------------------------------------------

def _fake_curve(k: int) -> float:  # a stand-in copy_loss_without for the tests: 3.4 up to 14
    return min(14.0, 3.4 + 3.0 * k)


@exercise("explore", args=(_fake_curve, 14.0))
def heads_to_break_copy(answer, copy_loss_without, first_copy: float):
    """Your k: the fewest top induction heads that, made uniform, bring the loss on the repeated
    copy to half the first copy's loss or more (`copy_loss_without(k) >= first_copy / 2`). The
    check calls the notebook's own (cached) `copy_loss_without` for k and k - 1 and never
    prints the number; a loop that ran (the cache holds calls since the last check) and left
    `heads_needed` at `...` gets ✗, not ○."""
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

    todo = "not attempted yet; put the number of heads in `heads_needed`."
    if _calls(copy_loss_without) > _calls_at_last_check(copy_loss_without):
        todo = Verdict.wrong(
            "heads_needed is still `...`, though your code called copy_loss_without: the loop "
            "ended without setting heads_needed")
    k = 1  # the right answer, from the same (cached) losses, counted once the loop's are
    while k < 270 and copy_loss_without(k) < half:
        k += 1
    result = check_answer(
        answer, judge, name="heads_to_break_copy", reference=k, todo=todo,
        success="that is the fewest heads whose loss breaks the copy",
        hint=("try k = 1, 2, 3, ... with copy_loss_without(k) and stop at the first k whose "
              "loss reaches first_copy / 2.",
              "k = 1; while copy_loss_without(k) < first_copy / 2: k += 1"))
    with contextlib.suppress(TypeError):  # not weak-referenceable (no function): not remembered
        _calls_after_check[copy_loss_without] = _calls(copy_loss_without)
    return result


# copy_loss_without -> its calls when a check of it ended. Keyed by the function itself, held
# weakly, not by its id: re-running the cell defines a new function with an empty cache, and
# CPython may give it the id of one freed before, whose count would hide the new loop's calls.
_calls_after_check: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _calls_at_last_check(copy_loss_without) -> int:
    """The calls `copy_loss_without` had when the last check of it ended; 0 for one never
    checked (a cell run again defines a new function: its count starts at 0)."""
    try:
        return _calls_after_check.get(copy_loss_without, 0)
    except TypeError:  # not weak-referenceable (or unhashable)
        return 0


def _calls(copy_loss_without) -> int:
    """How often a functools.cache'd function (the notebook's copy_loss_without) was called,
    cache hits included; 0 for a plain function, whose calls cannot be seen."""
    info = getattr(copy_loss_without, "cache_info", None)
    return info().hits + info().misses if info else 0


# --- implement: the pieces of a Llama block, then the block ------------------------------------

def _norm_inputs(seed: int = 10) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """(x, weight, eps): rows whose mean is far from 0 (so that subtracting it shows), a batch."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [(torch.randn(3, 8) + 2.0, torch.rand(8) + 0.5, 1e-5),
                (torch.randn(2, 5, 16) * 0.01 + 0.5, torch.rand(16) + 0.5, 1e-2)]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _ms(x):  # (..., 1) the mean square of each row
    return x.pow(2).mean(-1, keepdim=True)


rms_norm = Implement(
    "rms_norm", _rms_norm, _norm_inputs, view=_float,
    mistakes=[
        Like(lambda x, w, eps: (x - x.mean(-1, keepdim=True))
             / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w,
             "you subtracted the mean: that is LayerNorm. RMSNorm divides x itself by its root "
             "mean square"),
        Like(lambda x, w, eps: x / (_ms(x).sqrt() + eps) * w,
             "eps is added after the square root: it goes under it, sqrt(mean(x²) + eps)"),
        Like(lambda x, w, eps: x / torch.sqrt(_ms(x) + eps),
             "the learned weight is missing: multiply by it"),
        Like(lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w,
             "you divided by the root of the sum of squares: RMS takes their mean"),
    ],
    hint=("LayerNorm subtracts the mean and divides by the standard deviation; RMSNorm "
          "only divides, by the root of the mean of the squares.",
          "x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight"))


def _ff_inputs(seed: int = 11) -> list[tuple[torch.Tensor, torch.nn.Module]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [(torch.randn(2, 3, 8), SwiGLU(8, 12)), (torch.randn(5, 16), SwiGLU(16, 24))]


def _swiglu(x: torch.Tensor, ff) -> torch.Tensor:
    """The layer's own forward, without calling the layer (no hook of `_watched` fires)."""
    with torch.no_grad():
        return type(ff).forward(ff, x)


swiglu = Implement(
    "swiglu", _swiglu, _ff_inputs, view=_float, refuse=(SwiGLU.forward,),
    mistakes=[
        Like(lambda x, ff: ff.down(ff.gate(x) * F.silu(ff.up(x))),
             "SiLU went on the `up` branch: it belongs on the gate"),
        Like(lambda x, ff: ff.down(F.relu(ff.gate(x)) * ff.up(x)),
             "that is ReLU on the gate; SwiGLU uses SiLU, x·σ(x)"),
        Like(lambda x, ff: ff.down(F.gelu(ff.gate(x)) * ff.up(x)),
             "that is GELU on the gate (GEGLU); SwiGLU uses SiLU"),
        Like(lambda x, ff: ff.down(torch.sigmoid(ff.gate(x)) * ff.up(x)),
             "that is σ(gate) (GLU); SiLU is gate·σ(gate)"),
        Like(lambda x, ff: ff.down(F.silu(ff.up(x))),
             "the gate is missing: SiLU(gate(x)) multiplies up(x)"),
    ],
    hint=("two branches from x, one through SiLU, multiplied number by number, then "
          "brought back to d_model.",
          "ff.down(torch.nn.functional.silu(ff.gate(x)) * ff.up(x))"))


def _block_inputs(seed: int = 12) -> list[tuple[torch.nn.Module, torch.Tensor]]:
    """(block, x): small LlamaBlocks with grouped-query heads (4 query, 2 key/value heads), so
    that tiling the key/value heads instead of repeating each one shows; watched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cases = []
        for B, T in ((1, 5), (2, 7)):
            block = LlamaBlock(32, 4, 2, 48, rotary_base=100.0).eval()
            for norm in (block.norm1, block.norm2):
                torch.nn.init.uniform_(norm.weight, 0.5, 1.5)  # not all 1: a missing one shows
            cases.append((_watched(block), torch.randn(B, T, 32)))
        return cases


def _watched(block):
    """The block, whose own parts write their name in `block.called` when their forward runs:
    a student's block computes with their weights (the layers q, k, v, out, gate, up, down,
    which are not watched) but never calls them."""
    block.called = []
    parts = {"the block": block, "block.attn": block.attn, "block.norm1": block.norm1,
             "block.norm2": block.norm2, "block.ff": block.ff}
    for name, part in parts.items():
        part.register_forward_pre_hook(lambda *_, name=name: block.called.append(name))
    return block


def _called(got, expected, block, x) -> str | None:
    if block.called:
        return (f"your block calls {block.called[0]}'s own forward: write that part with your "
                "functions, from the block's weights")
    return None


def _attention(block, h, *, rotate=lambda turn, q, k, v: (turn(q), turn(k), v),
               share=lambda t, n: t.repeat_interleave(n, dim=1), causal=True, scale=None):
    """Causal grouped-query self-attention from the block's weights, h (B, T, d) -> (B, T, d);
    each keyword is a step that a mistake of `llama_block` writes otherwise."""
    a, (B, T, _) = block.attn, h.shape
    H, H_kv, D = a.n_heads, a.n_kv_heads, a.d_head
    q = a.q(h).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = a.k(h).view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
    v = a.v(h).view(B, T, H_kv, D).transpose(1, 2)
    q, k, v = rotate(lambda t: rotary(t, base=a.rotary_base), q, k, v)
    k, v = share(k, H // H_kv), share(v, H // H_kv)  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) * (D ** -0.5 if scale is None else scale)  # (B, H, T, T)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    heads = scores.softmax(-1) @ v  # (B, H, T, D)
    return a.out(heads.transpose(1, 2).reshape(B, T, H * D))


def _norm(t, norm):  # the block's RMSNorm `norm`, from its weight
    return F.rms_norm(t, (t.shape[-1],), norm.weight, norm.eps)


def _block(block, x: torch.Tensor, **attention) -> torch.Tensor:
    """The block on a whole sequence from position 0 (x (B, T, d) -> (B, T, d)), computed from
    its weights without calling its parts (a student's block that calls this reference must
    not look as if it called them); tests/test_ex11.py checks it against the block's forward.
    `attention`: a mistake in the attention (see `_attention`)."""
    h = x + _attention(block, _norm(x, block.norm1), **attention)
    return h + _swiglu(_norm(h, block.norm2), block.ff)


def _post_norm(block, x: torch.Tensor) -> torch.Tensor:  # add, then normalise
    h = _norm(x + _attention(block, x), block.norm1)
    return _norm(h + _swiglu(h, block.ff), block.norm2)


# Your `fn(block, x)`: the pre-norm block with your RMSNorm, rotary on q and k, grouped-query
# attention and your SwiGLU, from `block`'s weights, never calling the block, its attention, its
# norms or its feed-forward layer (`_watched`); against the block's own forward.
llama_block = Implement(
    "llama_block", _block, _block_inputs, view=_float, no_grad=True,
    compare=lambda got, expected, *args: _called(got, expected, *args)
    or result_problem(got, expected),
    success="matches the Llama block on 2 random blocks with grouped-query heads",
    mistakes=[
        When(_called, _called, example=lambda b, x: b(
            x, torch.arange(x.shape[1]), torch.ones(x.shape[1], x.shape[1]).tril().bool())[0]),
        Like(_post_norm, "this is post-norm (add, then normalise); the Llama block is pre-norm: "
                         "each part reads norm(x), and its output is added to x itself"),
        Like(lambda b, x: _block(b, x, rotate=lambda turn, q, k, v: (q, k, v)),
             "no rotary positions: rotate q and k by their positions before the scores"),
        Like(lambda b, x: _block(b, x, rotate=lambda turn, q, k, v: (turn(q), k, v)),
             "only q is rotated: rotate k too, so that q·k depends on the distance"),
        Like(lambda b, x: _block(b, x, rotate=lambda turn, q, k, v: (turn(q), turn(k), turn(v))),
             "v is rotated too: rotary turns only q and k, which make the scores"),
        Like(lambda b, x: _block(b, x, share=lambda t, n: t.repeat(1, n, 1, 1)),
             "your key/value heads are tiled (kv0, kv1, kv0, kv1): each key/value head serves "
             "neighbouring query heads (kv0, kv0, kv1, kv1), repeat_interleave"),
        Like(lambda b, x: _block(b, x, causal=False),
             "no causal mask: each token also reads the tokens after it"),
        Like(lambda b, x: _block(b, x, scale=1 / math.sqrt(x.shape[-1])),
             "your scores are divided by √d_model; divide by √d_head"),
    ],
    hint=("two residual steps: h = x + attention(rms_norm(x)), then h + swiglu(rms_norm(h)). "
          "Which tensors does rotary turn, and which query heads share a key/value head?",
          "q from block.attn.q, viewed (B, T, H, D) and transposed; k and v the same with "
          "H_kv heads; rotary(q) and rotary(k) with base block.attn.rotary_base; "
          "k.repeat_interleave(H // H_kv, dim=1) and v too; scores / √D with a causal mask; "
          "merge and block.attn.out."))
