"""Notebook 03's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import torch
from exercise_doubles import expect

from attnlab.exercises import ex03
from attnlab.exercises.ex03 import _attention_received as attention_received  # attnlab's

# --- implement: attention received --------------------------------------------------------------

def right_received(weights, real):
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    return (weights * queries).sum(-2) / queries.sum(-2)  # (B, H, T)


def test_attention_received(capsys):
    expect(capsys, ex03.attention_received, [right_received, attention_received], "✓",
           "attention_received: matches attnlab's version on 3 random inputs.")
    for answers, words in [
        ([lambda w, r: w.mean(-2),  # padding queries counted too
          lambda w, r: w.mean(-1),  # rows (what a query gives), not columns
          lambda w, r: (w * r[:, None, :, None]).sum(-2)],  # a sum, not a mean
         "differs from the reference"),
        ([lambda w, r: right_received(w, r).mean(1)], "has shape (2, 4), expected (2, 1, 4)"),
    ]:
        expect(capsys, ex03.attention_received, answers, "✗", words)


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


def test_zero_column(capsys):
    expect(capsys, ex03.zero_column, [right_zero, in_place], "✓",
           "zero_column: matches attnlab's version on 3 random inputs.")
    for answers, words in [
        ([renormalised, zero_row, lambda w, p: w], "differs from the reference"),
        ([lambda w, p: w[..., 0]], "has shape (2, 1, 3), expected (2, 1, 3, 3)"),
    ]:
        expect(capsys, ex03.zero_column, answers, "✗", words)


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
        (lambda m, x: right_encode(m, x)[0], "should return a tuple of 2 tensors"),
    ]:
        expect(capsys, ex03.encode, [answer], "✗", words, *ex03._example_model())
