"""Notebook 04's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○) and a return value the notebook's next cells can use."""
import math

import numpy as np
import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

from attnlab.attention import sinusoidal_table
from attnlab.exercises import ex04

# --- predict: the order task without positions ---------------------------------------------------

@pytest.mark.parametrize("guess, expected_mark, words", [
    (0.5, "✓", "you predicted 0.500; measured 0.493"),
    (0.48, "✓", "measured 0.493"),
    (torch.tensor(0.5), "✓", "measured"),
    (1.0, "✗", "more than 0.05 apart"),  # "attention will figure it out"
    (0.75, "✗", "more than 0.05 apart"),
    (0.0, "✗", "more than 0.05 apart"),
    ("50%", "✗", "number"),
    (float("inf"), "✗", "finite"),
    ((0.5, 0.5), "✗", "number"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_order_without_positions(capsys, guess, expected_mark, words):
    got = ex04.order_without_positions(guess, 0.493)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    assert float(got) == pytest.approx(0.493 if sign != "✓" else float(guess))


# --- predict: the length of a sinusoidal position vector -----------------------------------------

@pytest.mark.parametrize("guess, expected_mark, words", [
    (4.0, "✓", "you predicted 4.00; measured 4.00"),
    (4, "✓", "measured 4.00"),
    (np.float32(4.02), "✓", "measured"),
    (math.sqrt(32), "✗", "more than 0.05 apart"),  # as if every entry were ±1
    (1.0, "✗", "more than 0.05 apart"),  # as if it were normalised
    (16.0, "✗", "more than 0.05 apart"),
    ("four", "✗", "number"),
    (float("nan"), "✗", "finite"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_sinusoidal_norm(capsys, guess, expected_mark, words):
    got = ex04.sinusoidal_norm(guess, 4.0)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    assert float(got) == pytest.approx(4.0, abs=0.05)


# --- implement: the shift matrix -----------------------------------------------------------------

def right(omega, k):
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [-s, c]])


def right_with_torch(omega, k):
    angle = torch.tensor(omega * k)
    return torch.stack([torch.stack([angle.cos(), angle.sin()]),
                        torch.stack([-angle.sin(), angle.cos()])])


@pytest.mark.parametrize("answer, expected_mark, words", [
    (right, "✓", "matches attnlab's version on 5 random inputs"),
    (right_with_torch, "✓", "matches"),
    (lambda o, k: right(o, k).T, "✗", "differs"),  # rotates the wrong way
    (lambda o, k: right(o, 1), "✗", "differs"),  # one step, whatever k
    (lambda o, k: torch.tensor([[math.cos(o * k), -math.sin(o * k)],
                                [math.sin(o * k), math.cos(o * k)]]), "✗", "differs"),
    (lambda o, k: right(o, k).double(), "✗", "dtype"),
    (lambda o, k: right(o, k)[0], "✗", "shape"),
    (lambda o, k: right(o, k) * float("nan"), "✗", "NaN"),
    (lambda o, k: [[1.0, 0.0], [0.0, 1.0]], "✗", "torch.Tensor"),
    (lambda o, k: np.eye(2), "✗", "NumPy array"),
    (lambda o, k: 1, "✗", "torch.Tensor"),
    (lambda o, k: "rotation", "✗", "torch.Tensor"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    ("M", "✗", "expected a function"),
    (2, "✗", "expected a function"),
    (placeholder, "○", "not attempted"),
    (lambda o, k: None, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_shift_matrix(capsys, answer, expected_mark, words):
    got = ex04.shift_matrix(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign == "✗":
        assert "Hint:" in line
    # usable either way: it moves the table's first pair 3 positions on
    table = sinusoidal_table(10, 4)  # (10, 4)
    assert torch.allclose(table[:-3, :2] @ got(1.0, 3).T, table[3:, :2], atol=1e-5)
