"""The blocks a Transformer is stacked from, and the positional encodings added to its input.

- `EncoderBlock`: self-attention and a feed-forward layer, each with a residual connection and
  a LayerNorm (notebooks 03, 05, 06, 07).
- `DecoderBlock`: masked self-attention, cross-attention to an encoder's output, feed-forward
  (notebook 08); without cross-attention it is the block of a decoder-only model (GPT).
- `norm="post"` normalises after each residual addition, as the original Transformer and BERT
  do; `norm="pre"` normalises each part's input instead (`x + part(LayerNorm(x))`), as most
  models since GPT-2 do: the residual path then carries the input unchanged to the top.
- `SwiGLU` and `LlamaBlock`: the gated feed-forward layer and the RMSNorm pre-norm block of
  Llama-family decoders (notebook 11's SmolLM2).
- `PositionalEncoding`: learned positions (a table, as in BERT) or the fixed sinusoidal table of
  "Attention Is All You Need", added to the token vectors. Rotary positions are not added to
  the input; they rotate q and k inside attention (`attnlab.core.rope.rotary`).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..plumbing.checks import check_bool, check_choice, check_int
from .attention import MultiHeadAttention, causal_mask

NORMS = ("post", "pre")


def feed_forward(d_model: int, d_ff: int, activation: str = "relu") -> nn.Sequential:
    """The position-wise feed-forward layer of a Transformer block: Linear, ReLU/GELU, Linear."""
    check_int("d_ff", d_ff, minimum=1)
    check_choice("activation", activation, ("relu", "gelu"))
    return nn.Sequential(
        nn.Linear(d_model, d_ff),
        nn.ReLU() if activation == "relu" else nn.GELU(),
        nn.Linear(d_ff, d_model),
    )


class EncoderBlock(nn.Module):
    """One Transformer encoder block, as in "Attention Is All You Need" (post-norm):

        x = LayerNorm(x + MultiHeadAttention(x))
        x = LayerNorm(x + FeedForward(x))

    `norm="pre"` gives x = x + MHA(LayerNorm(x)), then x = x + FF(LayerNorm(x)). `activation`
    is "relu" (the paper) or "gelu" (BERT, exact erf form); `norm_eps` is 1e-12 in BERT-family
    checkpoints. `n_kv_heads` and `rotary` go to `MultiHeadAttention`. No dropout: nothing in the
    series trains long enough to overfit by it.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, activation: str = "relu",
                 norm_eps: float = 1e-5, norm: str = "post", n_kv_heads: int | None = None,
                 rotary: bool = False):
        super().__init__()
        self.norm = check_choice("norm", norm, NORMS)
        self.ff = feed_forward(d_model, d_ff, activation)  # drawn first: the seeds' weights
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, rotary)
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model). (Its weights: `attnlab.attention_maps`.)"""
        if self.norm == "post":
            x = self.norm1(x + self.attn(x, mask)[0])  # (B, T, d_model)
            return self.norm2(x + self.ff(x))
        x = x + self.attn(self.norm1(x), mask)[0]
        return x + self.ff(self.norm2(x))


class DecoderBlock(nn.Module):
    """One Transformer decoder block, as in "Attention Is All You Need" (post-norm):

        x = LayerNorm(x + MultiHeadAttention(x, mask=causal_mask(T)))   itself and the past
        x = LayerNorm(x + MultiHeadAttention(x, context=context))       reads the encoder
        x = LayerNorm(x + FeedForward(x))

    `norm="pre"` normalises each part's input instead (x = x + part(LayerNorm(x))). With
    `cross=False` the middle line is gone: an `EncoderBlock` with the causal mask, the block of a
    decoder-only model.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, activation: str = "relu",
                 norm_eps: float = 1e-5, norm: str = "post", cross: bool = True,
                 n_kv_heads: int | None = None, rotary: bool = False):
        super().__init__()
        self.norm = check_choice("norm", norm, NORMS)
        check_bool("cross", cross)
        self.ff = feed_forward(d_model, d_ff, activation)  # drawn first: the seeds' weights
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, rotary)
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        self.cross_attn = MultiHeadAttention(d_model, n_heads) if cross else None
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps) if cross else None
        self.norm3 = nn.LayerNorm(d_model, eps=norm_eps)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None, *,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d_model); context (B, S, d_model), the encoder's output (needed when the block
        has cross-attention, refused when it has none). `mask` (default: `causal_mask(T)`)
        broadcasts to (B, H, T, T): pass a padding mask combined with the causal one, or an
        all-True mask to show what the causal mask prevents.

        Returns x (B, T, d_model). (Its weights: `attnlab.attention_maps`, `where="cross_attn"`
        for the cross-attention's.)
        """
        if (context is None) != (self.cross_attn is None):
            raise ValueError("this block has cross-attention: pass context (B, S, d_model)"
                             if context is None else
                             "this block has no cross-attention (cross=False): context must be "
                             "None")
        if mask is None:
            mask = causal_mask(x.shape[1], device=x.device)  # (T, T)
        cross = self.cross_attn
        if self.norm == "post":
            x = self.norm1(x + self.self_attn(x, mask)[0])  # (B, T, d_model)
            if cross is not None:
                x = self.norm2(x + cross(x, context=context)[0])  # reads the context (B, S, d)
            return self.norm3(x + self.ff(x))
        x = x + self.self_attn(self.norm1(x), mask)[0]
        if cross is not None:
            x = x + cross(self.norm2(x), context=context)[0]
        return x + self.ff(self.norm3(x))


class SwiGLU(nn.Module):
    """The feed-forward layer of Llama-family models: down(SiLU(gate(x)) · up(x)).

    Two input projections instead of one: `gate` decides, number by number, how much of `up`
    passes (a GLU, gated linear unit, with the SiLU x·sigmoid(x) as the gate's activation). No
    biases, as in Llama.
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        check_int("d_ff", d_ff, minimum=1)
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))  # (B, T, d_model)


