"""Notebook 02's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.) Also that the explore
exercise's experiment gives the same first epochs however many follow."""
import math

import pytest
import torch
from exercise_doubles import expect

from attnlab import scaling
from attnlab.exercises import ex02


def test_std_at_256(capsys):
    expect(capsys, ex02.std_at_256, [16], "✎", "; measured 16.36 (within 2). q·k adds d_k terms "
           "of variance 1", 16.362)
    # the variance, not the standard deviation
    expect(capsys, ex02.std_at_256, [256], "✎",
           "(239.64 apart) (written after the measurement was shown). q·k adds", 16.362)



# --- implement: the spread of a layer's scaled scores -------------------------------------------

def _scores(attn, h, scale):
    q, k, _ = attn.project(h)  # (B, H, T, D)
    return q @ k.transpose(-2, -1) * scale  # (B, H, T, T)


def _scale(attn):
    return attn.scale if attn.scale is not None else 1 / math.sqrt(attn.d_head)


def _pairs(real):
    return real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)


def right(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(_pairs(real)).std()


def population_std(attn, h, real):  # dividing by n instead of n - 1 is as good
    return _scores(attn, h, _scale(attn)).masked_select(_pairs(real)).std(correction=0)


def as_float(attn, h, real):
    return right(attn, h, real).item()


def no_scale(attn, h, real):
    return _scores(attn, h, 1.0).masked_select(_pairs(real)).std()


def fixed_scale(attn, h, real):  # 1/√d_head even where the layer has its own scale
    return _scores(attn, h, 1 / math.sqrt(attn.d_head)).masked_select(_pairs(real)).std()


def variance(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(_pairs(real)).var()


def every_pair(attn, h, real):
    return _scores(attn, h, _scale(attn)).std()


def keys_only(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(real[:, None, None, :]).std()


def queries_only(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(real[:, None, :, None]).std()


def test_score_spread_right_answers(capsys):
    answers = [right, population_std, as_float, scaling.score_spread]
    got = expect(capsys, ex02.score_spread, answers, "✓",
                 "score_spread: matches attnlab's version on 3 random inputs.")
    assert got == answers


def test_score_spread_names_each_typical_mistake(capsys):
    for answers, words in [
        ([no_scale], "without the layer's scale"),
        ([fixed_scale], "you used 1/√d_head: read the layer's own scale"),
        ([variance], "that is the variance"),
        ([every_pair], "counts the pairs with a padding token too"),
        ([keys_only], "counts the padding queries"),
        ([queries_only], "counts the padding keys"),
        ([lambda attn, h, real: right(attn, h, real) + 1], "your spread is"),
    ]:
        got = expect(capsys, ex02.score_spread, answers, "✗", words)
        assert got == [scaling.score_spread] * len(got), words


def test_spread_at_init(capsys):
    expect(capsys, ex02.spread_at_init, [0.02, 0.05], "✎", "measured 0.020 (within 0.05)",
           0.0201)
    # section 1's spread
    expect(capsys, ex02.spread_at_init, [1.0], "✎", "(0.980 apart) (written after", 0.0201)



# --- explore: the accuracy without the scale ------------------------------------------------------

def test_accuracy_without_scale(capsys):
    curves = ex02.EXAMPLE_CURVES
    right_answers = [0.9, 360 / 400, torch.tensor(0.9, dtype=torch.float64)]
    cases = [(right_answers, "✓", "after 4 epochs is 0.900; with the scale it was 0.812."),
             ([0.8125], "✗", "the scaled run's accuracy"),
             ([0.7775, 0.955], "✗", "the question asks for epoch 4"),  # epochs 3 and 5
             ([0.85], "✗", "is not what the model with scale=1.0, seed 0, reaches after 4 epochs"),
             ([90], "✗", "is not an accuracy")]
    for answers, mark, words in cases:
        for got in expect(capsys, ex02.accuracy_without_scale, answers, mark, words, curves):
            assert got == pytest.approx(0.9), words


def test_accuracy_without_scale_follows_the_measurement(capsys):
    """Another series seed measures other curves: the check judges against the ones passed in."""
    curves = {"scale 1.0": (0.5, 0.6, 0.8, 0.875, 0.9), "scaled": (0.5, 0.55, 0.6, 0.7, 0.85)}
    expect(capsys, ex02.accuracy_without_scale, [0.875], "✓", "after 4 epochs is 0.875; with "
           "the scale it was 0.700.", curves)
    expect(capsys, ex02.accuracy_without_scale, [0.9], "✗", "after epoch 5", curves)


def test_the_curves_are_the_experiment():
    """The exercise asks for what train_at_scale(1.0, seed=0) measures after 4 epochs: the
    first epochs do not depend on how many follow (the hint says so)."""
    short = scaling.train_at_scale(1.0, seed=0, epochs=ex02.EPOCH).history["test_acc"]
    longer = scaling.train_at_scale(1.0, seed=0, epochs=ex02.EPOCH + 1).history["test_acc"]
    assert longer[:ex02.EPOCH] == short


# --- predict: the folded model's spread -------------------------------------------------

def test_folded_spread(capsys):
    got = expect(capsys, ex02.folded_spread, ["unscaled", " Unscaled"], "✎",
                 "end up like the unscaled model's", ex02.EXAMPLE_SPREADS)
    assert got == [None, None]  # the guess stays the student's
    expect(capsys, ex02.folded_spread, ["scaled"], "✎", "you predicted scaled; the folded "
           "model's scores end up like the unscaled model's (spreads after training: scaled 0.80",
           ex02.EXAMPLE_SPREADS)
    expect(capsys, ex02.folded_spread, ["neither"], "○",
           "write \"scaled\" or \"unscaled\", got the string 'neither'", ex02.EXAMPLE_SPREADS)


def test_folded_spread_follows_the_measurement(capsys):
    spreads = {"scaled": [1.0, 1.2], "scale 1.0": [4.0, 5.0], "folded": [1.1, 1.5]}
    expect(capsys, ex02.folded_spread, ["scaled"], "✎", "end up like the scaled model's", spreads)
