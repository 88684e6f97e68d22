"""Attention, written out: the one implementation every notebook and model in attnlab uses.

Everything here is plain tensor algebra so a student can read each line against the equation
beside it. The argument checks and the one speed trick live in helpers beside the maths. The
tests check each piece against PyTorch's own implementation.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .checks import check_bool, check_choice, check_int, check_number, check_tensor

# Rows of scores with fewer keys than this take the written-out softmax (see `softmax` for the
# measurement); `attnlab.data.TENSOR_WIDTH` pads the reviews to it so training takes the kernel.
SHORT_ROW = 16


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """softmax over the last dimension: exp(s - max) / sum(exp(s - max)).

    Rows shorter than SHORT_ROW = 16 keys take this written-out form, because PyTorch's CPU
    kernel works on SIMD vectors of floats (8 with AVX2, 16 with AVX-512) and a row shorter than
    one vector falls to a path several times slower. Measured with torch 2.13, one thread,
    (32, 12, T, T) float32 scores, best of 200 runs, on an AVX2 CPU:

        keys T          7      8     12     15     16
        torch.softmax  0.34   0.06   0.18   0.23   0.16 ms
        written out    0.10   0.11   0.22   0.33   0.31 ms

    On an AVX-512 CPU the same cliff sits at 16 keys (an earlier measurement there, same setup:
    0.95 ms for the kernel against 0.18 ms written out at T = 12), hence one threshold of 16 for
    every CPU; on AVX2 the rows of 8 to 15 keys pay up to 1.8× for it, a fraction of a
    millisecond. Padding the reviews' rows of at most 15 keys to 16 (`attnlab.data.TENSOR_WIDTH`)
    halves their softmax time.
    """
    if scores.shape[-1] < SHORT_ROW and scores.device.type == "cpu":
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # subtract the max: no overflow
        return e / e.sum(dim=-1, keepdim=True)
    return torch.softmax(scores, dim=-1)


def as_bool_mask(mask, name: str = "mask") -> torch.Tensor:
    """Turn a mask given as bool or as 0/1 numbers into a bool tensor (True = may attend).

    Additive masks (0 / -inf) are refused on purpose: reading -inf as "true" would silently
    attend to exactly the positions the caller meant to hide.
    """
    check_tensor(name, mask)
    if mask.dtype == torch.bool:
        return mask
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(
            f"{name} must hold only True/False or 0/1 (1 = may attend); got other values "
            f"(an additive -inf mask? pass `{name} == 0` instead)"
        )
    return mask != 0


def check_attention_args(q, k, v, mask=None) -> torch.Tensor | None:
    """The argument checks of `scaled_dot_product_attention`; returns the mask as bool (or None).

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) with broadcastable leading
    dimensions, and a mask that broadcasts to the scores (..., T_q, T_k).
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, min_dim=2, floating=True)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dimension d_k, got q {tuple(q.shape)} "
                         f"and k {tuple(k.shape)}")
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
    if mask is None:
        return None
    mask = as_bool_mask(mask)
    scores = (*batch, q.shape[-2], k.shape[-2])  # (..., T_q, T_k)
    try:
        full = torch.broadcast_shapes(mask.shape, scores)
    except RuntimeError:
        full = None
    if full != scores:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' "
                         f"shape {scores} (..., T_q, T_k)")
    return mask


def scaled_dot_product_attention(q, k, v, mask=None, *, scale: float | None = None):
    """softmax(q kᵀ / sqrt(d_k)) v, returning the output and the attention weights.

    Shapes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); the leading dimensions
    broadcast. `mask` broadcasts to (..., T_q, T_k); True (or 1) means "may attend".
    `scale` defaults to 1/sqrt(d_k); notebook 02 passes scale=1.0 to show what goes wrong.
    A query whose every key is masked gets all-zero weights and a zero output (`zero_empty_rows`).
    """
    mask = check_attention_args(q, k, v, mask)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])

    # In place on the fresh product: one T×T buffer instead of two (this is the O(T²) memory).
    scores = (q @ k.transpose(-2, -1)).mul_(scale)  # (..., T_q, T_k)   q·k / sqrt(d_k)
    if mask is not None:
        # The most negative finite number, not -inf: exp(min - row max) is exactly 0 for a
        # masked key, and a row with every key masked stays finite instead of NaN.
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    weights = softmax(scores)  # (..., T_q, T_k)   each row sums to 1
    if mask is not None:
        weights = zero_empty_rows(weights, mask)
    output = weights @ v  # (..., T_q, d_v)   weighted average of the values
    return output, weights


