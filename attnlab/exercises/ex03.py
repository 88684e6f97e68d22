"""Notebook 03's exercises: attention received (implement), zeroing a word's column after the
softmax (implement), and how many predictions that flips (predict)."""
from __future__ import annotations

import torch

from ..probes import attention_received as _attention_received
from . import check_function, check_prediction, exercise


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


@exercise("predict", args=(0.936,))
def flips_after_zeroing(guess, measured):
    """Predict: the share of positive test reviews whose prediction flips when the decisive
    word's column is zeroed after the softmax."""
    return check_prediction(
        guess, measured, name="flips after zeroing", tolerance=0.1,
        lesson="Masking before the softmax gives the word's weight to the other tokens; zeroing "
               "after it throws the weight away. Either way no query reads the word.")
