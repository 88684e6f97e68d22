"""Notebook 03's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import pytest
import torch
from exercise_doubles import expect

from attnlab.exercises import ex03
from attnlab.exercises.ex03 import _attention_received as attention_received  # attnlab's

# --- implement: attention received --------------------------------------------------------------

def right_received(weights, real):
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    return (weights * queries).sum(-2) / queries.sum(-2)  # (B, H, T)


@pytest.mark.parametrize("answers, mark, words", [
    ([right_received, attention_received], "✓",
     "attention_received: matches attnlab's version on 3 random inputs."),
    ([lambda w, r: w.mean(-2),  # padding queries counted too
      lambda w, r: w.mean(-1),  # rows (what a query gives), not columns
      lambda w, r: (w * r[:, None, :, None]).sum(-2)],  # a sum, not a mean
     "✗", "differs from the reference"),
    ([lambda w, r: right_received(w, r).mean(1)], "✗", "has shape (2, 4), expected (2, 1, 4)"),
])
def test_attention_received(capsys, answers, mark, words):
    expect(capsys, ex03.attention_received, answers, mark, words)


# --- implement: zero the decisive word's column after the softmax --------------------------------

def right_zero(weights, pos):
    weights = weights.clone()
    weights[torch.arange(len(pos)), :, :, pos] = 0.0
    return weights


def in_place(weights, pos):
    for b, p in enumerate(pos.tolist()):
        weights[b, :, :, p] = 0.0
    return weights


def renormalised(weights, pos):  # that is masking before the softmax, not zeroing after it
    w = right_zero(weights, pos)
    return w / w.sum(-1, keepdim=True)


def zero_row(weights, pos):
    weights = weights.clone()
    weights[torch.arange(len(pos)), :, pos, :] = 0.0
    return weights


@pytest.mark.parametrize("answers, mark, words", [
    ([right_zero, in_place], "✓", "zero_column: matches attnlab's version on 3 random inputs."),
    ([renormalised, zero_row, lambda w, p: w], "✗", "differs from the reference"),
    ([lambda w, p: w[..., 0]], "✗", "has shape (2, 1, 3), expected (2, 1, 3, 3)"),
])
def test_zero_column(capsys, answers, mark, words):
    expect(capsys, ex03.zero_column, answers, mark, words)


def test_flips_after_zeroing(capsys):
    expect(capsys, ex03.flips_after_zeroing, [0.9, torch.tensor(0.85)], "✓",
           "; measured 0.936. Masking before the softmax gives", 0.936)
    expect(capsys, ex03.flips_after_zeroing, [0.5, 0.0], "✗",
           "more than 0.1 apart). Hint: Masking before the softmax", 0.936)
