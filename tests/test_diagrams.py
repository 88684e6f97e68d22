"""The pictures of ideas (attnlab.views.diagrams): each one legible on a 1280x720 slide, and shown,
as stored, by the notebook it belongs to."""
import xml.etree.ElementTree as ET

import nbformat
import pytest
from helpers import ROOT

from attnlab.views import diagrams

SVG = "{http://www.w3.org/2000/svg}"
FOLDER = ROOT / "attnlab" / "views" / "diagrams"
MIN_FONT = 14  # px: the slides' rule for the smallest text of a figure (CONTRIBUTING.md)


def texts_with_sizes(element, inherited=16.0):
    """(text, font size) of every text and tspan, font-size inherited as SVG does (16 px
    when nothing sets it)."""
    size = float(element.get("font-size", inherited))
    if element.tag in (SVG + "text", SVG + "tspan") and (element.text or "").strip():
        yield element.text.strip(), size
    for child in element:
        yield from texts_with_sizes(child, size)


def test_every_file_is_listed_and_every_listed_file_exists():
    assert sorted(p.stem for p in FOLDER.glob("*.svg")) == sorted(diagrams.DIAGRAMS)
    assert len(diagrams.DIAGRAMS) >= 6


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_a_diagram_fits_a_slide_and_its_smallest_text_is_legible(name):
    root = ET.fromstring(diagrams.svg_text(name))
    x, y, width, height = map(float, root.get("viewBox").split())
    assert (x, y) == (0, 0) and width <= 960 and height <= 420, "fits under a slide's heading"
    assert (float(root.get("width")), float(root.get("height"))) == (width, height)  # 1 unit: 1 px
    assert "max-width:100%" in root.get("style", "").replace(" ", "")  # shrinks, never overflows
    # What a screen reader says: the title as its name, the description after it (issue 50),
    # with ids of its own so that two diagrams on one page never share one.
    title, desc = root.find(SVG + "title"), root.find(SVG + "desc")
    assert root.get("role") == "img"
    assert title.text.strip() and title.get("id") == root.get("aria-labelledby") == f"title-{name}"
    assert len(desc.text.split()) >= 30 and desc.get("id") == root.get("aria-describedby") == (
        f"desc-{name}")
    sizes = list(texts_with_sizes(root))
    assert sizes and min(s for _, s in sizes) >= MIN_FONT, [t for t in sizes if t[1] < MIN_FONT]


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_its_notebook_shows_it_as_stored(name):
    stem = diagrams.DIAGRAMS[name][0]
    (path,) = (ROOT / "notebooks").glob(f"{stem}_*.ipynb")
    nb = nbformat.read(path, as_version=4)
    call = f'diagrams.show("{name}")'
    cells = [c for c in nb.cells if c.cell_type == "code" and call in c.source]
    assert len(cells) == 1, f"{path.name} shows {name} once"
    (output,) = cells[0].outputs
    assert output["data"]["image/svg+xml"].strip() == diagrams.show(name).data.strip()
    # its words, which the site and the decks make the picture's alt text
    assert output["metadata"]["image/svg+xml"]["alt"] == diagrams.alt_text(name)
    assert "hide-input" in cells[0].metadata.get("tags", [])  # the picture, not the call


def test_an_unknown_name_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="encoder_block"):
        diagrams.show("encoder")
