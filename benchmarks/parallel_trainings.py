"""What does parallel_map save a student? The series' multi-seed cells, in turn and side by side.

Baseline: the calls one after another in this process (ATTNLAB_WORKERS=1, as a 1-core machine
or macOS runs them). Ours: `attnlab.plumbing.parallel.parallel_map` with every core this process may
use. Both run here, in one process, on one torch thread each, on the same calls; the results are
checked to be the same bits. The workloads are the slow cells of notebooks 03, 06 and 09: four more
seeds of 03's classifier, 06's MobileNetV2 embeddings of 1,000 images, and 10's two- and one-layer
models for seeds 1 and 2.

    python benchmarks/parallel_trainings.py
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import attnlab  # noqa: E402
from attnlab.lessons import classifier, data, induction  # noqa: E402
from attnlab.plumbing import parallel  # noqa: E402


def same(a, b) -> bool:
    """Bit for bit: tensors, arrays, and the weights of models, at any depth."""
    if isinstance(a, torch.nn.Module):
        return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                    b.state_dict().values()))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "model"):  # a Trained or an Induction run
        return same(a.model, b.model)
    return a == b


def timed(workers: str, fn):
    os.environ[parallel.WORKERS] = workers
    induction._CACHE.clear()  # train again, do not look up
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    attnlab.seed_everything(0)
    images = data.load_fashion_mnist()[1][0][:1000]  # (1000, 28, 28) test images
    attnlab.embed_images(images[:32])  # the network built and folded once, before either timing
    classifier.train_classifier("bag", "none", epochs=1)  # the first Adam step's imports, likewise
    cores = str(len(os.sched_getaffinity(0)))
    workloads = {
        "03: train_classifier, seeds 1-4": lambda: parallel.parallel_map(
            lambda s: classifier.train_classifier(seed=s), range(1, 5)),
        "05: embed_images, 1,000 images": lambda: attnlab.embed_images(images),
        "09: 2- and 1-layer models, seeds 1-2": lambda: parallel.parallel_map(
            lambda run: induction.train_induction(n_layers=run[0], seed=run[1]),
            [(2, 1), (2, 2), (1, 1), (1, 2)]),
    }
    print(f"{cores} cores; one torch thread per process; seconds (wall clock)")
    print(f"{'workload':<40}{'in turn':>9}{'side by side':>14}{'speed-up':>10}  same bits")
    for name, fn in workloads.items():
        serial, a = timed("1", fn)
        side, b = timed(cores, fn)
        print(f"{name:<40}{serial:9.2f}{side:14.2f}{serial / side:9.2f}x  {same(a, b)}")


if __name__ == "__main__":
    main()
