"""Notebook 03's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.) Also that the explore
exercise's experiment gives the same first epochs however many follow."""
import math

import pytest
import torch
from exercise_doubles import expect, one_line

from attnlab import exercises, scaling
from attnlab.exercises import ex03
from attnlab.exercises.ex03 import _attention_received as attention_received  # attnlab's

# --- implement: attention received --------------------------------------------------------------

def right_received(weights, real):
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    return (weights * queries).sum(-2) / queries.sum(-2)  # (B, H, T)


def in_place_received(weights, real):  # right, though it changes its input
    weights *= real[:, None, :, None].to(weights.dtype)
    return weights.sum(-2) / real.sum(-1)[:, None, None]


def test_attention_received(capsys):
    expect(capsys, ex03.attention_received,
           [right_received, attention_received, in_place_received], "✓",
           "attention_received: matches attnlab's version on 3 random inputs.")


def test_attention_received_names_each_typical_mistake(capsys):
    queries = lambda r: r[:, None, :, None]  # noqa: E731   (B, 1, T, 1)
    keys = lambda r: r[:, None, None, :]  # noqa: E731   (B, 1, 1, T)
    count = lambda r: r.sum(-1)[:, None, None]  # noqa: E731   (B, 1, 1)
    for answers, words in [
        ([lambda w, r: w.mean(-2)], "your mean counts the padding queries too"),
        ([lambda w, r: w.mean(-1), lambda w, r: (w * keys(r)).sum(-1) / count(r)],
         "you averaged rows (what each query gives), not columns"),
        ([lambda w, r: (w * queries(r)).sum(-2)], "the sum over the real queries, not their mean"),
        ([lambda w, r: (w * queries(r)).sum(-2) / w.shape[-1],
          lambda w, r: (w * queries(r)).mean(-2)], "you divided by T, the padded length"),
        ([lambda w, r: (w * keys(r)).sum(-2) / count(r), lambda w, r: w.sum(-2) / count(r)],
         "your sum still takes in the padding queries' rows"),
        ([lambda w, r: right_received(w, r) + 0.1], "differs from the reference"),
        ([lambda w, r: right_received(w, r).mean(1)], "has shape (2, 4), expected (2, 1, 4)"),
    ]:
        got = expect(capsys, ex03.attention_received, answers, "✗", words)
        assert got == [attention_received] * len(got), words


def test_attention_received_hints_nudge_first_then_give_the_method(capsys):
    exercises._wrong_so_far.pop("attention_received", None)  # as in a fresh kernel
    ex03.attention_received(lambda w, r: w.mean(-2))
    first = one_line(capsys)[1]
    ex03.attention_received(lambda w, r: w.mean(-2))
    second = one_line(capsys)[1]
    assert "is what query i gives key j" in first and "Second hint" not in first
    assert "Second hint: multiply by a 0/1 mask of the real queries" in second


# --- implement: zero the decisive word's column after the softmax --------------------------------

def right_zero(weights, pos):
    weights = weights.clone()
    weights[torch.arange(len(pos)), :, :, pos] = 0.0
    return weights


def in_place(weights, pos):
    for b, p in enumerate(pos.tolist()):
        weights[b, :, :, p] = 0.0
    return weights


def renormalised(weights, pos):  # that is masking before the softmax, not zeroing after it
    w = right_zero(weights, pos)
    return w / w.sum(-1, keepdim=True)


def zero_row(weights, pos):
    weights = weights.clone()
    weights[torch.arange(len(pos)), :, pos, :] = 0.0
    return weights


def hidden_first(weights, pos):  # the word masked before the softmax: the same as renormalised
    keep = torch.arange(weights.shape[-1]) != pos[:, None]  # (B, T)
    return torch.softmax(weights.log().masked_fill(~keep[:, None, None, :], float("-inf")), -1)


def zero_row_in_place(weights, pos):
    weights[torch.arange(len(pos)), :, pos, :] = 0.0
    return weights


def every_word(weights, pos):  # all of pos in every review
    weights = weights.clone()
    weights[..., pos] = 0.0
    return weights


