"""The exercises of notebook 02 (why divide by √d_k), checked.

- `std_at_256` (predict): std(q·k) at d_k = 256, guessed before it is measured;
- `multi_head_module` (implement): a multi-head attention `nn.Module` of the student's own, with
  attnlab's weights loaded into it, against `attnlab.MultiHeadAttention` without a mask, with a
  padding mask and a causal one; dividing by √d_model, no scale, the softmax over the queries,
  a split or merge without the transpose, no output layer, and a mask ignored or applied after
  the softmax are named in the ✗ line.

What the scale does in a model that trains is measured in notebook 03 (its checks are in ex03).

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import torch
from torch import nn

from ..attention import MultiHeadAttention, causal_mask
from . import (
    Verdict,
    _kind,
    _placeholder_left,
    call_safely,
    check_answer,
    check_prediction,
    exercise,
    none_returned,
    result_problem,
)


@exercise("predict", args=(16.36,))
def std_at_256(guess, measured):
    """Your guess for std(q·k) at d_k = 256 against the measured value (±2 is right)."""
    return check_prediction(
        guess, measured, name="predict std(q·k) at d_k = 256", tolerance=2.0, digits=2,
        lesson="q·k adds d_k terms of variance 1: the variances add up, and std is the square "
               "root of the variance.")


# --- implement: a multi-head attention module ----------------------------------------------------

D_MODEL, N_HEADS = 16, 4  # the sizes the check builds your module with: d_head = 4


def _module_inputs() -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(x, mask) pairs: no mask; padding (the second sequence's last two tokens); causal. The
    mask broadcasts to (B, H, T, T), True = may attend, as attnlab's masks do."""
    with torch.random.fork_rng():
        torch.manual_seed(2)
        xs = [torch.randn(2, 5, D_MODEL), torch.randn(2, 6, D_MODEL), torch.randn(1, 4, D_MODEL)]
    real = torch.ones(2, 6, dtype=torch.bool)  # (B, T)
    real[1, 4:] = False
    return [(xs[0], None), (xs[1], real[:, None, None, :]), (xs[2], causal_mask(4))]


def _reference_module() -> MultiHeadAttention:
    with torch.random.fork_rng():
        torch.manual_seed(2)
        return MultiHeadAttention(D_MODEL, N_HEADS)


def _variant(ref: MultiHeadAttention, x, mask, *, scale: float | None = None, over: int = -1,
             split: bool = True, merge: bool = True, out: bool = True, mask_at: str = "scores"):
    """attnlab's module computed with one of its steps done the way a typical mistake does."""
    B, T, d = x.shape
    H, D = N_HEADS, d // N_HEADS

    def heads_of(t):  # (B, T, d) -> (B, H, T, D); a straight reshape mixes tokens and heads
        return t.view(B, T, H, D).transpose(1, 2) if split else t.reshape(B, H, T, D)
    q, k, v = (heads_of(layer(x)) for layer in (ref.q, ref.k, ref.v))  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) * (D ** -0.5 if scale is None else scale)  # (B, H, T, T)
    if mask is not None and mask_at == "scores":
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(over)  # (B, H, T, T)
    if mask is not None and mask_at == "weights":
        weights = weights.masked_fill(~mask, 0.0)
    heads = weights @ v  # (B, H, T, D)
    merged = heads.transpose(1, 2).reshape(B, T, d) if merge else heads.reshape(B, T, d)
    return (ref.out(merged) if out else merged), weights


_MISTAKES = [  # (what the variant changes, what the ✗ line says), first match named
    ({"scale": D_MODEL ** -0.5}, "your scores are divided by √d_model (4); each head's q·k adds "
                                 "d_head = 4 products, so divide by √d_head (2)"),
    ({"scale": 1.0}, "your scores are not divided by √d_head"),
    ({"over": -2}, "your weights sum to 1 over the queries (each column), not over the keys "
                   "(each row)"),
    ({"split": False}, "you reshaped (B, T, d_model) straight to (B, H, T, d_head), which mixes "
                       "tokens and heads: view it as (B, T, H, d_head), then transpose(1, 2)"),
    ({"merge": False}, "your weights are right, but the heads were reshaped straight to (B, T, "
                       "d_model), which mixes them: transpose(1, 2) back first"),
    ({"out": False}, "your output is the merged heads: the `out` layer that mixes them is "
                     "missing"),
    ({"mask_at": "none"}, "your weights ignore the mask: masked keys get weight"),
    ({"mask_at": "weights"}, "you masked the weights after the softmax, so their rows no longer "
                             "sum to 1: mask the scores before it"),
]


