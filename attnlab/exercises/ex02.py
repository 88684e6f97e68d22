"""The exercises of notebook 02 (why divide by √d_k), checked.

- `std_at_256` (predict): std(q·k) at d_k = 256, guessed before it is measured;
- `softmax_slope` (implement): the softmax's slope dw_i/ds_j = w_i(δ_ij − w_j) from the weights,
  against `attnlab.lessons.scaling.softmax_slope`;
- `multi_head_module` (implement): a multi-head attention `nn.Module` class of the student's own,
  with attnlab's weights loaded into it, against `attnlab.MultiHeadAttention` (no mask, padding,
  causal). Its answer is a class, not a function, so it is not an `Implement`: the classic
  mistakes are its table `_MISTAKES`.

What the scale does in a model that trains is measured in notebook 04 (its checks are in ex04).
"""
from __future__ import annotations

import contextlib
from functools import partial

import torch
from torch import nn

from ..core.attention import MultiHeadAttention, causal_mask
from ..lessons.scaling import softmax_slope as _softmax_slope
from . import (
    _IN_KERNEL,
    CHECK_WORK_S,
    TIME_LIMIT_S,
    Implement,
    Like,
    Predict,
    Verdict,
    _kind,
    _placeholder_left,
    call_safely,
    check_answer,
    exercise,
    grader_seed,
    none_returned,
    refusing,
    result_problem,
    same,
)

std_at_256 = Predict(
    "predict std(q·k) at d_k = 256", tolerance=2.0, digits=2, example=16.36,
    lesson="q·k adds d_k terms of variance 1: the variances add up, and std is the square root "
           "of the variance.")


# --- implement: the softmax's slope ---------------------------------------------------------------

def _slope_inputs(seed: int = 3) -> list[tuple[torch.Tensor]]:
    """Softmax weights: one row of four, a batch (2, 3, 5), and a saturated row (one weight near
    1), so that a version for one vector only, or one that is only right near uniform, is caught."""
    g = torch.Generator().manual_seed(seed)
    scores = [torch.randn(4, generator=g, dtype=torch.float64),
              torch.randn(2, 3, 5, generator=g, dtype=torch.float64),
              torch.randn(6, generator=g, dtype=torch.float64) * 30]
    return [(s.softmax(-1),) for s in scores]


def _outer(w: torch.Tensor) -> torch.Tensor:
    return w.unsqueeze(-1) * w.unsqueeze(-2)  # (..., n, n)   entry [i, j] = w_i·w_j


softmax_slope = Implement(
    "softmax slope", _softmax_slope, _slope_inputs,
    mistakes=[
        Like(lambda w: -_outer(w),
             "your diagonal is −w_i²: δ_ij is missing, the w_i that only the diagonal (i = j) "
             "gets"),
        Like(lambda w: torch.diag_embed(w * (1 - w)),
             "your diagonal w_i(1 − w_i) is right, but off the diagonal (i ≠ j) the slope is "
             "−w_i·w_j, not 0"),
        Like(lambda w: w.unsqueeze(-1) * (1 - w.unsqueeze(-2)),
             "you wrote w_i(1 − w_j) everywhere: the 1 is δ_ij, so it belongs on the diagonal "
             "only; off it the slope is −w_i·w_j"),
        Like(lambda w: torch.diag_embed(w) - (w * w).unsqueeze(-2),
             "off the diagonal yours is −w_j², the square of one weight: the slope is −w_i·w_j, "
             "a column of w times a row of w"),
    ],
    hint=("δ_ij is the identity matrix. Build the two terms, w_i·δ_ij and w_i·w_j, as "
          "(..., n, n) tensors, one entry per pair (i, j).",
          "torch.diag_embed(w) puts w on the diagonal of an (..., n, n) matrix, and "
          "w.unsqueeze(-1) * w.unsqueeze(-2) is the product w_i·w_j for every pair; subtract "
          "the second from the first."),
    what="your slope matrix")


# --- implement: a multi-head attention module ----------------------------------------------------

D_MODEL, N_HEADS = 16, 4  # the sizes the check builds your module with: d_head = 4


