"""The online softmax: attention one block of keys at a time, never holding the T×T matrix.

softmax needs the maximum and the sum of a whole row before it can weigh anything, which seems
to require all T scores at once. It does not: keep a running maximum m, a running total of
exp(score - m) and a running weighted sum of values acc. When a block of keys brings a larger
maximum, everything kept so far was measured against the old one and is multiplied by
exp(m_old - m_new); at the end acc / total is exactly softmax(scores) @ v. Only one block of
scores, (T_q, block), exists at a time, so memory grows like T, not T². Fused attention kernels
(FlashAttention, PyTorch's scaled_dot_product_attention on CPU) are built on this update;
notebook 09 measures both.
"""
from __future__ import annotations

import math

import torch

from ..plumbing.checks import check_int, check_tensor
from .attention_args import broadcast


def online_update(m: torch.Tensor, total: torch.Tensor, acc: torch.Tensor, scores: torch.Tensor,
                  v_block: torch.Tensor):
    """Fold one block of keys into the running state (m, total, acc); return the new state.

    m (..., T_q, 1) is the running max, total (..., T_q, 1) the running sum of exp(score - m),
    acc (..., T_q, d_v) the running sum of exp(score - m) · value; scores (..., T_q, block) and
    v_block (..., block, d_v) belong to the new block. Start from `empty_state`.
    """
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (..., T_q, 1)   running max
    rescale = torch.exp(m - m_new)  # (..., T_q, 1)   what was kept was relative to the old max
    p = torch.exp(scores - m_new)  # (..., T_q, block)
    return m_new, total * rescale + p.sum(dim=-1, keepdim=True), acc * rescale + p @ v_block


def empty_state(q: torch.Tensor, v: torch.Tensor):
    """The state before any key: m = -inf, total = 0, acc = 0 (shapes as in `online_update`)."""
    rows = (*broadcast(q.shape[:-2], v.shape[:-2]), q.shape[-2])
    m = torch.full((*rows, 1), -math.inf, dtype=q.dtype, device=q.device)  # (..., T_q, 1)
    acc = torch.zeros((*rows, v.shape[-1]), dtype=v.dtype, device=v.device)  # (..., T_q, d_v)
    return m, torch.zeros_like(m), acc


def blockwise_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int = 128):
    """softmax(q kᵀ / sqrt(d_k)) v computed `block_size` keys at a time with `online_update`.

    Shapes as in `attnlab.scaled_dot_product_attention` (no mask); returns the output only, since
    the weights are never all held at once. Peak memory: one (..., T_q, block_size) block of
    scores and its exponentials, plus the (..., T_q, d_v) state.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, min_dim=2, floating=True)
    block_size = check_int("block_size", block_size, minimum=1)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or k.shape[-2] == 0:
        raise ValueError(f"expected q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), "
                         f"T_k >= 1; got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    q = q / math.sqrt(q.shape[-1])  # scale once, not every block
    state = empty_state(q, v)
    for start in range(0, k.shape[-2], block_size):
        k_block = k[..., start:start + block_size, :]  # (..., block, d_k)
        scores = q @ k_block.transpose(-2, -1)  # (..., T_q, block)
        state = online_update(*state, scores, v[..., start:start + block_size, :])
    _, total, acc = state
    return acc / total  # (..., T_q, d_v)
