"""Measures: scores of attention weights, each against what a head without a preference would
score (the uniform level, and a random token as base rate).

Every function here reads weight maps (from `hooks.attention_maps`) and returns numbers per
head: how strongly a head reads a known token (`target_scores`, `target_roles`), points at the
keys a query needs (`pointing_scores`), looks ahead (`future_share`), reverses
(`alignment_share`), reads the previous token (`previous_token_score`) or copies what followed
the last occurrence (`induction_score`). They are plain tensor maths that know no lesson's task,
so lessons and the pre-trained models alike use them. A heatmap survives them only after
`interventions.uniform_attention` has shown that the model needs its attention at all.
"""
from __future__ import annotations

import torch

from ..plumbing.checks import check_tensor
from .attention import causal_mask


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


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """How much each head reads the token right before the query: the mean weight query t
    puts on key t - 1, over the queries t >= 1 and the batch. weights (B, H, T, T) -> (H,).

    A head that always reads the previous token scores 1; uniform causal attention scores the
    mean of 1 / (t + 1) (the same function of uniform maps gives that level).
    """
    check_tensor("weights", weights, min_dim=4)
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, -1))  # (H,)   w[t, t - 1]


def previous_occurrence(tokens: torch.Tensor) -> torch.Tensor:
    """For each position t, the last position s < t holding the same token, or -1 if the token
    is new there. tokens (B, T) -> (B, T) int64."""
    check_tensor("tokens", tokens, min_dim=2)
    T = tokens.shape[-1]
    pos = torch.arange(T, device=tokens.device)  # (T,)
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T)   [b, t, s]: same token
    earlier = same & (pos[None, :] < pos[:, None])  # (B, T, T)   ... and s < t
    return torch.where(earlier, pos, -1).amax(-1)  # (B, T)   the latest match, -1: none


def induction_score(weights: torch.Tensor, tokens: torch.Tensor,
                    queries: torch.Tensor | None = None) -> torch.Tensor:
    """How much each head reads the token AFTER the previous occurrence of the query's token
    (what an induction head copies): the mean weight query t puts on key s + 1, s being the
    last position before t with the same token, over the queries that have one (and, with
    `queries` (B, T) bool, are True there) and the batch. weights (B, H, T, T), tokens (B, T)
    -> (H,). Not key s (the previous occurrence itself), not key t - 1 (`previous_token_score`).
    """
    check_tensor("weights", weights, min_dim=4)
    B, H, T, _ = weights.shape
    if tokens.shape != (B, T) or (queries is not None and queries.shape != (B, T)):
        raise ValueError(f"tokens and queries must be (B, T) = {(B, T)} like the weights "
                         f"{tuple(weights.shape)}, got {tuple(tokens.shape)} and "
                         f"{None if queries is None else tuple(queries.shape)}")
    last = previous_occurrence(tokens)  # (B, T)
    counted = last >= 0 if queries is None else (last >= 0) & queries  # (B, T)
    after = (last + 1).clamp(min=0)  # (B, T)   key s + 1 (0 where there is none: not counted)
    on_after = weights.gather(-1, after[:, None, :, None].expand(B, H, T, 1))[..., 0]  # (B, H, T)
    return (on_after * counted[:, None].to(weights.dtype)).sum((0, 2)) / counted.sum()  # (H,)


@torch.no_grad()
def target_roles(weights: torch.Tensor, target: torch.Tensor) -> dict:
    """Is one known token (the odd image of a set) what the others attend to, or what keeps its
    attention to itself? Scores per head, each against uniform attention.

    weights (B, H, T, T) self-attention without padding, target (B,) the token's index.
    Returns per head (H,):
    `from_others`: the mean weight the other T - 1 queries give the target (its column without
    its own entry), times T: 1.0 is what uniform attention gives, 2.0 twice that;
    `hit_rate`: how often the target is the key that receives the most from the other queries
    (each key's column without its own entry), against `base_rate` = 1 / T, a random key's;
    `on_itself`: the target's weight on itself (its row's diagonal entry), times T;
    `others_on_themselves`: the same for the other tokens, averaged, times T.
    """
    check_tensor("weights", weights, min_dim=4)
    B, H, T, S = weights.shape[-4:]
    if weights.dim() != 4 or T != S or T < 2 or target.shape != (B,):
        raise ValueError(f"weights must be (B, H, T, T) self-attention over T >= 2 tokens and "
                         f"target (B,), got {tuple(weights.shape)} and {tuple(target.shape)}")
    rows = torch.arange(B, device=weights.device)
    own = weights.diagonal(dim1=-2, dim2=-1)                       # (B, H, T) w[i, i]
    received = (weights.sum(-2) - own) / (T - 1)                   # (B, H, T) from the others
    is_target = torch.zeros(B, T, dtype=torch.bool, device=weights.device)
    is_target[rows, target] = True
    others_own = (own * ~is_target[:, None]).sum(-1) / (T - 1)     # (B, H)
    hits = (received.argmax(-1) == target[:, None]).to(weights.dtype)  # (B, H)
    return {"from_others": (received[rows, :, target] * T).mean(0),
            "hit_rate": hits.mean(0), "base_rate": 1.0 / T,
            "on_itself": (own[rows, :, target] * T).mean(0),
            "others_on_themselves": (others_own * T).mean(0)}
