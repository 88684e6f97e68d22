"""Hook points: the one way attnlab intervenes on attention (TransformerLens's hook points).

Every `MultiHeadAttention` passes five tensors through a `HookPoint` of its own, named in
`HOOK_POINTS` (`attend` says what each one sees), and each of those first through the point
of the same name in `EVERY`, which all layers share. `attnlab.probes.hooked` puts an edit in
force on either; uniform weights, hiding a key, zeroing a head are a few lines on them.
"""
from __future__ import annotations

from torch import nn

HOOK_POINTS = ("values", "mask", "scores", "weights", "heads")  # MultiHeadAttention.hook_*


class HookPoint(nn.Module):
    """A named place inside `MultiHeadAttention` where a tensor can be read or replaced, the
    one way attnlab intervenes on attention (TransformerLens's hook points). It passes its input
    on unchanged; a forward hook registered on it (`attn.hook_weights.register_forward_hook`,
    or `attnlab.probes.hooked`) sees the tensor and may return the one that flows on.

    A layer's point named `name` first passes the tensor through `EVERY[name]`, the point of
    that name that every layer shares (`uniform_attention()` with no model hooks it): a hook
    there acts on every attention, also on layers built or copied while it is in force."""

    def __init__(self, name: str | None = None):
        super().__init__()
        self.name = name  # None: one of the shared points themselves

    def forward(self, x):
        shared = EVERY.get(self.name)
        return shared(x) if shared is not None and shared.hooked else x

    @property
    def hooked(self) -> bool:
        """Whether a hook is registered here or on the shared point of this name (the mask
        point then gets a mask even where the caller passed none)."""
        shared = EVERY.get(self.name)
        return bool(self._forward_hooks) or (shared is not None and shared.hooked)


EVERY = {point: HookPoint() for point in HOOK_POINTS}  # shared by every MultiHeadAttention

