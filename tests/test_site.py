"""`make slides` and `make html` (attnlab.classroom.site): slide rules, offline pages, the site's
index; what a projector shows (attnlab.classroom.measure: slide layout in Chromium;
attnlab.classroom.figures: figure text in Python).

The builds here use a stand-in for the npm packages (`placeholder_modules`), so no test touches
the network; the browser tests open real builds in Chromium with every non-file request
refused, to prove they work offline, and measure every slide.
"""
from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
from helpers import TINY_PNG, solution_lines
from matplotlib.figure import Figure
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from playwright.sync_api import sync_playwright

from attnlab.classroom import figures, measure, site, student
from attnlab.classroom.series import NOTEBOOK_DIR, notebook_paths

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "site"


def placeholder_modules(folder: Path) -> Path:
    """A stand-in for the npm packages the slides and the site copy: node_modules under `folder`
    with web/package-lock.json's versions and the files the builds copy (placeholder
    JavaScript), so that builds in tests never need npm."""
    modules = folder / "node_modules"
    lock = json.loads((site.WEB / "package-lock.json").read_text())
    for key, meta in lock["packages"].items():
        if key.startswith("node_modules/"):
            package = modules / key.removeprefix("node_modules/")
            package.mkdir(parents=True)
            (package / "package.json").write_text(json.dumps({"version": meta["version"]}))
            (package / "LICENSE").write_text("licence text")
    for rel in ("reveal.js/dist/reveal.js", "reveal.js/dist/reveal.css",
                "reveal.js/dist/theme/white.css",
                "reveal.js/plugin/notes/notes.js", "mathjax/es5/tex-svg-full.js"):
        (modules / rel).parent.mkdir(parents=True, exist_ok=True)
        (modules / rel).write_text("/* placeholder */")
    return modules


def _code(source, outputs=(), count=1):
    cell = new_code_cell(source, execution_count=count)
    cell.outputs = list(outputs)
    return cell


