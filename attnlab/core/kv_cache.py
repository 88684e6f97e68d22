"""The KV cache: decoding one token at a time without recomputing the past.

A decoder produces token t from tokens 1..t-1, then token t+1 from tokens 1..t, and so on. Under
the causal mask a position never attends to later ones, so the key and value of a position,
once computed, never change. A cache keeps them: each step projects only the new token (its
query, key and value) and attends that one query over the cached keys. A step then costs
8·d² + 4·t·d operations (`step_flops`) instead of the 8·t·d² + 4·t²·d of running the layer over
the whole prefix again; the price is memory, a key and a value of n_kv_heads · d_head numbers
per token and layer (`bytes_per_token`), that grows with t. A layer with fewer key/value heads
than query heads (grouped-query attention) keeps that many times fewer, and each step reads
that many times fewer bytes. Notebook 09 has students write the step, checks it against
`recompute_step`, and measures both costs.
"""
from __future__ import annotations

import torch

from ..plumbing.checks import check_int, check_tensor
from .attention import MultiHeadAttention, causal_mask


class KVCache:
    """The keys and values of the positions decoded so far, for one attention layer.

    Allocated once for `max_len` positions, (B, H_kv, max_len, D) each, as inference servers do:
    appending a position copies one slice instead of growing (and copying) the whole tensor.
    H_kv is the layer's `n_kv_heads`: with grouped-query attention the cache is that many times
    smaller than with one key/value head per query head.
    """

    def __init__(self, batch: int, n_kv_heads: int, d_head: int, max_len: int,
                 dtype: torch.dtype = torch.float32, device=None):
        shape = (batch, n_kv_heads, max_len, d_head)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, max_len, D)
        self.values = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, max_len, D)
        self.length = 0

    @classmethod
    def for_layer(cls, attn: MultiHeadAttention, like: torch.Tensor, max_len: int) -> KVCache:
        """An empty cache for `attn`, for a batch shaped, typed and placed like `like` (B, ...)."""
        max_len = check_int("max_len", max_len, minimum=1)
        return cls(like.shape[0], attn.n_kv_heads, attn.d_head, max_len, like.dtype, like.device)

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache, whatever its length: 2 · B · H_kv · max_len · D numbers."""
        return self.keys.nbytes + self.values.nbytes

    def append(self, k: torch.Tensor, v: torch.Tensor):
        """Store the keys and values of n new positions, (B, H_kv, n, D) each (n = 1 while
        decoding); return every cached key and value so far, (B, H_kv, t, D) each (views into
        the cache, no copy)."""
        t, n = self.length, k.shape[2]
        if t + n > self.keys.shape[2]:
            raise ValueError(f"the cache holds max_len={self.keys.shape[2]} positions: it has {t}, "
                             f"{n} more do not fit")
        self.keys[:, :, t:t + n] = k
        self.values[:, :, t:t + n] = v
        self.length = t + n
        return self.keys[:, :, :t + n], self.values[:, :, :t + n]  # (B, H_kv, t, D) each

    def crop(self, length: int) -> None:
        """Forget every position from `length` on (to go back, or to time one step at a chosen
        position again and again)."""
        self.length = check_int("length", length, minimum=0, maximum=self.length)


def bytes_per_token(n_layers: int, n_kv_heads: int, d_head: int,
                    bytes_per_number: int = 2) -> int:
    """What a KV cache stores per token of context: a key and a value (2) of n_kv_heads · d_head
    numbers in each of n_layers layers, bytes_per_number each (2 in 16-bit):

        2 · n_layers · n_kv_heads · d_head · bytes_per_number

    A cache for C tokens holds C times this; a model with a sliding window of W tokens keeps
    only the last W, so min(C, W) times this. It is what `KVCache.nbytes` counts, layer by layer.
    """
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("d_head", d_head),
                        ("bytes_per_number", bytes_per_number)):
        check_int(name, value, minimum=1)
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_number


def prefill(attn: MultiHeadAttention, prefix: torch.Tensor, max_len: int) -> KVCache:
    """A cache for `attn` holding the keys and values of a whole prefix (B, t, d_model), computed
    in one pass, as a server does with a prompt before it decodes the first new token."""
    check_tensor("prefix", prefix, min_dim=3, floating=True)
    cache = KVCache.for_layer(attn, prefix, max_len)
    _, k, v = attn.project(prefix)  # (B, H_kv, t, D) each, rotated at positions 0..t-1
    cache.append(k, v)
    return cache


def decode_step(attn: MultiHeadAttention, x_t: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Self-attention output for one new token x_t (B, 1, d_model), the earlier ones cached.

    The new token is projected by the layer's own `project` (with rotary positions, at its own
    position, len(cache)), its key and value join the cache, and its query attends over every
    cached key with the layer's own `attend`: the same code as the full forward pass. No mask is
    needed: the cache holds only the past and the token itself.
    """
    check_tensor("x_t", x_t, min_dim=3, floating=True)
    if x_t.dim() != 3 or x_t.shape[1:] != (1, attn.d_model):
        raise ValueError(f"x_t must have shape (B, 1, d_model={attn.d_model}), "
                         f"got {tuple(x_t.shape)}")
    position = torch.tensor([len(cache)], device=x_t.device)  # (1,)   where this token sits
    q, k, v = attn.project(x_t, positions=position)  # (B, H, 1, D), (B, H_kv, 1, D) x 2
    keys, values = cache.append(k, v)  # (B, H_kv, t, D) each
    out, _ = attn.attend(q, keys, values)  # (B, 1, d_model)
    return out


def recompute_step(attn: MultiHeadAttention, prefix: torch.Tensor) -> torch.Tensor:
    """The same output without a cache: the whole prefix (B, t, d_model) through the layer under
    the causal mask, keeping the last position's output (B, 1, d_model). A decoder without a
    cache does this at every step."""
    check_tensor("prefix", prefix, min_dim=3, floating=True)
    out, _ = attn(prefix, mask=causal_mask(prefix.shape[1], device=prefix.device))  # (B, t, d)
    return out[:, -1:]  # (B, 1, d_model)


def step_flops(position: int, d_model: int, *, cached: bool, batch: int = 1) -> int:
    """Matrix-product FLOPs of the decoding step that produces the output at `position`
    (1-based: the prefix then holds `position` tokens), for one self-attention layer with one
    key/value head per query head.

    cached: the four d×d projections of one token, 4 · 2·d², and one query against t keys and
    values, 2·t·d + 2·t·d  ->  8·d² + 4·t·d, linear in t.
    recomputed: the whole layer over t tokens, 8·t·d² + 4·t²·d (`cost.layer_flops`).
    """
    t, d = position, d_model
    if cached:
        return batch * (8 * d * d + 4 * t * d)
    return batch * (8 * t * d * d + 4 * t * t * d)
