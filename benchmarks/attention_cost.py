"""Benchmark: what attention costs on this machine, in the three forms notebook 09 measures.

    .venv/bin/python benchmarks/attention_cost.py [--lengths 256 512 1024 2048] [--clock wall]

1. attnlab's written-out attention, PyTorch's fused kernel and attnlab's block-by-block online
   softmax (`attnlab.core.online_softmax`), same inputs: median forward time and peak memory for
   each sequence length T, then the log-log slope of each column (2 means the cost grows as T²);
2. one decoding step of a self-attention layer at position t, with a KV cache
   (`attnlab.core.kv_cache.decode_step`) and without (`recompute_step`): time, counted FLOPs and the
   speed-up;
3. one cached decoding step at a long context with 1, n/4 and n key/value heads (grouped-query
   attention): the cache's size, the step's FLOPs, its own peak memory and its time.
Everything runs on one torch thread, as in the notebooks.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

import attnlab
from attnlab.core import kv_cache, online_softmax
from attnlab.lessons import cost


def attention_forms(lengths, heads, d_head, repeats, clock, block_size):
    qkv = {T: [torch.randn(1, heads, T, d_head) for _ in range(3)] for T in lengths}
    impls = {"written out": lambda q, k, v: attnlab.scaled_dot_product_attention(q, k, v),
             "fused": F.scaled_dot_product_attention,
             "online": lambda q, k, v: online_softmax.blockwise_attention(q, k, v, block_size)}
    with torch.no_grad():
        thunks = {(name, T): (lambda f=f, T=T: f(*qkv[T])) for name, f in impls.items()
                  for T in lengths}
        times = cost.measure_times(thunks, repeats=repeats, warmup=1, clock=clock)
        memory = {(name, T): cost.peak_memory(lambda f=f, T=T: f(*qkv[T]))
                  for name, f in impls.items() for T in lengths}
    print(f"B=1, H={heads}, d_head={d_head}, online block {block_size}, one thread, {clock} clock, "
          f"median of {repeats}")
    print(cost.format_table(
        ["T", *(f"{n} ms" for n in impls), *(f"{n} MiB" for n in impls)],
        [(T, *(f"{times[n, T] * 1e3:.2f}" for n in impls),
          *(f"{memory[n, T] / 2**20:.2f}" for n in impls)) for T in lengths]))
    for what, table in (("time", times), ("peak memory", memory)):
        slopes = {n: cost.loglog_slope(lengths, np.array([table[n, T] for T in lengths]))
                  for n in impls}
        print(f"log-log slope of {what}: " + ", ".join(f"{n} {s:.2f}" for n, s in slopes.items()))


def decoding_steps(positions, d_model, heads, repeats, clock):
    mha = attnlab.MultiHeadAttention(d_model, heads)
    x = torch.randn(1, max(positions), d_model)
    with torch.no_grad():
        caches = {t: kv_cache.prefill(mha, x[:, :t - 1], max_len=t) for t in positions}
        steps = {}
        for t in positions:
            steps["cached", t] = lambda t=t: (caches[t].crop(t - 1),
                                              kv_cache.decode_step(mha, x[:, t - 1:t], caches[t]))
            steps["recomputed", t] = lambda t=t: kv_cache.recompute_step(mha, x[:, :t])
        times = cost.measure_times(steps, repeats=repeats, warmup=1, clock=clock)
    print(f"\none decoding step, d_model={d_model}, {heads} heads, {clock} clock, "
          f"median of {repeats}")
    rows = []
    for t in positions:
        cached, recomputed = times["cached", t], times["recomputed", t]
        flop_ratio = (kv_cache.step_flops(t, d_model, cached=False)
                      // kv_cache.step_flops(t, d_model, cached=True))
        rows.append((t, f"{cached * 1e3:.3f}", f"{recomputed * 1e3:.2f}",
                     f"{recomputed / cached:.0f}", flop_ratio))
    print(cost.format_table(["t", "cached ms", "recomputed ms", "speed-up", "FLOP ratio"], rows))


def kv_head_steps(context, d_model, heads, repeats, clock):
    counts = sorted({1, max(1, heads // 4), heads})
    x = torch.randn(1, 1, d_model)  # the token at position context - 1
    layers = {n: attnlab.MultiHeadAttention(d_model, heads, n_kv_heads=n) for n in counts}
    caches = {}
    for n, layer in layers.items():  # random keys and values: a step's cost does not depend on them
        caches[n] = kv_cache.KVCache.for_layer(layer, x, max_len=context)
        caches[n].append(*torch.randn(2, 1, n, context - 1, layer.d_head))
    steps = {n: lambda n=n: (caches[n].crop(context - 1),
                             kv_cache.decode_step(layers[n], x, caches[n])) for n in counts}
    with torch.no_grad():
        flops = {n: cost.count_flops(step) for n, step in steps.items()}
        peak = {n: cost.peak_memory(step) for n, step in steps.items()}
        times = cost.measure_times(steps, repeats=repeats, warmup=1, clock=clock)
    print(f"\none cached step at position {context}, d_model={d_model}, {heads} query heads, "
          f"{clock} clock, median of {repeats}")
    print(cost.format_table(
        ["KV heads", "cache MiB", "MFLOPs", "step peak KiB", "ms"],
        [(n, f"{caches[n].nbytes / 2**20:.1f}", f"{flops[n] / 1e6:.1f}", peak[n] // 1024,
          f"{times[n] * 1e3:.3f}") for n in counts]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=128,
                        help="keys per block of the online softmax")
    parser.add_argument("--positions", type=int, nargs="+", default=[64, 256, 1024, 4096],
                        help="decoding positions t for the KV-cache comparison")
    parser.add_argument("--d-model", type=int, default=64, help="width of the decoding layer")
    parser.add_argument("--context", type=int, default=8192,
                        help="position of the grouped-query decoding step")
    parser.add_argument("--kv-d-model", type=int, default=512,
                        help="width of the grouped-query layer (8 query heads)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clock", choices=["wall", "thread"], default="thread",
                        help="thread CPU time (default; steady on a shared machine) or wall time")
    args = parser.parse_args(argv)
    if len(args.lengths) < 2:
        parser.error("--lengths needs at least two values to fit a slope")

    attnlab.seed_everything(0)
    attention_forms(args.lengths, args.heads, args.d_head, args.repeats, args.clock,
                    args.block_size)
    decoding_steps(args.positions, args.d_model, 4, args.repeats, args.clock)
    kv_head_steps(args.context, args.kv_d_model, 8, args.repeats, args.clock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
