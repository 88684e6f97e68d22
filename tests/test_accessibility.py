"""WCAG 2.1 AA for the site, the decks and the web app (DESIGN.md, "Accessible materials").

axe-core (npm, pinned by web/package-lock.json, installed by `make vendor`) runs in Chromium over
the site's index and every notebook page, the decks' index and every slide of every deck (all of
a deck's slides shown at once, one below the other), and the web app's page, with all the rules
it runs by default: no violation at any impact. Then what axe cannot see: Tab through a deck
never focuses anything on a slide nobody sees, and what it focuses shows a visible outline;
every page has exactly one main landmark and one level-one heading; MathJax's menu (its
accessibility settings) is on and opens on an equation.

The site and the decks are built here from the stored notebooks with the real reveal.js and
MathJax (about 10 s for both), into a temporary folder; one Chromium serves every check but the
app's, whose server (space/app.py) starts as in test_web_browser.py. Skipped, saying so, without
Chromium or without `make vendor`'s packages.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NO_CHROMIUM,
    WebAppServer,
    axe_violations,
    local_only,
)

from attnlab.classroom import site
from attnlab.classroom.series import notebook_paths

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "accessibility"
TAB_STOPS = 12  # Tab presses per deck position checked: more than a slide's own stops
READY = 60_000  # ms: reveal.js, MathJax or the app ready, on a busy 2-core machine

if not CHROMIUM.exists():
    pytest.skip(NO_CHROMIUM, allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402

try:
    MODULES = site.vendored()
except RuntimeError as e:
    pytest.skip(str(e), allow_module_level=True)
AXE = MODULES / "axe-core" / "axe.min.js"

# The slide that is shown and the stack that holds it are the only live sections of a deck.
_IN_HIDDEN_SLIDE = """e => {
  const current = Reveal.getCurrentSlide();
  for (let s = e.closest('section'); s; s = s.parentElement.closest('section'))
    if (!s.contains(current)) return true;
  return !!e.closest('[aria-hidden="true"]');
}"""
_OUTLINE = """e => { const s = getComputedStyle(e);
  return [s.outlineStyle, parseFloat(s.outlineWidth) || 0, s.outlineColor]; }"""
_DESCRIBE = """e => e === document.body ? 'body' : e.tagName.toLowerCase()
  + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string'
  ? '.' + e.className.trim().split(/\\s+/).join('.') : '')"""
_STRUCTURE = """() => [document.querySelectorAll('main, [role="main"]').length,
                      document.querySelectorAll('h1, [role="heading"][aria-level="1"]').length]"""


def _axe(page, context: str = "document") -> list[tuple]:
    return axe_violations(page, AXE, context)


def _report(failures: dict[str, list]) -> str:
    return "\n".join(f"{where}: {rule} ({impact}) on {n} node{'s' * (n != 1)}, e.g. {examples}"
                     for where, found in failures.items()
                     for rule, impact, n, examples in found)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The site and the decks of every stored notebook, built with the real packages."""
    stored = [p for p in notebook_paths() if p.exists()]
    if not stored:
        pytest.skip("no executed notebooks yet")
    out = tmp_path_factory.mktemp("built")
    start = time.monotonic()
    pages = site.build("html", stored, out / "site", modules=MODULES)
    decks = site.build("slides", stored, out / "slides", modules=MODULES)
    print(f"site and decks of {len(stored)} notebooks built in {time.monotonic() - start:.1f} s")
    return {"site": [out / "site" / "index.html", *pages],
            "slides": [out / "slides" / "index.html", *decks], "decks": decks}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                              headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    """A 1280x720 page that may load local files only."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.set_default_timeout(READY)
    page = context.new_page()
    page.refused = []
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
               else (page.refused.append(r.request.url), r.abort()))
    try:
        yield page
    finally:
        context.close()


def _open(page, path: Path, anchor: str = "") -> None:
    """Open a built page or deck and wait until MathJax (and reveal.js) are done."""
    page.goto(path.as_uri() + anchor)
    if path.name.endswith(".slides.html"):
        page.wait_for_function("window.Reveal && Reveal.isReady()")
        # no slide transition: a slide half faded in would have its contrast measured
        page.evaluate("Reveal.configure({transition: 'none', backgroundTransition: 'none'})")
    page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("MathJax.startup.promise.then(() => true)")


def test_axe_finds_nothing_on_the_site(built, page):
    """The site's index and every notebook page."""
    failures = {}
    for path in built["site"]:
        _open(page, path)
        if found := _axe(page):
            failures[path.name] = found
    assert not failures, "axe-core violations on the site:\n" + _report(failures)
    assert page.refused == []


