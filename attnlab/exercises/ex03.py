"""The exercises of notebook 03 (building and training an encoder), checked.

- `encode` (implement): the one-block post-norm encoder written out, against `model.encode`;
- `uniform_scores` (implement): scores at the hook point that make attention uniform;
- `uniform_accuracy` (predict): the test accuracy the trained model keeps with uniform attention.

Each implement check's mistakes are its classic wrong answers, written as a student writes them.
"""
from __future__ import annotations

import torch

from ..core.blocks import EncoderBlock
from ..core.hooks import attention_maps, hooked
from ..core.interventions import uniform_attention
from ..core.models import TinyTransformer
from ..lessons.data import Vocab, make_contrast_reviews
from . import (
    _IN_KERNEL,
    CHECK_WORK_S,
    TIME_LIMIT_S,
    Implement,
    Like,
    Predict,
    Verdict,
    _kind,
    call_safely,
    check_answer,
    exercise,
    grader_seed,
    none_returned,
    refusing,
)

# --- the encoder block, written out --------------------------------------------------------------

def _example_model() -> tuple[TinyTransformer]:
    """An untrained review model, drawn under a private seed (the caller's random state is left
    as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return (TinyTransformer(len(Vocab.for_reviews()), dtype=torch.float64),)


def _ids(seed: int = 5) -> list[torch.Tensor]:
    """Token-id batches (B, T) of contrast reviews of 5 to 15 words, padded."""
    vocab = Vocab.for_reviews()
    return [make_contrast_reviews(n, seed=seed + n).tensors(vocab)[0] for n in (3, 8)]


def _encode(model: TinyTransformer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(states, weights) of a one-block model: the class's encode (inside `encoder_replaced` the
    model's own calls this function), with gradients, since notebook 03 trains through it."""
    seen: list[torch.Tensor] = []
    with hooked((model.blocks[0].attn.hook_weights, lambda w: seen.append(w) or w)):
        states = TinyTransformer.encode(model, x)  # (B, T, d)
    return states, seen[0]  # (B, T, d), (B, H, T, T)


def _keys(m: TinyTransformer, x: torch.Tensor) -> torch.Tensor:
    return (x != m.pad_id)[:, None, None, :]  # (B, 1, 1, T)


def _post(m: TinyTransformer, x: torch.Tensor, mask, first=True, second=True, start=None):
    """The post-norm block as a student may write it: with the residual around attention
    (`first`) and around the feed-forward part (`second`) or not, from `start` (model.embed)."""
    block, h = m.blocks[0], m.embed(x) if start is None else start
    a, w = block.attn(h, mask)
    h = block.norm1(h + a if first else a)
    return block.norm2(h + block.ff(h) if second else block.ff(h)), w


def _pre_norm(m: TinyTransformer, x: torch.Tensor):
    block, h = m.blocks[0], m.embed(x)
    a, w = block.attn(block.norm1(h), _keys(m, x))
    h = h + a
    return h + block.ff(block.norm2(h)), w


