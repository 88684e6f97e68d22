"""The pictures the series draws again and again: attention heatmaps with token labels, a
per-head grid, training curves and bars of repeated measurements, and `show_figure`, through
which every figure of the series reaches the screen with its text alternative. Every notebook
draws through these, so all of them look alike.

Colours: importing this module sets matplotlib's property cycle to `STYLE`: Okabe and Ito's
colour-blind-safe colours (Okabe & Ito 2008), each with its own marker and line style, so that no
curve is told from another by colour alone; bars add a hatch (`HATCHES`). Heatmaps use viridis,
perceptually uniform and readable in grey. tests/test_figures.py holds every stored figure to
these."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..plumbing.checks import check_int
from .figure_text import describe, styles

MAX_WIDTH = 15.0  # inches: about what a notebook shows without shrinking a figure's text
# Okabe-Ito, without its yellow (1.1:1 on white) and its black (kept for reference lines).
BLUE, VERMILION, GREEN, PURPLE, ORANGE, SKY = (
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")
PALETTE = (BLUE, VERMILION, GREEN, PURPLE, ORANGE, SKY)
MARKERS = ("o", "s", "^", "D", "v", "P")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
HATCHES = ("", "//", "..", "xx", "\\\\", "oo")
# markevery=0.06: markers at least 6 % of the plot's diagonal apart, so a curve of 2,000 steps
# is not a smear of markers, while one of ten epochs shows every point.
STYLE = {"axes.prop_cycle": cycler(color=PALETTE) + cycler(marker=MARKERS)
         + cycler(linestyle=LINESTYLES) + cycler(markevery=[0.06] * len(PALETTE))}
plt.rcParams.update(STYLE)
# Notebook 02's two variants, the same colours in every plot and widget that compares them.
UNSCALED_COLOR, SCALED_COLOR = VERMILION, BLUE


def show_figure(fig: Figure | None = None) -> None:
    """Display `fig` (default: every open figure) with its text alternative, then close it.

    In a notebook the figure's image carries `figure_text.describe`'s alternative (the site and
    the decks make it the image's alt text) and is followed by a collapsed caption: the same
    sentences, and the figure's numbers as tables to open. The colours and marks drawn go into
    the output's metadata for the palette test. Outside IPython this is `plt.show()`.
    """
    try:
        from IPython import get_ipython  # noqa: PLC0415 - a kernel has IPython; the library need not
        from IPython.display import display  # noqa: PLC0415
    except ImportError:
        get_ipython = None  # noqa: N806
    if get_ipython is None or get_ipython() is None:
        plt.show()
        return
    figures = [fig] if fig is not None else [plt.figure(n) for n in plt.get_fignums()]
    for figure in figures:
        text = describe(figure)
        display(figure, metadata={"image/png": {"alt": text.alt},
                                  "attnlab": {"styles": styles(figure)}})
        display({"text/plain": text.alt, "text/html": text.html()}, raw=True)
        plt.close(figure)


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
    for name, axis, labels, n in (("query_labels", ax.set_yticks, query_labels, w.shape[0]),
                                  ("key_labels", ax.set_xticks, key_labels, w.shape[1])):
        if labels is not None:
            if len(labels) != n:
                raise ValueError(f"{name} must have one label per {name[:-7]} ({n}), "
                                 f"got {len(labels)} labels")
            axis(range(n), labels=[str(t) for t in labels])
    if key_labels is not None:
        ax.tick_params(axis="x", labelrotation=60)
    if highlight is not None:
        for i in np.atleast_1d(highlight):  # key indices
            ax.get_xticklabels()[check_int("highlight", i, minimum=0, maximum=w.shape[1] - 1)
                                 ].set(color="red", fontweight="bold")  # not colour alone
    if annotate is None:
        annotate = max(w.shape) <= 8
    if annotate:
        top = vmax if vmax is not None else w.max()
        for (i, j), value in np.ndenumerate(w):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=10,
                    color="black" if value > 0.6 * top else "white")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def head_grid(weights, tokens, title=None, highlight=None, with_mean: bool = True,
              vmax: float | None = 1.0, panel_size: float | None = None):
    """One heatmap per head of a (H, T, T) weight tensor, plus their mean; returns the Figure.

    All panels share one colour scale, 0 to `vmax`; pass vmax=None to end it at the largest
    weight shown, so that diffuse attention (every weight small) still shows its pattern.
    `panel_size` (inches) replaces the size that grows with the sentence, e.g. to keep four
    panels of a short sentence in one row of a slide."""
    w = _to_numpy(weights)
    if w.ndim == 4 and w.shape[0] == 1:
        w = w[0]  # (1, H, T, T) -> (H, T, T)
    if w.ndim != 3:
        raise ValueError(f"weights must have shape (H, T, T) or (1, H, T, T), got {w.shape}")
    panels = [(w[h], f"head {h}") for h in range(w.shape[0])]
    if vmax is None:
        vmax = float(w.max()) if w.size else 1.0
    if with_mean:
        panels.append((w.mean(axis=0), "mean of heads"))
    # Panels grow with the sentence; a row holds as many as fit in MAX_WIDTH inches, because a
    # wider figure is shrunk to the notebook's width until its token labels cannot be read.
    size = 0.25 * len(tokens) + 1.5 if panel_size is None else float(panel_size)
    rows = -(-len(panels) // max(1, int(MAX_WIDTH // size)))
    cols = -(-len(panels) // rows)  # the panels spread evenly over the rows
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for ax, (matrix, name) in zip(axes.flat, panels):
        attention_heatmap(matrix, tokens, tokens, ax=ax, title=name, annotate=False,
                          highlight=highlight, vmax=vmax)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def against_d_k(d_ks, unscaled, scaled, ylabel: str, title=None,
                labels=("softmax(q·k)", "softmax(q·k / √d_k)"), log_y: bool = False,
                reference=None, reference_label: str | None = None, ylim=None):
    """One measurement of notebook 02 against d_k (log₂ axis): the unscaled variant (red
    circles) against the scaled one (blue squares). `reference` is a thin dashed guide: a
    number (a horizontal line) or one value per d_k. Returns the Figure."""
    d_ks = np.asarray(d_ks, dtype=float)
    curves = [np.asarray(c, dtype=float) for c in (unscaled, scaled)]
    if d_ks.ndim != 1 or any(c.shape != d_ks.shape for c in curves):
        raise ValueError(f"unscaled and scaled must have one value per d_k ({d_ks.shape}), "
                         f"got shapes {curves[0].shape} and {curves[1].shape}")
    fig, ax = plt.subplots(figsize=(8, 4))  # wide and low: a slide's width, half its height
    ax.plot(d_ks, curves[0], "o-", color=UNSCALED_COLOR, label=labels[0])
    ax.plot(d_ks, curves[1], "s-", color=SCALED_COLOR, label=labels[1])
    if reference is not None:
        guide = np.broadcast_to(np.asarray(reference, dtype=float), d_ks.shape)
        # on top (zorder 3): visible where a curve follows it
        ax.plot(d_ks, guide, "--", color="0.15", linewidth=1, zorder=3, label=reference_label)
    ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel("d_k")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def mean_spread_bars(groups: dict, ylabel: str = "test accuracy", chance: float | None = None,
                     title=None):
    """Grouped bar chart of repeated measurements: `groups` maps a group name (e.g. a task) to
    {variant name: list of values (e.g. one per seed)}. Each bar is the mean, its error bar the
    range (min to max), and the dots the single values; variants differ by colour and hatch.
    `chance` draws a dashed reference line. Returns the Figure."""
    if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
        raise TypeError(f"groups must be a dict of dicts {{group: {{variant: values}}}}, "
                        f"got {type(groups).__name__}")
    if not groups or not all(groups.values()):
        raise ValueError(f"groups must be a non-empty dict of non-empty dicts, got {groups!r}")
    variants = list(dict.fromkeys(v for g in groups.values() for v in g))
    width = 0.8 / len(variants)
    fig, ax = plt.subplots(figsize=(min(10.0, 1.6 + 1.1 * len(groups) * len(variants)), 3.6))
    for j, variant in enumerate(variants):
        for i, group in enumerate(groups):
            values = np.asarray(groups[group].get(variant, []), dtype=float)
            if values.size == 0:
                continue
            x = i + (j - (len(variants) - 1) / 2) * width
            mean = values.mean()
            first = next(k for k, g in enumerate(groups) if len(groups[g].get(variant, [])))
            ax.bar(x, mean, width * 0.9, color=PALETTE[j % len(PALETTE)],
                   hatch=HATCHES[j % len(HATCHES)], edgecolor="black", linewidth=0.5,
                   label=variant if i == first else None,  # one legend entry per variant
                   yerr=[[mean - values.min()], [values.max() - mean]], capsize=4)
            ax.plot(np.full(values.size, x), values, "k.", markersize=5)
            ax.text(x, values.max() + 0.02, f"{mean:.2f}", ha="center", va="bottom", fontsize=10)
    if chance is not None:
        ax.axhline(chance, color="gray", linestyle="--", linewidth=1, label="chance")
    ax.set_xticks(range(len(groups)), labels=list(groups))
    ax.set_ylabel(ylabel)
    ax.set_ylim(0.0, 1.15)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def accuracy_curves(histories: dict, title=None, chance: float | None = None,
                    metric: str = "test_acc", figsize: tuple[float, float] = (6, 3.4)):
    """Learning curves of repeated runs: `histories` maps a variant name to a list of histories
    (one per seed, from `attnlab.core.training.fit`). Draws the mean `metric` per epoch with a band
    from the lowest to the highest run (a variant with a single run is just its curve). `figsize` in
    inches, e.g. (8, 4) for a curve that fills a slide's width and half its height. Returns the
    Figure."""
    if not isinstance(histories, dict) or not all(isinstance(h, list) for h in histories.values()):
        raise TypeError(f"histories must be a dict {{variant: [history, ...]}}, "
                        f"got {type(histories).__name__}")
    if not histories or not all(histories.values()):
        raise ValueError(f"histories must be a non-empty dict of non-empty lists, "
                         f"got {list(map(len, histories.values()))} runs per variant")
    fig, ax = plt.subplots(figsize=figsize)
    for name, runs in histories.items():
        if any(metric not in h for h in runs):
            raise ValueError(f"every history of {name!r} must have {metric!r}")
        values = np.array([h[metric] for h in runs], dtype=float)  # (runs, epochs)
        epochs = np.asarray(runs[0]["epoch"])
        label = f"{name} (mean of {len(runs)})" if len(runs) > 1 else f"{name} (1 run)"
        line, = ax.plot(epochs, values.mean(0), markersize=4, label=label)  # STYLE's marks
        ax.fill_between(epochs, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
    if chance is not None:
        ax.axhline(chance, color="gray", linestyle="--", linewidth=1, label="chance")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
    ax.set_ylabel(metric.replace("_acc", " accuracy").replace("_", " "))
    ax.set_ylim(0.0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=10)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def layer_head_grid(maps, title: str | None = None):
    """Every head of every layer for one sentence, given as a list of per-layer
    (1, H, T, T) tensors: a (layers × heads) grid of small heatmaps, rows = layers, columns =
    heads, no labels (at this size patterns are what one reads). Returns the Figure."""
    L, H = len(maps), maps[0].shape[1]
    fig, axes = plt.subplots(L, H, figsize=(1.15 * H + 1, 1.15 * L + 1), squeeze=False)
    for layer, weights in enumerate(maps):
        for head in range(H):
            ax = axes[layer, head]
            ax.imshow(_to_numpy(weights[0, head]), cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_label(f"layer {layer} head {head}")  # its name in the figure's text
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=8)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
