"""TinyTransformer: the small from-scratch text classifier of notebooks 03 and 04.

token ids -> embedding (+ positions) -> encoder block(s) from `attnlab.attention` -> mean over the
real (non-PAD) tokens -> linear head. Small enough to train in seconds on a laptop CPU, and every
layer's attention weights can be read back (`get_attention_maps`) or constrained (`attend`).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from .attention import EncoderBlock, PositionalEncoding
from .checks import check_choice, check_int, check_tensor

POSITIONS = ("learned", "sinusoidal", "none")
LEARNED_POSITION_STD = 0.02  # the std at which PositionalEncoding("learned") draws its table


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """`with eval_mode(model):` runs the body in eval mode (dropout off) and puts the model back
    in the mode it was in afterwards, also when the body raises: reading a model's predictions or
    attention must not silently switch a model that is being trained out of training mode."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


class TinyTransformer(nn.Module):
    """A one-block (by default) Transformer encoder classifier.

    `positions` is "learned", "sinusoidal" or "none". Without positions the encoder is
    permutation-equivariant and the pooled output is a function of the bag of tokens only —
    notebook 04 measures what that costs. `pad_id` tokens are never attended to and are left out
    of the mean pooling, so padding cannot change a prediction.

    `dtype=torch.float64` gives a model whose training comes out the same on any CPU, which is
    what notebooks 03 and 04 print from: its initial weights are drawn in float64 (same
    distributions), because torch's float32 `normal_`/`uniform_` kernels differ in the last bit
    between CPUs while float64 `rand`/`randn` do not; float64 arithmetic then keeps each step's
    differences near 1e-16. Float32 trajectories of notebook 04's order task, started one ulp
    apart, end several test reviews apart. The cost: 1.3-1.5x the time of float32 (measured).
    """

    def __init__(self, vocab_size: int, d_model: int = 32, n_heads: int = 4, d_ff: int = 64,
                 n_layers: int = 1, n_classes: int = 2, positions: str = "learned",
                 max_len: int = 64, pad_id: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        check_choice("dtype", dtype, (torch.float32, torch.float64))
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model),
                            ("n_layers", n_layers), ("n_classes", n_classes), ("max_len", max_len)):
            check_int(name, value, minimum=1)
        check_choice("positions", positions, POSITIONS)
        check_int("pad_id", pad_id, minimum=0, maximum=vocab_size - 1)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.pad_id, self.positions = pad_id, positions
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        # Token vectors start with norm ~1 (std 1/sqrt(d)) rather than PyTorch's std 1 (norm
        # ~sqrt(d)): a position signal of the same size is then not drowned out. With std 1 the
        # order task of notebook 04 stays near chance after 12 epochs with learned positions.
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()
        self.pos = (None if positions == "none"
                    else PositionalEncoding(d_model, max_len, kind=positions))
        self.blocks = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.head = nn.Linear(d_model, n_classes)
        if dtype == torch.float64:
            self._draw_in_float64()

    @torch.no_grad()
    def _draw_in_float64(self) -> None:
        """Redraw every weight in float64 from the global generator, with the float32 init's
        distributions, and make the model float64: the same numbers on every CPU."""
        def draw(p, std=None, bound=None):  # N(0, std²) or U(-bound, bound)
            r = (torch.randn(p.shape, dtype=torch.float64) * std if std is not None
                 else (torch.rand(p.shape, dtype=torch.float64) * 2 - 1) * bound)
            return nn.Parameter(r, requires_grad=p.requires_grad)

        self.to(torch.float64)
        for module in self.modules():
            if isinstance(module, nn.Linear):  # nn.Linear's default: U(±1/sqrt(fan_in))
                bound = module.in_features ** -0.5
                module.weight = draw(module.weight, bound=bound)
                if module.bias is not None:
                    module.bias = draw(module.bias, bound=bound)
        self.embed.weight = draw(self.embed.weight, std=self.embed.embedding_dim ** -0.5)
        self.embed.weight[self.pad_id] = 0.0
        if self.positions == "learned":
            self.pos.table = draw(self.pos.table, std=LEARNED_POSITION_STD)

    def _check_input(self, x, attend):
        check_tensor("x", x)
        if x.dtype != torch.long:
            raise TypeError(f"x must be an int64 tensor of token ids, got dtype {x.dtype}")
        if x.dim() != 2 or x.shape[1] > self.max_len:
            raise ValueError(f"x must have shape (B, T) with T <= max_len={self.max_len}, "
                             f"got shape {tuple(x.shape)}")
        if x.numel():
            low, high = torch.aminmax(x)
            if low < 0 or high >= self.vocab_size:
                raise ValueError(f"x must hold token ids in 0..{self.vocab_size - 1}, "
                                 f"got ids {int(low)}..{int(high)}")
        if attend is not None and check_tensor("attend", attend).shape != x.shape:
            raise ValueError(f"attend must be a bool tensor shaped like x {tuple(x.shape)}, "
                             f"got shape {tuple(attend.shape)}")

    def encode(self, x: torch.Tensor, attend: torch.Tensor | None = None):
        """Token states and attention maps.

        x: (B, T) token ids. attend: optional (B, T) bool, False = no query may attend to this
        token (an intervention; padding is always hidden anyway). Returns the states (B, T, d)
        after the last block and a list with one (B, H, T, T) weight tensor per layer.
        """
        self._check_input(x, attend)
        keep = x != self.pad_id  # (B, T)   real tokens
        visible = keep if attend is None else keep & attend.bool()  # (B, T)
        mask = visible[:, None, None, :]  # (B, 1, 1, T)   broadcast over heads and queries
        h = self.embed(x)  # (B, T, d)
        if self.pos is not None:
            h = self.pos(h)  # (B, T, d)   + PE[:T]
        maps = []
        for block in self.blocks:
            h, weights = block(h, mask)  # (B, T, d), (B, H, T, T)
            maps.append(weights)
        return h, maps

    def forward(self, x: torch.Tensor, attend: torch.Tensor | None = None) -> torch.Tensor:
        """Class logits (B, n_classes): the mean of the real tokens' states, then the head."""
        h, _ = self.encode(x, attend)  # (B, T, d)
        keep = (x != self.pad_id).unsqueeze(-1).to(h.dtype)  # (B, T, 1)
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)  # (B, d)   masked mean
        return self.head(pooled)  # (B, n_classes)

    @torch.no_grad()
    def get_attention_maps(self, x: torch.Tensor,
                           attend: torch.Tensor | None = None) -> list[torch.Tensor]:
        """One (B, H, T, T) attention-weight tensor per layer (eval mode, no gradients)."""
        with eval_mode(self):
            return self.encode(x, attend)[1]

    @torch.no_grad()
    def predict_proba(self, x: torch.Tensor, attend: torch.Tensor | None = None) -> torch.Tensor:
        """Class probabilities (B, n_classes) (eval mode, no gradients)."""
        with eval_mode(self):
            return torch.softmax(self(x, attend), dim=-1)


