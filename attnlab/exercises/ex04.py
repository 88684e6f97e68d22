"""The exercises of notebook 04 (reading an encoder's attention), checked.

- `attention_received` (implement): per key, the mean weight over the real queries;
- `zero_column` (implement): the decisive word's column zeroed after the softmax;
- `zeroed_accuracy` (predict): the test accuracy left with the first word's column zeroed;
- Going further, why scale: `score_spread` (implement), the spread of a layer's scaled scores;
  `spread_at_init` (predict), that spread before training; `accuracy_without_scale` (explore),
  the accuracy after 4 epochs with scale=1.0, judged against the curves the notebook measured
  (the series seed moves them); `folded_spread` (predict), which model's spread the folded one
  ends up with.

Each implement check's mistakes are its classic wrong answers, written as a student writes them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..core.attention import MultiHeadAttention
from ..core.measures import attention_received as _attention_received
from ..lessons.scaling import score_spread as reference_spread
from ..plumbing.report import fmt
from . import (
    Implement,
    Like,
    Predict,
    Verdict,
    _kind,
    alike,
    as_number,
    check_answer,
    exercise,
    prediction,
    tensor_problem,
)

# --- attention received ---------------------------------------------------------------------

def _batches(seed: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights (B, H, T, T), real (B, T)) pairs of a few shapes, reviews padded on the right:
    every row a softmax over the real keys, padding keys at exactly 0, and padding queries
    attending too (their rows are not 0), so that a mean over all queries differs from a mean
    over the real ones."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for lengths, T, heads in (([4, 2], 4, 1), ([5, 3, 7], 7, 4), ([6, 6, 2, 9], 9, 2)):
        real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        scores = torch.randn(len(lengths), heads, T, T, generator=g)  # (B, H, T, T)
        scores = scores.masked_fill(~real[:, None, None, :], float("-inf"))
        cases.append((torch.softmax(scores, dim=-1), real))
    return cases


ROWS = "you averaged rows (what each query gives), not columns (what each key receives)"

attention_received = Implement(
    "attention_received", _attention_received, _batches,
    changed=None,  # an answer that changes the weights in place is right (it gets a copy)
    mistakes=[
        Like(lambda w, r: w.mean(-2), "your mean counts the padding queries too: their rows are "
                                      "not 0, so leave them out"),
        Like(lambda w, r: w.mean(-1), ROWS),
        Like(lambda w, r: (w * r[:, None, None, :]).sum(-1) / r.sum(-1)[:, None, None], ROWS),
        Like(lambda w, r: (w * r[:, None, :, None]).sum(-2),
             "that is the sum over the real queries, not their mean"),
        Like(lambda w, r: (w * r[:, None, :, None]).sum(-2) / w.shape[-2],
             "you divided by T, the padded length, not by each review's number of real tokens"),
        Like(lambda w, r: (w * r[:, None, None, :]).sum(-2) / r.sum(-1)[:, None, None],
             "your sum still takes in the padding queries' rows (a mask on the keys changes "
             "nothing: they get 0)"),
    ],
    hint=("weights[b, h, i, j] is what query i gives key j. Along which axis run the weights a "
          "key receives, and which of them count?",
          "multiply by a 0/1 mask of the real queries that lines up with the query axis (dim "
          "-2), sum over that axis, and divide by the number of real tokens."))


# --- zero the decisive word's column after the softmax ----------------------------------------

def _zero_column(weights: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A copy of weights (B, H, T, T) with every query's weight on key pos[b] set to 0."""
    other = torch.arange(weights.shape[-1]) != pos[:, None]  # (B, T)   False at the word
    return weights * other[:, None, None, :].to(weights.dtype)  # (B, H, T, T)


def _columns(seed: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights (B, H, T, T), pos (B,)) pairs of a few shapes."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for B, H, T in ((2, 1, 3), (4, 4, 6), (3, 2, 9)):
        weights = torch.softmax(torch.randn(B, H, T, T, generator=g), dim=-1)  # (B, H, T, T)
        cases.append((weights, torch.randint(0, T, (B,), generator=g)))
    return cases


