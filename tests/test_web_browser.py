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
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "web"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]
SERVER_START = 900  # s: training the models once, where the app's cache has none, on 2 cores
ANSWER = 60  # s

if not CHROMIUM.exists():
    pytest.skip(f"Debian's chromium is not installed ({CHROMIUM} is missing): "
                "`apt-get install chromium` to run the browser tests", allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """python space/app.py on a free port of 127.0.0.1, stopped with everything it started."""

    def __init__(self, log: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = log
        env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1",
               "GRADIO_SERVER_PORT": str(self.port), "GRADIO_ANALYTICS_ENABLED": "False",
               "PYTHONHASHSEED": "0", "KERAS_BACKEND": "torch"}
        self._log = open(log, "w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, str(REPO / "space" / "app.py")], cwd=REPO,
                                     env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self):
        deadline = time.monotonic() + SERVER_START
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"space/app.py exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    if response.status == 200:
                        return
            time.sleep(0.5)
        raise TimeoutError(f"the app did not answer on {self.url} within {SERVER_START} s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self):
        """SIGINT (what Ctrl-C in `make app` sends), then SIGTERM, then SIGKILL to the group."""
        for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
        self._log.close()


@pytest.fixture(scope="module")
def server():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    running = Server(ARTIFACTS / "server.log")
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
        blocked: list[str] = []

        def local_only(route):  # only the app's server may be reached
            url = route.request.url
            if url.startswith((server.url, "data:", "blob:")):
                route.continue_()
            else:
                blocked.append(url)
                route.abort()

        page.route("**/*", local_only)
        page.blocked = blocked
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
    return [t.strip() for t in page.locator(f"#{model}-tokens .score-token").all_inner_texts()]


def _label(page, model: str) -> str:
    return page.locator(f"#{model}-label .output-class").inner_text().strip()


def test_the_web_app_answers_a_review_and_shows_html_as_text(page, server):
    try:
        page.goto(server.url)
        echo = page.locator("#echo textarea")
        expect(echo).to_have_value(re.compile("terrific"), timeout=ANSWER * 1000)  # page load
        expect(page.locator("#caveat")).to_contain_text("Attention weight is not information")

        review = "the film was awful and the plot was boring"
        _type_review(page, review)
        expect(echo).to_have_value(review, timeout=ANSWER * 1000)
        expect(page.locator("#minilm-label .output-class")).to_have_text("negative",
                                                                        timeout=ANSWER * 1000)
        assert _label(page, "tiny") == "negative"
        tokens = _tokens(page, "minilm")
        assert tokens[:3] == ["[CLS]", "the", "film"] and tokens[-1] == "[SEP]", tokens
        assert "awful" in _tokens(page, "tiny")
        shaded = page.locator("#minilm-tokens .score-token").first.evaluate(
            "e => getComputedStyle(e).backgroundColor")
        assert shaded not in ("rgba(0, 0, 0, 0)", "transparent"), shaded  # [CLS]: the most
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
