"""Every figure in words and numbers, read from the figure itself.

A heatmap, a training curve or a bar chart is the lesson itself; a student who cannot see it
gets it from its text alternative. `describe(fig)` writes that alternative from the data the
figure draws (the arrays of its images, lines, bars and points, and its titles, axis labels, tick
labels and legend), never from what a notebook meant to draw, so it cannot drift from the picture:

- `alt`: what is plotted and the takeaway in numbers, a few sentences a screen reader reads out:
  for a heatmap, which column each row puts its largest value on and the largest cells; for curves,
  where each starts, ends and peaks and where two cross; for bars, each bar's height;
- `tables`: the full numbers, one table per panel, that a student can open beside the figure.

`attnlab.views.plots.show_figure` displays a figure with both (the image carries `alt`, the notebook
shows a collapsed caption with the tables), and records the colours and marks drawn
(`styles`), which tests/test_figures.py holds to the series' colour-blind-safe palette.

Numbers get three significant digits, or one more where three would sit on a rounding edge
(`report.fmt`), so the text reads the same on every CPU.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from ..plumbing.report import MARGIN, exact_fraction, fmt

MAX_CELLS = 30  # rows and columns of a table beyond which it is cut (and says so)
MAX_ALT_PANELS = 6  # panels described one by one in `alt`; a larger grid is summarised


@dataclass
class Table:
    """One panel's numbers: `caption`, a header row and the rows, all text."""
    caption: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class FigureText:
    """A figure's text alternative (`alt`) and its numbers (`tables`)."""
    alt: str
    tables: list[Table] = field(default_factory=list)

    def html(self) -> str:
        """A collapsed caption: the alternative as its summary, the tables inside. Text is
        escaped: a token such as "<b>" shows as written."""
        parts = [f'<details class="attnlab-figure-text"><summary>{html.escape(self.alt)}'
                 f"</summary>"]
        for table in self.tables:
            head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in table.header)
            body = "".join("<tr>" + f'<th scope="row">{html.escape(row[0])}</th>'
                           + "".join(f"<td>{html.escape(c)}</td>" for c in row[1:]) + "</tr>"
                           for row in table.rows)
            note = f"<p>{html.escape(table.note)}</p>" if table.note else ""
            parts.append(f"<table><caption>{html.escape(table.caption)}</caption>"
                         f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}")
        return "".join(parts) + "</details>"


def number(value: float) -> str:
    """`value` with three significant digits (one more where three sit on a rounding edge);
    below 0.001 or from a million up, as 1.23e-05. The magnitude is read with a tolerance, so
    that 0.99999994 on one CPU and 1.0 on another both print 1.00."""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)) + 1e-6)
    if -3 <= exponent < 6:
        return _fixed(value, max(0, 2 - exponent))
    mantissa = _fixed(value / 10.0 ** exponent, 2)
    return f"{mantissa}e{exponent:+03d}"


def _fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals, or more where that sits on a rounding edge. Unlike
    `report.fmt`, which refuses such a value while recording and prints it as asked otherwise,
    this decides the same way when recording and under nbval, so both print the same text."""
    for places in range(digits, digits + 3):
        distance = abs((abs(value) * 10.0 ** places) % 1.0 - 0.5)  # 0 at the edge
        if distance >= MARGIN or exact_fraction(value):
            return fmt(value, places, guard=False)
    return fmt(value, digits + 3, guard=False)


def _as_printed(values) -> np.ndarray:
    """`values` rounded as `number` prints them. Rankings, peaks and crossings are read from
    these, so that two values another CPU might order the other way (1 - 1e-7 against 1) tie,
    and the tie goes to the first, on every CPU."""
    flat = [float(number(v)) for v in np.asarray(values, dtype=float).ravel()]
    return np.asarray(flat, dtype=float).reshape(np.shape(values))


def coordinate(value: float) -> str:
    """An x value (an epoch, a d_k, a step): the data a plot was given, whole where it is whole."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else number(value)


def _prefix(name: str) -> str:
    return f"{name}: " if name else ""


def _quoted(label: str) -> str:
    return f"'{label}'"


def _ticks(axis, n: int) -> list[str]:
    """The tick labels of an axis that labels each of `n` rows or columns, else 0..n-1."""
    ticks = list(axis.get_majorticklocs())
    labels = [t.get_text() for t in axis.get_majorticklabels()]
    if len(ticks) == n and all(float(t) == i for i, t in enumerate(ticks)) and any(labels):
        return labels
    return [str(i) for i in range(n)]


