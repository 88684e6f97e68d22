"""What a projector shows: every slide of the built decks laid out in Chromium.

A slide is what an instructor shows on a projector (CONTRIBUTING.md, "Slides and figures"): it
fits the 1280x720 canvas without scrolling. reveal.js lays every slide out at the configured
size and scales the whole canvas to the screen, so everything here is measured in canvas pixels,
where that scale does not enter. (Whether a figure's text is readable there follows from the
figure's size alone: attnlab.classroom.figures checks it in Python.)

    python -m attnlab.classroom.measure [NN ...] [--screenshots DIR]

builds the decks (as `make slides`), visits every slide and lists the slides that do not fit;
it exits 1 if there is any. Needs Debian's Chromium (/usr/bin/chromium) and Playwright (a test
tool, in requirements-dev.txt).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from . import series, site
from .series import notebook_paths

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; Playwright drives it
SLIDE_SIZE = site.SLIDE_SIZE

# Runs in the deck. The current slide's scrollHeight/scrollWidth (its content, the slide being a
# top-aligned `section` at the canvas's height) against the configured height/width, and, inside
# it, any element that scrolls by itself (overflow auto/scroll with more content than box).
# MathJax, fonts and images are waited for first: all change sizes.
_MEASURE_JS = """async () => {
  Reveal.configure({transition: 'none', backgroundTransition: 'none'});
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  await Promise.all(Array.from(document.images, img => img.decode().catch(() => null)));
  const size = Reveal.getComputedSlideSize();
  const slides = [];
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
    }
  }
  return {total: Reveal.getTotalSlides(), size: [size.width, size.height], slides: slides};
}"""


def browser(playwright):
    """Debian's Chromium, headless, started by Playwright (which never downloads a browser)."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"measuring slides needs Chromium at {CHROMIUM}: "
                           "`apt-get install chromium`")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=[
        "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"])


def measure(decks: list[Path], viewport: tuple[int, int] = SLIDE_SIZE, tolerance: int = 1,
            screenshots: Path | None = None) -> tuple[int, list[dict]]:
    """Open each built deck in Chromium, visit every slide; return (slides seen, overflowing
    slides).

    Each overflowing slide is a dict: deck (file name), h and v (reveal.js's indices: the URL
    is deck#/h/v), number (1-based position in the deck), heading (its first heading, or its
    first words), overflow: the pixels of the configured canvas that do not fit, the largest
    of the vertical, horizontal and inner-scroller excesses, and kind: which of the three it is
    ("too tall", "too wide", "scrolls inside"). Nothing on the page may load from the network;
    every request that is not a local file is refused. With `screenshots`, a PNG of each
    overflowing slide is saved there (deck-h-v.png).
    """
    seen, overflowing = 0, []
    with sync_playwright() as p:
        chromium = browser(p)
        try:
            page = chromium.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.route("**/*", lambda r: r.continue_()
                       if r.request.url.startswith(("file:", "data:")) else r.abort())
            for deck in decks:
                page.goto(Path(deck).resolve().as_uri())
                page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
                result = page.evaluate(_MEASURE_JS)
                if len(result["slides"]) != result["total"]:
                    raise RuntimeError(f"{Path(deck).name}: visited {len(result['slides'])} "
                                       f"slides of reveal.js's {result['total']}")
                seen += result["total"]
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
    return seen, overflowing


def format_overflow(overflowing: list[dict]) -> str:
    """One line per overflowing slide: deck, #/h/v, number, kind and px, heading."""
    return "\n".join(f"{o['deck']} #/{o['h']}/{o['v']} (slide {o['number']}): "
                     f"{o['kind']} by {o['overflow']:.0f} px; {o['heading']!r}"
                     for o in overflowing)


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
        seen, overflowing = measure(decks, screenshots=args.screenshots)
    except (RuntimeError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if overflowing:
        print(format_overflow(overflowing))
    print(f"{len(overflowing)} of {seen} slides in {len(decks)} deck"
          f"{'s' if len(decks) != 1 else ''} do not fit {SLIDE_SIZE[0]}x{SLIDE_SIZE[1]}")
    return 1 if overflowing else 0


if __name__ == "__main__":
    sys.exit(main())
