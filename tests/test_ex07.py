"""Notebook 07's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○), never a traceback, and a return value the notebook's next cells can use."""
import numpy as np
import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

import attnlab
from attnlab.exercises import ex07

# --- causal_mask (implement) -------------------------------------------------------------------

def by_comparison(T):
    position = torch.arange(T)
    return position[None, :] <= position[:, None]


@pytest.mark.parametrize("answer, expected_mark, words", [
    (by_comparison, "✓", "matches attnlab's causal_mask for T = 1, 4, 7"),
    (lambda T: torch.ones(T, T, dtype=torch.bool).tril(), "✓", "matches"),
    (lambda T: torch.ones(T, T).tril().bool(), "✓", "matches"),
    (lambda T: torch.ones(T, T, dtype=torch.bool).triu(), "✗", "the transpose"),  # the future
    (lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1), "✗", "hides the diagonal"),
    (lambda T: torch.ones(T, T, dtype=torch.bool), "✗", "entries wrong"),  # no mask at all
    (lambda T: torch.ones(T, T).tril(), "✗", "dtype torch.float32, expected torch.bool"),
    (lambda T: torch.ones(T, T, dtype=torch.long).tril(), "✗", "dtype torch.int64"),
    (lambda T: torch.ones(T, dtype=torch.bool), "✗", "shape"),
    (lambda T: torch.ones(T + 1, T + 1, dtype=torch.bool).tril(), "✗", "shape"),
    (lambda T: np.tril(np.ones((T, T), dtype=bool)), "✗", "NumPy"),
    (lambda T: "tril", "✗", "torch.Tensor"),
    (lambda T: 1, "✗", "torch.Tensor"),
    (lambda T: torch.full((T, T), float("nan")), "✗", "dtype"),
    (lambda: torch.ones(4, 4, dtype=torch.bool).tril(), "✗", "TypeError"),  # takes no T
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    ("torch.tril", "✗", "expected a function"),
    (42, "✗", "expected a function"),
    (placeholder, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_causal_mask(capsys, answer, expected_mark, words):
    got = ex07.causal_mask(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    assert got is (answer if expected_mark == "✓" else attnlab.causal_mask)
    assert torch.equal(got(5), attnlab.causal_mask(5))  # usable either way


def test_causal_mask_hint_does_not_give_the_answer_away(capsys):
    ex07.causal_mask(lambda T: torch.ones(T, T, dtype=torch.bool))
    _, line = one_line(capsys)
    assert "Hint:" in line and "tril()" not in line and "<=" in line


# --- unmasked_generation (predict) -------------------------------------------------------------

MEASURED = 0.4227


@pytest.mark.parametrize("guess, expected_mark", [
    (0.3, "✓"), (0.5, "✓"), (torch.tensor(0.45), "✓"), (np.float64(0.4), "✓"),
    (1.0, "✗"),  # "it was perfect in training": the typical wrong guess
    (0.1, "✗"),  # chance among ten digits
    ([0.4], "✗"), ("0.4", "✗"), (float("nan"), "✗"), (True, "✗"),
    (..., "○"), (None, "○"),
])
def test_unmasked_generation(capsys, guess, expected_mark):
    got = ex07.unmasked_generation(guess, MEASURED)
    sign, line = one_line(capsys)
    assert sign == expected_mark, line
    if type(guess) is float and guess in (1.0, 0.1):  # a wrong number: both shown, and why
        assert "measured 0.423" in line and "Hint:" in line
    assert got is (guess if expected_mark == "✓" else MEASURED)


# --- one_step_ahead (explore) ------------------------------------------------------------------

_AHEAD = 3.0 * torch.diag(torch.ones(5), 1)  # (6, 6): a pull towards the next position, as learned
WEIGHTS = torch.softmax(torch.randn(10, 2, 6, 6, generator=torch.Generator().manual_seed(0))
                        + _AHEAD, dim=-1)  # (10, 2, 6, 6)
RIGHT = torch.diagonal(WEIGHTS, offset=1, dim1=-2, dim2=-1).mean().item()


@pytest.mark.parametrize("answer, expected_mark, words", [
    (RIGHT, "✓", "of the weight sits on the very token"),
    (torch.tensor(RIGHT), "✓", "sits"),
    (RIGHT + 0.004, "✓", "sits"),
    (torch.diagonal(WEIGHTS, offset=-1, dim1=-2, dim2=-1).mean().item(), "✗", "does not satisfy"),
    (WEIGHTS.diagonal(dim1=-2, dim2=-1).mean().item(), "✗", "does not satisfy"),  # offset 0
    (1.0, "✗", "does not satisfy"),
    ("0.6", "✗", "should be a number"),
    (WEIGHTS, "✗", "should be a number"),  # the whole tensor, not one number
    (float("inf"), "✗", "finite"),
    (None, "○", "not attempted"), (..., "○", "not attempted"),
])
def test_one_step_ahead(capsys, answer, expected_mark, words):
    got = ex07.one_step_ahead(answer, WEIGHTS)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if expected_mark == "✓":
        assert got is answer
    else:
        assert got == pytest.approx(RIGHT)
