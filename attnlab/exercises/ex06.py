"""The exercises of notebook 06 (a pre-trained CNN, retrieval, attention over a set), checked.

- `soft_knn` (implement): soft k-nearest neighbours as attention (cosine scores, one-hot labels
  as values, scale 1/τ), against `attnlab.lessons.retrieval.soft_knn`;
- `uniform_accuracy` (predict): the set model's accuracy when every attention weight is
  uniform;
- `target_roles` (implement): how much the others attend to the odd image, and how much it
  attends to itself, per head and against uniform attention, against
  `attnlab.core.measures.target_roles`;
- `smallest_set` (explore): the smallest set on which the model, trained on sets of 10 only,
  still finds the odd image in 80 % of sets.

The implement checks run on small random tensors, not on the network, so they are instant.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core.measures import target_roles as _target_roles
from ..lessons import retrieval, sets
from ..plumbing.report import fmt
from . import Implement, Like, Predict, Verdict, as_number, check_answer, exercise

N_CLASSES = len(retrieval.CLASS_NAMES)


# --- implement: soft k-NN as attention -----------------------------------------------------------

def _soft_knn_reference(queries, database, labels, tau):
    """attnlab's soft k-NN with Fashion-MNIST's ten classes: (probabilities, weights)."""
    return retrieval.soft_knn(queries, database, labels, tau, n_classes=N_CLASSES)


def _soft_knn_inputs(seed: int = 5) -> list[tuple]:
    """(queries, database, labels, tau): float64 features of several widths and lengths, a
    database of 6 (not every class present: `one_hot` needs its number of classes) and three
    temperatures, so that a missing normalisation, the default 1/√d scale or τ used the wrong
    way round all show."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for n_q, n_d, dim, tau in ((4, 30, 8, 0.1), (3, 6, 5, 0.03), (7, 50, 16, 1.0)):
        cases.append((torch.randn(n_q, dim, generator=g, dtype=torch.float64),    # (N_q, D)
                      torch.randn(n_d, dim, generator=g, dtype=torch.float64),    # (N_d, D)
                      torch.randint(0, N_CLASSES, (n_d,), generator=g),           # (N_d,)
                      tau))
    return cases


soft_knn = Implement(
    "soft k-NN as attention", _soft_knn_reference, _soft_knn_inputs, atol=1e-8,
    refuse=(retrieval.soft_knn,),
    hint=("soft k-NN is attention: which tensor plays the queries, which the keys, which "
          "the values, and what does the temperature tau replace?",
          "normalise the rows of queries and database to length 1 (then q·k is the cosine), "
          "turn the labels into one-hot rows of 10 floats as the values, call "
          "attnlab.scaled_dot_product_attention with scale=1 / tau, and return what it "
          "returns."))


uniform_accuracy = Predict(
    "accuracy with uniform attention", tolerance=0.1, example=0.8,
    lesson="Uniform weights are not 'no attention': every image still receives the plain "
           "mean of its set, and the mean of nine images of one kind and one other already "
           "says which image is unlike the rest. The weights add what the mean misses.")


# --- implement: the odd image's row and column ----------------------------------------------------

def _roles_reference(weights, odd):
    """(from_others (H,), on_itself (H,)) from `attnlab.core.measures.target_roles`."""
    roles = _target_roles(weights, odd)
    return roles["from_others"], roles["on_itself"]


def _roles_inputs(seed: int = 5) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights (B, H, T, T), odd (B,)): softmax rows of sharp random scores, so that a row, a
    column, a mean with the diagonal and a mean without it all differ."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for B, H, T in ((6, 3, 5), (4, 2, 8)):
        scores = 3 * torch.randn(B, H, T, T, generator=g, dtype=torch.float64)
        cases.append((scores.softmax(-1), torch.randint(0, T, (B,), generator=g)))
    return cases


def _roles(weights, odd, *, row=False, with_self=False, times=True, own_entry=True):
    """The two scores as a student may write them: the odd image's column (else its `row`)
    without its own entry (else `with_self`), times T (else not), and its own entry (else the
    mean of its row)."""
    B, H, T, _ = weights.shape
    b = torch.arange(B)
    line = weights[b, :, odd, :] if row else weights[b, :, :, odd]  # (B, H, T)
    own = weights[b, :, odd, odd]  # (B, H)
    received = line.mean(-1) if with_self else (line.sum(-1) - own) / (T - 1)  # (B, H)
    itself = own if own_entry else weights[b, :, odd, :].mean(-1)  # (B, H)
    scale = T if times else 1
    return (received * scale).mean(0), (itself * scale).mean(0)  # (H,), (H,)


