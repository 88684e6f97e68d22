"""Figures on the slides: readable from the back of a room, checked in Python.

A slide shows a figure as large as the slide lets it (web/templates/attnlab-slides: the width of
its output area, FIGURE_BOX[0] px of the 1280x720 slide, unless that makes it taller than
FIGURE_BOX[1] px; the bitmap keeps its aspect). Its smallest text must be at least MIN_FONT_PX
tall there: the size it was drawn at, scaled as the figure is (`smallest_text_on_slide`). That
scale follows from the figure's size alone; a browser test checks the box it assumes.

The drawn size cannot be read back from the pixels, so it is recorded when the figure is drawn,
in the PNG itself: a `tEXt` chunk `attnlab:min-font-px` holding the size, in pixels of the PNG,
of the smallest text drawn into it. A drawn diagram (SVG) states its font sizes itself.

This module is an IPython extension that the runner loads into every kernel it starts
(`make run`, `make notebooks`; `--InteractiveShellApp.extra_extensions`). It wraps the PNG
display formatter that the inline backend registers for matplotlib figures (when the first
figure is created, so the wrapping happens at registration): while the inline
backend draws a figure into a PNG, every text actually drawn (visible, not empty, tick labels of
visible ticks only) reports its size, `fontsize * dpi / 72`, and the chunk is added to the PNG the
formatter returns. Why this way:

- the lesson code (attnlab.views.plots, the notebooks) is not touched and cannot forget it;
- the pixels shown are the same bytes as without it; only a metadata chunk is added;
- the size is the drawn one (after the figure's own rcParams, `fontsize=` arguments and the print
  dpi), not a guess from rcParams;
- students' own kernels (JupyterLab) never load it.
"""
from __future__ import annotations

import base64
import functools
import re
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib.figure import Figure
from matplotlib.text import Text

KEY = "attnlab:min-font-px"
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURE_BOX = (1272, 520)  # px of the 1280x720 slide: a figure's width, and the most height it takes
MIN_FONT_PX = 14  # the smallest text a figure may show on the slide
_SIZE = re.compile(r"<svg[^>]*?\bwidth=\"([\d.]+)\"[^>]*?\bheight=\"([\d.]+)\"")
_FONT_SIZE = re.compile(r"font-size=\"([\d.]+)")


def smallest_text_on_slide(output: dict) -> float | None:
    """The height in slide pixels of the smallest text of a figure output (a PNG, or an SVG
    diagram drawn at its own size and shrunk to fit), or None for an output that holds no figure.
    Raises ValueError for a PNG that records no font size (stored before the record existed:
    `make notebooks`)."""
    data = output.get("data", {})
    if "image/png" in data:
        png = base64.b64decode("".join(data["image/png"]))
        width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk, first in every PNG
        font = text_chunks(png).get(KEY)
        if font is None:
            raise ValueError(f"a {width}x{height} figure records no font size: `make notebooks`")
        return float(font) * min(FIGURE_BOX[0] / width, FIGURE_BOX[1] / height)
    if "image/svg+xml" in data:
        svg = "".join(data["image/svg+xml"])
        width, _ = map(float, _SIZE.search(svg).groups())
        sizes = [float(size) for size in _FONT_SIZE.findall(svg)] or [16.0]  # SVG's default
        return min(sizes) * min(1.0, FIGURE_BOX[0] / width)  # max-width: 100%, never larger
    return None


def add_text_chunk(png: bytes, key: str, value: str) -> bytes:
    """`png` with a tEXt chunk `key`=`value` right after its header (replacing one with the same
    key)."""
    chunks = [(kind, data) for kind, data in _chunks(png)
              if not (kind == b"tEXt" and data.split(b"\0", 1)[0] == key.encode("latin-1"))]
    text = key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunks.insert(1, (b"tEXt", text))
    return _SIGNATURE + b"".join(struct.pack(">I", len(data)) + kind + data
                                 + struct.pack(">I", zlib.crc32(kind + data))
                                 for kind, data in chunks)


def text_chunks(png: bytes) -> dict[str, str]:
    """The tEXt chunks of `png`, keyword -> text."""
    found = {}
    for kind, data in _chunks(png):
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
    return found


def _chunks(png: bytes) -> Iterator[tuple[bytes, bytes]]:
    if not png.startswith(_SIGNATURE):
        raise ValueError("png: not a PNG file (no PNG signature)")
    at = len(_SIGNATURE)
    while at < len(png):
        (length,) = struct.unpack(">I", png[at:at + 4])
        yield png[at + 4:at + 8], png[at + 8:at + 8 + length]
        at += 12 + length


@contextmanager
def drawn_text_sizes() -> Iterator[list[float]]:
    """Collects the size in output pixels of every text matplotlib draws inside the block."""
    sizes: list[float] = []
    original = Text.draw

    @functools.wraps(original)  # keeps the rasterization flag matplotlib's decorator set
    def draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            sizes.append(self.get_fontsize() * self.figure.dpi / 72)
        return original(self, renderer)

    Text.draw = draw
    try:
        yield sizes
    finally:
        Text.draw = original


def recording_min_font(print_png):
    """Wrap an IPython PNG formatter function for figures so that its PNG carries `KEY`."""
    if getattr(print_png, "_records_min_font", False):
        return print_png

    def png(fig):
        with drawn_text_sizes() as sizes:
            result = print_png(fig)
        data, metadata = result if isinstance(result, tuple) else (result, None)
        if data is None or not sizes:
            return result
        raw = base64.b64decode(data) if isinstance(data, str) else data
        raw = add_text_chunk(raw, KEY, f"{min(sizes):.1f}")
        data = base64.b64encode(raw).decode("ascii") if isinstance(data, str) else raw
        return (data, metadata) if isinstance(result, tuple) else data

    png._records_min_font = True
    return png


def load_ipython_extension(shell) -> None:
    """Wrap the figure PNG formatter, now and whenever one is registered: the inline backend
    registers its own when the kernel's first figure is created, in the cell that shows it."""
    formatter = shell.display_formatter.formatters["image/png"]
    register = formatter.for_type

    def for_type(typ, func=None):
        if typ is Figure and func is not None:
            func = recording_min_font(func)
        return register(typ, func)

    formatter.for_type = for_type
    current = formatter.type_printers.get(Figure)
    if current is not None:
        for_type(Figure, current)
