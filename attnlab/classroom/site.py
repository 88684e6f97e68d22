"""The classroom outputs of the series: `make slides` and `make html` (and `make run`'s pages).

`make slides` turns each executed notebook into a reveal.js deck; `make html` turns the series
into a static site (an index and one page per notebook, plots included) that reads without
Jupyter; `make run` writes the notebooks it has just executed as the same pages. Slides and site
are built from the stored, executed .ipynb files (nothing is re-run) and both work offline once
built: every script and style sheet they load is a file beside them. reveal.js and MathJax come
from the npm registry, pinned by web/package-lock.json and installed by `make vendor` (which
`make slides` and `make html` run) into build/vendor/, then copied next to the pages; a build
that would make a page load anything from the network fails instead of writing it.

Cells tagged `remove-cell` (asserts, CI plumbing) are left out of both, as out of the student
edition. Slides follow the cells' `slideshow` metadata where a cell has it (JupyterLab's property
inspector or `# %% slideshow={"slide_type": "skip"}` in the .py source set it); every other cell
gets a slide type by the rule in `assign_slide_types`, so a notebook is presentable without any.
A slide shows what a class needs to see (`slide_view`): a cell tagged `hide-input` shows its
outputs only, and a markdown cell with `slide_type: notes` becomes speaker notes (key S). Every
slide must fit the configured 1280x720 without scrolling, and every figure must be readable
there: `python -m attnlab.classroom.measure` lists the slides that do not fit, and
attnlab.classroom.figures checks the figures' text.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import nbformat
from nbconvert import HTMLExporter, SlidesExporter
from nbconvert.filters import markdown2html

from .series import HIDE_INPUT, NOTEBOOK_DIR, notebook_paths
from .series import add_argument as add_notebooks_argument
from .student import MARKER, predict_guess_cells, strip_solutions, without_removed_cells

REPO = NOTEBOOK_DIR.parent
WEB = REPO / "web"
TEMPLATES = WEB / "templates"
BUILD = REPO / "build"
STATIC = "_static"  # folder beside the pages that holds the vendored JavaScript
SLIDE_SIZE = (1280, 720)  # reveal.js's configured slide size (px); a slide must fit it

# What each output copies from node_modules/ (left) to _static/ (right). MathJax's
# tex-svg-full.js is one file that needs no fonts or other components at run time.
_REVEAL_FILES = {"reveal.js/dist": "reveal.js/dist",
                 "reveal.js/plugin/notes": "reveal.js/plugin/notes",
                 "reveal.js/LICENSE": "reveal.js/LICENSE"}
_MATHJAX_FILES = {"mathjax/es5/tex-svg-full.js": "mathjax/tex-svg-full.js",
                  "mathjax/LICENSE": "mathjax/LICENSE"}

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ('<div class="attnlab-widget-note"><p><strong>Interactive widget.</strong> It needs '
               "a running Python kernel: open this notebook in JupyterLab "
               "(<code>make lab</code>) and run it to use the widget.</p></div>")

_HEADING = re.compile(r"^\s*(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
_CSS_URL = re.compile(r"""(?:@import\s+|url\()\s*['"]?\s*((?:https?:)?//[^'")\s;]+)""",
                      re.IGNORECASE)
_JS_IMPORT = re.compile(r"""\bimport\b[^'"]*?['"]((?:https?:)?//[^'"]+)['"]""")


# ----------------------------------------------------------------------------- notebooks

def _heading(cell) -> tuple[int, str] | None:
    """(level, text) of the markdown heading a cell starts with, or None."""
    if cell.cell_type != "markdown":
        return None
    for line in cell.source.splitlines():
        if line.strip():
            m = _HEADING.match(line)
            return (len(m.group(1)), m.group(2)) if m else None
    return None


def assign_slide_types(nb):
    """A copy of `nb` in which every cell has `slideshow.slide_type`.

    A cell's own `slideshow` metadata always wins. Every other cell gets one by a rule that
    follows how the notebooks are written (heading, prose, code, result, prose, code, ...):
    a `#`/`##` heading starts a new slide, a `###` or deeper heading a new vertical subslide,
    and any cell that follows a code cell starts a subslide, so that each step of the argument
    (its explanation, its code, its result) gets a screen of its own. Prose after prose and the
    code that prose introduces continue the current slide.

    Speaker notes and skipped cells are not on the screen, so they do not count as the cell
    before: the code after a notes cell is placed as if the notes were not there.
    """
    nb = copy.deepcopy(nb)
    previous = None
    for cell in nb.cells:
        show = dict(cell.metadata.get("slideshow") or {})
        if "slide_type" not in show:
            heading = _heading(cell)
            if heading is not None:
                show["slide_type"] = "slide" if heading[0] <= 2 else "subslide"
            elif previous is not None and previous.cell_type == "code":
                show["slide_type"] = "subslide"
            else:
                show["slide_type"] = "-"
            cell.metadata["slideshow"] = show
        if show["slide_type"] not in {"notes", "skip"}:
            previous = cell
    return nb


def _on_screen(cell) -> bool:
    """Whether a cell shows on a slide: not speaker notes, not skipped, not empty code."""
    kind = (cell.metadata.get("slideshow") or {}).get("slide_type")
    if kind in {"notes", "skip"}:
        return False
    return cell.cell_type == "markdown" or bool(cell.source.strip()) or bool(cell.get("outputs"))


def slide_view(nb):
    """A copy of `nb` showing what belongs on a slide.

    Code cells lose the `### BEGIN/END SOLUTION` marker lines around exercise solutions (an
    implement exercise's solution stays: instructors present the full edition). A predict
    exercise's guess cell shows what students have, `...`, not the instructor's guess, and the
    question before it and the cell after it start a subslide: projected, the question stays
    open until the class has guessed, and the measurement comes a slide later. A code cell tagged
    `hide-input` (plotting plumbing, long helper calls) shows its outputs only; a code cell with
    nothing to show is skipped unless its own metadata places it. Markdown, including speaker
    notes (`slide_type: notes`, rendered by reveal's notes plugin), is unchanged. Cells tagged
    `remove-cell` are gone before this (`build`).
    """
    nb = copy.deepcopy(nb)
    for guess in predict_guess_cells(nb):
        # The question stays open: the guess cell is shown as students have it, and the
        # question, its guess and the measurement after it each start a screen of their own.
        nb.cells[guess].source = strip_solutions(nb.cells[guess].source)
        shown = [j for j in range(guess + 1, len(nb.cells)) if _on_screen(nb.cells[j])]
        question = next((j for j in range(guess - 1, -1, -1) if _on_screen(nb.cells[j])), None)
        for j in ([question] if question is not None else []) + shown[:1]:
            show = nb.cells[j].metadata.setdefault("slideshow", {})
            if show.get("slide_type") not in {"slide", "subslide"}:
                show["slide_type"] = "slide" if _heading(nb.cells[j]) else "subslide"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = "\n".join(line for line in cell.source.split("\n") if not MARKER.match(line))
        if HIDE_INPUT in cell.metadata.get("tags", []) or not cell.source.strip():
            cell.metadata["transient"] = {**cell.metadata.get("transient", {}),
                                          "remove_source": True}
            if not cell.get("outputs"):
                show = dict(cell.metadata.get("slideshow") or {})
                show.setdefault("slide_type", "skip")
                cell.metadata["slideshow"] = show
    return nb


def describe(nb, fallback: str) -> tuple[str, str]:
    """(title, summary markdown) of a notebook: its first heading and the paragraph after it."""
    for cell in nb.cells:
        heading = _heading(cell)
        if heading is None:
            continue
        rest = cell.source.strip().split("\n", 1)[1] if "\n" in cell.source.strip() else ""
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", rest) if p.strip()]
        summary = next((p for p in paragraphs if not _HEADING.match(p.splitlines()[0])), "")
        return heading[1], summary
    return fallback, ""


def load_executed(ipynb: Path):
    """The stored notebook, checked to be executed: a page must show real outputs."""
    if not ipynb.exists():
        raise FileNotFoundError(
            f"{ipynb} does not exist: execute the notebook first with "
            f"`make notebooks NB={ipynb.name[:2]}`")
    nb = nbformat.read(ipynb, as_version=4)
    unrun = [i for i, c in enumerate(nb.cells, 1)
             if c.cell_type == "code" and c.source.strip() and c.get("execution_count") is None]
    if unrun:
        raise ValueError(
            f"{ipynb.name} has code cells that were never executed (cells {unrun[:5]}"
            f"{' ...' if len(unrun) > 5 else ''}); the site shows stored outputs only: "
            f"run `make notebooks NB={ipynb.name[:2]}` first")
    return nb


def presentable(nb):
    """A copy of the executed `nb` as a page shows it: without its `remove-cell` cells, and with
    each widget view (a widget needs a live kernel) replaced by a note that says so; the saved
    widget state is dropped. The notebooks print a static view computed by the same code first."""
    nb = without_removed_cells(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                output["data"] = {"text/html": WIDGET_NOTE}
    return nb


# ----------------------------------------------------------------------------- offline check

class _ResourceFinder(HTMLParser):
    """Collects every URL an HTML page loads by itself (scripts, styles, images, frames)."""

    _LOADS = {"script": "src", "img": "src", "iframe": "src", "embed": "src", "source": "src",
              "audio": "src", "video": "src", "track": "src", "object": "data", "link": "href"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        wanted = self._LOADS.get(tag)
        if wanted and attrs.get(wanted):
            rel = (attrs.get("rel") or "").lower()
            if tag != "link" or not rel or rel not in {"prev", "next", "canonical", "alternate"}:
                self.urls.append(attrs[wanted])
        if attrs.get("style"):
            self.urls += _CSS_URL.findall(attrs["style"])
        self._in = tag if tag in {"style", "script"} else None

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "style":
            self.urls += _CSS_URL.findall(data)
        elif self._in == "script":
            self.urls += _JS_IMPORT.findall(data)


def external_resources(page: str) -> list[str]:
    """The URLs on the network (http, https or protocol-relative) that `page` would load.

    Links a reader may click are not loads and are not listed; scripts, style sheets, CSS
    imports, images, frames and ES-module imports are.
    """
    finder = _ResourceFinder()
    finder.feed(page)
    finder.close()
    return sorted({u for u in finder.urls if _EXTERNAL.match(u)})


# ----------------------------------------------------------------------------- vendored JavaScript

def _locked_versions() -> dict[str, str]:
    lock = json.loads((WEB / "package-lock.json").read_text(encoding="utf-8"))
    return {name.removeprefix("node_modules/"): meta["version"]
            for name, meta in lock["packages"].items() if name.startswith("node_modules/")}


def vendored(directory: Path | None = None) -> Path:
    """node_modules holding the locked reveal.js and MathJax (default build/vendor/node_modules).

    `make vendor` installs them there with `npm ci` from web/package-lock.json, once; every
    build after that works offline. Raises RuntimeError, saying what to run, when they are
    missing or not the locked versions.
    """
    directory = Path(directory) if directory is not None else BUILD / "vendor"
    modules = directory / "node_modules"
    wanted = _locked_versions()
    found = {}
    for name in wanted:
        meta = modules / name / "package.json"
        found[name] = (json.loads(meta.read_text(encoding="utf-8"))["version"]
                       if meta.exists() else None)
    if found != wanted:
        pins = ", ".join(f"{k} {v}" for k, v in wanted.items())
        raise RuntimeError(
            f"the slides and the site need {pins} in {modules}: run `make vendor` (it installs "
            f"them from the npm registry with `npm ci`, once; Node.js and npm needed: Debian's "
            f"`apt-get install npm`)")
    return modules


def _copy_vendored(modules: Path, out: Path, files: dict[str, str]) -> None:
    """Copy node_modules/<key> to out/_static/<value> for each entry of `files`."""
    for rel, dest in files.items():
        source, target = modules / rel, out / STATIC / dest
        if not source.exists():
            raise RuntimeError(f"{source} is missing from the vendored packages: "
                               f"delete {modules.parent} and rebuild")
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


# ----------------------------------------------------------------------------- building

def _exporter(kind: str):
    common = dict(extra_template_basedirs=[str(TEMPLATES)], extra_template_paths=[str(TEMPLATES)],
                  theme="light", exclude_anchor_links=True)
    if kind == "slides":
        # reveal.js lays every slide out at this size and scales it to the screen, so a deck
        # looks the same on any projector; In/Out prompts would only take width from the code.
        return SlidesExporter(template_name="attnlab-slides",
                              reveal_url_prefix=f"{STATIC}/reveal.js", reveal_theme="white",
                              reveal_transition="slide", reveal_number="c/t",
                              reveal_width=str(SLIDE_SIZE[0]), reveal_height=str(SLIDE_SIZE[1]),
                              exclude_input_prompt=True, exclude_output_prompt=True, **common)
    return HTMLExporter(template_name="attnlab-page", **common)


def _write_checked(path: Path, page: str) -> Path:
    """Write `page` unless it would load something from the network."""
    remote = external_resources(page)
    if remote:
        raise RuntimeError(f"{path.name} would load from the network, so it would not work "
                           f"offline: {remote}")
    path.write_text(page, encoding="utf-8")
    return path


def _index_page(title: str, intro: str, rows: list[tuple[str, str, str]]) -> str:
    """A small self-contained index: rows of (title, href, summary markdown), in series order
    (web/templates/site-index.html.j2; names and links escaped, `intro` is trusted HTML)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    return env.get_template("site-index.html.j2").render(
        title=title, intro=intro, static=STATIC,
        rows=[(name, href, markdown2html(summary) if summary else "")
              for name, href, summary in rows])


def build(kind: str, ipynbs: list[Path] | None = None, out: Path | None = None,
          modules: Path | None = None, executed: dict | None = None,
          require_vendored: bool = True) -> list[Path]:
    """Build `kind` ("html" or "slides") from the executed notebooks `ipynbs` (default: all).

    Writes into `out` (default build/site or build/slides) one page per notebook, the vendored
    JavaScript under _static/ and an index.html; returns the paths of the pages written. The
    index and the prev/next links also cover pages of sibling notebooks already in `out`, so
    rebuilding one notebook (`make slides NB=02`) keeps the others listed. `executed` maps a
    path of `ipynbs` to its notebook just executed in memory (`make run`), used instead of the
    stored one. `modules` is the vendored node_modules (default: `vendored()`); without
    `require_vendored`, missing ones are not copied and the pages show equations as TeX.
    """
    if kind not in {"html", "slides"}:
        raise ValueError(f"kind must be 'html' or 'slides', got {kind!r}")
    out = Path(out) if out is not None else BUILD / ("site" if kind == "html" else "slides")
    ipynbs = notebook_paths() if ipynbs is None else [Path(p) for p in ipynbs]
    if not ipynbs:
        raise ValueError(f"no notebooks found in {NOTEBOOK_DIR}")
    suffix = ".slides.html" if kind == "slides" else ".html"
    executed = executed or {}
    notebooks = {p: presentable(executed[p] if p in executed else load_executed(p))
                 for p in ipynbs}
    if modules is None:
        try:
            modules = vendored()
        except RuntimeError:
            if require_vendored:
                raise

    built_before = {q for p in ipynbs for q in p.parent.glob("[0-9][0-9]_*.ipynb")
                    if q not in notebooks and (out / f"{q.stem}{suffix}").exists()}
    listed = sorted([*notebooks, *built_before], key=lambda p: p.name)
    titles = {p: describe(notebooks[p] if p in notebooks else nbformat.read(p, as_version=4),
                          p.stem)
              for p in listed}

    out.mkdir(parents=True, exist_ok=True)
    if modules is not None:
        _copy_vendored(Path(modules), out,
                       {**_MATHJAX_FILES, **(_REVEAL_FILES if kind == "slides" else {})})
    exporter = _exporter(kind)
    written = []
    for path, nb in notebooks.items():
        i = listed.index(path)
        neighbours = {"prev": listed[i - 1] if i else None,
                      "next": listed[i + 1] if i + 1 < len(listed) else None}
        nav = {side: {"href": f"{q.stem}{suffix}", "title": titles[q][0]}
               for side, q in neighbours.items() if q}
        resources = {"metadata": {"name": titles[path][0], "path": str(path.parent)},
                     "attnlab": {"static": STATIC, "nav": nav}}
        if kind == "slides":
            nb = assign_slide_types(slide_view(nb))
        page, _ = exporter.from_notebook_node(nb, resources=resources)
        written.append(_write_checked(out / f"{path.stem}{suffix}", page))

    rows = [(titles[p][0], f"{p.stem}{suffix}", titles[p][1]) for p in listed]
    if kind == "slides":
        index = _index_page("attnlab: slides", "One reveal.js deck per notebook. Keys: arrows or "
                            "space to move, <kbd>S</kbd> for speaker notes, <kbd>F</kbd> for full "
                            "screen, <kbd>Esc</kbd> for the overview.", rows)
    else:
        index = _index_page("attnlab: attention, built by hand", "The notebooks of the series with "
                            "their outputs, readable without Jupyter. To run them and use the "
                            "widgets, open them in JupyterLab with <code>make lab</code>.", rows)
    _write_checked(out / "index.html", index)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.site", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["html", "slides"],
                        help="html: the static site; slides: reveal.js decks")
    parser.add_argument("names", nargs="*", help="notebook names or NN prefixes (default: all)")
    parser.add_argument("--out", type=Path,
                        help="output folder (default build/site or build/slides)")
    add_notebooks_argument(parser)
    args = parser.parse_args(argv)
    try:
        pages = build(args.kind, notebook_paths(args.names, args.notebooks), args.out)
    except (RuntimeError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    index = pages[0].parent / "index.html"
    noun = "deck" if args.kind == "slides" else "page"
    print(f"{len(pages)} {noun}{'s' if len(pages) != 1 else ''} written; open {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
