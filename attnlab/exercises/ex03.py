"""Notebook 03's exercises: the encoder block written out (implement), uniform attention at the
scores' hook point (implement), the accuracy left under uniform attention (predict), attention
received (implement), zeroing a word's column after the softmax (implement), and the accuracy
that leaves (predict). Their ✗ lines name the typical mistakes: for `encode`, a padding mask
missing, on the query side or the wrong way round, a residual missing, pre-norm, and an
embedding without positions; for `uniform_scores`, scores that change nothing the softmax sees
and scores that make NaN; for `attention_received`,
padding queries counted, rows for columns, a sum, a division by T, and a mask on the keys; for
`zero_column`, renormalised rows, the word's row, all of pos in every review, and no change.

In "Going further", why scale, in this model (notebook 02 measured it on random vectors):
- `score_spread` (implement): the spread of an attention layer's scaled scores over the pairs
  of real tokens, against `attnlab.scaling.score_spread` on random layers (one with scale=1.0);
- `spread_at_init` (predict): that spread in this notebook's model before training, guessed
  before it is measured;
- `accuracy_without_scale` (explore): the test accuracy after 4 epochs of the d_head = 64 model
  trained with scale=1.0 (seed 0), the experiment the student runs, judged against the curves
  the notebook measured (passed in: the series seed moves them, so none is stored here);
- `folded_spread` (predict): whether the scores of the model with 1/√d_head folded into W_Q at
  initialisation end up as spread as the scaled model's or the unscaled one's, guessed before
  it is trained."""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..attention import MultiHeadAttention
from ..data import Vocab, make_contrast_reviews
from ..models import TinyTransformer
from ..probes import attention_received as _attention_received
from ..probes import hooked, uniform_attention
from ..report import fmt
from ..scaling import score_spread as reference_spread
from . import (
    Verdict,
    _kind,
    as_number,
    call_safely,
    check_answer,
    check_function,
    check_prediction,
    exercise,
    none_returned,
    prediction,
    result_problem,
    tensor_problem,
)


def _ids(seed: int = 5) -> list[tuple[torch.Tensor]]:
    """Token-id batches of contrast reviews, padded (reviews of 5 to 15 words)."""
    vocab = Vocab.for_reviews()
    return [(make_contrast_reviews(n, seed=seed + n).tensors(vocab)[0],) for n in (3, 8)]


def _variants(model: TinyTransformer, x: torch.Tensor) -> dict[str, tuple]:
    """The classic wrong blocks, as (states, weights), to name the one a student wrote."""
    block, h = model.blocks[0], model.embed(x)
    keys = (x != model.pad_id)[:, None, None, :]  # (B, 1, 1, T)
    queries = (x != model.pad_id)[:, None, :, None]  # (B, 1, T, 1)   the wrong side

    def post(mask, first=True, second=True, start=h):
        a, w = block.attn(start, mask)
        h1 = block.norm1(start + a if first else a)
        return block.norm2(h1 + block.ff(h1) if second else block.ff(h1)), w

    a, w = block.attn(block.norm1(h), keys)
    pre = h + a
    return {"the padding mask is missing: every query also reads the padding tokens": post(None),
            "the padding mask is on the query side: it must hide padding as a key, the last "
            "axis of the weights": post(queries),
            "your mask is the wrong way round: queries read only the padding. True must mark "
            "the keys a query may read": post(~keys),
            "the residual connections are missing: add the part's input back before the "
            "LayerNorm": post(keys, first=False, second=False),
            "the residual around attention is missing: block.norm1 gets the attention "
            "output alone": post(keys, first=False),
            "the residual around the feed-forward part is missing: block.norm2 gets "
            "block.ff's output alone": post(keys, second=False),
            "this is pre-norm (LayerNorm before each part); this block is post-norm: add first, "
            "then normalise the sum": (pre + block.ff(block.norm2(pre)), w),
            "your embedding has no position vectors: model.embed(x) adds them to the token "
            "vectors": post(keys, start=model.embed.tokens(x))}


def _block_problem(got, expected, model, x) -> str | None:
    problem = result_problem(got, expected, atol=1e-9, rtol=1e-7)
    if problem is None or not isinstance(got, tuple) or len(got) != 2:
        return problem
    with torch.no_grad():
        for mistake, (states, weights) in _variants(model, x).items():
            if all(isinstance(g, torch.Tensor) and g.shape == e.shape and g.dtype == e.dtype
                   and torch.allclose(g, e) for g, e in zip(got, (states, weights))):
                return mistake
    return problem


