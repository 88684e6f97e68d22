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
    check_function,
    check_number,
    check_prediction,
    exercise,
    tensor_problem,
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


@exercise("implement")
def causal_mask(fn, *, seconds: float | None = None):
    """Your `fn(T) -> (T, T) bool tensor` against `attnlab.causal_mask` for T in SIZES.

    Returns `fn` when it is right for every T, else `attnlab.causal_mask`.
    """
    return check_function(
        fn, reference_mask, [(T,) for T in SIZES], name="causal_mask", seconds=seconds,
        hint=("row i is query i and may attend to columns j <= i; compare torch.arange(T) with "
              "itself as a column, or look at torch.tril."),
        compare=lambda got, expected, T: _mask_problem(got, T),
        success=f"matches attnlab's causal_mask for T = {', '.join(map(str, SIZES))}")


@exercise("predict", args=(0.42,))
def unmasked_generation(guess, measured):
    """Your guess for the unmasked model's generated accuracy against the measured one (±0.15)."""
    return check_prediction(
        guess, measured, name="predict the unmasked model's generated accuracy", tolerance=0.15,
        lesson="Trained with the answer in view, it learned to copy the next token, not to sort; "
               "writing on its own, there is no next token to copy.")


def _one_step_ahead_share(weights: torch.Tensor) -> float:
    """Mean weight on key t + 1 over the queries t that have one, for weights (..., T, T)."""
    return float(torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).mean())


def _example_weights(seed: int = 0) -> torch.Tensor:
    """Attention weights (10, 2, 6, 6) as the unmasked model's, made up: random rows pulled
    towards the next position."""
    ahead = 3.0 * torch.diag(torch.ones(5), 1)  # (6, 6)
    scores = torch.randn(10, 2, 6, 6, generator=torch.Generator().manual_seed(seed))
    return torch.softmax(scores + ahead, dim=-1)  # (10, 2, 6, 6)


@exercise("explore", args=lambda: (_example_weights(),))
def one_step_ahead(answer, weights: torch.Tensor):
    """Your number against the mean attention weight on the position right after each query
    (within 0.005), measured on `weights` (..., T, T). Returns your number or the measured one."""
    measured = _one_step_ahead_share(weights)
    return check_number(
        answer, lambda value: abs(value - measured) <= 0.005, name="one step ahead",
        expected="the mean weight a query puts on the position right after it, between 0 and 1",
        hint="torch.diagonal(w, offset=1, dim1=-2, dim2=-1) holds the weight of every query t on "
             "key t + 1; average it over all its entries.",
        reference=measured,
        success=f"{fmt(measured, 2)} of the weight sits on the very token each position is asked "
                f"to predict.")
