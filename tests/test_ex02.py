"""Notebook 02's exercise. (Hostile answers, for every check at once: tests/test_exercises.py.)"""
import math

import torch
from exercise_doubles import expect
from torch import nn

from attnlab.attention import MultiHeadAttention
from attnlab.exercises import ex02


def test_std_at_256(capsys):
    expect(capsys, ex02.std_at_256, [16], "✎", "; measured 16.36 (within 2). q·k adds d_k terms "
           "of variance 1", 16.362)
    # the variance, not the standard deviation
    expect(capsys, ex02.std_at_256, [256], "✎",
           "(239.64 apart) (written after the measurement was shown). q·k adds", 16.362)


class Student(nn.Module):
    """A multi-head attention module as a student writes it; each flag is one classic mistake."""

    def __init__(self, d_model, n_heads, *, divide_by=None, over=-1, split=True, merge=True,
                 out=True, mask_at="scores"):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.out = (nn.Linear(d_model, d_model) for _ in range(4))
        self.divide_by = math.sqrt(self.d_head) if divide_by is None else divide_by
        self.over, self.split, self.merge, self.use_out, self.mask_at = (over, split, merge, out,
                                                                         mask_at)

    def forward(self, x, mask=None):
        B, T, d = x.shape
        H, D = self.n_heads, self.d_head
        q, k, v = (layer(x).view(B, T, H, D).transpose(1, 2) if self.split
                   else layer(x).view(B, H, T, D) for layer in (self.q, self.k, self.v))
        scores = q @ k.transpose(-2, -1) / self.divide_by  # (B, H, T, T)
        if mask is not None and self.mask_at == "scores":
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=self.over)
        if mask is not None and self.mask_at == "weights":
            weights = weights * mask
        heads = weights @ v  # (B, H, T, D)
        merged = heads.transpose(1, 2).reshape(B, T, d) if self.merge else heads.reshape(B, T, d)
        return (self.out(merged) if self.use_out else merged), weights


def student(**mistake):
    return lambda d_model, n_heads: Student(d_model, n_heads, **mistake)


def test_multi_head_module_is_right_with_attnlabs_weights(capsys):
    (got,) = expect(capsys, ex02.multi_head_module, [Student], "✓",
                    "matches attnlab's MultiHeadAttention on 3 inputs (no mask, padding, causal)")
    assert got is Student


def test_multi_head_module_names_the_classic_mistakes(capsys):
    for answer, words in [
        (student(divide_by=4.0), "divided by √d_model (4)"),
        (student(divide_by=1.0), "not divided by √d_head"),
        (student(over=-2), "sum to 1 over the queries"),
        (student(split=False), "straight to (B, H, T, d_head), which mixes tokens and heads"),
        (student(merge=False), "the heads were reshaped straight to (B, T, d_model)"),
        (student(out=False), "the `out` layer that mixes them is missing"),
        (student(mask_at="nowhere"), "(2, 1, 1, 6) mask: your weights ignore the mask"),
        (student(mask_at="weights"), "masked the weights after the softmax"),
    ]:
        (got,) = expect(capsys, ex02.multi_head_module, [answer], "✗", words)
        assert got is MultiHeadAttention, words  # the notebook goes on with attnlab's


class Untouched(nn.Module):  # the student edition's cell, run as it comes
    def __init__(self, d_model, n_heads):
        super().__init__()
        ...  # your code here

    def forward(self, x, mask=None):
        ...  # your code here


class NoReturn(Student):
    def forward(self, x, mask=None):
        super().forward(x, mask)


class Renamed(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        return x, None


class Extra(Student):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.temperature = nn.Parameter(torch.ones(()))


def test_multi_head_module_says_what_is_missing(capsys):
    expect(capsys, ex02.multi_head_module, [Untouched], "○", "write __init__ and forward")
    expect(capsys, ex02.multi_head_module, [NoReturn], "✗", "runs but returns None")
    expect(capsys, ex02.multi_head_module, [Renamed], "✗", "named q, k, v and out; its `q` is")
    expect(capsys, ex02.multi_head_module, [Extra], "✗", "do not load into your module")
    expect(capsys, ex02.multi_head_module, [lambda d, h: 3], "✗", "should build an nn.Module")
    expect(capsys, ex02.multi_head_module, [lambda d: 3], "✗", "building your module raised")
