"""Benchmark: attnlab's written-out attention against PyTorch's fused kernel, same inputs.

    .venv/bin/python benchmarks/attention_cost.py [--lengths 256 512 1024 2048] [--clock wall]

For each sequence length T it prints the median forward time and the peak memory of both, and
the ratios attnlab / fused, then the log-log slope of each column (2 means the cost grows as T²).
Everything runs on one torch thread, as in the notebooks.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

import attnlab
from attnlab import cost


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clock", choices=["wall", "thread"], default="thread",
                        help="thread CPU time (default; steady on a shared machine) or wall time")
    args = parser.parse_args(argv)
    if len(args.lengths) < 2:
        parser.error("--lengths needs at least two values to fit a slope")

    attnlab.seed_everything(0)
    qkv = {T: [torch.randn(1, args.heads, T, args.d_head) for _ in range(3)] for T in args.lengths}
    impls = {"attnlab": attnlab.scaled_dot_product_attention, "fused": F.scaled_dot_product_attention}
    with torch.no_grad():
        times = cost.measure_times(
            {(name, T): (lambda f=f, T=T: f(*qkv[T])) for name, f in impls.items() for T in args.lengths},
            repeats=args.repeats, warmup=1, clock=args.clock)
        memory = {(name, T): cost.peak_memory(lambda f=f, T=T: f(*qkv[T]))
                  for name, f in impls.items() for T in args.lengths}

    rows = []
    for T in args.lengths:
        ta, tf = times["attnlab", T], times["fused", T]
        ma, mf = memory["attnlab", T], memory["fused", T]
        rows.append((T, f"{ta * 1e3:.2f}", f"{tf * 1e3:.2f}", f"{ta / tf:.2f}",
                     f"{ma / 2**20:.2f}", f"{mf / 2**20:.2f}", f"{ma / mf:.1f}"))
    print(f"B=1, H={args.heads}, d_head={args.d_head}, one thread, {args.clock} clock, median of {args.repeats}")
    print(cost.format_table(["T", "attnlab ms", "fused ms", "time ratio", "attnlab MiB", "fused MiB",
                             "memory ratio"], rows))
    for what, table in (("time", times), ("peak memory", memory)):
        slopes = {name: cost.loglog_slope(args.lengths, np.array([table[name, T] for T in args.lengths]))
                  for name in impls}
        print(f"log-log slope of {what}: " + ", ".join(f"{n} {s:.2f}" for n, s in slopes.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
