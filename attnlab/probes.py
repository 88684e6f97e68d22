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
from .attention import MultiHeadAttention, as_bool_mask, causal_mask
from .checks import check_choice, check_int, check_tensor


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


@contextmanager
def hide_key(*modules: MultiHeadAttention, position: int, how: str = "mask") -> Iterator[None]:
    """Within the block, one key position is taken out of the given attention layers: the test
    of what the weight a token receives does (an *attention sink*: notebooks 06 and 07).

    how="mask": no query may attend to key `position` (as if it were padding), so the weight it
    received is shared out over the other keys; a query with no other key reads nothing.
    how="value": the weights stay, but the key's value vector is zero, so what a head takes from
    it is nothing. A token that receives much weight yet carries little changes nothing under
    "value" and much under "mask". `position` counts from the start of the keys (negative: from
    the end); the token stays a query either way.
    """
    for module in modules:
        if not isinstance(module, MultiHeadAttention):
            raise TypeError(f"modules must be MultiHeadAttention layers (e.g. "
                            f"model.blocks[0].self_attn), got {type(module).__name__}")
    if not modules:
        raise ValueError("hide_key needs the MultiHeadAttention layers to change")
    position = check_int("position", position)
    check_choice("how", how, ("mask", "value"))

    def mask_key(module, args, kwargs):  # MultiHeadAttention.forward(x, mask=None, context=None)
        args, kwargs = list(args), dict(kwargs)
        x = args[0] if args else kwargs["x"]
        context = args[2] if len(args) > 2 else kwargs.get("context")
        keys = torch.ones(1, (x if context is None else context).shape[1], dtype=torch.bool,
                          device=x.device)  # (1, S)   every query alike
        keys[:, position] = False
        mask = args[1] if len(args) > 1 else kwargs.get("mask")
        mask = keys if mask is None else as_bool_mask(mask) & keys  # (..., T, S)
        if len(args) > 1:
            args[1] = mask
        else:
            kwargs["mask"] = mask
        return tuple(args), kwargs

    def zero_value(module, inputs, v):  # v (B, S, H_kv * D): the values before the head split
        return v.index_fill(1, torch.tensor([position % v.shape[1]], device=v.device), 0.0)

    hooks = [m.register_forward_pre_hook(mask_key, with_kwargs=True) if how == "mask"
             else m.v.register_forward_hook(zero_value) for m in modules]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


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


@torch.no_grad()
def pointing_scores(weights: torch.Tensor, targets: torch.Tensor,
                    candidates: torch.Tensor) -> dict:
    """How strongly each head points at the keys a query needs, against an even spread.

    weights (B, H, T, S); targets (B, T, S) bool: the keys each query should read (several when
    the needed token occurs more than once); candidates (B, T, S) bool: the keys it chooses
    among, targets included. Only queries with at least one target count. Returns per head (H,):
    `times_even`: the weight on the targets as a share of the weight on the candidates, divided
    by the share an even spread over the candidates would give them (1.0 = no preference);
    `hit_rate`: how often the candidate with the most weight is a target; and `base_rate`, a
    float: the hit rate of a head that picks a random candidate. An average heatmap cannot show
    this when the needed key sits at another position in every sequence.
    """
    check_tensor("weights", weights, min_dim=4)
    B, H, T, S = weights.shape
    for name, t in (("targets", targets), ("candidates", candidates)):
        check_tensor(name, t)
        if t.shape != (B, T, S) or t.dtype != torch.bool:
            raise ValueError(f"{name} must be a bool tensor of shape (B, T, S) = {(B, T, S)}, "
                             f"got {t.dtype} of shape {tuple(t.shape)}")
    targets = targets & candidates
    used = targets.any(-1)  # (B, T)   queries that need something
    if not bool(used.any()):
        raise ValueError("targets hold no key at all: no query to score")
    tgt, cand = targets[:, None].to(weights.dtype), candidates[:, None].to(weights.dtype)
    share = (weights * tgt).sum(-1) / (weights * cand).sum(-1).clamp(min=1e-300)  # (B, H, T)
    even = tgt.sum(-1) / cand.sum(-1).clamp(min=1.0)  # (B, 1, T)   what an even spread gives
    top = (weights * cand - 2.0 * (1.0 - cand)).argmax(-1, keepdim=True)  # (B, H, T, 1)
    hit = tgt.expand(B, H, T, S).gather(-1, top)[..., 0]  # (B, H, T)   1.0: a target
    keep = used[:, None]  # (B, 1, T)
    n = used.sum().to(weights.dtype)
    ratio = torch.where(keep, share / even.clamp(min=1e-300), 0.0)  # (B, H, T)
    return {"times_even": ratio.sum((0, 2)) / n,
            "hit_rate": torch.where(keep, hit, 0.0).sum((0, 2)) / n,
            "base_rate": float(torch.where(keep, even, 0.0).sum() / n)}


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
