"""Notebook 01's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import math

import numpy as np
import pytest
import torch
from exercise_doubles import expect

import attnlab
from attnlab.exercises import ex01

K = ex01.WORKED_KEYS  # (3, 4)
MEASURED = attnlab.scaled_dot_product_attention(K[:1], K, K)[1][0]  # (3,)  query = key 0


def test_predict_weights(capsys):
    expect(capsys, ex01.predict_weights, [[0.45, 0.2, 0.35]], "✓",
           "you predicted 0.450, 0.200, 0.350; measured 0.405, 0.246, 0.349. Even key 1", MEASURED)
    # a hard lookup, and key 1 getting nothing: the lesson comes as the hint
    expect(capsys, ex01.predict_weights, [[1.0, 0.0, 0.0], [0.6, 0.0, 0.4]], "✗",
           "more than 0.1 apart). Hint: Even key 1", MEASURED)


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


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize("answers, mark, words", [
    ([right, attnlab.scaled_dot_product_attention], "✓",
     "attention: matches attnlab's version on 3 random inputs."),
    ([no_scale, softmax_over_queries], "✗", "differs from the reference"),
    ([plain_transpose], "✗", "on inputs of shapes (2, 6, 8)"),  # the first batched input
    ([lambda q, k, v: right(q, k, v)[0]], "✗", "tuple of 2 tensors"),  # forgot the weights
    ([lambda q, k, v: right(q, k, v)[::-1]], "✗", "the first result has shape"),  # swapped
])
def test_attention(capsys, answers, mark, words):
    got = expect(capsys, ex01.attention, answers, mark, words)
    assert got == (answers if mark == "✓" else [attnlab.scaled_dot_product_attention] * len(got))


# --- explore: a query that makes key 2 win -----------------------------------------------------

@pytest.mark.parametrize("answers, mark, words", [
    ([[1.0, 1.0, 0.0, 0.0], (3, 3, 0, 0), torch.tensor([2.0, 2.0, 1.0, -1.0]),
      np.array([1.0, 1.0, 0.0, 0.0])], "✓", "; key 2 takes the largest share."),
    ([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], "✗", "takes the largest share"),
    ([[0.0, 0.0, 0.0, 0.0]], "✗", "keys 0, 1, 2 tie"),
    ([[0.02, 0.02, 0.0, 0.0]], "✗", "key 2 leads by less than 0.01, too close to call"),
    ([[5.0, 5.0, 0.0, 0.0]], "✗", "within [-3, 3] (the sliders' range)"),
])
def test_key_2_wins(capsys, answers, mark, words):
    for got in expect(capsys, ex01.key_2_wins, answers, mark, words, K):
        assert isinstance(got, torch.Tensor) and got.shape == (4,)  # usable: key 2 wins with it
        assert attnlab.scaled_dot_product_attention(got[None], K, K)[1][0].argmax() == 2
