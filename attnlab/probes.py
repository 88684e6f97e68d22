"""Probes: measurements of attention weights, and the ablation every heatmap must survive.

A heatmap shows where weight goes, not whether the model needs it. `uniform_attention()`
answers that first: under it every query gives each key its mask allows the same weight, so a
model that still predicts as well never needed its attention. The scores below then say where
the weight goes, each against what a head without a preference would score (the uniform level,
and a random token as base rate).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from . import attention
from .attention import MultiHeadAttention, causal_mask
from .checks import check_tensor


@contextmanager
def uniform_attention(*modules: MultiHeadAttention,
                      heads: Sequence[int] | None = None) -> Iterator[None]:
    """Within the block, attention gives each query the uniform weight over the keys its mask
    allows (1/3 each if a query may read 3 keys); nothing else changes.

    No arguments: every attention in attnlab. With `MultiHeadAttention` modules: those only,
    and with `heads` only those heads of them (an ablation of one head). It works by making
    every score equal (a query of zeros), so masks keep their meaning.
    """
    for module in modules:
        if not isinstance(module, MultiHeadAttention):
            raise TypeError(f"modules must be MultiHeadAttention layers (e.g. "
                            f"model.blocks[0].attn), got {type(module).__name__}")
    if heads is not None:
        if not modules:
            raise ValueError("heads needs the MultiHeadAttention modules they belong to")
        heads = tuple(int(h) for h in heads)
        bad = [h for h in heads for m in modules if not 0 <= h < m.n_heads]
        if bad:
            raise ValueError(f"heads must be in 0..n_heads-1, got {sorted(set(bad))}")
    previous = attention._uniform, [m.uniform_heads for m in modules]
    try:
        if not modules:
            attention._uniform = True
        for m in modules:
            m.uniform_heads = tuple(range(m.n_heads)) if heads is None else heads
        yield
    finally:
        attention._uniform = previous[0]
        for m, before in zip(modules, previous[1]):
            m.uniform_heads = before


def attention_received(weights: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """How much attention each token receives: for every key, the mean over the real query
    tokens of its weight (a column mean of each weight matrix, padding rows left out).

    weights (B, H, T, T), real (B, T) bool (True = a real token, not padding) -> (B, H, T).
    """
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)   1 = a real query
    n_real = queries.sum(-2).clamp(min=1.0)  # (B, 1, 1)
    return (weights * queries).sum(-2) / n_real  # (B, H, T)


@torch.no_grad()
def target_scores(weights: torch.Tensor, real: torch.Tensor, target: torch.Tensor) -> dict:
    """How strongly each head reads one known token per sequence (the decisive word), against
    what a head without a preference would score.

    weights (B, H, T, T), real (B, T) bool, target (B,) the token's index. Returns per head (H,):
    `weight`: the mean weight the real queries give the target; `times_uniform`: that weight
    times the number of real tokens, averaged (1.0 = uniform attention, 2.0 = twice it);
    `hit_rate`: how often the target is the token that receives the most; and `base_rate`, a
    float: the hit rate of a head that picks a random real token (the mean of 1/length).
    """
    check_tensor("weights", weights, min_dim=4)
    B = weights.shape[0]
    if real.shape != (B, weights.shape[-1]) or target.shape != (B,):
        raise ValueError(f"real must be (B, T) = {(B, weights.shape[-1])} and target (B,) = "
                         f"({B},), got {tuple(real.shape)} and {tuple(target.shape)}")
    received = attention_received(weights, real)  # (B, H, T)
    rows = torch.arange(B, device=weights.device)
    on_target = received[rows, :, target]  # (B, H)
    n_real = real.sum(1).to(weights.dtype)  # (B,)
    return {"weight": on_target.mean(0),
            "times_uniform": (on_target * n_real[:, None]).mean(0),
            "hit_rate": (received.argmax(-1) == target[:, None]).to(weights.dtype).mean(0),
            "base_rate": float((1.0 / n_real).mean())}


def future_share(weights: torch.Tensor) -> float:
    """Mean share of each query's attention on keys after it, for weights (..., T, T)."""
    T = weights.shape[-1]
    future = ~causal_mask(T, device=weights.device)  # (T, T)   True above the diagonal
    return float((weights * future).sum(-1).mean())


def alignment_share(cross_weights: torch.Tensor) -> float:
    """Mean cross-attention weight that target step i puts on source position S - 1 - i (the
    digit it must write when reversing), for weights (..., T, S) with T = S."""
    check_tensor("cross_weights", cross_weights, min_dim=2)
    T, S = cross_weights.shape[-2:]
    if T != S:
        raise ValueError(f"cross_weights must be square in its last two dimensions (T = S), "
                         f"got shape {tuple(cross_weights.shape)}")
    steps = torch.arange(T, device=cross_weights.device)
    return float(cross_weights[..., steps, S - 1 - steps].mean())