def _example_model() -> tuple[TinyTransformer]:
    """An untrained review model, drawn under a private seed (the caller's random state is left
    as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return (TinyTransformer(len(Vocab.for_reviews()), dtype=torch.float64),)


def _encode(model: TinyTransformer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(states, weights) of a one-block model: its encode, with the one layer's weights."""
    states, (weights,) = model.encode(x)
    return states, weights


@exercise("implement", args=_example_model)
def encode(fn, model: TinyTransformer):
    """Implement: `fn(model, x)` -> (states, weights) of a one-block post-norm encoder, against
    `model.encode(x)` on padded batches of reviews."""
    inputs = [(model, x) for (x,) in _ids()]
    with torch.no_grad():
        return check_function(
            fn, _encode, inputs, name="encode",
            compare=lambda got, expected, m, x: _block_problem(got, expected, m, x),
            success="your block is the model's encode, states and weights, on padded reviews",
            hint=("compare your lines with the block's two equations, one part at a time. "
                  "And which tokens may a query read?",
                  "the mask is `x != vocab.PAD` with two new axes in the middle, so that it marks "
                  "the keys (the last axis of the weights). Then model.embed(x), block.attn(h, "
                  "mask), and for each part: add its output to its input, then the LayerNorm."))


def _uniform_scores(scores: torch.Tensor) -> torch.Tensor:
    """Equal scores before the mask: the softmax then gives every allowed key the same weight."""
    return torch.zeros_like(scores)  # (B, H, T, S)


def _uniform_problem(fn, model: TinyTransformer, x: torch.Tensor):
    """What is wrong with `fn` at the model's hook_scores on the reviews x (B, T), or None;
    a Verdict for a function that returns None."""
    attn, seen = model.blocks[0].attn, []
    with torch.no_grad():
        with hooked((attn.hook_scores, lambda s: seen.append(s) or s)):
            _, (normal,) = model.encode(x)  # (B, H, T, T)
        scores = seen[0]  # (B, H, T, T)   scaled, before the mask
        got, problem = call_safely(fn, scores.clone())
        if problem:
            return problem
        if got is None:
            return none_returned(fn)
        if not isinstance(got, torch.Tensor):
            return f"your function should return a tensor (the new scores), got {_kind(got)}"
        if got.shape != scores.shape:
            return (f"your scores have shape {tuple(got.shape)}; the scores that flow on must "
                    f"keep theirs, {tuple(scores.shape)} (B, H, T, T)")
        if got.dtype != scores.dtype:
            return f"your scores have dtype {got.dtype}, expected {scores.dtype} (the model's)"
        weights, problem = call_safely(
            lambda: _weights_with(model, (attn.hook_scores, fn), x), seconds=None)
        if problem:
            return problem
        with uniform_attention(model):
            _, (expected,) = model.encode(x)  # (B, H, T, T)
    if torch.allclose(weights, expected, atol=1e-9):
        return None
    if torch.isnan(weights).any():
        return "the weights hold NaN: the softmax needs finite scores"
    if torch.allclose(weights, normal, atol=1e-9):
        return "the weights are the model's own: your scores change nothing the softmax sees"
    return ("the weights are not equal over the keys each query may read: each query's scores "
            "must all be the same number")


def _weights_with(model: TinyTransformer, edit, x: torch.Tensor) -> torch.Tensor:
    with hooked(edit):
        return model.encode(x)[1][0]  # (B, H, T, T)


@exercise("implement", args=_example_model)
def uniform_scores(fn, model: TinyTransformer):
    """Implement: `fn(scores)` at the attention's hook_scores (after the scale, before the mask)
    returns scores that make every query weigh the keys its mask allows equally; checked by
    running the model with it on padded reviews against `attnlab.uniform_attention(model)`."""
    cases = [x for (x,) in _ids()]

    def judge(fn):
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        for x in cases:
            problem = _uniform_problem(fn, model, x)
            if problem is not None:
                return problem
        return None

    return check_answer(
        fn, judge, name="uniform attention", reference=_uniform_scores,
        success="with your scores every query weighs the keys it may read equally, on padded "
                "reviews: the model under attnlab.uniform_attention",
        hint=("the softmax turns scores into weights; which scores give every key the same "
              "weight? The mask is applied after your function, so padding stays hidden.",
              "return a tensor of the scores' shape in which every score is the same number, "
              "such as torch.zeros_like(scores)."),
        todo="not attempted yet; write your function above and run the cell again.")


