"""Hook points: the one way attnlab intervenes on attention (TransformerLens's hook points).

Every `MultiHeadAttention` passes five tensors through a `HookPoint` of its own, named in
`HOOK_POINTS` (`attend` says what each one sees). `attnlab.probes.hooked` puts an edit in force
on them; uniform weights, hiding a key, zeroing a head are a few lines on them. An edit names
the model or layers it changes: there is no hook that reaches every attention at once.
"""
from __future__ import annotations

from torch import nn

HOOK_POINTS = ("values", "mask", "scores", "weights", "heads")  # MultiHeadAttention.hook_*


class HookPoint(nn.Module):
    """A named place inside `MultiHeadAttention` where a tensor can be read or replaced, the
    one way attnlab intervenes on attention (TransformerLens's hook points). It passes its input
    on unchanged; a forward hook registered on it (`attn.hook_weights.register_forward_hook`,
    or `attnlab.probes.hooked`) sees the tensor and may return the one that flows on."""

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
