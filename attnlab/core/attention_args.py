"""What attention accepts: the argument checks at its public edge, apart from the maths.

`scaled_dot_product_attention` calls `check_attention_args` once; `MultiHeadAttention` checks
its sizes when built (`check_attention_sizes`) and its inputs on each call
(`check_attention_inputs`), then runs the unchecked maths. Each error names what was given and
what is expected, so a student's shape mistake reads as one sentence, not a traceback from
inside a matmul.
"""
from __future__ import annotations

import torch

from ..plumbing.checks import check_bool, check_int, check_number, check_tensor


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


def check_attention_sizes(d_model, n_heads, n_kv_heads, rotary, bias, scale, rotary_base):
    """`MultiHeadAttention`'s sizes and options, checked; returns (d_model, n_heads,
    n_kv_heads, scale, rotary_base) as numbers, n_kv_heads = n_heads where None was given."""
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
    return d_model, n_heads, n_kv_heads, scale, rotary_base


def check_attention_inputs(x, mask, context, d_model: int, n_heads: int) -> torch.Tensor | None:
    """`MultiHeadAttention.forward`'s inputs: x (B, T, d_model), context (B, S, d_model) or None,
    and a mask that broadcasts to the weights (B, H, T, S); each error names the shape given
    and the shape expected. Returns the mask as bool (or None)."""
    check_tensor("x", x, min_dim=3, floating=True)
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (B, T, d_model={d_model}), got {tuple(x.shape)}")
    if context is not None:
        check_tensor("context", context, floating=True)
        B = x.shape[0]
        if context.dim() != 3 or context.shape[0] != B or context.shape[-1] != d_model:
            raise ValueError(f"context must have shape (B={B}, S, d_model={d_model}) to go "
                             f"with x {tuple(x.shape)}, got {tuple(context.shape)}")
    if mask is None:
        return None
    mask = as_bool_mask(mask)
    B, T = x.shape[:2]
    weights = (B, n_heads, T, T if context is None else context.shape[1])
    if broadcast(mask.shape, weights) != weights:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the "
                         f"weights' shape {weights} (B, H, T, S)")
    return mask