@exercise("predict", args=(0.4775,))
def uniform_accuracy(guess, measured):
    """Predict: the trained model's test accuracy when every attention weight is uniform."""
    return check_prediction(
        guess, measured, name="accuracy with uniform attention", tolerance=0.1,
        lesson="This model learned to decide largely by which word reads which: with every "
               "weight uniform no word can single out another, and much of what it learned is "
               "gone. (Whether the task needs attention at all is another question: the next "
               "cells ask it.)")


def _weights(generator: torch.Generator, real: torch.Tensor, heads: int) -> torch.Tensor:
    """Attention weights (B, H, T, T) as a padded batch has them: every row a softmax over the
    real keys, padding keys at exactly 0, and padding queries attending too (their rows are
    not 0), so that a mean over all queries differs from a mean over the real ones."""
    B, T = real.shape
    scores = torch.randn(B, heads, T, T, generator=generator)  # (B, H, T, T)
    scores = scores.masked_fill(~real[:, None, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1)


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights, real) pairs of a few shapes; reviews of different lengths, padded on the right."""
    g = torch.Generator().manual_seed(3)
    cases = []
    for lengths, T, heads in (([4, 2], 4, 1), ([5, 3, 7], 7, 4), ([6, 6, 2, 9], 9, 2)):
        real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        cases.append((_weights(g, real, heads), real))
    return cases


def _made_match(got, expected: torch.Tensor, made: list[tuple[torch.Tensor, str]]) -> str | None:
    """The plain comparison of `got` with `expected`, or the mistake of the first `made`
    result that `got` matches: (what the mistake gives on the same inputs, its sentence)."""
    problem = tensor_problem(got, expected)
    if problem is None or not isinstance(got, torch.Tensor):
        return problem
    for wrong, mistake in made:
        if got.shape == wrong.shape and got.dtype == wrong.dtype \
                and torch.allclose(got.detach(), wrong, atol=1e-5, rtol=1e-4):
            return mistake
    return problem


def _as_made(problem, cases: list[tuple[torch.Tensor, ...]]):
    """`problem` as a compare that builds the mistakes from the inputs as the check made them:
    an answer that changes its input in place (`weights *= ...`) must not change them."""
    kept = {id(args[0]): tuple(a.clone() for a in args) for args in cases}
    return lambda got, expected, *args: problem(got, expected, *kept.get(id(args[0]), args))


def _received_problem(got, expected: torch.Tensor, weights: torch.Tensor,
                      real: torch.Tensor) -> str | None:
    """What is wrong with `got` as attention_received(weights, real), naming the classic
    mistakes: padding queries counted, rows for columns, a sum, the wrong count, the key side."""
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    keys = real[:, None, None, :].to(weights.dtype)  # (B, 1, 1, T)
    n = real.sum(-1)[:, None, None].to(weights.dtype)  # (B, 1, 1)   real tokens per review
    summed = (weights * queries).sum(-2)  # (B, H, T)
    return _made_match(got, expected, [
        (weights.mean(-2), "your mean counts the padding queries too: their rows are not 0, "
                           "so leave them out"),
        (weights.mean(-1), "you averaged rows (what each query gives), not columns (what "
                           "each key receives)"),
        ((weights * keys).sum(-1) / n, "you averaged rows (what each query gives), not "
                                       "columns (what each key receives)"),
        (summed, "that is the sum over the real queries, not their mean"),
        (summed / weights.shape[-2], "you divided by T, the padded length, not by each "
                                     "review's number of real tokens"),
        ((weights * keys).sum(-2) / n, "your sum still takes in the padding queries' rows "
                                       "(a mask on the keys changes nothing: they get 0)"),
    ])


@exercise("implement")
def attention_received(fn):
    """Implement: for every key, the mean over the real queries of the weight it receives."""
    cases = _batches()
    return check_function(
        fn, _attention_received, cases, name="attention_received",
        compare=_as_made(_received_problem, cases),
        hint=("weights[b, h, i, j] is what query i gives key j. Along which axis run the weights "
              "a key receives, and which of them count?",
              "multiply by a 0/1 mask of the real queries that lines up with the query axis "
              "(dim -2), sum over that axis, and divide by the number of real tokens."))


def _zero_column(weights: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A copy of weights (B, H, T, T) with every query's weight on key pos[b] set to 0."""
    other = torch.arange(weights.shape[-1]) != pos[:, None]  # (B, T)   False at the word
    return weights * other[:, None, None, :].to(weights.dtype)  # (B, H, T, T)