encode = Implement(
    "encode", _encode, lambda model, seed=5: [(model, x) for x in _ids(seed)],
    args=_example_model, atol=1e-9, rtol=1e-7, no_grad=True,
    refuse=(TinyTransformer.encode, EncoderBlock.forward),
    success="your block is the model's encode, states and weights, on padded reviews",
    mistakes=[
        Like(lambda m, x: _post(m, x, None),
             "the padding mask is missing: every query also reads the padding tokens"),
        Like(lambda m, x: _post(m, x, (x != m.pad_id)[:, None, :, None]),
             "the padding mask is on the query side: it must hide padding as a key, the last "
             "axis of the weights"),
        Like(lambda m, x: _post(m, x, (x == m.pad_id)[:, None, None, :]),
             "your mask is the wrong way round: queries read only the padding. True must mark "
             "the keys a query may read"),
        Like(lambda m, x: _post(m, x, _keys(m, x), first=False, second=False),
             "the residual connections are missing: add the part's input back before the "
             "LayerNorm"),
        Like(lambda m, x: _post(m, x, _keys(m, x), first=False),
             "the residual around attention is missing: block.norm1 gets the attention output "
             "alone"),
        Like(lambda m, x: _post(m, x, _keys(m, x), second=False),
             "the residual around the feed-forward part is missing: block.norm2 gets block.ff's "
             "output alone"),
        Like(_pre_norm, "this is pre-norm (LayerNorm before each part); this block is post-norm: "
                        "add first, then normalise the sum"),
        Like(lambda m, x: _post(m, x, _keys(m, x), start=m.embed.tokens(x)),
             "your embedding has no position vectors: model.embed(x) adds them to the token "
             "vectors"),
    ],
    hint=("compare your lines with the block's two equations, one part at a time. And which "
          "tokens may a query read?",
          "the mask is `x != vocab.PAD` with two new axes in the middle, so that it marks the "
          "keys (the last axis of the weights). Then model.embed(x), block.attn(h, mask), and "
          "for each part: add its output to its input, then the LayerNorm."))


# --- uniform attention at the hook point ---------------------------------------------------------

def _uniform_scores(scores: torch.Tensor) -> torch.Tensor:
    """Equal scores before the mask: the softmax then gives every allowed key the same weight."""
    return torch.zeros_like(scores)  # (B, H, T, S)


def _weights(model: TinyTransformer, x: torch.Tensor, *edits) -> torch.Tensor:
    """The one layer's attention weights (B, H, T, T) on x, with the hook `edits` in force."""
    with hooked(*edits):
        return attention_maps(model, x)[0]


