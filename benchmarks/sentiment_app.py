"""How long the sentiment app makes a student wait, per review (notebook 07).

No test asserts a time (a loaded machine must not fail them); it is measured here. First how
long `SentimentApp()` takes to build its default models from nothing (DESIGN: at most ~30 s on
2 cores) and to load them from its cache; then the latency per review. The baseline, in the same
run, is MiniLM's own `encode` on the same text: what the app adds on top of it (tokenising for
two models, the TinyTransformer, attention read-out) is the difference.

    .venv/bin/python benchmarks/sentiment_app.py
"""
from __future__ import annotations

import statistics
import time

import torch

import attnlab

TEXTS = {
    "short review": "The acting was superb, but the plot dragged in the middle.",
    "5,000 characters": "a long and winding review of a film " * 140,
}


def best_and_median(fn, repeats: int = 15) -> tuple[float, float]:
    fn()  # warm-up: the first call of a new length allocates
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    torch.set_num_threads(1)
    start = time.perf_counter()
    attnlab.SentimentApp(cache=False)
    built = time.perf_counter() - start
    attnlab.SentimentApp()  # writes the cache if there was none
    start = time.perf_counter()
    app = attnlab.SentimentApp()
    print(f"default models: built in {built:.1f} s, loaded from the cache in "
          f"{time.perf_counter() - start:.1f} s")
    encoder = app.encoder
    print(f"{'input':<18} {'encode (baseline)':>22} {'app.analyze':>22}   (best / median, ms)"
          f"   ratio (best)")
    for name, text in TEXTS.items():
        base = best_and_median(lambda t=text: encoder.encode([t]))
        ours = best_and_median(lambda t=text: app.analyze(t))
        print(f"{name:<18} {base[0] * 1e3:10.1f} / {base[1] * 1e3:8.1f} {ours[0] * 1e3:10.1f} / "
              f"{ours[1] * 1e3:8.1f}   {ours[0] / base[0]:10.2f}x")


if __name__ == "__main__":
    main()