def _columns() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(4)
    cases = []
    for B, H, T in ((2, 1, 3), (4, 4, 6), (3, 2, 9)):
        weights = torch.softmax(torch.randn(B, H, T, T, generator=g), dim=-1)  # (B, H, T, T)
        cases.append((weights, torch.randint(0, T, (B,), generator=g)))
    return cases


def _zero_problem(got, expected: torch.Tensor, weights: torch.Tensor,
                  pos: torch.Tensor) -> str | None:
    """What is wrong with `got` as zero_column(weights, pos), naming the classic mistakes:
    renormalised rows, the word's row, every review's word in each review, nothing zeroed."""
    rows, right = torch.arange(len(pos)), _zero_column(weights, pos)
    row = weights.clone()
    row[rows, :, pos, :] = 0.0  # the word's row: what it gives
    every = weights.clone()
    every[..., pos] = 0.0  # all of pos's columns in every review
    return _made_match(got, expected, [
        (right / right.sum(-1, keepdim=True),
         "you renormalised the rows: that is hiding the word before the softmax. After it, "
         "the rows sum to less than 1"),
        (row, "you zeroed the word's row (what it gives), not its column (what every query "
              "gives it)"),
        (every, "you zeroed every review's word in every review: weights[..., pos] takes "
                "all of pos for each review, not pos[b] for review b"),
        (weights, "your result is the weights unchanged: no weight was set to 0"),
    ])


@exercise("implement")
def zero_column(fn):
    """Implement: zero the decisive word's column after the softmax (no renormalising)."""
    cases = _columns()
    return check_function(
        fn, _zero_column, cases, name="zero_column", compare=_as_made(_zero_problem, cases),
        hint=("review b's word is key pos[b]. Which slice of weights holds every query's weight "
              "on it, in every head?",
              "build a (B, T) 0/1 tensor that is 0 only at each review's word, give it axes so "
              "that it lines up with the key axis (the last), and multiply. No renormalising."))


@exercise("predict", args=(0.61,))
def zeroed_accuracy(guess, measured):
    """Predict: the test accuracy left when the first sentiment word's column is zeroed after
    the softmax (hiding it before the softmax was measured just before)."""
    return check_prediction(
        guess, measured, name="accuracy with the first word zeroed", tolerance=0.1,
        lesson="Masking before the softmax gives the word's weight to the other tokens; zeroing "
               "after it throws the weight away. For a word whose value carries what the model "
               "needs, either way no query gets it.")


# === Going further: why scale, in this model ======================================================

# The shape of what the notebook passes to `accuracy_without_scale`: test accuracy after epochs
# 1..5 of `attnlab.scaling.train_at_scale`, with scale=1.0 and with the scale (seed 0's values).
EXAMPLE_CURVES = {"scale 1.0": (0.475, 0.4975, 0.7775, 0.9, 0.955),
                  "scaled": (0.475, 0.4975, 0.59, 0.8125, 0.93)}
EPOCH = 4  # the exercise asks for the accuracy after this many epochs
ONE_REVIEW = 1 / 400  # one test review more or less: the resolution of a test accuracy


# --- implement: the spread of a layer's scaled scores ---------------------------------------------

def _spread_inputs(seed: int = 2) -> list[tuple[MultiHeadAttention, torch.Tensor, torch.Tensor]]:
    """(attn, h, real) triples in float64: layers with 2, 3 and 1 heads of different sizes, one
    with scale=1.0 (so that a hard-coded 1/√d_head is caught), padding at the end of some rows
    (so that counting padded pairs is caught), and T ≠ d_head."""
    made = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for d_model, heads, scale, lengths in ((16, 2, None, (5, 3)), (24, 3, 1.0, (4, 6, 2)),
                                               (8, 1, None, (7,))):
            attn = MultiHeadAttention(d_model, heads, scale=scale).double()
            T = max(lengths)
            h = torch.randn(len(lengths), T, d_model, dtype=torch.float64)  # (B, T, d_model)
            real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
            made.append((attn, h, real))
    return made


