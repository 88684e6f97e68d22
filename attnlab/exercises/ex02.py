"""The exercises of notebook 02 (why divide by √d_k), checked.

- `std_at_256` (predict): std(q·k) at d_k = 256, guessed before it is measured.

What the scale does in a model that trains is measured in notebook 03 (its checks are in ex03).

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

from . import (
    check_prediction,
    exercise,
)


@exercise("predict", args=(16.36,))
def std_at_256(guess, measured):
    """Your guess for std(q·k) at d_k = 256 against the measured value (±2 is right)."""
    return check_prediction(
        guess, measured, name="predict std(q·k) at d_k = 256", tolerance=2.0, digits=2,
        lesson="q·k adds d_k terms of variance 1: the variances add up, and std is the square "
               "root of the variance.")
