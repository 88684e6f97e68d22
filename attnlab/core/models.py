"""The small models the series trains, all stacked from `attnlab.core.blocks`.

- `TinyTransformer`: an encoder classifier (notebooks 03, 05, 07): token ids -> embedding
  (+ positions) -> encoder block(s) -> mean over the real (non-PAD) tokens -> linear head.
- `DecoderOnly`: a next-token model (notebooks 05 and 08): embedding -> decoder blocks without
  cross-attention -> a linear head over the vocabulary.
- `EncoderDecoder`: the original Transformer's shape, small (notebook 08).
- `OddOneOut`: an encoder block over a set of image features, one score per image (notebook 06).
- `AttentionPooling`: a sentiment head, one learned query over MiniLM's token states (07).
- `AttentionOnly`: a decoder of attention-only layers, where induction heads form (notebook 10).

Every model class the series trains lives here, whatever lesson trains it: a lesson builds its
task's data and calls `training.train` on one of these, by a recipe of `attnlab.core.recipes`.

A model returns tensors; its attention maps come from `attnlab.attention_maps(model, *inputs)`,
the same for every model of the series. Every model takes `positions` ("learned", "sinusoidal",
"rotary" or "none") and `dtype`: `torch.float64` draws the initial weights in float64
(`draw_float64`), which is what the notebooks train, so their printed results come out the same
on any CPU.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch
from torch import nn

from ..plumbing.checks import check_bool, check_choice, check_int, check_number, check_tensor
from .attention import MultiHeadAttention, causal_mask
from .blocks import DecoderBlock, EncoderBlock, PositionalEncoding
from .hooks import eval_mode
from .recipes import INDUCTION, SETS

POSITIONS = ("learned", "sinusoidal", "rotary", "none")
LEARNED_POSITION_STD = 0.02  # the std at which PositionalEncoding("learned") draws its table


class Embedding(nn.Module):
    """Token vectors, plus position vectors for learned or sinusoidal positions.

    Token vectors start with length ~1 (std d^-1/2) rather than PyTorch's std 1 (length ~√d):
    a position signal of the same size is then not drowned out. (With std 1, notebook 05's order
    task stays near chance for many epochs with learned positions.) The PAD row is zero.
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, positions: str,
                 pad_id: int | None = None):
        super().__init__()
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tokens = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.tokens.weight, std=d_model ** -0.5)
        if pad_id is not None:
            with torch.no_grad():
                self.tokens.weight[pad_id].zero_()
        added = positions in ("learned", "sinusoidal")  # rotary acts inside attention instead
        self.pos = PositionalEncoding(d_model, max_len, kind=positions) if added else None

    def forward(self, ids: torch.Tensor, name: str = "x") -> torch.Tensor:
        """ids (B, T) int64 -> (B, T, d_model); a wrong input is refused with its name."""
        check_tensor(name, ids)
        if ids.dtype != torch.long or ids.dim() != 2:
            raise TypeError(f"{name} must be an int64 tensor of token ids (B, T), got "
                            f"{ids.dtype} of shape {tuple(ids.shape)}")
        if ids.numel() and not ids.is_meta:  # (a meta tensor has shapes, no values to check)
            low, high = torch.aminmax(ids)
            if low < 0 or high >= self.vocab_size:
                raise ValueError(f"{name} must hold token ids in 0..{self.vocab_size - 1}, "
                                 f"got ids {int(low)}..{int(high)}")
        h = self.tokens(ids)  # (B, T, d_model)
        return h if self.pos is None else self.pos(h)  # + PE[:T]