def _raw_scores(attn: MultiHeadAttention, h: torch.Tensor) -> torch.Tensor:
    q, k, _ = attn.project(h)  # (B, H, T, D)
    return q @ k.transpose(-2, -1)  # (B, H, T, T)   unscaled


def _spread_problem(got, expected: torch.Tensor, attn: MultiHeadAttention, h: torch.Tensor,
                    real: torch.Tensor) -> str | None:
    """What is wrong with `got` as score_spread(attn, h, real), naming the classic mistakes.
    A 0-dim tensor like the reference's, or a Python float (`.item()`), is a result."""
    if isinstance(got, float):
        value, problem = as_number(got, "your result")
        if problem:
            return problem
    elif isinstance(got, torch.Tensor) and got.shape == expected.shape \
            and got.dtype == expected.dtype and bool(torch.isfinite(got).all()):
        value = got.item()
    else:
        return tensor_problem(got, expected)
    with torch.no_grad():
        raw = _raw_scores(attn, h)  # (B, H, T, T)
    pairs = (real[:, None, :, None] & real[:, None, None, :]).expand_as(raw)  # (B, H, T, T)
    n = int(pairs.sum())
    scale = attn.scale if attn.scale is not None else attn.d_head ** -0.5
    right = expected.item()
    if math.isclose(value, right, rel_tol=1e-4) \
            or math.isclose(value, right * math.sqrt((n - 1) / n), rel_tol=1e-4):
        return None  # the population std is as good as the sample std
    std = lambda s: s.std().item()  # noqa: E731
    mistakes = [
        (right / scale, "your spread is that of q·k without the layer's scale: multiply the "
                        "scores by the scale before measuring them"),
        (right / scale * attn.d_head ** -0.5,
         "on a layer whose scale is not 1/√d_head (attn.scale = "
         f"{fmt(scale, 3, guard=False)}) you used 1/√d_head: read the layer's own scale"),
        (right ** 2, "that is the variance; the spread asked for is the standard deviation"),
        (std(raw * scale), "your spread counts the pairs with a padding token too: keep only "
                           "the pairs whose query and key are both real"),
        (std((raw * scale)[(real[:, None, None, :]).expand_as(raw)]),
         "your spread counts the padding queries: a pair counts only when both its query and "
         "its key are real"),
        (std((raw * scale)[(real[:, None, :, None]).expand_as(raw)]),
         "your spread counts the padding keys: a pair counts only when both its query and its "
         "key are real"),
    ]
    for wrong, message in mistakes:
        if wrong != right and math.isclose(value, wrong, rel_tol=1e-4):
            return message
    return f"your spread is {fmt(value, 4, guard=False)}, expected {fmt(right, 4, guard=False)}"


@exercise("implement")
def score_spread(fn):
    """Your `fn(attn, h, real)` against `attnlab.scaling.score_spread` on three random layers."""
    return check_function(
        fn, reference_spread, _spread_inputs(), name="score_spread", compare=_spread_problem,
        hint=("the softmax of a head sees q·k times the layer's scale, one score per (query, "
              "key) pair; which pairs belong to the measurement?",
              "get the heads' queries and keys from the layer's `project`, multiply the scores "
              "by `attn.scale` (1/√d_head when it is None), keep the pairs whose query and key "
              "are both real (a (B, T) mask with an axis for each role) and take the std."))


@exercise("predict", args=(0.0201,))
def spread_at_init(guess, measured):
    """Your guess for the spread of this notebook's scaled scores at initialisation (±0.05)."""
    return check_prediction(
        guess, measured, name="predict the spread at initialisation", tolerance=0.05,
        lesson="The token vectors have length about 1 and W_Q's entries are about 1/√d_model, so "
               "the entries of q and k start far below 1, and their products q_i k_i further "
               "still.")


# --- explore: train without the scale -------------------------------------------------------------