def _lesson(title="Attention by hand", executed=True):
    """A small executed notebook in the series' style: heading, prose, code, result, ..."""
    count = (lambda n: n) if executed else (lambda n: None)
    return new_notebook(cells=[
        new_markdown_cell(f"# {title}\n\n"
                          "Weights are $\\mathrm{softmax}(q k^\\top / \\sqrt{d_k})$."),
        _code("import numpy as np", count=count(1)),
        new_markdown_cell("## Scores\n\n$$ s = q \\cdot k $$"),
        _code("print(0.5)", [new_output("stream", name="stdout", text="0.500\n")], count(2)),
        new_markdown_cell("A plot of it."),
        _code("plt.show()", [new_output("display_data", data={
            "image/png": base64.b64encode(TINY_PNG).decode(), "text/plain": "<Figure>"})],
              count(3)),
        new_markdown_cell("### The playground"),
        _code("playground.widget", [new_output(
            "execute_result", execution_count=4,
            data={site.WIDGET_VIEW: {"model_id": "ab" * 16, "version_major": 2, "version_minor": 0},
                  "text/plain": "VBox(children=(...))"})], count(4)),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"},
                 "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}})


@pytest.fixture
def notebooks(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    paths = []
    for name, title in (("01_by_hand", "Attention by hand"), ("02_scale", "Why <scale> & divide")):
        path = folder / f"{name}.ipynb"
        nbformat.write(_lesson(title), path)
        paths.append(path)
    return paths


@pytest.fixture
def fake_modules(tmp_path):
    """node_modules with the locked versions and the files the builds copy (placeholder content)."""
    return placeholder_modules(tmp_path)


def _local_refs(page: str) -> list[str]:
    """Relative URLs of scripts and style sheets a page loads."""
    refs = (re.findall(r'<script[^>]*\bsrc="([^"]+)"', page)
            + re.findall(r'<link[^>]*\bhref="([^"]+)"', page))
    return [r for r in refs if not urlparse(r).scheme]


# ----------------------------------------------------------------------------- rules and checks

def test_slide_types_follow_headings_and_steps_and_keep_explicit_metadata():
    nb = _lesson()
    nb.cells[4].metadata["slideshow"] = {"slide_type": "notes"}  # an author's choice wins
    typed = site.assign_slide_types(nb)
    kinds = [c.metadata["slideshow"]["slide_type"] for c in typed.cells]
    # heading, code, ## heading, code, (notes), plot code, ### heading, widget code: the notes
    # are not on screen, so the plot code follows a code cell and starts a subslide
    assert kinds == ["slide", "-", "slide", "-", "notes", "subslide", "subslide", "-"]
    assert "slideshow" not in _lesson().cells[0].metadata  # the input notebook is not modified

    steps = new_notebook(cells=[new_markdown_cell("# T"), new_markdown_cell("more prose"),
                                _code("x"), _code("plot(x)"), new_markdown_cell("so x is"),
                                new_markdown_cell("and")])
    assert [c.metadata["slideshow"]["slide_type"] for c in site.assign_slide_types(steps).cells] \
        == ["slide", "-", "-", "subslide", "subslide", "-"]


def _present(cells):
    """An executed notebook of `cells` (markdown strings or (code, printed text, metadata))."""
    out = []
    for n, cell in enumerate(cells, 1):
        if isinstance(cell, str):
            out.append(new_markdown_cell(cell))
            continue
        source, printed, metadata = cell
        outputs = [new_output("stream", name="stdout", text=printed)] if printed else []
        out.append(_code(source, outputs, n))
        out[-1].metadata.update(metadata)
    return new_notebook(cells=out)


def test_slide_view_hides_markers_plumbing_and_empty_cells_but_keeps_outputs():
    nb = _present([
        "# Title",
        ("x = 2\n### BEGIN SOLUTION\ny = x\n### END SOLUTION", "", {}),
        ("", "", {}),                                               # nothing to show
        ("fig = plot(x)\nprint('3')", "3\n", {"tags": ["hide-input"]}),
        ("", "", {"slideshow": {"slide_type": "subslide"}}),         # the author placed it
    ])
    view = site.slide_view(nb)
    assert [c.source for c in view.cells] == ["# Title", "x = 2\ny = x", "",
                                             "fig = plot(x)\nprint('3')", ""]
    hidden = [c.metadata.get("transient", {}).get("remove_source", False) for c in view.cells]
    assert hidden == [False, False, True, True, True]
    types = [c.metadata.get("slideshow", {}).get("slide_type") for c in view.cells]
    assert types == [None, None, "skip", None, "subslide"]
    assert "transient" not in nb.cells[3].metadata  # the input notebook is not modified



def test_a_predict_question_stays_open_on_the_slides():
    nb = _present([
        "# Title",
        "Some prose before the question.",
        "**Predict first.** What accuracy is left?",
        ("guess = ...  # your prediction\n### BEGIN SOLUTION\nguess = 0.5\n### END SOLUTION",
         "", {}),
        ("measured = 0.48\nguess = ex03.uniform_accuracy(guess, measured)", "✓ ...\n", {}),
        "So the model needs its attention.",
        ("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION", "", {}),
    ])
    view = site.assign_slide_types(site.slide_view(nb))
    sources = [c.source for c in view.cells]
    assert sources[3] == "guess = ...  # your prediction\n# your code here"  # no instructor guess
    assert sources[6] == "def f(x):\n    return x"  # an implement solution stays, for instructors
    kinds = [c.metadata["slideshow"]["slide_type"] for c in view.cells]
    assert kinds[1:5] == ["-", "subslide", "-", "subslide"]  # question + guess, then measurement
    with pytest.raises(ValueError, match="guess goes in a cell of its own"):
        site.slide_view(_present([("guess = 0.5\nguess = ex03.uniform_accuracy(guess, 0.48)", "",
                                   {})]))

def test_decks_and_site_leave_out_removed_cells_and_decks_hide_tagged_inputs(
        tmp_path, fake_modules):
    nb = _present([
        "# Title",
        ("weights = softmax(scores)", "", {}),
        ("for row in weights:\n    print(row)  # PLUMBING", "0.25 0.75\n",
         {"tags": ["hide-input"]}),
        "Predict: which key wins?",
        ("assert weights.argmax() == 1  # ASSERTED", "CHECKED\n", {"tags": ["remove-cell"]}),
        ("print('after')", "after\n", {}),
    ])
    nb.cells[3].metadata["slideshow"] = {"slide_type": "notes"}
    path = tmp_path / "01_view.ipynb"
    nbformat.write(nb, path)
    deck = site.build("slides", [path], tmp_path / "slides", modules=fake_modules)[0].read_text()
    page = site.build("html", [path], tmp_path / "site", modules=fake_modules)[0].read_text()
    assert "softmax" in deck and "after" in deck
    assert "PLUMBING" not in deck and "0.25 0.75" in deck  # the output, without its code
    notes = re.search(r'<aside class="notes">(.*?)</aside>', deck, re.S)
    assert notes and "Predict: which key wins?" in notes.group(1)
    assert "In&nbsp;[" not in deck  # no prompts on slides
    for text in ("PLUMBING", "0.25 0.75"):  # the site shows the code too
        assert text in page
    for text in ("ASSERTED", "CHECKED"):  # neither shows a removed cell, input or output
        assert text not in deck and text not in page
    assert "remove-cell" in nbformat.read(path, as_version=4).cells[4].metadata["tags"]


def test_describe_reads_the_title_and_the_first_paragraph():
    title, summary = site.describe(_lesson("Why divide by √d_k"), "fallback")
    assert title == "Why divide by √d_k"
    assert summary.startswith("Weights are $\\mathrm{softmax}")
    assert site.describe(new_notebook(cells=[_code("x")]), "03_x") == ("03_x", "")


def test_external_resources_finds_what_a_page_would_load_from_the_network():
    for page, remote in [
        ('<script src="https://cdn.example/require.js"></script>', "https://cdn.example/require.js"),
        ('<link rel="stylesheet" href="//cdn.example/a.css">', "//cdn.example/a.css"),
        ("<style>@import url(https://fonts.example/css);</style>", "https://fonts.example/css"),
        ("<img src='http://example.org/x.png'>", "http://example.org/x.png"),
        ("<script type=\"module\">import m from 'https://cdn.example/m.mjs';</script>",
         "https://cdn.example/m.mjs"),
        ('<div style="background: url(\'https://example.org/bg.png\')"></div>',
         "https://example.org/bg.png"),
    ]:
        assert site.external_resources(page) == [remote], page


def test_links_a_reader_may_follow_and_local_or_inline_resources_are_not_external():
    for page in ['<a href="https://arxiv.org/abs/1706.03762">paper</a>'
                 '<link rel="next" href="https://x.org/n">',
                 '<script src="_static/reveal.js/dist/reveal.js"></script>'
                 '<img src="data:image/png;base64,AA==">']:
        assert site.external_resources(page) == [], page


def test_unexecuted_notebook_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "03_train.ipynb"
    nbformat.write(_lesson(executed=False), path)
    with pytest.raises(ValueError, match=r"03_train.ipynb has code cells that were never "
                                         r"executed.*make notebooks NB=03"):
        site.load_executed(path)
    with pytest.raises(FileNotFoundError, match="make notebooks NB=05"):
        site.load_executed(tmp_path / "05_missing.ipynb")


def test_widgets_become_a_note_and_their_state_is_dropped(notebooks):
    nb = site.presentable(site.load_executed(notebooks[0]))
    assert "widgets" not in nb.metadata
    widget_output = nb.cells[-1].outputs[0]
    assert widget_output["data"] == {"text/html": site.WIDGET_NOTE}


def test_missing_vendored_packages_say_what_to_run(tmp_path, fake_modules):
    with pytest.raises(RuntimeError, match=r"reveal\.js 5\.2\.1.*run `make vendor`"):
        site.vendored(tmp_path / "vendor")
    (tmp_path / "vendor").mkdir()
    fake_modules.rename(tmp_path / "vendor" / "node_modules")
    assert site.vendored(tmp_path / "vendor") == tmp_path / "vendor" / "node_modules"


def test_bad_kind_is_refused(notebooks, fake_modules):
    with pytest.raises(ValueError, match="kind must be 'html' or 'slides', got 'pdf'"):
        site.build("pdf", notebooks, modules=fake_modules)


# ----------------------------------------------------------------------------- builds

def test_html_site_has_an_index_and_offline_pages(notebooks, fake_modules, tmp_path):
    out = tmp_path / "site"
    pages = site.build("html", notebooks, out, modules=fake_modules)
    assert [p.name for p in pages] == ["01_by_hand.html", "02_scale.html"]

    index = (out / "index.html").read_text()
    assert '<a href="01_by_hand.html">Attention by hand</a>' in index
    assert "Why &lt;scale&gt; &amp; divide" in index and "<scale>" not in index
    assert "\\mathrm{softmax}" in index  # the summary, with its math left to MathJax

    first = pages[0].read_text()
    assert "data:image/png;base64," in first  # plots are inside the page
    assert "0.500" in first and "Scores" in first
    assert site.WIDGET_NOTE in first and "widget-state+json" not in first
    assert 'href="02_scale.html"' in first and 'href="index.html"' in first  # navigation
    for page in [index, *(p.read_text() for p in pages)]:
        assert site.external_resources(page) == []
        for ref in _local_refs(page):
            assert (out / ref).exists(), ref
    assert (out / "_static/mathjax/tex-svg-full.js").exists()
    assert (out / "_static/mathjax/LICENSE").exists()
    assert not (out / "_static/reveal.js").exists()  # the site needs no reveal.js


def test_slides_are_offline_decks_with_one_section_per_slide(notebooks, fake_modules, tmp_path):
    out = tmp_path / "slides"
    decks = site.build("slides", notebooks, out, modules=fake_modules)
    assert [p.name for p in decks] == ["01_by_hand.slides.html", "02_scale.slides.html"]
    deck = decks[0].read_text()
    # slide "# Attention by hand"; slide "## Scores" with subslides "A plot of it." (prose after
    # code) and "### The playground": 2 outer <section>s holding 1 + 3 vertical ones
    body = deck[deck.index('<div class="slides">'):]
    assert body.count("<section") == 2 + 4
    assert '<script src="_static/reveal.js/dist/reveal.js"></script>' in deck
    assert "Reveal.initialize" in deck and "require(" not in deck
    for ref in _local_refs(deck):
        assert (out / ref).exists(), ref
    assert site.external_resources(deck) == []
    assert '<a href="01_by_hand.slides.html">' in (out / "index.html").read_text()


def test_code_that_looks_like_html_is_shown_as_code(fake_modules, tmp_path):
    """The templates skip nbconvert's bleach pass over highlighted code (Pygments escapes it):
    markup in a code cell must reach the page as text, never as elements."""
    nb = _lesson()
    nb.cells.insert(2, _code('html = "<b>bold</b><script>alert(1)</script>"  # markup in code'))
    path = tmp_path / "01_markup.ipynb"
    nbformat.write(nb, path)
    for kind in ("html", "slides"):
        page = site.build(kind, [path], tmp_path / kind, modules=fake_modules)[0].read_text()
        assert "&lt;b&gt;bold&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page, kind
        assert "<b>bold</b>" not in page and "<script>alert(1)" not in page, kind
        assert 'class="highlight' in page, kind  # still highlighted by Pygments


def test_rebuilding_one_notebook_keeps_the_others_in_the_index(notebooks, fake_modules, tmp_path):
    out = tmp_path / "site"
    site.build("html", notebooks, out, modules=fake_modules)
    site.build("html", notebooks[1:], out, modules=fake_modules)
    index = (out / "index.html").read_text()
    assert 'href="01_by_hand.html"' in index and 'href="02_scale.html"' in index
    assert 'href="01_by_hand.html" rel="prev"' in (out / "02_scale.html").read_text()


def test_a_page_that_would_load_from_a_cdn_is_not_written(tmp_path, fake_modules):
    nb = _lesson()
    nb.cells.append(new_markdown_cell('<img src="https://example.org/diagram.png">'))
    path = tmp_path / "06_cdn.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(RuntimeError, match=r"06_cdn.html would load from the network.*diagram.png"):
        site.build("html", [path], tmp_path / "site", modules=fake_modules)
    assert not (tmp_path / "site" / "06_cdn.html").exists()


@pytest.fixture(scope="module")
def series_decks(tmp_path_factory):
    """The decks of every stored notebook, built once for the tests below (about 10 s): with the
    real reveal.js and MathJax when `make slides` has installed them, else with placeholders."""
    stored = [p for p in notebook_paths() if p.exists()]
    if not stored:
        pytest.skip("no executed notebooks yet")
    try:
        modules = _real_modules()
    except pytest.skip.Exception:
        modules = placeholder_modules(tmp_path_factory.mktemp("node_modules"))
    return site.build("slides", stored, tmp_path_factory.mktemp("slides"), modules=modules)


@pytest.mark.integration
def test_every_stored_notebook_builds_offline(tmp_path, fake_modules, series_decks):
    stored = [p for p in notebook_paths() if p.exists()]
    pages = site.build("html", stored, tmp_path / "site", modules=fake_modules)
    decks = series_decks
    for page in pages + decks:
        text = page.read_text()
        assert site.external_resources(text) == [], page.name
        assert "<script src=\"https://" not in text
    for deck in decks:
        body = deck.read_text()
        assert body.count("<section") >= 3, f"{deck.name} has a single slide: no headings?"



def _deck_text(page: str) -> str:
    """What a deck shows as text: tags stripped, entities decoded, runs of spaces made one."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_no_deck_projects_an_answer_to_a_predict_question(series_decks):
    """Every predict exercise of every deck: the instructor's guess is on no slide, and the
    measurement is on a later slide than the question."""
    questions = 0
    for deck in series_decks:
        stem = deck.name.split(".")[0]
        nb = site.presentable(nbformat.read(NOTEBOOK_DIR / f"{stem}.ipynb", as_version=4))
        guesses = student.predict_guess_cells(nb)
        text = _deck_text(deck.read_text())
        answers = [" ".join(line.split()) for i, line in solution_lines(nb)
                   if i in guesses and line.strip()]
        assert answers and not [a for a in answers if a in text], deck.name
        view = site.assign_slide_types(site.slide_view(nb))
        for guess, check in guesses.items():
            later = {c.metadata["slideshow"]["slide_type"] for c in view.cells[guess + 1:check + 1]}
            assert later & {"slide", "subslide"}, f"{deck.name}: cell {check} is on the same slide"
        questions += len(guesses)
    assert questions >= 18, questions  # the series has 18 predict questions, 21 predict checks

# ----------------------------------------------------------------------------- in a browser

def _real_modules() -> Path:
    """node_modules with the locked reveal.js and MathJax, and Chromium; the test skips without."""
    if not measure.CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed: `apt-get install chromium`")
    try:
        return site.vendored()
    except RuntimeError as e:
        pytest.skip(str(e))


@pytest.mark.browser
def test_built_decks_and_pages_render_offline_in_chromium(tmp_path):
    """Real reveal.js and MathJax, every request that is not a local file refused."""
    modules = _real_modules()
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = _lesson()
    nb.cells.insert(4, new_markdown_cell("Ask the class: which key wins?"))
    nb.cells[4].metadata["slideshow"] = {"slide_type": "notes"}
    nbformat.write(nb, folder / "01_by_hand.ipynb")
    deck = site.build("slides", [folder / "01_by_hand.ipynb"], tmp_path / "slides",
                      modules=modules)[0]
    page_path = site.build("html", [folder / "01_by_hand.ipynb"], tmp_path / "site",
                           modules=modules)[0]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    typeset = "document.querySelectorAll('mjx-container svg').length >= 2"

    with sync_playwright() as p:
        browser = measure.browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            refused, failed = [], []
            page.route("**/*", lambda r: r.continue_()
                       if r.request.url.startswith(("file:", "data:"))
                       else (refused.append(r.request.url), r.abort()))
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.goto(deck.as_uri() + "#/1")
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
            assert page.evaluate("Reveal.getTotalSlides()") == 4
            # the speaker notes belong to the "## Scores" slide and are not on the slide itself
            assert "which key wins?" in page.evaluate("Reveal.getSlideNotes(Reveal.getSlide(1, 0))")
            assert not page.locator("aside.notes").first.is_visible()
            assert page.evaluate("typeof RevealNotes") == "function"
            page.wait_for_function(typeset, timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "slides.png"))
            page.goto(page_path.as_uri())
            page.wait_for_function(typeset, timeout=30_000)
            assert page.locator(".attnlab-widget-note").count() == 1
            page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)
        finally:
            browser.close()
    assert refused == [] and failed == []


def _figure_png(width_in: float, height_in: float, fontsize: float, dpi: int = 100) -> str:
    """A base64 PNG of a small plot drawn with `fontsize`, its smallest text recorded as the
    runner's kernels record it (attnlab.classroom.figures)."""
    fig = Figure(figsize=(width_in, height_in), dpi=dpi)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_title("weights", fontsize=fontsize + 4)
    ax.tick_params(labelsize=fontsize)
    buffer = io.BytesIO()
    with figures.drawn_text_sizes() as sizes:
        fig.savefig(buffer, format="png")
    png = figures.add_text_chunk(buffer.getvalue(), figures.KEY, f"{min(sizes):.1f}")
    return base64.b64encode(png).decode()


@pytest.mark.browser
def test_the_measure_finds_slides_too_tall_or_too_wide_and_figures_take_the_box_python_assumes(
        tmp_path):
    """The measure's own check, in Chromium: a slide that fits, one too tall, one too wide; and
    the slide's figure box as figures.smallest_text_on_slide assumes it: a wide figure shown
    across FIGURE_BOX[0] px, a tall one shrunk to FIGURE_BOX[1] px of height."""
    modules = _real_modules()
    nb = _present([
        "# Fits\n\nA short slide.",
        ("print(1)", "1\n", {}),
        "## Too tall",
        ("for i in range(60): print(i)", "".join(f"{i}\n" for i in range(60)), {}),
        "## Too wide",
        ("wide()", "", {}),
        "## Figures\n\nTwo of them.",
        ("plot()", "", {}),
    ])
    nb.cells[5].outputs = [new_output("display_data", data={
        "text/html": '<div style="width: 2000px">a row of 2000 px</div>', "text/plain": "wide"})]
    nb.cells[7].outputs = [new_output("display_data", data={"image/png": _figure_png(14, 3, 12)}),
                           new_output("display_data", data={"image/png": _figure_png(4, 8, 8)})]
    path = tmp_path / "10_sizes.ipynb"
    nbformat.write(nb, path)
    deck = site.build("slides", [path], tmp_path / "slides", modules=modules)[0]
    seen, overflowing = measure.measure([deck])
    assert seen == 4
    assert [(o["deck"], o["h"], o["v"], o["number"], o["heading"]) for o in overflowing] == [
        ("10_sizes.slides.html", 1, 0, 2, "Too tall"),
        ("10_sizes.slides.html", 2, 0, 3, "Too wide"),
        ("10_sizes.slides.html", 3, 0, 4, "Figures")]  # two figures, each as large as it may be
    # a wide output scrolls sideways in its own box (JupyterLab's output area): caught inside
    assert [o["kind"] for o in overflowing] == ["too tall", "scrolls inside", "too tall"]
    tall, wide, _ = (o["overflow"] for o in overflowing)
    assert 60 * 17 - site.SLIDE_SIZE[1] < tall < 60 * 40  # 60 lines of 17 px type, line-height > 1
    assert 2000 - site.SLIDE_SIZE[0] - 100 < wide < 2000
    assert "10_sizes.slides.html #/1/0 (slide 2)" in measure.format_overflow(overflowing)

    with sync_playwright() as p:  # the bitmap as drawn: object-fit contain keeps its aspect
        browser = measure.browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(deck.as_uri() + "#/3")
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
            shown = page.evaluate("""Array.from(document.querySelectorAll('.jp-RenderedImage img'),
                img => { const ratio = img.naturalWidth / img.naturalHeight;
                         const w = Math.min(img.clientWidth, img.clientHeight * ratio);
                         return [w, w / ratio]; })""")
        finally:
            browser.close()
    (wide_w, _), (_, tall_h) = shown
    assert wide_w == pytest.approx(figures.FIGURE_BOX[0], abs=1)
    assert tall_h == pytest.approx(figures.FIGURE_BOX[1], abs=1)


def test_a_figures_smallest_text_is_its_drawn_size_scaled_as_the_slide_shows_it():
    """1400x300 px drawn with 12 pt text (16.7 px) shown FIGURE_BOX[0] wide; 400x800 px with 8 pt
    shown FIGURE_BOX[1] tall; a diagram at its own size; no figure; no record."""
    def shown(data):
        return figures.smallest_text_on_slide(new_output("display_data", data=data))

    width, height = figures.FIGURE_BOX
    assert shown({"image/png": _figure_png(14, 3, 12)}) == pytest.approx(16.7 * width / 1400)
    # (the record holds one decimal: 12 pt at 100 dpi is 16.67 px, recorded as 16.7)
    assert shown({"image/png": _figure_png(4, 8, 8)}) == pytest.approx(
        8 * 100 / 72 * height / 800, abs=0.05)  # 7.2 px: too small
    svg = '<svg width="960" height="300"><text font-size="15">a</text><text font-size="18"/></svg>'
    assert shown({"image/svg+xml": svg}) == 15
    assert shown({"text/plain": "3"}) is None
    with pytest.raises(ValueError, match=r"a 1x1 figure records no font size: `make notebooks`"):
        shown({"image/png": base64.b64encode(TINY_PNG).decode()})


def test_every_figure_is_readable_on_the_slides():
    """Each figure a slide shows has its smallest text at least MIN_FONT_PX tall there
    (CONTRIBUTING.md, "Slides")."""
    found, small = 0, []
    for path in notebook_paths():
        nb = site.presentable(nbformat.read(path, as_version=4))
        for i, cell in enumerate(nb.cells):
            for output in cell.get("outputs", []):
                try:
                    px = figures.smallest_text_on_slide(output)
                except ValueError as e:
                    small.append(f"{path.name} cell {i}: {e}")
                    continue
                found += px is not None
                if px is not None and px < figures.MIN_FONT_PX:
                    small.append(f"{path.name} cell {i}: smallest text {px:.1f} px")
    assert found >= 30, found
    assert not small, "\n".join(small)


@pytest.fixture(scope="module")
def series_measure(series_decks):
    """Every slide of the series' decks, measured once in Chromium; screenshots of the slides
    that do not fit go to test-artifacts/site/overflow/."""
    _real_modules()  # skips without Chromium or the real reveal.js, which series_decks then lacks
    shots = ARTIFACTS / "overflow"
    shutil.rmtree(shots, ignore_errors=True)
    return measure.measure(series_decks, screenshots=shots)


@pytest.mark.browser
def test_every_slide_of_every_deck_fits_1280x720(series_decks, series_measure):
    """No slide of the series needs scrolling on a 1280x720 projector (CONTRIBUTING.md, "Slides").
    `python -m attnlab.classroom.measure` prints the same list."""
    seen, overflowing = series_measure
    assert seen >= 3 * len(series_decks)
    assert not overflowing, (
        f"{len(overflowing)} of {seen} slides need scrolling at "
        f"{site.SLIDE_SIZE[0]}x{site.SLIDE_SIZE[1]} (deck #/h/v, slide number, overflow, "
        f"heading; screenshots in {ARTIFACTS / 'overflow'}):\n"
        + measure.format_overflow(overflowing))
