"""The exercises of notebook 07 (masks, decoders and generation), checked.

- `causal_mask` (implement): the (T, T) bool mask of a decoder, True on and below the diagonal,
  against `attnlab.causal_mask`;
- `unmasked_generation` (predict): the share of the sorted digits that the model trained
  without the mask gets right when it writes them itself, guessed before it is measured;
- `one_step_ahead` (explore): how much of the unmasked model's attention sits exactly one
  position ahead of each query, read off its attention maps.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import torch

from ..attention import causal_mask as reference_mask
from ..report import fmt
from . import (
    RIGHT,
    TODO,
    WRONG,
    _kind,
    call_safely,
    check_number,
    check_prediction,
    say,
    tensor_problem,
    untouched,
)

SIZES = (1, 4, 7)  # the sequence lengths a causal_mask is tried on


def _mask_problem(got, T: int) -> str | None:
    """What is wrong with `got` as causal_mask(T), in words that point at the mistake."""
    expected = reference_mask(T)  # (T, T)
    name = f"causal_mask({T})"
    is_mask = isinstance(got, torch.Tensor) and got.dtype == torch.bool
    if not is_mask or got.shape != expected.shape:
        return tensor_problem(got, expected, name=name)  # None, a wrong type, shape or dtype
    if torch.equal(got, expected):
        return None
    if torch.equal(got, expected.T):
        return (f"{name} lets each query see the future and not the past (the transpose): rows "
                f"are queries, columns keys")
    if torch.equal(got, expected & ~torch.eye(T, dtype=torch.bool)):
        return f"{name} hides the diagonal, but a position may attend to itself"
    wrong = int((got != expected).sum())
    return f"{name} has {wrong} of {T * T} entries wrong"


def causal_mask(fn, *, seconds: float | None = None):
    """Your `fn(T) -> (T, T) bool tensor` against `attnlab.causal_mask` for T in SIZES.

    Returns `fn` when it is right for every T, else `attnlab.causal_mask`.
    """
    name = "causal_mask"
    hint = ("row i is query i and may attend to columns j <= i; compare torch.arange(T) with "
            "itself as a column, or look at torch.tril.")
    if untouched(fn):
        say(TODO, f"{name}: not attempted yet; write your function above and run the cell again.")
        return reference_mask
    if not callable(fn):
        say(WRONG, f"{name}: expected a function, got {_kind(fn)}.", hint)
        return reference_mask
    for i, T in enumerate(SIZES):
        got, problem = call_safely(fn, T, seconds=seconds)
        if problem is None and got is None and i == 0:
            say(TODO, f"{name}: not attempted yet (your function returns None); replace the `...` "
                      "and run the cell again.")
            return reference_mask
        problem = problem or _mask_problem(got, T)
        if problem is not None:
            say(WRONG, f"{name}: {problem}.", hint)
            return reference_mask
    say(RIGHT, f"{name}: matches attnlab's causal_mask for T = {', '.join(map(str, SIZES))}.")
    return fn


def unmasked_generation(guess, measured):
    """Your guess for the unmasked model's generated accuracy against the measured one (±0.15)."""
    return check_prediction(
        guess, measured, name="predict the unmasked model's generated accuracy", tolerance=0.15,
        lesson="Trained with the answer in view, it learned to copy the next token, not to sort; "
               "writing on its own, there is no next token to copy.")


def one_step_ahead_share(weights: torch.Tensor) -> float:
    """Mean weight on key t + 1 over the queries t that have one, for weights (..., T, T)."""
    return float(torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).mean())


def one_step_ahead(answer, weights: torch.Tensor):
    """Your number against the mean attention weight on the position right after each query
    (within 0.005), measured on `weights` (..., T, T). Returns your number or the measured one."""
    measured = one_step_ahead_share(weights)
    return check_number(
        answer, lambda value: abs(value - measured) <= 0.005, name="one step ahead",
        expected="the mean weight a query puts on the position right after it, between 0 and 1",
        hint="torch.diagonal(w, offset=1, dim1=-2, dim2=-1) holds the weight of every query t on "
             "key t + 1; average it over all its entries.",
        reference=measured,
        success=f"{fmt(measured, 2)} of the weight sits on the very token each position is asked "
                f"to predict.")
