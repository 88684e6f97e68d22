"""The exercises of notebook 10 (in-context learning and induction heads), checked.

- `induction_score` (implement): a head's induction score from its attention maps, against
  `attnlab.core.measures.induction_score`;
- `one_layer_loss` (predict): the one-layer model's loss on the repeated tokens;
- `induction_layer` (predict): which layer of the two-layer model holds the induction heads;
- `shorter_repeat` (explore): the two-layer model's loss on the repeated tokens of test
  sequences whose repeat is 2, 3, ..., 12 tokens long, shorter than any it was trained on and
  then those; the check measures the same (never printing a number) and names the one-layer
  model's losses, the random tokens' and the lengths in reverse order.
"""
from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import torch

from ..core.measures import induction_score as reference_score
from ..core.measures import previous_occurrence, previous_token_score
from ..core.recipes import INDUCTION
from ..lessons.induction import evaluate_by_length, train_induction
from ..plumbing.report import fmt
from . import Implement, Like, Predict, Verdict, _kind, as_number, check_answer, exercise

# --- the induction score ---------------------------------------------------------------------


def _score_inputs(seed: int = 9) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights, tokens) pairs: random causal attention maps (B, H, T, T) in float64 and token
    sequences whose first k tokens are all different and whose others repeat them, some three
    times or more (so the first and the last earlier occurrence differ). Every sequence has
    the same number of queries with an earlier occurrence, so that a mean per sequence and a
    mean over the batch agree."""
    g = torch.Generator().manual_seed(seed)
    inputs = []
    for B, H, T, k in ((3, 2, 10, 4), (2, 3, 12, 3)):
        first = torch.stack([torch.randperm(8, generator=g)[:k] for _ in range(B)])  # (B, k)
        later = first.gather(1, torch.randint(0, k, (B, T - k), generator=g))  # (B, T - k)
        tokens = torch.cat([first, later], dim=1)  # (B, T)
        scores = torch.randn(B, H, T, T, generator=g, dtype=torch.float64)  # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T)
        inputs.append((torch.softmax(scores.masked_fill(future, float("-inf")), -1), tokens))
    return inputs


def _at(weights, keys, counted):
    """Each head's mean weight from query t to key keys[b, t], over the queries where
    counted[b, t] (and the batch): (H,)."""
    B, H, T, _ = weights.shape
    w = weights.gather(-1, keys.clamp(0, T - 1)[:, None, :, None].expand(B, H, T, 1))[..., 0]
    counted = counted.to(weights.dtype)  # (B, T)
    return (w * counted[:, None]).sum((0, 2)) / counted.sum()  # (H,)


def _first(tokens):
    """For each position t, the first position s < t holding the same token, or T: (B, T)."""
    T = tokens.shape[1]
    pos = torch.arange(T)
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & (pos < pos[:, None])  # (B, T, T)
    return torch.where(earlier, pos, T).amin(-1)


def _had(tokens):  # (B, T): the queries whose token occurred before
    return previous_occurrence(tokens) >= 0


PREVIOUS_TOKEN = "you scored key t - 1, the token right before the query: that is the " \
                 "previous-token score"

induction_score = Implement(
    "induction_score", reference_score, _score_inputs, what="your score",
    view=lambda score, *_: score.double(),  # a float32 score is named by its mistake too
    success="matches attnlab.core.measures.induction_score on 2 batches of random attention maps",
    mistakes=[
        Like(lambda w, t: _at(w, previous_occurrence(t), _had(t)),
             "you scored the previous occurrence itself (key s); an induction head reads the "
             "token AFTER it (key s + 1), the one it is about to copy"),
        Like(lambda w, t: _at(w, (torch.arange(t.shape[1]) - 1).expand_as(t), _had(t)),
             PREVIOUS_TOKEN),
        Like(lambda w, t: previous_token_score(w), PREVIOUS_TOKEN),
        Like(lambda w, t: _at(w, _first(t) + 1, _had(t)),
             "you took the first earlier occurrence of the token; take the most recent one (the "
             "last s < t)"),
        Like(lambda w, t: _at(w, previous_occurrence(t) + 1, torch.ones_like(t)),
             "you counted every query, also those whose token is new there (it has no previous "
             "occurrence): average over the queries that have one"),
    ],
    hint=("for every query t, first find s, the last earlier position holding the same "
          "token; the score reads the weight on the key one place after s.",
          "compare the tokens with each other as a (B, T, T) table, keep the pairs with "
          "s < t, take the largest such s per query (-1 if none), gather the weights at "
          "s + 1 and average them over the queries that have an s."))


one_layer_loss = Predict(
    "one_layer_loss", tolerance=0.4, digits=2, example=2.7,
    lesson="One layer can favour the tokens it has already seen in the sequence (below "
           "ln 32 = 3.47), but it cannot tell which one comes next: that takes two steps.")

induction_layer = Predict(
    "induction_layer", tolerance=0.0, digits=0, example=2,
    lesson="The induction head matches its query with a key that says which token came "
           "before that key; only a layer below can have written that into the key's "
           "position.")


# --- explore: shorter repeats --------------------------------------------------------------------

LENGTHS = range(2, 13)  # the exploration's repeat lengths: shorter than any trained on, then those


def _losses(answer) -> tuple[list[float] | None, str | None]:
    """(one float per length in LENGTHS, None) or (None, what is wrong with the answer); a dict
    {length: loss} with LENGTHS as its keys is read in their order."""
    n = len(LENGTHS)
    if isinstance(answer, dict) and sorted(answer, key=str) == sorted(LENGTHS, key=str):
        answer = [answer[length] for length in LENGTHS]
    if isinstance(answer, torch.Tensor | np.ndarray):
        answer = answer.tolist()
    if isinstance(answer, str | bytes | dict) or not isinstance(answer, Sequence):
        return None, f"your losses should be a list of {n} numbers, one per length in LENGTHS, " \
                     f"got {_kind(answer)}"
    if len(answer) != n:
        return None, f"expected {n} losses, one per length in LENGTHS (2 to 12), got {len(answer)}"
    values = []
    for length, loss in zip(LENGTHS, answer, strict=True):
        value, problem = as_number(loss, f"your loss for length {length}")
        if problem:
            return None, problem
        values.append(value)
    return values, None


_measured: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its losses


def _by_length(model) -> list[dict]:
    """`evaluate_by_length(model, LENGTHS)`, measured once per model (`train_induction` hands
    the same model back): a check run again, or judged again by a grader, answers at once."""
    if model not in _measured:
        _measured[model] = evaluate_by_length(model, LENGTHS)
    return _measured[model]

@exercise("explore", args=(20,))
def shorter_repeat(answer, steps: int = INDUCTION.steps):
    """Your losses (nats), one per length n in LENGTHS, of the notebook's two-layer model on the
    repeated tokens of 500 test sequences whose repeat is n tokens long (`evaluate_by_length`);
    right where every one is within 0.1 nats. `steps` is the recipe's (the tests train a shorter
    run). The check measures the models itself (the notebook's are cached, so a student pays
    nothing more) and never prints a number of its own; the one-layer model's losses, the random
    tokens' and the lengths in reverse order are named."""
    two, one = (_by_length(train_induction(n, steps=steps).model) for n in (2, 1))
    reference = [r["repeated"] for r in two]
    mistakes = [
        (reference[::-1], "your losses run from length 12 down to 2; LENGTHS runs from 2 up to 12"),
        ([r["repeated"] for r in one], "those are the one-layer model's losses; measure the "
                                       "two-layer one (two.model)"),
        ([r["random"] for r in two], "that looks like the loss on the random tokens; take the "
                                     "repeated ones"),
    ]

    def near(values, expected, tolerance):
        return all(abs(v - e) <= tolerance for v, e in zip(values, expected, strict=True))

    def judge(answer):
        values, problem = _losses(answer)
        if problem:
            return problem
        if near(values, reference, 0.1):
            return Verdict.right(value=values)
        for wrong, what in mistakes:
            if near(values, wrong, 0.02):
                return what
        if max(values) - min(values) < 1e-9:
            return ("every length gives the same loss: make a new test batch for each length, "
                    "with repeat=(n, n)")
        length, value = next((n, v) for n, v, e in zip(LENGTHS, values, reference, strict=True)
                             if abs(v - e) > 0.1)
        return (f"your loss for length {length}, {fmt(value, 2, guard=False)} nats, is not what "
                "the experiment gives (the two-layer model, a batch with repeat=(n, n), its "
                "repeated tokens)")

    return check_answer(
        answer, judge, name="shorter_repeat", reference=reference,
        success="those are the losses the experiment gives at every length",
        hint=("for each length n, make a test batch whose repeat is n tokens long and measure "
              "the model of the sections above (two.model) on it.",
              "repeat_task(N_TEST, seed=TEST_SEED, repeat=(n, n)) makes the batch; evaluate(model, "
              "batch) returns the loss on the repeated tokens and on the random ones: keep the "
              "first, one per length, in the order of LENGTHS."),
        todo="not attempted yet; run the experiment and put the losses in `by_length`.")
