"""Notebook 02's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○) and a return value the notebook's next cells can use."""
import math

import numpy as np
import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

import attnlab
from attnlab import scaling
from attnlab.exercises import ex02

# --- predict std(q·k) at d_k = 256 -------------------------------------------------------------

MEASURED = 16.362


@pytest.mark.parametrize("guess, expected_mark, words", [
    (16, "✓", "you predicted 16.00; measured 16.36"),
    (torch.tensor(17.5), "✓", "measured 16.36"),
    (np.float64(15.0), "✓", "measured"),
    (256, "✗", "more than 2 apart"),  # the variance, not the standard deviation
    (128, "✗", "more than 2 apart"),  # 2 × 64: linear growth from d_k = 4
    (2, "✗", "more than 2 apart"),
    ("16", "✗", "should be a number"),
    (float("nan"), "✗", "finite"),
    (True, "✗", "should be a number"),
    ([16], "✗", "should be a number"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_std_at_256(capsys, guess, expected_mark, words):
    got = ex02.std_at_256(guess, MEASURED)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign != "✓":
        assert got == MEASURED  # the measured value, usable below


# --- implement: fold 1/sqrt(d_k) into W_Q ------------------------------------------------------

def right(W_Q):
    return W_Q / math.sqrt(W_Q.shape[-1])


@pytest.mark.parametrize("answer, expected_mark, words", [
    (right, "✓", "matches attnlab's version on 3 random inputs"),
    (lambda W: W * W.shape[-1] ** -0.5, "✓", "matches"),
    (lambda W: W / W.shape[-1], "✗", "differs from the reference"),  # d_k, not its square root
    (lambda W: W / math.sqrt(W.shape[0]), "✗", "differs"),  # d_model instead of d_k
    (lambda W: W / 8, "✗", "differs"),  # the notebook's d_k = 64, hard-coded
    (lambda W: W * math.sqrt(W.shape[-1]), "✗", "differs"),
    (lambda W: right(W).T, "✗", "shape"),
    (lambda W: right(W).double(), "✗", "dtype"),
    (lambda W: right(W) * float("nan"), "✗", "NaN"),
    (lambda W: right(W).numpy(), "✗", "NumPy"),
    (lambda W: 1, "✗", "torch.Tensor"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    ("W_Q / 8", "✗", "expected a function"),
    (placeholder, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_fold_scale(capsys, answer, expected_mark, words):
    fold = ex02.fold_scale(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    # usable either way: folded queries without the division give scaled attention
    g = torch.Generator().manual_seed(0)
    X = torch.randn(1, 5, 8, generator=g, dtype=torch.float64)  # (B, T, d_model)
    W_Q, W_K = (torch.randn(8, 16, generator=g, dtype=torch.float64) for _ in range(2))
    expected, _ = attnlab.scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_K)
    got, _ = attnlab.scaled_dot_product_attention(X @ fold(W_Q), X @ W_K, X @ W_K, scale=1.0)
    assert torch.allclose(got, expected, atol=1e-12)


# --- explore: the temperature of a mean largest weight of 0.5 ----------------------------------

def test_the_reference_answer_gives_a_peak_of_one_half():
    assert abs(scaling.peak_weight_at_temperature(ex02.ANSWER) - 0.5) < 0.001


def test_peak_weight_falls_with_temperature_between_one_hot_and_uniform():
    peaks = [scaling.peak_weight_at_temperature(t) for t in (0.25, 1.0, 8.0, 1000.0)]
    assert peaks[0] > 0.95 and peaks[-1] < 1 / 16 + 0.001 and np.all(np.diff(peaks) < 0)
    for bad, error in ((0.0, ValueError), (-1.0, ValueError), ("1", TypeError), (True, TypeError)):
        with pytest.raises(error, match="temperature"):
            scaling.peak_weight_at_temperature(bad)


@pytest.mark.parametrize("answer, expected_mark, words", [
    (3.52, "✓", "at τ = 3.52 the mean largest weight is 0.500"),
    (3.5, "✓", "at τ = 3.5"),
    (np.float32(3.6), "✓", "0.49"),
    (torch.tensor(3.4), "✓", "0.51"),
    (1, "✗", "at τ = 1 the mean largest weight is 0.842"),  # the unscaled softmax
    (8, "✗", "at τ = 8 the mean largest weight is 0.240"),  # the scaled one
    (0, "✗", "a larger τ flattens"),
    (-3.5, "✗", "a τ > 0"),
    (1e308, "✗", "does not satisfy"),
    (1e-300, "✗", "does not satisfy"),
    ("3.5", "✗", "should be a number"),
    (float("nan"), "✗", "finite"),
    (float("inf"), "✗", "finite"),
    (True, "✗", "should be a number"),
    ([3.5], "✗", "should be a number"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_temperature(capsys, answer, expected_mark, words):
    got = ex02.temperature(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign != "✓":
        assert got == ex02.ANSWER  # a temperature that works, usable below


def test_the_temperature_plot_draws_the_curve_the_marks_and_the_uniform_level():
    import matplotlib.pyplot as plt

    from attnlab.plots import against_temperature

    fig = against_temperature([1.0, 2.0, 4.0], [0.8, 0.6, 0.4], [(2.0, 0.6, "τ = 2", "red")])
    ax = fig.axes[0]
    assert len(ax.lines) == 3 and ax.get_xscale() == "log"  # curve, uniform level, one mark
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["uniform (1/16)", "τ = 2"]
    plt.close(fig)
    with pytest.raises(ValueError, match="taus and peaks"):
        against_temperature([1.0, 2.0], [0.5])
