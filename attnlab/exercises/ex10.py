"""The exercises of notebook 10 (in-context learning and induction heads), checked.

- `induction_score` (implement): a head's induction score from its attention maps, against
  `attnlab.core.measures.induction_score`;
- `one_layer_loss` (predict): the one-layer model's loss on the repeated tokens;
- `induction_layer` (predict): which layer of the two-layer model holds the induction heads;
- `shorter_repeat` (explore): train the two-layer model on repeats of 3 to 6 tokens and report
  its loss on the repeated tokens; the check runs the same experiment (cached, so a student
  who ran it pays nothing more) and never prints the number; the loss of the model trained on
  the usual repeats and the loss on the random tokens are named.
"""
from __future__ import annotations

import torch

from ..core.measures import induction_score as reference_score
from ..core.measures import previous_occurrence, previous_token_score
from ..core.recipes import INDUCTION
from ..lessons.induction import N_TEST, TEST_SEED, evaluate, repeat_task, train_induction
from ..plumbing.report import fmt
from . import Implement, Like, Predict, as_number, check_answer, exercise

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


# --- explore: a shorter repeat -------------------------------------------------------------------

SHORT = (3, 6)  # the shorter repeats of the exploration


@exercise("explore", args=(20,))
def shorter_repeat(answer, steps: int = INDUCTION.steps):
    """Your loss (nats) on the repeated tokens of the notebook's `short_test` (500 sequences,
    `repeat_task(N_TEST, seed=TEST_SEED, repeat=(3, 6))`) of the two-layer model trained by the
    recipe on repeats of 3 to 6 tokens (`train_induction(2, repeat=(3, 6))`); right within 0.1
    nats. `steps` is the recipe's (the tests train a shorter run)."""
    test = repeat_task(N_TEST, seed=TEST_SEED, repeat=SHORT)
    short = evaluate(train_induction(2, repeat=SHORT, steps=steps).model, test)
    long_model = train_induction(2, steps=steps).model  # trained on the usual 6-12 repeats
    long_test = repeat_task(N_TEST, seed=TEST_SEED)  # the notebook's usual test sequences
    the_long_one = ("that is the model trained on repeats of 6 to 12 tokens; train a new model "
                    "on repeats of 3 to 6")
    mistakes = [
        (evaluate(long_model, test)["repeated"], the_long_one),
        (evaluate(long_model, long_test)["repeated"], the_long_one),
        (short["random"], "that looks like the loss on the random tokens; take the repeated ones"),
    ]

    def judge(answer):
        value, problem = as_number(answer, "your loss")
        if problem:
            return problem
        if abs(value - short["repeated"]) <= 0.1:
            return None
        for wrong, what in mistakes:
            if abs(value - wrong) <= 0.02:
                return what
        return (f"{fmt(value, 2, guard=False)} nats is not the loss the experiment gives "
                "(train on repeats of 3 to 6 tokens, then measure the repeated tokens of "
                "short_test)")

    return check_answer(
        answer, judge, name="shorter_repeat", reference=short["repeated"],
        success="that is the loss the experiment gives",
        hint=("train with train_induction(2, repeat=(3, 6)) and measure that model, not the "
              "one of the sections above.",
              "evaluate(model, short_test) returns the loss on the repeated tokens and on the "
              "random ones; report the first."),
        todo="not attempted yet; run the experiment and put the loss in `short_loss`.")
