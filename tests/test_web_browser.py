"""The web app in a real browser: space/app.py (what `make app` and a Space run) on 127.0.0.1,
driven in headless Chromium.

The server is started as a separate process on a free port, with its models from the app's
cache (or trained once before it listens); Debian's Chromium, through Playwright, types a
review, reads each model's label and the shaded tokens, types a hostile string and sees it
shown as text, and the server is shut down (its whole process group). Screenshots go to
test-artifacts/web/ (also on failure, with the server's log). Skipped, saying so, where
/usr/bin/chromium is absent; Playwright never downloads a browser. Every wait is an explicit
condition with a generous bound, for slow 2-core CI machines.
"""
from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import pytest
from browser_support import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, WebAppServer, local_only

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "web"
ANSWER = 60  # s

if not CHROMIUM.exists():
    pytest.skip(NO_CHROMIUM, allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def server():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    running = WebAppServer(ARTIFACTS / "server.log")
    try:
        yield running
    finally:
        running.stop()
    assert running.proc.poll() is not None, "the server is still running"


@pytest.fixture
def page(server):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
                                             headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1100})
        context.set_default_timeout(30_000)
        page = context.new_page()
        page.blocked = local_only(page, server.url)  # only the app's server may be reached
        page.dialogs = []  # an alert() that ran would land here
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        try:
            yield page
        finally:
            context.close()
            browser.close()


def _type_review(page, text: str):
    box = page.locator("#review textarea")
    box.click()
    box.fill("")
    box.press_sequentially(text)
    box.press("Enter")


def _tokens(page, model: str) -> list[str]:
    """The tokens shown, without the attention number beside each (checked once below)."""
    return [t.strip().rsplit(" ", 1)[0] for t in
            page.locator(f"#{model}-tokens .score-token").all_inner_texts()]


def _label(page, model: str) -> str:
    return page.locator(f"#{model}-label .output-class").inner_text().strip()


def test_the_web_app_answers_a_review_and_shows_html_as_text(page, server):
    try:
        page.goto(server.url)
        echo = page.locator("#echo textarea")
        expect(echo).to_have_value(re.compile("terrific"), timeout=ANSWER * 1000)  # page load
        expect(page.locator("#caveat")).to_contain_text("Weight is not the whole reason")
        expect(page.locator("#model-cards")).to_contain_text("Held out: ")

        review = "the film was awful and the plot was boring"
        _type_review(page, review)
        expect(echo).to_have_value(review, timeout=ANSWER * 1000)
        expect(page.locator("#minilm-label .output-class")).to_have_text("negative",
                                                                        timeout=ANSWER * 1000)
        assert _label(page, "tiny") == "negative"
        tokens = _tokens(page, "minilm")
        assert tokens[:2] == ["the", "film"] and "[SEP]" not in tokens, tokens
        assert "awful" in _tokens(page, "tiny")
        beside = page.locator("#minilm-tokens .score-token").first.inner_text().split()
        assert len(beside) == 2 and 0.0 <= float(beside[1]) <= 1.0, beside  # not colour alone
        most = max(page.locator("#minilm-tokens .score-token").all(),
                   key=lambda t: float(t.inner_text().split()[-1]))
        shade = most.evaluate("e => getComputedStyle(e).backgroundColor")
        assert shade.startswith("rgba(128, 90, 213"), shade  # purple, not a red for "negative"
        page.screenshot(path=str(ARTIFACTS / "web-app-review.png"), full_page=True)

        markup = "<b>x</b><script>alert(1)</script>"
        _type_review(page, markup)
        expect(echo).to_have_value(markup, timeout=ANSWER * 1000)  # the characters, as text
        expect(page.locator("#notes textarea")).to_have_value(re.compile("alert"))
        assert "<" in _tokens(page, "minilm") and "script" in _tokens(page, "minilm")
        assert page.locator("#minilm-tokens b, #minilm-tokens script, #echo b").count() == 0
        assert page.locator("b", has_text=re.compile(r"^\s*x\s*$")).count() == 0
        assert not page.dialogs, f"script from the input ran: {page.dialogs}"
        page.screenshot(path=str(ARTIFACTS / "web-app-html-as-text.png"), full_page=True)
    except BaseException:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "web-app-failure.png"), full_page=True)
        print(f"--- server log tail ---\n{server.log_tail()}")
        raise
    assert not page.blocked, f"the page tried to reach the network: {page.blocked}"


def test_the_contrast_examples_are_a_click_away_and_read_right(page, server):
    """Issue 51: "the plot was dull but the cast was superb" and its swap, clicked as examples."""
    page.goto(server.url)
    echo = page.locator("#echo textarea")
    expect(echo).to_have_value(re.compile("terrific"), timeout=ANSWER * 1000)
    for text, label in (("the plot was dull but the cast was superb", "positive"),
                        ("the cast was superb but the plot was dull", "negative")):
        page.get_by_text(text, exact=True).click()
        expect(echo).to_have_value(text, timeout=ANSWER * 1000)
        expect(page.locator("#minilm-label .output-class")).to_have_text(label)
    page.screenshot(path=str(ARTIFACTS / "web-app-examples.png"), full_page=True)
    assert not page.blocked, f"the page tried to reach the network: {page.blocked}"


def test_ctrl_c_stops_the_server_promptly(server):
    """What Ctrl-C in `make app` sends (SIGINT, to the process group): the server is gone within
    5 s (the module's last test: it stops the server the others used)."""
    start = time.monotonic()
    server.stop()
    assert server.proc.poll() is not None and time.monotonic() - start < 5
