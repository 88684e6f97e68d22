"""Interventions: what changes inside attention while a block runs, to test what a heatmap
claims.

A heatmap shows where weight goes, not whether the model needs it. `uniform_attention(model)`
answers that first: under it every query gives each key its mask allows the same weight, so a
model that still predicts as well never needed its attention. `hide_key` takes one key out
(an attention sink's test) and `zero_heads` silences heads. Each is a context manager over the
hook points of `MultiHeadAttention` (`hooks.hooked`); `measures` then says where the weight goes.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..plumbing.checks import check_choice, check_int
from .attention import MultiHeadAttention
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
    sink*: notebooks 07, 08 and 11).

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
