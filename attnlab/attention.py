"""Attention, written out: the one implementation every notebook and model in attnlab uses.

Everything here is plain tensor algebra so a student can read each line against the equation
beside it; the argument checks live in a helper beside the maths. The tests check each piece
against PyTorch's own implementation (`torch.nn.functional.scaled_dot_product_attention`,
`nn.MultiheadAttention`, `enable_gqa=True`).

- `scaled_dot_product_attention`: softmax(q kᵀ / √d_k) v, and the weights.
- `causal_mask`: the mask of every decoder.
- `rotary`: rotary position embedding (RoPE), a rotation of q and k by their positions.
- `split_heads` / `merge_heads`: (B, T, H·D) <-> (B, H, T, D).
- `MultiHeadAttention`: projections, heads (fewer key/value heads than query heads is grouped-
  query attention), attention, output projection. `project` and `attend` are its two halves,
  which the KV cache (`attnlab.kv_cache`) calls one token at a time.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .checks import check_bool, check_int, check_number, check_tensor

HOOK_POINTS = ("values", "mask", "scores", "weights", "heads")  # MultiHeadAttention.hook_*


class HookPoint(nn.Module):
    """A named place inside `MultiHeadAttention` where a tensor can be read or replaced, the
    one way attnlab intervenes on attention (TransformerLens's hook points). It passes its input
    on unchanged; a forward hook registered on it (`attn.hook_weights.register_forward_hook`,
    or `attnlab.probes.hooked`) sees the tensor and may return the one that flows on.

    A layer's point named `name` first passes the tensor through `EVERY[name]`, the point of
    that name that every layer shares (`uniform_attention()` with no model hooks it): a hook
    there acts on every attention, also on layers built or copied while it is in force."""

    def __init__(self, name: str | None = None):
        super().__init__()
        self.name = name  # None: one of the shared points themselves

    def forward(self, x):
        shared = EVERY.get(self.name)
        return shared(x) if shared is not None and shared.hooked else x

    @property
    def hooked(self) -> bool:
        """Whether a hook is registered here or on the shared point of this name (the mask
        point then gets a mask even where the caller passed none)."""
        shared = EVERY.get(self.name)
        return bool(self._forward_hooks) or (shared is not None and shared.hooked)


EVERY = {point: HookPoint() for point in HOOK_POINTS}  # shared by every MultiHeadAttention


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


def broadcast(*shapes) -> tuple[int, ...] | None:
    """The shape `shapes` broadcast to, or None when they do not broadcast (NumPy's rule:
    aligned from the right, each size equal or 1). Plain Python: torch.broadcast_shapes imports
    sympy on its first call, a second of every notebook's first attention."""
    out: list[int] = []
    for sizes in zip(*(tuple(reversed(s)) + (1,) * (max(map(len, shapes)) - len(s))
                       for s in shapes)):
        big = {n for n in sizes if n != 1}
        if len(big) > 1:
            return None
        out.append(big.pop() if big else 1)
    return tuple(reversed(out))


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
    batch = broadcast(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if batch is None:
        raise ValueError(
            f"the leading (batch/head) dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and "
            f"v {tuple(v.shape)} do not broadcast"
        )
    if mask is None:
        return None
    mask = as_bool_mask(mask)
    scores = (*batch, q.shape[-2], k.shape[-2])  # (..., T_q, T_k)
    if broadcast(mask.shape, scores) != scores:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' "
                         f"shape {scores} (..., T_q, T_k)")
    return mask


def scaled_dot_product_attention(q, k, v, mask=None, *, scale: float | None = None):
    """softmax(q kᵀ / sqrt(d_k)) v, returning the output and the attention weights.

    Shapes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); the leading dimensions
    broadcast. `mask` broadcasts to (..., T_q, T_k); True (or 1) means "may attend".
    `scale` defaults to 1/sqrt(d_k); notebook 02 passes scale=1.0 to show what goes wrong.
    A query whose every key is masked has nothing to read: its weights and output are zero.
    """
    shared = [EVERY[p] if EVERY[p].hooked else None for p in ("scores", "weights")]
    return _attention(q, k, v, check_attention_args(q, k, v, mask), scale, *shared)


def _attention(q, k, v, mask: torch.Tensor | None, scale: float | None,
               scores_hook=None, weights_hook=None):
    """The maths of `scaled_dot_product_attention`, without its checks (mask: bool or None):
    `MultiHeadAttention` checks its inputs once, at its public edge, then calls this with its
    hook points for the scores (before the mask) and the weights (after the softmax)."""
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
    """The mask of every decoder: (T, T) bool, True on and below the diagonal.

    Row i is query i; it may attend to keys 0..i (itself and the past), never to a later one.
    """
    T = check_int("T", T, minimum=1)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)   mask[i, j] = j <= i


