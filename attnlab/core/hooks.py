"""Hook points: the one way attnlab reads and changes attention (TransformerLens's hook points).

Every `MultiHeadAttention` passes five tensors through a `HookPoint` of its own, named in
`HOOK_POINTS` (`attend` says what each one sees). `attention_maps(model, *inputs)` reads the
weights of every attention layer of any model of the series (MiniLM and SmolLM2 included) at
its `hook_weights`; `hooked` puts an edit in force on the points, and uniform weights, hiding a
key, zeroing a head are a few lines on it (`interventions`). An edit names the model or layers
it changes: there is no hook that reaches every attention at once.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

HOOK_POINTS = ("values", "mask", "scores", "weights", "heads")  # MultiHeadAttention.hook_*
_ONE_READING = threading.RLock()  # run_with_maps: one reading of a model's maps at a time


class HookPoint(nn.Module):
    """A named place inside `MultiHeadAttention` where a tensor can be read or replaced, the
    one way attnlab intervenes on attention (TransformerLens's hook points). It passes its input
    on unchanged; a forward hook registered on it (`attn.hook_weights.register_forward_hook`,
    or `attnlab.core.measures.hooked`) sees the tensor and may return the one that flows on."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def forward(self, x):
        return x

    @property
    def hooked(self) -> bool:
        """Whether a hook is registered here (the mask point then gets a mask even where the
        caller passed none)."""
        return bool(self._forward_hooks)


@contextmanager
def hooked(*edits) -> Iterator[None]:
    """Within the block, each (hook point, fn) pair of `edits` is in force: fn(tensor) returns
    the tensor that flows on from that point of a `MultiHeadAttention` (`hook_values`,
    `hook_mask`, `hook_scores`, `hook_weights`, `hook_heads`; see `MultiHeadAttention.attend`).
    Reading maps and every intervention are a few lines on top of this."""
    handles = []
    try:
        for point, fn in edits:
            if not isinstance(point, HookPoint):
                raise TypeError(f"each edit is (hook point, fn), the point one of a "
                                f"MultiHeadAttention's (e.g. attn.hook_weights), got "
                                f"{type(point).__name__}")
            handles.append(point.register_forward_hook(lambda m, inputs, x, fn=fn: fn(x)))
        yield
    finally:
        for handle in handles:
            handle.remove()


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


@torch.no_grad()
def run_with_maps(model: nn.Module, *inputs, where: str = "", run=None, **kwargs):
    """`model(*inputs, **kwargs)` in eval mode without gradients, and the attention weights of
    that run: (output, maps), one (B, H, T, S) tensor per attention layer in the order the
    layers ran, read at each layer's `hook_weights` (TransformerLens's `run_with_cache`, for the
    one thing the series reads). `where` keeps the layers whose name in the model contains it
    ("cross_attn": an encoder-decoder's cross-attention only); `run` is what to call instead of
    the model itself (`model.encode`). Interventions in force (`uniform_attention`, ...) show
    in the maps."""
    points = [attn.hook_weights for name, attn in model.named_modules()
              if isinstance(getattr(attn, "hook_weights", None), HookPoint) and where in name]
    if not points:
        raise ValueError(f"no attention layer{f' named *{where}*' if where else ''} in "
                         f"{type(model).__name__}")
    maps: list[torch.Tensor] = []
    # A server answers several requests at once, each in a thread: one reading at a time, so
    # that no thread registers hooks while another runs the model through them.
    with _ONE_READING, eval_mode(model), \
            hooked(*((point, lambda w: maps.append(w) or w) for point in points)):
        output = (model if run is None else run)(*inputs, **kwargs)
    return output, maps


def attention_maps(model: nn.Module, *inputs, where: str = "", **kwargs) -> list[torch.Tensor]:
    """The attention weights of `model(*inputs, **kwargs)`, one (B, H, T, S) tensor per layer:
    `run_with_maps(...)[1]`, the one way to read them for every model of the series."""
    return run_with_maps(model, *inputs, where=where, **kwargs)[1]
