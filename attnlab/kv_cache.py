"""The KV cache: decoding one token at a time without recomputing the past.

A decoder produces token t from tokens 1..t-1, then token t+1 from tokens 1..t, and so on. Under
the causal mask a position never attends to later ones, so the key and value of a position,
once computed, never change. A cache keeps them: each step projects only the new token (its
query, key and value) and attends that one query over the cached keys. A step then costs
8·d² + 4·t·d operations (`step_flops`) instead of the 8·t·d² + 4·t²·d of running the layer over
the whole prefix again; the price is memory, 2·t·d numbers per layer, that grows with t.
Notebook 08 checks that both ways give the same outputs and measures the two costs.
"""
from __future__ import annotations

import torch

from .attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .checks import check_bool, check_int, check_tensor


class KVCache:
    """The keys and values of the positions decoded so far, for one attention layer.

    Allocated once for `max_len` positions, (B, H, max_len, D) each, as inference servers do:
    appending a position copies one slice instead of growing (and copying) the whole tensor.
    """

    def __init__(self, batch: int, n_heads: int, d_head: int, max_len: int,
                 dtype: torch.dtype = torch.float32):
        sizes = (("batch", batch), ("n_heads", n_heads), ("max_len", max_len), ("d_head", d_head))
        shape = tuple(check_int(name, value, minimum=1) for name, value in sizes)
        self.keys = torch.zeros(shape, dtype=dtype)  # (B, H, max_len, D)
        self.values = torch.zeros(shape, dtype=dtype)  # (B, H, max_len, D)
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache, whatever its length: 2 · B · H · max_len · D numbers."""
        return self.keys.nbytes + self.values.nbytes

    def append(self, k: torch.Tensor, v: torch.Tensor):
        """Store the keys and values of n new positions, (B, H, n, D) each (n = 1 while
        decoding); return every cached key and value so far, (B, H, t, D) each (views into the
        cache, no copy)."""
        B, H, _, D = self.keys.shape
        for name, x in (("k", k), ("v", v)):
            check_tensor(name, x, min_dim=4, floating=True)
            if x.dim() != 4 or (x.shape[0], x.shape[1], x.shape[3]) != (B, H, D):
                raise ValueError(f"{name} must have shape (B={B}, H={H}, n, D={D}), "
                                 f"got {tuple(x.shape)}")
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} "
                             f"and {tuple(v.shape)}")
        t, n = self.length, k.shape[2]
        if t + n > self.keys.shape[2]:
            raise ValueError(f"the cache holds max_len={self.keys.shape[2]} positions: it has {t}, "
                             f"{n} more do not fit")
        self.keys[:, :, t:t + n] = k
        self.values[:, :, t:t + n] = v
        self.length = t + n
        return self.keys[:, :, :t + n], self.values[:, :, :t + n]  # (B, H, t, D) each

    def crop(self, length: int) -> None:
        """Forget every position from `length` on (to go back, or to time one step at a chosen
        position again and again)."""
        self.length = check_int("length", length, minimum=0, maximum=self.length)


def _split_heads(attn: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """(B, n, d_model) -> (B, H, n, D), as MultiHeadAttention splits its projections."""
    B, n, _ = x.shape
    return x.view(B, n, attn.n_heads, attn.d_head).transpose(1, 2)


def prefill(attn: MultiHeadAttention, prefix: torch.Tensor, max_len: int) -> KVCache:
    """A cache for `attn` holding the keys and values of a whole prefix (B, t, d_model), computed
    in one pass, as a server does with a prompt before it decodes the first new token."""
    check_tensor("prefix", prefix, min_dim=3, floating=True)
    cache = KVCache(prefix.shape[0], attn.n_heads, attn.d_head, max_len, dtype=prefix.dtype)
    cache.append(_split_heads(attn, attn.k(prefix)), _split_heads(attn, attn.v(prefix)))
    return cache


def decode_step(attn: MultiHeadAttention, x_t: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Self-attention output for one new token x_t (B, 1, d_model), the earlier ones cached.

    The new token's key and value join the cache; its query attends over every cached key. No
    mask is needed: the cache holds only the past and the token itself.
    """
    check_tensor("x_t", x_t, min_dim=3, floating=True)
    if x_t.dim() != 3 or x_t.shape[1:] != (1, attn.d_model):
        raise ValueError(f"x_t must have shape (B, 1, d_model={attn.d_model}), "
                         f"got {tuple(x_t.shape)}")
    q = _split_heads(attn, attn.q(x_t))  # (B, H, 1, D)   the new token's query only
    keys, values = cache.append(_split_heads(attn, attn.k(x_t)),
                                _split_heads(attn, attn.v(x_t)))  # (B, H, t, D) each
    heads, _ = scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D)
    return attn.out(heads.transpose(1, 2).reshape(x_t.shape))  # (B, 1, d_model)


def recompute_step(attn: MultiHeadAttention, prefix: torch.Tensor) -> torch.Tensor:
    """The same output without a cache: the whole prefix (B, t, d_model) through the layer under
    the causal mask, keeping the last position's output (B, 1, d_model). A decoder without a
    cache does this at every step."""
    check_tensor("prefix", prefix, min_dim=3, floating=True)
    out, _ = attn(prefix, mask=causal_mask(prefix.shape[1]))  # (B, t, d_model)
    return out[:, -1:]  # (B, 1, d_model)


def step_flops(position: int, d_model: int, *, cached: bool, batch: int = 1) -> int:
    """Matrix-product FLOPs of the decoding step that produces the output at `position`
    (1-based: the prefix then holds `position` tokens), for one self-attention layer.

    cached: the four d×d projections of one token, 4 · 2·d², and one query against t keys and
    values, 2·t·d + 2·t·d  ->  8·d² + 4·t·d, linear in t.
    recomputed: the whole layer over t tokens, 8·t·d² + 4·t²·d (`cost.layer_flops`).
    """
    t = check_int("position", position, minimum=1)
    d = check_int("d_model", d_model, minimum=1)
    batch = check_int("batch", batch, minimum=1)
    if check_bool("cached", cached):
        return batch * (8 * d * d + 4 * t * d)
    return batch * (8 * t * d * d + 4 * t * t * d)
