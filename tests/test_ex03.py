"""Notebook 03's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○) and a return value the notebook's next cells can use."""
import numpy as np
import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

from attnlab.exercises import ex03
from attnlab.models import attention_received

# A padded batch as the notebook has it: 2 reviews of 3 and 5 tokens, width 5, 2 heads.
REAL = torch.tensor([[True, True, True, False, False], [True] * 5])  # (2, 5)
_scores = torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(0))
WEIGHTS = torch.softmax(_scores.masked_fill(~REAL[:, None, None, :], float("-inf")), dim=-1)
POS = torch.tensor([1, 4])  # (2,)   the decisive word of each review


HOSTILE = [
    (lambda w, r: None, "○", "not attempted"),  # the body is still `...`
    (placeholder, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
    ("received", "✗", "expected a function"),
    (3, "✗", "expected a function"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    (lambda *a: 0.5, "✗", "torch.Tensor"),
    (lambda *a: "weights", "✗", "torch.Tensor"),
    (lambda *a: np.zeros((2, 1, 4)), "✗", "NumPy array"),
]


# --- implement: attention received --------------------------------------------------------------

def right_received(weights, real):
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    return (weights * queries).sum(-2) / queries.sum(-2)  # (B, H, T)


@pytest.mark.parametrize("answer, expected_mark, words", [
    (right_received, "✓", "matches attnlab's version on 3 random inputs"),
    (attention_received, "✓", "matches"),
    (lambda w, r: w.mean(-2), "✗", "differs"),  # padding queries counted too
    (lambda w, r: w.mean(-1), "✗", "differs"),  # rows (what a query gives), not columns
    (lambda w, r: (w * r[:, None, :, None]).sum(-2), "✗", "differs"),  # a sum, not a mean
    (lambda w, r: right_received(w, r).mean(1), "✗", "shape"),  # heads averaged away
    (lambda w, r: right_received(w, r).double(), "✗", "dtype"),
    (lambda w, r: right_received(w, r) * float("nan"), "✗", "NaN"),
    *HOSTILE,
])
def test_attention_received(capsys, answer, expected_mark, words):
    got = ex03.attention_received(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign == "✗":
        assert "Hint:" in line
    assert torch.allclose(got(WEIGHTS, REAL), attention_received(WEIGHTS, REAL))  # usable


def test_received_inputs_have_padding_queries_that_attend():
    """A mean over all queries must be wrong on the check's inputs: padding rows are not 0."""
    for weights, real in ex03._batches():
        assert not real.all() and weights.transpose(1, 2)[~real].sum() > 0  # (pads, H, T)


# --- implement: zero the decisive word's column after the softmax --------------------------------

def right_zero(weights, pos):
    weights = weights.clone()
    weights[torch.arange(len(pos)), :, :, pos] = 0.0
    return weights


def in_place(weights, pos):
    for b, p in enumerate(pos.tolist()):
        weights[b, :, :, p] = 0.0
    return weights


def renormalised(weights, pos):
    w = right_zero(weights, pos)
    return w / w.sum(-1, keepdim=True)


def zero_row(weights, pos):
    weights = weights.clone()
    weights[torch.arange(len(pos)), :, pos, :] = 0.0
    return weights


@pytest.mark.parametrize("answer, expected_mark, words", [
    (right_zero, "✓", "matches attnlab's version on 3 random inputs"),
    (in_place, "✓", "matches"),
    (renormalised, "✗", "differs"),  # that is masking before the softmax, not zeroing after it
    (zero_row, "✗", "differs"),
    (lambda w, p: w, "✗", "differs"),  # nothing zeroed
    (lambda w, p: w[..., 0], "✗", "shape"),
    (lambda w, p: right_zero(w, p).half(), "✗", "dtype"),
    (lambda w, p: right_zero(w, p) * float("nan"), "✗", "NaN"),
    *[(a, m, t) for a, m, t in HOSTILE],
])
def test_zero_column(capsys, answer, expected_mark, words):
    got = ex03.zero_column(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign == "✗":
        assert "Hint:" in line
    zeroed = got(WEIGHTS, POS)  # usable either way
    assert (zeroed[0, :, :, 1] == 0).all() and (zeroed[1, :, :, 4] == 0).all()
    assert torch.equal(zeroed[0, :, :, 0], WEIGHTS[0, :, :, 0])


# --- predict: flips after zeroing ----------------------------------------------------------------

@pytest.mark.parametrize("guess, expected_mark, words", [
    (0.9, "✓", "you predicted 0.900; measured 0.936"),
    (torch.tensor(0.85), "✓", "measured 0.936"),
    (np.float64(1.0), "✓", "measured"),
    (0.5, "✗", "more than 0.1 apart"),
    (0.0, "✗", "more than 0.1 apart"),
    ("0.9", "✗", "number"),
    (float("nan"), "✗", "finite"),
    ([0.9], "✗", "number"),
    (True, "✗", "number"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_flips_after_zeroing(capsys, guess, expected_mark, words):
    got = ex03.flips_after_zeroing(guess, 0.936)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    assert float(got) == pytest.approx(0.936 if sign != "✓" else float(guess))