def attention_received(weights: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """How much attention each token receives: for every key, the mean over the real query
    tokens of its weight (a column mean of each weight matrix, padding rows left out).

    weights (B, H, T, T), real (B, T) bool (True = a real token, not padding) -> (B, H, T).
    """
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)   1 = a real query
    n_real = queries.sum(-2).clamp(min=1.0)  # (B, 1, 1)
    return (weights * queries).sum(-2) / n_real  # (B, H, T)


@torch.no_grad()
def attention_hit_rate(model: TinyTransformer, x: torch.Tensor, positions: torch.Tensor) -> dict:
    """How often the most-attended token is the decisive one, per layer and head.

    "Most attended" = the key that receives the most attention averaged over the real query
    tokens of a sentence. Returns a dict of NumPy arrays: `per_head` (layers, H) hit rates,
    `head_mean` (layers,) the hit rate of the heads' mean map, and `chance` (a float), the rate
    of picking a real token uniformly at random (the mean of 1 / length).
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    check_tensor("x", x, min_dim=2)
    if check_tensor("positions", positions).shape != (x.shape[0],):
        raise ValueError(f"positions must be a tensor of shape ({x.shape[0]},), one per row of x, "
                         f"got shape {tuple(positions.shape)}")
    keep = x != model.pad_id  # (B, T)
    n_real = keep.sum(1).clamp(min=1)  # (B,)
    per_head, head_mean = [], []
    for weights in model.get_attention_maps(x):  # (B, H, T, T)
        received = attention_received(weights, keep)  # (B, H, T_k)
        top = received.argmax(-1)  # (B, H)
        per_head.append((top == positions[:, None]).float().mean(0).numpy())  # (H,)
        top_mean = received.mean(1).argmax(-1)  # (B,)
        head_mean.append(float((top_mean == positions).float().mean()))
    return {"per_head": np.stack(per_head), "head_mean": np.array(head_mean),
            "chance": float((1.0 / n_real.double()).mean())}
