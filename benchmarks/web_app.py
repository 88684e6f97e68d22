"""How long the web app (attnlab.views.web, `make app`) makes a visitor wait, per request.

The page is served by Gradio in this process on a free port of 127.0.0.1 and called over HTTP
through gradio_client, one request at a time, as a browser's request travels (queue, JSON,
the answer's components). The baseline, in the same run, is the notebook app's own call,
`SentimentApp.analyze(text)`, on the same texts: the difference is what the web adds. Prints the
median and 95th percentile per input; the goal (issue 31) is every answer within a second.

    .venv/bin/python benchmarks/web_app.py [repeats]
"""
from __future__ import annotations

import socket
import statistics
import sys
import time

import torch
from gradio_client import Client

import attnlab
from attnlab.views import web

TEXTS = {
    "short review": "The acting was superb, but the plot dragged in the middle.",
    "empty": "",
    "100,000 characters": ("The plot was dull but the acting was brilliant. " * 2100)[:100_000],
    "emoji and non-ASCII": "🙂🎉 loved it 😍 — très bien, 東京の映画は素晴らしい",
    "HTML and script": "<b>x</b><script>alert('hi')</script>",
    "only punctuation": "?!... ,;:- ()[]{} !!!",
    "only unknown words": "zorgle blimf quaxx snerp",
}


def median_p95(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def main(repeats: int = 20) -> None:
    torch.set_num_threads(1)
    app = attnlab.SentimentApp()
    page = web.build(app)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    web.launch(page, "127.0.0.1", port, block=False)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    print(f"{'input':<22} {'analyze (baseline)':>20} {'web request':>20}   median / p95, ms")
    every = []
    try:
        for name, text in TEXTS.items():
            base = median_p95(lambda t=text: app.analyze(t), repeats)
            ours = median_p95(lambda t=text: client.predict(t, api_name="/analyse"), repeats)
            every.append(ours[1])
            print(f"{name:<22} {base[0] * 1e3:9.1f} / {base[1] * 1e3:7.1f} "
                  f"{ours[0] * 1e3:9.1f} / {ours[1] * 1e3:7.1f}")
    finally:
        page.close()
    print(f"slowest p95 of a web request: {max(every) * 1e3:.0f} ms (goal: under 1000 ms)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
