"""What the tests that start a local server and drive it in Chromium share.

A server under test is a separate process (JupyterLab, the web app) on a free port of
127.0.0.1, its output in a log file, stopped with its whole process group; a page may reach only
that server, so that a test which touches the network fails instead of passing by luck.
Debian's Chromium is used as installed: Playwright never downloads a browser here.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]
NO_CHROMIUM = (f"Debian's chromium is not installed ({CHROMIUM} is missing): "
               "`apt-get install chromium` to run the browser tests")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _interruptible() -> None:
    """In the child before it starts: SIGINT at its default, so that the server's Python turns
    it into KeyboardInterrupt as Ctrl-C does. A command a shell starts in the background
    without job control (`make test &` in a script) has SIGINT ignored, its children inherit
    that, and Python then leaves it ignored: the server's stop waited out its 30 s."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class ServerProcess:
    """`cmd` started in its own session, stdout and stderr into `log`; `wait_ready(answers,
    seconds, what)` polls until `answers()` is true, failing with the log's tail if the process
    exits or the time runs out."""

    def __init__(self, cmd: list[str], log: Path, *, cwd: Path, env: dict):
        self.log_path = log
        self._log = open(log, "w", encoding="utf-8")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"},
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=_interruptible)

    def wait_ready(self, answers, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            with contextlib.suppress(Exception):
                if answers():
                    return
            time.sleep(0.5)
        raise TimeoutError(f"{what} did not answer within {seconds} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def signal_group(self, steps) -> None:
        """Send each (signal, seconds to wait) of `steps` to the process group in turn, until
        the process has exited; then close the log."""
        for sig, wait in steps:
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
        self._log.close()


def local_only(page, allowed: str) -> list[str]:
    """Let `page` reach only URLs starting with `allowed` (and data:/blob:); every other request
    is aborted and its URL listed in the returned list, for the test to assert empty."""
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith((allowed, "data:", "blob:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return blocked


KILL_STEPS = ((signal.SIGTERM, 10), (signal.SIGKILL, 10))


class WebAppServer(ServerProcess):
    """python space/app.py (what `make app` and a Space run) on a free port of 127.0.0.1, its
    models from the app's cache or trained once before it listens; `stop()` stops everything
    it started."""

    START = 900  # s: training the models once, where the app's cache has none, on 2 cores

    def __init__(self, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1",
               "GRADIO_SERVER_PORT": str(self.port), "GRADIO_ANALYTICS_ENABLED": "False",
               "PYTHONHASHSEED": "0", "KERAS_BACKEND": "torch"}
        super().__init__([sys.executable, str(REPO / "space" / "app.py")], log, cwd=REPO,
                         env=env)
        try:
            self.wait_ready(self._answers, self.START, f"space/app.py on {self.url}")
        except BaseException:
            self.stop()
            raise

    def _answers(self) -> bool:
        with urllib.request.urlopen(self.url, timeout=5) as response:
            return response.status == 200

    def stop(self):
        """SIGINT (what Ctrl-C in `make app` sends), then SIGTERM, then SIGKILL to the group."""
        self.signal_group(((signal.SIGINT, 30), *KILL_STEPS))


def axe_violations(page, axe: Path, context: str = "document",
                   rules: list[str] | None = None) -> list[tuple]:
    """(rule id, impact, node count, up to three selectors) of each axe-core violation in
    `context` (a JS expression) of `page`: the rules axe runs by default (WCAG 2.0/2.1 A and AA,
    and best practice), or only `rules`. `axe` is web/node_modules/axe-core/axe.min.js."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(axe))
    only = f", runOnly: {{type: 'rule', values: {list(rules)!r}}}" if rules else ""
    found = page.evaluate(f"""async () => (await axe.run({context}, {{resultTypes:
        ['violations']{only}}})).violations.map(v => [v.id, v.impact, v.nodes.length,
        v.nodes.slice(0, 3).map(n => n.target.join(' '))])""")
    return [tuple(v) for v in found]