def _panel_name(ax, index: int) -> str:
    """The panel's title, else the label a plot gave it (`ax.set_label`), else its number."""
    label = ax.get_label()
    return (ax.get_title() or ax.get_title("left") or ax.get_title("right") or label
            or f"panel {index + 1}")


def _is_picture(image: AxesImage) -> bool:
    """An image shown as a picture (a photo, an item of Fashion-MNIST), not a matrix of numbers:
    colour channels, or a grey map without tick labels."""
    data = np.asarray(image.get_array())
    if data.ndim == 3:
        return True
    ax = image.axes
    return image.get_cmap().name in ("gray", "gray_r", "Greys", "binary") and not (
        any(t.get_text() for t in ax.get_xticklabels()))


def _heatmap(ax, image: AxesImage, name: str, brief: bool) -> tuple[str, Table]:
    """One sentence or three: the pattern (which column the rows' largest values are on) and,
    unless `brief` (one of several panels), the largest cells."""
    data = np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan)  # (rows, cols)
    rows, cols = data.shape
    row_names, col_names = _ticks(ax.yaxis, rows), _ticks(ax.xaxis, cols)
    finite = np.where(np.isfinite(data), _as_printed(data), -np.inf)  # (rows, cols)
    best = finite.argmax(axis=1)  # (rows,)
    counts = np.bincount(best, minlength=cols)
    top = int(counts.argmax())
    flat = np.argsort(-finite, axis=None, kind="stable")[:1 if brief else 3]
    largest = "; ".join(f"{_quoted(row_names[i])} → {_quoted(col_names[j])} {number(data[i, j])}"
                        for i, j in zip(*np.unravel_index(flat, data.shape)))
    if brief:
        parts = [f"{_prefix(name)}{counts[top]} of {rows} rows peak on "
                 f"{_quoted(col_names[top])}; largest {largest}."]
    else:
        ylabel, xlabel = ax.get_ylabel() or "row", ax.get_xlabel() or "column"
        parts = [f"{_prefix(name)}heatmap, {rows} row{'s' * (rows != 1)} ({ylabel}) by {cols} "
                 f"column{'s' * (cols != 1)} ({xlabel}), values {number(np.nanmin(data))} to "
                 f"{number(np.nanmax(data))}."]
    diagonal = rows == cols and row_names == col_names and np.all(
        np.diagonal(finite) == finite.max())
    if brief:
        pass
    elif diagonal:  # a similarity matrix: the diagonal says nothing, the rest does
        off = np.where(np.eye(rows, dtype=bool), -np.inf, finite)
        nearest = off.argmax(axis=1)  # (rows,)
        parts.append(f"The diagonal is {number(finite.max())} throughout. Largest off the "
                     "diagonal in each row: " + "; ".join(
                         f"{_quoted(row_names[i])} → {_quoted(col_names[j])} {number(data[i, j])}"
                         for i, j in enumerate(nearest)) + ".")
    elif rows <= 8:
        parts.append("Largest in each row: " + "; ".join(
            f"{_quoted(row_names[i])} → {_quoted(col_names[j])} {number(data[i, j])}"
            for i, j in enumerate(best)) + ".")
    else:
        parts.append(f"{counts[top]} of {rows} rows put their largest value on column "
                     f"{_quoted(col_names[top])}. Largest cells: {largest}.")
    shown = data[:MAX_CELLS, :MAX_CELLS]
    note = (f"First {min(rows, MAX_CELLS)} of {rows} rows and {min(cols, MAX_CELLS)} of {cols} "
            f"columns." if max(rows, cols) > MAX_CELLS else "")
    table = Table(f"{name or 'heatmap'} (rows: {ax.get_ylabel() or 'row'}, columns: "
                  f"{ax.get_xlabel() or 'column'})", [""] + col_names[:MAX_CELLS],
                  [[row_names[i]] + [number(v) for v in shown[i]] for i in range(len(shown))],
                  note)
    return " ".join(parts), table


def _ylabel(ax, fallback: str) -> str:
    """The panel's y label, or that of a panel sharing its y axis (which labels only one)."""
    shared = ax.get_shared_y_axes().get_siblings(ax)
    return ax.get_ylabel() or next((a.get_ylabel() for a in shared if a.get_ylabel()), fallback)


def _label(artist, fallback: str) -> str:
    label = artist.get_label()
    return fallback if not label or label.startswith("_") else label


