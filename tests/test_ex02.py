"""Notebook 02's exercise. (Hostile answers, for every check at once: tests/test_exercises.py.)"""
from exercise_doubles import expect

from attnlab.exercises import ex02


def test_std_at_256(capsys):
    expect(capsys, ex02.std_at_256, [16], "✎", "; measured 16.36 (within 2). q·k adds d_k terms "
           "of variance 1", 16.362)
    # the variance, not the standard deviation
    expect(capsys, ex02.std_at_256, [256], "✎",
           "(239.64 apart) (written after the measurement was shown). q·k adds", 16.362)