class LlamaBlock(nn.Module):
    """The block of Llama-family decoders (SmolLM2 in notebook 11), pre-norm with RMSNorm:

        h = x + MultiHeadAttention(RMSNorm(x))      causal, rotary, grouped-query, no biases
        x = h + SwiGLU(RMSNorm(h))

    RMSNorm divides by the root mean square of the numbers (no mean subtracted, no bias):
    LayerNorm's cheaper cousin. `forward` takes the positions and an optional `KVCache`, so
    the same code runs a whole sequence and one decoding step.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int,
                 rotary_base: float = 10000.0, norm_eps: float = 1e-5):
        super().__init__()
        self.norm1 = nn.RMSNorm(d_model, eps=norm_eps)
        self.attn = MultiHeadAttention(d_model, n_heads, n_kv_heads, rotary=True, bias=False,
                                       rotary_base=rotary_base)
        self.norm2 = nn.RMSNorm(d_model, eps=norm_eps)
        self.ff = SwiGLU(d_model, d_ff)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                cache=None) -> torch.Tensor:
        """x (B, T, d_model) at `positions` (T,); `mask` (T, S) over the S keys (the cached
        ones and these T); `cache` a `KVCache` that these keys and values join (None: S = T).
        Returns x (B, T, d_model)."""
        q, k, v = self.attn.project(self.norm1(x), positions=positions)  # (B,H,T,D), (B,Hkv,T,D)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H_kv, S, D) each: the past and these T
        h = x + self.attn.attend(q, k, v, mask)[0]  # (B, T, d_model)
        return h + self.ff(self.norm2(h))


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

    Without it self-attention is permutation-equivariant: it cannot tell word order. A learned
    table has max_len rows and nothing beyond them: such a model cannot even read a longer input.
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
            raise ValueError(f"sequence length {T} exceeds max_len={self.max_len} of this "
                             f"{self.kind} positional encoding: it has no vector for position "
                             f"{self.max_len} or later")
        return x + self.table[:T]  # (B, T, d_model)
