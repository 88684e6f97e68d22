"""The exercises of notebook 02 (why divide by √d_k), checked.

- `std_at_256` (predict): std(q·k) at d_k = 256, guessed before it is measured;
- `score_spread` (implement): the spread of an attention layer's scaled scores over the pairs
  of real tokens, against `attnlab.scaling.score_spread` on random layers (one with scale=1.0);
- `spread_at_init` (predict): that spread in notebook 03's model before training, guessed
  before it is measured;
- `folded_spread` (predict): whether the scores of the model with 1/√d_head folded into W_Q at
  initialisation end up as spread as the scaled model's or the unscaled one's, guessed before
  it is trained;
- `accuracy_without_scale` (explore): the test accuracy after 4 epochs of the d_head = 64 model
  trained with scale=1.0 (seed 0), the experiment the student runs, judged against the curves
  the notebook measured (passed in: the series seed moves them, so none is stored here).

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..attention import MultiHeadAttention
from ..report import fmt
from ..scaling import score_spread as reference_spread
from . import (
    Verdict,
    _kind,
    as_number,
    check_answer,
    check_function,
    check_prediction,
    exercise,
    prediction,
    tensor_problem,
)

# The shape of what the notebook passes to `accuracy_without_scale`: test accuracy after epochs
# 1..5 of `attnlab.scaling.train_at_scale`, with scale=1.0 and with the scale (seed 0's values).
EXAMPLE_CURVES = {"scale 1.0": (0.475, 0.4975, 0.7775, 0.9, 0.955),
                  "scaled": (0.475, 0.4975, 0.59, 0.8125, 0.93)}
EPOCH = 4  # the exercise asks for the accuracy after this many epochs
ONE_REVIEW = 1 / 400  # one test review more or less: the resolution of a test accuracy


@exercise("predict", args=(16.36,))
def std_at_256(guess, measured):
    """Your guess for std(q·k) at d_k = 256 against the measured value (±2 is right)."""
    return check_prediction(
        guess, measured, name="predict std(q·k) at d_k = 256", tolerance=2.0, digits=2,
        lesson="q·k adds d_k terms of variance 1: the variances add up, and std is the square "
               "root of the variance.")


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


def _raw_scores(attn: MultiHeadAttention, h: torch.Tensor) -> torch.Tensor:
    q, k, _ = attn.project(h)  # (B, H, T, D)
    return q @ k.transpose(-2, -1)  # (B, H, T, T)   unscaled


def _spread_problem(got, expected: torch.Tensor, attn: MultiHeadAttention, h: torch.Tensor,
                    real: torch.Tensor) -> str | None:
    """What is wrong with `got` as score_spread(attn, h, real), naming the classic mistakes.
    A 0-dim tensor like the reference's, or a Python float (`.item()`), is a result."""
    if isinstance(got, float):
        value, problem = as_number(got, "your result")
        if problem:
            return problem
    elif isinstance(got, torch.Tensor) and got.shape == expected.shape \
            and got.dtype == expected.dtype and bool(torch.isfinite(got).all()):
        value = got.item()
    else:
        return tensor_problem(got, expected)
    with torch.no_grad():
        raw = _raw_scores(attn, h)  # (B, H, T, T)
    pairs = (real[:, None, :, None] & real[:, None, None, :]).expand_as(raw)  # (B, H, T, T)
    n = int(pairs.sum())
    scale = attn.scale if attn.scale is not None else attn.d_head ** -0.5
    right = expected.item()
    if math.isclose(value, right, rel_tol=1e-4) \
            or math.isclose(value, right * math.sqrt((n - 1) / n), rel_tol=1e-4):
        return None  # the population std is as good as the sample std
    std = lambda s: s.std().item()  # noqa: E731
    mistakes = [
        (right / scale, "your spread is that of q·k without the layer's scale: multiply the "
                        "scores by the scale before measuring them"),
        (right / scale * attn.d_head ** -0.5,
         "on a layer whose scale is not 1/√d_head (attn.scale = "
         f"{fmt(scale, 3, guard=False)}) you used 1/√d_head: read the layer's own scale"),
        (right ** 2, "that is the variance; the spread asked for is the standard deviation"),
        (std(raw * scale), "your spread counts the pairs with a padding token too: keep only "
                           "the pairs whose query and key are both real"),
        (std((raw * scale)[(real[:, None, None, :]).expand_as(raw)]),
         "your spread counts the padding queries: a pair counts only when both its query and "
         "its key are real"),
        (std((raw * scale)[(real[:, None, :, None]).expand_as(raw)]),
         "your spread counts the padding keys: a pair counts only when both its query and its "
         "key are real"),
    ]
    for wrong, message in mistakes:
        if wrong != right and math.isclose(value, wrong, rel_tol=1e-4):
            return message
    return f"your spread is {fmt(value, 4, guard=False)}, expected {fmt(right, 4, guard=False)}"


@exercise("implement")
def score_spread(fn):
    """Your `fn(attn, h, real)` against `attnlab.scaling.score_spread` on three random layers."""
    return check_function(
        fn, reference_spread, _spread_inputs(), name="score_spread", compare=_spread_problem,
        hint=("the softmax of a head sees q·k times the layer's scale, one score per (query, "
              "key) pair; which pairs belong to the measurement?",
              "get the heads' queries and keys from the layer's `project`, multiply the scores "
              "by `attn.scale` (1/√d_head when it is None), keep the pairs whose query and key "
              "are both real (a (B, T) mask with an axis for each role) and take the std."))


@exercise("predict", args=(0.0201,))
def spread_at_init(guess, measured):
    """Your guess for the spread of notebook 03's scaled scores at initialisation (±0.05)."""
    return check_prediction(
        guess, measured, name="predict the spread at initialisation", tolerance=0.05,
        lesson="The token vectors have length about 1 and W_Q's entries are about 1/√d_model, so "
               "the entries of q and k start far below 1, and their products q_i k_i further "
               "still.")


# --- explore: train without the scale -------------------------------------------------------------

@exercise("explore", args=(EXAMPLE_CURVES,))
def accuracy_without_scale(answer, curves: dict[str, Sequence[float]]):
    """The test accuracy after EPOCH epochs of the d_head = 64 model with scale=1.0, seed 0,
    against the notebook's measurement: `curves` maps "scale 1.0" and "scaled" to the test
    accuracy after each epoch of seed 0's run (at least EPOCH epochs)."""
    unscaled, scaled = (tuple(float(a) for a in curves[name]) for name in ("scale 1.0", "scaled"))
    right = unscaled[EPOCH - 1]
    near = lambda a, b: abs(a - b) < ONE_REVIEW / 2  # noqa: E731   the same count of reviews
    hint = ("train the model of the cell above again with one change, its scale, and read its "
            f"test accuracy after epoch {EPOCH}.",
            "the same function, seed and number of epochs, scale=1.0; the history's "
            "'test_acc' holds one accuracy per epoch, the first epoch at index 0.")

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

    return check_answer(answer, judge, name="accuracy without the scale", reference=right,
                        hint=hint, todo="not attempted yet; put your number in the cell above.")


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
    lesson = ("A W_Q folded to 1/8 of its size gets a gradient 8 times larger. Adam moves every "
              "weight by about the learning rate per step, whatever its gradient's size, so the "
              "folded W_Q moves 8 times faster relative to its size (plain SGD, a step of lr "
              "times the gradient, would move it 64 times faster), and so do the scores it "
              "makes.")

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
        lesson=lesson,
        todo="no prediction yet; write \"scaled\" or \"unscaled\" in the cell above before "
             "running.",
        write="One of the two words, in quotes.")
