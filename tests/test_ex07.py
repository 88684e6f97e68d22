"""Notebook 07's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import pytest
import torch
from exercise_doubles import expect

import attnlab
from attnlab.exercises import ex07

# --- causal_mask (implement) -------------------------------------------------------------------

def by_comparison(T):
    position = torch.arange(T)
    return position[None, :] <= position[:, None]


@pytest.mark.parametrize("answers, mark, words", [
    ([by_comparison, lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
      lambda T: torch.ones(T, T).tril().bool()], "✓",
     "causal_mask: matches attnlab's causal_mask for T = 1, 4, 7."),
    ([lambda T: torch.ones(T, T, dtype=torch.bool).triu()], "✗", "the transpose"),  # the future
    ([lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1)], "✗", "hides the diagonal"),
    ([lambda T: torch.ones(T, T, dtype=torch.bool)], "✗", "has 6 of 16 entries wrong"),  # no mask
    ([lambda T: torch.ones(T, T).tril()], "✗", "dtype torch.float32, expected torch.bool"),
])
def test_causal_mask(capsys, answers, mark, words):
    got = expect(capsys, ex07.causal_mask, answers, mark, words)
    assert got == (answers if mark == "✓" else [attnlab.causal_mask] * len(got))


def test_unmasked_generation(capsys):
    expect(capsys, ex07.unmasked_generation, [0.3, torch.tensor(0.5)], "✓",
           "; measured 0.423. Trained with the answer in view", 0.4227)
    # "it was perfect in training"; chance among ten digits
    expect(capsys, ex07.unmasked_generation, [1.0, 0.1], "✗",
           "more than 0.15 apart). Hint: Trained with the answer in view", 0.4227)


def test_one_step_ahead(capsys):
    (weights,) = ex07.one_step_ahead.exercise.args()  # (10, 2, 6, 6), pulled one step ahead
    right = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1).mean().item()
    got = expect(capsys, ex07.one_step_ahead, [right, right + 0.004], "✓",
                 "of the weight sits on the very token each position is asked to predict", weights)
    assert got == [right, right + 0.004]
    one_behind = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean().item()
    on_itself = weights.diagonal(dim1=-2, dim2=-1).mean().item()
    for got in expect(capsys, ex07.one_step_ahead, [one_behind, on_itself], "✗",
                      "does not satisfy it yet", weights):
        assert got == pytest.approx(right)


# --- padding_and_causal (implement) ------------------------------------------------------------

def both(real):  # (B, 1, T, T)
    return real[:, None, None, :] & attnlab.causal_mask(real.shape[1])


def causal(real):
    return attnlab.causal_mask(real.shape[1])  # (T, T)


def keys(real):
    return real[:, None, None, :]  # (B, 1, 1, T)


@pytest.mark.parametrize("answers, mark, words", [
    ([both, lambda r: both(r).expand(-1, 3, -1, -1),  # one copy per head of the scores
      lambda r: torch.tril(keys(r).expand(-1, 1, r.shape[1], -1))], "✓",
     "padding_and_causal: matches the reference on 2 padded batches, after broadcasting to "
     "(B, H, T, T)."),
    ([lambda r: r[:, None, :, None] & causal(r)], "✗", "the padding mask is on the query side"),
    ([lambda r: keys(r) & causal(r).T], "✗", "see the future, not the past"),
    ([lambda r: keys(r) | causal(r)], "✗", "combined with |"),
    ([lambda r: r[:, None, :] & causal(r), lambda r: (r[:, None, :] & causal(r))[None]], "✗",
     "does not broadcast to (B, H, T, T) = (2, 3, 5, 5)"),
    ([lambda r: ~both(r)], "✗", "True where attention is forbidden"),
    ([lambda r: r[:, None, :, None] & both(r)], "✗", "also hides the padding queries' rows"),
    ([causal], "✗", "only the causal part"),
    ([keys], "✗", "only the padding part"),
    ([lambda r: both(r).float(), lambda r: torch.zeros(1).masked_fill(~both(r), -1e9)], "✗",
     "dtype torch.float32, expected torch.bool"),  # 0/1, or an additive mask
])
def test_padding_and_causal(capsys, answers, mark, words):
    got = expect(capsys, ex07.padding_and_causal, answers, mark, words)
    if mark == "✗":
        real = torch.tensor([[True, True, False]])
        assert torch.equal(got[0](real), both(real))  # the reference comes back
