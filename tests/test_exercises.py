"""The exercise framework (attnlab.exercises): a check never raises, prints one line that starts
with ✓, ✗ or ○, and returns something the cells below can use."""
import math

import numpy as np
import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

from attnlab import exercises
from attnlab.exercises import call_safely, check_function, check_number, check_prediction


def reference(q, k, v):
    # (..., T_q, T_k)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def inputs():
    g = torch.Generator().manual_seed(0)
    return [tuple(torch.randn(2, 3, 4, generator=g) for _ in range(3))]


@pytest.mark.parametrize("answer, expected_mark, words", [
    (reference, "✓", "matches"),
    (lambda q, k, v: q @ k.transpose(-2, -1) @ v, "✗", "differs"),  # forgot the softmax
    (lambda q, k, v: (q @ k.transpose(-2, -1)).softmax(-1) @ v, "✗", "differs"),  # forgot the scale
    (lambda q, k, v: reference(q, k, v)[..., :1], "✗", "shape"),
    (lambda q, k, v: reference(q, k, v).double(), "✗", "dtype"),
    (lambda q, k, v: reference(q, k, v) * float("nan"), "✗", "NaN"),
    (lambda q, k, v: 3, "✗", "torch.Tensor"),
    (lambda q, k, v: reference(q, k, v).numpy(), "✗", "NumPy"),
    (raises, "✗", "ZeroDivisionError"),
    (loops_forever, "✗", "did not finish"),
    ("attention", "✗", "expected a function"),
    (placeholder, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_check_function_marks_and_returns_a_usable_function(capsys, answer, expected_mark, words):
    got = check_function(answer, reference, inputs(), name="attention", hint="look again")
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    assert got is (answer if expected_mark == "✓" else reference)
    if expected_mark == "✗":
        assert "Hint: look again" in line


def test_call_safely_restores_the_alarm_after_a_time_out():
    assert call_safely(loops_forever, 1, 2, 3, seconds=0.1)[1].startswith("your function did not")
    assert call_safely(lambda: 5) == (5, None)


def test_the_time_limit_is_the_module_setting_when_called(monkeypatch):
    """`seconds=None` (the default) reads TIME_LIMIT_S at call time, so a test or a slow
    machine can change it; tests/conftest.py sets it to 0.3 s."""
    assert exercises.TIME_LIMIT_S == 0.3
    assert "within 0.3 s" in call_safely(loops_forever)[1]
    monkeypatch.setattr(exercises, "TIME_LIMIT_S", 0.1)
    assert "within 0.1 s" in call_safely(loops_forever)[1]


@pytest.mark.parametrize("guess, expected_mark", [
    ([0.4, 0.25, 0.35], "✓"), ([0.9, 0.05, 0.05], "✗"), (..., "○"), (None, "○"),
    ("0.4", "✗"), ([0.4, 0.25], "✗"), ([0.4, float("nan"), 0.35], "✗"),
    (np.array([0.4, 0.25, 0.35]), "✓"),
    (torch.tensor([0.4, 0.25, 0.35]), "✓"), (0.4, "✗"),
])
def test_check_prediction(capsys, guess, expected_mark):
    measured = [0.405, 0.246, 0.349]
    got = check_prediction(guess, measured, name="weights", tolerance=0.05)
    sign, line = one_line(capsys)
    assert sign == expected_mark, line
    if expected_mark != "✓":
        assert got == measured


@pytest.mark.parametrize("answer, expected_mark", [
    (2.0, "✓"), (torch.tensor(2.0), "✓"), (0.5, "✗"), ("2", "✗"), (True, "✗"), (float("inf"), "✗"),
    (..., "○"), ([2.0], "✗"),
])
def test_check_number(capsys, answer, expected_mark):
    got = check_number(answer, lambda t: 1.5 < t < 2.5, name="temperature",
                       expected="between 1.5 and 2.5", hint="try larger", reference=2.0)
    sign, line = one_line(capsys)
    assert sign == expected_mark, line
    if expected_mark != "✓":
        assert got == 2.0


def test_a_broken_rule_is_a_cross_not_a_traceback(capsys):
    check_number(1.0, lambda t: 1 / 0, name="x", expected="anything", hint="h", reference=0.0)
    assert one_line(capsys)[0] == "✗"
