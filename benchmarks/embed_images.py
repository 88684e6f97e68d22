"""How fast does attnlab.embed_images embed Fashion-MNIST, against plain Keras?

Baseline: Keras resize + preprocess_input + MobileNetV2.predict(batch_size=32) (channels-last,
BatchNorm as separate ops), as `attnlab.pretrained.embeddings.embed_images_keras` does it. Ours:
`attnlab.embed_images` (BatchNorm folded into the convolutions, in-place ReLU6, channels-last
torch tensors, inference mode). Both run here, in one process, on one thread (as the notebooks
do), on the same images; each is timed as the best of --repeats runs after a warm-up, and the
embeddings are compared by cosine. --profile adds where our time goes, by operator.

--threads 0 runs as a plain script does: torch on its default threads (one per core) and
parallel_map left to choose, as before the fix of issue 52, when this setting hung in
`embed_images` (a fork under a live thread pool). --timeout gives up on a call that hangs.

    python benchmarks/embed_images.py [--n 512] [--alpha 0.35] [--repeats 3] [--threads 1]
                                      [--timeout 300] [--profile]
"""
from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # --profile: no profiler_start/stop lines on stderr

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity  # noqa: E402
from torch.profiler import profile as torch_profile  # noqa: E402

import attnlab  # noqa: E402
from attnlab.pretrained import embeddings  # noqa: E402


def best_time(fn, repeats: int) -> tuple[float, np.ndarray]:
    """Best wall-clock seconds of `repeats` runs after one warm-up (the machine may be shared)."""
    out = fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def profile(images, alpha: float) -> None:
    """Self CPU time of our path by operator, and the convolutions split by kind."""
    steps = embeddings._folded(alpha)
    x = embeddings.preprocess(images).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        embeddings._forward(steps, x[:32])
        with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for i in range(0, len(x), 32):
                embeddings._forward(steps, x[i:i + 32])
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    print("\nwhere our time goes (self CPU time, by operator):")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:6]:
        print(f"  {e.key:<28} {e.self_cpu_time_total / total:6.1%}")
    kinds = {"depthwise 3x3": 0.0, "pointwise 1x1": 0.0, "full 3x3 (stem)": 0.0}
    for e in prof.key_averages(group_by_input_shape=True):
        if (e.key != "aten::mkldnn_convolution" or len(e.input_shapes) < 2
                or len(e.input_shapes[1]) != 4):
            continue
        w = e.input_shapes[1]                          # (C_out, C_in / groups, kh, kw)
        kind = ("pointwise 1x1" if w[2] == 1
                else "depthwise 3x3" if w[1] == 1
                else "full 3x3 (stem)")
        kinds[kind] += e.self_cpu_time_total
    conv = sum(kinds.values())
    print("convolutions by kind (share of all time):")
    for kind, t in kinds.items():
        print(f"  {kind:<28} {t / total:6.1%}")
    print(f"  {'all convolutions':<28} {conv / total:6.1%}")
    heaviest = max(kinds, key=kinds.get)
    if conv / total > 0.5:
        print("what limits it: the convolution kernels themselves "
              f"({conv / total:.0%} of the time, "
              f"most of it {heaviest}), not Python or the data around them")
    else:
        print("what limits it: work outside the convolutions "
              f"({1 - conv / total:.0%} of the time); "
              "see the operators above")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=512, help="images to embed (default 512)")
    parser.add_argument("--alpha", type=float, default=0.35, choices=embeddings.ALPHAS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (notebooks use 1); 0: torch's default, as a script")
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds after which the benchmark stops, saying it hung")
    parser.add_argument("--profile", action="store_true", help="also show where our time goes")
    args = parser.parse_args()

    if args.threads:  # one process: parallel_map's gain is measured in parallel_trainings.py
        os.environ.setdefault("ATTNLAB_WORKERS", "1")
        attnlab.seed_everything(0, threads=args.threads)
    def hung(*_):
        print(f"no answer after {args.timeout} s: a hang", flush=True)
        children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
        for pid in children.read_text().split() if children.exists() else []:
            os.kill(int(pid), signal.SIGKILL)  # forked workers stuck in a hang
        os._exit(3)

    signal.signal(signal.SIGALRM, hung)  # a benchmark, not a lesson: POSIX alone is fine here
    signal.alarm(args.timeout)
    (_, _), (x_test, _) = attnlab.load_fashion_mnist()
    images = x_test[:args.n]
    embeddings.mobilenet_v2(args.alpha)  # build the Keras model once, outside both timings

    t_keras, base = best_time(
        lambda: embeddings.embed_images_keras(images, args.alpha, batch_size=32), args.repeats)
    t_ours, ours = best_time(lambda: attnlab.embed_images(images, args.alpha), args.repeats)
    cos = (base * ours).sum(1) / (np.linalg.norm(base, axis=1) * np.linalg.norm(ours, axis=1))

    print(f"MobileNetV2 alpha={args.alpha}, {len(images)} Fashion-MNIST test images at 96x96, "
          f"{torch.get_num_threads()} torch thread(s), best of {args.repeats}")
    print(f"  Keras predict(batch_size=32)  {t_keras:7.3f} s  "
          f"{1e3 * t_keras / len(images):6.2f} ms/image")
    print(f"  attnlab.embed_images          {t_ours:7.3f} s  "
          f"{1e3 * t_ours / len(images):6.2f} ms/image")
    print(f"  speed-up {t_keras / t_ours:.2f}x   embedding cosine to Keras: min {cos.min():.6f}, "
          f"max |difference| {np.abs(base - ours).max():.2e}")
    if args.profile:
        profile(images, args.alpha)


if __name__ == "__main__":
    main()
