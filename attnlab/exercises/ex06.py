"""The exercises of notebook 06 (a pre-trained transformer), checked.

- `mean_pool` (implement): a sentence vector as the mean of its real tokens' vectors, scaled
  to length 1, against `MiniLM.pool`;
- `it_to_cat` (explore): the (layer, head) in which "it" attends most to "cat";
- `mask_cls` (predict): how similar the sentence vectors stay when [CLS] is hidden as a key.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use. The
implement check runs on small random tensors, not on the network.
"""
from __future__ import annotations

import torch

from ..minilm import MiniLM
from ..report import fmt
from . import (
    Verdict,
    _kind,
    as_number,
    check_answer,
    check_function,
    check_prediction,
    exercise,
    untouched,
)


def _pool_inputs(seed: int = 6) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(hidden (B, T, d), keep (B, T) bool) pairs: padded rows whose padding vectors are *not*
    zero (so including them shows), a batch without padding, and a single token."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for lengths, T, d in (([5, 3, 1], 5, 8), ([4, 4], 4, 6), ([1], 1, 3)):
        hidden = torch.randn(len(lengths), T, d, generator=g) + 0.5   # (B, T, d)
        keep = torch.arange(T) < torch.tensor(lengths)[:, None]       # (B, T)
        pairs.append((hidden, keep))
    return pairs


@exercise("implement")
def mean_pool(fn):
    """Your `fn(hidden, keep) -> (B, d)` against `MiniLM.pool`."""
    return check_function(
        fn, MiniLM.pool, _pool_inputs(), name="mean pooling",
        hint="zero the padding vectors (multiply by keep as a float, with a trailing dimension), "
             "sum over the tokens (dim=1), divide by the number of real tokens, then scale each "
             "row to length 1 (F.normalize(..., dim=1)).")


def _layer_head(answer, n_layers: int, n_heads: int) -> tuple[tuple[int, int] | None, str | None]:
    """((layer, head), None) or (None, what is wrong with the answer)."""
    if isinstance(answer, torch.Tensor) and answer.numel() == 2:
        answer = answer.flatten().tolist()
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return None, f"expected a pair (layer, head), got {_kind(answer)}"
    values = []
    for name, x, n in (("layer", answer[0], n_layers), ("head", answer[1], n_heads)):
        value, problem = as_number(x, f"the {name}")
        if problem:
            return None, problem
        if value != int(value) or not 0 <= value < n:
            return None, f"the {name} should be a whole number from 0 to {n - 1}, got {x!r}"
        values.append(int(value))
    return (values[0], values[1]), None


TOKENS = ["[CLS]", "the", "cat", "sat", "because", "it", "was", "tired", "[SEP]"]


def _example_maps(best: tuple[int, int] = (4, 7)) -> tuple[list[str], list[torch.Tensor]]:
    """(tokens, maps) as `minilm.attention_maps` returns them, made up: six layers of twelve
    random heads, each map (1, 12, T, T) with rows that sum to 1, in which head `best` looks
    from "it" to "cat" more than any other."""
    g = torch.Generator().manual_seed(0)
    T = len(TOKENS)
    maps = [torch.softmax(torch.randn(1, 12, T, T, generator=g), dim=-1) for _ in range(6)]
    row = torch.zeros(T)
    row[TOKENS.index("cat")] = 1.0
    maps[best[0]][0, best[1], TOKENS.index("it")] = row
    return TOKENS, maps


@exercise("explore", args=_example_maps)
def it_to_cat(answer, tokens: list[str], maps):
    """Your (layer, head) must be the one where "it" puts the largest weight on "cat".

    `tokens` and `maps` are what `minilm.attention_maps(sentence)` returned. Returns your pair
    when it is right, else the right one.
    """
    w = torch.stack([m[0] for m in maps])                        # (L, H, T, T)
    weights = w[:, :, tokens.index("it"), tokens.index("cat")]   # (L, H)
    best = divmod(int(weights.argmax()), weights.shape[1])

    def judge(answer):
        if isinstance(answer, tuple) and all(map(untouched, answer)):
            return Verdict.todo("not attempted yet; put your (layer, head) in the cell above.")
        pair, problem = _layer_head(answer, *weights.shape)
        if problem:
            return Verdict.wrong(problem, f"write e.g. (2, 7): layers count from 0 to "
                                          f"{weights.shape[0] - 1}, heads from 0 to "
                                          f"{weights.shape[1] - 1}.")
        got = weights[pair].item()
        if pair == best:
            return Verdict.right(
                f"layer {pair[0]}, head {pair[1]} puts {fmt(got, 2)} of \"it\"'s attention on "
                f"\"cat\", the most of all {weights.numel()} heads.", value=pair)
        return (f"layer {pair[0]}, head {pair[1]} puts {fmt(got, 2, guard=False)} of \"it\"'s "
                f"attention on \"cat\"; another head puts more")

    return check_answer(
        answer, judge, name='"it" → "cat"', reference=best,
        hint="for every layer, take the row of \"it\" and the column of \"cat\" in each head's "
             "(T, T) map, then find the largest of those numbers.",
        todo="not attempted yet; put your (layer, head) in the cell above.")


@exercise("predict", args=(0.61,))
def mask_cls(guess, measured):
    """Your guess of the mean cosine between the sentence vectors with and without [CLS] as a
    key, against the measured one (±0.1)."""
    return check_prediction(
        guess, measured, name="hide [CLS] as a key", tolerance=0.1, digits=2,
        lesson="The most attended token is not a no-op to remove: its weight must go somewhere, "
               "and it goes to the words.")
