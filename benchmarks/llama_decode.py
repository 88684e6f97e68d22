"""Benchmark: SmolLM2-135M decoding speed, attnlab's model against a plain PyTorch decoder.

    .venv/bin/python benchmarks/llama_decode.py [--prompt 32] [--steps 32] [--repeats 3]

Greedy decoding from a prompt of `--prompt` tokens, `--steps` new tokens, on one torch thread:
1. `attnlab.core.generation.generate` with its KV caches (notebook 09's `KVCache`, one per layer);
2. the same without caches (every step runs the whole sequence again);
3. a plain decoder written here in Hugging Face's form from the same weights (rotate-half
   rotary on un-permuted q/k rows, `F.scaled_dot_product_attention` with `enable_gqa`, a cache
   grown with `torch.cat`): the baseline, measured in the same run.
Each prints tokens per second (median over `--repeats` runs, thread CPU time) and whether its
tokens equal attnlab's cached run; then the peak memory of the process.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch
from torch.nn import functional as F

from attnlab.core.generation import generate
from attnlab.pretrained import llama


def unpermute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """llama.cpp's q/k row order (rotary on adjacent pairs) -> Hugging Face's (on halves)."""
    d_out, d_in = w.shape
    return w.reshape(n_heads, d_out // n_heads // 2, 2, d_in).transpose(1, 2).reshape(d_out, d_in)


class PlainDecoder:
    """A Llama decoder in plain tensor code, with a concatenating KV cache."""

    def __init__(self, model: llama.Llama):
        c, sd = model.config, model.state_dict()
        self.c, self.hd = c, c.d_model // c.n_heads
        self.layers = [{name: sd[f"blocks.{i}.{name}.weight"] for name in (
            "norm1", "attn.v", "attn.out", "norm2", "ff.gate", "ff.up", "ff.down")}
            for i in range(c.n_layers)]
        for i, layer in enumerate(self.layers):
            layer["attn.q"] = unpermute(sd[f"blocks.{i}.attn.q.weight"], c.n_heads)
            layer["attn.k"] = unpermute(sd[f"blocks.{i}.attn.k.weight"], c.n_kv_heads)
        self.embed, self.norm = sd["embed.weight"], sd["norm.weight"]
        self.inv = c.rotary_base ** -(torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c.norm_eps) * w

    def rope(self, x, positions):  # x (B, H, T, hd)
        angle = positions[:, None].float() * self.inv  # (T, hd/2)
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
        x1, x2 = x[..., :self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    @torch.no_grad()
    def step(self, ids, cache):  # ids (B, T) after len(cache) tokens; cache: list of (k, v)
        B, T = ids.shape
        start = 0 if cache[0] is None else cache[0][0].shape[2]
        positions = torch.arange(start, start + T)
        x = self.embed[ids]
        for i, p in enumerate(self.layers):
            h = self.rms(x, p["norm1"])
            q = (h @ p["attn.q"].T).view(B, T, self.c.n_heads, self.hd).transpose(1, 2)
            k = (h @ p["attn.k"].T).view(B, T, self.c.n_kv_heads, self.hd).transpose(1, 2)
            v = (h @ p["attn.v"].T).view(B, T, self.c.n_kv_heads, self.hd).transpose(1, 2)
            q, k = self.rope(q, positions), self.rope(k, positions)
            if cache[i] is not None:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i] = (k, v)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(B, T, -1) @ p["attn.out"].T
            h = self.rms(x, p["norm2"])
            x = x + (F.silu(h @ p["ff.gate"].T) * (h @ p["ff.up"].T)) @ p["ff.down"].T
        return self.rms(x[:, -1], self.norm) @ self.embed.T  # (B, V)

    def generate(self, ids, steps):
        cache, seq, new = [None] * self.c.n_layers, ids, ids
        for _ in range(steps):
            token = self.step(new, cache).argmax(-1)  # (B,)
            seq, new = torch.cat([seq, token[:, None]], 1), token[:, None]
        return seq


def timed(fn, repeats: int):
    """(median thread-CPU seconds, result) over `repeats` runs after one warm-up."""
    out = fn()
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        out = fn()
        times.append(time.thread_time() - start)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer = llama.load_smollm2()
    text = "The history of the library begins with a single room of books. " * 8
    prompt = torch.tensor([tokenizer.encode(text)[:args.prompt]])  # (1, prompt)
    plain = PlainDecoder(model)
    runs = {"attnlab, KV cache": lambda: generate(model, prompt, args.steps),
            "attnlab, no cache": lambda: generate(model, prompt, args.steps, cache=False),
            "plain PyTorch, cat cache (baseline)": lambda: plain.generate(prompt, args.steps)}
    print(f"SmolLM2-135M, greedy, prompt {args.prompt} tokens, {args.steps} new tokens, one "
          f"thread, median of {args.repeats} (thread CPU time)")
    reference = None
    for name, fn in runs.items():
        seconds, out = timed(fn, args.repeats)
        reference = out if reference is None else reference
        print(f"{name:38} {args.steps / seconds:7.1f} tokens/s   same tokens as the cached run: "
              f"{torch.equal(out, reference)}")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