def _zeroed(weights: torch.Tensor, index) -> torch.Tensor:
    """A copy of weights with weights[index] = 0, a student's slice assignment."""
    weights = weights.clone()
    weights[index] = 0.0
    return weights


zero_column = Implement(
    "zero_column", _zero_column, _columns,
    changed=None,  # an answer that zeroes the weights in place is right (it gets a copy)
    mistakes=[
        Like(lambda w, pos: _zero_column(w, pos) / _zero_column(w, pos).sum(-1, keepdim=True),
             "you renormalised the rows: that is hiding the word before the softmax. After it, "
             "the rows sum to less than 1"),
        Like(lambda w, pos: _zeroed(w, (torch.arange(len(pos)), slice(None), pos)),
             "you zeroed the word's row (what it gives), not its column (what every query gives "
             "it)"),
        Like(lambda w, pos: _zeroed(w, (..., pos)),
             "you zeroed every review's word in every review: weights[..., pos] takes all of pos "
             "for each review, not pos[b] for review b"),
        Like(lambda w, pos: w, "your result is the weights unchanged: no weight was set to 0"),
    ],
    hint=("review b's word is key pos[b]. Which slice of weights holds every query's weight on "
          "it, in every head?",
          "build a (B, T) 0/1 tensor that is 0 only at each review's word, give it axes so that "
          "it lines up with the key axis (the last), and multiply. No renormalising."))


zeroed_accuracy = Predict(
    "accuracy with the first word zeroed", tolerance=0.1, example=0.61,
    lesson="Masking before the softmax gives the word's weight to the other tokens; zeroing "
           "after it throws the weight away. For a word whose value carries what the model "
           "needs, either way no query gets it.")


# === Going further: why scale, in this model ======================================================

# The shape of what the notebook passes to `accuracy_without_scale`: test accuracy after epochs
# 1..5 of `attnlab.lessons.scaling.train_at_scale`, with scale=1.0 and with the scale (seed 0's
# values).
EXAMPLE_CURVES = {"scale 1.0": (0.475, 0.4975, 0.7775, 0.9, 0.955),
                  "scaled": (0.475, 0.4975, 0.59, 0.8125, 0.93)}
EPOCH = 4  # the exercise asks for the accuracy after this many epochs
ONE_REVIEW = 1 / 400  # one test review more or less: the resolution of a test accuracy


# --- implement: the spread of a layer's scaled scores ---------------------------------------------

def _spread_inputs(seed: int = 2) -> list[tuple[MultiHeadAttention, torch.Tensor, torch.Tensor]]:
    """(attn, h, real) triples in float64: layers with 2, 3 and 1 heads of different sizes, one
    with scale=1.0 (so that a hard-coded 1/√d_head is caught), padding at the end of some rows
    (so that counting padded pairs is caught), and T ≠ d_head."""
    made = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for d_model, heads, scale, lengths in ((16, 2, None, (5, 3)), (24, 3, 1.0, (4, 6, 2)),
                                               (8, 1, None, (7,))):
            attn = MultiHeadAttention(d_model, heads, scale=scale).double()
            T = max(lengths)
            h = torch.randn(len(lengths), T, d_model, dtype=torch.float64)  # (B, T, d_model)
            real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
            made.append((attn, h, real))
    return made


def _scale(attn: MultiHeadAttention) -> float:
    return attn.scale if attn.scale is not None else attn.d_head ** -0.5


def _scores(attn: MultiHeadAttention, h: torch.Tensor, scale: float | None = None):
    q, k, _ = attn.project(h)  # (B, H, T, D)
    return q @ k.transpose(-2, -1) * (_scale(attn) if scale is None else scale)  # (B, H, T, T)


def _pairs(real: torch.Tensor) -> torch.Tensor:
    return real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)   both tokens real


