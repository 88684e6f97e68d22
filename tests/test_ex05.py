"""Notebook 05's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.) Synthetic tensors only: no
MobileNetV2, no Fashion-MNIST."""
import torch
import torch.nn.functional as F
from exercise_doubles import expect

import attnlab
from attnlab.exercises import ex05

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


def test_soft_knn_right_answers(capsys):
    expect(capsys, ex05.soft_knn, [soft_right, soft_written_out], "✓",
           "soft k-NN as attention: matches attnlab's version on 3 random inputs.")


def test_soft_knn_names_each_typical_mistake(capsys):
    for answers, words in [
        ([lambda *a: soft_with(*a, normalise=False), lambda *a: soft_with(*a, scale="default"),
          lambda *a: soft_with(*a, scale="tau")], "differs from the reference"),
        ([lambda *a: soft_with(*a, classes=-1)], "expected (3, 10)"),  # one_hot's own count
        ([lambda *a: tuple(t.float() for t in soft_right(*a))],
         "dtype torch.float32, expected torch.float64"),
        ([lambda *a: soft_right(*a)[0]], "tuple of 2 tensors"),  # the probabilities only
        ([lambda q, d, labels, tau: attnlab.scaled_dot_product_attention(  # int64 values
            *unit(q, d), F.one_hot(labels, 10), scale=1 / tau)], "raised TypeError"),
    ]:
        expect(capsys, ex05.soft_knn, answers, "✗", words)


# --- predict the accuracy under uniform attention ----------------------------------------------

def test_uniform_accuracy(capsys):
    expect(capsys, ex05.uniform_accuracy, [0.8], "✎",
           "measured 0.805 (within 0.1). Uniform weights are not 'no attention'", 0.805)
    expect(capsys, ex05.uniform_accuracy, [0.1], "✎",  # chance, as in notebook 03
           "(0.705 apart) (written after the measurement was shown). Uniform weights", 0.805)



# --- implement the odd image's column and row ---------------------------------------------------

def roles(weights, odd, *, read="column", with_self=False, times=True, own_entry=True):
    B, H, T, _ = weights.shape
    rows = torch.arange(B)
    line = weights[rows, :, :, odd] if read == "column" else weights[rows, :, odd, :]  # (B, H, T)
    own = weights[rows, :, odd, odd]                                                   # (B, H)
    received = line.mean(-1) if with_self else (line.sum(-1) - own) / (T - 1)
    itself = own if own_entry else weights[rows, :, odd, :].mean(-1)
    scale = T if times else 1
    return (received * scale).mean(0), (itself * scale).mean(0)


def test_target_roles_right_answers(capsys):
    expect(capsys, ex05.target_roles,
           [roles, lambda w, o: (attnlab.probes.target_roles(w, o)["from_others"],
                                 attnlab.probes.target_roles(w, o)["on_itself"])],
           "✓", "your two scores are attnlab's, per head, on random weights.")


def test_target_roles_names_each_typical_mistake(capsys):
    for answer, words in [
        (lambda w, o: roles(w, o, read="row"), "reads the odd image's row"),
        (lambda w, o: roles(w, o, with_self=True), "includes the odd image's weight on itself"),
        (lambda w, o: roles(w, o, times=False), "are not times T"),
        (lambda w, o: roles(w, o, own_entry=False), "the mean of the odd image's row"),
        (lambda w, o: tuple(r.mean() for r in roles(w, o)), "has shape (), expected (3,)"),
        (lambda w, o: roles(w, o)[0], "tuple of 2 tensors"),
    ]:
        expect(capsys, ex05.target_roles, [answer], "✗", words)


# --- explore: the smallest set --------------------------------------------------------------------

def test_smallest_set(capsys):
    data = ex05.smallest_set.exercise.args()  # a mean-based stand-in model on clear clusters
    found = ex05._accuracies(*data)
    assert found[2] < 0.6 < 0.8 < found[3] and min(found.values()) == found[2]
    got = expect(capsys, ex05.smallest_set, [3, 3.0, torch.tensor(3)], "✓",
                 "on sets of 3, 0.511 on sets of 2. Without positions", *data)
    assert got[0] == 3
    expect(capsys, ex05.smallest_set, [2], "✗", "0.511 on sets of 2: below 80%", *data)
    expect(capsys, ex05.smallest_set, [5], "✗", "on sets of 5: a smaller set still reaches",
           *data)
    for wrong in (2.5, 13, 1):
        assert expect(capsys, ex05.smallest_set, [wrong], "✗", "is not a set size from 2 to 12",
                      *data) == [3]
