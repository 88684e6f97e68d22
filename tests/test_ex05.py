"""Notebook 05's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.) Synthetic tensors only: no
MobileNetV2, no Fashion-MNIST."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_doubles import expect

import attnlab
from attnlab import retrieval
from attnlab.exercises import ex05


def test_five_neighbours(capsys):
    measured = (0.739, 0.945)
    expect(capsys, ex05.five_neighbours, [[0.72, 0.92], np.array([0.75, 0.95])], "✓",
           "; measured 0.739, 0.945. precision@5 also counts", measured)
    # "five results: more chances" for both; both equal to top-1
    expect(capsys, ex05.five_neighbours, [[0.8, 0.8], [0.77, 0.77]], "✗",
           "more than 0.05 apart). Hint: precision@5 also counts", measured)


# --- implement hit@k ---------------------------------------------------------------------------

def hits(query_labels, neighbour_labels):  # (N, k) bool
    return neighbour_labels == query_labels[:, None]


@pytest.mark.parametrize("answers, mark, words", [
    ([lambda q, n: hits(q, n).any(dim=1).float().mean(), retrieval.hit_at_k,
      lambda q, n: hits(q, n).any(dim=1).double().mean(),  # float64 is fine too
      lambda q, n: float(hits(q, n).any(dim=1).float().mean())],  # and a Python float
     "✓", "hit@k: matches attnlab's version on 3 random inputs."),
    ([lambda q, n: hits(q, n).float().mean(),  # precision@k: counts all k results
      lambda q, n: hits(q, n)[:, 0].float().mean(),  # top-1 only
      lambda q, n: hits(q, n).all(dim=1).float().mean(),  # all k right
      lambda q, n: hits(q, n).any(dim=1).float().sum()],  # a count, not a share
     "✗", "differs from the reference"),
    ([lambda q, n: hits(q, n).any(dim=1).mean()], "✗", "raised RuntimeError"),  # a bool mean
    ([lambda q, n: hits(q, n).any(dim=1).float()], "✗", "has shape (40,), expected ()"),
])
def test_hit_at_k(capsys, answers, mark, words):
    expect(capsys, ex05.hit_at_k, answers, mark, words)


# --- implement soft k-NN as attention ----------------------------------------------------------

def unit(queries, database):
    return F.normalize(queries, dim=1), F.normalize(database, dim=1)  # (N_q, D), (N_d, D)


def soft_right(queries, database, labels, tau):
    q, k = unit(queries, database)
    v = F.one_hot(labels, 10).to(q.dtype)                                # (N_d, 10)
    return attnlab.scaled_dot_product_attention(q, k, v, scale=1 / tau)


def soft_written_out(queries, database, labels, tau):
    q, k = unit(queries, database)
    weights = torch.softmax(q @ k.T / tau, dim=1)                        # (N_q, N_d)
    return weights @ F.one_hot(labels, 10).double(), weights


def soft_with(queries, database, labels, tau, *, normalise=True, scale="1/tau", classes=10):
    q, k = unit(queries, database) if normalise else (queries, database)
    v = F.one_hot(labels, classes).to(q.dtype)
    scale = {"1/tau": 1 / tau, "tau": tau, "default": None}[scale]
    return attnlab.scaled_dot_product_attention(q, k, v, scale=scale)


@pytest.mark.parametrize("answers, mark, words", [
    ([soft_right, soft_written_out], "✓",
     "soft k-NN as attention: matches attnlab's version on 3 random inputs."),
    ([lambda *a: soft_with(*a, normalise=False), lambda *a: soft_with(*a, scale="default"),
      lambda *a: soft_with(*a, scale="tau")], "✗", "differs from the reference"),
    ([lambda *a: soft_with(*a, classes=-1)], "✗", "expected (3, 10)"),  # one_hot's own count
    ([lambda *a: tuple(t.float() for t in soft_right(*a))], "✗",
     "dtype torch.float32, expected torch.float64"),
    ([lambda *a: soft_right(*a)[0]], "✗", "tuple of 2 tensors"),  # the probabilities only
    ([lambda q, d, labels, tau: attnlab.scaled_dot_product_attention(  # int64 values
        *unit(q, d), F.one_hot(labels, 10), scale=1 / tau)], "✗", "raised TypeError"),
])
def test_soft_knn(capsys, answers, mark, words):
    expect(capsys, ex05.soft_knn, answers, mark, words)


def test_beat_one_nn(capsys):
    data = ex05.beat_one_nn.exercise.args()  # ten noisy clusters, 30% of the labels flipped
    got = expect(capsys, ex05.beat_one_nn, [0.3, torch.tensor(0.3)], "✓",
                 "at τ = 0.3 the soft vote is right on 35 of 50 queries, 1-NN on 25", *data)
    assert got[0] == 0.3
    # the 1-NN limit (the same answers, not more), nearly uniform (the most common class), τ ≤ 0
    for got in expect(capsys, ex05.beat_one_nn, [0.001, 10, 0, -0.3], "✗",
                      "does not satisfy it yet", *data):
        assert got in ex05.TAUS