def _module_inputs(seed: int = 2) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(x, mask) pairs: no mask; padding (the second sequence's last two tokens); causal. The
    mask broadcasts to (B, H, T, T), True = may attend, as attnlab's masks do."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        xs = [torch.randn(2, 5, D_MODEL), torch.randn(2, 6, D_MODEL), torch.randn(1, 4, D_MODEL)]
    real = torch.ones(2, 6, dtype=torch.bool)  # (B, T)
    real[1, 4:] = False
    return [(xs[0], None), (xs[1], real[:, None, None, :]), (xs[2], causal_mask(4))]


def _forward(self, x, mask=None, *, scale: float | None = None, over: int = -1, split=True,
             merge=True, out=True, mask_at: str | None = "scores"):
    """A student's forward(x, mask) of the module, one step done as a classic mistake does it:
    another `scale` than 1/√d_head, the softmax `over` the queries (-2), no transpose in the
    `split` or the `merge`, no `out` layer, the mask applied to the weights or nowhere."""
    B, T, d = x.shape
    H, D = N_HEADS, d // N_HEADS

    def heads_of(t):  # (B, T, d) -> (B, H, T, D); a straight reshape mixes tokens and heads
        return t.view(B, T, H, D).transpose(1, 2) if split else t.reshape(B, H, T, D)
    q, k, v = (heads_of(layer(x)) for layer in (self.q, self.k, self.v))  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) * (D ** -0.5 if scale is None else scale)  # (B, H, T, T)
    if mask is not None and mask_at == "scores":
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(over)  # (B, H, T, T)
    if mask is not None and mask_at == "weights":
        weights = weights.masked_fill(~mask, 0.0)
    heads = weights @ v  # (B, H, T, D)
    merged = heads.transpose(1, 2).reshape(B, T, d) if merge else heads.reshape(B, T, d)
    return (self.out(merged) if out else merged), weights


_MISTAKES = [  # (a student's forward(self, x, mask), what the ✗ line says): the first match
    (partial(_forward, scale=D_MODEL ** -0.5),
     "your scores are divided by √d_model (4); each head's q·k adds d_head = 4 products, so "
     "divide by √d_head (2)"),
    (partial(_forward, scale=1.0), "your scores are not divided by √d_head"),
    (partial(_forward, over=-2),
     "your weights sum to 1 over the queries (each column), not over the keys (each row)"),
    (partial(_forward, split=False),
     "you reshaped (B, T, d_model) straight to (B, H, T, d_head), which mixes tokens and heads: "
     "view it as (B, T, H, d_head), then transpose(1, 2)"),
    (partial(_forward, merge=False),
     "your weights are right, but the heads were reshaped straight to (B, T, d_model), which "
     "mixes them: transpose(1, 2) back first"),
    (partial(_forward, out=False),
     "your output is the merged heads: the `out` layer that mixes them is missing"),
    (partial(_forward, mask_at=None), "your weights ignore the mask: masked keys get weight"),
    (partial(_forward, mask_at="weights"),
     "you masked the weights after the softmax, so their rows no longer sum to 1: mask the "
     "scores before it"),
]


def _module_problem(got, expected, reference: MultiHeadAttention, x, mask) -> str | None:
    """The plain comparison, or the first of `_MISTAKES` that `got` matches (as float32)."""
    problem = result_problem(got, expected)
    if problem is None or not (isinstance(got, tuple) and len(got) == 2
                               and all(isinstance(t, torch.Tensor) for t in got)):
        return problem
    got = tuple(t.float() for t in got)
    return next((message for forward, message in _MISTAKES
                 if same(got, forward(reference, x, mask), 1e-5, 1e-4)), problem)


def _built(cls, weights: dict) -> tuple[nn.Module | None, str | Verdict | None]:
    """(the student's module, `cls(D_MODEL, N_HEADS)`, with `weights` loaded, None), or (None,
    what is wrong: a Verdict where the class is untouched or returns None)."""
    if not callable(cls):
        return None, f"expected a class, got {_kind(cls)}"
    built, problem = call_safely(cls, D_MODEL, N_HEADS, who="building your module")
    if problem:
        return None, problem
    if built is None:
        return None, none_returned(cls)
    if not isinstance(built, nn.Module):
        return None, f"your class should build an nn.Module, got {_kind(built)}"
    if _placeholder_left(type(built).forward) == "...":
        return None, Verdict.todo("not attempted yet; write __init__ and forward above and run "
                                  "the cell again.")
    for name in ("q", "k", "v", "out"):
        layer = getattr(built, name, None)
        if not isinstance(layer, nn.Linear) or layer.weight.shape != (D_MODEL, D_MODEL):
            return None, (f"your module needs four nn.Linear(d_model, d_model) layers named q, "
                          f"k, v and out; its `{name}` is {_kind(layer)}")
    try:
        built.load_state_dict(weights)
    except RuntimeError as error:
        return None, ("attnlab's weights do not load into your module ("
                      + str(error).splitlines()[-1].strip()[:120] + "): keep just the four layers")
    return built, None


def _forward_problem(got, problem, expected, reference: MultiHeadAttention, x, mask) -> str | None:
    """What is wrong with the student's forward(x, mask), which gave `got` (or `problem`), as
    the ✗ line says it: None, or the inputs and the problem."""
    if problem is None and got is None:
        return "your forward runs but returns None: return (output, weights)"
    problem = problem or _module_problem(got, expected, reference, x, mask)
    if problem:
        masked = "no mask" if mask is None else f"a {tuple(mask.shape)} mask"
        return f"given x {tuple(x.shape)} and {masked}: {problem}"
    return None