def zero_empty_rows(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A query whose every key is masked has nothing to attend to: its weights become all 0, so
    its output is the zero vector (not a uniform average, nor NaN, which would poison every later
    layer and the loss). A copy is made only when such a row exists."""
    empty = ~mask.any(dim=-1, keepdim=True)  # (..., T_q or 1, 1)   queries with no key at all
    return weights.masked_fill(empty, 0.0) if empty.any() else weights


def causal_mask(T: int) -> torch.Tensor:
    """The mask of every decoder: (T, T) bool, True on and below the diagonal.

    Row i is query i; it may attend to keys 0..i (itself and the past), never to a later one.
    """
    T = check_int("T", T, minimum=1)
    return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)   mask[i, j] = j <= i


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q, k, v and out projections.

    The input is projected to n_heads smaller spaces of size d_model / n_heads, each head attends
    on its own, and `out` mixes the concatenated heads back to d_model. Self-attention by default;
    with a `context`, cross-attention (queries from x, keys and values from the context).
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True):
        super().__init__()
        d_model = check_int("d_model", d_model, minimum=1)
        n_heads = check_int("n_heads", n_heads, minimum=1)
        check_bool("bias", bias)
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

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                context: torch.Tensor | None = None):
        """x (B, T, d_model); context (B, S, d_model) or None (then S = T: self-attention).

        mask broadcasts to (B, n_heads, T, S), True = may attend (a padding mask over keys is
        `keep[:, None, None, :]`, the causal mask `causal_mask(T)`). Returns the output
        (B, T, d_model) and the weights (B, n_heads, T, S).
        """
        self._check_inputs(x, context)
        source = x if context is None else context  # where the keys and values come from
        B, T, _ = x.shape
        S = source.shape[1]
        H, D = self.n_heads, self.d_head
        q = self.q(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k(source).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
        v = self.v(source).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, D), (B, H, T, S)
        concat = heads.transpose(1, 2).reshape(B, T, self.d_model)  # (B, T, H*D)
        return self.out(concat), weights  # (B, T, d_model), (B, H, T, S)

    def _check_inputs(self, x, context) -> None:
        """x (B, T, d_model) and context (B, S, d_model); each error names the shape given and the
        shape expected (the mask is checked against the scores (B, H, T, S) by attention itself)."""
        check_tensor("x", x, min_dim=3, floating=True)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), "
                             f"got {tuple(x.shape)}")
        if context is not None:
            check_tensor("context", context, floating=True)
            B, d = x.shape[0], self.d_model
            if context.dim() != 3 or context.shape[0] != B or context.shape[-1] != d:
                raise ValueError(f"context must have shape (B={B}, S, d_model={d}) to go with x "
                                 f"{tuple(x.shape)}, got {tuple(context.shape)}")


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
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        self.ff = feed_forward(d_model, d_ff, activation)
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps)
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        """x (B, T, d_model) -> (B, T, d_model), plus the attention weights (B, H, T, T)."""
        a, weights = self.attn(x, mask)  # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x + self.dropout(a))  # residual, then norm (post-norm)
        x = self.norm2(x + self.dropout(self.ff(x)))  # (B, T, d_model)
        return x, weights


def feed_forward(d_model: int, d_ff: int, activation: str = "relu") -> nn.Sequential:
    """The position-wise feed-forward layer of a Transformer block: Linear, ReLU/GELU, Linear."""
    check_int("d_ff", d_ff, minimum=1)
    check_choice("activation", activation, ("relu", "gelu"))
    return nn.Sequential(
        nn.Linear(d_model, d_ff),
        nn.ReLU() if activation == "relu" else nn.GELU(),
        nn.Linear(d_ff, d_model),
    )


def check_dropout(dropout) -> float:
    """A dropout probability in [0, 1)."""
    return check_number("dropout", dropout, minimum=0.0, maximum=1.0, exclusive_maximum=True)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model / 2,)
    freq = torch.exp(-math.log(10000.0) * two_i / d_model)  # 1 / 10000^(2i/d)
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
        d_model = check_int("d_model", d_model, minimum=1)
        self.max_len = max_len = check_int("max_len", max_len, minimum=1)
        self.kind = check_choice("kind", kind, ("learned", "sinusoidal"))
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
