"""Notebook 02's exercises: a right module, each mistake of multi_head_module's table submitted
as a student's module, and what its table does not hold. (Hostile answers, for every check at
once: tests/test_exercises.py.)"""
import math

import torch
from exercise_doubles import expect
from torch import nn

from attnlab.core.attention import MultiHeadAttention
from attnlab.exercises import ex02


def test_std_at_256(capsys):
    expect(capsys, ex02.std_at_256, [16], "✎", "; measured 16.36 (within 2). q·k adds d_k terms "
           "of variance 1", 16.362)
    # the variance, not the standard deviation
    expect(capsys, ex02.std_at_256, [256], "✎",
           "(239.64 apart) (written after the measurement was shown). q·k adds", 16.362)


class Student(nn.Module):
    """A multi-head attention module as a student writes it."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.out = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None):
        B, T, d = x.shape
        q, k, v = (layer(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)
                   for layer in (self.q, self.k, self.v))  # (B, H, T, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(B, T, d)), weights


def with_forward(written):
    class Wrong(Student):
        def forward(self, x, mask=None):  # a def: a lambda (unreadable) would read as untouched
            return written(self, x, mask)
    return Wrong


def test_multi_head_module(capsys):
    assert expect(capsys, ex02.multi_head_module, [Student], "✓",
                  "matches attnlab's MultiHeadAttention on 3 inputs (no mask, padding, "
                  "causal)") == [Student]
    for forward, message in ex02._MISTAKES:  # the table, each mistake as a student's module
        assert expect(capsys, ex02.multi_head_module, [with_forward(forward)], "✗",
                      message) == [MultiHeadAttention], message  # the notebook goes on with it
    expect(capsys, ex02.multi_head_module,
           [with_forward(lambda m, x, mask: (Student.forward(m, x, mask)[0] + 0.01,
                                             Student.forward(m, x, mask)[1]))],
           "✗", "given x (2, 5, 16) and no mask: the first result differs from the reference")


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