def rotary(x: torch.Tensor, positions: torch.Tensor | None = None,
           base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding: each pair of dimensions (x[2i], x[2i+1]) of the vector at
    position m is rotated by the angle m·θ_i, θ_i = base^(-2i/d).

    x (..., T, d) with d even; `positions` (T,) (default 0..T-1) or any shape that broadcasts to
    (..., T). A rotation keeps every length, and rotating q by m and k by n leaves
    q·k depending on m - n only: attention scores see relative positions.
    """
    check_tensor("x", x, min_dim=2, floating=True)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary needs an even last dimension (pairs of numbers), got shape "
                         f"{tuple(x.shape)}")
    base = check_number("base", base, minimum=1.0, exclusive_minimum=True)
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    else:
        check_tensor("positions", positions)
    theta = base ** -(torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)  # (d/2,)
    angle = positions.to(x.dtype)[..., None] * theta  # (..., T, d/2)   m·θ_i
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each: the two numbers of every pair
    turned = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, d/2, 2)
    return turned.flatten(-2)  # (..., T, d)   pairs back in place


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, n_heads·D) -> (B, n_heads, T, D): each head gets its own D numbers of each token.

    The transpose matters: a reshape straight to (B, H, T, D) would deal the numbers of one
    token out over several heads and positions.
    """
    B, T, d = x.shape
    return x.view(B, T, n_heads, d // n_heads).transpose(1, 2)  # (B, H, T, D)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, D) -> (B, T, H·D): the heads' outputs side by side again."""
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate q, k, v and out projections.

    The input is projected to n_heads smaller spaces of size d_head = d_model / n_heads, each
    head attends on its own, and `out` mixes the concatenated heads back to d_model.
    Self-attention by default; with a `context`, cross-attention (queries from x, keys and
    values from the context).

    `n_kv_heads` < n_heads is grouped-query attention: the keys and values have only n_kv_heads
    heads, each shared by n_heads / n_kv_heads query heads (1: multi-query attention); a KV
    cache then stores n_heads / n_kv_heads times fewer numbers. `rotary=True` rotates q and k
    by their positions after projection (`rotary`), the seam where position enters the scores.
    `scale` replaces 1/√d_head in every head (notebook 02 trains with scale=1.0);
    `rotary_base` is the base of the rotation angles (10,000 as in RoFormer; SmolLM2 100,000).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 rotary: bool = False, bias: bool = True, scale: float | None = None,
                 rotary_base: float = 10000.0):
        super().__init__()
        d_model = check_int("d_model", d_model, minimum=1)
        n_heads = check_int("n_heads", n_heads, minimum=1)
        n_kv_heads = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads,
                                                                  minimum=1)
        check_bool("rotary", rotary)
        check_bool("bias", bias)
        rotary_base = check_number("rotary_base", rotary_base, minimum=1.0, exclusive_minimum=True)
        if scale is not None:
            scale = check_number("scale", scale, minimum=0.0, exclusive_minimum=True)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads}) so "
                             f"each head gets d_model / n_heads dimensions")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads "
                             f"({n_kv_heads}): each key/value head serves a group of query heads")
        if rotary and (d_model // n_heads) % 2:
            raise ValueError(f"rotary needs an even head size, got d_model / n_heads = "
                             f"{d_model // n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.n_kv_heads, self.rotary, self.scale = n_kv_heads, rotary, scale
        self.rotary_base = rotary_base
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.k = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        # Where attnlab.probes intervenes (`attend` says what each one sees). Not registered as
        # submodules: they hold no weights, and a printed model stays a list of its layers.
        for point in HOOK_POINTS:
            object.__setattr__(self, f"hook_{point}", HookPoint(point))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                context: torch.Tensor | None = None):
        """x (B, T, d_model); context (B, S, d_model) or None (then S = T: self-attention).

        mask broadcasts to (B, n_heads, T, S), True = may attend (a padding mask over keys is
        `real[:, None, None, :]`, the causal mask `causal_mask(T)`). Returns the output
        (B, T, d_model) and the weights (B, n_heads, T, S).
        """
        mask = self._check_inputs(x, mask, context)
        q, k, v = self.project(x, context)  # (B, H, T, D), (B, H_kv, S, D), (B, H_kv, S, D)
        return self.attend(q, k, v, mask)

    def project(self, x: torch.Tensor, context: torch.Tensor | None = None,
                positions: torch.Tensor | None = None):
        """The heads' queries (B, H, T, D), keys and values (B, H_kv, S, D).

        With `rotary`, q and k are rotated by their positions: 0..T-1 by default, or
        `positions` (T,) for tokens that sit later in a sequence (one decoding step).
        """
        source = x if context is None else context  # where the keys and values come from
        q = split_heads(self.q(x), self.n_heads)  # (B, H, T, D)
        k = split_heads(self.k(source), self.n_kv_heads)  # (B, H_kv, S, D)
        v = split_heads(self.v(source), self.n_kv_heads)  # (B, H_kv, S, D)
        if self.rotary:
            # position enters here, nowhere else
            q, k = rotary(q, positions, self.rotary_base), rotary(k, positions, self.rotary_base)
        return q, k, v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None = None):
        """Attention of the heads, merged and mixed by `out`: output (B, T, d_model) and the
        weights (B, H, T, S). Each group of H / H_kv query heads reads one key/value head.
        q, k, v as `project` makes them, mask bool or None: nothing is checked again here
        (`forward` checked its inputs; the KV cache and `LlamaBlock` build theirs)."""
        B, H, T, D = q.shape
        H_kv, S = self.n_kv_heads, k.shape[-2]
        G = H // H_kv  # query heads per key/value head
        v = self.hook_values(v)  # (B, H_kv, S, D)
        if self.hook_mask.hooked:  # a mask to change, also where there was none: (..., T, S)
            mask = self.hook_mask(torch.ones(1, S, dtype=torch.bool, device=q.device)
                                  if mask is None else mask.expand(*mask.shape[:-1], S))
        # A group's G·T queries read the same key/value head: stack them as rows of one matrix
        # against it. (A group axis broadcast against k would make matmul copy k G times.)
        q = q.reshape(B, H_kv, G * T, D)  # (B, H_kv, G·T, D)
        if mask is not None:
            if mask.dim() >= 3 and mask.shape[-3] == H:
                mask = mask.unflatten(-3, (H_kv, G))  # (..., H_kv, G, T, S)
            else:
                mask = mask.unsqueeze(-3)  # (..., 1, T, S): the same for every head of a group
            mask = mask.expand(*mask.shape[:-3], G, T, S).flatten(-3, -2)  # (..., G·T, S)
        def per_head(point):  # the hook point sees (B, H, T, S), whatever the grouping
            if not point.hooked:
                return None  # not even a view: the computation is the one without hooks
            return lambda x: point(x.view(B, H, T, S)).reshape(B, H_kv, G * T, S)

        heads, weights = _attention(q, k, v, mask, self.scale, per_head(self.hook_scores),
                                    per_head(self.hook_weights))  # (B, H_kv, G·T, D), (.., S)
        heads = self.hook_heads(heads.view(B, H, T, D))  # (B, H, T, D)   each head's output
        out = self.out(merge_heads(heads))  # (B, T, d_model)
        return out, weights.view(B, H, T, S)  # (B, T, d_model), (B, H, T, S)

    def _check_inputs(self, x, mask, context) -> torch.Tensor | None:
        """x (B, T, d_model), context (B, S, d_model) and a mask that broadcasts to the weights
        (B, H, T, S); each error names the shape given and the shape expected. Returns the mask
        as bool."""
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
        if mask is None:
            return None
        mask = as_bool_mask(mask)
        B, T = x.shape[:2]
        weights = (B, self.n_heads, T, T if context is None else context.shape[1])
        if broadcast(mask.shape, weights) != weights:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the "
                             f"weights' shape {weights} (B, H, T, S)")
        return mask
