"""Probes: measurements of attention weights, and the ablation every heatmap must survive.

A heatmap shows where weight goes, not whether the model needs it. `uniform_attention(model)`
answers that first: under it every query gives each key its mask allows the same weight, so a
model that still predicts as well never needed its attention. The scores below then say where
the weight goes, each against what a head without a preference would score (the uniform level,
and a random token as base rate).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .attention import MultiHeadAttention, causal_mask
from .checks import check_choice, check_int, check_tensor
from .hooks import hooked


def attention_layers(*modules: nn.Module) -> list[MultiHeadAttention]:
    """Every MultiHeadAttention in `modules` (a model, a block, or attention layers)."""
    if not modules:
        raise TypeError("name the model (or its attention layers) to change, e.g. "
                        "uniform_attention(model)")
    layers = []
    for module in modules:
        if not isinstance(module, nn.Module):
            raise TypeError(f"modules must be models or MultiHeadAttention layers, got "
                            f"{type(module).__name__}")
        layers += [m for m in module.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise TypeError(f"no MultiHeadAttention layer in "
                        f"{', '.join(type(m).__name__ for m in modules)}")
    return layers


def _heads(layers: list[MultiHeadAttention], heads: Sequence[int] | None) -> tuple[int, ...]:
    if heads is None:
        return ()
    heads = tuple(int(h) for h in heads)
    bad = [h for h in heads for m in layers if not 0 <= h < m.n_heads]
    if bad:
        raise ValueError(f"heads must be in 0..{min(m.n_heads for m in layers) - 1} (each "
                         f"layer's heads), got {sorted(set(bad))}")
    return heads


def uniform_attention(model: nn.Module, *more: nn.Module, heads: Sequence[int] | None = None):
    """Within the block, attention gives each query the uniform weight over the keys its mask
    allows (1/3 each if a query may read 3 keys); nothing else changes.

    `model`, and any `more`: models (every MultiHeadAttention in them) or attention layers; with
    `heads`, only those heads of them (an ablation of one head). Every score of a chosen head is
    made 0 before the mask, so masks keep their meaning.
    """
    layers = attention_layers(model, *more)
    chosen = _heads(layers, heads)

    def equal(scores):  # (B, H, T, S) -> 0 for the chosen heads (every head without `heads`)
        if heads is None:
            return torch.zeros_like(scores)
        return scores.index_fill(1, torch.tensor(chosen, dtype=torch.long,
                                                 device=scores.device), 0.0)

    return hooked(*((layer.hook_scores, equal) for layer in layers))


def hide_key(*modules: nn.Module, position: int | None = None, keys: torch.Tensor | None = None,
             how: str = "mask"):
    """Within the block, one key position (or the keys marked in `keys`) is taken out of the
    given attention layers: the test of what the weight a token receives does (an *attention
    sink*: notebooks 06, 07 and 10).

    how="mask": no query may attend to the key (as if it were padding), so the weight it
    received is shared out over the other keys; a query with no other key reads nothing.
    how="value": the weights stay, but the key's value vector is zero, so what a head takes from
    it is nothing. A token that receives much weight yet carries little changes nothing under
    "value" and much under "mask". `position` counts from the start of the keys (negative: from
    the end), the same in every sequence; `keys` (B, S) bool marks the keys to hide per sequence
    (True: hidden) instead. The token stays a query either way.
    """
    layers = attention_layers(*modules)
    if (position is None) == (keys is None):
        raise TypeError("give position (one key, the same in every sequence) or keys ((B, S) "
                        "bool, True = hidden), one of the two")
    if keys is None:
        position = check_int("position", position)
    check_choice("how", how, ("mask", "value"))

    def hidden(B: int, S: int, device) -> torch.Tensor:  # (B, S) or (1, S) bool, True = hidden
        if keys is not None:
            return keys.to(device)
        one = torch.zeros(1, S, dtype=torch.bool, device=device)
        one[0, position % S] = True
        return one

    def hide(mask):  # (..., T, S) bool
        return mask & ~hidden(1, mask.shape[-1], mask.device)[:, None, None, :]  # (B, 1, 1, S)

    def zero_value(v):  # (B, H_kv, S, D)
        return v.masked_fill(hidden(v.shape[0], v.shape[2], v.device)[:, None, :, None], 0.0)

    if how == "mask":
        return hooked(*((layer.hook_mask, hide) for layer in layers))
    return hooked(*((layer.hook_values, zero_value) for layer in layers))


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


def zero_heads(module: MultiHeadAttention, heads: Sequence[int]):
    """Within the block, the given heads of `module` add nothing: their outputs are zeroed
    before `out` mixes the heads. The other ablation of one head beside
    `uniform_attention(module, heads=...)`, which keeps the head's output but takes away where
    it looks."""
    if not isinstance(module, MultiHeadAttention):
        raise TypeError(f"module must be a MultiHeadAttention layer (e.g. "
                        f"model.layers[0].attn), got {type(module).__name__}")
    heads = _heads([module], heads)

    def zero(out):  # (B, H, T, D): each head's output
        keep = torch.ones(module.n_heads, 1, 1, dtype=out.dtype, device=out.device)  # (H, 1, 1)
        keep[list(heads)] = 0.0
        return out * keep

    return hooked((module.hook_heads, zero))


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
