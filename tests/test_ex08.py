"""Notebook 08's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import pytest
import torch
from exercise_doubles import expect

from attnlab import online_softmax
from attnlab.exercises import ex08


def test_flop_ratios(capsys):
    measured = [16.0, 4.0, 8.0]  # what notebook 08 counts: score part, projections, whole layer
    got = expect(capsys, ex08.flop_ratios, [[16, 4, 8], [15.5, 4, 8.5], torch.tensor(measured)],
                 "✓", "; measured 16.0, 4.0, 8.0. Scores pair every query", measured)
    assert got[2] == measured  # a tensor guess comes back as a list
    # the whole layer as all score part; everything as the projections; T³
    expect(capsys, ex08.flop_ratios, [[16, 4, 16], [4, 4, 4], [64, 4, 8]], "✗",
           "more than 1 apart). Hint: Scores pair every query", measured)


# --- online_update (implement) -------------------------------------------------------------

def update(m, total, acc, scores, v_block, *, running_max=True, rescale=1):
    """The update, right by default; `running_max=False` uses the block's max only, `rescale`
    0 forgets the old terms' rescaling and -1 rescales the wrong way."""
    block_max = scores.amax(dim=-1, keepdim=True)
    m_new = torch.maximum(m, block_max) if running_max else block_max
    factor = {1: torch.exp(m - m_new), 0: 1.0, -1: torch.exp(m_new - m)}[rescale]
    p = torch.exp(scores - m_new)
    return m_new, total * factor + p.sum(dim=-1, keepdim=True), acc * factor + p @ v_block


@pytest.mark.parametrize("answers, mark, words", [
    ([update, online_softmax.online_update], "✓",
     "online_update: matches attnlab's version on 3 random inputs."),
    ([lambda *a: update(*a, rescale=0), lambda *a: update(*a, running_max=False)], "✗",
     "differs from the reference"),
    ([lambda *a: update(*a, rescale=-1)], "✗", "contains NaN or inf"),  # exp(+inf) at the start
    ([lambda *a: update(*a)[2] / update(*a)[1],  # the output, not the state
      lambda *a: update(*a)[:2]], "✗", "should return a tuple of 3 tensors"),
])
def test_online_update(capsys, answers, mark, words):
    got = expect(capsys, ex08.online_update, answers, mark, words)
    assert got == (answers if mark == "✓" else [online_softmax.online_update] * len(got))
