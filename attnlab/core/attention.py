"""Attention, written out: the one implementation every notebook and model in attnlab uses,
in plain tensor algebra a student can read against its equation. What it accepts is checked in
`attention_args`, where it can be intervened on in `hooks`; the tests check it against
PyTorch's own (`F.scaled_dot_product_attention`, `nn.MultiheadAttention`, `enable_gqa=True`).

`scaled_dot_product_attention` is softmax(q kᵀ / √d_k) v; `causal_mask` the mask of every
decoder; `split_heads` / `merge_heads` (B, T, H·D) <-> (B, H, T, D); `MultiHeadAttention` the
projections, heads (grouped-query with fewer key/value heads), attention and output projection,
in two halves, `project` and `attend`, which the KV cache calls one token at a time.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..plumbing.checks import check_int
from .attention_args import check_attention_args, check_attention_inputs, check_attention_sizes
from .hooks import HOOK_POINTS, HookPoint
from .rope import rotary


def scaled_dot_product_attention(q, k, v, mask=None, *, scale: float | None = None):
    """softmax(q kᵀ / sqrt(d_k)) v, returning the output and the attention weights.

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), leading dimensions broadcast;
    `mask` broadcasts to (..., T_q, T_k), True (or 1) = may attend. `scale` defaults to
    1/sqrt(d_k). A query whose every key is masked reads nothing: its weights and output are 0.
    """
    return _attention(q, k, v, check_attention_args(q, k, v, mask), scale)


def _attention(q, k, v, mask: torch.Tensor | None, scale: float | None,
               scores_hook=None, weights_hook=None):
    """The maths of `scaled_dot_product_attention`, unchecked (mask bool or None), with hooks on
    the scores (before the mask) and the weights: what `MultiHeadAttention` calls."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T_q, T_k)   q·k / sqrt(d_k)
    if scores_hook is not None:
        scores = scores_hook(scores)
    if mask is not None:
        # The most negative finite number, not -inf: exp(min - row max) is exactly 0 for a
        # masked key, and a row with every key masked stays finite instead of NaN.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)   each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # rows with no key: 0
    if weights_hook is not None:
        weights = weights_hook(weights)
    output = weights @ v  # (..., T_q, d_v)   weighted average of the values
    return output, weights


def causal_mask(T: int, device=None) -> torch.Tensor:
    """The mask of every decoder, (T, T) bool: query i may attend to keys 0..i (itself and the
    past), never to a later one."""
    T = check_int("T", T, minimum=1)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)   mask[i, j] = j <= i


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, n_heads·D) -> (B, n_heads, T, D): each head gets its own D numbers of each token
    (a reshape straight to (B, H, T, D), without the transpose, would mix tokens and heads)."""
    B, T, d = x.shape
    return x.view(B, T, n_heads, d // n_heads).transpose(1, 2)  # (B, H, T, D)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, D) -> (B, T, H·D): the heads' outputs side by side again."""
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: q, k and v projected into n_heads spaces of d_model / n_heads, each
    head attending on its own, `out` mixing the heads back to d_model. Self-attention, or with a
    `context` cross-attention (keys and values from the context).

    `n_kv_heads` < n_heads is grouped-query attention: each key/value head serves n_heads /
    n_kv_heads query heads (1: multi-query), and a KV cache stores that many times fewer numbers.
    `rotary=True` rotates q and k by their positions (`rope.rotary`, base `rotary_base`: 10,000
    as in RoFormer, SmolLM2 100,000); `scale` replaces 1/√d_head (notebook 02 trains with 1.0).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 rotary: bool = False, bias: bool = True, scale: float | None = None,
                 rotary_base: float = 10000.0):
        super().__init__()
        d_model, n_heads, n_kv_heads, scale, rotary_base = check_attention_sizes(
            d_model, n_heads, n_kv_heads, rotary, bias, scale, rotary_base)
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.n_kv_heads, self.rotary, self.scale, self.rotary_base = (n_kv_heads, rotary, scale,
                                                                      rotary_base)
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.k = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        for point in HOOK_POINTS:  # not submodules: no weights, and a printed model stays short
            object.__setattr__(self, f"hook_{point}", HookPoint(point))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                context: torch.Tensor | None = None):
        """x (B, T, d_model), context (B, S, d_model) or None (S = T), a mask that broadcasts to
        (B, n_heads, T, S) (padding: `real[:, None, None, :]`; `causal_mask(T)`) -> the output
        (B, T, d_model) and the weights (B, n_heads, T, S)."""
        mask = check_attention_inputs(x, mask, context, self.d_model, self.n_heads)
        q, k, v = self.project(x, context)  # (B, H, T, D), (B, H_kv, S, D), (B, H_kv, S, D)
        return self.attend(q, k, v, mask)

    def project(self, x: torch.Tensor, context: torch.Tensor | None = None,
                positions: torch.Tensor | None = None):
        """The heads' queries (B, H, T, D), keys and values (B, H_kv, S, D); with `rotary`, q and
        k rotated by their positions, 0..T-1 or `positions` (T,) (one decoding step)."""
        source = x if context is None else context  # where the keys and values come from
        q = split_heads(self.q(x), self.n_heads)  # (B, H, T, D)
        k = split_heads(self.k(source), self.n_kv_heads)  # (B, H_kv, S, D)
        v = split_heads(self.v(source), self.n_kv_heads)  # (B, H_kv, S, D)
        if self.rotary:  # position enters here, nowhere else
            q, k = rotary(q, positions, self.rotary_base), rotary(k, positions, self.rotary_base)
        return q, k, v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None = None):
        """q, k, v as `project` makes them and a bool mask or None (unchecked: `forward`, the KV
        cache and `LlamaBlock` make them) -> the output (B, T, d_model), weights (B, H, T, S)."""
        B, H, T, D = q.shape
        H_kv, S = self.n_kv_heads, k.shape[-2]
        G = H // H_kv  # query heads per key/value head
        v = self.hook_values(v)  # (B, H_kv, S, D)
        if self.hook_mask.hooked:  # a mask to change, also where there was none: (..., T, S)
            mask = self.hook_mask(torch.ones(1, S, dtype=torch.bool, device=q.device)
                                  if mask is None else mask.expand(*mask.shape[:-1], S))
        q = q.reshape(B, H_kv, G * T, D)  # (B, H_kv, G·T, D)   a group's queries, one matrix
        if mask is not None:
            if mask.dim() >= 3 and mask.shape[-3] == H:
                mask = mask.unflatten(-3, (H_kv, G))  # (..., H_kv, G, T, S)
            else:
                mask = mask.unsqueeze(-3)  # (..., 1, T, S): the same for every head of a group
            mask = mask.expand(*mask.shape[:-3], G, T, S).flatten(-3, -2)  # (..., G·T, S)
        def per_head(point):  # a hook sees (B, H, T, S); unhooked, not even a view is made
            return (lambda x: point(x.view(B, H, T, S)).reshape(B, H_kv, G * T, S)) \
                if point.hooked else None
        heads, weights = _attention(q, k, v, mask, self.scale, per_head(self.hook_scores),
                                    per_head(self.hook_weights))  # (B, H_kv, G·T, D), (.., S)
        heads = self.hook_heads(heads.view(B, H, T, D))  # (B, H, T, D)   each head's output
        out = self.out(merge_heads(heads))  # (B, T, d_model)
        return out, weights.view(B, H, T, S)  # (B, T, d_model), (B, H, T, S)
