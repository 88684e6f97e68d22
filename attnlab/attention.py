"""Attention, written out: the one implementation every notebook and model in attnlab uses.

Everything here is plain tensor algebra so a student can read each line against the equation
beside it. The tests check each piece against PyTorch's own implementation.
"""
from __future__ import annotations

import math

import torch
from torch import nn


def _check_tensor(name: str, x, min_dim: int = 2) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions (..., T, d), got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def as_bool_mask(mask, name: str = "mask") -> torch.Tensor:
    """Turn a mask given as bool or as 0/1 numbers into a bool tensor (True = may attend).

    Additive masks (0 / -inf) are refused on purpose: reading -inf as "true" would silently
    attend to exactly the positions the caller meant to hide.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of bool or 0/1 values, got {type(mask).__name__}")
    if mask.dtype == torch.bool:
        return mask
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(
            f"{name} must hold only True/False or 0/1 (1 = may attend); got other values "
            f"(an additive -inf mask? pass `{name} == 0` instead)"
        )
    return mask != 0


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """softmax over the last dimension: exp(s - max) / sum(exp(s - max)).

    Rows shorter than 16 take the written-out form. PyTorch's CPU kernel is several times slower
    on them (torch 2.13, one thread, (32, 12, 12, 12) scores: 0.95 ms against 0.18 ms), and the
    short sentences of this series live there; from 16 keys on its kernel is the faster one.
    """
    if scores.shape[-1] < 16 and scores.device.type == "cpu":
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # subtract the max: no overflow
        return e / e.sum(dim=-1, keepdim=True)
    return torch.softmax(scores, dim=-1)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale: float | None = None):
    """softmax(q kᵀ / sqrt(d_k)) v, returning the output and the attention weights.

    Shapes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); the leading dimensions
    broadcast. `mask` broadcasts to (..., T_q, T_k); True (or 1) means "may attend".
    `scale` defaults to 1/sqrt(d_k); notebook 02 passes scale=1.0 to show what goes wrong.

    A query whose every key is masked has nothing to attend to: its weights are all 0 and its
    output is the zero vector (not NaN, which would poison every later layer and the loss).
    """
    _check_tensor("q", q)
    _check_tensor("k", k)
    _check_tensor("v", v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share the last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys T_k (dimension -2), "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch/head) dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
            f"v {tuple(v.shape)} do not broadcast"
        ) from None
    d_k = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)

    # In place on the fresh product: one T×T buffer instead of two (this is the O(T²) memory).
    scores = (q @ k.transpose(-2, -1)).mul_(scale)  # (..., T_q, T_k)   q·k / sqrt(d_k)

    if mask is not None:
        mask = as_bool_mask(mask)
        expected = (*batch, q.shape[-2], k.shape[-2])
        try:
            full = torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            full = None
        if full != scores.shape:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                f"{expected} (..., T_q, T_k)"
            )
        # The most negative finite number, not -inf: exp(min - row max) underflows to exactly 0
        # for a masked key, and a fully masked row gets a finite (uniform) softmax instead of NaN.
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)

    weights = softmax(scores)  # (..., T_q, T_k)   each row sums to 1
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)  # (..., T_q or 1, 1)   queries with no key at all
        if empty.any():
            weights = weights.masked_fill(empty, 0.0)  # nothing to attend to: all weights 0
    output = weights @ v  # (..., T_q, d_v)   weighted average of the values
    return output, weights


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with separate q, k, v and out projections.

    The input is projected to n_heads smaller spaces of size d_model / n_heads, each head attends
    on its own, and `out` mixes the concatenated heads back to d_model.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if d_model % n_heads:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by n_heads ({n_heads}) so each head "
                f"gets d_model / n_heads dimensions"
            )
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.k = nn.Linear(d_model, d_model, bias=bias)
        self.v = nn.Linear(d_model, d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """x (B, T, d_model); mask broadcastable to (B, n_heads, T, T), True = may attend
        (a padding mask over keys is `keep[:, None, None, :]`). Returns the output (B, T, d_model)
        and the weights (B, n_heads, T, T)."""
        _check_tensor("x", x, min_dim=3)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        B, T, _ = x.shape
        H, D = self.n_heads, self.d_head

        def split(t):  # (B, T, d_model) -> (B, H, T, D)
            return t.view(B, T, H, D).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # (B, H, T, D) each
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, D), (B, H, T, T)
        concat = heads.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, H*D)
        return self.out(concat), weights  # (B, T, d_model), (B, H, T, T)


class EncoderBlock(nn.Module):
    """One post-norm Transformer encoder block, as in "Attention Is All You Need":

        x = LayerNorm(x + MultiHeadAttention(x))
        x = LayerNorm(x + FeedForward(x))

    `activation` is "relu" (the paper) or "gelu" (BERT, exact erf form); `norm_eps` is 1e-12 in
    BERT-family checkpoints.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu", norm_eps: float = 1e-5):
        super().__init__()
        if not isinstance(d_ff, int) or isinstance(d_ff, bool) or d_ff < 1:
            raise ValueError(f"d_ff must be a positive integer, got {d_ff!r}")
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff),
            nn.ReLU() if activation == "relu" else nn.GELU(),
            nn.Linear(d_ff, d_model),
        )
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """x (B, T, d_model) -> (B, T, d_model), plus the attention weights (B, H, T, T)."""
        a, weights = self.attn(x, mask)  # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x + self.dropout(a))  # residual, then norm (post-norm)
        x = self.norm2(x + self.dropout(self.ff(x)))  # (B, T, d_model)
        return x, weights


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(max_len, d_model)  # (T, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return table


class PositionalEncoding(nn.Module):
    """Adds position information to token embeddings: `kind` is "learned" (an embedding per
    position, as in BERT) or "sinusoidal" (the fixed table of the original paper).

    Without it self-attention is permutation-equivariant: it cannot tell word order.
    """

    def __init__(self, d_model: int, max_len: int = 512, kind: str = "sinusoidal"):
        super().__init__()
        if kind not in ("learned", "sinusoidal"):
            raise ValueError(f"kind must be 'learned' or 'sinusoidal', got {kind!r}")
        self.kind, self.max_len = kind, max_len
        if kind == "learned":
            self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)  # (max_len, d_model)
        else:
            self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, d_model) -> x + PE[:T]."""
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(
                f"sequence length {T} exceeds max_len={self.max_len} of this positional encoding"
            )
        return x + self.table[:T]  # (B, T, d_model)