def _spread_problem(got, expected: torch.Tensor, attn: MultiHeadAttention, h: torch.Tensor,
                    real: torch.Tensor) -> str | None:
    """The comparison of spreads: a 0-dim tensor like the reference's, or a Python float
    (`.item()`), is a result, and the population std is as good as the sample std."""
    if isinstance(got, float):
        value, problem = as_number(got, "your result")
        if problem:
            return problem
    elif alike(got, expected) and bool(torch.isfinite(got).all()):
        value = got.item()
    else:
        return tensor_problem(got, expected)
    right = expected.item()
    population = _scores(attn, h).masked_select(_pairs(real)).std(correction=0).item()
    if math.isclose(value, right, rel_tol=1e-4) or math.isclose(value, population, rel_tol=1e-4):
        return None
    return f"your spread is {fmt(value, 4, guard=False)}, expected {fmt(right, 4, guard=False)}"


def _number(spread, attn, h: torch.Tensor, real) -> float:
    """A spread as mistakes are compared: a Python float, or a 0-dim tensor of h's dtype."""
    if not isinstance(spread, float) and (spread.shape != () or spread.dtype != h.dtype):
        raise TypeError("not a spread")  # no mistake matches it
    return spread if isinstance(spread, float) else spread.detach().item()


score_spread = Implement(
    "score_spread", reference_spread, _spread_inputs, compare=_spread_problem, view=_number,
    atol=0.0, rtol=1e-4, refuse=(reference_spread,),
    mistakes=[
        Like(lambda a, h, r: _scores(a, h, 1.0).masked_select(_pairs(r)).std(),
             "your spread is that of q·k without the layer's scale: multiply the scores by the "
             "scale before measuring them"),
        Like(lambda a, h, r: _scores(a, h, a.d_head ** -0.5).masked_select(_pairs(r)).std(),
             lambda got, expected, a, h, r: "on a layer whose scale is not 1/√d_head (attn.scale "
             f"= {fmt(_scale(a), 3, guard=False)}) you used 1/√d_head: read the layer's own "
             "scale"),
        Like(lambda a, h, r: _scores(a, h).masked_select(_pairs(r)).var(),
             "that is the variance; the spread asked for is the standard deviation"),
        Like(lambda a, h, r: _scores(a, h).std(),
             "your spread counts the pairs with a padding token too: keep only the pairs whose "
             "query and key are both real"),
        Like(lambda a, h, r: _scores(a, h).masked_select(r[:, None, None, :]).std(),
             "your spread counts the padding queries: a pair counts only when both its query "
             "and its key are real"),
        Like(lambda a, h, r: _scores(a, h).masked_select(r[:, None, :, None]).std(),
             "your spread counts the padding keys: a pair counts only when both its query and "
             "its key are real"),
    ],
    hint=("the softmax of a head sees q·k times the layer's scale, one score per (query, key) "
          "pair; which pairs belong to the measurement?",
          "get the heads' queries and keys from the layer's `project`, multiply the scores by "
          "`attn.scale` (1/√d_head when it is None), keep the pairs whose query and key are both "
          "real (a (B, T) mask with an axis for each role) and take the std."))


spread_at_init = Predict(
    "predict the spread at initialisation", tolerance=0.05, example=0.0201,
    lesson="The token vectors have length about 1 and W_Q's entries are about 1/√d_model, so the "
           "entries of q and k start far below 1, and their products q_i k_i further still.")


# --- explore: train without the scale -------------------------------------------------------------