@torch.no_grad()
def draw_float64(model: nn.Module, pad_id: int | None = None) -> nn.Module:
    """Redraw every weight of `model` in float64 with PyTorch's usual distributions and make the
    model float64; returns it.

    Why: torch's float32 `normal_`/`uniform_` kernels give other last bits on other CPUs, and
    training amplifies that into other accuracies; float64 `rand`/`randn` give the same numbers
    everywhere, and float64 arithmetic keeps each step's differences near 1e-16. The cost is
    1.3-1.5x the time of float32 (measured in the notebooks' training). Linear layers get
    U(±1/√fan_in) (nn.Linear's default), token tables N(0, 1/d), learned position tables
    N(0, LEARNED_POSITION_STD²); LayerNorms stay at 1 and 0. Any other module with weights of
    its own (nn.Conv2d, a bare nn.Parameter on a custom module) is a TypeError, not a float32
    draw kept by mistake.
    """
    def draw(p, std=None, bound=None):  # N(0, std²) or U(-bound, bound)
        r = (torch.randn(p.shape, dtype=torch.float64) * std if std is not None
             else (torch.rand(p.shape, dtype=torch.float64) * 2 - 1) * bound)
        return nn.Parameter(r, requires_grad=p.requires_grad)

    model.to(torch.float64)
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            continue  # their 1s and 0s are the same on every CPU
        if isinstance(module, nn.Linear):
            bound = module.in_features ** -0.5
            module.weight = draw(module.weight, bound=bound)
            if module.bias is not None:
                module.bias = draw(module.bias, bound=bound)
        elif isinstance(module, nn.Embedding):
            module.weight = draw(module.weight, std=module.embedding_dim ** -0.5)
            if module.padding_idx is not None:
                module.weight[module.padding_idx] = 0.0
        elif isinstance(module, PositionalEncoding) and module.kind == "learned":
            module.table = draw(module.table, std=LEARNED_POSITION_STD)
        elif any(True for _ in module.parameters(recurse=False)):
            # a float32 draw kept here would be another number on another CPU, silently
            raise TypeError(f"draw_float64 does not know how to draw the weights of "
                            f"{type(module).__name__}; it draws nn.Linear, nn.Embedding and "
                            f"learned PositionalEncoding (norms keep 1 and 0)")
    return model


def _check_sizes(dtype, positions, **sizes) -> None:
    check_choice("dtype", dtype, (torch.float32, torch.float64))
    check_choice("positions", positions, POSITIONS)
    for name, value in sizes.items():
        check_int(name, value, minimum=1)


class TinyTransformer(nn.Module):
    """A Transformer encoder classifier, one block by default.

    Without positions the encoder is permutation-equivariant and the pooled output is a function
    of the bag of tokens only; notebook 05 measures what that costs. `pad_id` tokens are never
    attended to and are left out of the mean pooling, so padding cannot change a prediction.
    """

    def __init__(self, vocab_size: int, d_model: int = 32, n_heads: int = 4, d_ff: int = 64,
                 n_layers: int = 1, n_classes: int = 2, positions: str = "learned",
                 max_len: int = 64, pad_id: int = 0, norm: str = "post",
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        _check_sizes(dtype, positions, vocab_size=vocab_size, d_model=d_model,
                     n_layers=n_layers, n_classes=n_classes, max_len=max_len)
        self.pad_id = check_int("pad_id", pad_id, minimum=0, maximum=vocab_size - 1)
        self.vocab_size, self.max_len, self.positions = vocab_size, max_len, positions
        self.embed = Embedding(vocab_size, d_model, max_len, positions, pad_id)
        self.blocks = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff, norm=norm,
                                                 rotary=positions == "rotary")
                                    for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(d_model) if norm == "pre" else None
        self.head = nn.Linear(d_model, n_classes)
        if dtype == torch.float64:
            draw_float64(self)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T) token ids -> the states (B, T, d) after the last block. Padding is hidden as
        a key; to hide more, `attnlab.core.interventions.hide_key(model, keys=...)`."""
        h = self.embed(x)  # (B, T, d)   token vector (+ position vector)
        mask = (x != self.pad_id)[:, None, None, :]  # (B, 1, 1, T)   real keys, for every query
        for block in self.blocks:
            h = block(h, mask)  # (B, T, d)
        if self.final_norm is not None:  # a pre-norm stack ends with a LayerNorm
            h = self.final_norm(h)
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits (B, n_classes): the mean of the real tokens' states, then the head."""
        h = self.encode(x)  # (B, T, d)
        real = (x != self.pad_id).unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        pooled = (h * real).sum(1) / real.sum(1).clamp(min=1.0)  # (B, d)   masked mean
        return self.head(pooled)  # (B, n_classes)

    @torch.no_grad()
    def predict_proba(self, x: torch.Tensor) -> torch.Tensor:
        """Class probabilities (B, n_classes) (eval mode, no gradients)."""
        with eval_mode(self):
            return torch.softmax(self(x), dim=-1)