def test_a_screen_reader_hears_what_each_figure_shows(built, page):
    """Every figure of the site and the decks is an image whose accessible name (what a
    screen reader says, as Chromium computes it; on a slide not shown yet too) is its text
    alternative, never nbconvert's placeholder; on the site a caption opens to the figure's
    numbers (issue 50)."""
    placeholder = "No description has been provided for this image"
    for kind in ("site", "slides"):
        pages = [p for p in built[kind] if p.name != "index.html"]
        for path in pages:
            text = path.read_text(encoding="utf-8")
            assert placeholder not in text, path.name
        _open(page, next(p for p in pages if p.name.startswith("01_")))
        heatmap = page.get_by_role("img", include_hidden=kind == "slides", name=re.compile(
            r"^Figure\. attention weights of the worked example: heatmap, 1 row \(query\) by "
            r"3 columns \(key\).*Largest in each row: 'q' → 'k0'"))
        expect(heatmap).to_have_count(1)
    page.goto(next(p for p in built["site"] if p.name.startswith("01_")).as_uri())
    caption = page.locator("details.attnlab-figure-text").first
    caption.locator("summary").click()
    expect(caption.locator("table")).to_be_visible()
    assert caption.locator("tbody tr").count() == 1  # one query row: q


# Every slide of a deck laid out one below the other, all shown, in a viewport tall enough to
# hold them: one axe run then judges every slide as it is drawn (contrast needs the text on
# screen; the controls and backgrounds, which would cover it, are hidden). One run per deck
# takes 2-8 s where a run per slide shown took 15-40 s (axe walks the whole page each time,
# every slide included): about 5 minutes of CI's time.
_ALL_SLIDES_SHOWN = """() => {
  const style = document.createElement('style');
  style.textContent = `
    html, body, .reveal-viewport, .reveal, .reveal .slides {
      overflow: visible !important; height: auto !important; }
    .reveal .slides { position: static !important; transform: none !important;
      zoom: 1 !important; inset: auto !important; margin: 0 auto !important;
      width: ${Reveal.getConfig().width}px !important; }
    .reveal .slides section { display: block !important; position: relative !important;
      opacity: 1 !important; visibility: visible !important; transform: none !important;
      top: auto !important; left: auto !important; height: auto !important;
      min-height: 0 !important; }
    .reveal > :not(.slides) { display: none !important; }`;
  document.head.appendChild(style);
  for (const s of document.querySelectorAll('.reveal .slides section')) {
    s.hidden = false; s.removeAttribute('aria-hidden'); s.removeAttribute('inert'); }
  return [Reveal.getSlides().length, document.documentElement.scrollHeight];
}"""
# What the run must find if it can see the last slide: text at 1.4:1 and a picture without alt.
PLANTED_RULES = ["color-contrast", "image-alt"]
_PLANTED = """() => { const slides = Reveal.getSlides(), last = slides[slides.length - 1];
  const p = document.createElement('p'); p.textContent = 'planted: pale text';
  p.style.color = '#dddddd'; last.appendChild(p);
  last.appendChild(document.createElement('img')).src = 'data:,'; }"""


def test_axe_finds_nothing_on_any_slide_of_any_deck(built, page):
    """The decks' index; each deck as it opens (all of the page), then every one of its slides
    at once, shown one below the other (`_ALL_SLIDES_SHOWN`). The run proves it sees them:
    a pale line and a picture without alt planted on the last slide must be found there, in the
    same layout (axe passes over what is hidden)."""
    failures = {}
    slides = 0
    for path in built["slides"]:
        page.set_viewport_size({"width": 1280, "height": 720})
        _open(page, path)
        if found := _axe(page):
            failures[path.name] = found
        if path.name == "index.html":
            continue
        shown, height = page.evaluate(_ALL_SLIDES_SHOWN)
        slides += shown
        page.set_viewport_size({"width": 1280, "height": height})  # every slide on screen
        if found := _axe(page, "document.querySelector('.reveal .slides')"):
            failures[f"{path.name}, all slides"] = found
        page.evaluate(_PLANTED)  # found only if the last slide is shown in this layout
        last = "Reveal.getSlides()[Reveal.getSlides().length - 1]"  # not every slide again
        planted = {rule for rule, *_ in axe_violations(page, AXE, last, PLANTED_RULES)}
        assert set(PLANTED_RULES) <= planted, \
            f"{path.name}: the run did not see the last slide (found only {sorted(planted)})"
    assert slides >= 3 * len(built["decks"])
    assert not failures, "axe-core violations on the decks:\n" + _report(failures)
    assert page.refused == []


