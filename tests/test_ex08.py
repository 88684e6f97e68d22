"""The exercises of notebook 08: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○), never a traceback, and the check returns something usable."""
import math

import pytest
import torch
from exercise_doubles import loops_forever, one_line, placeholder, raises

from attnlab import online_softmax
from attnlab.exercises import ex08

MEASURED = [16.0, 4.0, 8.0]  # what notebook 08 counts: score part, projections, whole layer


# --- flop_ratios (predict) -----------------------------------------------------------------

@pytest.mark.parametrize("guess, expected_mark", [
    ([16, 4, 8], "✓"), ([15.5, 4, 8.5], "✓"), (torch.tensor([16.0, 4.0, 8.0]), "✓"),
    ([16, 4, 16], "✗"),  # the whole layer is not all score part at T = d
    ([4, 4, 4], "✗"), ([64, 4, 8], "✗"), ([16, 4], "✗"), (16, "✗"), ("16, 4, 8", "✗"),
    ([16, None, 8], "✗"), ([16, float("nan"), 8], "✗"), (..., "○"), (None, "○"),
])
def test_flop_ratios(capsys, guess, expected_mark):
    got = ex08.flop_ratios(guess, MEASURED)
    sign, line = one_line(capsys)
    assert sign == expected_mark, line
    if expected_mark == "✓":  # the guess comes back (a tensor as a list)
        assert [float(x) for x in got] == [float(x) for x in guess]
    else:
        assert got == MEASURED


# --- online_update (implement) -------------------------------------------------------------

def right(m, total, acc, scores, v_block):
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
    rescale = torch.exp(m - m_new)
    p = torch.exp(scores - m_new)
    return m_new, total * rescale + p.sum(dim=-1, keepdim=True), acc * rescale + p @ v_block


def no_rescale(m, total, acc, scores, v_block):  # forgets that old terms used the old max
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
    p = torch.exp(scores - m_new)
    return m_new, total + p.sum(dim=-1, keepdim=True), acc + p @ v_block


def inverted_rescale(m, total, acc, scores, v_block):
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
    rescale = torch.exp(m_new - m)
    p = torch.exp(scores - m_new)
    return m_new, total * rescale + p.sum(dim=-1, keepdim=True), acc * rescale + p @ v_block


def block_max_only(m, total, acc, scores, v_block):  # the block's max, not the running one
    m_new = scores.amax(dim=-1, keepdim=True)
    rescale = torch.exp(m - m_new)
    p = torch.exp(scores - m_new)
    return m_new, total * rescale + p.sum(dim=-1, keepdim=True), acc * rescale + p @ v_block


def normalised(m, total, acc, scores, v_block):  # returns the output, not the state
    m_new, total, acc = right(m, total, acc, scores, v_block)
    return acc / total


@pytest.mark.parametrize("answer, expected_mark, words", [
    (right, "✓", "matches"),
    (online_softmax.online_update, "✓", "matches"),
    (no_rescale, "✗", "differs"),
    (inverted_rescale, "✗", "NaN or inf"),
    (block_max_only, "✗", "differs"),
    (normalised, "✗", "tuple of 3"),
    (lambda *a: right(*a)[:2], "✗", "tuple of 3"),
    (lambda *a: (right(*a)[0], right(*a)[1], right(*a)[2].mT), "✗", "shape"),
    (lambda *a: tuple(t.double() for t in right(*a)), "✗", "dtype"),
    (lambda *a: (right(*a)[0], right(*a)[1] * math.nan, right(*a)[2]), "✗", "NaN"),
    (lambda *a: (1, 2, 3), "✗", "torch.Tensor"),
    (lambda *a: "m, total, acc", "✗", "tuple of 3"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    (42, "✗", "expected a function"),
    ("online_update", "✗", "expected a function"),
    (placeholder, "○", "not attempted"),
    (..., "○", "not attempted"),
    (None, "○", "not attempted"),
])
def test_online_update(capsys, answer, expected_mark, words):
    got = ex08.online_update(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if expected_mark == "✓":
        assert got is answer
    else:
        assert got is online_softmax.online_update
        if expected_mark == "✗":
            assert "Hint:" in line and "exp(old max - new max)" in line


def test_what_the_check_returns_computes_attention_block_by_block(capsys):
    update = ex08.online_update(None)  # untouched: the reference comes back, and it works
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 6, 4, generator=g) for _ in range(3))
    state = online_softmax.empty_state(q, v)
    for block in (slice(0, 3), slice(3, 6)):
        state = update(*state, q @ k[:, block].mT / 2.0, v[:, block])
    full = torch.softmax(q @ k.mT / 2.0, dim=-1) @ v  # d_k = 4: scale 1/2
    torch.testing.assert_close(state[2] / state[1], full)
    assert one_line(capsys)[0] == "○"


def test_the_inputs_catch_a_missing_rescale():
    """Every wrong update above must fail on at least one input: the cases force a new max."""
    cases = ex08.update_inputs()
    assert torch.isinf(cases[0][0]).all()  # the first block starts from the empty state
    m_old = cases[1][0]
    assert (online_softmax.online_update(*cases[1])[0] > m_old).all()  # a larger max: rescale
    assert (online_softmax.online_update(*cases[2])[0] == m_old).all()  # the old max stays
