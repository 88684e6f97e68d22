"""Notebook 01's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○) and a return value the notebook's next cells can use."""
import math

import numpy as np
import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

import attnlab
from attnlab.exercises import ex01

K = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.7, 0.7, 0.0, 0.0]])  # (3, 4)
V = torch.tensor([[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]])  # (3, 2)
Q = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # (1, 4)


# --- predict the weights -----------------------------------------------------------------------

MEASURED = attnlab.scaled_dot_product_attention(Q, K, V)[1][0]  # (3,)


@pytest.mark.parametrize("guess, expected_mark, words", [
    ([0.45, 0.2, 0.35], "✓", "you predicted 0.450, 0.200, 0.350; measured 0.405, 0.246, 0.349"),
    (torch.tensor([0.4, 0.25, 0.35]), "✓", "measured"),
    (np.array([0.4, 0.25, 0.35]), "✓", "measured"),
    ([1.0, 0.0, 0.0], "✗", "more than 0.1 apart"),  # a hard lookup: the typical wrong guess
    ([0.6, 0.0, 0.4], "✗", "more than 0.1 apart"),  # key 1 gets nothing
    ([0.4, 0.25], "✗", "expected 3 numbers, got 2"),
    ([0.4, float("nan"), 0.35], "✗", "finite"),
    ([0.4, "a", 0.35], "✗", "number"),
    ("0.4, 0.25, 0.35", "✗", "list of 3 numbers"),
    (0.4, "✗", "list of 3 numbers"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_predict_weights(capsys, guess, expected_mark, words):
    got = ex01.predict_weights(guess, MEASURED)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign != "✓":
        assert got is MEASURED  # the measured weights, usable below


# --- implement attention -----------------------------------------------------------------------

def right(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def no_scale(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights


def softmax_over_queries(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return weights @ v, weights


def plain_transpose(q, k, v):  # right on 2-D inputs only
    weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


@pytest.mark.parametrize("answer, expected_mark, words", [
    (right, "✓", "matches attnlab's version on 3 random inputs"),
    (attnlab.scaled_dot_product_attention, "✓", "matches"),
    (no_scale, "✗", "differs from the reference"),
    (softmax_over_queries, "✗", "differs from the reference"),
    pytest.param(plain_transpose, "✗", "(2, 6, 8)",  # caught on the first batched input
                 marks=pytest.mark.filterwarnings("ignore:The use of `x.T`")),
    (lambda q, k, v: right(q, k, v)[0], "✗", "tuple of 2 tensors"),  # forgot the weights
    (lambda q, k, v: right(q, k, v)[::-1], "✗", "shape"),  # (weights, output) swapped
    (lambda q, k, v: tuple(t.double() for t in right(q, k, v)), "✗", "dtype"),
    (lambda q, k, v: tuple(t * float("nan") for t in right(q, k, v)), "✗", "NaN"),
    (lambda q, k, v: (3, 4), "✗", "torch.Tensor"),
    (lambda q, k, v: "attention", "✗", "tuple of 2 tensors"),
    (raises, "✗", "ZeroDivisionError"),
    (loops_forever, "✗", "did not finish"),
    ("my_attention", "✗", "expected a function"),
    (42, "✗", "expected a function"),
    (placeholder, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_attention(capsys, answer, expected_mark, words):
    got = ex01.attention(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign == "✗":
        assert "Hint:" in line
    output, weights = got(Q, K, V)  # usable either way: the notebook goes on with it
    assert torch.allclose(weights[0], MEASURED, atol=1e-6)


def test_attention_inputs_cover_batches_and_unequal_lengths():
    shapes = [tuple(tuple(t.shape) for t in triple) for triple in ex01.attention_inputs()]
    assert any(len(q) == 4 and q[-2] != k[-2] and v[-1] != k[-1] for q, k, v in shapes)
    assert any(len(q) == 2 for q, _, _ in shapes)


# --- explore: a query that makes key 2 win -----------------------------------------------------

@pytest.mark.parametrize("query, expected_mark, words", [
    ([1.0, 1.0, 0.0, 0.0], "✓", "weights [0.310, 0.310, 0.379]; key 2 takes the largest share"),
    ((3, 3, 0, 0), "✓", "key 2"),
    (torch.tensor([2.0, 2.0, 1.0, -1.0]), "✓", "key 2"),
    (np.array([1.0, 1.0, 0.0, 0.0]), "✓", "key 2"),
    ([1.0, 0.0, 0.0, 0.0], "✗", "key 0 takes the largest share"),
    ([0.0, 1.0, 0.0, 0.0], "✗", "key 1 takes the largest share"),
    ([0.0, 0.0, 0.0, 0.0], "✗", "keys 0, 1, 2 tie"),
    ([5.0, 5.0, 0.0, 0.0], "✗", "within [-3, 3]"),
    ([1.0, 1.0], "✗", "2 numbers, expected 4"),
    ([1.0, float("nan"), 0.0, 0.0], "✗", "finite"),
    ([1.0, "1", 0.0, 0.0], "✗", "number"),
    ([[1.0, 1.0, 0.0, 0.0]], "✗", "1 numbers, expected 4"),
    (torch.ones(2, 4), "✗", "list of 4 numbers"),
    ("1, 1, 0, 0", "✗", "list of 4 numbers"),
    (2, "✗", "list of 4 numbers"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_key_2_wins(capsys, query, expected_mark, words):
    got = ex01.key_2_wins(query, K)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    assert isinstance(got, torch.Tensor) and got.shape == (4,)
    _, w = attnlab.scaled_dot_product_attention(got[None], K, V)  # usable: key 2 wins with it
    assert w[0].argmax().item() == 2
