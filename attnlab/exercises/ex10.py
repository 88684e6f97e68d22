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

import numpy as np
import torch

from ..gguf import Q4_1, dequantize
from ..report import fmt
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
