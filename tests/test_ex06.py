"""Notebook 06's exercises: right answers written in other ways, the predict and explore cases,
and the cases the tables of mistakes do not hold (the tables: tests/test_exercises.py; hostile
answers: there too). Synthetic tensors only: no MobileNetV2, no Fashion-MNIST."""
import torch
import torch.nn.functional as F
from exercise_doubles import expect

import attnlab
from attnlab.exercises import ex06


def unit(queries, database):
    return F.normalize(queries, dim=1), F.normalize(database, dim=1)  # (N_q, D), (N_d, D)


def soft_with(queries, database, labels, tau, *, normalise=True, scale="1/tau", classes=10):
    q, k = unit(queries, database) if normalise else (queries, database)
    v = F.one_hot(labels, classes).to(q.dtype)  # (N_d, 10)
    scale = {"1/tau": 1 / tau, "tau": tau, "default": None}[scale]
    return attnlab.scaled_dot_product_attention(q, k, v, scale=scale)


def soft_written_out(queries, database, labels, tau):
    q, k = unit(queries, database)
    weights = torch.softmax(q @ k.T / tau, dim=1)  # (N_q, N_d)
    return weights @ F.one_hot(labels, 10).double(), weights


def test_soft_knn(capsys):
    answers = [soft_with, soft_written_out]
    assert expect(capsys, ex06.soft_knn, answers, "✓", "soft k-NN as attention: matches "
                  "attnlab's version on 3 random inputs.") == answers
    for answers, words in [  # it names no mistake: the comparison's words
        ([lambda *a: soft_with(*a, normalise=False), lambda *a: soft_with(*a, scale="default"),
          lambda *a: soft_with(*a, scale="tau")], "differs from the reference"),
        ([lambda *a: soft_with(*a, classes=-1)], "expected (3, 10)"),  # one_hot's own count
        ([lambda *a: tuple(t.float() for t in soft_with(*a))],
         "dtype torch.float32, expected torch.float64"),
        ([lambda *a: soft_with(*a)[0]], "tuple of 2 tensors"),  # the probabilities only
        ([lambda q, d, labels, tau: attnlab.scaled_dot_product_attention(  # int64 values
            *unit(q, d), F.one_hot(labels, 10), scale=1 / tau)], "raised TypeError"),
    ]:
        expect(capsys, ex06.soft_knn, answers, "✗", words)


def test_uniform_accuracy(capsys):
    expect(capsys, ex06.uniform_accuracy, [0.8], "✎",
           "measured 0.805 (within 0.1). Uniform weights are not 'no attention'", 0.805)
    expect(capsys, ex06.uniform_accuracy, [0.1], "✎",  # chance, as in notebook 03
           "(0.705 apart) (written after the measurement was shown). Uniform weights", 0.805)


def roles(weights, odd):
    B, H, T, _ = weights.shape
    rows = torch.arange(B)
    column = weights[rows, :, :, odd]  # (B, H, T)
    own = weights[rows, :, odd, odd]  # (B, H)
    return ((column.sum(-1) - own) / (T - 1) * T).mean(0), (own * T).mean(0)


def test_target_roles(capsys):
    answers = [roles, lambda w, o: (attnlab.core.measures.target_roles(w, o)["from_others"],
                                    attnlab.core.measures.target_roles(w, o)["on_itself"])]
    assert expect(capsys, ex06.target_roles, answers, "✓",
                  "your two scores are attnlab's, per head, on random weights.") == answers
    for answer, words in [
        (lambda w, o: tuple(r.mean() for r in roles(w, o)), "has shape (), expected (3,)"),
        (lambda w, o: roles(w, o)[0], "tuple of 2 tensors"),
    ]:
        expect(capsys, ex06.target_roles, [answer], "✗", words)


def test_smallest_set(capsys):
    data = ex06.smallest_set.exercise.args()  # a mean-based stand-in model on clear clusters
    found = ex06._accuracies(*data)
    assert found[2] < 0.6 < 0.8 < found[3] and min(found.values()) == found[2]
    got = expect(capsys, ex06.smallest_set, [3, 3.0, torch.tensor(3)], "✓",
                 "on sets of 3, 0.511 on sets of 2. Without positions", *data)
    assert got[0] == 3
    expect(capsys, ex06.smallest_set, [2], "✗", "0.511 on sets of 2: below 80%", *data)
    expect(capsys, ex06.smallest_set, [5], "✗", "on sets of 5: a smaller set still reaches",
           *data)
    for wrong in (2.5, 13, 1):
        assert expect(capsys, ex06.smallest_set, [wrong], "✗", "is not a set size from 2 to 12",
                      *data) == [3]