def _crossings(x, first, second) -> list[float]:
    """The x values (interpolated) where `first - second` changes sign."""
    gap = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    found = []
    for i in range(len(gap) - 1):
        if np.isfinite(gap[i:i + 2]).all() and gap[i] * gap[i + 1] < 0:
            found.append(x[i] + (x[i + 1] - x[i]) * gap[i] / (gap[i] - gap[i + 1]))
    return found


def _lines(ax, name: str) -> tuple[str, Table | None]:
    """Each curve's start and end (and its peak where that is neither), where two curves cross,
    and the labelled reference lines. An unlabelled curve drawn like a labelled one is another
    run of it. Beside bars, only labelled lines count: the rest are error bars and dots."""
    curves, guides, looks = [], [], {}
    with_bars = any(isinstance(c, BarContainer) for c in ax.containers)
    for i, line in enumerate(ax.get_lines()):
        label = _label(line, "")
        if with_bars and not label:
            continue
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        keep = np.isfinite(x) & np.isfinite(y)
        if not keep.any():
            continue
        flat = np.all(y[keep] == y[keep][0])
        if flat and (y.size == 2 or line.get_linestyle() in ("--", ":", "-.")):
            if label:  # an unlabelled flat line is a decoration
                guides.append(f"{label} at {number(y[keep][0])}")
            continue
        look = (to_hex(line.get_color()), str(line.get_marker()), str(line.get_linestyle()))
        if label:
            looks[look] = [label, 1]
        elif look in looks:
            looks[look][1] += 1
            label = f"{looks[look][0]}, run {looks[look][1]}"
        else:
            label = f"line {i + 1}"
        curves.append((label, x[keep], _as_printed(y[keep]), bool(_label(line, ""))))
    if not curves and not guides:
        return "", None
    xlabel, ylabel = ax.get_xlabel() or "x", _ylabel(ax, "y")
    parts = [f"{_prefix(name)}{ylabel} against {xlabel}."] if curves else []
    for label, x, y, _ in curves:
        peak = int(np.argmax(y))
        text = (f"{label}: {number(y[0])} at {coordinate(x[0])} to {number(y[-1])} at "
                f"{coordinate(x[-1])}")
        if 0 < peak < len(y) - 1:
            text += f", peak {number(y[peak])} at {coordinate(x[peak])}"
        parts.append(text + ".")
    named = [c for c in curves if c[3]]
    crossings = []
    for a in range(len(named)):
        for b in range(a + 1, len(named)):
            (la, xa, ya, _), (lb, xb, yb, _) = named[a], named[b]
            if xa.shape == xb.shape and np.array_equal(xa, xb):
                if at := _crossings(xa, ya, yb):
                    crossings.append(f"{la} and {lb} cross at {xlabel} "
                                     + ", ".join(number(v) for v in at[:3]))
    if crossings:
        parts.append("; ".join(crossings[:3]) + ".")
    if guides:
        parts.append("Reference: " + "; ".join(guides) + ".")
    xs = sorted({float(v) for _, x, _, _ in curves for v in x})[:MAX_CELLS]
    rows = [[label] + [number(y[list(x).index(v)]) if v in x else "" for v in xs]
            for label, x, y, _ in curves]
    table = Table(f"{_prefix(name)}{ylabel} at each {xlabel}",
                  [xlabel] + [coordinate(v) for v in xs], rows) if curves else None
    return " ".join(parts), table


def _bars(ax, name: str) -> tuple[str, Table | None]:
    containers = [c for c in ax.containers if isinstance(c, BarContainer)]
    if not containers:
        return "", None
    ticks = list(ax.get_xticks())
    tick_labels = [t.get_text() for t in ax.get_xticklabels()]
    horizontal = containers[0].orientation == "horizontal"
    if horizontal:
        ticks, tick_labels = list(ax.get_yticks()), [t.get_text() for t in ax.get_yticklabels()]
    # A series labels its first bar only (one legend entry); its other bars share its colour.
    names = {to_hex(c.patches[0].get_facecolor()): _label(c, "") for c in containers
             if c.patches and _label(c, "")}
    entries = []
    for container in containers:
        for bar in container.patches:
            series = _label(container, "") or names.get(to_hex(bar.get_facecolor()), "")
            where = (bar.get_y() + bar.get_height() / 2 if horizontal
                     else bar.get_x() + bar.get_width() / 2)
            value = bar.get_width() if horizontal else bar.get_height()
            if ticks and any(tick_labels):
                nearest = int(np.argmin([abs(t - where) for t in ticks]))
                place = tick_labels[nearest]
            else:
                place = number(where)
            entries.append((" ".join(p for p in (place, series and f"({series})") if p), value))
    ylabel = (ax.get_xlabel() if horizontal else _ylabel(ax, "")) or "value"
    alt = f"{_prefix(name)}bars of {ylabel}: " + "; ".join(
        f"{where} {number(value)}" for where, value in entries[:12])
    alt += f" (and {len(entries) - 12} more)." if len(entries) > 12 else "."
    table = Table(f"{_prefix(name)}{ylabel} per bar", ["bar", ylabel],
                  [[where, number(value)] for where, value in entries])
    return alt, table