target_roles = Implement(
    "the odd image's column and row", _roles_reference, _roles_inputs, atol=1e-9, rtol=1e-7,
    refuse=(_target_roles,),
    success="your two scores are attnlab's, per head, on random weights",
    mistakes=[
        Like(lambda w, odd: _roles(w, odd, row=True),
             "your first result reads the odd image's row (what it gives the others); what the "
             "others give it is its column, weights[..., :, odd]"),
        Like(lambda w, odd: _roles(w, odd, with_self=True),
             "your first result includes the odd image's weight on itself: leave its own entry "
             "out of the column and divide by T - 1"),
        Like(lambda w, odd: _roles(w, odd, times=False),
             "your results are not times T: multiply by the set size, so that 1 means uniform"),
        Like(lambda w, odd: _roles(w, odd, own_entry=False),
             "your second result is the mean of the odd image's row, always 1/T: its weight on "
             "itself is one entry, weights[b, :, odd[b], odd[b]]"),
    ],
    hint=("weights[b, h, i, j] is what query i gives key j: what the odd image receives is "
          "in one of its slices, what it gives itself is one entry.",
          "index the batch with torch.arange(B) and odd together; take the odd image's "
          "column, remove its own entry, average over the other T - 1 queries, multiply by "
          "T and average over the sets; its own entry times T is the second score."))


# --- explore: which sets the model can handle -----------------------------------------------------

SET_SIZES = range(2, 13)  # the sizes the check measures
THRESHOLD = 0.8


def _accuracies(model: nn.Module | dict, features, labels) -> dict[int, float]:
    """Accuracy on 1,000 sets of each size in SET_SIZES (seed 3, as the notebook says). Where
    `model` is already such a dict (what `_measured` made in the student's kernel, judged in
    `make grade`'s process), that dict."""
    if isinstance(model, dict):
        return {int(size): float(accuracy) for size, accuracy in model.items()}
    found = {}
    for size in SET_SIZES:
        members, odd = sets.odd_one_out(labels, 1000, set_size=size, seed=3)
        found[size] = (sets.predict(model, features, members) == odd).double().mean().item()
    return found


class _FarthestFromMean(nn.Module):
    """A stand-in set model for the tests: the score is minus the cosine to the set's mean."""

    def forward(self, x):
        return -F.cosine_similarity(x, x.mean(1, keepdim=True), dim=-1)  # (B, S)


def _example_set() -> tuple:
    """(model, features, labels): ten well-separated classes of 40 random vectors each."""
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(400) % 10
    features = 4 * torch.eye(10, 16, dtype=torch.float64)[labels] \
        + torch.randn(400, 16, generator=g, dtype=torch.float64)
    return _FarthestFromMean(), features, labels.numpy()


def _measured(model, features, labels) -> tuple:
    """The arguments of `smallest_set` as data: the accuracies `_accuracies` measures."""
    return _accuracies(model, features, labels), None, None


@exercise("explore", args=_example_set, measure=_measured)
def smallest_set(answer, model, features, labels):
    """The smallest set size in SET_SIZES at which `model` finds the odd image in at least
    THRESHOLD of 1,000 sets (and in every larger size of SET_SIZES)."""
    found = _accuracies(model, features, labels)
    good = [s for s in SET_SIZES if all(found[t] >= THRESHOLD for t in SET_SIZES if t >= s)]
    reference = good[0] if good else max(found, key=found.get)
    below = reference - 1
    expected = (f"the smallest number of images per set, from {SET_SIZES.start} to "
                f"{SET_SIZES.stop - 1}, on which the model is right on at least "
                f"{THRESHOLD:.0%} of sets")

    def judge(answer):
        value, problem = as_number(answer)
        if problem:
            return f"{problem} ({expected})"
        if value != int(value) or int(value) not in SET_SIZES:
            return f"{value:g} is not a set size from {SET_SIZES.start} to " \
                   f"{SET_SIZES.stop - 1} ({expected})"
        size = int(value)
        shown = f"{fmt(found[size], 3, guard=False)} on sets of {size}"
        if size > reference:
            return f"{shown}: a smaller set still reaches {THRESHOLD:.0%}"
        if size < reference:
            return f"{shown}: below {THRESHOLD:.0%}"
        shown_sizes = [t for t in (below, SET_SIZES.start) if t >= SET_SIZES.start]
        smaller = "".join(f", {fmt(found[t], 3, guard=False)} on sets of {t}"
                          for t in dict.fromkeys(shown_sizes))
        return Verdict.right(
            f"{shown}{smaller}. "
            "Without positions the model reads a set of any size, but a small set has a weak "
            "majority, and a set of two has none: neither image is odd, so it can only guess.")

    return check_answer(
        answer, judge, name="the smallest set", reference=reference,
        hint=("build test sets of each size with attnlab.lessons.sets.odd_one_out(..., set_size=s, "
              "seed=3) and measure the accuracy on each.",
              "loop over the sizes from 2 up; for each, sets.predict(model, test_emb, members) "
              "== odd, averaged, is the accuracy; the answer is the first size from which it "
              "stays at 0.8 or above."),
        todo="not attempted yet; put your set size in the cell above.")