def _module_problem(got, expected, ref: MultiHeadAttention, x, mask) -> str | None:
    problem = result_problem(got, expected)
    if problem is None or not (isinstance(got, tuple) and len(got) == 2
                               and all(isinstance(t, torch.Tensor) for t in got)):
        return problem
    for change, mistake in _MISTAKES:
        made = _variant(ref, x, mask, **change)
        if all(g.shape == m.shape and torch.allclose(g.float(), m, atol=1e-5, rtol=1e-4)
               for g, m in zip(got, made)):
            return mistake
    return problem


def _mask_words(mask) -> str:
    return "no mask" if mask is None else f"a {tuple(mask.shape)} mask"


@exercise("implement")
def multi_head_module(module_class):
    """Your `module_class(d_model, n_heads)`: an nn.Module with four nn.Linear(d_model, d_model)
    layers `q`, `k`, `v` and `out` whose forward(x, mask=None) returns the output (B, T,
    d_model) and the weights (B, H, T, T). The check builds it with d_model = 16 and 4 heads,
    loads attnlab's MultiHeadAttention's weights into it and compares the two on three inputs
    (no mask, padding, causal). Returns your class when it matches, else attnlab's."""
    reference = _reference_module()

    def judge(cls):
        if not callable(cls):
            return f"expected a class, got {_kind(cls)}"
        built, problem = call_safely(cls, D_MODEL, N_HEADS, who="building your module")
        if problem:
            return problem
        if built is None:
            return none_returned(cls)
        if not isinstance(built, nn.Module):
            return f"your class should build an nn.Module, got {_kind(built)}"
        if _placeholder_left(type(built).forward) == "...":
            return Verdict.todo("not attempted yet; write __init__ and forward above and run "
                                "the cell again.")
        for name in ("q", "k", "v", "out"):
            layer = getattr(built, name, None)
            if not isinstance(layer, nn.Linear) or layer.weight.shape != (D_MODEL, D_MODEL):
                return (f"your module needs four nn.Linear(d_model, d_model) layers named q, k, "
                        f"v and out; its `{name}` is {_kind(layer)}")
        try:
            built.load_state_dict(reference.state_dict())
        except RuntimeError as error:
            return ("attnlab's weights do not load into your module ("
                    + str(error).splitlines()[-1].strip()[:120] + "): keep just the four layers")
        for x, mask in _module_inputs():
            with torch.no_grad():
                got, problem = call_safely(built, x, mask, who="your forward")
                if problem is None and got is None:
                    return "your forward runs but returns None: return (output, weights)"
                expected = reference(x, mask)
                problem = problem or _module_problem(got, expected, reference, x, mask)
            if problem:
                return f"given x {tuple(x.shape)} and {_mask_words(mask)}: {problem}"
        return None

    inputs = _module_inputs()
    with torch.random.fork_rng():  # building the student's layers draws: not from the caller's
        return check_answer(
            module_class, judge, name="multi-head module", reference=MultiHeadAttention,
            success=f"with attnlab's weights, it matches attnlab's MultiHeadAttention on "
                    f"{len(inputs)} inputs (no mask, padding, causal)",
            hint=("follow the ten-line function of notebook 01: project, split, attend, merge, "
                  "mix; compare each step's shape with the shape comments.",
                  "q = self.q(x).view(B, T, H, D).transpose(1, 2) (and k, v); scores = "
                  "q @ k.transpose(-2, -1) / D ** 0.5; masked_fill(~mask, -inf) before the "
                  "softmax over the last dimension; merge with transpose(1, 2).reshape(B, T, "
                  "H * D); then self.out."),
            todo="not attempted yet; write your class above and run the cell again.")
