"""Decoders: the block that generates, and two small models built from it (notebook 07).

An encoder reads a whole sequence at once. A decoder produces one token at a time, so while it is
trained on whole sequences every position may only see itself and the past (`causal_mask`), and
in an encoder-decoder it also reads the encoder's output through cross-attention: queries from
the decoder, keys and values from the encoder. Both run on the one
`attnlab.scaled_dot_product_attention`, through `attnlab.MultiHeadAttention`.

- `DecoderBlock`: masked self-attention, cross-attention, feed-forward, each with a residual and
  a LayerNorm after it (post-norm, like `EncoderBlock`); `cross=False` drops the cross-attention
  (the block of a decoder-only model such as GPT).
- `DecoderOnly`: a next-token model (token and position embeddings, decoder blocks, a linear
  head over the vocabulary). `causal=False` trains it without the mask, to show the leak.
- `EncoderDecoder`: `EncoderBlock`s over the source, `DecoderBlock`s over the target.

How they are trained and how they generate is in `attnlab.generation`.
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import (
    EncoderBlock,
    MultiHeadAttention,
    PositionalEncoding,
    causal_mask,
    check_dropout,
    feed_forward,
)
from .checks import check_bool, check_int, check_tensor


class DecoderBlock(nn.Module):
    """One post-norm Transformer decoder block, as in "Attention Is All You Need":

        x = LayerNorm(x + MultiHeadAttention(x, mask=causal_mask(T)))   itself and the past
        x = LayerNorm(x + MultiHeadAttention(x, context=context))       reads the encoder
        x = LayerNorm(x + FeedForward(x))

    With `cross=False` the middle line is gone: then it is an `EncoderBlock` with the causal mask,
    the block of a decoder-only model.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu", norm_eps: float = 1e-5, cross: bool = True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps)
        check_bool("cross", cross)
        self.cross_attn = MultiHeadAttention(d_model, n_heads) if cross else None
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps) if cross else None
        self.ff = feed_forward(d_model, d_ff, activation)
        self.norm3 = nn.LayerNorm(d_model, eps=norm_eps)
        self.dropout = nn.Dropout(check_dropout(dropout))

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None, *, causal: bool = True,
                context_mask: torch.Tensor | None = None):
        """x (B, T, d_model); context (B, S, d_model), the encoder's output (needed when the block
        has cross-attention, refused when it has none). `causal=False` lifts the causal mask (only
        to show what it prevents); `context_mask` broadcasts to (B, H, T, S), True = may attend.

        Returns x (B, T, d_model), the self-attention weights (B, H, T, T) and the
        cross-attention weights (B, H, T, S) (None without cross-attention).
        """
        check_bool("causal", causal)
        if (context is None) != (self.cross_attn is None):
            raise ValueError("this block has cross-attention: pass context (B, S, d_model)"
                             if context is None else
                             "this block has no cross-attention (cross=False): context must be "
                             "None")
        mask = causal_mask(x.shape[1]).to(x.device) if causal else None  # (T, T)
        a, self_weights = self.self_attn(x, mask)  # (B, T, d_model), (B, H, T, T)
        x = self.norm1(x + self.dropout(a))  # residual, then norm (post-norm)
        cross_weights = None
        if self.cross_attn is not None:
            c, cross_weights = self.cross_attn(x, context_mask, context=context)  # (B, H, T, S)
            x = self.norm2(x + self.dropout(c))
        x = self.norm3(x + self.dropout(self.ff(x)))  # (B, T, d_model)
        return x, self_weights, cross_weights


class _Embedding(nn.Module):
    """Token embedding plus learned positions. Token vectors start with norm ~1 (std d^-1/2, as
    in `TinyTransformer`) so that the position signal is not drowned out."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int):
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.tokens = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.tokens.weight, std=d_model ** -0.5)
        self.pos = PositionalEncoding(d_model, max_len, kind="learned")

    def forward(self, ids: torch.Tensor, name: str) -> torch.Tensor:
        """ids (B, T) int64 -> (B, T, d_model)."""
        check_tensor(name, ids)
        if ids.dtype != torch.long or ids.dim() != 2:
            raise TypeError(f"{name} must be an int64 tensor of token ids (B, T), got "
                            f"{ids.dtype} of shape {tuple(ids.shape)}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"{name} has {ids.shape[1]} tokens per row, more than "
                             f"max_len={self.max_len}")
        if ids.numel() and not (0 <= int(ids.min()) and int(ids.max()) < self.vocab_size):
            raise ValueError(f"{name} token ids must be in 0..{self.vocab_size - 1}, "
                             f"got {int(ids.min())}..{int(ids.max())}")
        return self.pos(self.tokens(ids))  # (B, T, d_model)


class DecoderOnly(nn.Module):
    """A next-token model: embeddings -> `DecoderBlock`s without cross-attention -> a linear head.

    Logits at position t score the token at t + 1. With `causal=True` (always, in real use)
    position t sees tokens 0..t only; `causal=False` lets it see the whole sequence, which
    notebook 07 trains to show what leaks.
    """

    def __init__(self, vocab_size: int, d_model: int = 32, n_heads: int = 2, d_ff: int = 64,
                 n_layers: int = 1, max_len: int = 32, causal: bool = True):
        super().__init__()
        self.causal = check_bool("causal", causal)
        self.embed = _Embedding(vocab_size, d_model, max_len)
        self.blocks = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff, cross=False)
                                    for _ in range(check_int("n_layers", n_layers, minimum=1)))
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        """x (B, T) token ids -> next-token logits (B, T, vocab_size); with return_attention,
        also a list of one (B, H, T, T) weight tensor per block."""
        h = self.embed(x, "x")  # (B, T, d_model)
        maps = []
        for block in self.blocks:
            h, weights, _ = block(h, causal=self.causal)  # (B, T, d_model), (B, H, T, T)
            maps.append(weights)
        logits = self.head(h)  # (B, T, vocab_size)
        return (logits, maps) if return_attention else logits


class EncoderDecoder(nn.Module):
    """The original Transformer's shape, small: `EncoderBlock`s read the source, `DecoderBlock`s
    write the target one token at a time, reading the source through cross-attention."""

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 32, n_heads: int = 1,
                 d_ff: int = 64, n_layers: int = 1, max_len: int = 32):
        super().__init__()
        n_layers = check_int("n_layers", n_layers, minimum=1)
        self.src_embed = _Embedding(src_vocab, d_model, max_len)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.tgt_embed = _Embedding(tgt_vocab, d_model, max_len)
        self.decoder = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.head = nn.Linear(d_model, tgt_vocab)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) token ids -> the encoder's output (B, S, d_model); no mask: every source
        position sees every other."""
        h = self.src_embed(src, "src")  # (B, S, d_model)
        for block in self.encoder:
            h, _ = block(h)
        return h

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, return_attention: bool = False):
        """tgt (B, T) token ids so far, memory (B, S, d_model) from `encode` -> next-token logits
        (B, T, tgt_vocab); with return_attention also the cross-attention weights, one
        (B, H, T, S) tensor per block."""
        h = self.tgt_embed(tgt, "tgt")  # (B, T, d_model)
        maps = []
        for block in self.decoder:
            h, _, cross = block(h, memory)  # (B, T, d_model), (B, H, T, S)
            maps.append(cross)
        logits = self.head(h)  # (B, T, tgt_vocab)
        return (logits, maps) if return_attention else logits

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, return_attention: bool = False):
        """Teacher forcing: the logits for every target position at once, (B, T, tgt_vocab)."""
        return self.decode(tgt, self.encode(src), return_attention)