def _forward_refused(built: nn.Module, x, mask, refuse: bool):
    """(result, problem) of the student's module on (x, mask), attnlab's module refusing where
    `refuse` (a grader's run)."""
    with torch.no_grad(), contextlib.ExitStack() as stack:
        for method in (MultiHeadAttention.forward, MultiHeadAttention.attend) if refuse else ():
            stack.enter_context(refusing(method))
        return call_safely(built, x, mask, who="your forward")


def _module_checked(module_class, judge):
    """`check_answer` with multi_head_module's words: in the kernel and in `make grade`'s
    process."""
    with torch.random.fork_rng():  # building the student's layers draws: not from the caller's
        return check_answer(
            module_class, judge, name="multi-head module", reference=MultiHeadAttention,
            success="with attnlab's weights, it matches attnlab's MultiHeadAttention on 3 inputs "
                    "(no mask, padding, causal)",
            hint=("follow the ten-line function of notebook 01: project, split, attend, merge, "
                  "mix; compare each step's shape with the shape comments.",
                  "q = self.q(x).view(B, T, H, D).transpose(1, 2) (and k, v); scores = "
                  "q @ k.transpose(-2, -1) / D ** 0.5; masked_fill(~mask, -inf) before the "
                  "softmax over the last dimension; merge with transpose(1, 2).reshape(B, T, "
                  "H * D); then self.out."),
            todo="not attempted yet; write your class above and run the cell again.")


def _reference_module(seed: int | None) -> MultiHeadAttention:
    with torch.random.fork_rng():
        torch.manual_seed(2 if seed is None else seed)
        return MultiHeadAttention(D_MODEL, N_HEADS)


@exercise("implement")
def multi_head_module(module_class):
    """Your `module_class(d_model, n_heads)`: an nn.Module with four nn.Linear(d_model, d_model)
    layers `q`, `k`, `v` and `out` whose forward(x, mask=None) returns the output (B, T,
    d_model) and the weights (B, H, T, T). The check builds it with d_model = 16 and 4 heads,
    loads attnlab's MultiHeadAttention's weights into it and compares the two on three inputs.
    Returns your class when it matches, else attnlab's. `make grade` judges it in two halves
    (`_Module`)."""
    seed = grader_seed()  # a grader's: other weights and inputs, and attnlab's module refuses
    reference = _reference_module(seed)

    def judge(cls):
        built, problem = _built(cls, reference.state_dict())
        if problem:
            return problem
        for x, mask in _module_inputs(*([] if seed is None else [seed])):
            with torch.no_grad():
                expected = reference(x, mask)
            got, problem = _forward_refused(built, x, mask, refuse=seed is not None)
            problem = _forward_problem(got, problem, expected, reference, x, mask)
            if problem:
                return problem
        return None

    return _module_checked(module_class, judge)


class _Module:
    """`multi_head_module` in `make grade`'s two halves (`grading.split`): the grader's process
    draws the reference's weights and the inputs from its seed and ships them as data (the
    module as its weights); the kernel builds the student's class, loads the weights and runs
    its forward on the inputs, attnlab's module refusing (`calls`); the results are compared,
    and the named mistake found, in the grader's process (`judged`)."""
    name = "multi-head module"

    def made(self, seed: int | None = None) -> list[tuple]:
        """(reference module, x, mask) per input."""
        reference = _reference_module(seed)
        return [(reference, x, mask)
                for x, mask in _module_inputs(*([] if seed is None else [seed]))]

    def expected(self, made: list[tuple]) -> list:
        with torch.no_grad():
            return [reference(x, mask) for reference, x, mask in made]

    def seconds_for(self, n: int) -> float:
        return TIME_LIMIT_S * (n + 1) + CHECK_WORK_S

    def calls(self, cls, made: list[tuple]):
        """The kernel's half: the student's module built, the weights loaded, its forward run
        on each input up to the first problem."""
        with torch.random.fork_rng():
            built, problem = _built(cls, made[0][0].state_dict())
        if problem:
            return problem
        done = []
        for reference, x, mask in made:
            got, problem = _forward_refused(built, x, mask, refuse=True)
            done.append((got, (reference, x.clone(), None if mask is None else mask.clone()),
                         problem, {}))
            if problem is not None or got is None:
                break
        return done

    def judged(self, done, made: list[tuple], expected_all: list):
        """The grader's half: `multi_head_module`'s line on the results handed back."""
        def judge(_):
            if not isinstance(done, list):
                return done
            for (reference, x, mask), (got, _, problem, _), expected in zip(made, done,
                                                                           expected_all):
                problem = _forward_problem(got, problem, expected, reference, x, mask)
                if problem:
                    return problem
            if len(done) < len(made):
                return "your notebook handed back fewer results than the check asked for"
            return None
        return _module_checked(... if done is ... else _IN_KERNEL, judge)


multi_head_module.split = _Module()
