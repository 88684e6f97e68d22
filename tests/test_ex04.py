"""Notebook 04's exercises: right answers written in other ways, the cases the tables of mistakes
do not hold (the tables: tests/test_exercises.py; hostile answers: there too), the predict and
explore checks' cases, and that the explore exercise's experiment gives the same first epochs
however many follow."""
import math

import pytest
import torch
from exercise_doubles import expect

from attnlab.core.measures import attention_received
from attnlab.exercises import ex04
from attnlab.lessons import scaling


def test_zeroed_accuracy(capsys):
    expect(capsys, ex04.zeroed_accuracy, [0.6], "✎",
           "; measured 0.610 (within 0.1). Masking before the softmax gives", 0.61)


def in_place_received(weights, real):  # right, though it changes its input
    weights *= real[:, None, :, None].to(weights.dtype)
    return weights.sum(-2) / real.sum(-1)[:, None, None]


def test_attention_received(capsys):
    answers = [attention_received, in_place_received,
               lambda w, r: (w * r[:, None, :, None]).sum(-2) / r.sum(-1)[:, None, None]]
    assert expect(capsys, ex04.attention_received, answers, "✓", "attention_received: matches "
                  "attnlab's version on 3 random inputs.") == answers
    for answer, words in [
        (lambda w, r: attention_received(w, r) + 0.1, "differs from the reference by up to 0.100"),
        (lambda w, r: attention_received(w, r).mean(1), "has shape (2, 4), expected (2, 1, 4)"),
    ]:
        expect(capsys, ex04.attention_received, [answer], "✗", words)


def in_place_zero(weights, pos):  # right, though it changes its input
    weights[torch.arange(len(pos)), :, :, pos] = 0.0
    return weights


def test_zero_column(capsys):
    answers = [in_place_zero, lambda w, pos: in_place_zero(w.clone(), pos)]
    assert expect(capsys, ex04.zero_column, answers, "✓", "zero_column: matches attnlab's "
                  "version on 3 random inputs.") == answers
    for answer, words in [  # the word masked before the softmax: as renormalised, in the table
        (lambda w, pos: torch.softmax(w.log() + torch.where(
            torch.arange(w.shape[-1]) == pos[:, None], -math.inf, 0.0)[:, None, None, :], -1),
         "you renormalised the rows"),
        (lambda w, pos: ex04._zero_column(w, pos) * 0.5, "differs from the reference by up to"),
    ]:
        expect(capsys, ex04.zero_column, [answer], "✗", words)


def spread(attn, h, real, **std):
    q, k, _ = attn.project(h)  # (B, H, T, D)
    scale = attn.scale if attn.scale is not None else 1 / math.sqrt(attn.d_head)
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)
    return (q @ k.transpose(-2, -1) * scale).masked_select(pairs).std(**std)


def test_score_spread(capsys):
    answers = [spread, lambda a, h, r: spread(a, h, r, correction=0),  # population std: as good
               lambda a, h, r: spread(a, h, r).item(), scaling.score_spread]
    assert expect(capsys, ex04.score_spread, answers, "✓", "score_spread: matches attnlab's "
                  "version on 3 random inputs.") == answers
    expect(capsys, ex04.score_spread, [lambda a, h, r: spread(a, h, r) + 1], "✗",
           "your spread is 1.3938, expected 0.3938")


def test_spread_at_init(capsys):
    expect(capsys, ex04.spread_at_init, [0.02, 0.05], "✎", "measured 0.020 (within 0.05)",
           0.0201)
    expect(capsys, ex04.spread_at_init, [1.0], "✎", "(0.980 apart) (written after", 0.0201)


def test_accuracy_without_scale(capsys):
    cases = [([0.9, 360 / 400, torch.tensor(0.9, dtype=torch.float64)], "✓",
              "after 4 epochs is 0.900; with the scale it was 0.812."),
             ([0.8125], "✗", "the scaled run's accuracy"),
             ([0.7775, 0.955], "✗", "the question asks for epoch 4"),  # epochs 3 and 5
             ([0.85], "✗", "is not what the model with scale=1.0, seed 0, reaches after 4 epochs"),
             ([90], "✗", "is not an accuracy")]
    for answers, mark, words in cases:
        for got in expect(capsys, ex04.accuracy_without_scale, answers, mark, words,
                          ex04.EXAMPLE_CURVES):
            assert got == pytest.approx(0.9), words
    # another series seed measures other curves: the check judges against the ones passed in
    curves = {"scale 1.0": (0.5, 0.6, 0.8, 0.875, 0.9), "scaled": (0.5, 0.55, 0.6, 0.7, 0.85)}
    expect(capsys, ex04.accuracy_without_scale, [0.875], "✓", "after 4 epochs is 0.875; with "
           "the scale it was 0.700.", curves)
    expect(capsys, ex04.accuracy_without_scale, [0.9], "✗", "after epoch 5", curves)


def test_the_curves_are_the_experiment():
    """The exercise asks for what train_at_scale(1.0, seed=0) measures after 4 epochs: the
    first epochs do not depend on how many follow (the hint says so)."""
    short = scaling.train_at_scale(1.0, seed=0, epochs=ex04.EPOCH).history["test_acc"]
    longer = scaling.train_at_scale(1.0, seed=0, epochs=ex04.EPOCH + 1).history["test_acc"]
    assert longer[:ex04.EPOCH] == short


def test_folded_spread(capsys):
    got = expect(capsys, ex04.folded_spread, ["unscaled", " Unscaled"], "✎",
                 "end up like the unscaled model's", ex04.EXAMPLE_SPREADS)
    assert got == [None, None]  # the guess stays the student's
    expect(capsys, ex04.folded_spread, ["scaled"], "✎", "you predicted scaled; the folded "
           "model's scores end up like the unscaled model's (spreads after training: scaled 0.80",
           ex04.EXAMPLE_SPREADS)
    expect(capsys, ex04.folded_spread, ["neither"], "○",
           "write \"scaled\" or \"unscaled\", got the string 'neither'", ex04.EXAMPLE_SPREADS)
    spreads = {"scaled": [1.0, 1.2], "scale 1.0": [4.0, 5.0], "folded": [1.1, 1.5]}
    expect(capsys, ex04.folded_spread, ["scaled"], "✎", "end up like the scaled model's", spreads)
