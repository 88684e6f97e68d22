"""Notebook 03's exercises: the encoder block written out (implement), the accuracy left under
uniform attention (predict), attention received (implement), zeroing a word's column after the
softmax (implement), and the accuracy that leaves (predict)."""
from __future__ import annotations

import torch

from ..data import Vocab, make_contrast_reviews
from ..models import TinyTransformer
from ..probes import attention_received as _attention_received
from . import check_function, check_prediction, exercise, result_problem


def _ids(seed: int = 5) -> list[tuple[torch.Tensor]]:
    """Token-id batches of contrast reviews, padded (reviews of 5 to 15 words)."""
    vocab = Vocab.for_reviews()
    return [(make_contrast_reviews(n, seed=seed + n).tensors(vocab)[0],) for n in (3, 8)]


def _variants(model: TinyTransformer, x: torch.Tensor) -> dict[str, tuple]:
    """The classic wrong blocks, as (states, weights), to name the one a student wrote."""
    block, h = model.blocks[0], model.embed(x)
    keys = (x != model.pad_id)[:, None, None, :]  # (B, 1, 1, T)
    queries = (x != model.pad_id)[:, None, :, None]  # (B, 1, T, 1)   the wrong side

    def post(mask, residual=True):
        a, w = block.attn(h, mask)
        h1 = block.norm1(h + a if residual else a)
        return block.norm2(h1 + block.ff(h1) if residual else block.ff(h1)), w

    a, w = block.attn(block.norm1(h), keys)
    pre = h + a
    return {"the padding mask is missing: every query also reads the PAD tokens": post(None),
            "the padding mask is on the query side: it must hide PAD as a key, the last axis of "
            "the weights": post(queries),
            "the residual connections are missing: add the part's input back before the "
            "LayerNorm": post(keys, residual=False),
            "this is pre-norm (LayerNorm before each part); this block is post-norm: add first, "
            "then normalise the sum": (pre + block.ff(block.norm2(pre)), w)}


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
            hint=("five lines in the order of the two equations: the mask, the embedding, "
                  "attention, then each residual with its LayerNorm.",
                  "the mask must broadcast to the weights (B, H, T, T) and say for every key "
                  "whether it is real; post-norm adds the part's output to its input first and "
                  "normalises the sum."))


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


@exercise("implement")
def attention_received(fn):
    """Implement: for every key, the mean over the real queries of the weight it receives."""
    return check_function(
        fn, _attention_received, _batches(), name="attention_received",
        hint="a key's column holds the weights it receives; average that column over the real "
             "queries only (padding queries attend too), i.e. mask the query axis (dim -2), sum "
             "over it and divide by the number of real tokens.")


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


@exercise("implement")
def zero_column(fn):
    """Implement: zero the decisive word's column after the softmax (no renormalising)."""
    return check_function(
        fn, _zero_column, _columns(), name="zero_column",
        hint="review b's word is key pos[b]: its column is weights[b, :, :, pos[b]] (every head, "
             "every query). Set it to 0 and leave every other weight as it is: no rescaling, "
             "and the rows are keys' weights per query, so do not zero a row.")


@exercise("predict", args=(0.61,))
def zeroed_accuracy(guess, measured):
    """Predict: the test accuracy left when the first sentiment word's column is zeroed after
    the softmax (hiding it before the softmax was measured just before)."""
    return check_prediction(
        guess, measured, name="accuracy with the first word zeroed", tolerance=0.1,
        lesson="Masking before the softmax gives the word's weight to the other tokens; zeroing "
               "after it throws the weight away. For a word whose value carries what the model "
               "needs, either way no query gets it.")