def test_zero_column(capsys):
    expect(capsys, ex03.zero_column, [right_zero, in_place], "✓",
           "zero_column: matches attnlab's version on 3 random inputs.")


def test_zero_column_names_each_typical_mistake(capsys):
    for answers, words in [
        ([renormalised, hidden_first], "you renormalised the rows: that is hiding the word"),
        ([zero_row, zero_row_in_place], "you zeroed the word's row (what it gives), not its "
                                        "column"),
        ([every_word], "you zeroed every review's word in every review"),
        ([lambda w, p: w, lambda w, p: w.clone()], "your result is the weights unchanged"),
        ([lambda w, p: right_zero(w, p) * 0.5], "differs from the reference"),
        ([lambda w, p: w[..., 0]], "has shape (2, 1, 3), expected (2, 1, 3, 3)"),
    ]:
        got = expect(capsys, ex03.zero_column, answers, "✗", words)
        assert got == [ex03._zero_column] * len(got), words


def test_zero_column_hints_nudge_first_then_give_the_method(capsys):
    exercises._wrong_so_far.pop("zero_column", None)  # as in a fresh kernel
    ex03.zero_column(zero_row)
    first = one_line(capsys)[1]
    ex03.zero_column(zero_row)
    second = one_line(capsys)[1]
    assert "review b's word is key pos[b]" in first and "Second hint" not in first
    assert "Second hint: build a (B, T) 0/1 tensor that is 0 only at each review's" in second


def test_zeroed_accuracy(capsys):
    expect(capsys, ex03.zeroed_accuracy, [0.6], "✎",
           "; measured 0.610 (within 0.1). Masking before the softmax gives", 0.61)
    expect(capsys, ex03.zeroed_accuracy, [0.95], "✎", "(0.340 apart) (written after", 0.61)


def test_uniform_accuracy(capsys):
    expect(capsys, ex03.uniform_accuracy, [0.5], "✎", "measured 0.477 (within 0.1)", 0.4775)
    expect(capsys, ex03.uniform_accuracy, [0.9], "✎", "measured 0.477 (0.423 apart)", 0.4775)



# --- implement: the encoder block -------------------------------------------------------------

def right_encode(model, x):
    block = model.blocks[0]
    mask = (x != 0)[:, None, None, :]
    h = model.embed(x)
    a, w = block.attn(h, mask)
    h = block.norm1(h + a)
    return block.norm2(h + block.ff(h)), w


def no_mask(model, x):
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(h)
    h = block.norm1(h + a)
    return block.norm2(h + block.ff(h)), w


def query_side(model, x):
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(h, (x != 0)[:, None, :, None])
    h = block.norm1(h + a)
    return block.norm2(h + block.ff(h)), w


def no_residual(model, x):
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(h, (x != 0)[:, None, None, :])
    return block.norm2(block.ff(block.norm1(a))), w


def inverted_mask(model, x):  # True at padding (as nn.MultiheadAttention's key_padding_mask)
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(h, (x == 0)[:, None, None, :])
    h = block.norm1(h + a)
    return block.norm2(h + block.ff(h)), w


def no_attention_residual(model, x):
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(h, (x != 0)[:, None, None, :])
    h = block.norm1(a)
    return block.norm2(h + block.ff(h)), w


def no_ff_residual(model, x):
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(h, (x != 0)[:, None, None, :])
    return block.norm2(block.ff(block.norm1(h + a))), w


def no_positions(model, x):
    block, h = model.blocks[0], model.embed.tokens(x)
    a, w = block.attn(h, (x != 0)[:, None, None, :])
    h = block.norm1(h + a)
    return block.norm2(h + block.ff(h)), w


def pre_norm(model, x):
    block, h = model.blocks[0], model.embed(x)
    a, w = block.attn(block.norm1(h), (x != 0)[:, None, None, :])
    h = h + a
    return h + block.ff(block.norm2(h)), w