def _seen(model: TinyTransformer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the scores (B, H, T, T) the hook sees on the reviews x, scaled, before the mask; the
    model's own weights)."""
    hook, seen = model.blocks[0].attn.hook_scores, []
    with torch.no_grad():
        normal = _weights(model, x, (hook, lambda s: seen.append(s) or s))  # (B, H, T, T)
    return seen[0], normal


def _uniform_problem(fn, model: TinyTransformer, x: torch.Tensor) -> str | Verdict | None:
    """What is wrong with `fn` at the model's hook_scores on the reviews x (B, T), or None; a
    Verdict for a function that returns None. The scores are judged by the weights they give,
    so any one number for every score is right."""
    scores, normal = _seen(model, x)
    with torch.no_grad(), refusing(_uniform_scores if grader_seed() is not None else None):
        got, problem = call_safely(fn, scores.clone())  # a grader refuses the check's reference
    if problem or got is None:
        return problem or none_returned(fn)
    return _weights_problem(got, fn, model, x, scores, normal)


def _weights_problem(got, fn, model: TinyTransformer, x: torch.Tensor, scores: torch.Tensor,
                     normal: torch.Tensor) -> str | None:
    """What is wrong with the scores `got` that `fn` returned for `scores`, judged by the
    weights `fn` gives at the hook in the model (`make grade`'s process: a function that
    gives `got` again)."""
    if not isinstance(got, torch.Tensor):
        return f"your function should return a tensor (the new scores), got {_kind(got)}"
    if got.shape != scores.shape:
        return (f"your scores have shape {tuple(got.shape)}; the scores that flow on must "
                f"keep theirs, {tuple(scores.shape)} (B, H, T, T)")
    if got.dtype != scores.dtype:
        return f"your scores have dtype {got.dtype}, expected {scores.dtype} (the model's)"
    with torch.no_grad():
        weights, problem = call_safely(_weights, model, x, (model.blocks[0].attn.hook_scores,
                                                            fn), seconds=None)
        if problem:
            return problem
        with uniform_attention(model):
            expected = _weights(model, x)  # (B, H, T, T)
    if torch.allclose(weights, expected, atol=1e-9):
        return None
    if torch.isnan(weights).any():
        return "the weights hold NaN: the softmax needs finite scores"
    if torch.allclose(weights, normal, atol=1e-9):
        return "the weights are the model's own: your scores change nothing the softmax sees"
    return ("the weights are not equal over the keys each query may read: each query's scores "
            "must all be the same number")


def _uniform_checked(fn, judge):
    """`check_answer` with uniform_scores' words: in the kernel and in `make grade`'s process."""
    return check_answer(
        fn, judge, name="uniform attention", reference=_uniform_scores,
        success="with your scores every query weighs the keys it may read equally, on padded "
                "reviews: the model under attnlab.uniform_attention",
        hint=("the softmax turns scores into weights; which scores give every key the same "
              "weight? The mask is applied after your function, so padding stays hidden.",
              "return a tensor of the scores' shape in which every score is the same number, "
              "such as torch.zeros_like(scores)."),
        todo="not attempted yet; write your function above and run the cell again.")


@exercise("implement", args=_example_model)
def uniform_scores(fn, model: TinyTransformer):
    """Implement: `fn(scores)` at the attention's hook_scores (after the scale, before the mask),
    run in the model on padded reviews against `attnlab.uniform_attention(model)`. Not an
    `Implement`: it judges the weights `fn` gives in the model, and its lines name no inputs.
    A grader's reviews come from its seed; `make grade` judges it in two halves (`_Uniform`)."""
    seed = grader_seed()
    cases = _ids() if seed is None else _ids(seed)

    def judge(fn):
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        for x in cases:
            problem = _uniform_problem(fn, model, x)
            if problem is not None:
                return problem
        return None

    return _uniform_checked(fn, judge)


class _Uniform:
    """`uniform_scores` in `make grade`'s two halves (`grading.split`). The verdict depends
    only on the scores the function returns for the scores the hook sees, so the grader's
    process computes those scores (from its seed), the kernel only calls the function on them
    (`calls`), and the weights the returned scores give in the model are judged here
    (`judged`), the function standing in as one that gives those scores again."""
    name = "uniform attention"

    def made(self, model: TinyTransformer, seed: int | None = None) -> list[tuple]:
        """(scores, reviews) per batch of reviews: what the hook sees on them."""
        return [(_seen(model, x)[0], x) for x in (_ids() if seed is None else _ids(seed))]

    def expected(self, made: list[tuple]) -> TinyTransformer:
        return _example_model()[0]  # the model the weights are judged in (the check's own)

    def seconds_for(self, n: int) -> float:
        return TIME_LIMIT_S * n + CHECK_WORK_S

    def calls(self, fn, made: list[tuple]):
        """The kernel's half: fn(scores) per batch, up to the first problem."""
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        done = []
        for scores, x in made:
            with torch.no_grad(), refusing(_uniform_scores):  # the check hands it back: no point
                got, problem = call_safely(fn, scores.clone())
            if problem is None and got is None:
                return none_returned(fn)
            done.append((got, (scores.clone(), x), problem, {}))
            if problem is not None:
                break
        return done

    def judged(self, done, made: list[tuple], model: TinyTransformer):
        """The grader's half: `uniform_scores`' line on the scores handed back."""
        def judge(_):
            if not isinstance(done, list):
                return done
            for (scores, x), (got, _, problem, _) in zip(made, done):
                if problem is not None:
                    return problem
                problem = _weights_problem(got, lambda s, got=got: got, model, x, scores,
                                           _seen(model, x)[1])
                if problem is not None:
                    return problem
            if len(done) < len(made):
                return "your notebook handed back fewer results than the check asked for"
            return None
        return _uniform_checked(... if done is ... else _IN_KERNEL, judge)


uniform_scores.split = _Uniform()


uniform_accuracy = Predict(
    "accuracy with uniform attention", tolerance=0.1, example=0.4775,
    lesson="This model learned to decide largely by which word reads which: with every weight "
           "uniform no word can single out another, and much of what it learned is gone. "
           "(Whether the task needs attention at all is another question: the next cells ask "
           "it.)")
