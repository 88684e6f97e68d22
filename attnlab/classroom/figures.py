"""Figures that record the smallest text they hold, for the slides' readability measurement.

A slide shows a figure as a PNG scaled to the width it is given; whether its smallest text is
readable from the back of a room (14 px on the 1280x720 slide) depends on the font size the
figure was drawn with and on that scale. The scale is measured in the browser
(`site.measure`); the font size cannot be read back from the pixels, so it is recorded when the
figure is drawn, in the PNG itself: a `tEXt` chunk `attnlab:min-font-px` holding the size, in
pixels of the PNG, of the smallest text drawn into it.

This module is an IPython extension that the runner loads into every kernel it starts
(`make run`, `make notebooks`; `--InteractiveShellApp.extra_extensions`). It wraps the PNG
display formatter that the inline backend registers for matplotlib figures (when the first
figure is created, so the wrapping happens at registration): while the inline
backend draws a figure into a PNG, every text actually drawn (visible, not empty, tick labels of
visible ticks only) reports its size, `fontsize * dpi / 72`, and the chunk is added to the PNG the
formatter returns. Why this way:

- the lesson code (attnlab.plots, the notebooks) is not touched and cannot forget it;
- the pixels shown are the same bytes as without it; only a metadata chunk is added;
- the size is the drawn one (after the figure's own rcParams, `fontsize=` arguments and the print
  dpi), not a guess from rcParams;
- students' own kernels (JupyterLab) never load it.
"""
from __future__ import annotations

import base64
import functools
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib.figure import Figure
from matplotlib.text import Text

KEY = "attnlab:min-font-px"
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