@exercise("explore", args=(EXAMPLE_CURVES,))
def accuracy_without_scale(answer, curves: dict[str, Sequence[float]]):
    """The test accuracy after EPOCH epochs of the d_head = 64 model with scale=1.0, seed 0,
    against the notebook's measurement: `curves` maps "scale 1.0" and "scaled" to the test
    accuracy after each epoch of seed 0's run (at least EPOCH epochs)."""
    unscaled, scaled = (tuple(float(a) for a in curves[name]) for name in ("scale 1.0", "scaled"))
    right = unscaled[EPOCH - 1]
    near = lambda a, b: abs(a - b) < ONE_REVIEW / 2  # noqa: E731   the same count of reviews
    hint = ("train the model of the cell above again with one change, its scale, and read its "
            f"test accuracy after epoch {EPOCH}.",
            "the same function, seed and number of epochs, scale=1.0; the history's "
            "'test_acc' holds one accuracy per epoch, the first epoch at index 0.")

    def judge(answer):
        value, problem = as_number(answer, "your accuracy")
        if problem:
            return problem
        if not 0 <= value <= 1:
            return f"{fmt(value, 4, guard=False)} is not an accuracy (between 0 and 1)"
        if near(value, right):
            return Verdict.right(f"with scale=1.0 the test accuracy after {EPOCH} epochs is "
                                 f"{fmt(right, 3, guard=False)}; with the scale it was "
                                 f"{fmt(scaled[EPOCH - 1], 3, guard=False)}.")
        if near(value, scaled[EPOCH - 1]):
            return "that is the scaled run's accuracy, printed above; train with scale=1.0"
        for epoch, accuracy in enumerate(unscaled, start=1):
            if epoch != EPOCH and near(value, accuracy):
                return (f"that is the accuracy with scale=1.0 after epoch {epoch}; the question "
                        f"asks for epoch {EPOCH}")
        return (f"{fmt(value, 4, guard=False)} is not what the model with scale=1.0, seed 0, "
                f"reaches after {EPOCH} epochs")

    return check_answer(answer, judge, name="accuracy without the scale", reference=right,
                        hint=hint, todo="not attempted yet; put your number in the cell above.")


# --- predict: how spread are the folded model's scores after training? ----------------------------

CHOICES = ("scaled", "unscaled")
EXAMPLE_SPREADS = {"scaled": [0.8, 0.7, 0.4], "scale 1.0": [2.4, 3.6, 4.2],
                   "folded": [2.3, 2.9, 2.4]}  # the shape of the notebook's measurement


def _nearer(spreads: dict[str, Sequence[float]]) -> str:
    """"scaled" or "unscaled": whose trained spreads the folded model's are nearer to, by the
    ratio of the geometric means (spreads differ by factors, not by amounts)."""
    level = {name: sum(math.log(v) for v in values) / len(values)
             for name, values in spreads.items()}
    gap = {"scaled": abs(level["folded"] - level["scaled"]),
           "unscaled": abs(level["folded"] - level["scale 1.0"])}
    return min(gap, key=gap.get)


@exercise("predict", args=(EXAMPLE_SPREADS,))
def folded_spread(guess, spreads: dict[str, Sequence[float]]):
    """Your guess, "scaled" or "unscaled", against the measurement: `spreads` maps "scaled",
    "scale 1.0" and "folded" to the spread of each seed's scores after training."""
    measured = _nearer(spreads)
    lesson = ("A W_Q folded to 1/8 of its size gets a gradient 8 times larger. Adam moves every "
              "weight by about the learning rate per step, whatever its gradient's size, so the "
              "folded W_Q moves 8 times faster relative to its size (plain SGD, a step of lr "
              "times the gradient, would move it 64 times faster), and so do the scores it "
              "makes.")

    shown = "; ".join(f"{name} " + ", ".join(fmt(v, 2, guard=False) for v in values)
                      for name, values in spreads.items())

    def read(guess):
        if not isinstance(guess, str) or guess.strip().lower() not in CHOICES:
            return None, f"write \"scaled\" or \"unscaled\", got {_kind(guess)}"
        return guess.strip().lower(), None

    return prediction(
        guess, name="the folded model's spread", read=read,
        describe=lambda said: f"you predicted {said}; the folded model's scores end up like the "
                              f"{measured} model's (spreads after training: {shown})",
        lesson=lesson,
        todo="no prediction yet; write \"scaled\" or \"unscaled\" in the cell above before "
             "running.",
        write="One of the two words, in quotes.")