def _points(ax, name: str) -> tuple[str, Table | None]:
    parts = []
    for i, collection in enumerate(c for c in ax.collections if isinstance(c, PathCollection)):
        xy = np.asarray(collection.get_offsets(), dtype=float)  # (N, 2)
        if len(xy) == 0:
            continue
        parts.append(f"{_label(collection, f'points {i + 1}')}: {len(xy)} points, "
                     f"{ax.get_xlabel() or 'x'} {number(xy[:, 0].min())} to "
                     f"{number(xy[:, 0].max())}, {ax.get_ylabel() or 'y'} "
                     f"{number(xy[:, 1].min())} to {number(xy[:, 1].max())}")
    return (_prefix(name) + "; ".join(parts) + ".", None) if parts else ("", None)


def describe(fig: Figure) -> FigureText:
    """The text alternative and the tables of `fig`, from what it draws (see the module)."""
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison
              and ax.get_label() != "<colorbar>"]
    texts: list[str] = []
    tables: list[Table] = []
    pictures = []
    brief = sum(1 for ax in panels for i in ax.get_images() if not _is_picture(i)) > 2
    for index, ax in enumerate(panels):
        name = _panel_name(ax, index) if len(panels) > 1 or ax.get_title() else ""
        for image in ax.get_images():
            if _is_picture(image):
                pictures.append(name)
                continue
            text, table = _heatmap(ax, image, name, brief)
            texts.append(text)
            tables.append(table)
        for describer in (_bars, _lines, _points):
            text, table = describer(ax, name)
            if text:
                texts.append(text)
            if table is not None:
                tables.append(table)
    # Pictures with their axes turned off (a grid of thumbnails) are still pictures.
    pictures += [_panel_name(ax, i) for i, ax in enumerate(fig.axes)
                 if not ax.axison and ax.get_visible() and ax.get_images()]
    title = fig.get_suptitle()
    head = f"Figure: {title}." if title else "Figure."
    if len(texts) > MAX_ALT_PANELS:
        peaks = sorted(((t.caption, max((float(c) for r in t.rows for c in r[1:] if c),
                                        default=0.0)) for t in tables), key=lambda p: -p[1])
        texts = [f"{len(texts)} panels ({', '.join(t.caption.split(' (')[0] for t in tables[:3])}"
                 f", …); the largest values are in " + "; ".join(
                     f"{c.split(' (')[0]} ({number(v)})" for c, v in peaks[:3])
                 + ". Every panel's numbers are in the tables."]
    if pictures:
        texts.append(f"{len(pictures)} picture{'s' if len(pictures) > 1 else ''}"
                     + (": " + "; ".join(dict.fromkeys(p for p in pictures
                                                        if p and not p.startswith("panel ")))
                        if any(p and not p.startswith("panel ") for p in pictures) else "") + ".")
    return FigureText(" ".join([head] + texts), tables)


def styles(fig: Figure) -> dict:
    """The colours and marks `fig` draws, for the palette test: each line's colour, marker and
    line style, each bar's colour and hatch, and each heatmap's colour map."""
    lines, bars, maps = [], [], []
    for ax in fig.axes:
        for line in ax.get_lines():
            lines.append({"label": _label(line, ""), "color": to_hex(line.get_color()),
                          "marker": str(line.get_marker()), "linestyle": line.get_linestyle(),
                          "axes": fig.axes.index(ax)})
        for container in ax.containers:
            if isinstance(container, BarContainer):
                for bar in container.patches:
                    bars.append({"label": _label(container, ""),
                                 "color": to_hex(bar.get_facecolor()),
                                 "hatch": bar.get_hatch() or "", "axes": fig.axes.index(ax)})
        for image in ax.get_images():
            if np.asarray(image.get_array()).ndim == 2:
                maps.append(image.get_cmap().name)
    return {"lines": lines, "bars": bars, "colormaps": maps}