@contextmanager
def encoder_replaced(model: TinyTransformer, encode: Callable):
    """Within the block, `model` computes its states with `encode(model, x)` (x (B, T) token ids
    -> (states (B, T, d), weights)) instead of its own `encode`: notebook 03 trains its model
    through the block the student wrote. Hooks inside the layers the function calls still fire.
    The model's own `encode` is back afterwards, also after an error."""
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    if not callable(encode):
        raise TypeError(f"encode must be a function (model, x) -> (states, weights), got "
                        f"{type(encode).__name__}")
    model.encode = lambda x: encode(model, x)[0]  # an instance attribute: forward calls it
    try:
        yield model
    finally:
        del model.encode


class DecoderOnly(nn.Module):
    """A next-token model: embeddings -> `DecoderBlock`s without cross-attention -> a linear head.

    Logits at position t score the token at t + 1. With `causal=True` (always, in real use)
    position t sees tokens 0..t only; `causal=False` lets it see the whole sequence, which
    notebook 08 trains to show what leaks. `norm="pre"` adds the final LayerNorm that pre-norm
    stacks end with. `n_kv_heads` < n_heads is grouped-query attention.
    """

    def __init__(self, vocab_size: int, d_model: int = 32, n_heads: int = 2, d_ff: int = 64,
                 n_layers: int = 1, max_len: int = 32, causal: bool = True,
                 positions: str = "learned", norm: str = "post", n_kv_heads: int | None = None,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        _check_sizes(dtype, positions, vocab_size=vocab_size, d_model=d_model,
                     n_layers=n_layers, max_len=max_len)
        self.causal = check_bool("causal", causal)
        self.positions = positions
        self.embed = Embedding(vocab_size, d_model, max_len, positions)
        self.blocks = nn.ModuleList(
            DecoderBlock(d_model, n_heads, d_ff, norm=norm, cross=False, n_kv_heads=n_kv_heads,
                         rotary=positions == "rotary") for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(d_model) if norm == "pre" else None
        self.head = nn.Linear(d_model, vocab_size)
        if dtype == torch.float64:
            draw_float64(self)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T) token ids -> next-token logits (B, T, vocab_size). `mask` replaces the
        causal mask (default: causal, or all-True if not `causal`)."""
        h = self.embed(x)  # (B, T, d_model)
        if mask is None and not self.causal:
            mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device)
        for block in self.blocks:
            h = block(h, mask=mask)  # (B, T, d_model)
        if self.final_norm is not None:
            h = self.final_norm(h)
        return self.head(h)  # (B, T, vocab_size)


class EncoderDecoder(nn.Module):
    """The original Transformer's shape, small: `EncoderBlock`s read the source, `DecoderBlock`s
    write the target one token at a time, reading the source through cross-attention."""

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 32, n_heads: int = 1,
                 d_ff: int = 64, n_layers: int = 1, max_len: int = 32,
                 positions: str = "learned", dtype: torch.dtype = torch.float32):
        super().__init__()
        _check_sizes(dtype, positions, src_vocab=src_vocab, tgt_vocab=tgt_vocab,
                     d_model=d_model, n_layers=n_layers, max_len=max_len)
        rotary = positions == "rotary"
        self.src_embed = Embedding(src_vocab, d_model, max_len, positions)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff, rotary=rotary)
                                     for _ in range(n_layers))
        self.tgt_embed = Embedding(tgt_vocab, d_model, max_len, positions)
        self.decoder = nn.ModuleList(DecoderBlock(d_model, n_heads, d_ff, rotary=rotary)
                                     for _ in range(n_layers))
        self.head = nn.Linear(d_model, tgt_vocab)
        if dtype == torch.float64:
            draw_float64(self)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) token ids -> the encoder's output (B, S, d_model); no mask: every source
        position sees every other."""
        h = self.src_embed(src, "src")  # (B, S, d_model)
        for block in self.encoder:
            h = block(h)
        return h

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """tgt (B, T) token ids so far, memory (B, S, d_model) from `encode` -> next-token
        logits (B, T, tgt_vocab); each block reads `memory` through cross-attention."""
        h = self.tgt_embed(tgt, "tgt")  # (B, T, d_model)
        for block in self.decoder:
            h = block(h, memory)  # (B, T, d_model)
        return self.head(h)  # (B, T, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the logits for every target position at once, (B, T, tgt_vocab)."""
        return self.decode(tgt, self.encode(src))


class OddOneOut(nn.Module):
    """Notebook 06's odd-one-out model. A score for each image of a set: a LayerNorm, the
    `directions` main directions of the training images' (normalised) features and a linear layer
    bring each image to d_model, one encoder block (GELU) lets the images attend to each other (no
    positional encoding: the set has no order), and a linear layer scores each image.

    The LayerNorm has no parameters: it only puts every image's features on one scale (pixels
    range to 255, embeddings to 6). The directions are fixed, not learned: `fit_directions`
    sets them from the training features (principal components), and keeping 64 of 1280 makes
    training several times faster. `dtype=torch.float64` draws the weights in float64
    (`draw_float64`), so training gives the same model on any CPU.
    """

    def __init__(self, d_in: int, d_model: int = SETS.d_model,
                 n_heads: int = SETS.n_heads, d_ff: int = SETS.d_ff,
                 directions: int = SETS.directions, dtype: torch.dtype = torch.float64):
        super().__init__()
        self.d_in = check_int("d_in", d_in, minimum=1)
        k = min(check_int("directions", directions, minimum=1), self.d_in)
        check_choice("dtype", dtype, (torch.float32, torch.float64))
        self.norm = nn.LayerNorm(d_in, elementwise_affine=False)
        self.register_buffer("centre", torch.zeros(d_in, dtype=dtype))          # (d_in,)
        self.register_buffer("basis", torch.eye(d_in, k, dtype=dtype))          # (d_in, k)
        self.embed = nn.Linear(k, d_model)
        self.block = EncoderBlock(d_model, n_heads, d_ff, activation="gelu")
        self.score = nn.Linear(d_model, 1)
        if dtype == torch.float64:
            draw_float64(self)

    @torch.no_grad()
    def fit_directions(self, features: torch.Tensor) -> None:
        """Keep the main directions of `features` (N, d_in), normalised: their centre and the
        eigenvectors of their covariance with the largest eigenvalues, each signed so that its
        largest entry is positive (an eigenvector's sign is arbitrary, and another LAPACK could
        pick the other one)."""
        x = self.norm(features.to(self.basis.dtype))                  # (N, d_in)
        self.centre = x.mean(0)                                       # (d_in,)
        _, vectors = torch.linalg.eigh((x - self.centre).T @ (x - self.centre))  # ascending
        top = vectors[:, -self.basis.shape[1]:].flip(1)               # (d_in, k) largest first
        rows = top.abs().argmax(0)                                    # (k,)
        self.basis = top * top[rows, torch.arange(top.shape[1])].sign()

    @torch.no_grad()
    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """features (..., d_in) -> (..., k): normalised, on the kept directions (nothing here
        is learned, so training computes it once for all images)."""
        return (self.norm(x.to(self.basis.dtype)) - self.centre) @ self.basis

    def attend(self, r: torch.Tensor) -> torch.Tensor:
        """reduced features (B, S, k) -> scores (B, S)."""
        return self.score(self.block(self.embed(r))).squeeze(-1)  # (B, S)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, S, d_in) -> one score per image (B, S); the odd image should score highest."""
        check_tensor("x", x)
        if x.dim() != 3 or x.shape[-1] != self.d_in:
            raise ValueError(f"x must be a batch of sets of features (B, S, {self.d_in}), "
                             f"got shape {tuple(x.shape)}")
        return self.attend(self.reduce(x))

    def score_sets(self, features: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """The scores of sets given as rows of one feature table: features (N, d_in), members
        (B, S) indices -> (B, S). The same as `self(features[members])`, with each image
        reduced once instead of once per set it is in."""
        return self.attend(self.reduce(features)[members])  # (B, S)


class AttentionPooling(nn.Module):
    """Notebook 07's sentiment head on MiniLM's token states, one that reads word order: one learned
    query attends over a review's token states, and a linear layer classifies what it gathered.

    weights = softmax(states · q) over the review's tokens, pooled = Σ_t weights_t · state_t,
    logits = W pooled + b. A mean (what the linear head reads) gives "dull ... but ... superb"
    and its swap nearly the same vector; a query can put its weight on the word after "but",
    as [CLS] pooling and the Set Transformer's pooling by attention do. Its weights are what the
    decision read: they sum to one over the review's word pieces ([CLS] and [SEP] are not
    read). `states` (N, T, d) come from `token_states`, where a row of zeros is no token (padding,
    [CLS], [SEP]), so that the head, like `nn.Linear`, takes one tensor.
    """

    def __init__(self, d: int):
        super().__init__()
        self.query = nn.Parameter(torch.zeros(d))  # (d,)   zeros: uniform weights at the start
        self.out = nn.Linear(d, 2)

    def weights(self, states: torch.Tensor) -> torch.Tensor:
        """(N, T): how much each token's state counts, summing to one over real tokens."""
        scores = states @ self.query  # (N, T)   q · h_t
        real = (states.amax(-1) != 0) | (states.amin(-1) != 0)  # (N, T)   any number not 0
        scores = scores.masked_fill(~real, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (N, T)
        return torch.nan_to_num(weights)  # a text without tokens: no weight anywhere

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        pooled = (self.weights(states).unsqueeze(-1) * states).sum(1)  # (N, d)   Σ_t w_t h_t
        return self.out(pooled)  # (N, 2)


class AttentionOnlyLayer(nn.Module):
    """One attention-only layer: x + MultiHeadAttention(x, causal mask). No feed-forward layer
    and no LayerNorm: each head reads the residual stream and adds its output back to it."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, d_model) -> x + attention (B, T, d_model)."""
        return x + self.attn(x, causal_mask(x.shape[1], device=x.device))[0]


class AttentionOnly(nn.Module):
    """A decoder made of attention only: token + learned position embeddings, `n_layers`
    `AttentionOnlyLayer`s, and a linear unembedding to next-token logits (notebook 10).

`vocab_size` and `max_len` are the task's (`lessons.induction.VOCAB` and `LENGTH`): the model
is told them, the core knows no task; the sizes default to `recipes.INDUCTION`.

    `embed_std`: both embedding tables start with this standard deviation (the usual starts,
    1/√d_model for tokens and 0.02 for positions, leave the heads unable to tell positions
    apart for a long time: the induction drop then comes after ~1,500 steps instead of a few
    hundred). float64 draws every weight in float64 (`draw_float64`) first.
    """

    def __init__(self, vocab_size: int, max_len: int, d_model: int = INDUCTION.d_model,
                 n_heads: int = INDUCTION.n_heads, n_layers: int = 2,
                 embed_std: float = INDUCTION.embed_std, dtype: torch.dtype = torch.float32):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model),
                            ("n_heads", n_heads), ("n_layers", n_layers), ("max_len", max_len)):
            check_int(name, value, minimum=1)
        check_number("embed_std", embed_std, minimum=0.0, exclusive_minimum=True)
        check_choice("dtype", dtype, (torch.float32, torch.float64))
        self.embed = Embedding(vocab_size, d_model, max_len, "learned")
        self.layers = nn.ModuleList(AttentionOnlyLayer(d_model, n_heads) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab_size)
        if dtype == torch.float64:
            draw_float64(self)
        with torch.no_grad():  # the tables as drawn, rescaled to std embed_std
            self.embed.tokens.weight.mul_(embed_std * d_model ** 0.5)
            self.embed.pos.table.mul_(embed_std / LEARNED_POSITION_STD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T) token ids -> next-token logits (B, T, vocab)."""
        h = self.embed(x)  # (B, T, d_model)
        for layer in self.layers:
            h = layer(h)  # (B, T, d_model)
        return self.unembed(h)  # (B, T, vocab)
