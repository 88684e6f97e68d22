"""What a projector shows: every slide of the built decks measured in Chromium.

A slide is what an instructor shows on a projector (CONTRIBUTING.md, "Slides and figures"): it
fits the 1280x720 canvas without scrolling, and each figure on it fills the width it is given
and its smallest text is at least 14 px tall there. reveal.js lays every slide out at the
configured size and scales the whole canvas to the screen, so everything here is measured in
canvas pixels, where that scale does not enter.

    python -m attnlab.classroom.measure [NN ...] [--screenshots DIR]

builds the decks (as `make slides`), visits every slide and lists the slides that do not fit
and the figures that are not readable; it exits 1 if there is any. The smallest font size of a
figure is the one recorded in its PNG when it was drawn (attnlab.classroom.figures, loaded by
the runner into every kernel of `make notebooks`), or for a drawn diagram (attnlab.diagrams,
SVG) the smallest font-size it sets; a figure stored before that has no record and is listed
as such. Needs Debian's Chromium (/usr/bin/chromium) and Playwright (a test tool,
in requirements-dev.txt).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from . import series, site
from .figures import KEY as FONT_KEY
from .series import notebook_paths

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; Playwright drives it
SLIDE_SIZE = site.SLIDE_SIZE
MIN_FONT_PX = 14  # the smallest text a figure may show on the 1280x720 slide
MIN_FILL = 0.95   # the share of the width it is given that a figure must fill

# Runs in the deck. The current slide's scrollHeight/scrollWidth (its content, the slide being a
# top-aligned `section` at the canvas's height) against the configured height/width, and, inside
# it, any element that scrolls by itself (overflow auto/scroll with more content than box). Each
# <img> outside the speaker notes: its natural size (the PNG's pixels), its rendered size (layout
# pixels, which reveal's scaling does not change: the bitmap as drawn inside the element, which
# `object-fit: contain` keeps at its aspect), the width it is given (its output area's content
# width, or less for a figure whose aspect the slide's `max-height` for figures limits), and the
# FONT_KEY tEXt chunk of a PNG data URI. MathJax, fonts and images are waited for first: all
# change sizes.
_MEASURE_JS = """async (fontKey) => {
  Reveal.configure({transition: 'none', backgroundTransition: 'none'});
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  await Promise.all(Array.from(document.images, img => img.decode().catch(() => null)));
  const pngText = (src) => {
    if (!src.startsWith('data:image/png;base64,')) return {};
    const bin = atob(src.slice(src.indexOf(',') + 1));
    const u32 = (i) => ((bin.charCodeAt(i) << 24) >>> 0) + (bin.charCodeAt(i + 1) << 16)
                       + (bin.charCodeAt(i + 2) << 8) + bin.charCodeAt(i + 3);
    const found = {};
    for (let at = 8; at + 8 <= bin.length;) {
      const length = u32(at), kind = bin.slice(at + 4, at + 8);
      if (kind === 'tEXt') {
        const data = bin.slice(at + 8, at + 8 + length), nul = data.indexOf('\\0');
        found[data.slice(0, nul)] = data.slice(nul + 1);
      }
      if (kind === 'IDAT' || kind === 'IEND') break;  // text chunks come before the image data
      at += 12 + length;
    }
    return found;
  };
  const svgFont = (src) => {  // a drawn diagram: the smallest font-size it sets (16: SVG's default)
    if (!src.startsWith('data:image/svg+xml')) return undefined;
    const head = src.slice(0, src.indexOf(',')), body = src.slice(src.indexOf(',') + 1);
    const text = head.endsWith(';base64') ? atob(body) : decodeURIComponent(body);
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const sizes = Array.from(doc.querySelectorAll('[font-size]'),
                             e => parseFloat(e.getAttribute('font-size')));
    return sizes.length ? Math.min(...sizes) : 16;
  };
  const size = Reveal.getComputedSlideSize();
  const slides = [], figures = [];
  const stacks = Reveal.getHorizontalSlides();
  for (let h = 0; h < stacks.length; h++) {
    const n = Math.max(1, stacks[h].querySelectorAll(':scope > section').length);
    for (let v = 0; v < n; v++) {
      Reveal.slide(h, v);
      const slide = Reveal.getCurrentSlide();
      let inner = 0;
      for (const el of slide.querySelectorAll('*')) {
        if (el.closest('aside.notes')) continue;
        const style = getComputedStyle(el);
        if (/auto|scroll/.test(style.overflowY))
          inner = Math.max(inner, el.scrollHeight - el.clientHeight);
        if (/auto|scroll/.test(style.overflowX))
          inner = Math.max(inner, el.scrollWidth - el.clientWidth);
      }
      const heading = slide.querySelector('h1, h2, h3, h4, h5, h6')
        || slide.querySelector('.jp-RenderedMarkdown') || slide;
      const text = heading.textContent.replace(/\\s+/g, ' ').trim().slice(0, 60);
      const number = slides.length + 1;
      slides.push({h: h, v: v, number: number, heading: text,
                   height: slide.scrollHeight - size.height, width: slide.scrollWidth - size.width,
                   inner: inner});
      let nth = 0;
      for (const img of slide.querySelectorAll('img')) {
        if (img.closest('aside.notes') || img.closest('section') !== slide) continue;
        const parent = getComputedStyle(img.parentElement);
        const ratio = img.naturalWidth / Math.max(1, img.naturalHeight);
        // the width it is given: its output area's, or less for a figure too tall for the
        // height a figure may take (max-height), at its own aspect
        const maxHeight = parseFloat(getComputedStyle(img).maxHeight);
        const area = img.parentElement.clientWidth - parseFloat(parent.paddingLeft)
                     - parseFloat(parent.paddingRight);
        const given = isFinite(maxHeight) ? Math.min(area, maxHeight * ratio) : area;
        // the bitmap as drawn: object-fit contain keeps its aspect inside the element's box
        const shownW = Math.min(img.clientWidth, img.clientHeight * ratio);
        const src = img.getAttribute('src') || '';
        const font = pngText(src)[fontKey] ?? svgFont(src);
        figures.push({h: h, v: v, number: number, heading: text, nth: ++nth,
                      natural: [img.naturalWidth, img.naturalHeight],
                      rendered: [shownW, shownW / ratio], given: given,
                      font: font === undefined ? null : parseFloat(font)});
      }
    }
  }
  return {total: Reveal.getTotalSlides(), size: [size.width, size.height], slides: slides,
          figures: figures};
}"""


def browser(playwright):
    """Debian's Chromium, headless, started by Playwright (which never downloads a browser)."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"measuring slides needs Chromium at {CHROMIUM}: "
                           "`apt-get install chromium`")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=[
        "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"])