def test_encode_right_answer(capsys):
    expect(capsys, ex03.encode, [right_encode], "✓", "your block is the model's encode",
           *ex03._example_model())


def test_encode_names_each_typical_mistake(capsys):
    for answer, words in [
        (no_mask, "the padding mask is missing"),
        (query_side, "the padding mask is on the query side"),
        (no_residual, "the residual connections are missing"),
        (pre_norm, "this is pre-norm"),
        (inverted_mask, "your mask is the wrong way round: queries read only the padding"),
        (no_attention_residual, "the residual around attention is missing"),
        (no_ff_residual, "the residual around the feed-forward part is missing"),
        (no_positions, "your embedding has no position vectors"),
        (lambda m, x: right_encode(m, x)[0], "should return a tuple of 2 tensors"),
    ]:
        expect(capsys, ex03.encode, [answer], "✗", words, *ex03._example_model())


def test_encode_hints_nudge_first_then_give_the_method(capsys):
    exercises._wrong_so_far.pop("encode", None)  # as in a fresh kernel
    model = ex03._example_model()[0]
    ex03.encode(no_mask, model)
    first = one_line(capsys)[1]
    ex03.encode(no_mask, model)
    second = one_line(capsys)[1]
    assert "compare your lines with the block's two equations" in first
    assert "Second hint" not in first
    assert "Second hint: the mask is `x != vocab.PAD` with two new axes" in second


# === Going further: why scale, in this model ===

# --- implement: the spread of a layer's scaled scores -------------------------------------------

def _scores(attn, h, scale):
    q, k, _ = attn.project(h)  # (B, H, T, D)
    return q @ k.transpose(-2, -1) * scale  # (B, H, T, T)


def _scale(attn):
    return attn.scale if attn.scale is not None else 1 / math.sqrt(attn.d_head)


def _pairs(real):
    return real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)


