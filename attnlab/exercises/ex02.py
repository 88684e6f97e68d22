"""The exercises of notebook 02 (why divide by √d_k), checked.

- `std_at_256` (predict): std(q·k) at d_k = 256, guessed before it is measured;
- `fold_scale` (implement): fold 1/√d_k into W_Q, so that the unscaled softmax of the folded
  queries equals scaled attention;
- `temperature` (explore): the temperature τ of softmax(q·k / τ) at which the mean largest
  weight is 0.5 (d_k = 64, 16 keys).

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import math

import torch

from ..report import fmt
from ..scaling import peak_weight_at_temperature
from . import Verdict, as_number, check_answer, check_function, check_prediction, exercise

TARGET, TOLERANCE = 0.5, 0.02  # the mean largest weight the explore exercise asks for
ANSWER = 3.52  # a τ that gives it (tests/test_ex02.py measures that it does)


@exercise("predict", args=(16.36,))
def std_at_256(guess, measured):
    """Your guess for std(q·k) at d_k = 256 against the measured value (±2 is right)."""
    return check_prediction(
        guess, measured, name="predict std(q·k) at d_k = 256", tolerance=2.0, digits=2,
        lesson="q·k adds d_k terms of variance 1: the variances add up, and std is the square "
               "root of the variance.")


def _folded(W_Q: torch.Tensor) -> torch.Tensor:
    """W_Q with 1/√d_k folded in; d_k is the width of each query, W_Q's last dimension."""
    return W_Q / math.sqrt(W_Q.shape[-1])


def _fold_inputs(seed: int = 2) -> list[tuple[torch.Tensor]]:
    """Random W_Q of shapes (d_model, d_k) with d_model ≠ d_k, and one per head (H, d_model, d_k),
    so that dividing by the wrong dimension or by a fixed number is caught."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(s, generator=g),) for s in ((32, 64), (64, 16), (4, 32, 8))]


@exercise("implement")
def fold_scale(fn):
    """Your `fn(W_Q) -> W_Q'` against `_folded`: softmax((X W_Q')(X W_K)ᵀ) is scaled attention."""
    return check_function(
        fn, _folded, _fold_inputs(), name="fold the scale into W_Q",
        hint="d_k is the size of one query: read it from W_Q's shape (its last dimension), and "
             "remember that the scores are divided by the square root of d_k.")


def _peak(temperature: float) -> float:
    """The mean largest weight at `temperature`, or NaN where it cannot be computed."""
    try:
        return peak_weight_at_temperature(temperature)
    except (TypeError, ValueError, OverflowError):
        return math.nan


@exercise("explore")
def temperature(answer):
    """Your τ must give a mean largest weight within TOLERANCE of TARGET (d_k = 64, 16 keys)."""
    expected = f"a τ > 0 with a mean largest weight of {TARGET} ± {TOLERANCE}"
    hint = "a larger τ flattens the softmax, a smaller one sharpens it."

    def judge(answer):
        value, problem = as_number(answer)
        if problem:
            return f"{problem} ({expected})"
        peak = _peak(value) if value > 0 else math.nan
        measured = f"at τ = {value:g} the mean largest weight is {fmt(peak, 3, guard=False)}"
        if math.isfinite(peak) and abs(peak - TARGET) <= TOLERANCE:
            return Verdict.right(f"{measured}.")
        return Verdict.wrong(f"{fmt(value, 4, guard=False)} does not satisfy it yet ({expected})",
                             f"{measured}; {hint}" if math.isfinite(peak) else hint)

    return check_answer(answer, judge, name="temperature for a peak of 0.5", reference=ANSWER,
                        hint=hint, todo="not attempted yet; put your number in the cell above.")