def _figure(deck: Path, found: dict) -> dict:
    """A measured figure with what the projector shows: fill (rendered width over the width it is
    given) and font (its smallest text in canvas px: the recorded size in PNG pixels, scaled as
    the PNG is), and problems: why it is not readable (empty when it is)."""
    natural_w, rendered_w = found["natural"][0], found["rendered"][0]
    scale = rendered_w / natural_w if natural_w else 0.0
    fill = rendered_w / found["given"] if found["given"] > 0 else 0.0
    font = found["font"] * scale if found["font"] is not None else None
    problems = []
    if fill < MIN_FILL:
        height_bound = found["rendered"][1] < found["natural"][1] and scale < 1
        problems.append(f"fills {fill:.0%} of its {found['given']:.0f} px"
                        + (" (limited by its height)" if height_bound else ""))
    if font is None:
        problems.append("no font size recorded (re-record with `make notebooks`)")
    elif font < MIN_FONT_PX:
        problems.append(f"smallest text {font:.1f} px ({found['font']:.1f} px drawn, "
                        f"shown at {scale:.2f}x)")
    return {"deck": Path(deck).name, **{k: found[k] for k in ("h", "v", "number", "heading",
                                                              "nth", "natural", "rendered",
                                                              "given")},
            "recorded_font": found["font"], "fill": fill, "font": font, "problems": problems}


