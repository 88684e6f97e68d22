"""Notebook 05's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○) and a return value the notebook's next cells can use. Synthetic tensors only: no
MobileNetV2, no Fashion-MNIST."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_doubles import loops_forever, one_line, placeholder, raises

import attnlab
from attnlab import retrieval
from attnlab.exercises import ex05

# --- predict precision@5 and hit@5 -------------------------------------------------------------

MEASURED = (0.739, 0.945)


@pytest.mark.parametrize("guess, expected_mark, words", [
    ([0.72, 0.92], "✓", "you predicted 0.720, 0.920; measured 0.739, 0.945"),
    (np.array([0.75, 0.95]), "✓", "measured"),
    ([0.8, 0.8], "✗", "more than 0.05 apart"),       # "five results: more chances" for both
    ([0.77, 0.77], "✗", "more than 0.05 apart"),     # both equal to top-1
    ([0.74], "✗", "expected 2 numbers, got 1"),
    ([0.74, float("nan")], "✗", "finite"),
    ("0.74, 0.95", "✗", "list of 2 numbers"),
    (0.9, "✗", "list of 2 numbers"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_five_neighbours(capsys, guess, expected_mark, words):
    got = ex05.five_neighbours(guess, MEASURED)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign != "✓":
        assert got == MEASURED


# --- implement hit@k ---------------------------------------------------------------------------

def hit_right(query_labels, neighbour_labels):
    return (neighbour_labels == query_labels[:, None]).any(dim=1).float().mean()


def hit_double(query_labels, neighbour_labels):  # float64 is fine too
    return (neighbour_labels == query_labels[:, None]).any(dim=1).double().mean()


def hit_python_float(query_labels, neighbour_labels):
    return float((neighbour_labels == query_labels[:, None]).any(dim=1).float().mean())


def precision(query_labels, neighbour_labels):  # counts all k results
    return (neighbour_labels == query_labels[:, None]).float().mean()


def top1_only(query_labels, neighbour_labels):
    return (neighbour_labels[:, 0] == query_labels).float().mean()


def all_right(query_labels, neighbour_labels):
    return (neighbour_labels == query_labels[:, None]).all(dim=1).float().mean()


def count_not_share(query_labels, neighbour_labels):
    return (neighbour_labels == query_labels[:, None]).any(dim=1).float().sum()


def bool_mean(query_labels, neighbour_labels):  # torch refuses the mean of a bool tensor
    return (neighbour_labels == query_labels[:, None]).any(dim=1).mean()


def per_query(query_labels, neighbour_labels):  # forgot to average
    return (neighbour_labels == query_labels[:, None]).any(dim=1).float()


@pytest.mark.parametrize("answer, expected_mark, words", [
    (hit_right, "✓", "hit@k: matches attnlab's version on 3 random inputs"),
    (retrieval.hit_at_k, "✓", "matches"),
    (hit_double, "✓", "matches"),
    (hit_python_float, "✓", "matches"),
    (precision, "✗", "differs from the reference"),
    (top1_only, "✗", "differs from the reference"),
    (all_right, "✗", "differs from the reference"),
    (count_not_share, "✗", "differs from the reference"),
    (bool_mean, "✗", "raised RuntimeError"),
    (per_query, "✗", "has shape (40,), expected ()"),
    (lambda q, n: "0.9", "✗", "should be a torch.Tensor"),
    (lambda q, n: 1, "✗", "got a int"),
    (lambda q, n: torch.tensor(float("nan")), "✗", "NaN"),
    (lambda q, n: torch.tensor(1), "✗", "dtype torch.int64"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    ("hit", "✗", "expected a function"),
    (placeholder, "○", "not attempted yet"),
    (..., "○", "not attempted yet"),
    (None, "○", "not attempted yet"),
])
def test_hit_at_k(capsys, answer, expected_mark, words):
    fn = ex05.hit_at_k(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    q, n = ex05.hit_inputs()[0]
    assert torch.allclose(fn(q, n).float(), retrieval.hit_at_k(q, n))  # usable either way


def test_hit_inputs_tell_the_wrong_versions_apart():
    q, n = ex05.hit_inputs()[0]
    values = {f(q, n).item() for f in (hit_right, precision, top1_only, all_right)}
    assert len(values) == 4


# --- implement soft k-NN as attention ----------------------------------------------------------

def soft_right(queries, database, labels, tau):
    q, k = F.normalize(queries, dim=1), F.normalize(database, dim=1)     # (N_q, D), (N_d, D)
    v = F.one_hot(labels, 10).to(q.dtype)                                # (N_d, 10)
    return attnlab.scaled_dot_product_attention(q, k, v, scale=1 / tau)


def soft_written_out(queries, database, labels, tau):
    cos = F.normalize(queries, dim=1) @ F.normalize(database, dim=1).T   # (N_q, N_d)
    weights = torch.softmax(cos / tau, dim=1)
    return weights @ F.one_hot(labels, 10).double(), weights


def not_normalised(queries, database, labels, tau):
    v = F.one_hot(labels, 10).to(queries.dtype)
    return attnlab.scaled_dot_product_attention(queries, database, v, scale=1 / tau)


def default_scale(queries, database, labels, tau):
    q, k = F.normalize(queries, dim=1), F.normalize(database, dim=1)
    return attnlab.scaled_dot_product_attention(q, k, F.one_hot(labels, 10).to(q.dtype))


def times_tau(queries, database, labels, tau):
    q, k = F.normalize(queries, dim=1), F.normalize(database, dim=1)
    return attnlab.scaled_dot_product_attention(q, k, F.one_hot(labels, 10).to(q.dtype), scale=tau)


def one_hot_without_classes(queries, database, labels, tau):  # (N_d, max label + 1)
    q, k = F.normalize(queries, dim=1), F.normalize(database, dim=1)
    return attnlab.scaled_dot_product_attention(q, k, F.one_hot(labels).to(q.dtype), scale=1 / tau)


def float32(queries, database, labels, tau):
    return tuple(t.float() for t in soft_right(queries, database, labels, tau))


def only_probabilities(queries, database, labels, tau):
    return soft_right(queries, database, labels, tau)[0]


def integer_values(queries, database, labels, tau):  # one_hot's int64 into a float matmul
    q, k = F.normalize(queries, dim=1), F.normalize(database, dim=1)
    return attnlab.scaled_dot_product_attention(q, k, F.one_hot(labels, 10), scale=1 / tau)


def nan_weights(queries, database, labels, tau):
    probs, weights = soft_right(queries, database, labels, tau)
    return probs, weights * float("nan")


soft_right(*ex05.soft_knn_inputs()[0])   # warm up: a first call may be slow on a loaded machine


@pytest.mark.parametrize("answer, expected_mark, words", [
    (soft_right, "✓", "soft k-NN as attention: matches attnlab's version on 3 random inputs"),
    (soft_written_out, "✓", "matches"),
    (ex05.soft_knn_reference, "✓", "matches"),
    (not_normalised, "✗", "differs from the reference"),
    (default_scale, "✗", "differs from the reference"),
    (times_tau, "✗", "differs from the reference"),
    (one_hot_without_classes, "✗", "expected (3, 10)"),
    (float32, "✗", "dtype torch.float32, expected torch.float64"),
    (only_probabilities, "✗", "tuple of 2 tensors"),
    (integer_values, "✗", "raised TypeError"),
    (nan_weights, "✗", "NaN"),
    (lambda q, d, labels, tau: None, "○", "returns None"),
    (lambda q, d, labels, tau: "probs", "✗", "tuple of 2 tensors"),
    (lambda q, d, labels, tau: (1, 2), "✗", "got a int"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    (42, "✗", "expected a function, got a int"),
    (placeholder, "○", "not attempted yet"),
    (..., "○", "not attempted yet"),
])
def test_soft_knn(capsys, answer, expected_mark, words):
    fn = ex05.soft_knn(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    q, d, labels, tau = ex05.soft_knn_inputs()[0]
    probs, weights = fn(q, d, labels, tau)                    # usable either way
    assert probs.shape == (4, 10) and weights.shape == (4, 30)


# --- explore: a τ that beats 1-NN --------------------------------------------------------------

def clusters():
    """Ten classes around orthogonal centres, 30% of the database labels flipped: the single
    nearest neighbour is often a flipped one, a vote over the cluster is not."""
    g = torch.Generator().manual_seed(0)
    centres = 3 * torch.eye(10, 32, dtype=torch.float64)               # (10, 32)
    db_y = torch.arange(200) % 10
    database = centres[db_y] + torch.randn(200, 32, generator=g, dtype=torch.float64)
    flip = torch.rand(200, generator=g) < 0.3
    db_y = torch.where(flip, torch.randint(0, 10, (200,), generator=g), db_y)
    q_y = torch.arange(50) % 10
    queries = centres[q_y] + torch.randn(50, 32, generator=g, dtype=torch.float64)
    return queries.numpy(), database.numpy(), db_y.numpy(), q_y.numpy()


DATA = clusters()


@pytest.mark.parametrize("tau, expected_mark, words", [
    (0.3, "✓", "at τ = 0.3 the soft vote is right on 35 of 50 queries, 1-NN on 25"),
    (np.float64(0.3), "✓", "right on 35 of 50"),
    (torch.tensor(0.3), "✓", "right on 35 of 50"),
    (0.001, "✗", "does not satisfy it yet"),   # the 1-NN limit: the same answers, not more
    (10, "✗", "does not satisfy it yet"),      # nearly uniform: the most common class
    (0, "✗", "does not satisfy it yet"),
    (-0.3, "✗", "does not satisfy it yet"),
    (float("nan"), "✗", "finite"),
    (float("inf"), "✗", "finite"),
    ("0.3", "✗", "should be a number"),
    (True, "✗", "should be a number"),
    ([0.3], "✗", "should be a number"),
    (None, "○", "not attempted yet"),
    (..., "○", "not attempted yet"),
])
def test_beat_one_nn(capsys, tau, expected_mark, words):
    got = ex05.beat_one_nn(tau, *DATA)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign != "✓":
        assert got in ex05.TAUS
        probs, _ = retrieval.soft_knn(DATA[0], DATA[1], DATA[2], got)   # usable below
        assert probs.shape == (50, 10)
