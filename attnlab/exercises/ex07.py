"""The exercises of notebook 07 (masks, decoders and generation), checked.

- `causal_mask` (implement): the (T, T) bool mask of a decoder, True on and below the diagonal,
  against `attnlab.causal_mask`;
- `unmasked_generation` (predict): the share of the sorted digits that the model trained
  without the mask gets right when it writes them itself, guessed before it is measured;
- `one_step_ahead` (explore): how much of the unmasked model's attention sits exactly one
  position ahead of each query, read off its attention maps;
- `padding_and_causal` (implement): one bool mask for a padded batch in a decoder, True where
  query i may attend key j (key j real and j <= i), that broadcasts to the scores
  (B, H, T, T); a mask on the wrong side, the future instead of the past, `|` for `&` and a
  shape that lines the batch up with the heads are named in the ✗ line.

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


# --- padding and causal, one mask -----------------------------------------------------------------

HEADS = 3  # the scores' H in the check; no batch of the inputs has 1 or 3 rows


def _padding_and_causal(real: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool: True where query i may attend key j, i.e. key j is real and j <= i."""
    return real[:, None, None, :] & reference_mask(real.shape[1])  # (B, 1, T, T)


def _real_inputs() -> list[tuple[torch.Tensor]]:
    """`real` (B, T) bool batches with padding on the right, on the left, on both sides and
    none, so that some real queries have padding keys in their past; B is never 1 or HEADS
    and T never B or HEADS, so that a (B, T, T) mask cannot broadcast by luck."""
    rows = ([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1]],                            # B = 2, T = 5
            [[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 1, 1, 1, 0, 0]])
    return [(torch.tensor(r, dtype=torch.bool),) for r in rows]


def _both_problem(got, expected: torch.Tensor, real: torch.Tensor) -> str | None:
    """What is wrong with `got` as the combined mask for `real`, naming the classic mistakes."""
    B, T = real.shape
    scores = (B, HEADS, T, T)
    if not isinstance(got, torch.Tensor):
        return tensor_problem(got, expected, name="your mask")
    if got.dtype != torch.bool:
        return f"your mask has dtype {got.dtype}, expected torch.bool (True: may attend)"
    try:
        fits = torch.broadcast_shapes(got.shape, scores) == scores
    except RuntimeError:
        fits = False
    if not fits:
        return (f"your mask of shape {tuple(got.shape)} does not broadcast to (B, H, T, T) = "
                f"{scores}, the scores' shape: shapes line up from the right, so a mask's axes "
                "must end in (batch, heads, queries, keys), with size 1 where it does not vary")
    got = got.expand(scores)
    causal = reference_mask(T)                             # (T, T)
    keys, queries = real[:, None, None, :], real[:, None, :, None]  # (B, 1, 1, T), (B, 1, T, 1)
    mistakes = (
        (queries & causal, "the padding mask is on the query side (rows): it must hide padding "
                           "keys (columns), whichever query looks"),
        (keys & causal.T, "the causal part lets each query see the future, not the past (it is "
                          "transposed): rows are queries, columns keys"),
        (keys | causal, "the two masks are combined with |: a key may be attended only when it "
                        "is real and in the past, both at once"),
        (~(keys & causal), "your mask is True where attention is forbidden; this one is True "
                           "where query i may attend key j"),
        (queries & keys & causal, "your mask also hides the padding queries' rows: only padding "
                                  "keys (columns) are to be hidden"),
        (causal.expand(B, 1, T, T), "only the causal part: padding keys are still visible"),
        (keys.expand(B, 1, T, T), "only the padding part: every query still sees the future"),
    )
    if torch.equal(got, expected.expand(scores)):
        return None
    for wrong, problem in mistakes:
        if torch.equal(got, wrong.expand(scores)):
            return problem
    return f"your mask differs from the reference in {int((got != expected).sum())} of " \
           f"{got.numel()} entries (after broadcasting to {scores})"


@exercise("implement")
def padding_and_causal(fn):
    """Your `fn(real)` -> a bool mask that broadcasts to the scores (B, H, T, T), True where
    query i may attend key j: key j is real (`real` (B, T) bool) and j <= i.

    Returns `fn` when it is right on every batch, else the reference, which returns
    (B, 1, T, T).
    """
    inputs = _real_inputs()
    return check_function(
        fn, _padding_and_causal, inputs, name="padding_and_causal", compare=_both_problem,
        success=f"matches the reference on {len(inputs)} padded batches, after broadcasting to "
                "(B, H, T, T)",
        hint=("two conditions must both hold for query i and key j, one about the key alone and "
              "one about the pair (i, j); give each the axes it lives on.",
              "make the padding part a (B, 1, 1, T) tensor (batch, heads, queries, keys), the "
              "causal part a (T, T) one, and combine them so that both must be True; "
              "broadcasting does the rest."))
