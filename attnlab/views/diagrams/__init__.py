"""The series' pictures of ideas: SVG files drawn once, kept in this folder, shown in the
notebooks (and so on the site and the slides, which show the notebooks' outputs).

Every other figure of the series is a measurement; these are the ideas the measurements are of.
`DIAGRAMS` lists each file with the notebook that shows it. `show(name)` returns the picture as
an IPython display object: a cell that ends with it stores the picture in the notebook as
image/svg+xml, which nbval compares as text, so a changed file fails its notebook until the
notebook is re-recorded. The drawings keep to 960 px of width and text of at least 14 px, so
that they are legible on a 1280x720 slide (tests/test_diagrams.py).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from importlib import resources

from ...plumbing.checks import check_choice

_SVG = "{http://www.w3.org/2000/svg}"

DIAGRAMS = {  # name: (notebook, what it shows)
    "qkv_heads": ("01", "queries, keys and values, split into heads, attended, merged"),
    "encoder_block": ("03", "the encoder block: attention, add and norm, feed-forward"),
    "causal_mask": ("08", "the causal mask, and the causal mask with padding"),
    "kv_cache_gqa": ("09", "one decoding step with a KV cache and grouped-query heads"),
    "online_softmax_tiles": ("09", "the online softmax: tiles, a running maximum and sums"),
    "induction_circuit": ("10", "a previous-token head, then an induction head"),
}


def svg_text(name: str) -> str:
    """The SVG file of diagram `name`, as text."""
    check_choice("name", name, tuple(DIAGRAMS))
    return resources.files(__name__).joinpath(f"{name}.svg").read_text(encoding="utf-8")


def alt_text(name: str) -> str:
    """What diagram `name` shows, in words: its `<title>`, then its `<desc>`. The site and the
    decks show a diagram as an image, which hides the SVG's own text from a screen reader, so
    this goes into the image's alt (attnlab-page and attnlab-slides templates)."""
    root = ET.fromstring(svg_text(name))
    title, desc = (root.find(_SVG + tag).text.strip() for tag in ("title", "desc"))
    return f"Diagram: {title}. {desc}"


def show(name: str):
    """Diagram `name` for a notebook cell to display (IPython's SVG object, its `alt_text` in
    the output's metadata)."""
    from IPython.display import SVG  # noqa: PLC0415 - a kernel has IPython; the library need not

    return SVG(data=svg_text(name), metadata={"alt": alt_text(name)})