def right(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(_pairs(real)).std()


def population_std(attn, h, real):  # dividing by n instead of n - 1 is as good
    return _scores(attn, h, _scale(attn)).masked_select(_pairs(real)).std(correction=0)


def as_float(attn, h, real):
    return right(attn, h, real).item()


def no_scale(attn, h, real):
    return _scores(attn, h, 1.0).masked_select(_pairs(real)).std()


def fixed_scale(attn, h, real):  # 1/√d_head even where the layer has its own scale
    return _scores(attn, h, 1 / math.sqrt(attn.d_head)).masked_select(_pairs(real)).std()


def variance(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(_pairs(real)).var()


def every_pair(attn, h, real):
    return _scores(attn, h, _scale(attn)).std()


def keys_only(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(real[:, None, None, :]).std()


def queries_only(attn, h, real):
    return _scores(attn, h, _scale(attn)).masked_select(real[:, None, :, None]).std()


def test_score_spread_right_answers(capsys):
    answers = [right, population_std, as_float, scaling.score_spread]
    got = expect(capsys, ex03.score_spread, answers, "✓",
                 "score_spread: matches attnlab's version on 3 random inputs.")
    assert got == answers


def test_score_spread_names_each_typical_mistake(capsys):
    for answers, words in [
        ([no_scale], "without the layer's scale"),
        ([fixed_scale], "you used 1/√d_head: read the layer's own scale"),
        ([variance], "that is the variance"),
        ([every_pair], "counts the pairs with a padding token too"),
        ([keys_only], "counts the padding queries"),
        ([queries_only], "counts the padding keys"),
        ([lambda attn, h, real: right(attn, h, real) + 1], "your spread is"),
    ]:
        got = expect(capsys, ex03.score_spread, answers, "✗", words)
        assert got == [scaling.score_spread] * len(got), words


def test_spread_at_init(capsys):
    expect(capsys, ex03.spread_at_init, [0.02, 0.05], "✎", "measured 0.020 (within 0.05)",
           0.0201)
    # section 1's spread
    expect(capsys, ex03.spread_at_init, [1.0], "✎", "(0.980 apart) (written after", 0.0201)



# --- explore: the accuracy without the scale ------------------------------------------------------

def test_accuracy_without_scale(capsys):
    curves = ex03.EXAMPLE_CURVES
    right_answers = [0.9, 360 / 400, torch.tensor(0.9, dtype=torch.float64)]
    cases = [(right_answers, "✓", "after 4 epochs is 0.900; with the scale it was 0.812."),
             ([0.8125], "✗", "the scaled run's accuracy"),
             ([0.7775, 0.955], "✗", "the question asks for epoch 4"),  # epochs 3 and 5
             ([0.85], "✗", "is not what the model with scale=1.0, seed 0, reaches after 4 epochs"),
             ([90], "✗", "is not an accuracy")]
    for answers, mark, words in cases:
        for got in expect(capsys, ex03.accuracy_without_scale, answers, mark, words, curves):
            assert got == pytest.approx(0.9), words


def test_accuracy_without_scale_follows_the_measurement(capsys):
    """Another series seed measures other curves: the check judges against the ones passed in."""
    curves = {"scale 1.0": (0.5, 0.6, 0.8, 0.875, 0.9), "scaled": (0.5, 0.55, 0.6, 0.7, 0.85)}
    expect(capsys, ex03.accuracy_without_scale, [0.875], "✓", "after 4 epochs is 0.875; with "
           "the scale it was 0.700.", curves)
    expect(capsys, ex03.accuracy_without_scale, [0.9], "✗", "after epoch 5", curves)


def test_the_curves_are_the_experiment():
    """The exercise asks for what train_at_scale(1.0, seed=0) measures after 4 epochs: the
    first epochs do not depend on how many follow (the hint says so)."""
    short = scaling.train_at_scale(1.0, seed=0, epochs=ex03.EPOCH).history["test_acc"]
    longer = scaling.train_at_scale(1.0, seed=0, epochs=ex03.EPOCH + 1).history["test_acc"]
    assert longer[:ex03.EPOCH] == short


# --- predict: the folded model's spread -------------------------------------------------

def test_folded_spread(capsys):
    got = expect(capsys, ex03.folded_spread, ["unscaled", " Unscaled"], "✎",
                 "end up like the unscaled model's", ex03.EXAMPLE_SPREADS)
    assert got == [None, None]  # the guess stays the student's
    expect(capsys, ex03.folded_spread, ["scaled"], "✎", "you predicted scaled; the folded "
           "model's scores end up like the unscaled model's (spreads after training: scaled 0.80",
           ex03.EXAMPLE_SPREADS)
    expect(capsys, ex03.folded_spread, ["neither"], "○",
           "write \"scaled\" or \"unscaled\", got the string 'neither'", ex03.EXAMPLE_SPREADS)


def test_folded_spread_follows_the_measurement(capsys):
    spreads = {"scaled": [1.0, 1.2], "scale 1.0": [4.0, 5.0], "folded": [1.1, 1.5]}
    expect(capsys, ex03.folded_spread, ["scaled"], "✎", "end up like the scaled model's", spreads)


def test_uniform_scores(capsys):
    """Uniform attention at the hook point: any one number for every score is right (the softmax
    of equal scores is uniform, and the mask comes after); the typical misses are named."""
    (model,) = ex03._example_model()
    for right in (torch.zeros_like, torch.ones_like, lambda s: s * 0 - 3.0):
        (got,) = expect(capsys, ex03.uniform_scores, [right], "✓", "weighs the keys it may read "
                        "equally", model)
        assert got is right
    for answer, words in [
        (lambda s: s, "the weights are the model's own"),
        (lambda s: s * 1.0, "the weights are the model's own"),
        (lambda s: torch.full_like(s, float("-inf")), "the weights hold NaN"),
        (lambda s: s / 2, "not equal over the keys each query may read"),
        (lambda s: torch.zeros(s.shape[-1]), "keep theirs"),
        (lambda s: torch.zeros_like(s, dtype=torch.float32), "dtype torch.float32"),
    ]:
        (got,) = expect(capsys, ex03.uniform_scores, [answer], "✗", words, model)
        assert got is ex03._uniform_scores, words
