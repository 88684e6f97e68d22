"""The exercises of notebook 08 (what attention costs), checked.

- `flop_ratios` (predict): by how much the FLOPs of a self-attention layer grow when the context
  grows 4× (T = d = 64 to T = 256): the score part, the four projections, the whole layer;
- `online_update` (implement): fold one block of keys into the running max, total and weighted
  sum of the online softmax; one call per block gives attention block by block.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import torch

from ..online_softmax import empty_state
from ..online_softmax import online_update as reference_update
from . import check_function, check_prediction, exercise


@exercise("predict", args=([16.0, 4.0, 8.0],))
def flop_ratios(guess, measured):
    """Your [score part, projections, whole layer] ratios against the counted ones (±1 is right)."""
    return check_prediction(
        guess, measured, name="predict the FLOP ratios of a 4× longer context", tolerance=1.0,
        digits=1,
        lesson="Scores pair every query with every key (T²), projections touch each token "
               "once (T); the layer adds both.")


def _update_inputs(seed: int = 8) -> list[tuple[torch.Tensor, ...]]:
    """(m, total, acc, scores, v_block) cases: the first block after `empty_state`; a second
    block whose scores are larger (its max replaces the old one, so what was kept must be
    rescaled); one whose scores are smaller (the old max stays). Sizes differ per dimension
    (T_q = 3, block = 4, d_v = 5, two heads) so that a transposed product is caught."""
    g = torch.Generator().manual_seed(seed)
    q, v1, v2 = (torch.randn(2, 3, 5, generator=g), torch.randn(2, 4, 5, generator=g),
                 torch.randn(2, 4, 5, generator=g))
    first, second = torch.randn(2, 3, 4, generator=g), torch.randn(2, 3, 4, generator=g)
    start = empty_state(q, v1)  # m = -inf, total = 0, acc = 0
    after_first = reference_update(*start, first, v1)
    return [(*start, first, v1), (*after_first, second + 3.0, v2), (*after_first, second - 3.0, v2)]


@exercise("implement")
def online_update(fn, *, seconds: float | None = None):
    """Your `fn(m, total, acc, scores, v_block) -> (m, total, acc)` against attnlab's."""
    return check_function(
        fn, reference_update, _update_inputs(), name="online_update", seconds=seconds,
        hint="the new max is the larger of the old max and the block's largest score; the old "
             "total and acc were computed against the old max, so both need the factor "
             "exp(old max - new max) before the block's terms are added.")