def measure(decks: list[Path], viewport: tuple[int, int] = SLIDE_SIZE, tolerance: int = 1,
            screenshots: Path | None = None) -> tuple[int, list[dict], list[dict]]:
    """Open each built deck in Chromium, visit every slide; return (slides seen, overflowing
    slides, figures).

    Each overflowing slide is a dict: deck (file name), h and v (reveal.js's indices: the URL
    is deck#/h/v), number (1-based position in the deck), heading (its first heading, or its
    first words), overflow: the pixels of the configured canvas that do not fit, the largest
    of the vertical, horizontal and inner-scroller excesses, and kind: which of the three it is
    ("too tall", "too wide", "scrolls inside"). Each figure is a dict (`_figure`) with the same
    place keys plus nth (its position on the slide), natural, rendered and given sizes, fill,
    font and problems. Nothing on the page may load from the network; every request that is not
    a local file is refused. With `screenshots`, a PNG of each overflowing slide is saved there
    (deck-h-v.png).
    """
    seen, overflowing, figures = 0, [], []
    with sync_playwright() as p:
        chromium = browser(p)
        try:
            page = chromium.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.route("**/*", lambda r: r.continue_()
                       if r.request.url.startswith(("file:", "data:")) else r.abort())
            for deck in decks:
                page.goto(Path(deck).resolve().as_uri())
                page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
                result = page.evaluate(_MEASURE_JS, FONT_KEY)
                if len(result["slides"]) != result["total"]:
                    raise RuntimeError(f"{Path(deck).name}: visited {len(result['slides'])} "
                                       f"slides of reveal.js's {result['total']}")
                seen += result["total"]
                figures += [_figure(deck, found) for found in result["figures"]]
                for slide in result["slides"]:
                    excess, kind = max((slide["height"], "too tall"), (slide["width"], "too wide"),
                                       (slide["inner"], "scrolls inside"))
                    if excess <= tolerance:
                        continue
                    overflowing.append({"deck": Path(deck).name, "h": slide["h"],
                                        "v": slide["v"], "number": slide["number"],
                                        "heading": slide["heading"], "overflow": excess,
                                        "kind": kind})
                    if screenshots is not None:
                        Path(screenshots).mkdir(parents=True, exist_ok=True)
                        page.evaluate(f"Reveal.slide({slide['h']}, {slide['v']})")
                        name = f"{Path(deck).name.split('.')[0]}-{slide['h']}-{slide['v']}.png"
                        page.screenshot(path=str(Path(screenshots) / name))
        finally:
            chromium.close()
    return seen, overflowing, figures


def format_overflow(overflowing: list[dict]) -> str:
    """One line per overflowing slide: deck, #/h/v, number, kind and px, heading."""
    return "\n".join(f"{o['deck']} #/{o['h']}/{o['v']} (slide {o['number']}): "
                     f"{o['kind']} by {o['overflow']:.0f} px; {o['heading']!r}"
                     for o in overflowing)


def format_figures(figures: list[dict]) -> str:
    """One line per figure that is not readable: deck, #/h/v, its place, problems, heading."""
    return "\n".join(f"{f['deck']} #/{f['h']}/{f['v']} (slide {f['number']}, figure {f['nth']}, "
                     f"{f['natural'][0]}x{f['natural'][1]} shown at "
                     f"{f['rendered'][0]}x{f['rendered'][1]}): {'; '.join(f['problems'])}; "
                     f"{f['heading']!r}" for f in figures if f["problems"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.measure",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook names or NN prefixes (default: all)")
    parser.add_argument("--out", type=Path, help="where the decks go (default build/slides)")
    parser.add_argument("--screenshots", type=Path, metavar="DIR",
                        help="save a PNG of each slide that does not fit into DIR")
    series.add_argument(parser)
    args = parser.parse_args(argv)
    try:
        decks = site.build("slides", notebook_paths(args.names, args.notebooks), args.out)
        seen, overflowing, figures = measure(decks, screenshots=args.screenshots)
    except (RuntimeError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    unreadable = [f for f in figures if f["problems"]]
    for lines in (format_overflow(overflowing), format_figures(figures)):
        if lines:
            print(lines)
    print(f"{len(overflowing)} of {seen} slides in {len(decks)} deck"
          f"{'s' if len(decks) != 1 else ''} do not fit {SLIDE_SIZE[0]}x{SLIDE_SIZE[1]}; "
          f"{len(unreadable)} of {len(figures)} figures are not readable there "
          f"(fill >= {MIN_FILL:.0%} of their width, smallest text >= {MIN_FONT_PX} px)")
    return 1 if overflowing or unreadable else 0


if __name__ == "__main__":
    sys.exit(main())
