# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · What attention costs
#
# Self-attention lets every token read every other directly. What does that cost, and how do
# generating models afford it? Times below are medians of several runs on this thread's CPU
# clock; yours will differ.

# %% [markdown]
# ## What you will learn
#
# - to count attention's operations, predict their growth with the context length T, and
#   measure time and memory;
# - what it buys against a recurrent layer (LSTM): a chain of dependent steps that does not grow
#   with T;
# - to build a KV-cache decoding step, and what it saves;
# - to size a real model's cache, and what fewer key/value heads (grouped-query attention) save;
# - the online softmax: block-by-block attention in memory that grows like T.
#
# Assumes notebooks 01 (softmax(QKᵀ/√d_k)V, heads, `split_heads`/`merge_heads`), 05 (rotary
# positions) and 08 (the causal mask, token-by-token generation).

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.ticker import NullLocator
from torch import nn

import attnlab
from attnlab.core import kv_cache, online_softmax
from attnlab.core.attention import merge_heads
from attnlab.exercises import ex09
from attnlab.lessons import cost
from attnlab.plumbing.report import fmt
from attnlab.views import diagrams
from attnlab.views.plots import show_figure

attnlab.seed_everything(0)


def length_axes(ax, lengths, ylabel, title):
    """Log-log axes with the measured lengths as ticks: a power law T^p is a line of slope p."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(lengths, labels=[str(T) for T in lengths])
    ax.set(xlabel="sequence length T", ylabel=ylabel, title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=10)


# %% [markdown]
# ## 1 · Counting operations: four times the context
#
# A FLOP is one floating-point multiply or add. Over T tokens of width d, self-attention does two
# kinds of matrix product:
#
# - four projections, $Q = XW_Q$, $K = XW_K$, $V = XW_V$ and the output $W_O$: each a
#   (T, d) @ (d, d) product of 2·T·d² FLOPs, 8·T·d² together;
# - the score part, $QK^\top$ and then weights·$V$: 2·T·T·d FLOPs each, 4·T²·d together.
#
# `cost.count_flops` counts the products PyTorch runs. **Predict first:** the layer below has
# d = 64 and reads T = 64 tokens. With a 4× longer context (T = 256), by what factor grow the
# FLOPs of (a) the score part, (b) the projections, (c) the whole layer?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: d = 64, the context grows from T = 64 to T = 256. By what factor grow the
# score FLOPs, the projection FLOPs, the whole layer's FLOPs? (16, 16, 16? 16, 4, 10?)

# %%
flop_guess = ...  # your prediction: [score part, projections, whole layer], three numbers
### BEGIN SOLUTION
flop_guess = [16, 4, 8]
### END SOLUTION

# %%
D_MODEL = 64
mha = attnlab.MultiHeadAttention(D_MODEL, 4)


def counted_flops(T):
    """(score part, projections, whole layer): FLOPs of `mha` on T tokens, counted."""
    x = torch.randn(1, T, D_MODEL)  # (1, T, d)
    layer = cost.count_flops(lambda: mha(x))
    projections = cost.count_flops(lambda: [lin(x) for lin in (mha.q, mha.k, mha.v, mha.out)])
    return layer - projections, projections, layer


with torch.no_grad():
    short, long = counted_flops(64), counted_flops(256)
flop_ratios = [b / a for a, b in zip(short, long)]
print(cost.format_table(["part", "FLOPs, T = 64", "FLOPs, T = 256", "ratio"], [
    (part, f"{a:,}", f"{b:,}", fmt(b / a, 1))
    for part, a, b in zip(["score part", "projections", "whole layer"], short, long)]))

# %% tags=["remove-cell"]
assert [short[0], short[2]] == [4 * 64**2 * D_MODEL, cost.layer_flops("attention", 64, D_MODEL)]
assert flop_ratios == [16, 4, 8]

# %%
ex09.flop_ratios(flop_guess, flop_ratios)

# %% [markdown]
# Score part 16× (T²), projections 4× (T), whole layer 8×: at T = d both parts are of the same
# order. Past d the T² part takes over and the ratio climbs towards 16 (from the formula,
# `cost.layer_flops`):

# %%
layer_grid = [16, 64, 256, 1024, 4096]
grid_ratios = [cost.layer_flops("attention", 4 * T, D_MODEL)
               / cost.layer_flops("attention", T, D_MODEL) for T in layer_grid]
print("T / d:                 " + "  ".join(f"{T / D_MODEL:>5g}" for T in layer_grid))
print("FLOPs(4T) / FLOPs(T):  " + "  ".join(f"{fmt(r, 1):>5}" for r in grid_ratios))

# %% tags=["remove-cell"]
assert all(4 < r < 16 for r in grid_ratios) and all(np.diff(grid_ratios) > 0)

# %% [markdown]
# ## 2 · Time and memory against T
#
# `attnlab.scaled_dot_product_attention` follows the equation, storing a T×T matrix of scores,
# then one of weights. PyTorch's `F.scaled_dot_product_attention` is a *fused kernel*: one
# compiled function computing the same output without handing back intermediate results.
# Input: 2 heads of width 64. `cost.peak_memory`: the most bytes held at once during a call.

# %% slideshow={"slide_type": "skip"}
SEQ_LENS = [256, 512, 1024, 2048]
HEADS, D_HEAD = 2, 64
qkv = {T: [torch.randn(1, HEADS, T, D_HEAD) for _ in range(3)] for T in SEQ_LENS}  # (1, H, T, 64)
IMPLS = {"written out": attnlab.scaled_dot_product_attention,
         "fused": F.scaled_dot_product_attention}

# %% [markdown] slideshow={"slide_type": "subslide"}
# Time, and the fused kernel's memory (machine-dependent). The *log-log slope* is the exponent p
# in time ∝ T^p.

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    times = cost.measure_times({(name, T): (lambda f=f, T=T: f(*qkv[T]))
                                for name, f in IMPLS.items() for T in SEQ_LENS},
                               repeats=5, warmup=1, clock="thread")
    fused_mem = np.array([cost.peak_memory(lambda T=T: F.scaled_dot_product_attention(*qkv[T]))
                          for T in SEQ_LENS])
t_ours, t_fused = (np.array([times[name, T] for T in SEQ_LENS]) for name in IMPLS)
print(cost.format_table(["T", "written out ms", "fused ms", "fused peak MiB"], [
    (T, f"{a * 1e3:.2f}", f"{b * 1e3:.2f}", f"{m / 2**20:.2f}")
    for T, a, b, m in zip(SEQ_LENS, t_ours, t_fused, fused_mem)]))
slopes = [cost.loglog_slope(SEQ_LENS, t) for t in (t_ours, t_fused, fused_mem)]
print("log-log slopes: time written out {:.2f}, time fused {:.2f}, "
      "fused memory {:.2f}".format(*slopes))

# %% tags=["remove-cell"]
assert all(1.4 < s < 3.5 for s in slopes[:2]) and slopes[2] < 1.5, slopes
assert fused_mem[-1] < 4 * HEADS * SEQ_LENS[-1] ** 2, "the fused kernel must not hold a T×T matrix"

# %% [markdown]
# The written-out memory, the same on every machine, against one (H, T, T) float32 matrix,
# 4 bytes · H · T²:

# %%
with torch.no_grad():
    ours_mem = np.array([cost.peak_memory(lambda T=T: attnlab.scaled_dot_product_attention(*qkv[T]))
                         for T in SEQ_LENS])
    same = all(torch.allclose(attnlab.scaled_dot_product_attention(*qkv[T])[0],
                              F.scaled_dot_product_attention(*qkv[T]), atol=1e-5) for T in SEQ_LENS)
tt_bytes = 4 * HEADS * np.array(SEQ_LENS) ** 2  # one (H, T, T) float32 matrix
print(cost.format_table(["T", "T×T matrix MiB", "written-out peak MiB", "peak / T×T matrix"], [
    (T, fmt(c / 2**20, 2), fmt(m / 2**20, 2), fmt(m / c, 2))
    for T, c, m in zip(SEQ_LENS, tt_bytes, ours_mem)]))
mem_slope = cost.loglog_slope(SEQ_LENS, ours_mem)
print(f"log-log slope of the written-out peak: {fmt(mem_slope, 2)}; "
      f"same output as the fused kernel (to 1e-5): {same}")

# %% tags=["remove-cell"]
assert same and 1.9 < mem_slope < 2.1 and (ours_mem > 2 * tt_bytes).all()
assert fmt(ours_mem[-1] / 2**20, 2) == "65.00"
assert [fmt(r, 2) for r in (ours_mem / tt_bytes)[[-1, 0]]] == ["2.03", "2.25"]
assert all(np.diff(ours_mem / tt_bytes) < 0)  # 2.25 at the shortest, 2.03 at the longest
assert (fused_mem < tt_bytes).all()

# %% tags=["hide-input", "nbval-ignore-output"]
fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
ax_t.plot(SEQ_LENS, t_ours * 1e3, "o-", label="written out")
ax_t.plot(SEQ_LENS, t_fused * 1e3, "s-", label="fused")
ax_t.plot(SEQ_LENS, t_ours[-1] * 1e3 * (np.array(SEQ_LENS) / SEQ_LENS[-1]) ** 2, "k:", label="∝ T²")
length_axes(ax_t, SEQ_LENS, "forward time (ms)", "time")
ax_m.plot(SEQ_LENS, ours_mem / 2**20, "o-", label="written out")
ax_m.plot(SEQ_LENS, fused_mem / 2**20, "s-", label="fused")
ax_m.plot(SEQ_LENS, tt_bytes / 2**20, "k:", label="one T×T matrix")
length_axes(ax_m, SEQ_LENS, "peak memory (MiB)", "peak memory")
plt.tight_layout()
show_figure()

# %% [markdown]
# Both do the same T² operations; their times grow much faster than T (log-log slopes above 1.4,
# bent by this machine's caches and fixed costs). The written-out peak is 2.03 to 2.25 T×T
# matrices (scores and weights coexist), 65.00 MiB at T = 2048. The fused kernel never stores
# one: its peak stays below one.

# %% [markdown]
# ## 3 · Attention against recurrence
#
# A recurrent layer reads tokens one at a time, carrying a state from step to step: an LSTM (long
# short-term memory) computes its memory $c_t$ from $c_{t-1}$. Its operations grow only like T,
# but step t needs step t−1. `cost.dependency_depth` finds the longest chain of operations that
# must run in sequence, from the first token to the last output, in the autograd graph (PyTorch's
# record of operations, kept for gradients). Parallel hardware cannot run it side by side.

# %%
LAYER_LENS = [64, 256, 1024]
lstm = nn.LSTM(D_MODEL, D_MODEL, batch_first=True)
chain = {(kind, T): cost.dependency_depth(layer, T, D_MODEL)
         for kind, layer in (("lstm", lstm), ("attention", mha)) for T in LAYER_LENS}
mflops = {(kind, T): cost.layer_flops(kind, T, D_MODEL) / 1e6 for kind, T in chain}
print(cost.format_table(["T", "LSTM chain", "attention chain", "LSTM MFLOPs", "attention MFLOPs"], [
    (T, chain["lstm", T], chain["attention", T], fmt(mflops["lstm", T], 1),
     fmt(mflops["attention", T], 1)) for T in LAYER_LENS]))

# %% tags=["remove-cell"]
assert [chain["lstm", T] for T in LAYER_LENS] == [8 * T + 8 for T in LAYER_LENS]
assert {chain["attention", T] for T in LAYER_LENS} == {25}
assert mflops["attention", 64] < mflops["lstm", 64] and mflops["attention", 256] > mflops["lstm", 256]
assert [fmt(mflops[k, 1024], 0) for k in ("attention", "lstm")] == ["302", "67"]

# %% [markdown]
# The LSTM's chain grows by 8 operations per token (8200 at T = 1024); attention's is 25 at every
# length. From T = 256 on, attention does more operations (302 against 67 MFLOPs at T = 1024),
# none waiting for the previous token.

# %% [markdown]
# ## 4 · Generating text: the KV (key-value) cache
#
# When a decoder (notebook 08) generates a token, the causal mask leaves earlier tokens' keys and
# values unchanged, yet without a cache the layer recomputes the whole prefix
# (`kv_cache.recompute_step`). A *KV cache* keeps them: a step handles only the new token.
#
# In `MultiHeadAttention(d_model, n_heads, n_kv_heads=...)` keys and values can have fewer heads
# than queries: each serves a group of G = n_heads / n_kv_heads query heads, in order (query head
# h reads key/value head h // G). n_kv_heads = n_heads is the classic layer, 1 is *multi-query*
# attention, anything between *grouped-query* attention.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Your turn:** write `my_decode_step(attn, x_t, cache)`. `x_t` (B, 1, d_model) is the new
# token, `cache` the keys and values of the t − 1 tokens before it, (B, n_kv_heads, t − 1, D).
# Return x_t's output, (B, 1, d_model), leaving its key and value in the cache:
#
# - `attn.project(x_t, positions=torch.tensor([len(cache)]))` → q (B, n_heads, 1, D), k and v
#   (B, n_kv_heads, 1, D); rotary layers (notebook 05) rotate the new token where it sits,
#   at len(cache);
# - `cache.append(k, v)` stores them and returns every key and value so far, (B, n_kv_heads, t, D);
# - `attnlab.scaled_dot_product_attention(q, keys, values)` → (output, weights) once each query
#   head has its key/value head; `merge_heads` (B, H, 1, D) → (B, 1, H·D); `attn.out`.
#
# <details><summary>Hint 1</summary>
#
# The new token attends to itself too, so its key and value must be in the cache before its
# query looks. Only n_kv_heads heads are stored: the query heads share them when attending.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Project; append; give each query head its group's key/value head by repeating each stored
# head G times in place along the head axis (`repeat_interleave`); attend; merge the heads;
# apply the output projection.
# </details>

# %% slideshow={"slide_type": "subslide"}
def my_decode_step(attn, x_t, cache):
    ### BEGIN SOLUTION
    q, k, v = attn.project(x_t, positions=torch.tensor([len(cache)]))  # (B, H, 1, D), (B, H_kv, 1, D)
    keys, values = cache.append(k, v)  # (B, H_kv, t, D): the past and this token
    group = attn.n_heads // attn.n_kv_heads  # query heads per key/value head
    keys = keys.repeat_interleave(group, dim=1)  # (B, H, t, D)   head h reads head h // group
    values = values.repeat_interleave(group, dim=1)  # (B, H, t, D)
    heads, _ = attnlab.scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D)
    return attn.out(merge_heads(heads))  # (B, 1, d_model)
    ### END SOLUTION


my_decode_step = ex09.decode_step(my_decode_step)  # yours if it is right, attnlab's otherwise

# %% [markdown]
# Your step (or attnlab's) on 48 tokens one by one, in layers of 8 query heads with 8, 2 and 1
# (rotary) key/value heads:

# %%
T_DEC = 48
x_dec = torch.randn(1, T_DEC, D_MODEL)  # (1, T, d)
decoders = {8: attnlab.MultiHeadAttention(D_MODEL, 8),
            2: attnlab.MultiHeadAttention(D_MODEL, 8, n_kv_heads=2),
            1: attnlab.MultiHeadAttention(D_MODEL, 8, n_kv_heads=1, rotary=True)}
agree, held = {}, {}
for n_kv, layer in decoders.items():
    cache = kv_cache.KVCache.for_layer(layer, x_dec, max_len=T_DEC)
    with torch.no_grad():
        cached = torch.cat([my_decode_step(layer, x_dec[:, t:t + 1], cache)
                            for t in range(T_DEC)], 1)  # (1, T, d)
        recomputed = torch.cat([kv_cache.recompute_step(layer, x_dec[:, :t + 1])
                                for t in range(T_DEC)], 1)  # (1, T, d)
    agree[n_kv] = torch.allclose(cached, recomputed, atol=1e-5, rtol=0)
    held[n_kv] = cache.nbytes
    print(f"n_kv_heads = {n_kv}: cached = recomputed at all {T_DEC} steps (to 1e-5): "
          f"{agree[n_kv]}; the cache holds {len(cache)} positions, {cache.nbytes / 1024:g} KiB")

# %% tags=["remove-cell"]
assert all(agree.values())
assert held == {n: 2 * T_DEC * n * (D_MODEL // 8) * 4 for n in decoders}

# %% [markdown]
# Cached = recomputed at every step, all three layers; 1 key/value head makes the cache 8 times
# smaller than the classic layer's.
#
# **Work per step.** For section 1's layer (d = 64) at position t (t tokens, the new one
# included), a cached step, four one-token projections and one query against t keys and values,
# costs 8·d² + 4·t·d FLOPs; a recomputed step, the whole layer over t tokens, 8·t·d² + 4·t²·d.

# %%
POSITIONS = [64, 128, 256, 512, 1024]
x_long = torch.randn(1, POSITIONS[-1], D_MODEL)  # (1, 1024, d)
with torch.no_grad():
    caches = {t: kv_cache.prefill(mha, x_long[:, :t - 1], max_len=t) for t in POSITIONS}
steps = {}
for t in POSITIONS:  # crop(t - 1) forgets the previous timing call's token
    steps["cached", t] = lambda t=t: (caches[t].crop(t - 1),
                                      kv_cache.decode_step(mha, x_long[:, t - 1:t], caches[t]))
    steps["recomputed", t] = lambda t=t: kv_cache.recompute_step(mha, x_long[:, :t])
with torch.no_grad():
    flops_per_step = {key: cost.count_flops(fn) for key, fn in steps.items()}
cached_f, recomputed_f = ([flops_per_step[kind, t] for t in POSITIONS]
                          for kind in ("cached", "recomputed"))
print(cost.format_table(["t", "cached kFLOPs", "recomputed MFLOPs", "recomputed / cached"], [
    (t, fmt(a / 1e3, 1), fmt(b / 1e6, 1), b // a)
    for t, a, b in zip(POSITIONS, cached_f, recomputed_f)]))

# %% tags=["remove-cell"]
assert all(n == kv_cache.step_flops(t, D_MODEL, cached=kind == "cached")
           for (kind, t), n in flops_per_step.items())
assert [b / a for a, b in zip(cached_f, recomputed_f)] == POSITIONS

# %% [markdown]
# Recomputing costs exactly t times the cached FLOPs, 1024× at t = 1024:
# 8·t·d² + 4·t²·d is t · (8·d² + 4·t·d). Now in time:

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    step_times = cost.measure_times(steps, repeats=5, warmup=1, clock="thread")
t_cached, t_recomputed = (np.array([step_times[kind, t] for t in POSITIONS])
                          for kind in ("cached", "recomputed"))
speedup = t_recomputed / t_cached
print(cost.format_table(["t", "cached ms", "recomputed ms", "speed-up"], [
    (t, f"{a * 1e3:.3f}", f"{b * 1e3:.2f}", f"{s:.0f}×")
    for t, a, b, s in zip(POSITIONS, t_cached, t_recomputed, speedup)]))
slope_cached = cost.loglog_slope(POSITIONS, t_cached)
slope_recomputed = cost.loglog_slope(POSITIONS[2:], t_recomputed[2:])
print(f"log-log slope of time per step: cached {slope_cached:.2f}, "
      f"recomputed {slope_recomputed:.2f} (t >= 256)")

# %% tags=["remove-cell"]
assert slope_cached < 0.6 and 1.3 < slope_recomputed < 3.0 and 20 < speedup[-1] < 1024, speedup
assert fmt(cached_f[-1] / cached_f[0], 0) == "6"  # the cached step's FLOPs, t = 64 to 1024

# %% tags=["hide-input", "nbval-ignore-output"]
fig, (ax_f, ax_t) = plt.subplots(1, 2, figsize=(10, 4))
for kind, style in (("recomputed", "s-"), ("cached", "o-")):
    ax_f.plot(POSITIONS, [flops_per_step[kind, t] for t in POSITIONS], style, label=kind)
ax_t.plot(POSITIONS, t_recomputed * 1e3, "s-", label="recomputed")
ax_t.plot(POSITIONS, t_cached * 1e3, "o-", label="cached")
length_axes(ax_f, POSITIONS, "FLOPs of one step", "operations per step (counted)")
length_axes(ax_t, POSITIONS, "ms per step", "time per step (this machine)")
for ax in (ax_f, ax_t):
    ax.set_xlabel("position t")
plt.tight_layout()
show_figure()

# %% [markdown]
# Recomputed, a step's time grows steeply with t (log-log slope above 1.3); cached, it hardly
# grows (slope below 0.6) though its FLOPs grow 6× from t = 64 to 1024: one token is too little
# work to keep the CPU busy, and fixed costs dominate. The speed-up at t = 1024 (more than 20×
# here) stays below the 1024× FLOP ratio. The price: memory that grows with every token.

# %% [markdown]
# ## 5 · The cache in real models: fewer key/value heads
#
# A real model's configuration gives its layers, width d_model, query heads and key/value heads;
# generation uses 16-bit (2-byte) numbers.
#
# **Your turn:** write `my_bytes_per_token(n_layers, d_model, n_heads, n_kv_heads,
# bytes_per_number)`: the whole model's KV cache bytes per token of context. Each argument is a
# tensor of whole numbers, one entry per configuration (`//` keeps them whole).
#
# <details><summary>Hint 1</summary>
#
# Count what one token leaves behind in one layer, then in all the layers; every factor of the
# configuration that sizes the cache appears once.
# </details>
#
# <details><summary>Hint 2</summary>
#
# In one layer a token leaves a key and a value for each key/value head, each of
# d_model / n_heads numbers. Multiply by the layers, then by the bytes of one number.
# </details>

# %%
def my_bytes_per_token(n_layers, d_model, n_heads, n_kv_heads, bytes_per_number):
    ### BEGIN SOLUTION
    d_head = d_model // n_heads  # numbers per head
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_number  # a key and a value (2)
    ### END SOLUTION


my_bytes_per_token = ex09.bytes_per_token(my_bytes_per_token)  # yours if right, else attnlab's

# %% [markdown]
# One decoding step with grouped key/value heads, drawn:

# %% tags=["hide-input"]
diagrams.show("kv_cache_gqa")

# %% [markdown]
# Published configurations (the models' `config.json`), 16-bit. Mistral 7B v0.1 has a *sliding
# window*: each token attends only to the 4096 before it, so its cache stops at 4096 tokens.

# %%
MODELS = {  # name: (layers, d_model, query heads, key/value heads, sliding window or None)
    "Llama 2 7B": (32, 4096, 32, 32, None),
    "Mistral 7B v0.1": (32, 4096, 32, 8, 4096),
    "Llama 3 8B": (32, 4096, 32, 8, None),
    "Falcon 7B": (32, 4544, 71, 1, None),
    "Llama 2 70B": (80, 8192, 64, 8, None),
}
columns = torch.tensor([spec[:4] for spec in MODELS.values()]).T  # (4, models)
per_token = my_bytes_per_token(*columns, torch.full_like(columns[0], 2))  # (models,) bytes
CONTEXTS = [4096, 32768]
cache_size = {(name, c): int(b) * min(c, spec[4] or c)  # a window keeps its last tokens only
              for (name, spec), b in zip(MODELS.items(), per_token) for c in CONTEXTS}
print(cost.format_table(["model", "KV heads / query heads", "KiB per token", "GiB at 4k",
                         "GiB at 32k"], [
    (name, f"{spec[3]} / {spec[2]}", int(b) // 1024,
     *(fmt(cache_size[name, c] / 2**30, 2) for c in CONTEXTS))
    for (name, spec), b in zip(MODELS.items(), per_token)]))

# %% tags=["remove-cell"]
assert per_token.tolist() == [kv_cache.bytes_per_token(n, kv, d // h) for n, d, h, kv, _ in
                              MODELS.values()]
assert [int(b) // 1024 for b in per_token] == [512, 128, 128, 8, 320]
assert (per_token % 1024 == 0).all()
assert [cache_size["Llama 2 7B", c] / 2**30 for c in CONTEXTS] == [2, 16]
assert [cache_size["Llama 3 8B", c] / 2**30 for c in CONTEXTS] == [0.5, 4]
assert [cache_size["Mistral 7B v0.1", c] / 2**30 for c in CONTEXTS] == [0.5, 0.5]
assert cache_size["Llama 2 70B", 32768] / 2**30 == 10

# %% [markdown]
# The formula against what `KVCache` allocates for 16 tokens (one cache per layer, 16-bit):

# %%
SMALL = 16
for name, (n_layers, d_model, n_heads, n_kv, _) in MODELS.items():
    stack = [kv_cache.KVCache(1, n_kv, d_model // n_heads, SMALL, dtype=torch.float16)
             for _ in range(n_layers)]
    allocated = sum(c.nbytes for c in stack)
    print(f"{name:<16} {n_layers} caches of (1, {n_kv}, {SMALL}, {d_model // n_heads}) x 2: "
          f"{allocated // 1024:>5} KiB = {SMALL} × bytes per token: "
          f"{allocated == SMALL * int(per_token[list(MODELS).index(name)])}")
    del stack

# %% tags=["remove-cell"]
for name, b in zip(MODELS, per_token):
    n_layers, d_model, n_heads, n_kv, _ = MODELS[name]
    stack = [kv_cache.KVCache(1, n_kv, d_model // n_heads, SMALL, dtype=torch.float16)
             for _ in range(n_layers)]
    assert sum(c.nbytes for c in stack) == SMALL * int(b)

# %% [markdown]
# With 32 key/value heads a 7B model's cache holds 512 KiB per token: 2 GiB at 4k tokens and
# 16 GiB at 32k, for one sequence. With 8, a quarter (4 GiB at 32k); Mistral's sliding window caps
# it at 0.5 GiB. Falcon 7B's single key/value head needs 8 KiB per token.

# %% [markdown]
# ## 6 · The online softmax: how a fused kernel avoids the T×T matrix
#
# $\text{softmax}(s)_j = e^{s_j - m} / \sum_i e^{s_i - m}$, with $m$ the row's largest score
# (subtracted so exp cannot overflow). Block by block over the keys, keep for each query a running
# max $m$, total $\sum e^{s - m}$ and $\text{acc} = \sum e^{s - m} v$. When a block brings a
# larger max $m'$, multiply total and acc (measured against the old $m$) by $e^{m - m'}$, then add
# the block's terms. After the last block, acc / total is the attention output: the *online
# softmax* (Milakov and Gimelshein 2018), the core of FlashAttention (Dao et al. 2022).
#
# **Your turn:** write `online_update(m, total, acc, scores, v_block)`: fold one block into the
# state, returning the new `(m, total, acc)`. Shapes: m and total (..., T_q, 1), acc
# (..., T_q, d_v), scores (..., T_q, block), v_block (..., block, d_v).
#
# <details><summary>Hint 1</summary>
#
# Three things change: the max, the total and acc. The old total and acc were sums of terms
# measured against the old max; bring them to the new one before adding the block's own terms.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The new max is the element-wise larger of the old max and the block's largest score (per
# query row, kept as a column). exp(old max − new max) rescales the old total and acc; the
# block's terms are exp(scores − new max), summed along the keys for the total and multiplied
# by v_block for acc.
# </details>

# %%
def online_update(m, total, acc, scores, v_block):
    ### BEGIN SOLUTION
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (..., T_q, 1)   running max
    rescale = torch.exp(m - m_new)  # (..., T_q, 1)   the old terms were relative to the old max
    p = torch.exp(scores - m_new)  # (..., T_q, block)
    return m_new, total * rescale + p.sum(dim=-1, keepdim=True), acc * rescale + p @ v_block
    ### END SOLUTION


online_update = ex09.online_update(online_update)  # yours if it is right, attnlab's otherwise

# %% [markdown]
# `online_update`, drawn for one query and blocks (tiles) of 4 keys:

# %% tags=["hide-input"]
diagrams.show("online_softmax_tiles")

# %% [markdown]
# Two blocks of 8 keys, with the `online_update` the check returned:

# %%
q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))  # 16 queries and keys, d = 8
state = online_softmax.empty_state(q, v)  # m = -inf, total = 0, acc = 0
for block in (slice(0, 8), slice(8, 16)):
    scores = q @ k[..., block, :].transpose(-2, -1) / math.sqrt(8)  # (1, 2, 16, 8): one block
    state = online_update(*state, scores, v[..., block, :])
m, total, acc = state
two_blocks = acc / total  # (1, 2, 16, 8)
full, _ = attnlab.scaled_dot_product_attention(q, k, v)
same = torch.allclose(two_blocks, full, atol=1e-6, rtol=0)
print(f"two blocks = full attention (to 1e-6): {same}")

# %% tags=["remove-cell"]
assert same

# %% [markdown]
# `online_softmax.blockwise_attention` runs the update over blocks of 128 keys. Its largest
# difference from written-out attention on section 2's inputs, in float64 and float32:

# %%
def largest_difference(dtype):
    """max |block by block - written out| over every T of section 2, computed in `dtype`."""
    with torch.no_grad():
        inputs = [[t.to(dtype) for t in qkv[T]] for T in SEQ_LENS]
        blocks = [online_softmax.blockwise_attention(*x) for x in inputs]  # (1, H, T, 64) each
        written = [attnlab.scaled_dot_product_attention(*x)[0] for x in inputs]
        return max((b - w).abs().max().item() for b, w in zip(blocks, written))


err64, err32 = largest_difference(torch.float64), largest_difference(torch.float32)
print(f"largest |block by block - written out|: float64 below 1e-12: {err64 < 1e-12}, "
      f"float32 below 1e-6: {err32 < 1e-6}")

# %% tags=["remove-cell"]
assert err64 < 1e-12 and err32 < 1e-6

# %% [markdown]
# And the peak memory:

# %%
with torch.no_grad():
    online_mem = np.array([cost.peak_memory(lambda T=T: online_softmax.blockwise_attention(*qkv[T]))
                           for T in SEQ_LENS])
print(cost.format_table(["T", "written-out peak MiB", "block-by-block peak MiB", "ratio"], [
    (T, fmt(a / 2**20, 2), fmt(b / 2**20, 2), fmt(a / b, 1))
    for T, a, b in zip(SEQ_LENS, ours_mem, online_mem)]))
online_slope = cost.loglog_slope(SEQ_LENS, online_mem)
print(f"log-log slope of the block-by-block peak: {fmt(online_slope, 2)}")

# %% tags=["remove-cell"]
assert 0.9 < online_slope < 1.1 and online_mem[-1] * 7 < ours_mem[-1]
assert fmt(online_mem[-1] / 2**20, 2) == "9.08" and fmt(ours_mem[-1] / online_mem[-1], 1) == "7.2"
gap = ours_mem / online_mem
assert all(gap[1:] / gap[:-1] > 1.8) and 0.9 < gap[0] < 1.1

# %% [markdown]
# Block by block matches within 1e-6 in float32 and 1e-12 in float64: only rounding separates
# them. Its peak memory grows like T (slope 1.00), not T²: one block of 128 scores per query
# exists at a time. The peaks are about equal at T = 256; at T = 2048 it needs 7.2× less, the
# gap about doubling with each doubling of T. This is how section 2's fused kernel stays below
# one T×T matrix.

# %% [markdown]
# ## What we learned
#
# - 4× the context: score FLOPs ×16, projections ×4, whole layer ×8 at T = d = 64; T² dominates
#   only once T is well above d.
# - Written-out attention peaks at two T×T matrices (65.00 MiB at T = 2048), the fused kernel
#   below one.
# - An LSTM's dependency chain grows with T (8200 at T = 1024); attention's stays 25.
# - A KV cache step matches recomputing with t times fewer FLOPs at position t (1024× at
#   t = 1024), but its memory grows with every token.
# - A 7B model's cache: 512 KiB per token with 32 key/value heads, 128 KiB with 8 (16 against
#   4 GiB at 32k tokens).
# - The online softmax: the same attention block by block, peak memory growing like T (9.08 MiB
#   at T = 2048); the idea inside fused kernels.

# %% [markdown]
# ## Going further
#
# Optional: nothing on the main line needs these two studies. The first follows the gradient
# from the last output back to the first token through untrained LSTMs and attention; the
# second measures one decoding step with 8, 2 and 1 key/value heads.

# %% [markdown]
# ### The gradient over a distance
#
# To learn that the first token matters for the last output, training needs the gradient
# ∂y_T/∂x_1: how much the last output moves when the first token does. Through an LSTM it is a
# product of one factor per step; through attention the last output reads the first token
# directly. `cost.first_token_gradient` gives its size for each distance (median of 16 random
# sequences, d = 32, float64), **on untrained layers**: what a layer offers training at its
# start, not what a trained one does. An LSTM's memory is
# $c_t = f_t \odot c_{t-1} + i_t \odot g_t$, where the *forget gate* $f_t$ (each entry between
# 0 and 1) sets how much of the old memory survives the step. PyTorch starts every LSTM bias
# near 0, so its forget gates start near sigmoid(0) = 0.5; a common initialisation sets the
# forget-gate bias to 1 (Gers et al. 2000, Jozefowicz et al. 2015); we also try 3. Random first
# weights are one draw, so we make three (seeds 0, 1 and 2: other weights, other sequences);
# the table shows seed 0's.

# %% slideshow={"slide_type": "subslide"}
DISTANCES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
LSTMS = ["LSTM default", "LSTM bias 1", "LSTM bias 3"]
DRAWS = (0, 1, 2)


def untrained_gradients(seed):
    """{layer: gradient size at each distance} for one draw of the four untrained layers:
    an LSTM, the same LSTM with forget bias 1 and 3 (so only the bias differs), attention."""
    torch.manual_seed(attnlab.seed_of(seed))
    lstm32 = nn.LSTM(32, 32, batch_first=True)
    layers = {"LSTM default": lstm32, "LSTM bias 1": cost.with_forget_bias(lstm32, 1.0),
              "LSTM bias 3": cost.with_forget_bias(lstm32, 3.0),
              "attention": attnlab.MultiHeadAttention(32, 4)}
    return {name: cost.first_token_gradient(layer, DISTANCES.tolist(), 32,
                                            seed=attnlab.seed_of(seed))
            for name, layer in layers.items()}


draws = {seed: untrained_gradients(seed) for seed in DRAWS}
grads = draws[0]  # the table and the plot show seed 0's draw
shown = [0, 4, 6, 8]  # distances 1, 16, 64, 256
print(cost.format_table(["distance", *grads], [
    (DISTANCES[i], *(cost.sci(g[i]) for g in grads.values())) for i in shown]))

# %% [markdown]
# On log axes an exponential decay is a straight line: the fitted slope gives the LSTM's factor
# per step; attention's log-log slope gives the power of the distance. All three draws, and
# each layer's gradient at distance 256:

# %%
far = DISTANCES >= 8  # fit where the decay has settled: log g ≈ a + distance · log(factor)


def factor_per_step(g):
    """The factor by which `g` shrinks per step: exp of the fitted slope of log g (distance >= 8)."""
    return float(np.exp(np.polyfit(DISTANCES[far], np.log(g[far]), 1)[0]))


per_step = {seed: {name: factor_per_step(g[name]) for name in LSTMS} for seed, g in draws.items()}
attn_slope = {seed: cost.loglog_slope(DISTANCES[far], g["attention"][far])
              for seed, g in draws.items()}
at_256 = {seed: {name: v[-1] for name, v in g.items()} for seed, g in draws.items()}
print(cost.format_table(
    ["seed", "factor: default", "bias 1", "bias 3", "attention slope",
     "at 256: default", "bias 3", "attention"],
    [(seed, *(fmt(per_step[seed][n], 4) for n in LSTMS), fmt(attn_slope[seed], 2),
      *(cost.sci(at_256[seed][n]) for n in ("LSTM default", "LSTM bias 3", "attention")))
     for seed in DRAWS]))
print("forget gate at the start, sigmoid(bias): "
      + ", ".join(f"bias {b} -> {fmt(1 / (1 + math.exp(-b)), 3)}" for b in (1, 3)))

# %% tags=["remove-cell"]
# Bounds with margin: 18 draws (series seeds 0-5) gave factors 0.59-0.64, 0.79-0.83 and
# 0.978-0.994, attention slopes -0.93 to -1.00, bias 3 / attention at 256 from 0.16 to 17.
for seed in DRAWS:
    f, g = per_step[seed], at_256[seed]
    assert 0.55 < f["LSTM default"] < 0.68 and 0.75 < f["LSTM bias 1"] < 0.87, (seed, f)
    assert 0.96 < f["LSTM bias 3"] < 1, (seed, f)  # close to 1
    assert -1.3 < attn_slope[seed] < -0.7, attn_slope  # about 1 / distance
    assert g["LSTM default"] < 1e-45 and g["attention"] > 1e40 * g["LSTM default"], g
    assert 1e-2 < g["LSTM bias 3"] / g["attention"] < 1e2, g  # the same order

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(8, 4))
for (name, values), style in zip(grads.items(), ["o-", "o--", "o:", "s-"]):
    ax.semilogy(DISTANCES, values, style, label=name.replace("bias", "forget bias"))
ax.set(xlabel="distance from the first token to the last output", ylabel="‖∂y_T / ∂x_1‖",
       title="gradient that reaches the first token (untrained layers)")
ax.legend(fontsize=10)
ax.grid(True, which="both", alpha=0.3)
show_figure()

# %% [markdown]
# In all three draws of these untrained layers, at PyTorch's default initialisation, the LSTM's
# gradient shrinks by a factor of about 0.6 per step: at distance 256 it is below 10⁻⁴⁵, more
# than 40 orders of magnitude below attention's. With the forget-gate bias at 1 the factor is
# about 0.8; at 3 it is close to 1 (above 0.96), and at distance 256 its gradient is of the same
# order as attention's (within a factor of 100). Attention's gradient shrinks too (the last
# token spreads its weight over all the tokens), but as a power of the distance, about
# 1/distance (slope near −1), not by a factor per step. What training does to either was not
# measured here.

# %% [markdown]
# ### What fewer key/value heads save in a step
#
# Section 5 counted the cache's bytes; here one decoding step at position 8192 of a layer
# with d_model = 512 and 8 query heads, with 1, 2 (n/4) and 8 key/value heads. The cache is
# filled with random keys and values (what they hold changes neither the work nor the memory).
# First what is exact on every machine: the cache's size, the step's FLOPs and the memory the
# step itself allocates on top of the cache.

# %%
D_BIG, H_BIG, CONTEXT = 512, 8, 8192
KV_COUNTS = [1, H_BIG // 4, H_BIG]
x_new = torch.randn(1, 1, D_BIG)  # (1, 1, d): the token at position CONTEXT - 1
big = {n: attnlab.MultiHeadAttention(D_BIG, H_BIG, n_kv_heads=n) for n in KV_COUNTS}
big_caches = {}
for n, layer in big.items():
    big_caches[n] = kv_cache.KVCache.for_layer(layer, x_new, max_len=CONTEXT)
    big_caches[n].append(*torch.randn(2, 1, n, CONTEXT - 1, layer.d_head))  # (1, n, 8191, D) x 2
big_steps = {n: lambda n=n: (big_caches[n].crop(CONTEXT - 1),
                             kv_cache.decode_step(big[n], x_new, big_caches[n])) for n in KV_COUNTS}
with torch.no_grad():
    big_flops = {n: cost.count_flops(step) for n, step in big_steps.items()}
    big_peak = {n: cost.peak_memory(step) for n, step in big_steps.items()}
print(cost.format_table(["KV heads", "cache MiB", "step MFLOPs", "step's own peak KiB"], [
    (n, big_caches[n].nbytes // 2**20, fmt(big_flops[n] / 1e6, 1), big_peak[n] // 1024)
    for n in KV_COUNTS]))

# %% tags=["remove-cell"]
assert [big_caches[n].nbytes // 2**20 for n in KV_COUNTS] == [4, 8, 32]
assert max(big_flops.values()) < 1.1 * min(big_flops.values())
assert max(big_peak.values()) < 2**20 and max(big_peak.values()) < 1.1 * min(big_peak.values())
assert fmt(big_flops[H_BIG] / 1e6, 1) == "18.9" and fmt(big_caches[H_BIG].nbytes / 4e6, 1) == "8.4"

# %% [markdown]
# The cache shrinks with the key/value heads, 32 MiB → 8 → 4; the FLOPs hardly change (every
# query head still scores all 8192 keys), and the step's own memory stays under 1 MiB for all
# three, far less than a copy of the cache: the query heads of a group read their shared
# key/value head where it is. Now the time of a step:

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    big_times = cost.measure_times(big_steps, repeats=7, warmup=1, clock="thread")
for n in KV_COUNTS:
    print(f"{n} KV heads: {big_times[n] * 1e3:.2f} ms per step "
          f"({big_times[n] / big_times[H_BIG]:.2f} × the time with {H_BIG})")

# %% tags=["remove-cell"]
assert big_times[H_BIG] > 1.3 * big_times[1] and big_times[H_BIG] > big_times[H_BIG // 4], big_times

# %% [markdown]
# The FLOPs were the same, the times were not: the step with 8 key/value heads took the longest,
# over 1.3 times as long as with 1. What differed is the cache's size, and each step reads all
# of it. A decoding step does little arithmetic per number it reads (18.9 MFLOPs for the
# 8.4 million numbers of the 8-head cache, about 2 each), so reading the cache can take time of
# its own. Fewer key/value heads mean fewer bytes per token, in memory and in every step.