def _tab_through(page, where: str) -> list[str]:
    """Press Tab TAB_STOPS times; what went wrong at each stop (a hidden slide's element focused,
    or no visible outline)."""
    problems = []
    for stop in range(1, TAB_STOPS + 1):
        page.keyboard.press("Tab")
        focused = page.evaluate_handle("document.activeElement")
        name = focused.evaluate(_DESCRIBE)
        if name == "body":  # past the last stop: focus left the page
            continue
        if focused.evaluate(_IN_HIDDEN_SLIDE):
            problems.append(f"{where}, Tab {stop}: {name} on a slide that is not shown")
        style, width, colour = focused.evaluate(_OUTLINE)
        if style == "none" or width < 2:
            problems.append(f"{where}, Tab {stop}: {name} focused without a visible outline "
                            f"({style} {width}px {colour})")
    return problems


def test_tab_in_a_deck_stays_on_the_slide_shown_and_focus_is_visible(built, page):
    """From the first slide, and from a slide in the middle reached with the arrow keys (its
    neighbours are in the page, aria-hidden): every Tab stop is on the slide shown (or the
    deck's controls), with an outline at least 2 px wide."""
    problems, stops = [], 0
    for deck in built["decks"]:
        _open(page, deck)
        problems += _tab_through(page, f"{deck.name} first slide")
        middle = page.evaluate("Math.floor(Reveal.getHorizontalSlides().length / 2)")
        page.evaluate("document.activeElement.blur()")
        for _ in range(middle):
            page.keyboard.press("ArrowRight")
        page.wait_for_function(f"Reveal.getIndices().h === {middle}")
        problems += _tab_through(page, f"{deck.name} #/{middle}")
        stops += page.evaluate("""() => [...document.querySelectorAll(
            'a[href], button, input, [tabindex]')].filter(
            e => e.tabIndex >= 0 && !e.closest('[inert]')).length""")
    assert stops > 0, "nothing in any deck can take keyboard focus"
    assert not problems, "\n".join(problems)


def test_every_page_and_deck_has_one_main_landmark_and_one_level_one_heading(built, page):
    wrong = []
    for path in [*built["site"], *built["slides"]]:
        _open(page, path)
        mains, h1s = page.evaluate(_STRUCTURE)
        if (mains, h1s) != (1, 1):
            wrong.append(f"{path.parent.name}/{path.name}: {mains} main landmarks, {h1s} h1")
    assert not wrong, "\n".join(wrong)


def test_mathjax_keeps_its_accessibility_menu(built, page):
    """On a notebook page and on a deck: the menu is enabled, and a right-click on an equation
    opens it with its Accessibility submenu."""
    for path, anchor in ((built["site"][1], ""), (built["decks"][0], "#/0")):
        _open(page, path, anchor)
        assert page.evaluate("MathJax.startup.document.options.enableMenu") is True, path.name
        equation = page.locator("mjx-container:visible").first
        equation.click(button="right")
        menu = page.locator(".CtxtMenu_Menu").first
        menu.wait_for(state="visible")
        assert "Accessibility" in menu.inner_text(), path.name
        page.keyboard.press("Escape")


@pytest.fixture(scope="module")
def app_server():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    running = WebAppServer(ARTIFACTS / "server.log")
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_web_app_has_no_axe_violation_one_main_and_one_h1(browser, app_server, scheme):
    """The app's page once it has answered the example review (the tokens shaded), in Gradio's
    light and dark themes."""
    context = browser.new_context(viewport={"width": 1400, "height": 1100}, color_scheme=scheme)
    context.set_default_timeout(READY)
    page = context.new_page()
    blocked = local_only(page, app_server.url)
    try:
        page.goto(app_server.url + f"?__theme={scheme}")
        page.locator("#minilm-tokens .score-token").first.wait_for(state="visible")
        page.wait_for_timeout(500)  # Gradio's transitions end
        found = _axe(page)
        structure = page.evaluate(_STRUCTURE)
        page.screenshot(path=str(ARTIFACTS / f"web-app-{scheme}.png"), full_page=True)
    finally:
        context.close()
    assert not found, f"axe-core violations on the web app ({scheme}):\n" + _report(
        {"app": found})
    assert structure == [1, 1], f"main landmarks, h1: {structure}"
    assert blocked == [], json.dumps(blocked)
