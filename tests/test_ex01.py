"""Notebook 01's exercises: right answers written in other ways, the predict and explore checks'
cases, and the wrong answers the tables of mistakes do not hold (the tables:
tests/test_exercises.py; hostile answers: there too)."""
import math

import numpy as np
import pytest
import torch
from exercise_doubles import expect

import attnlab
from attnlab.core import attention as attn
from attnlab.exercises import ex01

K = ex01.WORKED_KEYS  # (3, 4)
MEASURED = attnlab.scaled_dot_product_attention(K[:1], K, K)[1][0]  # (3,)  query = key 0


def test_predict_weights(capsys):
    expect(capsys, ex01.predict_weights, [[0.45, 0.2, 0.35]], "✎",
           "you predicted 0.450, 0.200, 0.350; measured 0.405, 0.246, 0.349 (within 0.1). Even "
           "key 1", MEASURED)
    # a hard lookup, and key 1 getting nothing: no ✗, the gap and the lesson
    expect(capsys, ex01.predict_weights, [[1.0, 0.0, 0.0]], "✎",
           "(0.595 apart at most) (written after the measurement was shown). Even key 1", MEASURED)


def right(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def plain_transpose(q, k, v):  # right on 2-D inputs only
    weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_attention(capsys):
    answers = [right, attnlab.scaled_dot_product_attention]
    assert expect(capsys, ex01.attention, answers, "✓",
                  "attention: matches attnlab's version on 3 random inputs.") == answers
    for answer, words in [
        (plain_transpose, "given a (2, 6, 8) tensor"),  # the first batched input
        (lambda q, k, v: right(q, k, v)[0], "tuple of 2 tensors"),  # forgot the weights
        (lambda q, k, v: right(q, k, v)[::-1], "the first result has shape"),  # swapped
    ]:
        expect(capsys, ex01.attention, [answer], "✗", words)


def usable_for_key_2(got, case):
    """What key_2_wins returns, right or wrong, is a query with which key 2 wins."""
    assert isinstance(got, torch.Tensor) and got.shape == (4,), case
    assert attnlab.scaled_dot_product_attention(got[None], K, K)[1][0].argmax() == 2, case


def test_key_2_wins(capsys):
    answers = [[1.0, 1.0, 0.0, 0.0], (3, 3, 0, 0), torch.tensor([2.0, 2.0, 1.0, -1.0]),
               np.array([1.0, 1.0, 0.0, 0.0])]
    for answer, got in zip(answers, expect(capsys, ex01.key_2_wins, answers, "✓",
                                           "; key 2 takes the largest share.", K)):
        usable_for_key_2(got, answer)
    for answers, words in [
        ([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], "takes the largest share"),
        ([[0.0, 0.0, 0.0, 0.0]], "keys 0, 1, 2 tie"),
        ([[0.02, 0.02, 0.0, 0.0]], "key 2 leads by less than 0.01, too close to call"),
        ([[5.0, 5.0, 0.0, 0.0]], "within [-3, 3] (the sliders' range)"),
    ]:
        for got in expect(capsys, ex01.key_2_wins, answers, "✗", words, K):
            usable_for_key_2(got, words)


K4 = torch.cat([K, torch.tensor([[2.0, 0.0, 0.0, 0.0]])])  # (4, 4): a long key 3
W4 = attnlab.scaled_dot_product_attention(torch.tensor([[1.0, 1.0, 0.0, 0.0]]), K4, K4)[1][0]


def test_predict_winner(capsys):
    for answer in [3, 3.0, np.int64(3)]:
        assert expect(capsys, ex01.predict_winner, [answer], "✎", "you predicted key 3; key 3 "
                      "gets the largest weight ([0.205, 0.205, 0.251, 0.339]). q·k", W4) == [None]
    expect(capsys, ex01.predict_winner, [2], "✎", "you predicted key 2; key 3 gets the largest "
           "weight", W4)  # direction only
    expect(capsys, ex01.predict_winner, [4, 2.5, -1], "○", "not a key number (0 to 3). Write one "
           "key number", W4)


def split(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)


def test_split_heads(capsys):
    answers = [split, attn.split_heads, lambda x, h: x.unflatten(-1, (h, -1)).permute(0, 2, 1, 3)]
    assert expect(capsys, ex01.split_heads, answers, "✓",
                  "split_heads: matches attnlab's version on 3 random inputs.") == answers
    expect(capsys, ex01.split_heads, [lambda x, h: split(x, h).flip(2)], "✗",
           "your result differs from the reference by up to")  # the positions reversed


def test_merge_heads(capsys):
    answers = [lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1), attn.merge_heads,
               lambda x: x.transpose(1, 2).contiguous().flatten(2)]
    assert expect(capsys, ex01.merge_heads, answers, "✓",
                  "merge_heads: matches attnlab's version on 3 random inputs.") == answers
    expect(capsys, ex01.merge_heads, [lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1)],
           "✗", "raised RuntimeError: view size is not compatible")  # .view after the transpose
