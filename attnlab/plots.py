"""The pictures the series draws again and again: attention heatmaps with token labels and a
per-head grid. Every notebook draws attention through these, so all of them look alike."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def _to_numpy(weights) -> np.ndarray:
    if hasattr(weights, "detach"):
        weights = weights.detach().cpu().numpy()
    return np.asarray(weights, dtype=float)


def attention_heatmap(weights, query_labels=None, key_labels=None, ax=None, title=None,
                      annotate: bool | None = None, vmax: float | None = 1.0, cmap="viridis",
                      highlight=None):
    """Draw one (T_q, T_k) weight matrix: rows are queries, columns keys.

    `annotate` writes each weight in its cell (default: when the matrix is at most 8×8);
    `highlight` is a key index (or list) whose column label is drawn red, e.g. the decisive word.
    Returns the Axes.
    """
    w = _to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be a 2-D (T_q, T_k) matrix, got shape {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.5 * w.shape[1] + 2, 0.45 * w.shape[0] + 1.5))
    image = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    for axis, labels, n in ((ax.set_yticks, query_labels, w.shape[0]), (ax.set_xticks, key_labels, w.shape[1])):
        if labels is not None:
            if len(labels) != n:
                raise ValueError(f"got {len(labels)} labels for an axis of length {n}")
            axis(range(n), labels=[str(t) for t in labels])
    if key_labels is not None:
        ax.tick_params(axis="x", labelrotation=60)
    if highlight is not None:
        for i in np.atleast_1d(highlight):
            ax.get_xticklabels()[int(i)].set_color("red")
    if annotate is None:
        annotate = max(w.shape) <= 8
    if annotate:
        top = vmax if vmax is not None else w.max()
        for (i, j), value in np.ndenumerate(w):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.6 * top else "white")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def head_grid(weights, tokens, title=None, highlight=None, with_mean: bool = True):
    """One heatmap per head of a (H, T, T) weight tensor, plus their mean; returns the Figure."""
    w = _to_numpy(weights)
    if w.ndim == 4 and w.shape[0] == 1:
        w = w[0]  # (1, H, T, T) -> (H, T, T)
    if w.ndim != 3:
        raise ValueError(f"weights must have shape (H, T, T) or (1, H, T, T), got {w.shape}")
    panels = [(w[h], f"head {h}") for h in range(w.shape[0])]
    if with_mean:
        panels.append((w.mean(axis=0), "mean of heads"))
    cols = min(len(panels), 5)
    rows = -(-len(panels) // cols)
    size = 0.35 * len(tokens) + 1.8
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for ax, (matrix, name) in zip(axes.flat, panels):
        attention_heatmap(matrix, tokens, tokens, ax=ax, title=name, annotate=False, highlight=highlight)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
