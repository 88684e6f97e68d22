"""What does finding the real tokens cheaply save notebook 07's pooling heads (and the app's)?

`AttentionPooling.weights` finds the real tokens of every batch at every training step: a row of
token states that is not all zeros. Baseline: `states.ne(0).any(-1)`, as it was. Ours:
`(states.amax(-1) != 0) | (states.amin(-1) != 0)`, the same tokens. Both train here, in turn, on
the same random (1400, 19, 384) states with padding (notebook 07's `x_pool` has that shape) by
`recipes.POOLING`, on one torch thread; the two heads are checked to be the same bits.

    python benchmarks/pooling_head.py
"""
from __future__ import annotations

import time

import torch

from attnlab.core.models import AttentionPooling
from attnlab.lessons import sentiment


class Baseline(AttentionPooling):
    def weights(self, states):
        scores = (states @ self.query).masked_fill(~states.ne(0).any(-1), float("-inf"))
        return torch.nan_to_num(torch.softmax(scores, dim=-1))  # (N, T)


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    states = torch.randn(1800, 19, 384, generator=g)  # (N, T, d)
    states[torch.arange(19) >= torch.randint(3, 19, (1800, 1), generator=g)] = 0.0  # padding
    labels = torch.randint(0, 2, (1800,), generator=g)
    train, test = slice(1400), slice(1400, None)
    sentiment.fit_head(states[:64], labels[:64], states[test], labels[test], epochs=1)  # imports
    heads, seconds = {}, {}
    for name, cls in (("baseline: ne(0).any(-1)", Baseline), ("ours: amax/amin", AttentionPooling)):
        sentiment.AttentionPooling = cls  # what fit_head builds
        start = time.perf_counter()
        heads[name] = sentiment.fit_head(states[train], labels[train], states[test],
                                         labels[test], seed=0)[0]
        seconds[name] = time.perf_counter() - start
    sentiment.AttentionPooling = AttentionPooling
    a, b = (list(h.state_dict().values()) for h in heads.values())
    print(f"{'one pooling head, recipes.POOLING':<34}{'seconds':>8}")
    for name, s in seconds.items():
        print(f"{name:<34}{s:>8.2f}")
    print("same weights bit for bit:", all(torch.equal(x, y) for x, y in zip(a, b)))


if __name__ == "__main__":
    main()
