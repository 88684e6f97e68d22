"""Notebook 02's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.) Also the measurement behind
the temperature exercise and its plot."""
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from exercise_doubles import expect

from attnlab import scaling
from attnlab.exercises import ex02
from attnlab.plots import against_temperature


def test_std_at_256(capsys):
    expect(capsys, ex02.std_at_256, [16, torch.tensor(17.5)], "✓",
           "; measured 16.36. q·k adds d_k terms of variance 1", 16.362)
    # the variance, not the standard deviation; linear growth from d_k = 4
    expect(capsys, ex02.std_at_256, [256, 128], "✗",
           "more than 2 apart). Hint: q·k adds d_k terms", 16.362)


# --- implement: fold 1/sqrt(d_k) into W_Q ------------------------------------------------------

def right(W_Q):
    return W_Q / math.sqrt(W_Q.shape[-1])


@pytest.mark.parametrize("answers, mark, words", [
    ([right, lambda W: W * W.shape[-1] ** -0.5], "✓",
     "fold the scale into W_Q: matches attnlab's version on 3 random inputs."),
    ([lambda W: W / W.shape[-1],  # d_k, not its square root
      lambda W: W / math.sqrt(W.shape[0]),  # d_model instead of d_k
      lambda W: W / 8,  # the notebook's d_k = 64, hard-coded
      lambda W: W * math.sqrt(W.shape[-1])], "✗", "differs from the reference"),
])
def test_fold_scale(capsys, answers, mark, words):
    expect(capsys, ex02.fold_scale, answers, mark, words)


# --- explore: the temperature of a mean largest weight of 0.5 ----------------------------------

@pytest.mark.parametrize("answers, mark, words", [
    ([3.52, 3.5, np.float32(3.6), torch.tensor(3.4)], "✓",
     "temperature for a peak of 0.5: at τ = 3."),
    ([1, 8, 1e-300], "✗", "Hint: at τ = "),  # the unscaled and the scaled softmax, and one-hot
    ([0, -3.5], "✗", "(a τ > 0 with a mean largest weight of 0.5 ± 0.02). Hint: a larger"),
])
def test_temperature(capsys, answers, mark, words):
    for answer, got in zip(answers, expect(capsys, ex02.temperature, answers, mark, words)):
        assert got is (answer if mark == "✓" else ex02.ANSWER)


def test_peak_weight_falls_with_temperature_between_one_hot_and_uniform():
    peaks = [scaling.peak_weight_at_temperature(t) for t in (0.25, 1.0, 8.0, 1000.0)]
    assert peaks[0] > 0.95 and peaks[-1] < 1 / 16 + 0.001 and np.all(np.diff(peaks) < 0)
    for bad, error in ((0.0, ValueError), (-1.0, ValueError), ("1", TypeError), (True, TypeError)):
        with pytest.raises(error, match="temperature"):
            scaling.peak_weight_at_temperature(bad)


def test_the_temperature_plot_draws_the_curve_the_marks_and_the_uniform_level():
    fig = against_temperature([1.0, 2.0, 4.0], [0.8, 0.6, 0.4], [(2.0, 0.6, "τ = 2", "red")])
    ax = fig.axes[0]
    assert len(ax.lines) == 3 and ax.get_xscale() == "log"  # curve, uniform level, one mark
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["uniform (1/16)", "τ = 2"]
    plt.close(fig)
    with pytest.raises(ValueError, match="taus and peaks"):
        against_temperature([1.0, 2.0], [0.5])
