"""Rotary position embedding (RoPE, Su et al. 2021): position enters attention as a rotation
of each query and key by its position, so that their dot product depends on the distance
between them only. `MultiHeadAttention(rotary=True)` applies it to q and k after projection;
notebook 05 compares it with learned and sinusoidal positions, and SmolLM2 (notebook 11) uses
it as it loads.
"""
from __future__ import annotations

import torch

from ..plumbing.checks import check_number, check_tensor


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
