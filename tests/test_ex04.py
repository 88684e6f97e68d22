"""Notebook 04's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import math

import pytest
import torch
from exercise_doubles import expect

from attnlab.exercises import ex04


def test_order_without_positions(capsys):
    expect(capsys, ex04.order_without_positions, [0.5, torch.tensor(0.48)], "✓",
           "; measured 0.493. Both orders of the same words", 0.493)
    # "attention will figure it out", or half-way there
    expect(capsys, ex04.order_without_positions, [1.0, 0.75], "✗",
           "more than 0.05 apart). Hint: Both orders", 0.493)


def test_sinusoidal_norm(capsys):
    expect(capsys, ex04.sinusoidal_norm, [4, 4.02], "✓",
           "; measured 4.00. Each (sin, cos) pair has length 1", 4.0)
    # as if every entry were ±1; as if it were normalised
    expect(capsys, ex04.sinusoidal_norm, [math.sqrt(32), 1.0], "✗",
           "more than 0.05 apart). Hint: Each (sin, cos) pair", 4.0)


# --- implement: the shift matrix -----------------------------------------------------------------

def right(omega, k):
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [-s, c]])


def right_with_torch(omega, k):
    angle = torch.tensor(omega * k)
    return torch.stack([torch.stack([angle.cos(), angle.sin()]),
                        torch.stack([-angle.sin(), angle.cos()])])


@pytest.mark.parametrize("answers, mark, words", [
    ([right, right_with_torch], "✓", "shift_matrix: matches attnlab's version on 5 random inputs."),
    ([lambda o, k: right(o, k).T,  # rotates the wrong way
      lambda o, k: right(o, 1)],  # one step, whatever k
     "✗", "differs from the reference"),
])
def test_shift_matrix(capsys, answers, mark, words):
    expect(capsys, ex04.shift_matrix, answers, mark, words)