@exercise("explore", args=(EXAMPLE_CURVES,))
def accuracy_without_scale(answer, curves: dict[str, Sequence[float]]):
    """The test accuracy after EPOCH epochs of the d_head = 64 model with scale=1.0, seed 0,
    against the notebook's measurement: `curves` maps "scale 1.0" and "scaled" to the test
    accuracy after each epoch of seed 0's run (at least EPOCH epochs)."""
    unscaled, scaled = (tuple(float(a) for a in curves[name]) for name in ("scale 1.0", "scaled"))
    right = unscaled[EPOCH - 1]
    near = lambda a, b: abs(a - b) < ONE_REVIEW / 2  # noqa: E731   the same count of reviews

    def judge(answer):
        value, problem = as_number(answer, "your accuracy")
        if problem:
            return problem
        if not 0 <= value <= 1:
            return f"{fmt(value, 4, guard=False)} is not an accuracy (between 0 and 1)"
        if near(value, right):
            return Verdict.right(f"with scale=1.0 the test accuracy after {EPOCH} epochs is "
                                 f"{fmt(right, 3, guard=False)}; with the scale it was "
                                 f"{fmt(scaled[EPOCH - 1], 3, guard=False)}.")
        if near(value, scaled[EPOCH - 1]):
            return "that is the scaled run's accuracy, printed above; train with scale=1.0"
        for epoch, accuracy in enumerate(unscaled, start=1):
            if epoch != EPOCH and near(value, accuracy):
                return (f"that is the accuracy with scale=1.0 after epoch {epoch}; the question "
                        f"asks for epoch {EPOCH}")
        return (f"{fmt(value, 4, guard=False)} is not what the model with scale=1.0, seed 0, "
                f"reaches after {EPOCH} epochs")

    return check_answer(
        answer, judge, name="accuracy without the scale", reference=right,
        hint=("train the model of the cell above again with one change, its scale, and read its "
              f"test accuracy after epoch {EPOCH}.",
              "the same function, seed and number of epochs, scale=1.0; the history's "
              "'test_acc' holds one accuracy per epoch, the first epoch at index 0."),
        todo="not attempted yet; put your number in the cell above.")


# --- predict: how spread are the folded model's scores after training? ----------------------------

CHOICES = ("scaled", "unscaled")
EXAMPLE_SPREADS = {"scaled": [0.8, 0.7, 0.4], "scale 1.0": [2.4, 3.6, 4.2],
                   "folded": [2.3, 2.9, 2.4]}  # the shape of the notebook's measurement


def _nearer(spreads: dict[str, Sequence[float]]) -> str:
    """"scaled" or "unscaled": whose trained spreads the folded model's are nearer to, by the
    ratio of the geometric means (spreads differ by factors, not by amounts)."""
    level = {name: sum(math.log(v) for v in values) / len(values)
             for name, values in spreads.items()}
    gap = {"scaled": abs(level["folded"] - level["scaled"]),
           "unscaled": abs(level["folded"] - level["scale 1.0"])}
    return min(gap, key=gap.get)


@exercise("predict", args=(EXAMPLE_SPREADS,))
def folded_spread(guess, spreads: dict[str, Sequence[float]]):
    """Your guess, "scaled" or "unscaled", against the measurement: `spreads` maps "scaled",
    "scale 1.0" and "folded" to the spread of each seed's scores after training."""
    measured = _nearer(spreads)
    shown = "; ".join(f"{name} " + ", ".join(fmt(v, 2, guard=False) for v in values)
                      for name, values in spreads.items())

    def read(guess):
        if not isinstance(guess, str) or guess.strip().lower() not in CHOICES:
            return None, f"write \"scaled\" or \"unscaled\", got {_kind(guess)}"
        return guess.strip().lower(), None

    return prediction(
        guess, name="the folded model's spread", read=read,
        describe=lambda said: f"you predicted {said}; the folded model's scores end up like the "
                              f"{measured} model's (spreads after training: {shown})",
        lesson="A W_Q folded to 1/8 of its size gets a gradient 8 times larger. Adam moves every "
               "weight by about the learning rate per step, whatever its gradient's size, so the "
               "folded W_Q moves 8 times faster relative to its size (plain SGD, a step of lr "
               "times the gradient, would move it 64 times faster), and so do the scores it "
               "makes.",
        todo="no prediction yet; write \"scaled\" or \"unscaled\" in the cell above before "
             "running.",
        write="One of the two words, in quotes.")
