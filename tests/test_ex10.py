"""Notebook 10's checks: the right answers get ✓, the typical mistakes are named."""
import functools

import torch
from exercise_doubles import expect

from attnlab.exercises import ex10


def right(block):
    d, m = block[:4].view(torch.float16).float()
    return d * torch.cat([block[4:] & 15, block[4:] >> 4]).float() + m


def swapped(block):
    m, d = block[:4].view(torch.float16).float()
    return d * torch.cat([block[4:] & 15, block[4:] >> 4]).float() + m


def test_dequantize_a_block(capsys):
    assert expect(capsys, ex10.dequantize_q4_1, [right], "✓", "4 Q4_1 blocks")[0] is right
    for fn, words in [
        (lambda b: right(b).view(2, 16).T.flatten(), "interleaved the halves"),
        (lambda b: torch.cat([right(b)[16:], right(b)[:16]]), "high halves first"),
        (lambda b: right(b) - b[2:4].view(torch.float16).float(), "left out the minimum"),
        (swapped, "you swapped d and m"),
        (lambda b: right(b)[:16], "has shape (16,), expected (32,)"),
        (lambda b: right(b).double(), "dtype torch.float64"),
    ]:
        got = expect(capsys, ex10.dequantize_q4_1, [fn], "✗", words)[0]
        block = ex10._blocks()[0][0]
        assert torch.equal(got(block), right(block))  # the reference, for the cells below


def test_repeat_loss(capsys):
    expect(capsys, ex10.repeat_loss, [3.0], "✎", "measured 3.40 (within 1.5)", 3.4)
    assert expect(capsys, ex10.repeat_loss, [10.0], "✎", "(6.60 apart)", 3.4) == [None]



def test_heads_to_break_copy(capsys):
    curve = {1: 4.0, 2: 6.5, 3: 7.2, 4: 9.0}  # half of 14 is first reached at k = 3
    calls = []

    def loss(k):
        calls.append(k)
        return curve.get(k, 12.0)

    check = ex10.heads_to_break_copy
    assert expect(capsys, check, [3], "✓", "fewest heads", loss, 14.0)[0] == 3
    assert set(calls) <= {1, 2, 3}  # only what a scan up to the answer needs
    assert expect(capsys, check, [2], "✗", "still below half", loss, 14.0)[0] == 3
    assert expect(capsys, check, [4], "✗", "fewer than 4 heads", loss, 14.0)[0] == 3
    expect(capsys, check, [2.5], "✗", "not a number of heads", loss, 14.0)
    expect(capsys, check, [0], "✗", "between 1 and 270", loss, 14.0)


def test_a_loop_that_never_set_the_answer_is_an_attempt(capsys):
    """The notebook's copy_loss_without is functools.cache'd: entries there mean a loop ran."""
    @functools.cache
    def loss(k):
        return 4.0 + k

    check = ex10.heads_to_break_copy
    expect(capsys, check, [...], "○", "not attempted yet", loss, 14.0)  # nothing ran yet
    expect(capsys, check, [...], "○", "not attempted yet", loss, 14.0)  # the check's own calls
    for k in range(1, 3):  # a loop that stops too soon and sets nothing (cache hits only)
        if loss(k) >= 7.0:
            break
    assert expect(capsys, check, [...], "✗", "your code called copy_loss_without: the loop "
                  "ended without setting heads_needed", loss, 14.0) == [3]
    assert expect(capsys, check, [3], "✓", "fewest heads", loss, 14.0) == [3]
